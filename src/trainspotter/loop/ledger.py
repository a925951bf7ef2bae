"""Evidence ledger: the stored state of a recurring audit, so that a later run
(new data, a new model version, a schedule) continues the same e-process.

Optional continuation (BADI Sec. 4, App. C.2): the wealth W_t is a test
supermartingale under H0 whatever the stopping time, so a new run may multiply
onto the stored wealth *and* the stored strategy/witness/scorer state, and feed
only pairs never used before. Restarting from W = 1 while keeping the old
evidence in mind would not be valid; the ledger makes continuation the default
and never restarts silently (a reset is an explicit new ledger name).

When the target model's weights change between runs, the product is an
e-process for the intersection null "no recorded version was trained on the
suspect set"; each segment records its model fingerprint so a report can say so.

Two overlapping runs of one audit must not both continue the same state (each would
multiply onto the same W and the second save would drop the first run's pairs), so a
continued run holds ``ledger_lock(name)`` from load to save; the other run waits.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock

from trainspotter.config import artifacts_root
from trainspotter.errors import InputError

if TYPE_CHECKING:
    from trainspotter.auditing.auditor import Auditor
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.auditing.verdict import AuditResult

SCHEMA = 1


def ledger_path(name: str, root: Path | None = None) -> Path:
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise InputError(f"audit name {name!r}: use letters, digits, '-', '_' or '.' (no slashes)")
    return (root or artifacts_root()) / "ledger" / f"{name}.json"


def ledger_lock(name: str, root: Path | None = None) -> FileLock:
    """The inter-process lock of one audit's ledger (a ``NAME.json.lock`` file beside it);
    hold it around load → run → save."""
    path = ledger_path(name, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path) + ".lock")


def load_ledger(name: str, root: Path | None = None) -> dict | None:
    """The stored ledger, or None when this audit has never run."""
    path = ledger_path(name, root)
    if not path.exists():
        return None
    try:
        ledger = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: corrupt ledger ({e.msg} at line {e.lineno})") from None
    if ledger.get("schema") != SCHEMA:
        raise InputError(f"{path}: ledger schema {ledger.get('schema')} is not {SCHEMA}")
    return ledger


def new_ledger(name: str, setup: dict) -> dict:
    """``setup`` pins what must not change between runs (feature columns, test config)."""
    return {"schema": SCHEMA, "name": name, "created": time.time(), "setup": setup,
            "state": None, "used": {"suspect": [], "heldout": []}, "runs": []}


def check_setup(ledger: dict, setup: dict) -> None:
    """Continuing with other features or another test config would change the game mid-way.
    The error names each setting that differs (``test.scorer``) with both values."""
    changed = _differences(ledger["setup"], setup)
    begun = {key: old for key, old, _ in changed if key == "matched"}
    if begun:  # a matched e-process and an ordinary one bet on different pairs under different assumptions
        name, option = ledger["name"], "--shift-check match"
        raise InputError(f"audit {name!r}: its ledger was begun as a matched audit ({option}) and cannot continue "
                         f"as an ordinary one; continue it with {option} or start a new audit name" if begun["matched"]
                         else f"audit {name!r}: its ledger was begun as an ordinary audit and cannot continue as a "
                         f"matched one ({option}); continue it without {option} or start a new audit name")
    if changed:
        said = "; ".join(f"{key}: stored {old!r}, now {new!r}" for key, old, new in changed)
        raise InputError(f"audit {ledger['name']!r}: settings differ from the stored ledger ({said}); continue "
                         f"with the stored settings or start a new audit name")


def _differences(old: dict, new: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append((prefix + key, a, b))
    return out


def save_ledger(ledger: dict, root: Path | None = None) -> Path:
    """Atomic write (temp file + rename): a crash never leaves half a ledger."""
    path = ledger_path(ledger["name"], root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(ledger))
    os.replace(tmp, path)
    return path


def sweep_temps(name: str, root: Path | None = None) -> list[Path]:
    """Remove the temp files that saves of ``name`` killed before their rename left behind
    (``NAME.tmpPID``; never read, the ledger itself is intact). Call it holding
    ``ledger_lock(name)``: no other save of this ledger can then be under way."""
    path = ledger_path(name, root)
    pattern = re.compile(re.escape(path.stem) + r"\.tmp\d+")
    stale = [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)] if path.parent.exists() else []
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def history(ledger: dict) -> list[dict]:
    """One row per run: pairs added, wealth before and after, decision so far."""
    return ledger["runs"]


def setup_of(config: "AuditConfig") -> dict:
    """What must not change between runs of a recurring audit (of twins: which private variants; a
    matched audit, ``shift_check`` "match", says so: its e-process bets on matched pairs only)."""
    return {"reference": config.model_dump(mode="json", include={"reference"})["reference"], "access": config.access,
            "features": config.features.model_dump(mode="json"), "test": config.test.model_dump()} | (
        {"twins_private": config.twins_private} if config.twins is not None else {}) | (
        {"matched": True} if config.shift_check == "match" else {})


def unused_passages(config: "AuditConfig", suspect: list[dict], heldout: list[dict], ledger: dict
                    ) -> tuple[list[dict], list[dict]]:
    """The passages of a continued audit that its ledger never bet on: of twins, a passage whose public
    version was bet on leaves with its twins (every private one: ``twins.rounds.unused``); otherwise each
    side on its own (a matched audit's, before it matches: ``trainspotter.loop.matched_ledger``)."""
    from trainspotter.twins.rounds import unused

    used = {side: set(ids) for side, ids in ledger["used"].items()}
    if config.every_private:
        return unused(suspect, heldout, used["suspect"])
    if config.twins is not None:  # aligned: a passage and its twin leave together
        keep = [n for n, p in enumerate(suspect) if p["id"] not in used["suspect"]]
        return [suspect[n] for n in keep], [heldout[n] for n in keep]
    return ([p for p in suspect if p["id"] not in used["suspect"]],
            [p for p in heldout if p["id"] not in used["heldout"]])


def as_stored(config: "AuditConfig", stored: dict) -> "AuditConfig":
    """A ledger written before the one-sided scorer existed holds an unoriented e-process: fill
    the fields it lacks with the values it was made with (``oriented`` False, all feature
    columns) and, unless the caller chose ``oriented`` explicitly, continue it as it is. Likewise
    a twins ledger begun before ``twins_private`` existed bet on one private variant ("one"); a
    twins audit that does not choose ``twins_private`` continues with the stored one."""
    stored["test"].setdefault("oriented", False)
    stored["features"].setdefault("relative_only", False)
    stored["features"].setdefault("twin_positions", False)
    if config.twins is not None:
        stored.setdefault("twins_private", "one")
        if "twins_private" not in config.model_fields_set:
            config = config.model_copy(update={"twins_private": stored["twins_private"]})
    if "oriented" not in config.test.model_fields_set and not stored["test"]["oriented"]:
        return config.model_copy(update={"test": config.test.model_copy(update={"oriented": False})})
    return config


def with_ledger(config: "AuditConfig") -> "AuditConfig":
    """A continued audit's config with what its stored ledger fixes and the caller left open
    (``as_stored``: e.g. which private twins), so its passages are read as they will be bet on."""
    stored = load_ledger(config.name) if config.ledger else None
    return config if stored is None else as_stored(config, stored["setup"])


def record_run(ledger: dict, config: "AuditConfig", auditor: "Auditor", result: "AuditResult", run_id: str) -> None:
    """Store the continued state, the passages consumed (each id once) and one history row."""
    if auditor.test is not None:
        ledger["state"], ledger["columns"] = auditor.test.to_dict(), auditor.columns
    for side in ("suspect", "heldout"):  # (twins "all": a public version is in each of its round's sub-pairs)
        ledger["used"][side] += list(dict.fromkeys(r["id"] for r in auditor.rows if r["set"] == side))
    ledger["runs"].append({
        "run_id": run_id, "finished": time.time(), "model": config.model.text,
        "model_fingerprint": config.model.fingerprint, "pairs_added": result.pairs_this_run,
        "pairs_total": result.pairs_used, "wealth_start": result.wealth_start,
        "wealth_end": result.wealth, "reject": result.reject, "e_value": result.e_value,
        "verdict": result.verdict, "blind_e_value": result.blind.e_value,
        "placebo_e_value": result.placebo.e_value if result.placebo.ran else None,
        "record_chain": result.record["end"]["chain"]}  # the next run's record continues this chain
        | ({"match": result.match.model_dump(mode="json")} if result.match is not None else {}))  # matched, dropped
