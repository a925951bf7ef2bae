"""The held-out shift suite as a flow (``trainspotter benchmark --suite shift``): pools of
passages no model saw that differ in one property (trainspotter.evaluation.shift_suite), cached
feature extraction, Monte Carlo of the model's test and the blind check on the same
streams, the IID false-alarm and power cost of the guard, held-out pollution; one MLflow
run, results under --out (default: the artifacts folder; the committed tables are in
benchmarks/results/: shift.md, shift.json, plots)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from prefect import flow, get_run_logger

import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
from trainspotter import __version__
from trainspotter.auditing.tables import pollution
from trainspotter.config import flatten
from trainspotter.errors import InputError
from trainspotter.evaluation.plots import shift_plot
from trainspotter.evaluation.shift_suite import (DIFFICULTY_JUDGE, PLACEBO_PREFIX, ShiftConfig, render_markdown,
                                           scenario_trials, shift_pools, suite_tests, summarise, unseen_passages)
from trainspotter.testbeds.build import PRESETS, split_path
from trainspotter.features.features import FEATURE_SETS
from trainspotter.flows.benchmark import _extract, default_out
from trainspotter.flows.tracking import git_commit, use_experiment
from trainspotter.tasks.testbed import build_testbed_task


def _features(passages: list[dict], testbed: str) -> pd.DataFrame:
    """id, text and, of every passage, the lean features of each access (target + reference)
    and of the reference in the target's place (``placebo_<access>:`` columns, the placebo
    check's), from cached chunks."""
    unique = list({p["id"]: p for p in passages}.values())
    target, reference, lean = f"testbed:{testbed}", f"testbed:{testbed}/reference", FEATURE_SETS["lean"]
    parts = [pd.DataFrame(unique)[["id", "text"]]]
    for access in ("gray", "black"):
        parts.append(_extract(unique, target, reference, access, lean, 64))
        parts.append(_extract(unique, reference, None, access, lean, 64).add_prefix(PLACEBO_PREFIX.format(access)))
    return pd.concat(parts, axis=1).set_index("id", drop=False)


def _difficulty(testbed: str) -> dict[str, float] | None:
    """Mean log-probability per token of each unseen passage under the reference model of the
    sibling testbed ``DIFFICULTY_JUDGE`` names (the ``difficulty`` shift), or None (no judge)."""
    judge = DIFFICULTY_JUDGE.get(testbed)
    if judge is None:
        return None
    build_testbed_task(PRESETS[judge])
    unseen = unseen_passages(testbed)
    feats = _extract(unseen, f"testbed:{judge}/reference", None, "gray", FEATURE_SETS["lean"], 64)
    return {p["id"]: -math.log(ppl) for p, ppl in zip(unseen, feats["gray_ppl"])}


def _split(testbed: str, split: str) -> list[dict]:
    return [json.loads(line) for line in split_path(testbed, split).read_text(encoding="utf-8").splitlines()]


