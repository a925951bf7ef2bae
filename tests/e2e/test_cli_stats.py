"""`trainspotter test` and `trainspotter simulate` on features tables, as a user runs them."""

import json

import numpy as np
import pandas as pd
import pytest
from cli_process import run_cli



def run(*args):
    return run_cli(list(args), timeout=300)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """Suspect rows shifted by +1 in two of four features vs identical held-out rows."""
    rng = np.random.default_rng(7)
    d = tmp_path_factory.mktemp("feats")
    n = 150
    s = rng.normal(size=(n, 4)) + np.array([1.0, 1.0, 0, 0])
    h = rng.normal(size=(n, 4))
    cols = ["f1", "f2", "f3", "f4"]
    df = pd.concat([pd.DataFrame(s, columns=cols).assign(set="suspect"),
                    pd.DataFrame(h, columns=cols).assign(set="heldout")])
    df.insert(0, "id", [f"p{i}" for i in range(len(df))])
    df.to_parquet(d / "shifted.parquet", index=False)
    df.to_csv(d / "shifted.csv", index=False)
    df.drop(columns="set").to_parquet(d / "noset.parquet", index=False)
    return d


def test_test_json_rejects_on_shifted_features(tables):
    out = run("test", str(tables / "shifted.parquet"), "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["reject"] is True and r["e_value"] >= 20 and r["pairs_used"] == r["stop_time"] <= 150
    assert r["p_value"] == pytest.approx(1 / r["max_wealth"])
    assert r["feature_cols"] == ["f1", "f2", "f3", "f4"]  # the id column is not a feature
    csv = json.loads(run("test", str(tables / "shifted.csv"), "--json").stdout)
    assert csv["e_value"] == pytest.approx(r["e_value"])  # same table, same answer


def test_simulate_json_alternative_and_null(tables):
    out = run("simulate", str(tables / "shifted.parquet"), "--trials", "20", "--n-max", "100", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["trials"] == 20 and r["tpr"] >= 0.9 and r["mean_stop"] <= 100
    null = json.loads(run("simulate", str(tables / "shifted.parquet"), "--trials", "20", "--null",
                          "--json").stdout)
    # at a rate ≤ α = 0.05, five or more rejections in 20 trials have probability 0.016
    assert null["trials"] == 20 and null["fpr"] <= 0.2


@pytest.mark.parametrize("args,expected", [
    (["missing.parquet"], "no such file"),
    (["noset.parquet"], "no 'set' column"),
    (["shifted.parquet", "--strategy", "martingale"], "option --strategy 'martingale': expected one of ons, kelly, mixture"),
    (["shifted.parquet", "--payoff", "l2"], "option --payoff 'l2': expected one of mmd, ks, diff"),
    (["shifted.parquet", "--alpha", "1.5"], "option --alpha: "),
])
def test_bad_tables_and_options_give_one_error_line(tables, args, expected):
    out = run("test", str(tables / args[0]), *args[1:])
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], out.stderr


def test_simulate_pollution_costs_pairs(tables):
    """Replacing held-out rows by unused suspect rows makes the sets more alike: the test
    needs more pairs (BADI App. D.6); a fraction outside [0, 1) is one error line."""
    out = run("simulate", str(tables / "shifted.parquet"), "--trials", "20", "--pollution", "0,0.5", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)["ratios"]
    assert r["0.0"]["censored_pairs"] < r["0.5"]["censored_pairs"]
    table = run("simulate", str(tables / "shifted.parquet"), "--trials", "5", "--pollution", "0.25")
    assert table.returncode == 0 and "25%" in table.stdout
    bad = run("simulate", str(tables / "shifted.parquet"), "--pollution", "0.5,1.2")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: option --pollution '0.5,1.2': every fraction must lie in [0, 1)")
