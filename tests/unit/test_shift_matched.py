"""The shift suite's matched arm (studies.shift_matched) on synthetic pools whose
outcome can be checked by hand: disjoint vocabularies leave nothing to match (verdict "overlap");
IID texts with a strong model signal are mostly matched and "trained on"; a signal the placebo
model shares is never "trained on"; and the padded streams cross exactly where the unpadded
matched stream of each trial does."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd

from studies.shift_matched import matched_trials, matched_verdicts, summarise_matched
from trainspotter.features.orientation import directions
from trainspotter.presets import TEST_PRESETS
from trainspotter.stats.sequential import TestConfig, min_pairs_to_reject
from trainspotter.stats.simulation import stream_stops

VOCAB = [f"w{i}" for i in range(400)]
CONFIG = TestConfig(alpha=0.05, seed=0, **TEST_PRESETS["default"])


def pool(n: int, words: list[str], seed: int, shift: float, placebo_shift: float) -> pd.DataFrame:
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    text = [" ".join(rng.choice(words) for _ in range(25)).capitalize() + "." for _ in range(n)]
    return pd.DataFrame({"text": text, "score": gen.normal(shift, 1.0, n),
                         "placebo_gray:score": gen.normal(placebo_shift, 1.0, n)})


TESTS = {"gray": (["score"], CONFIG), "placebo_gray": (["placebo_gray:score"], CONFIG)}


def test_disjoint_pools_match_nothing_and_say_overlap():
    """Suspect and held-out texts share no word: the propensity separates them perfectly, no
    held-out passage lies within the caliper, and every trial is inconclusive for overlap
    even though the model's signal is strong."""
    s = pool(60, VOCAB[:200], seed=1, shift=3.0, placebo_shift=0.0)
    h = pool(60, VOCAB[200:], seed=2, shift=0.0, placebo_shift=0.0)
    res = matched_trials(s, h, TESTS, CONFIG, trials=4, n_max=30, seed=0)
    assert res["needed"] == min_pairs_to_reject(CONFIG) == 6
    assert (res["matched"] < res["needed"]).all() and (res["auroc"] > 0.99).all()
    v = matched_verdicts(res, "gray", CONFIG.alpha)
    assert v["overlap"].all() and not v["trained_on"].any() and not v["model"].any()


def test_iid_texts_with_a_member_signal_are_matched_and_trained_on():
    s = pool(80, VOCAB, seed=3, shift=2.0, placebo_shift=0.0)
    h = pool(80, VOCAB, seed=4, shift=0.0, placebo_shift=0.0)
    res = matched_trials(s, h, TESTS, CONFIG, trials=6, n_max=40, seed=1)
    summary = summarise_matched(res, CONFIG.alpha, h0=False)
    assert summary["matched_share"] > 0.6 and summary["tests"]["gray"]["arm"]["overlap"] == 0.0
    assert summary["tests"]["gray"]["arm"]["trained_on"]["rate"] >= 5 / 6
    # the same signal in the placebo model's own features: a shift, never "trained on"
    s2, h2 = s.assign(**{"placebo_gray:score": s["score"]}), h.assign(**{"placebo_gray:score": h["score"]})
    v = matched_verdicts(matched_trials(s2, h2, TESTS, CONFIG, trials=6, n_max=40, seed=1), "gray", CONFIG.alpha)
    assert v["model"].sum() >= 5 and not v["trained_on"].any()


