"""``audit_release``: one run of a keyed release's audit, continued from its ledger when named, sealed
(``keyed.audit`` for the batches, ``keyed.sealed`` for the record).

A named audit keeps, under the artifacts folder's keyed/ledger/NAME.json (``loop.ledger``'s locked,
atomic files), what must not change between runs (release, access, test), the e-process state, the
units scored (each counts once ever), every unit's record (the random keys' statistic is over all of
them), how many neutral texts were used and the record chain's head.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from trainspotter.config import artifacts_root
from trainspotter.errors import InputError
from trainspotter.keyed.audit import KeyedAuditConfig, neutral_texts, open_release, rank, rests_on, run_batches
from trainspotter.keyed.sealed import seal
from trainspotter.keyed.units import Seen
from trainspotter.loop.ledger import check_setup, ledger_lock, load_ledger, new_ledger, save_ledger, sweep_temps
from trainspotter.record.format import GENESIS, code_identity, model_identity

__all__ = ["audit_release", "ledger_root"]


def ledger_root(root: Path | None = None) -> Path:
    return (root or artifacts_root()) / "keyed"


def _setup(config: KeyedAuditConfig, release) -> dict:
    test = config.test
    return {"release": release.kr.manifest["commitment_sha256"], "access": config.access, "alpha": test.alpha,
            "reference": config.reference.text if config.reference is not None else None,
            "strategy": test.strategy, "prompts": str(config.prompts) if config.prompts else "packaged",
            # λ_max was 0.8 before it was a setting (None then, as in ledgers begun before it)
            **({"lambda_max": test.lambda_max} if test.lambda_max != 0.8 else {}),
            "seed": config.seed,
            # forced choice only (None otherwise, as in ledgers begun before it existed; so is one context);
            # its units weigh alike since record version 2: a ledger begun weighing them by n_u cannot continue
            **({"probe": "choose", "samples": config.samples, "weights": "alike"} if config.forced_choice else {}),
            **({"contexts": config.contexts} if config.forced_choice and config.contexts != 1 else {})}


def _verdict(reject: bool, release, ran_out: str | None = None) -> tuple[str, str]:
    """``ran_out``: the texts ran out before the budget was spent (how far it got, in words)."""
    if not reject:
        return "no evidence", ("the e-value stayed below 1/α within the budget" if ran_out is None else
                               f"the e-value stayed below 1/α when the prompts ran out ({ran_out})")
    status, detail = release.beacon_proof
    if status == "test":
        return "inconclusive", ("the e-value reached 1/α, but the key derives from a fixed test value, not a public "
                                "random value that appeared after the commitment: nothing shows nobody chose it")
    if status != "verified":  # a round given as ROUND:HEX, or one whose signature no longer holds
        return "inconclusive", (f"the e-value reached 1/α, but the key's beacon is {status} ({detail}), so nothing "
                                "shows nobody chose the key")
    ordered, said = release.order_proof
    if ordered == "failed":  # a stamp kept in the folder that no longer holds
        return "inconclusive", f"the e-value reached 1/α, but the commitment's timestamp does not hold: {said}"
    return "trained on", "the e-value reached 1/α against the exact null of the key's randomness"


def audit_release(config: KeyedAuditConfig, progress=None, backend=None, root: Path | None = None) -> dict:
    """One run (module docstring); ``backend``: a loaded model (default: ``config.model``'s)."""
    from trainspotter.backends import load_backend

    release = open_release(config.release)
    texts = neutral_texts(config, release)
    lock = ledger_lock(config.name, ledger_root(root)) if config.name else nullcontext()
    with lock:
        ledger = None
        if config.name:
            sweep_temps(config.name, ledger_root(root))
            ledger = load_ledger(config.name, ledger_root(root)) or new_ledger(config.name, _setup(config, release))
            if config.forced_choice and ledger["setup"].get("probe") == "choose" and "weights" not in ledger["setup"]:
                raise InputError(f"audit {config.name!r}: its ledger was begun when the forced choice weighed each "
                                 "unit by how often the release shows it; its bets cannot change rule mid-way, so "
                                 "start a new audit name")
            check_setup(ledger, _setup(config, release))
        stored = (ledger or {}).get("keyed") or {"state": None, "seen": None, "records": [], "texts_used": 0,
                                                "chain": GENESIS, "spent": 0}
        seen = Seen.from_dict(stored["seen"])
        start = {"state": stored["state"], "seen": seen.to_dict(), "chain": stored["chain"],
                 "texts_used": stored["texts_used"], "spent": stored["spent"]}
        backend = backend or load_backend(config.model)
        if not hasattr(backend, "model") and not config.forced_choice:  # continuations and gray-box read the weights
            raise InputError(f"model {config.model.text}: over an API a keyed audit asks a forced choice (--access "
                             "black --probe choose: logit_bias); continuations and gray-box need local weights "
                             "(hf:PATH or testbed:NAME)")
        reference = load_backend(config.reference) if config.reference is not None else None
        if reference is not None and not hasattr(reference, "model"):
            raise InputError(f"option --reference {config.reference.text}: the reference's log-probabilities are "
                             "read from local weights (hf:PATH or testbed:NAME)")
        run = run_batches(config, release, backend, texts[stored["texts_used"]:], seen, stored["state"], progress,
                          reference)
        proc = run["eprocess"]
        records = stored["records"] + [u for b in run["batches"] for u in b["units"]]
        unit = "generated tokens" if config.access == "black" else "passages"
        verdict, why = _verdict(bool(proc.rejected), release,
                                f"{run['spent']} of the budget's {run['budget']} {unit}" if run["ran_out"] else None)
        result = {"verdict": verdict, "why": why, "reject": bool(proc.rejected), "e_value": float(proc.e_value),
                  "p_value": float(proc.p_value), "units_total": len(records),
                  "units_this_run": len(records) - len(stored["records"]),
                  "spent_this_run": run["spent"], "spent_total": stored["spent"] + run["spent"],
                  "budget_unit": unit,
                  "rank": rank(config, release, records, float(np.log(proc.wealth))),
                  "rests_on": rests_on(release, config.reference), "alpha": config.test.alpha}
        b = release.beacon
        parts = {"header": {"name": config.name, "verdict": verdict},
                 "config": config.model_dump(mode="json"),
                 "release": {"commitment_sha256": release.kr.manifest["commitment_sha256"],
                             "manifest_files": release.kr.manifest["files"], "beacon": b.to_dict(),
                             "scoring": release.kr.commitment["scoring"]},
                 "model": model_identity(config.model), "code": code_identity(), "start": start, "result": result,
                 "reference": model_identity(config.reference) if config.reference is not None else None,
                 "end": {"state": proc.to_dict()}}
        record = seal(parts, run["batches"], start["chain"])
        if ledger is not None:
            ledger["keyed"] = {"state": proc.to_dict(), "seen": seen.to_dict(), "records": records,
                               "texts_used": stored["texts_used"] + run["texts_used"], "chain": record["end"]["chain"],
                               "spent": result["spent_total"]}
            ledger["runs"].append({"finished": time.time(), "model": config.model.text, "verdict": verdict,
                                   "e_value": result["e_value"], "units": result["units_this_run"],
                                   "spent": run["spent"], "record": record["digest"]})
            save_ledger(ledger, ledger_root(root))
    return result | {"record": record}
