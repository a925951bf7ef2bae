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

    python benchmarks/bench_cli_overhead.py [--repeats 3] [--phases-only]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import gc
import importlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAIRS = 16


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, e-value printed last as JSON) of one fresh process."""
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    seconds = time.perf_counter() - start
    if out.returncode not in (0, 1, 3):  # trained on / no evidence / inconclusive
        sys.exit(f"{cmd[:4]} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return seconds, float(json.loads(out.stdout)["e_value"])


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
LIBRARY_PHASES = [
    ("blind check", "trainspotter.audit", "blind_on"),
    ("model load (torch, transformers, weights)", "trainspotter.backends", "_load_backend"),
    ("features", "trainspotter.features.extract", "extract"),
    ("seal record", "trainspotter.audit", "seal"),
]


def _child(mode: str, argv: list[str]) -> None:
    """One audit in this process, each phase timed; the seconds go to $PHASES_OUT at exit."""
    start, seconds, gc_time = time.perf_counter(), {}, [0.0, 0.0]

    def wrap(label: str, module: str, attr: str) -> None:
        owner = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def timed_call(*a, **k):
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed_call)

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_time[1] = time.perf_counter()
        else:
            gc_time[0] += time.perf_counter() - gc_time[1]

    def imported(label: str, module: str) -> None:
        t = time.perf_counter()
        importlib.import_module(module)
        seconds[label] = time.perf_counter() - t

    gc.callbacks.append(on_gc)
    atexit.register(lambda: Path(os.environ["PHASES_OUT"]).write_text(json.dumps(
        seconds | {"garbage collection (within the above)": gc_time[0], "in process": time.perf_counter() - start})))
    if mode == "library":
        imported("imports: trainspotter.audit", "trainspotter.audit")
        for phase in LIBRARY_PHASES:
            wrap(*phase)
        from trainspotter import audit

        t = time.perf_counter()
        result = audit(name="overhead", suspect=argv[0], heldout=argv[1], model="testbed:tiny", max_pairs=PAIRS,
                       assume_exchangeable=True)
        seconds["audit() call"] = time.perf_counter() - t
        print(json.dumps({"e_value": result.e_value}))
        return
    imported("imports: the CLI", "trainspotter.flows.cli")
    worker = importlib.import_module("trainspotter.tasks.worker")
    serving = worker.serving

    @contextlib.contextmanager
    def serving_then_timed(specs):
        """flows/audit.py is imported and wrapped where the CLI imports it: after the model
        worker is forked (which needs a process without prefect's threads and torch)."""
        with serving(specs) as forked:
            imported("imports: flows.audit (prefect, mlflow, library)", "trainspotter.flows.audit")
            for phase in CLI_PHASES + LIBRARY_PHASES:  # the model worker's (load, features) are not seen here
                wrap(*phase)
            yield forked

    worker.serving = serving_then_timed
    from trainspotter.flows.cli import main

    sys.argv = ["trainspotter", *argv]
    t = time.perf_counter()
    try:
        main()
    finally:
        seconds["CLI command (all below)"] = time.perf_counter() - t


def phases(cmd: list[str], env: dict) -> dict[str, float]:
    """Seconds per phase of one audit run as ``--child`` (``cmd``: the child's command)."""
    out = Path(tempfile.mkdtemp(prefix="phases-")) / "phases.json"
    wall, _ = timed(cmd, env | {"PHASES_OUT": str(out)})
    seconds = json.loads(out.read_text())
    return seconds | {"interpreter start + exit": wall - seconds["in process"], "wall": wall}


def breakdown_lines(now: dict[str, dict[str, float]]) -> list[str]:
    """The phase table of one library and one ``cli --refresh`` run, beside the same table
    measured before the fixes (cli_overhead.before.json, written by ``--phases-only`` on the
    commit before them) when there is one. A phase nested in another is indented under it."""
    before_file = RESULTS / "cli_overhead.before.json"
    runs = {"now": now} | ({"before": json.loads(before_file.read_text())} if before_file.exists() else {})
    columns = [(when, run) for when in runs for run in ("library", "cli --refresh")]
    labels = list(dict.fromkeys(k for run in ("cli --refresh", "library") for when in runs for k in runs[when][run]))
    head = " | ".join(f"{run} ({when})" for when, run in columns)
    lines = ["## Where the time goes (one run of each, seconds)", "",
             f"| phase | {head} |", "|---|" + "---:|" * len(columns)]
    for label in labels:
        cells = [runs[when][run].get(label) for when, run in columns]
        lines.append(f"| {label} | " + " | ".join("" if c is None else f"{c:.2f}" for c in cells) + " |")
    loads = ", ".join(f"{when}: {runs[when].get('load_average_1min', float('nan')):.1f}" for when in runs)
    extra = "; ".join(f"{when}: {runs[when]['cli --refresh']['wall'] - runs[when]['library']['wall']:.1f} s"
                      for when in runs)
    return lines + ["", f"1-min load average when each breakdown was taken: {loads}. The CLI's wall time "
                    f"less the library's in these runs: {extra}.", "", *NOTES]


NOTES = """Phases nest: `flow run` holds everything the flow does, `task run` holds the features of
the batch; `garbage collection` is spread over all of them. In the CLI the model loads and the
features are computed in the model worker (tasks/worker.py), a process forked before flows/audit.py
is imported: its phases are not seen here, only `waiting for the model worker's rows` (within
`task run`). The CLI's own process then imports neither torch nor transformers (the fingerprints
and the sealed record read the weights' files: backends/weights.py); `backend modules` is that
import where no worker serves. In the library the torch import falls in `model load`.

Before the earlier fixes a CLI audit paid, beyond the library's work: the imports of prefect,
mlflow and the CLI (the largest part); the SQLite MLflow store's first use (its SQLAlchemy models
are imported then); the plot and the report; the Prefect flow and task engines; and the cyclic
garbage collector, which walked the ~0.4 M objects those imports build at every full collection.
`trainspotter.tasks.settled_imports` imports flows/audit.py's modules with the collector paused
and freezes what they built; `freeze_at_exit` freezes everything when the exit handlers are done,
so the CLI no longer pays the last collection (the library call, which imports no flow, still
does). What was left, the import of prefect and mlflow and MLflow's store (nearly all of it the
import of SQLAlchemy, alembic and MLflow's table models, and mapper configuration: its alembic
schema check is ~3% of it), is pure Python work that every fresh process pays, one core at a time.
On 2 cores the model worker takes the model's side of the audit (torch's and transformers' import
in that process, the weights, the features) off that core: both run at once, and the CLI's
process waits only for what is left of the worker's work when the first batch is due. A thread
does not do this: the same MLflow store setup in a thread beside the model load took longer than
the two one after the other (16.4-18.4 s against 14.9-16.1 s, one process each, load ~8), as both
hold the GIL. All figures are of one run each; when other work loads the 2 cores (the load
average above), every phase stretches, the worker competes with the CLI for a core and the share
of fixed costs moves: compare ratios taken at similar loads only.""".splitlines()


def stop_api(root: Path) -> None:
    record = root / "prefect" / "api.json"
    if not record.exists():
        return
    pid = json.loads(record.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            os.kill(pid, 0)
            time.sleep(0.1)
    except ProcessLookupError:
        pass
    record.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phases-only", action="store_true", help="only the phase breakdown, printed as JSON")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child[0], args.child[1:])
    root = Path(tempfile.mkdtemp(prefix="cli-overhead-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))}
    env |= {"TRAINSPOTTER_ARTIFACTS": str(root), "COLUMNS": "80"}
    tb, built = root / "testbeds" / "tiny", ROOT / "artifacts" / "testbeds" / "tiny"
    if built.exists():  # this checkout's, built before
        shutil.copytree(built, tb)
    else:
        subprocess.run([sys.executable, "-m", "trainspotter.flows.cli", "testbed", "build", "tiny"], env=env,
                       check=True, capture_output=True)
    suspect, heldout = str(tb / "member.jsonl"), str(tb / "heldout.jsonl")
    library = [sys.executable, "-c", (
        "import json; from trainspotter import audit; "
        f"r = audit(name='overhead', suspect={suspect!r}, heldout={heldout!r}, model='testbed:tiny', "
        f"max_pairs={PAIRS}, assume_exchangeable=True); print(json.dumps({{'e_value': r.e_value}}))")]
    cli = [sys.executable, "-m", "trainspotter.flows.cli", "audit", "--name", "overhead", "--suspect", suspect,
           "--heldout", heldout, "--model", "testbed:tiny", "--max-pairs", str(PAIRS), "--assume-exchangeable",
           "--json"]
    timed(cli, env)  # fills the feature cache and starts the local API
    child = [sys.executable, str(Path(__file__).resolve()), "--child"]
    breakdown = {"library": phases(child + ["library", suspect, heldout], env),
                 "cli --refresh": phases(child + ["cli", *cli[3:], "--refresh"], env)}
    breakdown["load_average_1min"] = os.getloadavg()[0]
    if args.phases_only:
        stop_api(root)
        print(json.dumps(breakdown, indent=1))
        return
    times: dict[str, list[float]] = {"library": [], "cli --refresh": [], "cli": [], "cli, cold API": [],
                                     "cli --refresh, no worker": []}
    e_values = set()
    for _ in range(args.repeats):
        for name, cmd in (("library", library), ("cli --refresh", cli + ["--refresh"]), ("cli", cli),
                          ("cli, cold API", cli), ("cli --refresh, no worker", cli + ["--refresh"])):
            if name == "cli, cold API":
                stop_api(root)
            no_worker = {"TRAINSPOTTER_MODEL_WORKER": "0"} if name.endswith("no worker") else {}
            seconds, e = timed(cmd, env | no_worker)
            times[name].append(seconds)
            e_values.add(round(e, 6))
    stop_api(root)
    if len(e_values) != 1:
        sys.exit(f"the runs disagree on the e-value: {sorted(e_values)}")
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.machine(),
        "cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0], "pairs": PAIRS,
        "repeats": args.repeats, "seconds": times, "median_seconds": median, "e_value": e_values.pop(),
        "ratio_to_library": {k: v / median["library"] for k, v in median.items()},
        "phases_one_run": breakdown,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cli_overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# CLI overhead: one audit from the command line vs the library call",
        "",
        f"`benchmarks/bench_cli_overhead.py`, {result['when']}, {result['cpus']} CPUs (1-min load average "
        f"{result['load_average_1min']:.1f}). Testbed `tiny`, {PAIRS} pairs, gray box, each a fresh process, "
        f"median of {args.repeats} interleaved runs; all agree on e = {result['e_value']:.6g}.",
        "",
        "| run | median s | ratio to library |",
        "|---|---:|---:|",
        *(f"| {k} | {median[k]:.1f} | {result['ratio_to_library'][k]:.2f} |" for k in times),
        "",
        "`cli --refresh` does the library's work (features computed again) through the CLI, with the",
        "artifacts folder's local Prefect API up, as it is for every call after the first: the ratio is",
        "the CLI's overhead. `cli` is a repeated audit (batches from the cache). `cli, cold API` starts",
        "that API first, as every call did before it was shared. `cli --refresh, no worker` is",
        "`cli --refresh` without the model worker (`TRAINSPOTTER_MODEL_WORKER=0`): the model loads in",
        "the CLI's own process, as before `trainspotter.tasks.worker`.",
        "",
        *breakdown_lines(breakdown),
    ]
    (RESULTS / "cli_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
