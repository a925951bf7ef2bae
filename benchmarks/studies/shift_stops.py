"""The shift suite's verdicts re-derived from its saved stop times (``benchmarks/shift_verdicts.py``):
``trainspotter benchmark --suite shift`` saves every trial's first-crossing time of every test and
of the blind check (shift-stops.npz); the verdicts ("trained on" before and now) are functions of
those and of the audit size (``evaluation.shift_suite.verdicts``), so a change of the rules needs no new
Monte Carlo."""

from __future__ import annotations

from trainspotter.evaluation.shift_suite import summarise

__all__ = ["rederive"]


def _result(stops, key: str, pairs: int, trials: int) -> dict:
    """A ``scenario_trials`` result read back from the saved stop times of one row (``key``)."""
    model = {k.split("|")[-1]: stops[k] for k in stops.files if k.startswith(key + "|") and not k.endswith("|blind")}
    return {"pairs": pairs, "trials": trials, "model": model, "blind_stop": stops[key + "|blind"]}


def rederive(summary: dict, stops, alpha: float = 0.05, note: str | None = None) -> dict:
    """shift.json's ``summary`` with every row's verdicts summarised again from ``stops`` (the
    loaded shift-stops.npz) under the current rules; ``note`` replaces the header's note."""
    if note is not None:
        summary["header"] = summary["header"].split(" · note: ")[0] + " · note: " + note
    for s in summary["scenarios"]:
        key = f"{s['kind']}|{s['suspect']}|{s['size']}"
        s.update(summarise(_result(stops, key, s["pairs"], s["trials"]), alpha, h0=True))
    for r in summary["iid"]:
        key = f"iid|{r['suspect']}|{r['size']}"
        r.update(summarise(_result(stops, key, r["pairs"], r["trials"]), alpha, h0=r["h0"]))
    return summary
