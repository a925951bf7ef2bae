"""Audits through the API: same decision under injected faults; the key is stored nowhere."""

from __future__ import annotations

import pytest
from cli_process import run_cli

from trainspotter.testbeds.build import split_path

SECRET = "sk-test-SECRET-12345"


def test_audit_same_result_under_faults_and_key_never_stored(mini_testbed, start_server, artifacts,
                                                             monkeypatch):
    from trainspotter.flows.audit import AuditConfig, audit_flow
    from trainspotter.backends import load_backend

    monkeypatch.setenv("TS_TEST_KEY", SECRET)
    results, usage = {}, {}
    for rate in (0.0, 0.2):
        # separate servers -> separate endpoints, so neither the query cache nor the task
        # cache lets the faulty run reuse the clean run's answers
        with start_server(fail_rate=rate, seed=3, fail_sleep=1.0) as (app, url):
            spec = (f"openai:mini@{url}?tokenizer=testbed:mini&key_env=TS_TEST_KEY"
                    f"&backoff=0.001&timeout=0.5&batch=4")
            config = AuditConfig(name=f"api-faults-{rate}", suspect=str(split_path("mini", "member")),
                                 heldout=str(split_path("mini", "heldout")), model=spec,
                                 max_pairs=24, batch_pairs=12)
            results[rate] = audit_flow(config)
            usage[rate] = load_backend(spec).usage() | {"faults": sum(app.state.stats["faults"].values())}
    clean, faulty = results[0.0], results[0.2]
    assert (clean["reject"], clean["pairs_used"]) == (faulty["reject"], faulty["pairs_used"])
    assert faulty["e_value"] == pytest.approx(clean["e_value"], rel=1e-9)
    assert usage[0.0]["retries"] == 0 and 0 < usage[0.2]["retries"] == usage[0.2]["faults"]
    assert usage[0.2]["http_requests"] <= 7 * usage[0.2]["requests"]  # 6 retries at most per request
    print("usage", usage)

    # The key is in no MLflow param/artifact, Prefect result, log or the query cache.
    hits = [p for p in artifacts.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert hits == []
    assert (artifacts / "query-cache.sqlite").exists()


def test_audit_stops_at_the_budget_and_reports_spend_and_savings(mini_testbed, start_server):
    from trainspotter.flows.audit import AuditConfig, audit_flow

    def config(url, max_requests):
        return AuditConfig(name="api-budget", suspect=str(split_path("mini", "nonmember")),
                           heldout=str(split_path("mini", "heldout")), max_pairs=40, batch_pairs=4,
                           model=f"openai:mini@{url}?tokenizer=testbed:mini&batch=8&price=0.5"
                                 f"&max_requests={max_requests}")

    with start_server(seed=5) as (app, url):
        capped = audit_flow(config(url, 6))
        assert capped["stopped_by"] == "budget" and 0 < capped["pairs_queried"] < 40
        assert capped["usage"]["requests"] <= 6 and capped["usage"]["cost"] > 0
        per_pair = capped["usage"]["cost"] / capped["pairs_queried"]
        saved = capped["saved_by_stopping"]
        assert saved["pairs"] == 40 - capped["pairs_queried"]
        assert saved["cost"] == pytest.approx(per_pair * saved["pairs"])
        # more budget: the rerun reuses every finished batch and asks only for the rest
        resumed = audit_flow(config(url, 1000))
    with start_server(seed=5) as (app, url):  # another endpoint: nothing cached
        fresh = audit_flow(config(url, 1000))
    assert resumed["stopped_by"] == fresh["stopped_by"] != "budget"
    assert resumed["pairs_queried"] == fresh["pairs_queried"] > capped["pairs_queried"]
    assert resumed["e_value"] == pytest.approx(fresh["e_value"])
    assert resumed["usage"]["requests"] == fresh["usage"]["requests"] - capped["usage"]["requests"]


def test_cli_api_that_keeps_failing_is_one_line_without_prefect_tracebacks(mini_testbed, start_server):
    """A server that answers every request with a fault, once its retries are spent inside the
    audit's flow: the CLI's one `error:` line, not Prefect's ERROR logs and tracebacks of the
    task and the flow around it (111 lines before)."""
    import os

    with start_server(fail_rate=1.0, seed=0, fail_sleep=0.0) as (_, url):
        out = run_cli(["audit", "--suspect", str(split_path("mini", "member")),
                       "--heldout", str(split_path("mini", "heldout")), "--max-pairs", "8",
                       "--model", f"openai:mini@{url}?tokenizer=testbed:mini&mode=label&retries=1&backoff=0.001"],
                      timeout=600, env=os.environ | {"OPENAI_API_KEY": SECRET})
    assert out.returncode == 1, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip() and "pairs queried" not in ln]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "mini" in lines[0], out.stderr[-3000:]
    assert "Traceback" not in out.stderr and "ERROR" not in out.stderr


