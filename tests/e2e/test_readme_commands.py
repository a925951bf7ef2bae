"""The guide's command list (docs/guide/audit.md; the README's before issue 52), verb by verb, as a
user runs it on the `mini` testbed.

The list is read from that page itself: every documented verb must have a run below, every
documented option must exist in the verb's parser and be used by one of those runs (or be
named in SKIPPED with the test that covers it), and every documented choice (`a|b|c`)
must be accepted. A path the README shows cannot silently break or drift from the docs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import typer
from cli_process import run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "trainspotter.flows.cli"]
# Documented options the runs below leave out, and where they are exercised instead.
SKIPPED = {("audit", "--dask-address"): "tests/e2e/test_dask_cli.py (needs a Dask cluster)",
           ("audit", "--text-features"): "tests/e2e/test_match_cli.py (ngrams+minilm: loads MiniLM, a matched audit and verify)",
           ("extract", "--dask"): "tests/e2e/test_dask_cli.py",
           ("extract", "--dask-address"): "tests/e2e/test_dask_cli.py",
           ("testbed build", "--force"): "rebuilding a testbed here would invalidate the session's mini",
           ("testbed build", "--references"): "tests/unit/test_references.py (mini-pretrain, through the CLI)",
           ("benchmark", "--reference"): "tests/flows/test_benchmark_references.py (mini-pretrain)",
           ("benchmark", "--reference-models"): "tests/flows/test_benchmark_references.py (mini-pretrain)",
           ("benchmark", "--partitions"): "tests/flows/test_tddbench_flow.py (mini-pretrain)",
           ("benchmark", "--suite"): "tests/e2e/test_shift_cli.py, test_twins_suite_cli.py, test_keyed_suite_cli.py "
                                     "(each suite from the command line, its report read)",
           ("benchmark", "--config"): "tests/e2e/test_keyed_suite_cli.py (the keyed suite's settings)"}


def documented() -> list[tuple[str, list[tuple[str, str]]]]:
    """(verb path, [(option, documented value)]) for each `.venv/bin/trainspotter` line of
    the README's command list (continuation lines joined, comments dropped)."""
    text = (ROOT / "docs" / "guide" / "audit.md").read_text()
    block = text.split("After (1)", 1)[1].split("```bash", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    group = typer.main.get_command(_app())
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line.strip())
        if not line.startswith(".venv/bin/trainspotter "):
            continue
        words, cmd = line.split()[1:], group
        verb = []
        for w in words:  # `cache stats|clear`: each alternative is a command of the group
            if w.split("|")[0] not in getattr(cmd, "commands", {}):  # typer's own (vendored) click
                break
            assert set(w.split("|")) <= set(cmd.commands), f"README: `{line}`: no command {w}"
            verb.append(w.split("|")[0])
            cmd = cmd.commands[verb[-1]]
        out.append((" ".join(verb), re.findall(r"(--[a-z][a-z-]*)(?:\s+([^\s\[\]|][^\s\[\]]*))?", line)))
    return out


def _app():
    from trainspotter.flows.cli import app

    return app


def _command(verb: str):
    cmd = typer.main.get_command(_app())
    for word in verb.split():
        cmd = cmd.commands[word.split("|")[0]]
    return cmd


def test_every_documented_option_exists_and_its_choices_parse():
    entries = documented()
    assert len(entries) >= 12, entries  # the parser found the list
    for verb, options in entries:
        cmd = _command(verb)
        params = {opt: p for p in cmd.params for opt in p.opts + p.secondary_opts}
        for option, value in options:
            assert option in params, f"README documents `{verb} {option}`, which the parser lacks"
            p = params[option]
            if "|" in value and not p.is_flag:  # every documented alternative parses
                ctx = cmd.context_class(cmd)
                for alt in value.split("|"):
                    assert p.process_value(ctx, alt) not in (None, ""), (verb, option, alt)
    from trainspotter.presets import TESTBEDS

    build = next(line for line in (ROOT / "docs" / "guide" / "audit.md").read_text().splitlines() if "testbed build" in line)
    assert set(build.split("testbed build ")[1].split()[0].split("|")) <= set(TESTBEDS)