def test_matching_only_where_the_blind_check_fired_by_hand():
    """Four trials; the audit matches the first two (the blind check fired on their draws). Matched:
    trial 0 rejects on 8 matched pairs (≥ 6 needed), trial 1 does not. Unmatched, the default
    verdict stands: trial 2 "trained on" after 7 pairs, trial 3 rejects but its placebo check
    fires. So --shift-check match says "trained on" in trials 0 and 2 (rate 1/2), loses none of the
    default's (trial 2) and gains trial 0; inconclusive: trial 3; pairs to decision 5, 8, 7, 10."""
    result = {"pairs": 10, "trials": 4, "only": np.array([True, True, False, False]), "matched": np.array([8, 8, 0, 0]),
              "auroc": np.array([0.6, 0.7, np.nan, np.nan]), "model": {"gray": np.array([5, 0, 0, 0])},
              "blind_stop": np.zeros(4, dtype=int), "needed": 6}
    default = {"pairs": 10, "trials": 4, "blind_stop": np.array([3, 2, 0, 0]),
               "model": {"gray": np.array([0, 0, 7, 9]), "placebo_gray": np.array([0, 0, 0, 4])}}
    summary = summarise_matched(result, 0.05, h0=False, default=default)
    g = summary["tests"]["gray"]
    assert summary["matched_trials"]["rate"] == 0.5 and summary["matched_mean"] == 8 and np.isclose(summary["auroc"], 0.65)
    assert g["arm"]["trained_on"]["rate"] == 0.5 and g["arm"]["censored_pairs"] == 6.5
    assert g["default"]["rate"] == 0.25 and g["trained_on"]["count"] == 2
    assert g["lost"] == 0.0 and g["gained"] == 0.25 and g["inconclusive"] == 0.25 and g["censored_pairs"] == 7.5


def test_trials_outside_only_match_nothing():
    s = pool(60, VOCAB, seed=5, shift=2.0, placebo_shift=0.0)
    h = pool(60, VOCAB, seed=6, shift=0.0, placebo_shift=0.0)
    only = np.array([True, False, True])
    res = matched_trials(s, h, TESTS, CONFIG, trials=3, n_max=30, seed=0, only=only)
    full = matched_trials(s, h, TESTS, CONFIG, trials=3, n_max=30, seed=0)
    assert res["matched"][1] == 0 and np.isnan(res["auroc"][1]) and full["matched"][1] > 0
    np.testing.assert_array_equal(res["matched"][only], full["matched"][only])


def test_padding_never_moves_a_crossing():
    """Each trial's crossing on the padded batch equals the crossing of its own matched stream
    run alone (no crossing after its last matched pair)."""
    s = pool(60, VOCAB, seed=5, shift=1.0, placebo_shift=0.0)
    h = pool(60, VOCAB[:300], seed=6, shift=0.0, placebo_shift=0.0)
    res = matched_trials(s, h, TESTS, CONFIG, trials=5, n_max=30, seed=2)
    mx, my = res["rows"]
    assert len(set(res["matched"])) > 1  # streams of different lengths were padded
    for b, m in enumerate(res["matched"]):
        alone = stream_stops(s[["score"]].to_numpy(float), h[["score"]].to_numpy(float), mx[b:b + 1, :m],
                             my[b:b + 1, :m], [CONFIG], [CONFIG.alpha], directions(["score"]))[0][0, 0, 0] if m else 0
        assert res["model"]["gray"][b] == alone


def test_blind_inputs_built_once_give_the_same_trials():
    """The benchmark builds each pool's blind inputs (``TextRows``) once and hands them to both
    arms: the same crossings, matched pairs and blind stops as when each arm builds its own."""
    from trainspotter.evaluation.shift_suite import scenario_trials
    from trainspotter.features.text import TextRows

    s = pool(60, VOCAB, seed=7, shift=1.0, placebo_shift=0.0)
    h = pool(60, VOCAB[:250], seed=8, shift=0.0, placebo_shift=0.0)
    rows = TextRows(list(s["text"])), TextRows(list(h["text"]))
    own, given = (matched_trials(s, h, TESTS, CONFIG, trials=4, n_max=40, seed=3, text_rows=r) for r in (None, rows))
    assert (own["matched"] == given["matched"]).all() and (own["blind_stop"] == given["blind_stop"]).all()
    assert all((own["model"][k] == given["model"][k]).all() for k in TESTS)
    own, given = (scenario_trials(s, h, TESTS, CONFIG, trials=4, n_max=40, seed=3, text_rows=r) for r in (None, rows))
    assert (own["blind_stop"] > 0).any()  # the vocabulary shift is visible: the stops compared are not all 0
    assert (own["blind_stop"] == given["blind_stop"]).all() and (own["blind_max"] == given["blind_max"]).all()
