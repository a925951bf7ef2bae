"""The `trainspotter` command as a user runs it (subprocesses)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import run_cli

CLI = [sys.executable, "-m", "trainspotter.flows.cli"]


def run(*args, env=None, **kw):
    return run_cli(list(args), env=env or os.environ.copy(), timeout=600, **kw)


def test_assets_json_lists_installed_assets():
    out = run("assets", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["wikipedia-leads-en"]["installed"] and rows["wikipedia-leads-en"]["path"].endswith(".json")
    assert rows["all-minilm-l6-v2"]["installed"]


@pytest.mark.parametrize("content,expected", [
    (None, "no such file"),
    (b"", "no passages"),
    (b'{"text": "fine"}\n{"txt": "oops"}\n', ":2: no `text` field"),
    (b'{"text": "fine"}\n{"text": "\xff\xfe"}\n', ":2: not valid UTF-8"),
])
def test_audit_bad_input_is_one_clear_line(tmp_path, mini_testbed, content, expected):
    suspect = tmp_path / "suspect.jsonl"
    if content is not None:
        suspect.write_bytes(content)
    out = run("audit", "--suspect", str(suspect), "--heldout", str(mini_testbed / "heldout.jsonl"),
              "--model", "testbed:mini")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: {suspect}") and expected in lines[0]
    assert "Traceback" not in out.stderr + out.stdout


def test_audit_bad_model_spec_and_option(tmp_path, mini_testbed):
    held = str(mini_testbed / "heldout.jsonl")
    out = run("audit", "--suspect", held, "--heldout", held, "--model", "testbed:absent")
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: model spec 'testbed:absent': testbed 'absent' is not built; "
        "run `trainspotter testbed build absent`")
    out = run("audit", "--suspect", held, "--heldout", held, "--model", "testbed:mini", "--alpha", "1.5")
    assert out.returncode == 2 and "alpha" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "no-such-host.invalid"])
def test_an_unreachable_api_is_one_line_within_seconds(mini_testbed, host):
    """An `openai:` spec where nothing listens (or a host that does not resolve): one error
    line, non-zero exit, in seconds: no retries, no Prefect traceback (it took 179 s, 7
    attempts and 111 lines of Prefect ERROR logs)."""
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    held = str(mini_testbed / "heldout.jsonl")
    # A first retry would sleep at least `backoff` seconds: a run shorter than that made one
    # attempt, whatever the machine's load does to the CLI's own start-up (20 s at load 10).
    backoff = 120
    start = time.monotonic()
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout", held, "--max-pairs", "10",
              "--model", f"openai:mini@http://{host.format(port=port)}/v1?tokenizer=testbed:mini&backoff={backoff}")
    took = time.monotonic() - start
    assert out.returncode != 0 and took < backoff, (out.returncode, took)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the server http://"), out.stderr
    assert ("connection refused" if "127.0.0.1" in host else "does not resolve") in lines[0]
    assert "Traceback" not in out.stderr + out.stdout


def test_audit_json_on_user_files(tmp_path, mini_testbed):
    """Members vs held-out given as the user's own CSV file, capped at 40 pairs."""
    import pandas as pd

    from trainspotter.data import load_passages

    csv = tmp_path / "members.csv"
    pd.DataFrame(load_passages(mini_testbed / "member.jsonl")).to_csv(csv, index=False)
    out = run("audit", "--suspect", str(csv), "--heldout", str(mini_testbed / "heldout.jsonl"),
              "--model", "testbed:mini", "--reference", "testbed:mini/reference",
              "--max-pairs", "40", "--name", "user-files", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["reject"] is True and result["pairs_used"] <= 40
    assert result["e_value"] >= 20 and os.path.exists(result["plot"])
    # the plot is the run's own artifact in the file store, not a temporary copy
    assert Path(result["plot"]).as_uri() == result["artifacts"] + "/wealth.png"


def test_serve_json_reports_where_it_listens(mini_testbed):
    """`serve --port 0 --json`: one JSON line on stdout once the socket listens."""
    import urllib.request

    proc = subprocess.Popen(CLI + ["serve", "testbed:mini", "--port", "0", "--model-name", "mini", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        info = json.loads(proc.stdout.readline())
        assert info["model"] == "mini" and info["port"] > 0 and info["url"] == f"http://127.0.0.1:{info['port']}/v1"
        with urllib.request.urlopen(info["url"] + "/models", timeout=30) as r:
            assert [m["id"] for m in json.load(r)["data"]] == ["mini"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def borderline_features(mini_testbed: Path, shift: float = 1.0, seed: int = 3):
    """An ``extract_fn`` with constructed features in place of the model's: gray_ppl ~ N(0, 1)
    for held-out passages, N(-shift, 1) for members (lower perplexity: member-like), drawn
    once in file order. With mini's files and the audit's seed 0 the e-process rejects after
    25 pairs (e 23.6) while the fixed-n DI p-value on them is 0.90, far above α = 0.05; the
    same with every value moved by up to 1e-3, so no CPU's rounding changes the outcome (a
    model trained on this machine gave 0.094 here and 0.036 on another)."""
    import numpy as np

    from trainspotter.data import load_passages

    rng, table = np.random.default_rng(seed), {}
    for side, name, move in (("suspect", "member", shift), ("heldout", "heldout", 0.0)):
        for p in load_passages(mini_testbed / f"{name}.jsonl"):
            table[side, p["id"]] = float(rng.normal() - move)

    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        half = len(passages) // 2  # each batch: its suspect passages, then its held-out ones
        return [{"gray_ppl": table["suspect" if i < half else "heldout", p["id"]]} for i, p in enumerate(passages)]

    return extract_fn


def test_audit_explains_the_fixed_n_p_value_beside_the_e_value(mini_testbed, tmp_path, monkeypatch):
    """The e-process rejects while the fixed-n DI p-value on the same pairs is above α: the
    table's caption says which number decides; the disagreement is explained under the table,
    in the JSON and the report. The CLI runs in this process (typer's runner) with the audit's
    features constructed (``borderline_features``) instead of a trained model's, whose
    borderline p-value differs between CPUs."""
    from typer.testing import CliRunner

    import trainspotter.flows.audit as audit_flow
    from trainspotter.flows.cli import app
    from trainspotter.flows.report import render_report

    monkeypatch.setattr(audit_flow, "_extract_fn", lambda config, remote: borderline_features(mini_testbed))
    monkeypatch.setenv("COLUMNS", "100")
    args = ["audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
            str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--name", "borderline",
            "--assume-exchangeable"]  # the testbed's random split; no reference for a placebo check
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output[-2000:]
    r = json.loads(out.stdout)
    assert r["model_reject"] and r["pairs_used"] == 25 and r["baseline_p_value"] == pytest.approx(0.90, abs=0.02)
    assert r["baseline_disagrees"] is True
    assert r["baseline_note"].startswith(f"The decision rests on the e-value ({r['e_value']:.3g} ≥ 1/α = 20)")
    assert f"({r['baseline_p_value']:.3g})" in r["baseline_note"] and "They disagree" in r["baseline_note"]
    page = render_report(r["run_id"], tmp_path / "page.html").read_text()
    assert "They disagree" in page
    table = CliRunner().invoke(app, args)
    text = " ".join(table.stdout.split())  # rich folds the caption and the note
    assert table.exit_code == 0 and "The decision rests on the e-value: reject H0 once it reaches 1/α" in text
    assert "is a comparison only" in text and "They disagree: the audit stopped as soon as" in text


def test_a_black_box_no_evidence_says_how_little_it_says(mini_testbed):
    """Non-members of mini audited from greedy tokens alone: "no evidence", and the explanation
    (JSON, table) says that a black-box audit misses text seen once (README, "What a black-box
    audit can see"); the gray-box twin of this audit has no such sentence (test_cli_audit_sets)."""
    from trainspotter.auditing.explain import BLACK_BOX_CAVEAT

    args = ["audit", "--suspect", str(mini_testbed / "nonmember.jsonl"), "--heldout",
            str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--access", "black"]
    r = json.loads(run(*args, "--json").stdout)
    assert r["verdict"] == "no evidence" and all(c.startswith("black_") for c in r["features"])
    assert r["explanation"].endswith(BLACK_BOX_CAVEAT) and "greedy tokens only" in BLACK_BOX_CAVEAT
    text = " ".join(run(*args, env=os.environ | {"COLUMNS": "120"}).stdout.split())
    assert " ".join(BLACK_BOX_CAVEAT.split()) in text


def test_audit_is_quiet_with_a_progress_bar_and_verbose_with_v(mini_testbed):
    """Without -v the console has the progress bar (pairs queried, e-value) and the result,
    none of Prefect's or MLflow's INFO lines; -v brings them back."""
    args = ["audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
            str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--batch-pairs", "4",
            "--name", "quiet", "--assume-exchangeable"]
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_LOGGING_LEVEL", "MLFLOW_LOGGING_LEVEL")}
    quiet = run(*args, env=env)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "INFO" not in quiet.stderr, quiet.stderr[-2000:]
    bar = [line for line in quiet.stderr.splitlines() if line.startswith("pairs queried")]
    assert bar and "/80" in bar[-1], quiet.stderr
    assert float(re.search(r"e-value ([\d.]+)", bar[-1]).group(1)) >= 20  # it rejected: W ≥ 1/α
    assert "reject H0" in quiet.stdout
    loud = run("-v", *args, env=env)
    assert loud.returncode == 0 and "| INFO    | Flow run" in loud.stderr, loud.stderr[-2000:]


def test_audit_scorer_and_features_options_reach_the_audit(mini_testbed, tmp_path):
    """--scorer and --features are the audit's settings, recorded in its MLflow run."""
    import mlflow

    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
              str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--reference",
              "testbed:mini/reference", "--features", "calibrated", "--scorer", "paper", "--max-pairs", "16",
              "--name", "scorer-option", "--json")
    assert out.returncode in (0, 3), out.stderr[-2000:]
    from trainspotter.flows.tracking import tracking_uri

    params = mlflow.MlflowClient(tracking_uri()).get_run(json.loads(out.stdout)["run_id"]).data.params
    assert params["test.scorer"] == "paper" and params["features.relative_only"] == "True"
    bad = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
              str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--scorer", "adam")
    assert bad.returncode == 2 and "error: option --scorer 'adam': expected one of online, paper, fixed" in bad.stderr


def test_extract_features_option_picks_the_set_and_explicit_flags_win(mini_testbed, tmp_path):
    import pandas as pd

    from trainspotter.features.features import MIN_K

    data = tmp_path / "few.jsonl"
    data.write_text("".join((mini_testbed / "member.jsonl").read_text().splitlines(keepends=True)[:4]))
    lean = run("extract", "--data", str(data), "--model", "testbed:mini", "--features", "lean",
               "--out", str(tmp_path / "lean.parquet"))
    assert lean.returncode == 0, lean.stderr[-2000:]
    cols = set(pd.read_parquet(tmp_path / "lean.parquet").columns)
    assert "gray_ppl" in cols and not any("_pert_" in c for c in cols)
    assert {c for c in cols if c.startswith("gray_min_k_")} == {f"gray_min_k_{round(MIN_K * 100)}"}  # lean: one K
    flagged = run("extract", "--data", str(data), "--model", "testbed:mini", "--features", "lean",
                  "--perturbations", "--no-sequence", "--out", str(tmp_path / "pert.parquet"))
    assert flagged.returncode == 0, flagged.stderr[-2000:]
    assert any("_pert_" in c for c in pd.read_parquet(tmp_path / "pert.parquet").columns)
    no_ref = run("extract", "--data", str(data), "--model", "testbed:mini", "--features", "calibrated",
                 "--out", str(tmp_path / "x.parquet"))
    assert no_ref.returncode == 2 and no_ref.stderr.strip() == (  # the audit's check and words (test_shift_cli)
        "error: option --features: the calibrated (reference-relative) feature set needs a reference model")


def test_benchmark_di_access_takes_the_audit_levels(tmp_path):
    out = run("benchmark", "--testbed", "mini", "--di-access", "gray,grey", "--out", str(tmp_path))
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: option --di-access 'gray,grey': expected one or more of gray, black, both, "
                                  "comma-separated")


def test_benchmark_without_out_writes_under_the_artifacts_folder(mini_testbed, artifacts):
    """A quick benchmark without --out leaves the repository's committed tables alone (its
    default was benchmarks/results/TESTBED/, so a 8-trial run replaced them): its files go to
    $TRAINSPOTTER_ARTIFACTS/benchmark-results/TESTBED/, which the JSON names."""
    repo_results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    before = {p: p.stat().st_mtime_ns for p in repo_results.rglob("*")}
    out = run("benchmark", "--testbed", "mini", "--methods", "loss,min_k", "--limit", "8", "--trials", "4",
              "--n-max", "8", "--strategies", "ons", "--payoffs", "diff", "--null-trials", "4", "--alphas", "0.05", "--cost-samples", "0", "--n-boot", "0",
              "--perturbation-kinds", "none", "--di-access", "gray", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    files = json.loads(out.stdout)["files"]
    where = artifacts / "benchmark-results" / "mini"
    assert files and all(Path(f).parent == where and Path(f).exists() for f in files.values()), files
    assert {p: p.stat().st_mtime_ns for p in repo_results.rglob("*")} == before  # nothing new, nothing rewritten
    assert not (repo_results / "mini").exists()


def test_audit_report_states_what_was_audited_and_how(mini_testbed):
    """The audit's HTML page names the model (spec and fingerprint), each input file (sha256
    and passage count), access, feature set, test settings, α, seed, version and commit;
    its title no longer reads "Dataset-inference audit audit" for the default name."""
    import hashlib
    import html

    from trainspotter import __version__
    from trainspotter.backends import spec_fingerprint

    member, held = mini_testbed / "member.jsonl", mini_testbed / "heldout.jsonl"
    out = run("audit", "--suspect", str(member), "--heldout", str(held), "--model", "testbed:mini",
              "--reference", "testbed:mini/reference", "--seed", "1", "--alpha", "0.04", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout)
    page = html.unescape(Path(r["report"]).read_text())
    text = " ".join(re.sub(r"<[^>]+>", " ", page.replace("<code>", "").replace("</code>", "")).split())  # as read
    assert "audit audit" not in text and "<title>Dataset-inference audit</title>" in page
    for spec in ("testbed:mini", "testbed:mini/reference"):
        assert f"{spec} (fingerprint {spec_fingerprint(spec)})" in text
    for path in (member, held):
        digest, count = hashlib.sha256(path.read_bytes()).hexdigest(), len(path.read_text().splitlines())
        assert f"{path}: {count} passages, sha256 {digest}" in text
    assert "access gray" in text and "feature set lean: gray_ppl," in text
    assert "test preset default: mixture/diff, λ_max 0.8, online scorer, one-sided; 16 pairs per batch" in text
    assert "α 0.04" in text and "seed 1" in text
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    assert f"trainspotter {__version__}, git commit {commit}" in text
    assert r["provenance"]["inputs"][0]["sha256"] == hashlib.sha256(member.read_bytes()).hexdigest()


def test_without_wordnet_the_synonym_perturbation_is_one_error_line(mini_testbed, tmp_path):
    """install.sh skips WordNet without root: what needs it (`extract --features full`, the
    synonym perturbation) stops before any flow with one line naming what to install, what
    needs it and how to do without; the lean set needs none of it."""
    env = os.environ | {"TRAINSPOTTER_NLTK_DATA": str(tmp_path / "no-nltk-data")}  # WordNet only there
    args = ["extract", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
            str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini"]
    out = run(*args, "--features", "full", "--out", str(tmp_path / "full.parquet"), env=env)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith("error: WordNet is not installed") and "synonym perturbation" in lines[0]
    assert "--features lean" in lines[0] and "Traceback" not in out.stderr and not (tmp_path / "full.parquet").exists()


@pytest.mark.parametrize("sets", [1, 2])
def test_the_audit_checks_its_inputs_once_from_the_command_to_the_flow(mini_testbed, monkeypatch, sets):
    """The CLI checks an audit's inputs before any model loads, and its flow's audit takes them as
    checked (issue 62: each check ran twice, CLI then flow): ``check_inputs`` runs once per suspect
    set, wherever it is called from. The features are constructed (no model)."""
    from typer.testing import CliRunner

    import trainspotter.flows.audit as audit_flow
    import trainspotter.loop.inputs as inputs
    import trainspotter.loop.run as run_module
    import trainspotter.loop.sets as sets_module
    from trainspotter.flows.cli import app

    calls, check = [], inputs.check_inputs
    spy = lambda config, *sides: (calls.append(config.suspect), check(config, *sides))[1]  # noqa: E731
    for module in (inputs, run_module, sets_module):
        monkeypatch.setattr(module, "check_inputs", spy)
    monkeypatch.setattr(audit_flow, "_extract_fn", lambda config, remote: lambda passages, n: [
        {"gray_ppl": (sum(map(ord, p["id"])) % 13) / 13.0} for p in passages])
    suspects = [str(mini_testbed / name) for name in ("member.jsonl", "nonmember.jsonl")[:sets]]
    out = CliRunner().invoke(app, ["audit", *(a for s in suspects for a in ("--suspect", s)), "--heldout",
                                   str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--name",
                                   f"checked-once-{sets}", "--assume-exchangeable", "--json"])
    assert out.exit_code in (0, 3), out.output[-2000:]
    assert sorted(calls) == sorted(suspects)  # one check per set, none again in the flow
    calls.clear()  # the library call alone checks too, once
    from trainspotter import AuditConfig, audit

    config = AuditConfig(suspect=suspects[0], heldout=str(mini_testbed / "heldout.jsonl"), model="testbed:mini",
                         assume_exchangeable=True)
    audit(config, extract_fn=audit_flow._extract_fn(config, False))
    assert calls == suspects[:1]
    calls.clear()  # passages checked for another config are checked again
    marked = inputs.checked_sides(config.model_copy(update={"seed": 1}))
    audit(config, extract_fn=audit_flow._extract_fn(config, False), passages=marked)
    assert calls == suspects[:1] * 2
