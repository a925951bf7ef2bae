"""Twins: exchangeability made, not assumed (docs/architecture.md, "Twins").

For data not yet released, every passage is rewritten k ≥ 2 times, keeping its meaning; per
passage one variant, drawn uniformly at random from a public random value that appeared after the
owner committed to every variant (``twins.draw``), is released (the public version) and the others
are kept (the private versions). Under H0 "the model was trained on no version of these passages"
the public and the private versions of a passage are
exchangeable *because the draw was random*: whatever the rewriter did, which variant a model
could have seen was decided by a fair die, independent of every model. An audit then pairs each
passage's public version (suspect side) with its private twins (held-out side; ``twins.rounds``), and the
BADI e-process (Sec. 4) bets on those pairs: a paired, anytime-valid version of STAMP's test
(Rastogi, Maini & Pruthi, ICML 2025, Sec. 3: k rewrites, one published at random, a paired test
of the model's likelihood of the public against the private versions).

A poor rewriter costs power, never validity. What breaks validity: choosing the public version
by anything but the draw (its quality, a model's score), and private versions that leak (a model
that saw them no longer treats public and private alike under H0... nor under H1).

The rewriters live in ``trainspotter.rewriters.lexical`` (re-exported here): the keyed lexical rewriter
carries STAMP's watermark idea (each variant its own secret key) without a generative model:
for every word with WordNet alternatives (inflected words too) and every phrase of a small table
("while"/"whilst", "is not"/"isn't", ...), HMAC-SHA256(key, unit) picks the variant's form, the
same wherever the unit occurs in the dataset.

A twins folder (``make_twins``, ``write_twins``; ``twins.draw``: the commitment and the draw). After
``twins make`` it holds the committed variants, not yet drawn; ``twins release`` (``release_twins``)
draws the public ones from the beacon round the commitment names and splits them:

================  ==============================================================  ==============
file              what                                                            who sees it
================  ==============================================================  ==============
variants.jsonl    ``{"id", "variant", "text", "salt", "edit_rate", ...}`` per     the owner, until
                  variant (before the release)                                    the release
public.jsonl      ``{"id", "text"}`` per passage: the version to release          everyone
private.jsonl     as variants.jsonl, per non-public variant (the public one's     the owner
                  index is the one missing)
keys.json         the variants' keys and the draw's secret                        the owner
manifest.json     k, the rewriter and its settings, every file's sha256, quality  publishable: the
                  per variant, skipped passages, the commitment (every variant's  commitment's
                  hash, the secret's, the beacon round) and, once released, the   digest before
                  draw (the beacon, the secret and the public versions' salts)    the round
================  ==============================================================  ==============

Folders of version 1 (before ``twins release``) were drawn at ``twins make`` and committed to the
draw itself, sha256(salt ‖ JSON of [[id, public variant], ...]) with the salt in keys.json
(``commitment``, ``verify_commitment``): loadable, but their draw cannot be shown random.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.twins.draw import VERSION, DrawProof, commitment_digest, prove, variant_hash
from trainspotter.twins.rounds import draw_private

FORMAT = "trainspotter-twins"
FILES = ("public.jsonl", "private.jsonl", "keys.json")  # a released folder's, hashed in manifest.json
COMMITTED = ("variants.jsonl", "keys.json")  # before the release
MANIFEST = "manifest.json"
KEY_BYTES = 32

__all__ = ["COMMITTED", "FILES", "FORMAT", "KEY_BYTES", "MANIFEST", "Twins", "commitment", "load_twins",
           "prove_folder", "read_release", "read_sides", "verify_commitment", "write_twins"]


def commitment(draw: list[tuple[str, int]], salt: bytes) -> str:
    """A version 1 folder's commitment: sha256(salt ‖ JSON [[id, public variant], ...]) in hex."""
    body = json.dumps([[str(i), int(j)] for i, j in draw], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(salt + body.encode("utf-8")).hexdigest()


@dataclass
class Twins:
    """A twins folder in memory: per passage (file order) its variants, the public one's index
    (empty until drawn), each variant's quality and its salt (``salts``, for its committed hash);
    ``keys`` and ``secret`` where the owner's keys.json (or the released manifest) gave them;
    ``salt``: a version 1 folder's commitment salt."""

    ids: list[str]
    variants: dict[str, dict[int, str]]  # id -> variant index -> text (the private ones, and the public one)
    public: dict[str, int]  # id -> the public variant's index
    k: int
    manifest: dict = field(default_factory=dict)
    quality: dict[str, dict[int, dict]] = field(default_factory=dict)
    keys: list[bytes] | None = None
    salt: bytes | None = None
    folder: Path | None = None
    secret: bytes | None = None
    salts: dict[str, dict[int, bytes]] = field(default_factory=dict)

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

    def _row(self, i: str, j: int) -> dict:
        return ({"id": i, "variant": j, "text": self.variants[i][j]}
                | ({"salt": self.salts[i][j].hex()} if self.salts else {}) | self.quality.get(i, {}).get(j, {}))

    def private_view(self) -> dict[str, dict[int, tuple[str, bytes]]]:
        """id → variant → (text, salt) of every private version (``draw.prove``'s ``private``)."""
        return {i: {j: (t, self.salts[i][j]) for j, t in self.variants[i].items() if j != self.public[i]}
                for i in self.ids}


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_twins(twins: Twins, out: str | Path) -> Path:
    """Write the folder (module docstring): the committed variants (variants.jsonl) while no draw
    was made, else the public and private versions. Refuses a folder that already holds twins (a
    second draw over the same passages would let one pick the draw it likes). manifest.json last."""
    out = Path(out)
    if (out / MANIFEST).exists() or any((out / f).exists() for f in {*FILES, *COMMITTED}):
        raise InputError(f"{out}: already holds a twins folder; choose a new --out (a second draw over the same "
                         f"passages would let one choose which public versions to release)")
    out.mkdir(parents=True, exist_ok=True)
    return _write_files(twins, out)


def _write_files(twins: Twins, out: Path) -> Path:
    if twins.public:
        (out / "public.jsonl").write_text(_jsonl({"id": i, "text": twins.variants[i][twins.public[i]]}
                                                 for i in twins.ids), encoding="utf-8")
        (out / "private.jsonl").write_text(_jsonl(twins._row(i, j) for i in twins.ids for j in sorted(twins.variants[i])
                                                  if j != twins.public[i]), encoding="utf-8")
    else:
        (out / "variants.jsonl").write_text(_jsonl(twins._row(i, j) for i in twins.ids for j in range(twins.k)),
                                            encoding="utf-8")
    keys = {"keys": [key.hex() for key in twins.keys or []], "secret": twins.secret.hex() if twins.secret else None,
            "note": "the variants' keys: never publish; the secret is revealed in manifest.json at the release"}
    (out / "keys.json").write_text(json.dumps(keys, indent=1) + "\n", encoding="utf-8")
    files = FILES if twins.public else COMMITTED
    for f in files:  # owner-only where the system allows it: the private files are the secret
        if f != "public.jsonl":
            (out / f).chmod(0o600)
    manifest = twins.manifest | {"files": {f: _file_sha256(out / f) for f in files}}
    _write_atomic(out / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    twins.manifest, twins.folder = manifest, out
    return out


def _hex(value, path: Path, line: int | None = None) -> bytes:
    try:
        return bytes.fromhex(value)
    except (TypeError, ValueError):
        raise InputError(f"{path}{f':{line}' if line else ''}: expected a hex string, got {value!r}") from None


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


def _manifest(folder: Path) -> dict:
    """manifest.json of a twins folder, its format and k checked."""
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
    if manifest.get("version", 1) >= VERSION and (not isinstance(manifest.get("commitment"), dict)
                                                  or manifest["commitment"].get("k") != k):
        raise InputError(f"{mpath}: its commitment does not name k = {k}")
    return manifest


def _check_files(folder: Path, manifest: dict, files, required, check_hashes: bool = True) -> None:
    for f in files:
        path = folder / f
        if not path.is_file():
            if f not in required:
                continue
            raise InputError(f"{path}: missing from the twins folder (manifest.json lists it)")
        if check_hashes and _file_sha256(path) != manifest["files"].get(f):
            released = f in ("public.jsonl", "private.jsonl") and manifest.get("version", 1) >= 2
            writer = "twins release" if released else "twins make"
            raise InputError(f"{path}: sha256 differs from the one in {MANIFEST}: the file was changed after "
                             f"`trainspotter {writer}` wrote it")


def _released(folder: Path, manifest: dict) -> None:
    if manifest.get("version", 1) >= VERSION and not manifest.get("draw"):
        round_ = manifest["commitment"].get("round")
        raise InputError(f"{folder}: committed but not released yet: once beacon round {round_} exists, run "
                         f"`trainspotter twins release {folder} --beacon ROUND.json` (the round as drand publishes it)")


def load_twins(folder: str | Path, check_hashes: bool = True) -> Twins:
    """A released twins folder for an audit, checked: manifest.json (format, k), public.jsonl and
    private.jsonl present and (``check_hashes``) byte for byte the files ``twins make`` wrote
    (sha256 in the manifest), every public passage with at least one private twin, every private
    row a known passage and a valid, unique variant index. keys.json is optional (an auditor may
    hold only the two sets); where present it is checked too. Any problem: one InputError naming
    the file (and line). Whether the draw holds is ``prove_folder``'s question."""
    folder = Path(folder)
    manifest = _manifest(folder)
    _released(folder, manifest)
    _check_files(folder, manifest, FILES, ("public.jsonl", "private.jsonl"), check_hashes)
    lines, public_text = _public_rows(folder)
    twins = _private_rows(folder, manifest, lines)
    qpath, draw = folder / "private.jsonl", manifest.get("draw") or {}
    for i in twins.ids:
        j = twins.public[i] = _public_index(i, twins.variants[i], twins.k, qpath, lines[i])
        twins.variants[i][j] = public_text[i]
        if twins.salts and i in (draw.get("salts") or {}):
            twins.salts[i][j] = _hex(draw["salts"][i], folder / MANIFEST)
    twins.secret = _hex(draw["secret"], folder / MANIFEST) if draw.get("secret") else None
    kpath = folder / "keys.json"
    if kpath.is_file():
        secret = _read_json_file(kpath)
        twins.keys = [_hex(x, kpath) for x in secret.get("keys") or []]
        twins.salt = _hex(secret["salt"], kpath) if secret.get("salt") else None
    return twins


def _public_rows(folder: Path) -> tuple[dict[str, int], dict[str, str]]:
    """public.jsonl: each passage's line and text, in file order."""
    lines, texts = {}, {}
    ppath = folder / "public.jsonl"
    for n, row in _rows(ppath, {"id": str, "text": str}):
        if row["id"] in texts:
            raise InputError(f"{ppath}:{n}: passage id {row['id']!r} appears twice")
        lines[row["id"]], texts[row["id"]] = n, row["text"]
    if not texts:
        raise InputError(f"{ppath}: no passages")
    return lines, texts


def _private_rows(folder: Path, manifest: dict, lines: dict[str, int]) -> Twins:
    """private.jsonl of the passages ``lines`` names: a Twins of their private versions (and, of
    version 2, their salts)."""
    k, v2 = manifest["k"], manifest.get("version", 1) >= VERSION
    variants: dict[str, dict[int, str]] = {i: {} for i in lines}
    quality: dict[str, dict[int, dict]] = {i: {} for i in lines}
    salts: dict[str, dict[int, bytes]] = {i: {} for i in lines}
    qpath = folder / "private.jsonl"
    for n, row in _rows(qpath, {"id": str, "variant": int, "text": str} | ({"salt": str} if v2 else {})):
        i, j = row["id"], row["variant"]
        if i not in variants:
            raise InputError(f"{qpath}:{n}: passage id {i!r} is not in public.jsonl")
        if not 0 <= j < k:
            raise InputError(f"{qpath}:{n}: `variant` {j} is not in 0..{k - 1} (k = {k} in {MANIFEST})")
        if j in variants[i]:
            raise InputError(f"{qpath}:{n}: passage {i!r} variant {j} appears twice")
        variants[i][j] = row["text"]
        quality[i][j] = {m: row[m] for m in ("edit_rate", "similarity") if m in row}
        if v2:
            salts[i][j] = _hex(row["salt"], qpath, n)
    return Twins(list(lines), variants, {}, k, manifest, quality, folder=folder, salts=salts if v2 else {})


def _public_index(i: str, variants: dict[int, str], k: int, qpath: Path, line: int) -> int:
    """The public variant's index: the one private.jsonl does not hold."""
    if not variants:
        raise InputError(f"{qpath}: passage {i!r} (public.jsonl line {line}) has no private twin")
    missing = sorted(set(range(k)) - set(variants))
    if len(missing) != 1:
        raise InputError(f"{qpath}: passage {i!r} has {len(variants)} private variants; with k = {k} "
                         f"it needs {k - 1} (every variant but the public one)")
    return missing[0]


def read_release(folder: str | Path) -> tuple[dict, dict[str, str], dict | None]:
    """What a third party holds of a released folder: its manifest, public.jsonl (id → text) and,
    only where private.jsonl is in the folder, the private versions (``Twins.private_view``).
    keys.json is never read."""
    folder = Path(folder)
    manifest = _manifest(folder)
    _released(folder, manifest)
    lines, public = _public_rows(folder)
    if not (folder / "private.jsonl").is_file() or manifest.get("version", 1) < VERSION:
        return manifest, public, None
    private = _private_rows(folder, manifest, lines)
    return manifest, public, {i: {j: (t, private.salts[i][j]) for j, t in v.items()}
                              for i, v in private.variants.items()}


def prove_folder(folder: str | Path, pinned: str | None = None) -> DrawProof:
    """What a released folder shows of its draw, from every text it holds (``draw.prove``)."""
    twins = load_twins(folder)
    public = {i: twins.variants[i][twins.public[i]] for i in twins.ids}
    return prove(twins.manifest, public, twins.private_view() if twins.salts else None, pinned)


def verify_commitment(folder: str | Path, salt: str | bytes | None = None) -> bool:
    """Whether the folder's texts open its commitment: of version 1, the draw its files hold (the
    public index of every passage: the one private.jsonl lacks) given the ``salt`` (hex or bytes;
    default: keys.json's); of version 2, every variant against its committed hash (whatever drew
    the public ones: ``prove_folder`` says whether the draw holds)."""
    twins = load_twins(folder)
    if twins.manifest.get("version", 1) >= VERSION:
        section = twins.manifest["commitment"]
        hashes = dict((i, h) for i, h in section["variants"])
        return commitment_digest(section) == section["digest"] and list(hashes) == twins.ids and all(
            hmac.compare_digest(variant_hash(twins.salts[i].get(j, b""), t), hashes[i][j])
            for i in twins.ids for j, t in twins.variants[i].items())
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
