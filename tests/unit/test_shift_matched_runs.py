"""The matched arm's benchmark helpers (studies.shift_matched_runs, _tables,
shift_text_features, shift_residual, shift_stops; benchmarks/bench_shift_matched.py,
shift_residual.py, shift_verdicts.py) on hand-made inputs."""

import json

import numpy as np
import pandas as pd
import pytest

from studies import shift_matched_runs
from studies.shift_matched_runs import greedy_match, scenarios
from studies.shift_matched_tables import END, START, merge, with_shift_section
from studies.shift_residual import COLUMN, members_gap
from studies.shift_stops import rederive
from studies.shift_text_features import _blind_delay


def test_greedy_match_takes_the_nearest_free_row_within_the_caliper():
    # 0 ↔ 0.05 and 1 ↔ 0.9 (gaps 0.05, 0.1); 5 has nothing within 0.2 of it
    assert sorted(greedy_match(np.array([0.0, 1.0, 5.0]), np.array([0.05, 0.9, 3.0]), 0.2)) == [(0, 0), (1, 1)]
    # two suspects want the one held-out row: whichever comes first in the seeded order takes it
    for seed in range(4):
        pairs = greedy_match(np.array([0.0, 0.1]), np.array([0.05]), 0.2, seed)
        assert len(pairs) == 1 and pairs[0][1] == 0
    assert greedy_match(np.array([0.0]), np.array([]), 0.2) == []


def test_scenarios_in_the_order_asked(monkeypatch):
    p = lambda n: [{"id": f"{n}{i}", "text": "x"} for i in range(3)]  # noqa: E731
    pools = {"topic": ("people", p("a"), "sciences", p("b")), "source": ("wiki", p("c"), "docs", p("d"))}
    iid = {"member": p("m"), "nonmember": p("n"), "heldout": p("h")}
    monkeypatch.setattr(shift_matched_runs, "member_pools", lambda testbed, pools: {
        "topic-r": ("members: sciences", p("s"), "unseen: people", pools["topic"][1])})
    got = [(s[0], s[1], s[2]) for s in scenarios(pools, iid, "tb", ["source", "topic"], ["iid", "null", "alternative"])]
    assert got == [("iid", "iid", "member"), ("iid", "iid", "nonmember"), ("null", "source", "wiki"),
                   ("null", "source", "docs"), ("null", "topic", "people"), ("null", "topic", "sciences"),
                   ("alternative", "topic-r", "members: sciences")]
    assert [s[0] for s in scenarios(pools, iid, "tb", ["topic"], ["null"])] == ["null", "null"]


def _row(size, trials, tests=("gray",), **extra):
    return {"part": "null", "kind": "topic", "suspect": "a", "heldout": "b", "size": size, "trials": trials,
            "tests": dict.fromkeys(tests, {}), **extra}


def test_merge_keeps_a_later_rerun_and_labels_runs():
    first = {"header": "run one.", "scenarios": [_row(40, 100), _row(0, 20)], "match_seconds": {"20": 1}}
    second = {"header": "run two", "scenarios": [_row(40, 200)], "match_seconds": {"20": 2}}
    out = merge([(None, first), ("run 2", second)], "note")
    assert out["header"] == "run one. Run 2: run two. note" and out["match_seconds"] == {"20": 2}
    # sizes in order (0: the whole pools, last); the rerun at 40 replaces the first run's row
    assert [(s["size"], s["trials"], s.get("run")) for s in out["scenarios"]] == [(40, 200, "run 2"), (0, 20, None)]


def test_with_shift_section_replaces_only_the_marked_section():
    summary = {"header": "h", "scenarios": [], "match_seconds": {}}
    once = with_shift_section("# shift\n\nbody\n", summary)
    assert once.startswith("# shift\n\nbody\n\n" + START) and once.endswith(END + "\n")
    assert with_shift_section(once + "", summary) == once  # put again: replaced, not appended
    assert with_shift_section(once.replace("# shift", "# new"), summary).startswith("# new\n\nbody\n\n" + START)


def test_blind_delay_censors_at_n():
    assert _blind_delay(np.array([0, 3, 5]), 10) == pytest.approx((10 + 3 + 5) / 3)


def test_members_gap_by_hand():
    frame = pd.DataFrame({COLUMN: [-0.3, -0.1, 0.2, 0.0]}, index=["m0", "m1", "h0", "h1"])
    iid = {"member": [{"id": "m0"}, {"id": "m1"}], "heldout": [{"id": "h0"}, {"id": "h1"}]}
    assert members_gap(iid, frame) == pytest.approx(-0.2 - 0.1)


def test_rederive_applies_the_current_rules_to_saved_stops(tmp_path):
    # 4 trials of 300 pairs: the test rejects in 0 and 2; the blind check fires in 2; the placebo check in 3
    np.savez(tmp_path / "stops.npz", **{"topic|a|0|gray": np.array([3, 0, 5, 0]),
                                        "topic|a|0|placebo_gray": np.array([0, 0, 0, 4]),
                                        "topic|a|0|blind": np.array([0, 0, 2, 0]),
                                        "iid|member|0|gray": np.array([1, 1, 0, 0]),
                                        "iid|member|0|blind": np.array([0, 0, 0, 0])})
    summary = {"header": "h · note: old", "scenarios": [{"kind": "topic", "suspect": "a", "size": 0, "pairs": 300,
                                                       "trials": 4}],
               "iid": [{"suspect": "member", "size": 0, "pairs": 300, "trials": 4, "h0": False}]}
    out = rederive(json.loads(json.dumps(summary)), np.load(tmp_path / "stops.npz"), 0.05, "new")
    gray = out["scenarios"][0]["tests"]["gray"]
    assert out["header"] == "h · note: new"
    assert (gray["model"]["count"], gray["blind_only"]["count"], gray["guarded"]["count"]) == (2, 1, 1)
    assert out["scenarios"][0]["blind"]["count"] == 1 and out["scenarios"][0]["placebo"]["placebo_gray"]["count"] == 1
    assert out["iid"][0]["tests"]["gray"]["guarded"]["count"] == 2
