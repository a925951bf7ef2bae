"""The twins suite as a flow (``trainspotter benchmark --suite twins``, issue 35 item 5): on a
twins testbed, every version's lean features (cached chunks, each text queried once), then
trainspotter.evaluation.twins_suite's rows (the per-sample AUROC of the paired features, the twins
e-process with every private version and with one, its H0 rate under fresh draws, STAMP's t-test,
today's unpaired audit of the same members and its controls); one MLflow run, results under --out
(default: the artifacts folder's benchmark-results/twins/TESTBED/): twins-suite.md, .json and
decided.png (the members' trials decided by t pairs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from prefect import flow, get_run_logger

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter.evaluation.plots import power_plot
from trainspotter.testbeds.build import PRESETS
from trainspotter.evaluation.twins_suite import LEAN, TwinsSuiteConfig, check_twins_testbed, render_markdown
from trainspotter.features.features import FEATURE_SETS
from trainspotter.flows.benchmark import _extract, default_out
from trainspotter.flows.tracking import log_suite_run, suite_header
from trainspotter.tasks.benchmark import twins_suite_task
from trainspotter.tasks.testbed import build_testbed_task


def _own_values(config: TwinsSuiteConfig, out: Path) -> dict:
    """Each version's lean features (N, k, p) per split in the twins folder's order, the testbed's
    draws, and the held-out passages' (N_h, p): one cached extraction per split (target and the
    testbed's reference, gray box; these columns do not depend on the twin)."""
    from trainspotter.twins.folder import load_twins

    target, reference = f"testbed:{config.testbed}", f"testbed:{config.testbed}/reference"
    values = {}
    for split in ("member", "nonmember"):
        tw = load_twins(out / f"twins-{split}")
        ids = tw.ids[:config.limit]
        passages = [{"id": f"{i}#{a}", "text": tw.variants[i][a]} for i in ids for a in range(tw.k)]
        df = _extract(passages, target, reference, "gray", FEATURE_SETS["lean"], 64)
        values[split] = df[LEAN].to_numpy(dtype=float).reshape(len(ids), tw.k, len(LEAN))
        values[f"public_{split}"] = np.array([tw.public[i] for i in ids])
    heldout = [json.loads(line) for line in (out / "heldout.jsonl").read_text(encoding="utf-8").splitlines()]
    values["heldout"] = _extract(heldout[:config.limit], target, reference, "gray", FEATURE_SETS["lean"],
                                 64)[LEAN].to_numpy(dtype=float)
    for name in ("member", "nonmember", "heldout"):
        if not np.isfinite(values[name]).all():
            raise ValueError(f"testbed {config.testbed}: non-finite lean features in its {name} passages")
    return values


def _key(*parts: str) -> str:
    """An MLflow metric name from row labels: letters, digits and ._- only."""
    return ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", p).strip("_") for p in parts)


def _metrics(res: dict) -> dict[str, float]:
    """The suite's numbers per row, as MLflow metrics."""
    out = {}
    for col, a in res["auroc"].items():
        out |= {_key("auroc", col, "paired"): a["paired"], _key("auroc", col, "unpaired"): a["unpaired"],
                _key("auroc", col, "tpr_at_1pct_fpr"): a["tpr_at_1pct_fpr"]}
    for section in ("twins", "unpaired"):
        for label, r in res[section].items():
            out[_key(section, label, "rate")] = r["rate"]
            if "p_above_alpha" in r:
                out[_key(section, label, "binom_p")] = r["p_above_alpha"]
            else:
                out[_key(section, label, "mean_pairs")] = r["mean_pairs_to_decision"]
    for name, row in res["stamp"].items():
        out[_key("stamp", name, "all_p")] = row["all"]["p"]
        out |= {_key("stamp", name, f"n{n}", "power"): v["power"] for n, v in row.items() if n != "all"}
    return {k: float(v) for k, v in out.items() if v is not None and np.isfinite(v)}


@flow(name="twins-suite")
def twins_suite_flow(config: TwinsSuiteConfig, tracking_uri: str | None = None) -> dict:
    logger = get_run_logger()
    check_twins_testbed(config.testbed)
    built = Path(build_testbed_task(PRESETS[config.testbed]))
    v = _own_values(config, built)
    res = twins_suite_task(v["member"], v["nonmember"], v["heldout"], v["public_member"], v["public_nonmember"],
                           LEAN, config.trials, config.alpha, config.seed)
    logger.info("twins suite on %s: %d members, %d non-members, k = %d", config.testbed, res["members"],
                res["nonmembers"], res["k"])
    out = Path(config.out) if config.out else default_out("twins", config.testbed)
    out.mkdir(parents=True, exist_ok=True)
    header = suite_header(config)
    files = {"table": out / "twins-suite.md", "summary": out / "twins-suite.json", "plot": out / "decided.png"}
    files["table"].write_text(render_markdown(res, f"Twins suite: testbed `{config.testbed}`", header))
    curves = res.pop("curves")
    power_plot(curves, files["plot"], title=f"Members' trials decided by t pairs ({config.testbed}, "
                                            f"k = {res['k']}, α = {config.alpha:g}, {config.trials} trials)")
    return log_suite_run(config, res, header, files, f"benchmark/twins-{config.testbed}", "twins", _metrics(res), tracking_uri)
