"""The sealed record of a keyed audit and its offline check (``trainspotter verify`` on a keyed
record; ``trainspotter.record.format`` for the digests).

A record holds ``SECTIONS`` (each with its sha256 in ``sections``) and ``batches``: per batch, the
model's answers (prompts and continuations, or the neutral passages), the units read from them,
each unit's outcome x and null mean p under the release key, its weight w and the log-wealth
after it;
hash-chained (batch k: sha256(digest of batch k−1 ‖ its content)), the first batch continuing the
chain head a named audit's ledger stored for its run before. ``digest`` binds the sections and
the chain head. ``verify_keyed`` checks every digest and the chain, replays the e-process from the
recorded outcomes, and, given the release folder with the owner's secret, re-derives the key,
reads the units again from the recorded answers and recomputes every outcome, null mean and weight.
"""

from __future__ import annotations

import math
import time
from itertools import groupby
from pathlib import Path

import numpy as np

from trainspotter.errors import InputError
from trainspotter.record.format import GENESIS, sha256
from trainspotter.stats.eprocess import EProcess, EProcessConfig
from trainspotter.stats.exact_null import unit_payoffs

__all__ = ["FORMAT", "seal", "verify_keyed"]

# version 2: the forced choice weighs every unit 1 (``keyed.score``); version 1 records weighed it by n_u
FORMAT, VERSION = "trainspotter-keyed-record", 2
SECTIONS = ("header", "config", "release", "model", "reference", "code", "start", "result", "end")


def _chain(prev: str, batch: dict) -> str:
    body = {k: v for k, v in batch.items() if k != "digest"}
    return sha256({"prev": prev, "batch": body})


