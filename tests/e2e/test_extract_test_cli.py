"""README's `extract` → `test` → `simulate` path through the command line: the table that
`extract` writes carries the user's suspect/held-out labels, and the statistics verbs read it."""

import json
import os

import pandas as pd
import pytest
from cli_process import run_cli



def run(*args):
    return run_cli([str(a) for a in args], env=os.environ.copy(), timeout=600)


def _head(path, n):
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def labelled(mini_testbed, tmp_path_factory):
    """16 members as the suspect set and 16 held-out passages, extracted from the CLI with
    --suspect/--heldout (the default: the audit's lean gray set)."""
    tmp = tmp_path_factory.mktemp("extract-test")
    suspect = _write(tmp / "suspect.jsonl", _head(mini_testbed / "member.jsonl", 16))
    heldout = _write(tmp / "heldout.jsonl", _head(mini_testbed / "heldout.jsonl", 16))
    out = tmp / "features.parquet"
    res = run("extract", "--suspect", suspect, "--heldout", heldout, "--model", "testbed:mini",
              "--reference", "testbed:mini/reference", "--out", out, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    return tmp, out, json.loads(res.stdout)


def test_extract_writes_the_labels_and_test_and_simulate_read_them(labelled, mini_testbed):
    tmp, out, result = labelled
    assert result["sets"] == {"suspect": 16, "heldout": 16}
    df = pd.read_parquet(out)
    members = [r["id"] for r in _head(mini_testbed / "member.jsonl", 16)]
    assert df["set"].tolist() == ["suspect"] * 16 + ["heldout"] * 16
    assert df["id"].tolist()[:16] == members
    # mini: target fine-tuned on the members, so the test must reject on these 16 pairs
    test = run("test", out, "--json")
    assert test.returncode == 0, test.stderr[-2000:]
    t = json.loads(test.stdout)
    assert t["n_suspect"] == t["n_heldout"] == 16 and t["reject"] is True
    assert t["config"]["strategy"] == "mixture" and t["config"]["payoff"] == "diff"  # the audit's default
    sim = run("simulate", out, "--trials", 20, "--json")
    assert sim.returncode == 0, sim.stderr[-2000:]
    assert json.loads(sim.stdout)["rejection_rate"] >= 0.9
    null = run("simulate", out, "--trials", 20, "--null", "--json")
    assert null.returncode == 0, null.stderr[-2000:]
    assert json.loads(null.stdout)["pairs"] == 8  # two halves of the 16 held-out rows


def test_set_field_in_data_is_carried_through(labelled, mini_testbed):
    """The same passages as one --data file with a `set` field: the same table (and the
    features come from the cache: labels are not part of the chunk's key)."""
    tmp, out, _ = labelled
    rows = [r | {"set": "suspect"} for r in _head(mini_testbed / "member.jsonl", 16)]
    rows += [r | {"set": "heldout"} for r in _head(mini_testbed / "heldout.jsonl", 16)]
    mixed = _write(tmp / "mixed.jsonl", rows)
    res = run("extract", "--data", mixed, "--model", "testbed:mini", "--reference", "testbed:mini/reference",
              "--out", tmp / "mixed.parquet", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["chunks_cached"] == 1
    pd.testing.assert_frame_equal(pd.read_parquet(tmp / "mixed.parquet"), pd.read_parquet(out))
    # the same texts without labels: the cached chunk serves no stale `set`
    plain = _write(tmp / "unlabelled.jsonl", [{k: v for k, v in r.items() if k != "set"} for r in rows])
    res = run("extract", "--data", plain, "--model", "testbed:mini", "--reference", "testbed:mini/reference",
              "--out", tmp / "unlabelled.parquet", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["chunks_cached"] == 1, res.stderr[-2000:]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp / "unlabelled.parquet"),
                                  pd.read_parquet(out).drop(columns="set"))


def test_unlabelled_and_badly_labelled_input(labelled, mini_testbed):
    tmp, _, _ = labelled
    rows = _head(mini_testbed / "member.jsonl", 4)
    plain = _write(tmp / "plain.jsonl", rows)
    res = run("extract", "--data", plain, "--model", "testbed:mini", "--out", tmp / "plain.parquet",
              "--no-perturbations", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["sets"] is None
    test = run("test", tmp / "plain.parquet")
    assert test.returncode == 2 and "Traceback" not in test.stderr
    assert "no 'set' column" in test.stderr and "--suspect A --heldout B" in test.stderr

    for name, labelled_rows, expected in [
        ("half.jsonl", [rows[0] | {"set": "suspect"}] + rows[1:], f"passage {rows[1]['id']!r} has no `set`"),
        ("typo.jsonl", [rows[0], rows[1] | {"set": "held-out"}] + rows[2:], "typo.jsonl:2: `set` is 'held-out'"),
    ]:
        res = run("extract", "--data", _write(tmp / name, labelled_rows), "--model", "testbed:mini",
                  "--out", tmp / "x.parquet")
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and expected in lines[0], res.stderr

    for args, expected in [(["--suspect", plain], "--suspect FILE and --heldout FILE"),
                           (["--data", plain, "--suspect", plain, "--heldout", plain], "not both"),
                           (["--suspect", plain, "--heldout", plain], "in both sets")]:
        res = run("extract", *args, "--model", "testbed:mini", "--out", tmp / "x.parquet")
        assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("seed", ["0", "2"])
def test_extract_then_test_gives_the_audits_e_value(mini_testbed, tmp_path, seed):
    """`extract` (by default the audit's feature set) then `test`, same files and seed: the
    audit's features, e-value and stopping pair. Before, `extract` used `full` (37 features)
    and `test` paired rows in another random order: e 22.4 after 10 pairs against the audit's
    28.05 after 11."""
    files = ["--suspect", mini_testbed / "member.jsonl", "--heldout", mini_testbed / "heldout.jsonl"]
    audit = run("audit", *files, "--model", "testbed:mini", "--seed", seed, "--name", f"same-{seed}",
                "--assume-exchangeable", "--json")  # a random split, no reference: 80 pairs may decide
    assert audit.returncode == 0, audit.stderr[-2000:]
    a = json.loads(audit.stdout)
    out = tmp_path / "features.parquet"
    ext = run("extract", *files, "--model", "testbed:mini", "--out", out, "--json")
    assert ext.returncode == 0, ext.stderr[-2000:]
    test = run("test", out, "--seed", seed, "--json")
    assert test.returncode == 0, test.stderr[-2000:]
    t = json.loads(test.stdout)
    assert t["feature_cols"] == a["features"]  # the lean set, in the audit's order
    assert (t["reject"], t["pairs_used"]) == (a["model_reject"], a["pairs_used"])
    assert t["e_value"] == pytest.approx(a["e_value"], rel=1e-6)
