"""What the command line costs over the library call (issue 38 item 7).

One audit — testbed `tiny`, 16 member/held-out pairs, gray box, no reference,
``--assume-exchangeable`` — run, each in a fresh process as a user runs it:

- ``library``: ``python -c "from trainspotter import audit; audit(...)"`` (no Prefect, no MLflow,
  features computed every time);
- ``cli --refresh``: ``trainspotter audit ... --json --refresh`` with the artifacts folder's local
  Prefect API already up (tasks/server.py): the same work as the library call (features
  computed again), plus Prefect, MLflow and the CLI — the overhead itself;
- ``cli``: the same without ``--refresh``: its batches come from the cache, as on a repeated audit;
- ``cli, cold API``: the same with the local API stopped first, so the call starts it (what
  every call paid before the API was shared: Prefect's temporary server per process);
- ``cli --refresh, no worker``: ``cli --refresh`` with ``TRAINSPOTTER_MODEL_WORKER=0``: the
  model loads and the features are computed in the CLI's own process (tasks/worker.py), as
  before the worker.

Each is the median of ``--repeats`` runs, interleaved so that load on the machine hits them
alike; the figures that count are the ratios to ``library`` of the same run. The e-values of
all three must agree. Then one more ``library`` and ``cli --refresh`` run each, timed phase by
phase in the process (``--child``: wrappers around the flow's and library's steps, the garbage
collector's callbacks, and the wall time left outside: interpreter start and exit).
Writes benchmarks/results/cli_overhead.{md,json}; ``--phases-only`` runs the breakdown alone
and prints it as JSON.

The runs and the tables: studies.cli_cost; the phase clock: harness.machine.PhaseClock.

    python benchmarks/bench_cli_overhead.py [--repeats 3] [--phases-only]
    python benchmarks/bench_cli_overhead.py --render   # cli_overhead.md from its JSON (its reading below kept)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from studies.cli_cost import (PAIRS, overhead_inputs, overhead_runs, phases, render_overhead, stop_api,
                                              timed)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
READING = "\n## Reading"  # what was written below the tables by hand after a run: kept by --render

# Phase timers of a ``--child`` process: (label, module, attribute) wrapped in place; a label
# seen twice adds up. The flow's own steps are looked up in flows/audit.py's namespace.
CLI_PHASES = [
    ("Prefect local API (find)", "trainspotter.tasks.server", "use_local_api"),
    ("flow run (Prefect engine and all below)", "trainspotter.flows.audit", "run_audit"),
    ("MLflow store + experiment", "trainspotter.flows.audit", "_experiment"),
    ("MLflow run setup (params, tags, inputs)", "trainspotter.flows.audit", "_log_setup"),
    ("MLflow run setup (params, tags, inputs)", "trainspotter.flows.audit", "log_dataset"),
    ("backend modules (torch), imported in the flow", "trainspotter.flows.audit", "_settle_backends"),
    ("task run (Prefect engine and all below)", "trainspotter.flows.audit", "extract_batch"),
    ("waiting for the model worker's rows", "trainspotter.tasks.worker", "rows"),
    ("MLflow step metrics", "trainspotter.flows.audit", "StepLogger.__call__"),
    ("MLflow step metrics", "trainspotter.flows.audit", "log_steps"),
    ("MLflow outputs (plot, report, artifacts)", "trainspotter.flows.audit", "log_audit_outputs"),
    ("record + provenance", "trainspotter.flows.audit", "_log_record"),
    ("record + provenance", "trainspotter.flows.audit", "audit_provenance"),
]
LIBRARY_PHASES = [  # the audit loop's own names (trainspotter.loop.run, `trainspotter.audit`)
    ("blind check", "trainspotter.loop.run", "blind_on"),
    ("model load (torch, transformers, weights)", "trainspotter.backends", "_load_backend"),
    ("features", "trainspotter.features.extract", "extract"),
    ("seal record", "trainspotter.loop.run", "seal"),
]


def child(mode: str, argv: list[str]) -> None:
    """One audit in this process, each phase timed (``PhaseClock``); the seconds go to $PHASES_OUT at exit."""
    from harness.machine import PhaseClock

    clock = PhaseClock(os.environ["PHASES_OUT"])
    if mode == "library":
        clock.imported("imports: trainspotter.audit", "trainspotter.loop.run")
        for phase in LIBRARY_PHASES:
            clock.wrap(*phase)
        from trainspotter import audit

        with clock.timed("audit() call"):
            result = audit(name="overhead", suspect=argv[0], heldout=argv[1], model="testbed:tiny", max_pairs=PAIRS,
                           assume_exchangeable=True)
        print(json.dumps({"e_value": result.e_value}))
        return
    clock.imported("imports: the CLI", "trainspotter.flows.cli")
    from trainspotter.tasks import worker

    serving = worker.serving

    @contextlib.contextmanager
    def serving_then_timed(specs):
        """flows/audit.py is imported and wrapped where the CLI imports it: after the model
        worker is forked (which needs a process without prefect's threads and torch)."""
        with serving(specs) as forked:
            clock.imported("imports: flows.audit (prefect, mlflow, library)", "trainspotter.flows.audit")
            for phase in CLI_PHASES + LIBRARY_PHASES:  # the model worker's (load, features) are not seen here
                clock.wrap(*phase)
            yield forked

    worker.serving = serving_then_timed
    from trainspotter.flows.cli import main

    sys.argv = ["trainspotter", *argv]
    with clock.timed("CLI command (all below)"):
        main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phases-only", action="store_true", help="only the phase breakdown, printed as JSON")
    parser.add_argument("--render", action="store_true", help="only rewrite cli_overhead.md from its JSON")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], args.child[1:])
    before_file, md = RESULTS / "cli_overhead.before.json", RESULTS / "cli_overhead.md"
    before = json.loads(before_file.read_text()) if before_file.exists() else None
    if args.render:
        reading = md.read_text()[md.read_text().index(READING):] if md.exists() and READING in md.read_text() else ""
        return md.write_text(render_overhead(json.loads((RESULTS / "cli_overhead.json").read_text()), before) + reading)
    root = Path(tempfile.mkdtemp(prefix="cli-overhead-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))}
    env |= {"TRAINSPOTTER_ARTIFACTS": str(root), "COLUMNS": "80"}
    suspect, heldout, library, cli = overhead_inputs(root, ROOT / "artifacts" / "testbeds" / "tiny", env)
    timed(cli, env)  # fills the feature cache and starts the local API
    me = [sys.executable, str(Path(__file__).resolve()), "--child"]
    breakdown = {"library": phases(me + ["library", suspect, heldout], env),
                 "cli --refresh": phases(me + ["cli", *cli[3:], "--refresh"], env),
                 "load_average_1min": os.getloadavg()[0]}
    if args.phases_only:
        stop_api(root)
        return print(json.dumps(breakdown, indent=1))
    result = overhead_runs(library, cli, env, root, args.repeats) | {"phases_one_run": breakdown}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cli_overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    md.write_text(render_overhead(result, before))
    print(md.read_text())


if __name__ == "__main__":
    main()
