"""What querying an OpenAI-compatible server costs per sample (``benchmarks/bench_api_requests.py``,
``bench_llama_cpp.py``): HTTP requests, prompt tokens and wall time of ``OpenAIBackend.score`` in
one query mode against another, each on a fresh answer cache and with the one-off mode probe
excluded. Label-only extraction (BADI App. A.6, App. E) batches many prefixes per request
(``/v1/completions`` lists) against one request per position; a server whose echo rows carry top-k
log-probs (llama-cpp-python) is read from them in one request per text against one plain
logprobs prompt per position."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["member_texts", "fresh_backend", "positions_per_sample", "timed_score", "render_requests",
           "score_agreement", "render_llama"]


def member_texts(n: int) -> list[str]:
    """The first ``n`` member passages of the `mini` testbed (built if needed)."""
    import json

    from trainspotter.testbeds.build import PRESETS, build_testbed, split_path

    build_testbed(PRESETS["mini"])
    return [json.loads(line)["text"] for line in open(split_path("mini", "member"))][:n]


def fresh_backend(spec: str):
    """An ``OpenAIBackend`` for ``spec`` on an empty answer cache, its query mode already probed
    (the one-off probe is not per-sample cost)."""
    from trainspotter.backends import parse_api_spec
    from trainspotter.backends.cache import QueryCache
    from trainspotter.backends.openai_compat import OpenAIBackend

    backend = OpenAIBackend(parse_api_spec(spec), cache=QueryCache(Path(tempfile.mkdtemp()) / "q.sqlite"))
    backend._resolve_mode()
    return backend


def positions_per_sample(backend, texts: list[str]) -> float:
    """The mean number of scored positions per text (the backend's own positions)."""
    return sum(len(backend._positions(x)[1]) for x in texts) / len(texts)


def timed_score(backend, texts: list[str]) -> tuple[list, float]:
    """The scores of ``texts`` and the seconds they took."""
    t0 = time.perf_counter()
    scores = backend.score(texts)
    return scores, time.perf_counter() - t0


def render_requests(rows: list[tuple], samples: int) -> str:
    """api_requests.md from rows (label, requests, per sample, positions per sample, wall s, prompt
    tokens), the first of them one request per position."""
    per_sample = rows[0][3]
    out = ["# HTTP requests per sample, label-only extraction", "",
           f"mini testbed target behind `trainspotter serve` (loopback), {samples} member passages, "
           f"{per_sample:.0f} positions per sample; requests counted by the server "
           f"(mode probe excluded). Target: <= ceil(positions/32) = {math.ceil(per_sample / 32)} per sample.", "",
           "| querying | requests | requests / sample | positions / sample | wall s | prompt tokens |",
           "|---|---|---|---|---|---|"]
    out += [f"| {a} | {n} | {r:.2f} | {p:.0f} | {w:.1f} | {t} |" for a, n, r, p, w, t in rows]
    out += ["", "Prefixes of all texts in a call share requests, so batching across samples can go "
                "below ceil(positions/32); identical prefixes (the empty one) are asked once."]
    return "\n".join(out) + "\n"


def score_agreement(echo: list, plain: list) -> dict:
    """How two modes' scores of the same texts agree: the share of positions with the same greedy
    token, |Δ log p| (median, 99th percentile, max, over positions both have) and the positions
    each left without a log-prob."""
    diff = np.concatenate([np.abs(e.logprobs - p.logprobs) for e, p in zip(echo, plain)])
    return {"same_argmax": float(np.mean(np.concatenate([e.argmax == p.argmax for e, p in zip(echo, plain)]))),
            "median": float(np.nanmedian(diff)), "p99": float(np.nanquantile(diff, 0.99)), "max": float(np.nanmax(diff)),
            "unknown": [int(sum(np.isnan(s.logprobs).sum() for s in mode)) for mode in (echo, plain)]}


def render_llama(rows: list[tuple], samples: int, summary: str, agree: dict) -> str:
    """llama_cpp.md from rows (label, requests, per sample, positions per sample, prompt tokens,
    wall s), echo first, the probe's ``summary`` and ``score_agreement``."""
    out = ["# llama-cpp-python 0.3.36: echo rows against one prompt per position", "",
           f"SmolLM2-135M-Instruct Q4_1 gguf behind `python -m llama_cpp.server --logits_all true` "
           f"(loopback, this machine's CPU), {samples} mini-testbed member passages; the probe "
           f"chose: {summary}. One run, modes back to back.", "",
           "| querying | requests | requests / sample | positions / sample | prompt tokens | wall s |",
           "|---|---|---|---|---|---|"]
    out += [f"| {a} | {n} | {r:.2f} | {p:.0f} | {t} | {w:.1f} |" for a, n, r, p, t, w in rows]
    out += ["", f"Echo / plain: {rows[0][1] / rows[1][1]:.3f}× the requests, {rows[0][4] / rows[1][4]:.3f}× the "
                f"prompt tokens, {rows[0][5] / rows[1][5]:.3f}× the wall time. Same greedy token at "
                f"{agree['same_argmax']:.4f} of positions; |Δ log p|: median {agree['median']:.1e}, 99th percentile "
                f"{agree['p99']:.3f}, max {agree['max']:.3f} (the server's own arithmetic: a "
                "prefix-cached request and one batch differ, which flips near-tied greedy tokens). Positions "
                f"without a log-prob: echo {agree['unknown'][0]}, plain {agree['unknown'][1]} (a plain request whose "
                "greedy token is the end of text comes back empty from this server, with no log-probs).", "",
           "Wall time gains less than requests: with echo this server sorts the whole vocabulary in "
           "Python for every prompt position, and a plain request evaluates one new token after its "
           "prefix cache."]
    return "\n".join(out) + "\n"