def seal(parts: dict, batches: list[dict], chain: str = GENESIS) -> dict:
    """The record of one run: ``parts`` (every section but ``end``), its batches chained onto ``chain``."""
    for b in batches:
        b["digest"] = chain = _chain(chain, b)
    record = {"format": FORMAT, "version": VERSION, **parts, "end": parts.get("end", {}) | {"chain": chain},
              "batches": batches}
    record["header"] = record["header"] | {"sealed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    record["sections"] = {s: sha256(record[s]) for s in SECTIONS}
    record["digest"] = sha256({"format": FORMAT, "version": VERSION, "sections": record["sections"], "chain": chain})
    return record


def load_keyed(path: Path, record: dict) -> dict:
    missing = [k for k in (*SECTIONS, "batches", "sections", "digest") if k not in record]
    if missing or record.get("version") not in (1, VERSION):
        raise InputError(f"{path}: a keyed record of version {record.get('version')!r} without "
                         f"{', '.join(missing) or 'nothing'}; this trainspotter reads versions 1 to {VERSION}")
    return record


def _digests(record: dict) -> tuple[bool, str]:
    bad = [s for s in SECTIONS if sha256(record[s]) != record["sections"][s]]
    if bad:
        return False, f"section {bad[0]} differs from its sha256"
    chain = record["start"]["chain"]
    for n, b in enumerate(record["batches"], start=1):
        chain = _chain(chain, b)
        if chain != b["digest"]:
            return False, f"batch {n}: its digest does not continue the chain"
    if chain != record["end"]["chain"]:
        return False, "the chain's head is not the one sealed"
    want = sha256({"format": FORMAT, "version": record["version"], "sections": record["sections"], "chain": chain})
    return want == record["digest"], "every section and batch matches its sha256" if want == record["digest"] else \
        "the record's digest differs"


def _replay(record: dict) -> tuple[bool, str]:
    """The e-process again from the recorded start state and outcomes."""
    state, cfg = record["start"]["state"], record["config"]
    # sealed before the keyed audit took its test settings: a flat alpha and strategy, and λ_max 0.8
    test = cfg.get("test") or {"alpha": cfg["alpha"], "strategy": cfg["strategy"], "lambda_max": 0.8}
    proc = EProcess.from_dict(state) if state else EProcess.of(EProcessConfig.model_validate(test))
    for n, b in enumerate(record["batches"], start=1):
        # a record sealed before units were weighted has no "w": every weight was 1
        for i, u in enumerate(unit_payoffs(np.asarray(b["x"], dtype=float), np.asarray(b["p"], dtype=float),
                                           b.get("w"))):
            proc.update(u)
            if not math.isclose(float(proc.log_wealth[0]), b["log_wealth"][i], rel_tol=1e-9, abs_tol=1e-9):
                return False, f"batch {n}, unit {i + 1}: log-wealth {proc.log_wealth[0]:.6g} replayed, " \
                              f"{b['log_wealth'][i]:.6g} recorded"
    r = record["result"]
    if proc.rejected != r["reject"] or not math.isclose(float(proc.e_value), r["e_value"], rel_tol=1e-9):
        return False, f"the replay ends at e-value {float(proc.e_value):.6g}, the result says {r['e_value']:.6g}"
    return True, f"{sum(len(b['x']) for b in record['batches'])} units replayed: e-value {r['e_value']:.4g}"


def _recompute(record: dict, folder: Path) -> list[tuple[str, bool, str]]:
    """With the owner's release folder: the key, every unit from the answers and every (x, p)."""
    from trainspotter.keyed.audit import KeyedAuditConfig, open_release
    from trainspotter.keyed.units import Seen
    from trainspotter.keyed.release import verify_release

    checks = [(f"release {name}", ok, detail) for name, ok, detail in verify_release(folder)]
    release = open_release(folder)
    if release.kr.manifest["commitment_sha256"] != record["release"]["commitment_sha256"]:
        return checks + [("release", False, f"{folder} is not the release this record audited")]
    config = KeyedAuditConfig.model_validate(record["config"] | {"release": str(folder)})
    seen = Seen.from_dict(record["start"]["seen"])
    alike = config.forced_choice and record["version"] >= 2  # the weights its version's rule gave (VERSION)
    for n, b in enumerate(record["batches"], start=1):
        units = _units_again(config, release, b["answers"], seen) if config.access == "black" else b["units"]
        if units != b["units"]:
            return checks + [("units", False, f"batch {n}: the units read from the recorded answers differ")]
        x, p = release.scoring.outcomes(units, release.key, seen)
        if not (np.allclose(x, b["x"], atol=1e-12) and np.allclose(p, b["p"], atol=1e-12)):
            return checks + [("outcomes", False, f"batch {n}: an outcome or null mean differs under the derived key")]
        if "w" in b and not np.allclose(release.scoring.weights(units, alike), b["w"], atol=1e-12):
            return checks + [("outcomes", False, f"batch {n}: a unit's weight differs from "
                                                 + ("1, the forced choice's" if alike else "the release's counts"))]
    weighed = "" if not any("w" in b for b in record["batches"]) else \
        " and weighed alike (forced choice)" if alike else " and weighed by the release's counts"
    return checks + [("outcomes", True, "every unit read again from the answers and scored under the re-derived key"
                                        + weighed)]


def _units_again(config, release, answers: list[dict], seen) -> list[dict]:
    from trainspotter.keyed.units import lexical_units, window_units

    if config.forced_choice:  # a unit's answers (one per context) pooled; each unit once ever
        out = []
        for unit, asked in groupby(answers, key=lambda a: a["unit"]):
            again = release.scoring.forms.choice_record(unit, [d for a in asked for d in a["draws"]]) \
                if unit not in seen.units else {"unit": None}
            out += [again] if again is not None else []
            seen.units.add(unit)
        return out
    out = []
    for a in answers:
        if release.tokenizer is None:
            out += [{"unit": u, "form": j} for u, j in lexical_units(release.scoring.forms, a["prompt"],
                                                                     a["continuation"], seen)]
        else:
            ids = release.tokenizer(a["continuation"], add_special_tokens=False)["input_ids"]
            given = release.tokenizer(a["prompt"], add_special_tokens=False)["input_ids"]
            out += [{"prev": u, "next": v} for u, v in window_units(given, ids, seen)]
    return out


def verify_keyed(records: list[tuple[str, dict]], release: Path | None = None) -> list[tuple[str, bool, str]]:
    """Every check of one or more keyed records (a named audit's runs, oldest first): digests and
    chain, each continuing the one before, the e-process replayed, and with ``release`` (the owner's
    folder) the key and every outcome recomputed."""
    checks = []
    for n, (path, record) in enumerate(records):
        ok, detail = _digests(record)
        checks.append((f"digests {Path(path).name}", ok, detail))
        if n and record["start"]["chain"] != records[n - 1][1]["end"]["chain"]:
            checks.append(("continues", False, f"{path} does not continue {records[n - 1][0]}"))
        checks.append((f"e-process {Path(path).name}", *_replay(record)))
        if release is not None:
            checks += _recompute(record, Path(release))
    return checks
