"""The sealed audit record: one JSON document that binds an audit's verdict to its inputs,
model, code and every pair's evidence by sha256, so that anyone can check it offline
(``trainspotter.verify``; README, "Check an audit").

What it holds (sections, each with its own sha256 in ``sections``):

- ``config``: the audit's config, every seed included; ``inputs``: each input file's sha256;
- ``passages``: every available passage (id, text, sha256 of the text), in file order, so the
  pair order can be derived again from the seed and the blind check replayed from the texts;
- ``model``/``reference``: the models' identity (weight files' sha256 and dtype; for an API
  the model name, the base URL's host, the tokenizer's and query mode's fingerprint: never a key);
- ``code``: trainspotter's version, git commit and sha256 of the library's source;
- ``start``: where this run's e-process started (a recurring audit: the stored state, the
  passages used before and the chain head of the earlier run), ``end``: the state it left;
- ``blind``: the blind check's wealth after every pair; ``result``: the verdict and its numbers;
- ``batches``: per batch of pairs, each pair's ids, text hashes, feature values and the model's
  answers they were computed from (``features.answers``: token ids and log-probs of target and
  references; black-box access, ``features.black_answers``: greedy tokens, their strings, MiniLM
  similarities, continuations; each with its sha256) and the wealth, stake, payoff and
  scores after it (a twins audit of every private variant: one round is several pairs, the
  sub-pairs of one passage, with one ``t``; ``result.rounds`` says how many and the texts
  queried); hash-chained: batch k's digest is
  sha256(digest of batch k−1 + its pairs), the first batch continuing the chain head of the
  earlier run of a recurring audit (kept in the ledger), or ``GENESIS``.

``digest`` = sha256 of the section digests and the chain head; an optional Ed25519
``signature`` over it binds the record to a key the auditor holds.
"""

from __future__ import annotations

import functools
from collections import Counter
import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from trainspotter.errors import InputError
from trainspotter.features.answers import ANSWERS

if TYPE_CHECKING:
    from trainspotter.audit import AuditConfig
    from trainspotter.verdict import AuditResult

__all__ = ["FORMAT", "GENESIS", "READABLE", "SECTIONS", "batch_digest", "canonical", "file_sha256", "load_private_key",
           "load_public_key", "model_identity", "prior_of", "record_digest", "seal", "sha256", "sign",
           "state_sha256", "text_sha256"]

# version 2: each side of a pair may hold the model's answers its features came from (``answers``)
FORMAT, VERSION = "trainspotter-audit-record", 2
READABLE = (1, 2)  # the versions ``verify`` reads (a version 1 record: features not recomputed)
GENESIS = "0" * 64  # the chain's start before a fresh e-process's first batch
SECTIONS = ("header", "config", "inputs", "model", "reference", "code", "passages", "start", "blind",
            "placebo", "result", "end")
STEP_FIELDS = ("wealth", "lambda", "u", "score_x", "score_y")
# The library code a replay depends on (verify reports when the checkout's differs).
REPLAY_CODE = ("trainspotter.auditor", "trainspotter.data", "trainspotter.verdict", "trainspotter.record",
               "trainspotter.features.text", "trainspotter.features.orientation", "trainspotter.features.catalog",
               "trainspotter.presets", "trainspotter.twin_rounds",
               "trainspotter.stats.sequential", "trainspotter.stats.blind", "trainspotter.stats.eprocess",
               "trainspotter.stats.payoffs", "trainspotter.stats.strategies", "trainspotter.stats.scoring",
               "trainspotter.stats.newton_scorer", "trainspotter.stats.adam_scorer",
               "trainspotter.stats.fixed_scorer", "trainspotter.stats.quantiles", "trainspotter.stats.oriented_qp",
               "trainspotter.stats.pvalue",
               # the features recomputed from the recorded answers
               "trainspotter.features.answers", "trainspotter.features.black_answers", "trainspotter.features.features",
               "trainspotter.features.ez", "trainspotter.features.probability",
               "trainspotter.features.twin_positions", "trainspotter.features.references",
               "trainspotter.features.model_based")


def canonical(obj) -> bytes:
    """The bytes every digest is taken over: JSON with sorted keys, no spaces, floats as
    Python's shortest round-trip repr (NaN and ±Infinity as Python writes them)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256(obj) -> str:
    return hashlib.sha256(canonical(obj)).hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def state_sha256(state: dict | None) -> str | None:
    """sha256 of a stored e-process state as the ledger keeps it (after a JSON round trip)."""
    return None if state is None else sha256(json.loads(json.dumps(state)))


def batch_digest(prev: str, pairs: list[dict]) -> str:
    """One link of the chain: sha256 of the previous digest and this batch's pairs."""
    return hashlib.sha256(prev.encode("ascii") + canonical(pairs)).hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes; of a folder, of its files' relative paths and sha256s."""
    path = Path(path)
    if path.is_file():
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    return sha256([[str(p.relative_to(path)), file_sha256(p)] for p in files])


