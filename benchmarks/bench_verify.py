"""Wall time of `trainspotter verify` on a 1000-pair record (issue 39: "verify of a 1000-pair
record takes seconds").

The record is sealed by a real library audit (``trainspotter.audit``) of 1000 synthetic
passage pairs (texts of one generator, 8 null features per passage from ``extract_fn``, no
model loaded; α = 1e-9 so the e-process bets on all 1000 pairs and the blind check on all
1000 too). Timed, each the median of ``--repeats`` runs: the library check
(``load_record`` + ``verify_records``: every hash, the chain, both replays) and the CLI as a
user runs it, beside the bare import (`trainspotter --help`). Writes
benchmarks/results/verify.{md,json}.

    python benchmarks/bench_verify.py [--pairs 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CLI = [sys.executable, "-m", "trainspotter.flows.cli"]
WORDS = "river stone light paper garden window market silver winter orange music engine".split()


def make_record(folder: Path, pairs: int, features: int = 8) -> Path:
    from trainspotter import audit

    rng = random.Random(0)
    for side in ("suspect", "heldout"):
        with open(folder / f"{side}.jsonl", "w") as f:
            for i in range(pairs):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "."
                f.write(json.dumps({"id": f"{side[0]}{i}", "text": text}) + "\n")
    (folder / "model").mkdir()
    (folder / "model" / "model.safetensors").write_bytes(b"synthetic")

    def extract_fn(passages, batch_no):
        out = []
        for p in passages:
            h = hashlib.sha256(p["text"].encode() + str(p["id"]).encode()).digest()
            out.append({f"f{j}": (h[j] - 127.5) / 73.6 for j in range(features)})
        return out

    result = audit(suspect=str(folder / "suspect.jsonl"), heldout=str(folder / "heldout.jsonl"),
                   model=f"hf:{folder / 'model'}", test={"alpha": 1e-9}, extract_fn=extract_fn)
    assert result.pairs_used == pairs, result.pairs_used
    path = folder / "record.json"
    path.write_text(json.dumps(result.record))
    return path


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from trainspotter.verify import load_record, verify_records

    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRAINSPOTTER_ARTIFACTS"] = str(Path(tmp) / "artifacts")
        path = make_record(Path(tmp), args.pairs)
        check = verify_records([(str(path), load_record(path))])
        assert check.ok, check.failure

        def cli(*extra):
            out = subprocess.run(CLI + list(extra), capture_output=True, text=True)
            assert out.returncode == 0, out.stderr[-2000:]

        timings = {"library": _median(lambda: verify_records([(str(path), load_record(path))]), args.repeats),
                   "import": _median(lambda: cli("--help"), args.repeats),
                   "cli": _median(lambda: cli("verify", str(path)), args.repeats)}
        size = path.stat().st_size
    load.append(os.getloadavg()[0])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    info = {"pairs": args.pairs, "record_bytes": size, "seconds": timings, "repeats": args.repeats,
            "cpus": os.cpu_count(), "machine": platform.machine(), "commit": commit, "load": load,
            "checks": [c.name for c in check.checks],
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "verify.json").write_text(json.dumps(info, indent=1))
    (RESULTS / "verify.md").write_text("\n".join([
        "# `trainspotter verify` of a sealed record, wall time", "",
        f"{info['date']} · {info['cpus']} CPU cores · git {commit} · 1-min load average {load[0]:.1f} → "
        f"{load[1]:.1f} (other jobs may have been running: upper bounds) · `python benchmarks/bench_verify.py`", "",
        f"A record of {args.pairs} pairs (8 features per passage, the blind check over {args.pairs} pairs, "
        f"{size / 1e6:.1f} MB), checked in full: every passage's and feature row's sha256, the pair order "
        f"from the seed, the blind check replayed from the texts, the e-process replayed pair by pair, the "
        f"result, the section digests, the chain and the end state.", "",
        "| what | seconds (median) |", "|---|---|",
        f"| library: `load_record` + `verify_records` | {timings['library']:.2f} |",
        f"| `trainspotter --help` (import only) | {timings['import']:.2f} |",
        f"| `trainspotter verify record.json` | {timings['cli']:.2f} |",
        f"| beyond the import | {timings['cli'] - timings['import']:.2f} |", ""]))
    print((RESULTS / "verify.md").read_text())


if __name__ == "__main__":
    main()
