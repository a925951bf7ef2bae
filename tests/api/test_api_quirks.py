"""The API backend against servers that differ from the reference (`serve.Quirks`, the
switches of `trainspotter serve`): it must find a mode that works, say which, give the same
features as against a well-behaved server, and keep the query cache and the budget exact."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from trainspotter.backends import load_backend, parse_api_spec
from trainspotter.backends.cache import QueryCache
from trainspotter.backends.openai_compat import Incompatible, OpenAIBackend

from test_api_backend import SECRET, comparable, texts  # tests/api is on sys.path (rootdir conftest)

pytestmark = pytest.mark.usefixtures("mini_testbed")


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def api(url: str, cache_path, **opts) -> OpenAIBackend:
    query = "&".join(f"{k}={v}" for k, v in {"tokenizer": "testbed:mini", **opts}.items())
    return OpenAIBackend(parse_api_spec(f"openai:mini@{url}?{query}"), cache=QueryCache(cache_path))


def assert_counts_exact(app, backend: OpenAIBackend, before: dict) -> None:
    """Every HTTP request the server saw is in the backend's usage: answered ones are the
    budget's requests, refused ones are `rejected` (nothing retried on a clean server)."""
    stats, u = app.state.stats, backend.usage()
    assert u["http_requests"] == stats["requests"] - before["requests"]
    assert u["rejected"] == stats["refused"] - before["refused"]
    assert u["requests"] == u["http_requests"] - u["rejected"] and u["retries"] == 0


def cached_answers(cache_path) -> int:
    return sum(r["entries"] for r in QueryCache(cache_path).stats()["by_backend"] if r["method"] != "probe")


