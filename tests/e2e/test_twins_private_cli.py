"""`trainspotter audit --twins DIR --twins-private all|one` as a user runs it: k = 4 twins of the
mini testbed's held-out passages (no model saw any version, so no verdict is asserted: only how
the audit was made, recorded and replayed), and k = 2, where the two choices are one audit."""

import json

from test_twins_cli import make_and_release, one_error_line, run


def _make(tmp_path, mini_testbed, k: int):
    folder = tmp_path / f"twins-k{k}"
    make_and_release(mini_testbed / "heldout.jsonl", folder, "-k", str(k), "--no-similarity")
    return folder


def _audit(folder, *args):
    out = run("audit", "--twins", str(folder), "--model", "testbed:mini", "--alpha", "0.01", "--json", *args)
    assert out.returncode in (0, 3), out.stderr  # 3: inconclusive (a guard); either way the audit ran
    return json.loads(out.stdout)


def test_every_private_variant_k4_is_recorded_by_rounds_and_verifies(tmp_path, mini_testbed):
    """Default (all) on k = 4 with the twin-dependent features: each round is one passage with 3
    sub-pairs, the model is asked 6 texts a round (the public version once per twin), the record
    says so and `trainspotter verify` replays it; a ledger continued with another --twins-private
    is refused in one line, and one begun before the option existed continues as `one`."""
    from trainspotter.loop.ledger import ledger_path

    folder = _make(tmp_path, mini_testbed, 4)
    record = tmp_path / "record.json"
    result = _audit(folder, "--features", "twins", "--record", str(record))
    rounds = result["pairs_used"]
    assert rounds >= 8 and result["texts_queried"] == 6 * result["pairs_queried"]
    sealed = json.loads(record.read_text())
    assert sealed["config"]["twins_private"] == "all"
    assert sealed["result"]["rounds"] == {"twins_private": "all", "sub_pairs": [3] * rounds,
                                          "texts_queried": result["texts_queried"]}
    pairs = [p for b in sealed["batches"] for p in b["pairs"]]
    assert len(pairs) == 3 * rounds and all(p["heldout"]["id"].startswith(p["suspect"]["id"] + "#") for p in pairs)
    assert len({(p["t"], p["suspect"]["id"]) for p in pairs}) == rounds  # one passage a round
    out = run("verify", str(record), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert f"{rounds} pairs ({3 * rounds} sub-pairs) match bit-for-bit" in checks["model test"]["detail"]
    assert "matches bit-for-bit" in checks["features"]["detail"]
    # a recurring audit: the choice is part of its settings
    first = _audit(folder, "--name", "k4", "--ledger", "--twins-private", "one", "--max-pairs", "12")
    assert first["pairs_used"] <= 12 and first.get("texts_queried") is None
    line = one_error_line(run("audit", "--twins", str(folder), "--model", "testbed:mini", "--alpha", "0.01",
                              "--name", "k4", "--ledger", "--twins-private", "all"))
    assert "twins_private: stored 'one', now 'all'" in line, line
    path = ledger_path("k4")
    ledger = json.loads(path.read_text())
    del ledger["setup"]["twins_private"]  # as a twins ledger was written before --twins-private
    path.write_text(json.dumps(ledger))
    again = _audit(folder, "--name", "k4", "--ledger", "--max-pairs", "12", "--record", str(record))
    assert again["pairs_used"] == first["pairs_used"] + again["pairs_this_run"]
    assert json.loads(record.read_text())["config"]["twins_private"] == "one"  # continued as it began
    assert json.loads(path.read_text())["setup"]["twins_private"] == "one"
    assert run("verify", str(record)).returncode == 0
    assert "--twins DIR" in one_error_line(run("audit", "--suspect", str(folder / "public.jsonl"), "--heldout",
                                               str(mini_testbed / "heldout.jsonl"), "--twins-private", "one",
                                               "--model", "testbed:mini"))


def test_with_two_variants_all_and_one_give_the_same_e_value(tmp_path, mini_testbed):
    folder = _make(tmp_path, mini_testbed, 2)
    one, every = (_audit(folder, "--twins-private", private) for private in ("one", "all"))
    assert every["e_value"] == one["e_value"] and every["history"] == one["history"]
    assert every["pairs_used"] == one["pairs_used"] and every["blind"]["e_value"] == one["blind"]["e_value"]
    assert every["texts_queried"] == 2 * every["pairs_queried"] and one.get("texts_queried") is None
