"""The keyed suite as a flow (``trainspotter benchmark --suite keyed``, issue 53 item 5): on a keyed
testbed, trainspotter.evaluation.keyed_suite's rows (black-box continuations and forced choice,
and gray-box: TPR and budget to decision,
Sander's fixed-n test, STAMP's t-test and the key's rank on the same units; H0 rates over fresh keys
on models that never saw a release under them); one MLflow run, results under --out (default: the
artifacts folder's benchmark-results/keyed/TESTBED/): keyed-suite.md, .json and evidence.png."""

from __future__ import annotations

import re
from pathlib import Path

from prefect import flow, get_run_logger

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter.evaluation.keyed_suite_report import evidence_plot, render_markdown
from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig
from trainspotter.testbeds.build import PRESETS
from trainspotter.flows.benchmark import default_out
from trainspotter.flows.tracking import log_suite_run, suite_header
from trainspotter.tasks.benchmark import keyed_suite_task
from trainspotter.tasks.testbed import build_testbed_task


def _metrics(res: dict) -> dict[str, float]:
    out = {f"{access}.{k}": v for access in ("black", "choice", "gray") for k, v in (res.get(access) or {}).items()
           if isinstance(v, (int, float))}
    for model, rows in res["h0"].items():
        for access, row in rows.items():
            for test in ("eprocess", "fixed_n", "stamp", "rank"):
                if test in row:
                    out[re.sub(r"[^A-Za-z0-9_.-]+", "_", f"h0.{model}.{access}.{test}.rate")] = row[test]["rate"]
    return {k: float(v) for k, v in out.items()}


@flow(name="keyed-suite")
def keyed_suite_flow(config: KeyedSuiteConfig, tracking_uri: str | None = None) -> dict:
    built = Path(build_testbed_task(PRESETS[config.testbed]))
    res = keyed_suite_task(config, str(built))
    get_run_logger().info("keyed suite on %s: TPR %s", config.testbed, ", ".join(
        f"{a} {res[a]['tpr']:.2f}" for a in ("black", "choice", "gray") if res.get(a)))
    out = Path(config.out) if config.out else default_out("keyed", config.testbed)
    out.mkdir(parents=True, exist_ok=True)
    header = suite_header(config)
    files = {"table": out / "keyed-suite.md", "summary": out / "keyed-suite.json", "plot": out / "evidence.png"}
    files["table"].write_text(render_markdown(res, config, header))
    paths = res.pop("paths")
    evidence_plot(paths, files["plot"], config.test.alpha, title=f"Evidence against the budget ({config.testbed}, "
                                                           f"{config.trials} trials)")
    return log_suite_run(config, res, header, files, f"benchmark/keyed-{config.testbed}", "keyed", _metrics(res), tracking_uri)
