"""The one-sided test: member-like directions of the catalogue, the sign-constrained fit, and
held-out pollution that costs power but not validity."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from trainspotter.auditing.tables import pollution
from trainspotter.features.orientation import direction, directions
from trainspotter.presets import TEST_PRESETS
from trainspotter.stats.newton_scorer import NewtonScorer
from trainspotter.stats.oriented_qp import oriented_qp
from trainspotter.stats.sequential import SequentialTest, TestConfig


def test_oriented_qp_by_hand():
    # Diagonal A: each coordinate alone; φ1 = b1/A11 = −1 < 0 is not allowed, so 0.
    phi, active = oriented_qp(np.array([[[2.0, 0], [0, 1]]]), np.array([[-2.0, 3]]), np.array([1.0, 1]))
    assert phi[0].tolist() == [0.0, 3.0] and active[0].tolist() == [True, False]
    # Coupled, second coordinate free: unconstrained (−4/3, 5/3); with φ1 = 0, φ2 = b2/A22 = 1,
    # and the multiplier of φ1 is (Aφ − b)_1 = 1·1 + 1 = 2 ≥ 0, so (0, 1) is the minimiser.
    phi, _ = oriented_qp(np.array([[[2.0, 1], [1, 2]]]), np.array([[-1.0, 2]]), np.array([1.0, 0]))
    assert phi[0] == pytest.approx([0.0, 1.0])
    # A negative sign: φ1 ≤ 0 is allowed, the unconstrained solution already obeys it.
    phi, _ = oriented_qp(np.array([[[2.0, 1], [1, 2]]]), np.array([[-1.0, 2]]), np.array([-1.0, 0]))
    assert phi[0] == pytest.approx([-4 / 3, 5 / 3])


def test_oriented_qp_meets_the_kkt_conditions():
    """Feasible, gradient 0 on free coordinates, and on a coordinate held at 0 the gradient
    points into the forbidden side (s_j g_j ≥ 0): the constrained minimiser."""
    rng = np.random.default_rng(0)
    B, p = 300, 8
    M = rng.normal(size=(B, p, p))
    A = M @ M.transpose(0, 2, 1) + 0.05 * np.eye(p)
    b = 3 * rng.normal(size=(B, p))
    signs = np.array([1, -1, 1, 0, 1, -1, 0, 1.0])
    phi, _ = oriented_qp(A, b, signs)
    g = np.einsum("bij,bj->bi", A, phi) - b
    assert (signs * phi >= 0).all()
    held = (phi == 0) & (signs != 0)
    assert np.abs(g[~held]).max() < 1e-8
    assert (signs * g)[held].min() > -1e-8


def test_every_catalogued_feature_has_the_direction_the_attacks_use():
    from trainspotter.features.catalog import catalog
    from trainspotter.features.features import FeatureConfig

    assert all(direction(s.name) != 0 for s in catalog(FeatureConfig(), "both"))
    # the score functions of trainspotter.evaluation.mia: −log PPL, −ref_diff, zlib, Min-K%(++), EZ, …
    want = {"gray_ppl": -1, "petal_ppl": -1, "gray_ref_diff": -1, "gray_ref_ratio": -1, "gray_zlib_ratio": 1,
            "gray_min_k_20": 1, "gray_min_kpp_20": 1, "gray_strip_k_10": 1, "gray_ez": 1,
            "gray_pert_diff_synonym": 1, "black_seq_bertscore": 1, "black_ppl": -1, "my_own_column": 0}
    assert {c: direction(c) for c in want} == want


def _table(n, shift, rng):
    """Two catalogued features; members (shift > 0) have a lower calibrated loss and a higher Min-K%."""
    return pd.DataFrame({"gray_ref_diff": rng.normal(-shift, 1, n), "gray_min_k_20": rng.normal(shift, 1, n)})


def test_pollution_costs_power_not_validity():
    """Suspect = non-members, held-out = half non-members, half members (BADI App. D.6 turned
    into H0): the oriented default rejects in ≤ α of trials (one-sided binomial test, false-
    failure rate ≤ 0.001); the learned direction of the paper rejects almost always."""
    rng = np.random.default_rng(3)
    df = pd.concat([_table(400, 0, rng).assign(set="suspect"), _table(400, 0, rng).assign(set="heldout")])
    members = _table(400, 1.0, rng)
    config = TestConfig(**TEST_PRESETS["default"])
    oriented = pollution(df, config, (0.5,), trials=200, pollutant=members, batch_size=200)["ratios"]["0.5"]
    k = round(oriented["rejection_rate"] * 200)
    assert binomtest(k, 200, 0.05, alternative="greater").pvalue > 0.001, oriented["rejection_rate"]
    learned = pollution(df, config.model_copy(update={"oriented": False}), (0.5,), trials=50,
                        pollutant=members, batch_size=50)["ratios"]["0.5"]
    assert learned["rejection_rate"] > 0.8
    # with members as the suspect set, pollution slows the test down but it still rejects
    power = pollution(pd.concat([members.assign(set="suspect"), df[df.set == "heldout"]]), config,
                      (0.0, 0.5), trials=50, batch_size=50)["ratios"]
    assert power["0.0"]["rejection_rate"] == power["0.5"]["rejection_rate"] == 1.0
    assert power["0.5"]["censored_pairs"] > power["0.0"]["censored_pairs"]


def test_oriented_scorer_state_round_trips_and_old_states_stay_unoriented():
    rng = np.random.default_rng(1)
    cols = ["gray_ref_diff", "gray_min_k_20", "custom"]
    test = SequentialTest(3, TestConfig(), signs=directions(cols))
    for _ in range(30):
        test.update(rng.normal(size=3), rng.normal(size=3))
    assert test.scorer.signs.tolist() == [-1, 1, 0]
    w = test.scorer.w[0]
    assert w[0] <= 0 <= w[1]
    again = SequentialTest.from_dict(test.to_dict())
    x, y = rng.normal(size=3), rng.normal(size=3)
    assert again.update(x, y) == test.update(x, y)
    old = test.to_dict()
    old["config"].pop("oriented")
    old["scorer"].pop("signs")
    restored = SequentialTest.from_dict(old)
    assert not restored.config.oriented and restored.scorer.signs is None
    assert isinstance(restored.scorer, NewtonScorer)


def test_a_ledger_from_before_the_oriented_scorer_continues_unoriented(tmp_path, mini_testbed):
    """A recurring audit stored before ``oriented`` existed holds an unoriented e-process; the
    next scheduled run (same command) continues it as it is instead of refusing."""
    import json
    import zlib

    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.ledger import ledger_path
    from trainspotter.loop.run import audit

    texts = [f"Passage number {i} about topic {i % 7} with some words." for i in range(80)]
    for side, part in (("s", texts[::2]), ("h", texts[1::2])):
        (tmp_path / f"{side}.jsonl").write_text("".join(json.dumps({"id": f"{side}{i}", "text": t}) + "\n"
                                                        for i, t in enumerate(part)))

    def extract(passages, batch_no):
        return [{"gray_ref_diff": float(np.random.default_rng(zlib.crc32(p["id"].encode())).normal())}
                for p in passages]

    config = AuditConfig(name="legacy", suspect=str(tmp_path / "s.jsonl"), heldout=str(tmp_path / "h.jsonl"),
                         model="testbed:mini", ledger=True, max_pairs=10, batch_pairs=5)
    audit(config, extract_fn=extract)
    path = ledger_path("legacy")
    stored = json.loads(path.read_text())  # make it look like an old ledger
    stored["setup"]["test"].pop("oriented")
    stored["setup"]["features"].pop("relative_only")
    stored["state"]["config"].pop("oriented")
    stored["state"]["scorer"].pop("signs")
    path.write_text(json.dumps(stored))
    r = audit(config, extract_fn=extract)
    assert r.pairs_used == 20 and r.wealth_start != 1.0
    again = json.loads(path.read_text())
    assert again["state"]["config"]["oriented"] is False and again["state"]["scorer"]["signs"] is None