# (quirks, mode the backend must settle on, lists of prompts, echo shift)
LLAMA_CPP = {"list_prompts": False, "echo_logprobs": "fed", "empty_prompt": False}  # llama-cpp-python 0.3.36
CASES = {
    "llama-cpp-0.3.36": (LLAMA_CPP, "logprobs-echo", False, -1),
    "lists-refused": ({"list_prompts": False}, "logprobs-echo", False, 0),
    "echo-shifted": ({"echo_logprobs": "shifted"}, "logprobs-echo", True, -1),
    "llama-cpp+echo-shifted": ({"list_prompts": False, "echo_logprobs": "shifted"}, "logprobs-echo", False, -1),
    "echo-none": ({"echo_logprobs": "none"}, "logprobs", True, None),
    "echo-none+no-empty-prompt": ({"echo_logprobs": "none", "empty_prompt": False}, "logprobs", True, None),
    "ignore-logprobs": ({"ignore_logprobs": True}, "label", True, None),
    "chat-only": ({"chat_only": True}, "chat", False, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_backend_adapts_to_each_quirk(case, start_server, tmp_path):
    quirks, mode, lists, shift = CASES[case]
    local = load_backend("testbed:mini")
    xs = texts(3) if mode == "logprobs-echo" else texts(1)  # other modes: a request per position
    with start_server(**quirks) as (app, url):
        before = dict(app.state.stats)
        started = time.time()
        b = api(url, tmp_path / "q.sqlite")  # mode=auto, default retries and backoff
        got = b.score(xs)
        elapsed = time.time() - started
        assert_counts_exact(app, b, before)
        d = b.describe()
        assert (d["mode"], d["list_prompts"], d["echo_shift"]) == (mode, lists, shift), d
        assert d["batch"] == (32 if lists else 1) and mode in d["summary"]
        fed, empty = quirks.get("echo_logprobs") == "fed", quirks.get("empty_prompt", True)
        # "" refused: position 1 is asked with the BOS text, which the local tokenizer has
        assert d["empty_prompt"] == ("" if empty or mode == "chat" else b.tokenizer.bos_token)
        assert d["echo_values"] == ({"logprobs-echo": not fed}.get(mode))
        # one request per text (echo) or per position, plus the probe; a prompt answered once
        # is cached once; the probe caches the empty prefix's answer as score() asks it; fed
        # echo has no row for position 2, asked as one prompt per text
        prompts = (len(xs) * (1 + fed) + 1 if mode == "logprobs-echo" else
                   len({p for x in xs for p in b._positions(x)[1]}))
        probe = b.usage()["http_requests"] - (-(-prompts // d["batch"]))
        assert 1 <= probe <= 12, probe
        assert cached_answers(tmp_path / "q.sqlite") == prompts
        # lists refused, "" refused: 3 tries each, never retried as faults; chat: the 404
        assert b.usage()["rejected"] == 3 * (not lists and mode != "chat") + 3 * (not empty) + (mode == "chat")
        assert elapsed < 30
        # a second backend on the same cache asks nothing, not even the probe
        again = api(url, tmp_path / "q.sqlite")
        seen = app.state.stats["requests"]
        for r, g in zip(again.score(xs), got):
            np.testing.assert_array_equal(r.argmax, g.argmax)
            np.testing.assert_array_equal(r.logprobs, g.logprobs)
        assert app.state.stats["requests"] == seen and again.usage()["requests"] == 0
        assert again.describe()["mode"] == mode
    for x, r, w in zip(xs, got, local.score(xs)):
        np.testing.assert_array_equal(r.token_ids, w.token_ids)
        ok = comparable(b, x, w.argmax)
        assert ok.mean() > 0.9
        if not empty:  # position 1 was asked as [BOS] + BOS text: another context than local's
            assert np.isfinite(r.logprobs[0]) or mode == "label"
            ok[0] = False
        np.testing.assert_array_equal(r.argmax[ok], w.argmax[ok])  # greedy tokens: every mode
        if mode == "logprobs-echo" and not fed:  # the full signal, realigned where echo is shifted
            np.testing.assert_allclose(r.logprobs, w.logprobs, atol=1e-4)
        elif mode in ("logprobs", "logprobs-echo", "chat"):  # top-5 of each position's row: exact
            hit = np.abs(r.logprobs - w.logprobs) < 1e-4  # when the token is in it, censored above else
            assert hit[ok].mean() > 0.3 and (r.logprobs[ok] >= w.logprobs[ok] - 1e-4).all()
            assert (hit | (r.logprobs > w.logprobs))[ok].all()
        else:
            assert np.isnan(r.logprobs).all()


def test_mode_reaches_describe_without_a_request_and_fingerprint_unchanged(start_server, tmp_path):
    """describe() of a fresh backend reads an earlier probe from the cache (so an audit whose
    features all came from cache still says how the server was queried)."""
    with start_server(list_prompts=False) as (app, url):
        api(url, tmp_path / "q.sqlite").score(texts(1))
        n = app.state.stats["requests"]
        d = api(url, tmp_path / "q.sqlite").describe()
        assert d["mode"] == "logprobs-echo" and d["list_prompts"] is False and app.state.stats["requests"] == n
    assert api("http://127.0.0.1:9/v1", tmp_path / "other.sqlite").describe()["summary"] == "not probed yet"


def test_no_mode_fails_fast_with_one_clear_error(start_server, tmp_path):
    """A server that refuses every mode allowed: one Incompatible naming each refusal, after
    as few requests as it takes (a missing endpoint rules out its other modes; log-probs
    ignored at top-5 rule out top-1), and nothing retried."""
    with start_server(chat_only=True) as (app, url):
        b = api(url, tmp_path / "q.sqlite", mode="label")
        started = time.time()
        with pytest.raises(Incompatible, match=r"mode=label: label: .*HTTP 404") as err:
            b.score(texts(1))
        assert time.time() - started < 5 and app.state.stats["requests"] == 1
        assert b.usage()["rejected"] == 1 and b.usage()["retries"] == 0 and SECRET not in str(err.value)
    with start_server(ignore_logprobs=True) as (app, url):
        b = api(url, tmp_path / "q2.sqlite", mode="logprobs")
        with pytest.raises(Incompatible, match="logprobs requested but not returned"):
            b.score(texts(1))
        # answered (and billed) without log-probs: charged as a request, not a refusal
        assert app.state.stats["requests"] == b.usage()["requests"] == 1 and b.usage()["rejected"] == 0


def test_faults_on_a_server_without_lists(start_server, tmp_path):
    """Injected faults (429/500/timeouts/bad bodies) on top of refused lists: the refusal is
    still found, each fault is retried and counted, and the answers are those of a clean run."""
    xs = texts(4)
    with start_server(list_prompts=False) as (_, url):
        clean = api(url, tmp_path / "clean.sqlite", mode="label").score(xs[:1])
        clean_echo = api(url, tmp_path / "clean.sqlite").score(xs)
    with start_server(list_prompts=False, fail_rate=0.2, seed=2, fail_sleep=1.0) as (app, url):
        b = api(url, tmp_path / "q.sqlite", backoff=0.001, timeout=0.5)
        got = b.score(xs)
        u, stats = b.usage(), app.state.stats
        assert b.describe()["list_prompts"] is False
        assert u["retries"] + u["rejected"] == sum(stats["faults"].values()) + stats["refused"]
        assert u["http_requests"] == stats["requests"] and sum(stats["faults"].values()) > 0
        label = api(url, tmp_path / "q.sqlite", mode="label").score(xs[:1])
    for g, c in zip(got, clean_echo):
        np.testing.assert_allclose(g.logprobs, c.logprobs, atol=1e-6)
    np.testing.assert_array_equal(label[0].argmax, clean[0].argmax)


def test_a_list_refused_mid_run_goes_one_by_one(start_server, tmp_path):
    """A probe cached before the server began refusing lists (HTTP 400 here): the refused
    chunk is re-sent one prompt per request, the switch is remembered, nothing is asked twice."""
    cache = tmp_path / "q.sqlite"
    with start_server() as (_, url):
        fresh = api(url, tmp_path / "fresh.sqlite", mode="label").score(texts(2))
    with start_server(list_prompts=False, list_status=400) as (app, url):
        b = api(url, cache, mode="label")
        b.cache.put_many(b.fingerprint, "probe", {b._probe_key: {"mode": "label", "list": True, "k": None,
                                                                 "shift": 0}})
        got = b.score(texts(2))
        u, stats = b.usage(), app.state.stats
        assert u["rejected"] == stats["refused"] == 1 and u["retries"] == 0
        assert u["requests"] == stats["requests"] - 1 == cached_answers(cache)  # one per prompt, once
        assert b.describe()["list_prompts"] is False
        assert api(url, cache, mode="label").describe()["list_prompts"] is False  # remembered
    for g, f in zip(got, fresh):
        np.testing.assert_array_equal(g.argmax, f.argmax)


def test_cli_audit_reports_the_mode(start_server, artifacts, tmp_path):
    """`trainspotter audit --json` against a llama-cpp-like server with shifted echo: the
    same decision and e-value as against a well-behaved one, and the JSON and the HTML
    report say how the server was queried."""
    from typer.testing import CliRunner

    from trainspotter.flows.cli import app as cli
    from trainspotter.testbeds.build import split_path

    results = {}
    for name, quirks in (("clean", {}), ("quirky", {"list_prompts": False, "echo_logprobs": "shifted"})):
        with start_server(**quirks) as (_, url):
            out = CliRunner().invoke(cli, [
                "audit", "--suspect", str(split_path("mini", "member")), "--heldout",
                str(split_path("mini", "heldout")), "--model", f"openai:mini@{url}?tokenizer=testbed:mini",
                "--access", "gray", "--features", "lean", "--max-pairs", "12", "--name", f"quirks-{name}",
                "--assume-exchangeable", "--json"])  # the testbed's split is random; no reference here
        assert out.exit_code == 0, out.output
        results[name] = json.loads(out.stdout)
    clean, quirky = results["clean"], results["quirky"]
    assert (clean["reject"], clean["pairs_used"]) == (quirky["reject"], quirky["pairs_used"])
    assert quirky["e_value"] == pytest.approx(clean["e_value"], rel=1e-6)
    (api_clean,), (api_quirky,) = clean["api"].values(), quirky["api"].values()
    assert api_clean["mode"] == api_quirky["mode"] == "logprobs-echo"
    assert (api_clean["list_prompts"], api_clean["echo_shift"]) == (True, 0)
    assert (api_quirky["list_prompts"], api_quirky["echo_shift"]) == (False, -1)
    assert quirky["usage"]["rejected"] == 3 and quirky["usage"]["retries"] == 0
    html = open(quirky["report"]).read()
    assert "API mode of" in html and api_quirky["summary"] in html and "realigned by -1" in html


def test_no_form_of_the_empty_prefix_leaves_position_1_unknown(start_server, tmp_path):
    """A server that answers "" with 500 and a tokenizer without BOS/EOS text to send
    instead: position 1 is unknown (-1), every other position is asked, the summary says so,
    and the refusal costs 3 tries once, not a retry per text."""
    import copy

    with start_server(empty_prompt=False) as (app, url):
        b = api(url, tmp_path / "q.sqlite", mode="label")
        b.tokenizer = copy.deepcopy(b.tokenizer)  # the loaded tokenizer is shared
        b.tokenizer.bos_token = b.tokenizer.eos_token = None
        got = b.score(texts(2))
        assert b.describe()["empty_prompt"] is None and "position 1 unknown" in b.describe()["summary"]
        assert b.usage()["rejected"] == app.state.stats["refused"] == 3 and b.usage()["retries"] == 0
    for g in got:
        assert g.argmax[0] == -1 and (g.argmax[1:] >= 0).mean() > 0.9  # -1 elsewhere: byte fragments


def test_cli_extract_reports_the_mode(start_server, artifacts, tmp_path):
    """`trainspotter extract --json` against the llama-cpp-python imitation says how the
    server was queried (as the audit's JSON does)."""
    from typer.testing import CliRunner

    from trainspotter.flows.cli import app as cli

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts(2))))
    with start_server(**LLAMA_CPP) as (_, url):
        out = CliRunner().invoke(cli, ["extract", "--data", str(data), "--model",
                                       f"openai:mini@{url}?tokenizer=testbed:mini", "--access", "gray",
                                       "--no-perturbations", "--out", str(tmp_path / "f.parquet"), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    (api_mode,) = got["api"].values()
    assert got["rows"] == 2 and api_mode["mode"] == "logprobs-echo" and api_mode["echo_values"] is False
    assert api_mode["empty_prompt"] and "read from echo's top-k rows" in api_mode["summary"]


def test_lookup_censors_at_the_kth_largest_not_the_smallest_entry():
    """A top-k dict from llama-cpp-python can hold one entry more than k (the fed token's own,
    from the same row): a token absent from it has log p at most the k-th largest value, and
    the smallest entry would not be an upper bound."""
    from trainspotter.backends.api.positions import lookup as _lookup

    top = {"a": -0.1, "b": -1.0, "c": -2.0, "fed": -9.0}
    assert _lookup(top, "b", 3) == -1.0 and _lookup(top, "fed", 3) == -9.0
    assert _lookup(top, "z", 3) == -2.0 and _lookup(top, "z", None) == -9.0
    assert _lookup({"a": -0.1}, "z", 5) == -0.1  # fewer entries than k (duplicates merged)
