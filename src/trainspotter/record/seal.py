"""Sealing an audit's record (``trainspotter.record.format``: what it holds): the result of one run
bound by sha256 to its config, inputs, models, code, every passage and every pair's evidence,
the batches hash-chained onto the earlier run's chain head (a recurring audit's ledger keeps it)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from trainspotter.auditing.config import AuditConfig
from trainspotter.auditing.verdict import AuditResult
from trainspotter.features.answers import ANSWERS
from trainspotter.record.format import (BLIND_FIELDS, FORMAT, GENESIS, RESULT_FIELDS, SECTIONS, STEP_FIELDS, VERSION,
                                        batch_digest, code_identity, file_sha256, model_identity, record_digest, sha256,
                                        state_sha256, text_sha256)

__all__ = ["prior_of", "seal"]


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


def _placebo(result: AuditResult, texts: dict) -> dict:
    """The placebo check (trainspotter.auditing.placebo): its result and, when it ran, every pair's rows and wealth."""
    p = result.placebo
    rows = p._rows
    return {"result": p.model_dump(mode="json"),
            "pairs": [{"t": i + 1, "suspect": _row(rows[2 * i], texts), "heldout": _row(rows[2 * i + 1], texts),
                       "wealth": p.wealth[i]} for i in range(len(rows) // 2)]}


def _batches(result: AuditResult, texts: dict, batch_pairs: int, t0: int, previous: str) -> list[dict]:
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


def seal(result: AuditResult, config: AuditConfig, suspect: list[dict], heldout: list[dict],
         prior: dict | None = None, run_id: str | None = None) -> AuditResult:
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
        "inputs": {side: _input(getattr(config, side), passages[side]) for side in ("suspect", "heldout")}
        | _twins(config, result),
        "model": model_identity(config.model, result.api),
        "reference": [model_identity(r, result.api) for r in config.reference],
        "code": code_identity(), "passages": passages,
        "start": {"t0": t0, "wealth": result.wealth_start, "state": prior["state"], "columns": prior["columns"],
                  "state_sha256": state_sha256(prior["state"]), "used": prior["used"], "previous": prior["previous"]},
        "blind": {"wealth": list(result.blind.wealth)},
        "placebo": _placebo(result, texts),
        "result": {k: getattr(result, k) for k in RESULT_FIELDS}
        | {"blind": {k: getattr(result.blind, k) for k in BLIND_FIELDS}} | _rounds(result, config),
        "end": {"state": end_state, "state_sha256": state_sha256(end_state),
                "chain": batches[-1]["digest"] if batches else prior["previous"]},
        "batches": batches,
    }
    record = json.loads(json.dumps(record))  # as it reads back from the file (tuples → lists)
    record["sections"] = {s: sha256(record[s]) for s in SECTIONS}
    record["digest"] = record_digest(record)
    sealed = result.model_copy(update={"record_digest": record["digest"]})
    sealed._record = record
    return sealed


def _input(path: str, passages: list[dict]) -> dict:
    """One side's input: its path and file sha256, or for a dataset named by hub id
    (``trainspotter.hub_data``) the id, config, split, the revision asked and the commit read, and
    the sha256 of the rows read (each passage's id and text, in order)."""
    from trainspotter.data import hub_source

    source = hub_source(path)
    if source is None:
        return {"path": path, "sha256": file_sha256(path), "passages": len(passages)}
    return {"path": path, "hub": source, "sha256": sha256([[p["id"], p["text"]] for p in passages]),
            "passages": len(passages)}


def _rounds(result: AuditResult, config: AuditConfig) -> dict:
    """A twins audit of every private variant: how many sub-pairs each round of this run held
    (the batches' pairs with one ``t``) and how many texts it sent the model."""
    if not config.every_private:
        return {}
    of = result._auditor.round_of if result._auditor is not None else []
    return {"rounds": {"twins_private": "all", "sub_pairs": list(Counter(of).values()),
                       "texts_queried": result.texts_queried}}


def _twins(config: AuditConfig, result: AuditResult) -> dict:
    """A twins audit's draw (``trainspotter.twins.draw``): the commitment, the pinned one, what the
    folder showed of its draw (``result.draw``) and what re-derives it from the record alone: the
    manifest's commitment and draw (the beacon, the revealed secret, the public versions' salts)
    and the private versions' salts (the record holds their texts already)."""
    if config.twins is None:
        return {}
    draw = result.draw.model_dump(mode="json") if result.draw is not None else None
    manifest = Path(config.twins) / "manifest.json"
    if not manifest.is_file():  # (passages given in memory): nothing binds the draw
        return {"twins": {"path": config.twins, "manifest_sha256": None, "commitment": None, "draw": draw,
                          "proof": None}}
    from trainspotter.twins.folder import load_twins

    twins = load_twins(config.twins)
    m = twins.manifest
    salts = {f"{i}#{j}": s.hex() for i in twins.ids for j, s in twins.salts.get(i, {}).items() if j != twins.public[i]}
    proof = {"manifest": {k: m[k] for k in ("version", "k", "commitment", "draw") if k in m}, "salts": salts}
    return {"twins": {"path": config.twins, "manifest_sha256": file_sha256(str(manifest)),
                      "commitment": m["commitment"]["digest"], "draw": draw, "proof": proof}}
