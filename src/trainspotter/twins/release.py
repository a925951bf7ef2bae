"""``twins release`` (``release_twins``): the second step of a draw nobody chose (``twins.draw``).
``twins make`` wrote the committed variants (variants.jsonl) and the secret (keys.json); once the
beacon round that the published commitment names exists, the public version of every passage is
drawn from the secret and that round, and the folder is split into public.jsonl (release it, with
manifest.json, which now reveals the secret and the public versions' salts) and private.jsonl."""

from __future__ import annotations

from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.proofs.beacon import Beacon, secret_digest
from trainspotter.twins.draw import VERSION, beacon_draw, commitment_digest, variant_hash
from trainspotter.twins.folder import (COMMITTED, MANIFEST, Twins, _check_files, _hex, _manifest, _read_json_file,
                                       _rows, _write_files)

__all__ = ["release_twins"]


def release_twins(folder: str | Path, beacon: Beacon) -> Twins:
    """``twins release``: the committed folder's public versions drawn from ``beacon`` (the round its
    commitment names; ``draw.beacon_draw``), written as public.jsonl and private.jsonl, the draw
    recorded in the manifest, variants.jsonl removed. Refuses a folder released before (a second
    release could pick among rounds) and variants or a secret that do not open the commitment."""
    folder = Path(folder)
    manifest = _manifest(folder)
    if manifest.get("draw"):
        round_ = (manifest["draw"].get("beacon") or {}).get("round")
        raise InputError(f"{folder}: already released" + (f" with beacon round {round_}" if round_ is not None else "")
                         + "; a folder is released once (a second draw could choose among rounds)")
    if manifest.get("version", 1) < VERSION:
        raise InputError(f"{folder}: made before twins release (its public versions were drawn at twins make); make "
                         f"the twins again to release them with a beacon")
    twins = _load_committed(folder, manifest)
    beacon_draw(twins, beacon)
    _write_files(twins, folder)
    (folder / "variants.jsonl").unlink()
    return twins


def _load_committed(folder: Path, manifest: dict) -> Twins:
    """The variants of a folder not yet released, checked: the files are those ``twins make``
    wrote, and every variant and the secret open the commitment."""
    _check_files(folder, manifest, COMMITTED, required=COMMITTED)
    section = manifest["commitment"]
    k = section["k"]
    ids, variants, salts, quality = [], {}, {}, {}
    vpath = folder / "variants.jsonl"
    for n, row in _rows(vpath, {"id": str, "variant": int, "text": str, "salt": str}):
        i, j = row["id"], row["variant"]
        if i not in variants:
            ids.append(i)
            variants[i], salts[i], quality[i] = {}, {}, {}
        variants[i][j], salts[i][j] = row["text"], _hex(row["salt"], vpath, n)
        quality[i][j] = {m: row[m] for m in ("edit_rate", "similarity") if m in row}
    keys = _read_json_file(folder / "keys.json")
    twins = Twins(ids, variants, {}, k, manifest, quality, [bytes.fromhex(x) for x in keys.get("keys") or []],
                  folder=folder, secret=_hex(keys.get("secret"), folder / "keys.json"), salts=salts)
    committed = [[i, [variant_hash(salts[i].get(j, b""), variants[i].get(j, "")) for j in range(k)]] for i in ids]
    if (committed != section["variants"] or secret_digest(twins.secret) != section["secret_digest"]
            or commitment_digest(section) != section["digest"]):
        raise InputError(f"{vpath}: the variants and keys.json's secret do not open the commitment in {MANIFEST}: "
                         f"changed after `trainspotter twins make`")
    return twins