@flow(name="shift")
def shift_flow(config: ShiftConfig, tracking_uri: str | None = None) -> dict:
    logger = get_run_logger()
    if config.testbed not in PRESETS or PRESETS[config.testbed].base != "scratch":
        raise InputError(f"--testbed {config.testbed}: the shift suite needs a scratch testbed "
                         f"({', '.join(n for n, c in PRESETS.items() if c.base == 'scratch')})")
    build_testbed_task(PRESETS[config.testbed])
    difficulty = _difficulty(config.testbed) if "difficulty" in config.kinds else None
    pools = {k: v for k, v in shift_pools(config.testbed, config.seed, config.limit, difficulty=difficulty).items()
             if k in config.kinds}
    iid = {s: _split(config.testbed, s)[:config.limit] for s in ("member", "nonmember", "heldout")}
    every = [p for _, a, _, b in pools.values() for p in a + b] + [p for ps in iid.values() for p in ps]
    table = _features(every, config.testbed)
    test = config.test()
    tests = suite_tests(list(table.columns), test)
    rows = lambda ps: table.loc[[p["id"] for p in ps]]  # noqa: E731
    sizes = [n or config.n_max for n in config.sizes]
    scenarios, stops = [], {}
    for kind, (label_a, a, label_b, b) in pools.items():
        for (ls, s), (lh, h) in (((label_a, a), (label_b, b)), ((label_b, b), (label_a, a))):
            for n in sizes:
                if n and n >= min(len(s), len(h)):
                    continue  # the whole pools are their own row
                res = scenario_trials(rows(s), rows(h), tests, test, config.trials, n, config.seed)
                scenarios.append({"kind": kind, "suspect": ls, "heldout": lh, "size": n or 0,
                                  **summarise(res, test.alpha, h0=True)})
                stops[f"{kind}|{ls}|{n or 0}"] = res
                logger.info("%s: %s vs %s, n %d: default FPR %.3f, before %.3f, now %.3f", kind, ls, lh, res["pairs"],
                            scenarios[-1]["tests"]["gray"]["model"]["rate"],
                            scenarios[-1]["tests"]["gray"]["blind_only"]["rate"],
                            scenarios[-1]["tests"]["gray"]["guarded"]["rate"])
    iid_rows = []
    for split, h0 in (("member", False), ("nonmember", True)):
        for n in sizes:
            if n and n >= min(len(iid[split]), len(iid["heldout"])):
                continue
            res = scenario_trials(rows(iid[split]), rows(iid["heldout"]), tests, test, config.iid_trials, n,
                                  config.seed)
            iid_rows.append({"suspect": split, "heldout": "heldout", "h0": h0, "size": n or 0,
                             **summarise(res, test.alpha, h0=h0)})
            stops[f"iid|{split}|{n or 0}"] = res
    polluted = {}
    for name, suspect, pollutant, test_name in (
            ("members (power)", "member", None, "lean"), ("non-members (validity)", "nonmember", "member", "lean"),
            ("non-members, learned direction (before)", "nonmember", "member", "unoriented")):
        df = pd.concat([rows(iid[suspect]).assign(set="suspect"), rows(iid["heldout"]).assign(set="heldout")])
        cols, cfg = tests["gray" if test_name == "lean" else test_name]
        polluted[name] = pollution(df, cfg, config.pollution, config.pollution_trials, config.n_max, config.seed,
                                   cols, pollutant=rows(iid[pollutant]) if pollutant else None)
    out = Path(config.out) if config.out else default_out()
    out.mkdir(parents=True, exist_ok=True)
    header = (f"testbed `{config.testbed}` · git {git_commit()[:12]} · trainspotter {__version__} · "
              f"config {json.dumps(config.model_dump(mode='json', exclude={'out'}), separators=(',', ':'))}")
    summary = {"header": header, "scenarios": scenarios, "iid": iid_rows,
               "pollution": {k: {r: {m: v[m] for m in ("rejection_rate", "mean_stop", "censored_pairs")}
                                 for r, v in p["ratios"].items()} | {"pairs": p["pairs"]} for k, p in polluted.items()}}
    files = {"table": out / "shift.md", "summary": out / "shift.json", "plot": out / "shift.png",
             "stops": out / "shift-stops.npz"}
    np.savez_compressed(files["stops"], **{f"{key}|{name}": v for key, res in stops.items()
                                            for name, v in res["model"].items()},
                        **{f"{key}|blind": res["blind_stop"] for key, res in stops.items()})
    files["table"].write_text(render_markdown(summary, test.alpha))
    files["summary"].write_text(json.dumps(summary, indent=1))
    shift_plot(scenarios, test.alpha, files["plot"])
    experiment = use_experiment(f"benchmark/shift-{config.testbed}", tracking_uri)
    with mlflow.start_run(experiment_id=experiment, run_name="shift") as run:
        mlflow.log_params(flatten(config.model_dump(exclude={"out"})))
        mlflow.set_tags({"trainspotter.version": __version__, "git_commit": git_commit()})
        for s in scenarios:
            key = f"{s['kind']}.{s['suspect']}".replace(" ", "_").replace("(", "").replace(")", "")
            key = "".join(c for c in key if c.isalnum() or c in "._-")
            key += f".n{s['size']}"
            mlflow.log_metrics({f"{key}.model_fpr": s["tests"]["gray"]["model"]["rate"],
                                f"{key}.guarded_fpr": s["tests"]["gray"]["guarded"]["rate"],
                                f"{key}.blind_rate": s["blind"]["rate"]})
        for path in files.values():
            mlflow.log_artifact(str(path))
    return summary | {"run_id": run.info.run_id, "files": {k: str(v) for k, v in files.items()}}
