"""Gray-box scoring against the real llama-cpp-python server: echo read from its top-k rows
(one request per text, the mode the probe picks) against one plain logprobs prompt per
position (what the backend did before it could read that server's echo).

Needs `llama-cpp-python[server]==0.3.36` in the Python named by $LLAMA_CPP_PYTHON (default:
this one); serves the packaged SmolLM2-135M-Instruct gguf with --logits_all true. Both modes
run in this one process, one after the other, on the same passages, each on a fresh query
cache; requests are the backend's own counts (the probe excluded). Writes
benchmarks/results/llama_cpp.md.

    LLAMA_CPP_PYTHON=/path/to/python .venv/bin/python benchmarks/bench_llama_cpp.py [--samples 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    os.environ.setdefault("TRAINSPOTTER_ARTIFACTS", tempfile.mkdtemp(prefix="bench-llama-"))
    from trainspotter.assets import smollm2_gguf
    from trainspotter.backends import parse_api_spec
    from trainspotter.backends.cache import QueryCache
    from trainspotter.backends.openai_compat import OpenAIBackend
    from trainspotter.evaluation.testbed import PRESETS, build_testbed, split_path

    build_testbed(PRESETS["mini"])
    texts = [json.loads(line)["text"] for line in open(split_path("mini", "member"))][: args.samples]
    gguf = smollm2_gguf()
    sys.path.insert(0, str(ROOT / "tests" / "api"))
    from conftest import llama_cpp_server  # the tests' helper

    with llama_cpp_server(os.environ.get("LLAMA_CPP_PYTHON", sys.executable), gguf, args.port) as url:
        rows, scores, summary = [], {}, None
        for label in ("echo, read from its top-k rows", "one plain prompt per position"):
            b = OpenAIBackend(parse_api_spec(f"openai:smollm2@{url}?tokenizer=hf:{gguf}"),
                              cache=QueryCache(Path(tempfile.mkdtemp()) / "q.sqlite"))
            b._resolve_mode()  # the one-off probe is not per-sample cost
            summary = summary or b.describe()["summary"]
            if label.startswith("one plain"):
                b.profile = dataclasses.replace(b.profile, mode="logprobs")
            before = b.usage()
            t0 = time.perf_counter()
            scores[label] = b.score(texts)
            wall = time.perf_counter() - t0
            n, tokens = (b.usage()[k] - before[k] for k in ("requests", "prompt_tokens"))
            positions = sum(len(b._positions(x)[1]) for x in texts)
            rows.append((label, n, n / len(texts), positions / len(texts), tokens, wall))
    echo, plain = scores.values()
    diff = np.concatenate([np.abs(e.logprobs - p.logprobs) for e, p in zip(echo, plain)])
    unknown = [int(sum(np.isnan(s.logprobs).sum() for s in mode)) for mode in (echo, plain)]
    same_argmax = np.mean(np.concatenate([e.argmax == p.argmax for e, p in zip(echo, plain)]))
    out = ["# llama-cpp-python 0.3.36: echo rows against one prompt per position", "",
           f"SmolLM2-135M-Instruct Q4_1 gguf behind `python -m llama_cpp.server --logits_all true` "
           f"(loopback, this machine's CPU), {len(texts)} mini-testbed member passages; the probe "
           f"chose: {summary}. One run, modes back to back.", "",
           "| querying | requests | requests / sample | positions / sample | prompt tokens | wall s |",
           "|---|---|---|---|---|---|"]
    out += [f"| {a} | {n} | {r:.2f} | {p:.0f} | {t} | {w:.1f} |" for a, n, r, p, t, w in rows]
    out += ["", f"Echo / plain: {rows[0][1] / rows[1][1]:.3f}× the requests, {rows[0][4] / rows[1][4]:.3f}× the "
                f"prompt tokens, {rows[0][5] / rows[1][5]:.3f}× the wall time. Same greedy token at "
                f"{same_argmax:.4f} of positions; |Δ log p|: median {np.nanmedian(diff):.1e}, 99th percentile "
                f"{np.nanquantile(diff, 0.99):.3f}, max {np.nanmax(diff):.3f} (the server's own arithmetic: a "
                "prefix-cached request and one batch differ, which flips near-tied greedy tokens). Positions "
                f"without a log-prob: echo {unknown[0]}, plain {unknown[1]} (a plain request whose greedy token "
                "is the end of text comes back empty from this server, with no log-probs).", "",
           "Wall time gains less than requests: with echo this server sorts the whole vocabulary in "
           "Python for every prompt position, and a plain request evaluates one new token after its "
           "prefix cache."]
    dest = ROOT / "benchmarks" / "results" / "llama_cpp.md"
    dest.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
