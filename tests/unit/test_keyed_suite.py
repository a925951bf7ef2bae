"""The keyed suite's tests on fixed answers (trainspotter.evaluation.keyed_suite): STAMP's t-test by
its definition, the summary by hand, and H0 over 1000 fresh keys on answers that never saw them
(every test's rate ≤ α by a one-sided binomial test at a false-failure rate of 0.001), while the
release key on answers that copy it is found."""

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from trainspotter.evaluation.keyed_suite import (Answers, KeyedBed, KeyedSuiteConfig, _fixed_p, _stamp_p, evaluate,
                                                 fresh_keys, h0_rates, summarise)
from trainspotter.keyed.score import LexicalScoring
from trainspotter.keyed.units import LexicalForms, Seen, lexical_units
from trainspotter.rewriters.lexical import KeyedLexicalRewriter

TEXTS = ["The city council often met in the large hall while the old market was being rebuilt, because the "
         "building had been damaged in a storm several years before the mayor was elected.",
         "Many people visited the ancient town, which is known for its narrow streets and a famous bridge over "
         "the river; however, the population declined after the railway closed.",
         "The small museum displays various tools that farmers frequently used, such as ploughs, and it is "
         "located in a village near the northern border of the region.",
         "A large storm damaged the ancient bridge, and the council frequently discussed whether the town "
         "should rebuild the market hall or the museum first."]


@pytest.fixture(scope="module")
def bed():
    forms = LexicalForms(KeyedLexicalRewriter(), TEXTS)
    return KeyedBed("t", None, bytes(range(32)), LexicalScoring(forms), TEXTS, TEXTS)


def _answers(forms, texts):
    ans, seen = Answers(), Seen()
    for i, text in enumerate(texts):
        for unit, form in lexical_units(forms, "", text, seen):
            ans.records.append({"unit": unit, "form": form})
            ans.spent.append(64 * (i + 1))
            ans.doc.append(i)
    return ans


def test_stamp_is_a_paired_t_test_over_documents():
    x = np.array([[1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 0, 0], [1, 0, 0, 0, 1, 0]], dtype=float)  # public, 2 privates
    doc = np.array([0, 0, 1, 1, 2, 2])
    d = [x[0, doc == k].mean() - x[1:, doc == k].mean() for k in range(3)]
    assert _stamp_p(x, doc) == pytest.approx(ttest_1samp(d, 0.0, alternative="greater").pvalue)


def test_the_fixed_n_test_of_shares_at_the_null_rounded_two_ways_is_no_evidence():
    """Gray-box shares where every form scores alike (a model relative to itself): x = h[k] and
    p = mean(h) differ by a rounding error of one sign for every unit with seven forms (1/7 and the
    mean of seven sevenths). Measured on tiny-pretrain-keyed-3pct's reference before this rule: the
    t-test, with no variance but that, rejected under all 1000 fresh keys."""
    def shares(m):  # as form_probabilities gives them
        h = np.exp(np.zeros(m))
        return h / h.sum()

    forms = [shares(m) for m in (7, 2, 5, 7, 3, 2) * 5]
    x, p = np.array([h[0] for h in forms]), np.array([h.mean() for h in forms])
    assert len(set(x - p)) == 2 and min(x - p) == 0 < max(x - p) < 1e-16  # the rounding, one sign
    assert ttest_1samp(x - p, 0.0, alternative="greater").pvalue < 0.05  # which the t-test calls certain
    assert _fixed_p(x, p) == 1.0
    shares = np.array([0.6, 0.55, 0.7, 0.5, 0.65])  # a real preference above 1/2 is still a t-test
    assert _fixed_p(shares, np.full(5, 0.5)) == pytest.approx(ttest_1samp(shares - 0.5, 0.0, alternative="greater").pvalue)


def test_summary_by_hand():
    trials = [{"rejected": True, "spent": 100, "units": 10, "fixed_p": 0.01, "stamp_p": 0.2, "rank_p": 0.05,
               "log_wealth": 3.5, "flat_rejected": False, "flat_spent": None},
              {"rejected": False, "spent": None, "units": 20, "fixed_p": 0.07, "stamp_p": 0.01, "rank_p": 0.5,
               "log_wealth": -1.0, "flat_rejected": True, "flat_spent": 300}]
    s = summarise(trials, 0.05, 400)
    assert (s["tpr"], s["mean_to_decision"], s["median_to_decision"], s["mean_units"]) == (0.5, 250.0, 250.0, 15.0)
    assert (s["flat_tpr"], s["flat_median_to_decision"]) == (0.5, 350.0)
    assert (s["fixed_power"], s["stamp_power"], s["rank_power"]) == (0.5, 0.5, 0.5)