@functools.cache
def _library_sha256() -> str:
    root = Path(__file__).parent
    return sha256([[str(p.relative_to(root)), file_sha256(p)] for p in sorted(root.rglob("*.py"))])


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def code_identity() -> dict:
    from trainspotter import __version__
    from trainspotter.config import code_digest

    return {"trainspotter": __version__, "git_commit": _git_commit(), "library_sha256": _library_sha256(),
            "replay_digest": code_digest(*REPLAY_CODE)}


def model_identity(spec, api: dict | None = None) -> dict:
    """What answered: weight files' sha256 and dtype (hf:, testbed:); for openai: the model,
    the base URL's host, the fingerprint of model, endpoint, tokenizer files and query mode,
    and how the server was queried (``AuditResult.api``: its mode and the server builds,
    ``system_fingerprints``, that gave the answers). Never an API key."""
    from urllib.parse import urlparse

    if spec.remote:
        mine = {k: v for k, v in (api or {}).items() if k.startswith(f"{spec.model}@")}
        return {"scheme": spec.scheme, "model": spec.model, "host": urlparse(spec.where).hostname,
                "fingerprint": spec.fingerprint, "server": mine}
    from trainspotter.backends.weights import _file_digest
    from trainspotter.backends.spec import resolve_spec

    try:
        path = resolve_spec(spec)
    except InputError as e:  # a library audit with its own extract_fn may name a model it never loads
        return {"scheme": spec.scheme, "spec": spec.base, "weights_sha256": None, "fingerprint": None,
                "missing": str(e)}
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
    weights = {f.name: _file_digest(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files}
    return {"scheme": spec.scheme, "spec": spec.base, "dtype": spec.options.get("dtype", "float32"),
            "weights_sha256": weights, "fingerprint": spec.fingerprint}


def prior_of(ledger: dict | None) -> dict:
    """What a continued run starts from, copied before the run changes anything: the
    stored state and columns, the ids used before and the earlier run's chain head."""
    if ledger is None:
        return {"state": None, "columns": None, "used": {"suspect": [], "heldout": []}, "previous": GENESIS}
    runs = ledger["runs"]
    return json.loads(json.dumps({
        "state": ledger["state"], "columns": ledger.get("columns") if ledger["state"] is not None else None,
        "used": ledger["used"], "previous": (runs[-1].get("record_chain") if runs else None) or GENESIS}))


def _row(row: dict, texts: dict) -> dict:
    """One side of a pair: its passage's id and text hash, its feature values and, where the
    extraction gave them, the model's answers they were computed from (gray and/or black-box
    parts), each with its sha256."""
    features = {k: v for k, v in row.items() if k not in ("id", "set", ANSWERS)}
    out = {"id": row["id"], "sha256": texts[(row["set"], row["id"])], "features": features,
           "features_sha256": sha256(features)}
    if row.get(ANSWERS) is not None:
        out |= {"answers": row[ANSWERS], "answers_sha256": sha256(row[ANSWERS])}
    return out


def _placebo(result: "AuditResult", texts: dict) -> dict:
    """The placebo check (trainspotter.placebo): its result and, when it ran, every pair's rows and wealth."""
    p = result.placebo
    rows = p._rows
    return {"result": p.model_dump(mode="json"),
            "pairs": [{"t": i + 1, "suspect": _row(rows[2 * i], texts), "heldout": _row(rows[2 * i + 1], texts),
                       "wealth": p.wealth[i]} for i in range(len(rows) // 2)]}


def _batches(result: "AuditResult", texts: dict, batch_pairs: int, t0: int, previous: str) -> list[dict]:
    """The chained batches of ``batch_pairs`` rounds. A pair's ``t`` is its round: the sub-pairs of
    one round (a twins audit of every private variant) share it and the round's step fields."""
    auditor = result._auditor
    rows, steps, of = (auditor.rows, auditor.history, auditor.round_of) if auditor is not None else ([], {}, [])
    pairs = [{"t": t0 + of[i] + 1, "suspect": _row(rows[2 * i], texts), "heldout": _row(rows[2 * i + 1], texts),
              **{k: steps[k][of[i]] for k in STEP_FIELDS}} for i in range(len(rows) // 2)]
    starts = [i for i, p in enumerate(pairs) if i == 0 or p["t"] != pairs[i - 1]["t"]] + [len(pairs)]
    batches, prev = [], previous
    for n in range(0, len(starts) - 1, batch_pairs):
        chunk = pairs[starts[n]:starts[min(n + batch_pairs, len(starts) - 1)]]
        prev = batch_digest(prev, chunk)
        batches.append({"pairs": chunk, "digest": prev})
    return batches


RESULT_FIELDS = ("verdict", "guard", "reject", "model_reject", "e_value", "wealth_start", "wealth", "max_wealth",
                 "p_value", "stop_time", "stopped_by", "pairs_used", "pairs_this_run", "pairs_available",
                 "alpha", "features", "baseline_p_value")
BLIND_FIELDS = ("fired", "e_value", "max_wealth", "p_value", "pairs_used", "pairs_available", "stop_time", "alpha")


def seal(result: "AuditResult", config: "AuditConfig", suspect: list[dict], heldout: list[dict],
         prior: dict | None = None, run_id: str | None = None) -> "AuditResult":
    """``result`` with its sealed record (``result.record``, ``result.record_digest``).
    ``suspect``/``heldout``: every passage available to this run (before a recurring
    audit drops the used ones); ``prior``: ``prior_of(ledger)`` for a continued run."""
    prior = prior or prior_of(None)
    passages = {side: [{"id": p["id"], "text": p["text"], "sha256": text_sha256(p["text"])} for p in ps]
                for side, ps in (("suspect", suspect), ("heldout", heldout))}
    texts = {(side, p["id"]): p["sha256"] for side, ps in passages.items() for p in ps}
    auditor = result._auditor
    t0 = result.pairs_used - result.pairs_this_run
    batches = _batches(result, texts, config.batch_pairs, t0, prior["previous"])
    end_state = auditor.test.to_dict() if auditor is not None and auditor.test is not None else prior["state"]
    record = {
        "format": FORMAT, "version": VERSION,
        "header": {"name": config.name, "run_id": run_id, "created": time.time()},
        "config": config.model_dump(mode="json"),
        "inputs": {side: {"path": getattr(config, side), "sha256": file_sha256(getattr(config, side)),
                          "passages": len(passages[side])} for side in ("suspect", "heldout")} | _twins(config),
        "model": model_identity(config.model, result.api),
        "reference": [model_identity(r, result.api) for r in config.reference],
        "code": code_identity(), "passages": passages,
        "start": {"t0": t0, "wealth": result.wealth_start, "state": prior["state"], "columns": prior["columns"],
                  "state_sha256": state_sha256(prior["state"]), "used": prior["used"], "previous": prior["previous"]},
        "blind": {"wealth": list(result.blind.wealth)},
        "placebo": _placebo(result, texts),
        "result": {k: getattr(result, k) for k in RESULT_FIELDS}
        | {"blind": {k: getattr(result.blind, k) for k in BLIND_FIELDS}} | _rounds(result, config),
        "end": {"state_sha256": state_sha256(end_state),
                "chain": batches[-1]["digest"] if batches else prior["previous"]},
        "batches": batches,
    }
    record = json.loads(json.dumps(record))  # as it reads back from the file (tuples → lists)
    record["sections"] = {s: sha256(record[s]) for s in SECTIONS}
    record["digest"] = record_digest(record)
    sealed = result.model_copy(update={"record_digest": record["digest"]})
    sealed._record = record
    return sealed


def _rounds(result: "AuditResult", config: "AuditConfig") -> dict:
    """A twins audit of every private variant: how many sub-pairs each round of this run held
    (the batches' pairs with one ``t``) and how many texts it sent the model."""
    if not config.every_private:
        return {}
    of = result._auditor.round_of if result._auditor is not None else []
    return {"rounds": {"twins_private": "all", "sub_pairs": list(Counter(of).values()),
                       "texts_queried": result.texts_queried}}


def _twins(config: "AuditConfig") -> dict:
    """A twins audit's commitment to the draw of the public versions (``trainspotter.twins``):
    the record binds the audit to a draw made before any model was looked at."""
    if config.twins is None:
        return {}
    manifest = Path(config.twins) / "manifest.json"
    if not manifest.is_file():  # (passages given in memory): nothing binds the draw
        return {"twins": {"path": config.twins, "manifest_sha256": None, "commitment": None}}
    return {"twins": {"path": config.twins, "manifest_sha256": file_sha256(str(manifest)),
                      "commitment": json.loads(manifest.read_text())["commitment"]["digest"]}}


def record_digest(record: dict) -> str:
    """The one digest over a record: its section digests and the chain head."""
    return sha256({"format": record["format"], "version": record["version"], "sections": record["sections"],
                   "chain": record["end"]["chain"]})


# -- signatures (Ed25519, from the `cryptography` package) ------------------------------


def load_private_key(path: str | Path):
    """An Ed25519 private key from a PEM file (``openssl genpkey -algorithm ed25519``)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = _load_pem(path, lambda data: load_pem_private_key(data, password=None))
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path}: not an Ed25519 private key")
    return key


def load_public_key(path: str | Path):
    """An Ed25519 public key from a PEM file (or the public half of a private key file)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key

    def read(data: bytes):
        return (load_pem_private_key(data, password=None).public_key() if b"PRIVATE KEY" in data
                else load_pem_public_key(data))

    key = _load_pem(path, read)
    if isinstance(key, Ed25519PrivateKey):
        key = key.public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{path}: not an Ed25519 public key")
    return key


def _load_pem(path: str | Path, read):
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such key file")
    from cryptography.exceptions import UnsupportedAlgorithm

    try:
        return read(path.read_bytes())
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise InputError(f"{path}: not a PEM key ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def public_hex(public_key) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def sign(record: dict, private_key) -> dict:
    """Add an Ed25519 signature over the record's digest (the digest itself is unchanged)."""
    record["signature"] = {"algorithm": "ed25519", "public_key": public_hex(private_key.public_key()),
                           "signature": private_key.sign(record["digest"].encode("ascii")).hex()}
    return record
