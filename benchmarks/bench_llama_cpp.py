"""Gray-box scoring against the real llama-cpp-python server: echo read from its top-k rows
(one request per text, the mode the probe picks) against one plain logprobs prompt per
position (what the backend did before it could read that server's echo).

Needs `llama-cpp-python[server]==0.3.36` in the Python named by $LLAMA_CPP_PYTHON (default:
this one); serves the packaged SmolLM2-135M-Instruct gguf with --logits_all true. Both modes
run in this one process, one after the other, on the same passages, each on a fresh query
cache; requests are the backend's own counts (the probe excluded; studies.api_cost).
Writes benchmarks/results/llama_cpp.md.

    LLAMA_CPP_PYTHON=/path/to/python .venv/bin/python benchmarks/bench_llama_cpp.py [--samples 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("echo, read from its top-k rows", "one plain prompt per position")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    os.environ.setdefault("TRAINSPOTTER_ARTIFACTS", tempfile.mkdtemp(prefix="bench-llama-"))
    from trainspotter.assets import smollm2_gguf
    from studies.api_cost import (fresh_backend, member_texts, positions_per_sample, render_llama,
                                                  score_agreement, timed_score)

    texts, gguf = member_texts(args.samples), smollm2_gguf()
    sys.path.insert(0, str(ROOT / "tests" / "api"))
    from conftest import llama_cpp_server  # the tests' helper

    with llama_cpp_server(os.environ.get("LLAMA_CPP_PYTHON", sys.executable), gguf, args.port) as url:
        rows, scores, summary = [], {}, None
        for label in MODES:
            b = fresh_backend(f"openai:smollm2@{url}?tokenizer=hf:{gguf}")
            summary = summary or b.describe()["summary"]
            if label.startswith("one plain"):
                b.profile = dataclasses.replace(b.profile, mode="logprobs")
            before = b.usage()
            scores[label], wall = timed_score(b, texts)
            n, tokens = (b.usage()[k] - before[k] for k in ("requests", "prompt_tokens"))
            rows.append((label, n, n / len(texts), positions_per_sample(b, texts), tokens, wall))
    text = render_llama(rows, len(texts), summary, score_agreement(*scores.values()))
    (ROOT / "benchmarks" / "results" / "llama_cpp.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
