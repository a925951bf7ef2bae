"""The framing attack on twins (issue 53; DESIGN.md: "A draw is only as good as the proof that
nobody chose it"): a data owner makes twins of passages that a model never saw, publishes for each
passage the version a model prefers instead of the drawn one, and rewrites the folder so that every
sha256 and the commitment match. An audit that rests on such a "draw" says "trained on" about a
model that saw nothing. The folders an attacker can write (``tests/e2e/test_twins_framing_cli.py``
asserts that none of them yields "trained on"; ``benchmarks/bench_framing.py`` measures how often
today's rules would have):

- ``write_legacy``: a folder of version 1 (drawn at twins make, committed as sha256(salt ‖ draw)),
  its draw the chosen one: what the earlier measurement used.
- ``forge``: a released folder whose public versions are swapped for the chosen ones, with their
  salts, and every sha256 rewritten: the draw no longer re-derives.
- ``regrind``: the same variants committed again under new secrets, after the beacon round is
  public, keeping the secret whose draw the model prefers most: the draw re-derives, and only the
  commitment that was published before the round (pinned) tells it apart.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path

import numpy as np

from trainspotter.proofs.beacon import Beacon
from trainspotter.twins.draw import beacon_draw, commit
from trainspotter.twins.folder import FILES, Twins, commitment, load_twins, write_twins

__all__ = ["choose", "forge", "preference", "regrind", "write_legacy"]


def preference(spec: str, texts: list[str]) -> np.ndarray:
    """Each text's mean token log-probability under the model ``spec`` (higher: preferred)."""
    from trainspotter.backends import load_backend

    return np.array([float(np.mean(s.logprobs)) for s in load_backend(spec).score(texts)])


def choose(twins: Twins, score) -> dict[str, int]:
    """Per passage the variant ``score(texts) -> array`` rates highest: the choice of a model's preference."""
    flat = [(i, j) for i in twins.ids for j in range(twins.k)]
    values = dict(zip(flat, score([twins.variants[i][j] for i, j in flat])))
    return {i: max(range(twins.k), key=lambda j: values[(i, j)]) for i in twins.ids}


def _rehash(folder: Path, files=FILES) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"] = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in files}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write_legacy(twins: Twins, public: dict[str, int], out: str | Path) -> Path:
    """A version 1 folder of ``twins``' variants whose draw is ``public``: committed to with a fresh
    salt, every sha256 matching, as `twins make` wrote folders before `twins release` existed."""
    out = Path(out)
    out.mkdir(parents=True)
    salt = secrets.token_bytes(32)
    (out / "public.jsonl").write_text(_jsonl({"id": i, "text": twins.variants[i][public[i]]} for i in twins.ids))
    (out / "private.jsonl").write_text(_jsonl({"id": i, "variant": j, "text": twins.variants[i][j]}
                                              for i in twins.ids for j in range(twins.k) if j != public[i]))
    (out / "keys.json").write_text(json.dumps({"keys": [k.hex() for k in twins.keys or []], "salt": salt.hex()}))
    manifest = {"format": "trainspotter-twins", "version": 1, "k": twins.k, "passages": len(twins.ids),
                "commitment": {"scheme": "sha256(salt || json([[id, public variant], ...]))",
                               "digest": commitment([(i, public[i]) for i in twins.ids], salt)}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    _rehash(out)
    return out


def forge(folder: str | Path, public: dict[str, int]) -> Path:
    """Swap a released folder's public versions for ``public`` (texts, and salts in the manifest
    and private.jsonl) and rewrite every sha256."""
    folder = Path(folder)
    twins = load_twins(folder)
    twins.public = dict(public)
    twins.manifest["draw"]["salts"] = {i: twins.salts[i][public[i]].hex() for i in twins.ids}
    for f in (*FILES, "manifest.json"):
        (folder / f).unlink()
    manifest = {k: v for k, v in twins.manifest.items() if k != "files"}
    return write_twins(Twins(twins.ids, twins.variants, twins.public, twins.k, manifest, twins.quality,
                             twins.keys, folder=folder, secret=twins.secret, salts=twins.salts), folder)


def regrind(folder: str | Path, beacon: Beacon, score, tries: int, out: str | Path) -> Path:
    """Commit a released folder's variants again under ``tries`` new secrets for the already public
    ``beacon`` round and write, to ``out``, the one whose draw ``score`` (summed over the public
    versions) favours most."""
    twins = load_twins(folder)
    flat = [(i, j) for i in twins.ids for j in range(twins.k)]
    values = dict(zip(flat, score([twins.variants[i][j] for i, j in flat])))
    best = None
    for _ in range(tries):
        twins.manifest["commitment"] = commit(twins, twins.manifest["rewriter"], beacon.round)
        beacon_draw(twins, beacon)
        total = sum(values[(i, twins.public[i])] for i in twins.ids)
        if best is None or total > best[0]:
            best = (total, twins.secret, twins.salts, twins.manifest["commitment"])
    _, twins.secret, twins.salts, twins.manifest["commitment"] = best
    beacon_draw(twins, beacon)
    return write_twins(twins, out)
