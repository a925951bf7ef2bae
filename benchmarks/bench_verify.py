"""Wall time of `trainspotter verify` on a 1000-pair record (issue 39: "verify of a 1000-pair
record takes seconds"), and the size of such a record.

The record is sealed by a real library audit (``trainspotter.audit``) of 1000 synthetic
passage pairs (64 words each, texts of one generator; α = 1e-9 so the e-process bets on all
1000 pairs and the blind check on all 1000 too). Its feature rows come from the library's own
gray-box extraction (``features.extract.extract(..., answers=True)``, the lean feature set with
one reference, as an audit of a testbed makes them) on two fake backends whose answers are
drawn from each text's hash (64 tokens per passage, token ids below 50 000, float64 log-probs,
μ, σ² and greedy tokens), so the record holds every pair's model answers and ``verify``
computes every feature again from them. Timed, each the median of ``--repeats`` runs: the
library check (``load_record`` + ``verify_records``: every hash, the recomputation, the chain,
both replays) and the CLI as a user runs it, beside the bare import (`trainspotter --help`).
Writes benchmarks/results/verify.{md,json}.

The record and the timings: studies.verify_cost.

    python benchmarks/bench_verify.py [--pairs 1000] [--repeats 3]
    python benchmarks/bench_verify.py --render   # verify.md from verify.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from studies.verify_cost import make_record, record_sizes, render_verify, verify_seconds

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--render", action="store_true", help="only rewrite verify.md from verify.json")
    args = parser.parse_args()
    if args.render:
        return (RESULTS / "verify.md").write_text(render_verify(json.loads((RESULTS / "verify.json").read_text()), 7))
    from harness.machine import git_commit
    from trainspotter.record.verify import load_record

    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRAINSPOTTER_ARTIFACTS"] = str(Path(tmp) / "artifacts")
        path = make_record(Path(tmp), args.pairs)
        timings, check = verify_seconds(path, args.repeats)
        sizes, size = record_sizes(load_record(path)), path.stat().st_size
    load.append(os.getloadavg()[0])
    info = {"pairs": args.pairs, "record_bytes": size, "answers_bytes": sizes["answers_bytes"],
            "passage_text_bytes": sizes["passage_text_bytes"],
            "features_check": {c.name: c.detail for c in check.checks}["features"], "seconds": timings,
            "repeats": args.repeats, "cpus": os.cpu_count(), "machine": platform.machine(),
            "commit": git_commit(short=True), "load": load, "checks": [c.name for c in check.checks],
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "features_per_passage": sizes["features_per_passage"]}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "verify.json").write_text(json.dumps(info, indent=1))
    (RESULTS / "verify.md").write_text(render_verify(info))
    print((RESULTS / "verify.md").read_text())


if __name__ == "__main__":
    main()
