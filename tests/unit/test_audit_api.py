"""The audit as a library call: no Prefect/MLflow, a result consistent with its own history,
presets, bad features named, and overlapping runs of one ledger taking turns."""

import json
import math
import subprocess
import sys
import threading
import time
import zlib

import numpy as np
import pytest
from cli_process import run_cli

from trainspotter.errors import InputError


def _rows(ids, side, shift=0.0):
    """Two features per passage, a fixed function of its id (no model needed)."""
    out = []
    for i in ids:
        rng = np.random.default_rng(zlib.crc32(i.encode()))
        out.append({"id": i, "set": side, "a": float(rng.normal() + shift), "b": float(rng.normal())})
    return out


def test_library_audit_in_a_fresh_interpreter(mini_testbed):
    """Notebook use: `from trainspotter import audit` imports neither prefect nor mlflow, the
    members are detected, and the e-value is the product of (1 + λ_t u_t) over the history."""
    code = f"""
import json, sys
import trainspotter
assert "torch" not in sys.modules  # `import trainspotter` stays light
from trainspotter import audit, AuditConfig, AuditResult
r = audit(AuditConfig(name="lib-mini", suspect="{mini_testbed / 'member.jsonl'}",
                      heldout="{mini_testbed / 'heldout.jsonl'}", model="testbed:mini",
                      reference="testbed:mini/reference", batch_pairs=8))
assert isinstance(r, AuditResult) and trainspotter.audit is audit
print(json.dumps({{"result": r.model_dump(),
                  "modules": sorted({{m.split(".")[0] for m in sys.modules}} & {{"prefect", "mlflow"}})}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    r = got["result"]
    assert got["modules"] == []
    assert r["reject"] and r["stopped_by"] == "rejected" and r["e_value"] >= 1 / r["alpha"]
    h = r["history"]
    assert len(h["wealth"]) == r["pairs_used"] == r["stop_time"] and r["wealth_start"] == 1.0
    product = math.prod(1 + lam * u for lam, u in zip(h["lambda"], h["u"]))
    assert r["e_value"] == pytest.approx(product, rel=1e-9)
    assert h["wealth"][-1] == pytest.approx(product, rel=1e-9)
    assert r["p_value"] == pytest.approx(min(1.0, 1 / max(h["wealth"])))
    assert all(abs(lam) <= 0.8 + 1e-12 for lam in h["lambda"])  # the default preset's λ_max


def test_presets_fill_only_unset_test_fields():
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS
    from trainspotter.stats.sequential import TestConfig

    base = {"suspect": "s", "heldout": "h", "model": "hf:m"}
    c = AuditConfig(**base)
    assert c.preset == DEFAULT_PRESET
    assert {k: getattr(c.test, k) for k in TEST_PRESETS[DEFAULT_PRESET]} == TEST_PRESETS[DEFAULT_PRESET]
    paper = AuditConfig(**base, preset="badi", test=TestConfig(alpha=0.01, payoff="ks"))
    assert (paper.test.strategy, paper.test.payoff, paper.test.lambda_max, paper.test.alpha) == \
        ("ons", "ks", 0.8, 0.01)  # explicit payoff and alpha win over the preset
    assert AuditConfig.model_validate(paper.model_dump(mode="json")).test == paper.test
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        AuditConfig(**base, preset="nope")


def test_an_audit_of_twins_takes_the_twins_preset_unless_one_is_named():
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS, TWINS_PRESET

    twins = AuditConfig(twins="tw", model="hf:m")
    assert twins.preset == TWINS_PRESET and twins.test.scorer == "fixed" == TEST_PRESETS[TWINS_PRESET]["scorer"]
    assert AuditConfig.model_validate(twins.model_dump(mode="json")).test == twins.test
    named = AuditConfig(twins="tw", model="hf:m", preset=DEFAULT_PRESET)
    assert (named.preset, named.test.scorer) == (DEFAULT_PRESET, "online")  # how an older twins ledger continues
    assert AuditConfig(suspect="s", heldout="h", model="hf:m").test.scorer == "online"


def test_non_finite_feature_in_a_later_batch_names_passage_and_column():
    from trainspotter.auditing.auditor import Auditor
    from trainspotter.stats.sequential import TestConfig

    auditor = Auditor(TestConfig())
    auditor.feed(_rows(["s1", "s2"], "suspect") + _rows(["h1", "h2"], "heldout"))
    bad = _rows(["s3", "s4"], "suspect") + _rows(["h3", "h4"], "heldout")
    bad[3]["b"] = float("nan")
    with pytest.raises(InputError, match=r"passage 'h4': feature b is nan"):
        auditor.feed(bad)
    assert auditor.test.t == 3  # pair 3 was bet on; pair 4 was refused before any update


def test_first_batch_fixes_the_columns():
    from trainspotter.auditing.auditor import Auditor

    rows = _rows(["s1", "s2"], "suspect") + _rows(["h1", "h2"], "heldout")
    rows[0]["b"] = float("inf")
    auditor = Auditor()
    auditor.feed(rows)
    assert auditor.columns == ["a"]  # b was not finite on the first batch: left out, said so
    assert auditor.features()["id"].tolist() == ["s1", "h1", "s2", "h2"]


def test_overlapping_runs_of_one_ledger_take_turns(tmp_path, mini_testbed):
    """Two runs of one recurring audit started while the first is still querying: the
    second waits for the ledger lock, then continues from the first's saved wealth on
    pairs the first did not use."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.ledger import load_ledger
    from trainspotter.loop.run import audit

    for side, n in (("suspect", 24), ("heldout", 24)):
        (tmp_path / f"{side}.jsonl").write_text(
            "".join(json.dumps({"id": f"{side[0]}{i}", "text": f"text {side} {i}"}) + "\n" for i in range(n)))
    started = threading.Event()

    def slow_extract(passages, batch_no):
        started.set()
        time.sleep(0.3)  # querying a model
        half = len(passages) // 2
        return [{k: v for k, v in r.items() if k != "set"} for r in
                _rows([p["id"] for p in passages[:half]], "suspect", shift=0.3)
                + _rows([p["id"] for p in passages[half:]], "heldout")]

    config = AuditConfig(name="overlap", suspect=str(tmp_path / "suspect.jsonl"),
                         heldout=str(tmp_path / "heldout.jsonl"), model="testbed:mini", ledger=True,
                         max_pairs=8, batch_pairs=4, test={"alpha": 1e-9})
    results = {}
    run = lambda key: results.__setitem__(key, audit(config, extract_fn=slow_extract, run_id=key))  # noqa: E731
    first = threading.Thread(target=run, args=("first",))
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    first.join(60)
    second.join(60)
    a, b = results["first"], results["second"]
    ledger = load_ledger("overlap")
    assert [r["run_id"] for r in ledger["runs"]] == ["first", "second"]
    assert a.wealth_start == 1.0 and b.wealth_start == pytest.approx(a.wealth)
    assert ledger["runs"][-1]["pairs_total"] == a.pairs_this_run + b.pairs_this_run == 16
    used = ledger["used"]["suspect"]
    assert len(used) == len(set(used)) == 16  # no pair bet on twice


