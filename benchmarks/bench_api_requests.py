"""HTTP requests per sample for label-only extraction (BADI App. A.6 / App. E):
batched /v1/completions (many prefixes per request) against one request per position.

Starts `trainspotter serve` on the mini testbed over loopback and counts requests
server-side. Writes benchmarks/results/api_requests.md.

    .venv/bin/python benchmarks/bench_api_requests.py [--samples 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    os.environ.setdefault("TRAINSPOTTER_ARTIFACTS", tempfile.mkdtemp(prefix="bench-api-"))
    sys.path.insert(0, str(ROOT / "tests" / "api"))
    from conftest import running_server  # the tests' loopback server helper

    from trainspotter.backends import parse_api_spec
    from trainspotter.backends.cache import QueryCache
    from trainspotter.backends.openai_compat import OpenAIBackend
    from trainspotter.evaluation.testbed import PRESETS, build_testbed, split_path

    build_testbed(PRESETS["mini"])
    texts = [json.loads(line)["text"] for line in open(split_path("mini", "member"))][: args.samples]
    rows = []
    with running_server() as (app, url):
        for label, batch in (("one request per position", 1), ("batched, 32 prompts", 32),
                             ("batched, 64 prompts", 64)):
            spec = f"openai:mini@{url}?tokenizer=testbed:mini&mode=label&batch={batch}"
            b = OpenAIBackend(parse_api_spec(spec), cache=QueryCache(Path(tempfile.mkdtemp()) / "q.sqlite"))
            b._resolve_mode()  # the one-off probe is not per-sample cost
            if batch == 1:
                b.profile = dataclasses.replace(b.profile, lists=False)
            start, t0 = app.state.stats["requests"], time.perf_counter()
            b.score(texts)
            n = app.state.stats["requests"] - start
            positions = sum(len(b._positions(x)[1]) for x in texts)
            rows.append((label, n, n / len(texts), positions / len(texts), time.perf_counter() - t0,
                         b.usage()["prompt_tokens"]))
    per_sample = rows[0][3]
    out = ["# HTTP requests per sample, label-only extraction", "",
           f"mini testbed target behind `trainspotter serve` (loopback), {len(texts)} member passages, "
           f"{per_sample:.0f} positions per sample; requests counted by the server "
           f"(mode probe excluded). Target: <= ceil(positions/32) = {math.ceil(per_sample / 32)} per sample.", "",
           "| querying | requests | requests / sample | positions / sample | wall s | prompt tokens |",
           "|---|---|---|---|---|---|"]
    out += [f"| {a} | {n} | {r:.2f} | {p:.0f} | {w:.1f} | {t} |" for a, n, r, p, w, t in rows]
    out += ["", "Prefixes of all texts in a call share requests, so batching across samples can go "
                "below ceil(positions/32); identical prefixes (the empty one) are asked once."]
    dest = ROOT / "benchmarks" / "results" / "api_requests.md"
    dest.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
