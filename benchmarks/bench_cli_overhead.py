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
  every call paid before the API was shared: Prefect's temporary server per process).

Each is the median of ``--repeats`` runs, interleaved so that load on the machine hits them
alike; the figures that count are the ratios to ``library`` of the same run. The e-values of
all three must agree. Writes benchmarks/results/cli_overhead.{md,json}.

    python benchmarks/bench_cli_overhead.py [--repeats 3]
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
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
    times: dict[str, list[float]] = {"library": [], "cli --refresh": [], "cli": [], "cli, cold API": []}
    e_values = set()
    for _ in range(args.repeats):
        for name, cmd in (("library", library), ("cli --refresh", cli + ["--refresh"]), ("cli", cli),
                          ("cli, cold API", cli)):
            if name == "cli, cold API":
                stop_api(root)
            seconds, e = timed(cmd, env)
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
        "that API first, as every call did before it was shared.",
    ]
    (RESULTS / "cli_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
