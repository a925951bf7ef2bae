"""The API backend against the real llama-cpp-python server (issue 14.3), beside the
imitations in test_api_quirks.py (`serve` with LLAMA_CPP quirks). Needs
`llama-cpp-python[server]==0.3.36` (a source build, not a project dependency) in this
interpreter or the one named by $LLAMA_CPP_PYTHON, and the packaged SmolLM2 gguf; skipped
with the reason otherwise.

What that server does with SmolLM2 (a model that adds no BOS): a list of prompts is
answered with HTTP 500, so is the empty prompt "", and echo puts at token j the row that
predicts token j+1 with that row's log-prob of token j (token 1's entry is null)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import llama_cpp_server  # tests/api/conftest.py
from cli_process import run_cli

pytestmark = pytest.mark.slow
LLAMA_PYTHON = os.environ.get("LLAMA_CPP_PYTHON", sys.executable)
TEXTS = ["The cat sat on the mat and looked out of the window at the birds.",
         "Paris is the capital of France and its largest city."]


@pytest.fixture(scope="module")
def llama_server():
    if subprocess.run([LLAMA_PYTHON, "-c", "import llama_cpp.server"], capture_output=True).returncode:
        pytest.skip(f"llama_cpp.server is not importable by {LLAMA_PYTHON}: pip install "
                    "'llama-cpp-python[server]==0.3.36' there, or set LLAMA_CPP_PYTHON to a Python that has it")
    from trainspotter.assets import smollm2_gguf

    try:
        gguf = smollm2_gguf()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"packaged SmolLM2 gguf not installed: {e}")
    with llama_cpp_server(LLAMA_PYTHON, gguf) as url:
        yield f"openai:smollm2@{url}?tokenizer=hf:{gguf}"


def backend(spec: str, cache_path):
    from trainspotter.backends import parse_api_spec
    from trainspotter.backends.cache import QueryCache
    from trainspotter.backends.openai_compat import OpenAIBackend

    return OpenAIBackend(parse_api_spec(spec), cache=QueryCache(cache_path))


def test_echo_read_from_its_rows_equals_one_prompt_per_position(llama_server, tmp_path):
    """The probe finds every quirk in seconds, and echo read from its rows (one request per
    text) gives the numbers of the plain logprobs mode (one request per position)."""
    b = backend(llama_server, tmp_path / "q.sqlite")
    started = time.time()
    echo = b.score(TEXTS)
    d, u = b.describe(), b.usage()
    assert (d["mode"], d["list_prompts"], d["echo_shift"], d["echo_values"]) == ("logprobs-echo", False, -1, False), d
    assert d["empty_prompt"] == b.tokenizer.bos_token == "<|im_start|>"
    # lists and "" refused 3 times each, nothing retried as a fault
    assert u["rejected"] == 6 and u["retries"] == 0 and time.time() - started < 60
    plain_b = backend(llama_server, tmp_path / "plain.sqlite")  # the plain mode, forced by its probe record
    plain_b.cache.put_many(plain_b.fingerprint, "probe", {plain_b._probe_key: {
        "mode": "logprobs", "list": False, "k": 5, "shift": 0, "empty": "<|im_start|>", "echo_values": True}})
    plain = plain_b.score(TEXTS)
    positions = sum(len(b._positions(x)[1]) for x in TEXTS)
    assert plain_b.usage()["requests"] == positions - 1  # "" shared by both texts
    # echo: one per text, plus position 2 of each (no row predicts it) and the probe
    assert u["requests"] - u["rejected"] <= len(TEXTS) * 2 + 6 < positions
    # the same rows, computed in one batch or after the server's prefix cache: the greedy
    # tokens agree, the log-probs up to the server's quantised arithmetic (benchmarks/results/
    # llama_cpp.md: median 0.02 nats over 16 passages, depending on what the server's prefix
    # cache holds, which can flip a near-tied greedy token); one position off changes them by nats
    diffs = []
    for x, e, p in zip(TEXTS, echo, plain):
        assert len(e.logprobs) == len(b.encode(x)) - 1 and np.isfinite(e.logprobs).all()
        assert np.mean(e.argmax == p.argmax) > 0.9
        np.testing.assert_allclose(e.logprobs, p.logprobs, atol=0.5)
        np.testing.assert_allclose(e.mu, p.mu, rtol=0.2)  # the top-k mass times log(rest) amplifies it
        diffs += list(np.abs(e.logprobs - p.logprobs))
    assert np.median(diffs) < 0.1


def test_cli_extract_gray_and_black_report_the_mode(llama_server, artifacts, tmp_path):
    """The issue's command: `trainspotter extract` with the gguf as tokenizer, gray and black,
    says in its JSON how the server was queried."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    for access in ("gray", "black"):
        out = tmp_path / f"{access}.parquet"
        res = run_cli(["extract", "--data", str(data), "--model", llama_server, "--access", access,
                       "--no-perturbations", "--out", str(out), "--json"], timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
        got = json.loads(res.stdout)
        (api,) = got["api"].values()
        assert api["mode"] == "logprobs-echo" and "read from echo's top-k rows" in api["summary"]
        assert got["rows"] == 2