def test_audit_over_an_api_says_how_many_log_probs_are_bounds(mini_testbed, start_server, tmp_path):
    """Over an API whose log-probs come from top-5 lists (llama-cpp-python's echo, imitated by
    `serve --echo-logprobs fed`), a token outside them gets the 5th log-prob,
    an upper bound: the audit's JSON (usage), table and report say how many of the log-probs
    it read are bounds rather than values (they said nothing)."""
    import json
    import os
    import re

    from trainspotter.flows.report import render_report

    cli = ["audit", "--suspect", str(split_path("mini", "member")),
           "--heldout", str(split_path("mini", "heldout")), "--max-pairs", "16", "--name", "bounds",
           "--assume-exchangeable"]  # the testbed's random split, no reference: 16 pairs may decide
    env = os.environ | {"OPENAI_API_KEY": SECRET, "COLUMNS": "200"}
    # llama-cpp-python's echo: each token's log-prob read from its row's top-5, a bound where missing
    with start_server(echo_logprobs="fed") as (_, url):
        cli += ["--model", f"openai:mini@{url}?tokenizer=testbed:mini&top_logprobs=5"]
        out = run_cli([*cli, "--json"], timeout=600, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        # --refresh: features recomputed (from cached answers): a run served by the feature cache
        # reads no log-prob, so it has none to count (a known gap)
        table = run_cli([*cli, "--refresh"], timeout=600, env=env)
    r = json.loads(out.stdout)
    bounds, values = r["usage"]["logprob_bounds"], r["usage"]["logprob_values"]
    assert bounds > 0 and values > 0  # mini's top-5 misses some tokens of every text
    share = f"{bounds / (bounds + values):.0%}"
    sentence = f"{bounds:g} of {bounds + values:g} token log-probs read from the API ({share}) are upper bounds"
    assert table.returncode == 0 and sentence in " ".join(table.stdout.split()), table.stdout[-2000:]
    page = re.sub(r"<[^>]+>", " ", render_report(r["run_id"], tmp_path / "page.html").read_text())
    assert sentence in " ".join(page.split())


def test_api_usage_in_the_table_and_mlflow_and_a_cached_rerun_says_so(mini_testbed, start_server):
    """An API audit showed no requests, tokens or cost in the table (only summary.json; no MLflow
    metric), and a cached rerun's --json had "requests": 0.0 as if nothing had happened."""
    import json

    import mlflow
    from typer.testing import CliRunner

    from trainspotter.flows.cli import app
    from trainspotter.flows.tracking import tracking_uri

    with start_server(seed=11) as (_, url):
        spec = f"openai:mini@{url}?tokenizer=testbed:mini&batch=8&price=0.5"
        args = ["audit", "--suspect", str(split_path("mini", "nonmember")), "--heldout",
                str(split_path("mini", "heldout")), "--max-pairs", "8", "--batch-pairs", "4", "--name", "api-usage",
                "--model", spec]
        invoke = lambda *extra: CliRunner().invoke(app, [*args, *extra], env={"COLUMNS": "80"})  # noqa: E731
        first, again, table = invoke("--json"), invoke("--json"), invoke()
    assert first.exit_code == again.exit_code == table.exit_code == 0, first.output[-2000:] + table.output[-2000:]
    used, cached = json.loads(first.stdout)["usage"], json.loads(again.stdout)["usage"]
    assert used["served_from"] == "api" and used["requests"] > 0 and used["cost"] > 0
    assert cached["served_from"] == "cache" and cached["requests"] == cached["cost"] == 0
    metrics = mlflow.tracking.MlflowClient(tracking_uri()).get_run(json.loads(first.stdout)["run_id"]).data.metrics
    assert metrics["api_requests"] == used["requests"] and metrics["api_total_tokens"] == used["total_tokens"]
    assert metrics["api_cost"] == pytest.approx(used["cost"])
    text = table.stdout
    assert f"of openai:mini@{url}, gray-box (α = 0.05)" in " ".join(text.split())
    assert "0 requests, 0 tokens, cost 0 (from the cache)" in text  # whole, in the table
