"""The shift suite's matched arm (issue 36): `audit --shift-check match` on the null shifts of
benchmarks/results/shift.md, on alternatives (members of one kind against unseen text of
another) and on IID splits, beside the default audit on the very same draws.

    TRAINSPOTTER_ARTIFACTS=/work/main/artifacts nice -n 10 .venv/bin/python benchmarks/bench_shift_matched.py \\
        --out benchmarks/results/shift-matched --sizes 20 40 80 --trials 200

Features come from the shift suite's cached extraction (flows/shift_suite.py ``_features``); the
rows are studies.shift_matched_runs, the tables shift_matched_tables. Sizes run
outermost (every scenario at 20, then 40, ...), and the tables are rewritten after every
scenario, so a run stopped early leaves complete smaller sizes. Size 0: the whole pools
(``--whole-trials`` trials).

Runs 3-6 of shift-matched.md (gray + reference, the form the CLI allows), e.g. the whole pools'
alternatives and IID splits, and the merge into the committed table:

    ... bench_shift_matched.py --out OUT --sizes 0 --whole-trials 100 --audits gray --parts alternative iid \\
        --table artifacts/shift-table.pkl
    ... bench_shift_matched.py --merge benchmarks/results/shift-matched NOTE OLD.json "run 3=RUN3.json" ...
    ... bench_shift_matched.py --ceilings RUN.json TABLE.pkl [TESTBED]   # alternatives' same-kind ceiling
    ... bench_shift_matched.py --shift-md benchmarks/results/shift.md benchmarks/results/shift-matched/shift-matched.json
    ... bench_shift_matched.py --render benchmarks/results/shift-matched   # shift-matched.md from its JSON

The text-only models' features side by side (issue 36 item 4: n-grams vs n-grams + MiniLM
embeddings, for the blind check and matching's propensity, on the very same draws;
studies.shift_text_features), gray features extracted by the library directly
(no Prefect, so no server), into text-features.md:

    ... bench_shift_matched.py --out OUT --table artifacts/gray.pkl --text-features ngrams ngrams+minilm \\
        --audits gray [--no-match] --sizes 20 40 80 0 --trials 200 --whole-trials 100 --name blind-check

(the runs of shift-matched/text-features.md: A as above with --no-match; B --sizes 40 --trials 100;
C --sizes 0 --whole-trials 30 --kinds period topic --parts alternative null; D --sizes 0
--whole-trials 20 --parts iid; their tables joined into text-features.md with a short preamble)

Per trial the cost is ``match_pairs``: five cross-fitted logistic fits (about 75% of it; L-BFGS on
~50,000 TF-IDF columns) and their designs, about 2-6 s at 1000-2000 passages a side on one
shared core; the streams of all trials run as one batch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from trainspotter.evaluation.shift_suite import AUDITS, KINDS
from studies.shift_matched_runs import MatchedRuns, add_ceilings, greedy_match, run_scenarios
from studies.shift_matched_tables import merge, render, with_shift_section
from studies.shift_text_features import TextFeatureRuns, compare_text_features, render_text_features


def setup(testbed: str, seed: int, table: str | None):
    """The pools, IID splits and features of the shift suite (its cached Prefect tasks), or this
    script's own earlier setup from ``table`` (a pickle, written when missing)."""
    cached = Path(table) if table else None
    if cached and cached.exists():
        return pd.read_pickle(cached)
    import trainspotter.tasks  # noqa: F401  (configures Prefect/MLflow environment first)
    from prefect import flow

    from trainspotter.evaluation.shift_suite import shift_pools
    from trainspotter.flows.shift_suite import _difficulty, _features, _split

    @flow(name="shift-matched")
    def extracted():
        pools = shift_pools(testbed, seed, None, difficulty=_difficulty(testbed))
        iid = {s: _split(testbed, s) for s in ("member", "nonmember", "heldout")}
        every = [p for _, a, _, b in pools.values() for p in a + b] + [p for ps in iid.values() for p in ps]
        return pools, iid, _features(every, testbed)  # the suite's own extraction, cached

    out = extracted()
    if cached:
        pd.to_pickle(out, cached)
    return out


