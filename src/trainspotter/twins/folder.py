"""Twins: exchangeability made, not assumed (docs/architecture.md, "Twins").

For data not yet released, every passage is rewritten k ≥ 2 times, keeping its meaning; per
passage one variant, drawn uniformly at random with a cryptographic generator, is released (the
public version) and the others are kept (the private versions). Under H0 "the model was trained
on no version of these passages" the public and the private versions of a passage are
exchangeable *because the draw was random*: whatever the rewriter did, which variant a model
could have seen was decided by a fair die, independent of every model. An audit then pairs each
passage's public version (suspect side) with its private twins (held-out side; ``twins.rounds``), and the
BADI e-process (Sec. 4) bets on those pairs: a paired, anytime-valid version of STAMP's test
(Rastogi, Maini & Pruthi, ICML 2025, Sec. 3: k rewrites, one published at random, a paired test
of the model's likelihood of the public against the private versions).

A poor rewriter costs power, never validity. What breaks validity: choosing the public version
by anything but the draw (its quality, a model's score), and private versions that leak (a model
that saw them no longer treats public and private alike under H0... nor under H1).

The rewriters live in ``trainspotter.twins.lexical`` (re-exported here): the keyed lexical rewriter
carries STAMP's watermark idea (each variant its own secret key) without a generative model:
for every word with WordNet alternatives (inflected words too) and every phrase of a small table
("while"/"whilst", "is not"/"isn't", ...), HMAC-SHA256(key, unit) picks the variant's form, the
same wherever the unit occurs in the dataset.

A twins folder (``make_twins``, ``write_twins``):

================  ===========================================================  =============
file              what                                                           who sees it
================  ===========================================================  =============
public.jsonl      ``{"id", "text"}`` per passage: the version to release         everyone
private.jsonl     ``{"id", "variant", "text", "edit_rate", "similarity"}`` per   the owner
                  non-public variant (the public one's index is the missing one)
keys.json         the variants' keys and the commitment's salt                   the owner
manifest.json     k, the rewriter and its settings, every file's sha256, the     publishable
                  commitment digest, quality per variant index, skipped passages
================  ===========================================================  =============

The commitment (``commitment``) is sha256(salt ‖ JSON of [[id, public variant], ...] in file
order) with a 256-bit random salt: publishing the digest with the data binds the draw (no other
draw has the same digest) and hides it (without the salt nothing can be learnt from it), so a
later audit can show, by revealing the salt, that the public versions were fixed before any
model was looked at (``verify_commitment``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.twins.rounds import draw_private

FORMAT, VERSION = "trainspotter-twins", 1
FILES = ("public.jsonl", "private.jsonl", "keys.json")  # hashed in manifest.json
MANIFEST = "manifest.json"
KEY_BYTES = 32

__all__ = ["FILES", "FORMAT", "KEY_BYTES", "MANIFEST", "Twins", "commitment", "load_twins", "read_sides",
           "verify_commitment", "write_twins"]

def commitment(draw: list[tuple[str, int]], salt: bytes) -> str:
    """sha256(salt ‖ JSON [[id, public variant], ...]) in hex: binds the draw, hides it without the salt."""
    body = json.dumps([[str(i), int(j)] for i, j in draw], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(salt + body.encode("utf-8")).hexdigest()


@dataclass
class Twins:
    """A twins folder in memory: per passage (file order) its variants, the public one's index
    and each variant's quality; ``keys``/``salt`` only where the owner's keys.json was read."""

    ids: list[str]
    variants: dict[str, dict[int, str]]  # id -> variant index -> text (the private ones, and the public one)
    public: dict[str, int]  # id -> the public variant's index
    k: int
    manifest: dict = field(default_factory=dict)
    quality: dict[str, dict[int, dict]] = field(default_factory=dict)
    keys: list[bytes] | None = None
    salt: bytes | None = None
    folder: Path | None = None

    def draw(self) -> list[tuple[str, int]]:
        return [(i, self.public[i]) for i in self.ids]

    def sides(self, seed: int = 0, private: str = "one") -> tuple[list[dict], list[dict]]:
        """The audit's two sides: the public versions (suspect) and, per passage, one private
        variant drawn with ``seed`` (held-out; ids ``ID#VARIANT``), aligned: ``make_pairs(...,
        paired=True)`` keeps each passage's two versions in one pair. ``private="all"``: every
        private variant, in file order (``twins.rounds.every_round`` groups them per passage). Each
        side's ``twin`` is the other version's text, for the changed-position features
        (``features.twin_positions``; a public version's, its first private one's)."""
        suspect, heldout = [], []
        for i in self.ids:
            variants = sorted(j for j in self.variants[i] if j != self.public[i])
            chosen = variants if private == "all" else [draw_private(i, variants, seed)]
            public = self.variants[i][self.public[i]]
            suspect.append({"id": i, "text": public, "twin": self.variants[i][chosen[0]]})
            heldout += [{"id": f"{i}#{j}", "text": self.variants[i][j], "twin": public} for j in chosen]
        return suspect, heldout


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write_twins(twins: Twins, out: str | Path) -> Path:
    """Write the folder (module docstring); refuses a folder that already holds twins (a second
    draw over the same passages would let one pick the draw it likes). manifest.json last."""
    out = Path(out)
    if (out / MANIFEST).exists() or any((out / f).exists() for f in FILES):
        raise InputError(f"{out}: already holds a twins folder; choose a new --out (a second draw over the same "
                         f"passages would let one choose which public versions to release)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "public.jsonl").write_text(_jsonl({"id": i, "text": twins.variants[i][twins.public[i]]}
                                             for i in twins.ids), encoding="utf-8")
    (out / "private.jsonl").write_text(_jsonl(
        {"id": i, "variant": j, "text": twins.variants[i][j]} | twins.quality.get(i, {}).get(j, {})
        for i in twins.ids for j in sorted(twins.variants[i]) if j != twins.public[i]), encoding="utf-8")
    keys = {"keys": [key.hex() for key in twins.keys or []], "salt": twins.salt.hex() if twins.salt else None,
            "note": "secret: never publish; the salt is revealed only to verify the commitment"}
    (out / "keys.json").write_text(json.dumps(keys, indent=1) + "\n", encoding="utf-8")
    for f in FILES:  # owner-only where the system allows it: the private files are the secret
        if f != "public.jsonl":
            (out / f).chmod(0o600)
    manifest = twins.manifest | {"files": {f: _file_sha256(out / f) for f in FILES}}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    twins.manifest, twins.folder = manifest, out
    return out


def _read_json_file(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid UTF-8") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _rows(path: Path, fields: dict[str, type]):
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(f"{path}:{n}: not valid UTF-8") from None
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: invalid JSON ({e.msg})") from None
        for name, kind in fields.items():
            if not isinstance(row, dict) or not isinstance(row.get(name), kind) or isinstance(row.get(name), bool):
                raise InputError(f"{path}:{n}: `{name}` missing or not a {kind.__name__}")
        if not row["text"].strip():
            raise InputError(f"{path}:{n}: `text` is empty")
        yield n, row


def load_twins(folder: str | Path, check_hashes: bool = True) -> Twins:
    """A twins folder for an audit, checked: manifest.json (format, k), public.jsonl and
    private.jsonl present and (``check_hashes``) byte for byte the files ``twins make`` wrote
    (sha256 in the manifest), every public passage with at least one private twin, every private
    row a known passage and a valid, unique variant index. keys.json is optional (an auditor may
    hold only the two sets); where present it is checked too. Any problem: one InputError naming
    the file (and line)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder (a twins folder made by `trainspotter twins make`)")
    mpath = folder / MANIFEST
    if not mpath.is_file():
        raise InputError(f"{mpath}: missing; {folder} is not a twins folder made by `trainspotter twins make`")
    manifest = _read_json_file(mpath)
    if manifest.get("format") != FORMAT or not isinstance(manifest.get("files"), dict):
        raise InputError(f"{mpath}: not a twins manifest (no \"format\": \"{FORMAT}\" with its \"files\")")
    k = manifest.get("k")
    if not isinstance(k, int) or k < 2:
        raise InputError(f"{mpath}: `k` must be an integer ≥ 2, got {k!r}")
    for f in FILES:
        path = folder / f
        if not path.is_file():
            if f == "keys.json":
                continue
            raise InputError(f"{path}: missing from the twins folder (manifest.json lists it)")
        want = manifest["files"].get(f)
        if check_hashes and _file_sha256(path) != want:
            raise InputError(f"{path}: sha256 differs from the one in {MANIFEST}: the file was changed after "
                             f"`trainspotter twins make` wrote it")
    ids, variants, public_line, public_text, publics = [], {}, {}, {}, {}
    ppath, qpath = folder / "public.jsonl", folder / "private.jsonl"
    for n, row in _rows(ppath, {"id": str, "text": str}):
        if row["id"] in variants:
            raise InputError(f"{ppath}:{n}: passage id {row['id']!r} appears twice")
        ids.append(row["id"])
        variants[row["id"]], public_line[row["id"]], public_text[row["id"]] = {}, n, row["text"]
    quality: dict[str, dict[int, dict]] = {i: {} for i in ids}
    for n, row in _rows(qpath, {"id": str, "variant": int, "text": str}):
        i, j = row["id"], row["variant"]
        if i not in variants:
            raise InputError(f"{qpath}:{n}: passage id {i!r} is not in public.jsonl")
        if not 0 <= j < k:
            raise InputError(f"{qpath}:{n}: `variant` {j} is not in 0..{k - 1} (k = {k} in {MANIFEST})")
        if j in variants[i]:
            raise InputError(f"{qpath}:{n}: passage {i!r} variant {j} appears twice")
        variants[i][j] = row["text"]
        quality[i][j] = {m: row[m] for m in ("edit_rate", "similarity") if m in row}
    if not ids:
        raise InputError(f"{ppath}: no passages")
    for i in ids:
        if not variants[i]:
            raise InputError(f"{qpath}: passage {i!r} (public.jsonl line {public_line[i]}) has no private twin")
        missing = sorted(set(range(k)) - set(variants[i]))
        if len(missing) != 1:  # the public variant is the one index private.jsonl does not hold
            raise InputError(f"{qpath}: passage {i!r} has {len(variants[i])} private variants; with k = {k} "
                             f"it needs {k - 1} (every variant but the public one)")
        publics[i] = missing[0]
        variants[i][missing[0]] = public_text[i]
    twins = Twins(ids, variants, publics, k, manifest, quality, folder=folder)
    kpath = folder / "keys.json"
    if kpath.is_file():
        secret = _read_json_file(kpath)
        try:
            twins.keys = [bytes.fromhex(x) for x in secret.get("keys") or []]
            twins.salt = bytes.fromhex(secret["salt"]) if secret.get("salt") else None
        except (TypeError, ValueError):
            raise InputError(f"{kpath}: `keys` and `salt` must be hex strings") from None
    return twins


def verify_commitment(folder: str | Path, salt: str | bytes | None = None) -> bool:
    """Whether the draw that the folder's files hold (the public index of every passage: the one
    private.jsonl lacks) is the one committed to in manifest.json, given the ``salt`` (hex or
    bytes; default: keys.json's)."""
    twins = load_twins(folder)
    if isinstance(salt, str):
        try:
            salt = bytes.fromhex(salt)
        except ValueError:
            raise InputError(f"salt {salt!r}: not a hex string") from None
    salt = salt if salt is not None else twins.salt
    if salt is None:
        raise InputError(f"{Path(folder) / 'keys.json'}: missing, and no salt given to verify the commitment")
    want = (twins.manifest.get("commitment") or {}).get("digest")
    return hmac.compare_digest(commitment(twins.draw(), salt), str(want))


def read_sides(folder: str | Path, seed: int = 0, private: str = "one") -> tuple[list[dict], list[dict]]:
    """The two sides of a twins audit (``Twins.sides``) of a checked folder (``load_twins``)."""
    return load_twins(folder).sides(seed, private)