@pytest.mark.parametrize("option, expected", [
    (["--preset", "nope"], "error: option --preset: unknown preset 'nope'; choose one of badi, default"),
    (["--payoff", "nope"], "error: option --payoff 'nope': expected one of mmd, ks, diff, mmd-std"),
    (["--lambda-max", "1.5"], "error: option --lambda-max: Input should be less than 1"),
])
def test_cli_rejects_bad_test_options_in_one_line(mini_testbed, option, expected):
    held = str(mini_testbed / "heldout.jsonl")
    out = run_cli(["audit", "--suspect", held, "--heldout", held, "--model", "testbed:mini", *option], timeout=300)
    assert out.returncode == 2 and out.stderr.startswith(expected), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_explain_baseline_says_which_number_decides_and_why_they_disagree():
    from trainspotter.auditing.explain import explain_baseline

    # e rejects (25 ≥ 20), p = 0.2 > α: the half-split test's low power on few pairs
    text = explain_baseline(True, 25.0, 0.05, 0.2, 10)
    assert text.startswith("The decision rests on the e-value (25 ≥ 1/α = 20). The fixed-n DI p-value (0.2)")
    assert "half of these 10 pairs" in text and "little power" in text
    # no rejection (e 3 < 100), p = 0.004 ≤ α = 0.01: a p-value at a data-chosen n is no evidence
    text = explain_baseline(False, 3.0, 0.01, 0.004, 50)
    assert "(3 < 1/α = 100)" in text and "(0.004)" in text and "sample size fixed before" in text
    assert "disagree" not in explain_baseline(True, 25.0, 0.05, 0.01, 10)  # both below α
    assert explain_baseline(False, 1.0, 0.05, None, 3).endswith("needs at least 4 pairs and 3 were tested.")


@pytest.mark.parametrize("case", ["overlap", "too few pairs"])
def test_library_audit_checks_its_inputs_as_the_cli_does(tmp_path, mini_testbed, case):
    """audit() itself refuses overlapping sets and an audit that could never reject, before
    any feature is extracted, with the very message the CLI prints as its one error line."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.run import audit

    lines = (mini_testbed / "member.jsonl").read_text().splitlines()
    suspect, heldout = tmp_path / "s.jsonl", tmp_path / "h.jsonl"
    suspect.write_text("\n".join(lines[:10]) + "\n")
    held = lines[9:19] if case == "overlap" else (mini_testbed / "heldout.jsonl").read_text().splitlines()[:3]
    heldout.write_text("\n".join(held) + "\n")

    def no_extraction(passages, batch_no):
        raise AssertionError("features extracted despite bad input")

    with pytest.raises(InputError) as e:
        audit(AuditConfig(suspect=str(suspect), heldout=str(heldout), model="testbed:mini"), extract_fn=no_extraction)
    expected = "1 passage in both sets" if case == "overlap" else "3 pairs at most, but the test needs at least"
    assert expected in str(e.value)
    cli = run_cli(["audit", "--suspect", str(suspect), "--heldout", str(heldout), "--model", "testbed:mini"],
                  timeout=300)
    assert cli.returncode == 2 and cli.stderr.strip() == f"error: {e.value}"