def writer(out: Path, name: str, render_one):
    """What writes NAME.json and NAME.md under ``out`` after every row."""
    out.mkdir(parents=True, exist_ok=True)

    def write(summary: dict) -> None:
        (out / f"{name}.json").write_text(json.dumps(summary, indent=1))
        (out / f"{name}.md").write_text(render_one(summary, 0.05))
    return write


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed", default="tiny-pretrain")
    ap.add_argument("--out", default="benchmarks/results/shift-matched")
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 40, 80])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--whole-trials", type=int, default=20)
    ap.add_argument("--size-trials", nargs="*", default=[], help="SIZE:TRIALS overrides, e.g. 80:100 0:10")
    ap.add_argument("--kinds", nargs="+", default=list(KINDS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--audits", nargs="+", default=list(AUDITS), choices=list(AUDITS),
                    help="audits to run (the CLI's --shift-check match allows gray only: gray + reference)")
    ap.add_argument("--timing-sizes", type=int, nargs="*", default=[20, 80, 320, 0],
                    help="n per side of the match_pairs timings in the header (none: skip them)")
    ap.add_argument("--table", default=None, help="pickle of the pools and features: read if present, else written")
    ap.add_argument("--greedy", action="store_true", help="greedy nearest-first matching (the baseline) instead of optimal")
    ap.add_argument("--match-every", action="store_true",
                    help="match every draw (the audit matches only where the blind check fired on the draw)")
    ap.add_argument("--parts", nargs="+", default=["null", "alternative", "iid"], help="which, in this order")
    ap.add_argument("--text-features", nargs="+", default=None, choices=["ngrams", "ngrams+minilm"],
                    help="compare these text features of the blind check and matching on the same draws "
                         "(gray features extracted by the library, no Prefect; tables NAME.md/json)")
    ap.add_argument("--name", default="text-features", help="file stem of the --text-features tables")
    ap.add_argument("--no-match", action="store_true", help="(with --text-features) the blind check and the "
                    "default audit only, no matching")
    args = ap.parse_args()
    args.size_trials = {int(k): int(v) for k, v in (x.split(":") for x in args.size_trials)}
    return args


def files(argv: list[str]) -> bool:
    """The verbs that only read and write results files; False if ``argv`` is a run."""
    if argv[:1] == ["--merge"]:  # --merge OUT NOTE [LABEL=]RUN.json...
        runs = [p.split("=", 1) if "=" in p else (None, p) for p in argv[3:]]
        writer(Path(argv[1]), "shift-matched", render)(merge([(label, json.loads(Path(p).read_text()))
                                                              for label, p in runs], argv[2]))
    elif argv[:1] == ["--ceilings"]:  # --ceilings RUN.json TABLE.pkl [TESTBED]
        path, (pools, iid, frame) = Path(argv[1]), pd.read_pickle(argv[2])
        summary = add_ceilings(json.loads(path.read_text()), pools, iid, frame, *argv[3:4])
        path.write_text(json.dumps(summary, indent=1))
        path.with_suffix(".md").write_text(render(summary, 0.05))
    elif argv[:1] == ["--shift-md"]:  # --shift-md SHIFT.md SHIFT-MATCHED.json
        path = Path(argv[1])
        path.write_text(with_shift_section(path.read_text(), json.loads(Path(argv[2]).read_text())))
    elif argv[:1] == ["--render"]:  # --render OUT: OUT/shift-matched.md from OUT/shift-matched.json
        out = Path(argv[1])
        (out / "shift-matched.md").write_text(render(json.loads((out / "shift-matched.json").read_text()), 0.05))
    else:
        return False
    return True


def main() -> None:
    if files(sys.argv[1:]):
        return
    args = parse()
    from trainspotter import __version__
    from harness.machine import git_commit

    if args.greedy:  # the baseline rule in optimal matching's place, wherever the audit matches
        import trainspotter.auditing.matching

        trainspotter.auditing.matching.optimal_match = greedy_match
    options = {k: v for k, v in vars(args).items() if k in TextFeatureRuns.model_fields}
    if args.text_features:
        runs = TextFeatureRuns(**options)
        print(compare_text_features(runs, args.table, git_commit(), __version__,
                                    writer(Path(args.out), args.name, render_text_features)))
        return
    runs = MatchedRuns(**{k: v for k, v in options.items() if k in MatchedRuns.model_fields})
    pools, iid, table = setup(runs.testbed, runs.seed, args.table)
    print(run_scenarios(pools, iid, table, runs, git_commit(), __version__,
                        writer(Path(args.out), "shift-matched", render)))


if __name__ == "__main__":
    main()