def test_fresh_keys_on_answers_that_never_saw_them_reject_at_most_alpha(bed):
    from scipy.stats import binomtest

    ans = _answers(bed.scoring.forms, TEXTS)  # the originals: written under no key
    res = h0_rates(bed, ans, fresh_keys(1000, 0), KeyedSuiteConfig(testbed="tiny-pretrain-keyed"))
    assert res["keys"] == 1000 and res["units"] == len(ans.records) > 20
    for test in ("eprocess", "fixed_n", "stamp", "rank"):
        k = res[test]["rejected"]
        assert binomtest(k, 1000, 0.05, alternative="greater").pvalue > 0.001, (test, k)


def test_each_unit_weighs_by_how_often_the_release_shows_it(bed):
    """n_u counted by hand in TEXTS: the unit itself, not its other forms ("frequently" twice, not
    its alternative "often"; "hall" twice; "city" once); w = min(1, n_u / n_95), n_95 the 95th
    percentile of n_u over the 31 units (26 seen once, 5 twice): 2."""
    forms = bed.scoring.forms
    assert sorted(forms.count[u] for u in forms.forms) == [1] * 26 + [2] * 5
    want = {u: sum(t.replace(",", " ").split().count(u) for t in TEXTS) for u in
            ("large", "frequently", "often", "hall", "city")}
    assert want == {"large": 2, "frequently": 2, "often": 1, "hall": 2, "city": 1}
    assert {u: forms.count[u] for u in want} == want
    records = [{"unit": u, "form": 0} for u in want]
    assert bed.scoring.n_95 == 2.0
    np.testing.assert_allclose(bed.scoring.weights(records), [1.0, 1.0, 0.5, 1.0, 0.5])
    np.testing.assert_allclose(bed.scoring.weights(records, forced_choice=True), np.ones(5))  # its plan picks by n_u


def test_the_forced_choice_bets_unweighted_and_reports_the_weighted_beside(bed):
    """Shares where the key's form wins 2/3 of the draws: the forced choice's e-process is the
    unweighted one (its wealth path and decision), the one weighed by n_u is reported beside it and,
    with half the units at w = 1/2, ends lower; the summary carries both."""
    forms = bed.scoring.forms
    ans = Answers()
    for i, unit in enumerate(u for u in forms.forms for _ in range(4)):  # each unit four times: enough bets
        h = np.full(len(forms.forms[unit]), 1 / 3 / (len(forms.forms[unit]) - 1))
        h[forms.key_form(bed.key, unit)] = 2 / 3
        ans.records.append({"unit": unit, "h": h.tolist()})
        ans.spent.append(16 * (i + 1))
        ans.doc.append(i // 8)
    cfg = KeyedSuiteConfig(testbed="t", random_keys=50)
    chose, gray = (evaluate(bed, ans, bed.key, fresh_keys(50, 2), cfg, forced_choice=f) for f in (True, False))
    assert (chose["rejected"], chose["spent"]) == (chose["flat_rejected"], chose["flat_spent"]) and chose["rejected"]
    assert (chose["counted_rejected"], chose["counted_spent"]) == (gray["rejected"], gray["spent"])
    assert chose["log_wealth"] > gray["log_wealth"] and "counted_rejected" not in gray
    s = summarise([chose, chose | {"rejected": False, "counted_rejected": False}], cfg.test.alpha, 10_000)
    assert (s["tpr"], s["counted_tpr"]) == (0.5, 0.5 * chose["counted_rejected"])


def test_answers_written_under_the_key_are_found(bed):
    rewriter = KeyedLexicalRewriter()
    copied = _answers(bed.scoring.forms, [rewriter.rewrite(t, bed.key) for t in TEXTS] * 2)
    cfg = KeyedSuiteConfig(testbed="tiny-pretrain-keyed", random_keys=200)
    r = evaluate(bed, copied, bed.key, fresh_keys(200, 1), cfg)
    assert r["units"] == len(copied.records) and r["log_wealth"] > 0 and r["rank_p"] < 0.05
    assert r["path"][-1][1] == pytest.approx(r["log_wealth"])
