"""The sealed audit record: one JSON document that binds an audit's verdict to its inputs,
model, code and every pair's evidence by sha256, so that anyone can check it offline
(``trainspotter.record.verify``; docs/guide/check.md).

What it holds (sections, each with its own sha256 in ``sections``):

- ``config``: the audit's config, every seed included; ``inputs``: each input file's sha256;
- ``passages``: every available passage (id, text, sha256 of the text), in file order, so the
  pair order can be derived again from the seed and the blind check replayed from the texts;
- ``model``/``reference``: the models' identity (weight files' sha256 and dtype, and a hub
  model's id, revision asked and commit; for an API
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
import hashlib
import json
import subprocess
from pathlib import Path

from trainspotter.errors import InputError

__all__ = ["BLIND_FIELDS", "FORMAT", "GENESIS", "READABLE", "REPLAY_CODE", "RESULT_FIELDS", "SECTIONS", "STEP_FIELDS",
           "VERSION", "batch_digest", "canonical", "code_identity", "file_sha256", "load_record", "model_identity",
           "record_digest", "sha256", "state_sha256", "text_sha256"]

# version 2: each side of a pair may hold the model's answers its features came from (``answers``)
FORMAT, VERSION = "trainspotter-audit-record", 2
READABLE = (1, 2)  # the versions ``verify`` reads (a version 1 record: features not recomputed)
GENESIS = "0" * 64  # the chain's start before a fresh e-process's first batch
SECTIONS = ("header", "config", "inputs", "model", "reference", "code", "passages", "start", "blind",
            "placebo", "result", "end")
STEP_FIELDS = ("wealth", "lambda", "u", "score_x", "score_y")
# The library code a replay depends on (verify reports when the checkout's differs).
REPLAY_CODE = ("trainspotter.auditing.auditor", "trainspotter.data", "trainspotter.auditing.verdict",
               "trainspotter.record.format", "trainspotter.record.seal",
               "trainspotter.features.text", "trainspotter.features.orientation", "trainspotter.features.catalog",
               "trainspotter.presets", "trainspotter.twins.rounds",
               "trainspotter.stats.sequential", "trainspotter.stats.blind", "trainspotter.stats.eprocess",
               "trainspotter.stats.payoffs", "trainspotter.stats.strategies", "trainspotter.stats.scoring",
               "trainspotter.stats.newton_scorer", "trainspotter.stats.adam_scorer",
               "trainspotter.stats.fixed_scorer", "trainspotter.stats.quantiles", "trainspotter.stats.oriented_qp",
               "trainspotter.stats.pvalue",
               # the features recomputed from the recorded answers
               "trainspotter.features.answers", "trainspotter.features.answer_codec", "trainspotter.features.black_answers",
               "trainspotter.features.features",
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
    root = Path(__file__).parents[1]  # the package: trainspotter/
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
    """What answered: weight files' sha256 and dtype (hf:, testbed:; a model named by hub id: its
    id, the revision asked and the commit it resolved to, ``hub``); for openai: the model,
    the base URL's host, the fingerprint of model, endpoint, tokenizer files and query mode,
    and how the server was queried (``AuditResult.api``: its mode and the server builds,
    ``system_fingerprints``, that gave the answers). Never an API key."""
    from urllib.parse import urlparse

    if spec.remote:
        mine = {k: v for k, v in (api or {}).items() if k.startswith(f"{spec.model}@")}
        tok = spec.tokenizer if getattr(spec.tokenizer, "snapshot", None) is not None else None
        return {"scheme": spec.scheme, "model": spec.model, "host": urlparse(spec.where).hostname,
                "fingerprint": spec.fingerprint, "server": mine} | ({"tokenizer": _hub(tok)} if tok else {})
    from trainspotter.backends.spec import resolve_spec
    from trainspotter.backends.weights import _file_digest

    try:
        path = resolve_spec(spec)
    except InputError as e:  # a library audit with its own extract_fn may name a model it never loads
        return {"scheme": spec.scheme, "spec": spec.base, "weights_sha256": None, "fingerprint": None,
                "missing": str(e)}
    files = [path] if path.is_file() else sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
    weights = {f.name: _file_digest(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files}
    return {"scheme": spec.scheme, "spec": spec.base, "dtype": spec.options.get("dtype", "float32"),
            "weights_sha256": weights, "fingerprint": spec.fingerprint} | _hub(spec)


def _hub(spec) -> dict:
    """A model named by hub id: ``{"hub": {"id", "revision" asked, "commit"}}`` (else nothing)."""
    from trainspotter.backends.hub_models import hub_identity

    return {"hub": hub_identity(spec.snapshot)} if spec.snapshot is not None else {}


RESULT_FIELDS = ("verdict", "guard", "reject", "model_reject", "e_value", "wealth_start", "wealth", "max_wealth",
                 "p_value", "stop_time", "stopped_by", "pairs_used", "pairs_this_run", "pairs_available",
                 "alpha", "features", "baseline_p_value")
BLIND_FIELDS = ("fired", "e_value", "max_wealth", "p_value", "pairs_used", "pairs_available", "stop_time", "alpha")


def record_digest(record: dict) -> str:
    """The one digest over a record: its section digests and the chain head."""
    return sha256({"format": record["format"], "version": record["version"], "sections": record["sections"],
                   "chain": record["end"]["chain"]})


def load_record(path: str | Path) -> dict:
    """A record read from ``path``; InputError naming the file when it is missing, not JSON
    (a truncated file), not a trainspotter record or lacking a part."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file, so not an audit record") from None
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}"  # e.msg may end in "starting at" already
        raise InputError(f"{path}: not a complete JSON document ({e.msg}{'' if e.msg.endswith(' at') else ' at'} "
                         f"{where}): truncated, or not an audit record") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"{path}: not a trainspotter audit record (no \"format\": \"{FORMAT}\")")
    if record.get("version") not in READABLE:
        raise InputError(f"{path}: record version {record.get('version')!r}; this trainspotter reads "
                         f"{', '.join(map(str, READABLE))} (writes {VERSION})")
    missing = [k for k in (*SECTIONS, "batches", "sections", "digest") if k not in record]
    if missing:
        raise InputError(f"{path}: the record has no {', '.join(missing)}")
    return record