def run(*args, env=None, timeout=600):
    out = run_cli([str(a) for a in args], env=env or os.environ.copy(), timeout=timeout)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert out.returncode == 0, f"{args}: exit {out.returncode}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def runs(mini_testbed, tmp_path_factory) -> dict[str, list[list[str]]]:
    """Each documented verb run with its documented options on `mini`; what was run, by verb."""
    tmp = tmp_path_factory.mktemp("readme")
    member, heldout = mini_testbed / "member.jsonl", mini_testbed / "heldout.jsonl"
    suspect = tmp / "mine.jsonl"  # the members minus the two passages `extract --data` labels below
    rows = [json.loads(line) for line in member.read_text().splitlines()]
    suspect.write_text("".join(json.dumps(r) + "\n" for r in rows[:24]))
    public = tmp / "public.jsonl"
    public.write_text("".join(heldout.read_text().splitlines(keepends=True)[:24]))
    done: dict[str, list[list[str]]] = {}

    def go(verb: str, *args, **kw):
        done.setdefault(verb, []).append([str(a) for a in args])
        return run(*verb.split(), *args, **kw)

    go("assets", "--json")
    go("testbed build", "mini", "--json")
    common = ["--suspect", suspect, "--heldout", public, "--model", "testbed:mini",
              "--reference", "testbed:mini/reference"]
    audit = json.loads(go("audit", *common, "--access", "gray", "--features", "calibrated", "--alpha", "0.05",
                          "--max-pairs", "20", "--name", "readme", "--ledger", "--preset", "default",
                          "--payoff", "diff", "--strategy", "mixture", "--lambda-max", "0.8", "--scorer", "online",
                          "--shift-check", "stop", "--placebo", "testbed:mini/reference", "--assume-exchangeable",
                          "--refresh", "--json").stdout)
    assert audit["verdict"] == "trained on" and audit["pairs_used"] <= 20
    assert audit["placebo"]["model"] == "testbed:mini/reference" and audit["placebo"]["ran"]
    go("features list", "--access", "gray", "--json")
    features = tmp / "features.parquet"
    go("extract", "--suspect", suspect, "--heldout", public, "--model", "testbed:mini", "--reference",
       "testbed:mini/reference", "--access", "gray", "--features", "full", "--out", features, "--json")
    labelled = tmp / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(r | {"set": s}) + "\n" for r, s in
                                [(rows[30], "suspect"), (rows[31], "suspect"),
                                 *[(json.loads(h), "heldout") for h in heldout.read_text().splitlines()[30:32]]]))
    go("extract", "--data", labelled, "--model", "testbed:mini", "--access", "black", "--out", tmp / "b.parquet",
       "--json")
    test = json.loads(go("test", features, "--alpha", "0.05", "--strategy", "mixture", "--payoff", "diff",
                         "--json").stdout)
    assert test["reject"] is True
    go("simulate", features, "--trials", "20", "--null", "--n-max", "10", "--json")
    go("simulate", features, "--trials", "20", "--pollution", "0,0.1,0.25", "--json")
    bench = tmp / "bench"
    go("benchmark", "--testbed", "mini", "--methods", "loss,ez_mia", "--trials", "8", "--null-trials", "8",
       "--n-max", "10", "--di-access", "gray,black", "--limit", "12", "--perturbation-kinds", "deletion",
       "--cost-samples", "0", "--n-boot", "50", "--alphas", "0.05", "--out", bench, "--json")
    go("cache", "stats", "--json")
    go("cache", "clear", "--json")
    shown = json.loads(go("ledger show", "readme", "--json").stdout)
    assert shown["name"] == "readme"
    go("report", audit["run_id"], "--out", tmp / "report.html")
    assert "<html" in (tmp / "report.html").read_text().lower()

    # serve runs until stopped: a request to its /v1/models, then a clean stop
    done.setdefault("serve", []).append(["testbed:mini", "--port", "0", "--fail-rate", "0.2", "--json"])
    proc = subprocess.Popen(CLI + ["serve", *done["serve"][0]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        info = json.loads(proc.stdout.readline())
        for _ in range(20):  # --fail-rate 0.2: a request may be an injected fault
            try:
                with urllib.request.urlopen(info["url"] + "/models", timeout=30) as r:
                    assert r.status == 200
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("serve never answered /v1/models")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return done


def test_every_documented_verb_and_option_runs(runs):
    for verb, options in documented():
        key = verb if verb in runs else verb.split()[0]  # `cache stats`: run as `cache` + stats, clear
        assert key in runs, f"README documents `{verb}` but this test never runs it"
        used = {a for args in runs[key] for a in args}
        for option, _ in options:
            assert option in used or (verb, option) in SKIPPED, f"`{verb} {option}` is documented but never run"
