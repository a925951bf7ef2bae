"""HTTP requests per sample for label-only extraction (BADI App. A.6 / App. E):
batched /v1/completions (many prefixes per request) against one request per position.

Starts `trainspotter serve` on the mini testbed over loopback (the tests' helper) and counts
requests server-side (studies.api_cost). Writes benchmarks/results/api_requests.md.

    .venv/bin/python benchmarks/bench_api_requests.py [--samples 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = (("one request per position", 1), ("batched, 32 prompts", 32), ("batched, 64 prompts", 64))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    os.environ.setdefault("TRAINSPOTTER_ARTIFACTS", tempfile.mkdtemp(prefix="bench-api-"))
    sys.path.insert(0, str(ROOT / "tests" / "api"))
    from conftest import running_server  # the tests' loopback server helper

    from studies.api_cost import (fresh_backend, member_texts, positions_per_sample, render_requests,
                                                  timed_score)

    texts, rows = member_texts(args.samples), []
    with running_server() as (app, url):
        for label, batch in MODES:
            b = fresh_backend(f"openai:mini@{url}?tokenizer=testbed:mini&mode=label&batch={batch}")
            if batch == 1:
                b.profile = dataclasses.replace(b.profile, lists=False)
            start = app.state.stats["requests"]
            _, wall = timed_score(b, texts)
            n = app.state.stats["requests"] - start
            rows.append((label, n, n / len(texts), positions_per_sample(b, texts), wall, b.usage()["prompt_tokens"]))
    text = render_requests(rows, len(texts))
    (ROOT / "benchmarks" / "results" / "api_requests.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
