"""The blind check (texts only): its inputs by hand, its Type-I rate on IID splits, its power
on a shifted pair of sets, and the audit verdict it drives."""

import json
import math
import zlib

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.auditing.auditor import blind_check
from trainspotter.features.text import SURFACE, TextRows, surface_stats
from trainspotter.presets import TEST_PRESETS
from trainspotter.stats.blind import BlindTest, NaiveBayes, blind_stops
from trainspotter.stats.sequential import TestConfig

DEFAULT = TestConfig(**TEST_PRESETS["default"])


def test_surface_statistics_by_hand():
    text = "Hello world. 42!"
    got = dict(zip(SURFACE, surface_stats([text])[0]))
    n = len(text)
    want = {"log_chars": math.log(16), "log_words": math.log(3), "mean_word_length": 4.0, "type_token_ratio": 1.0,
            "digit_fraction": 2 / n, "upper_fraction": 1 / 10, "punctuation_fraction": 2 / n,
            "space_fraction": 2 / n, "non_ascii_fraction": 0.0, "capitalised_words": 1 / 3,
            "words_per_sentence": 3 / 2, "zlib_ratio": len(zlib.compress(text.encode())) / n, "newlines": 0.0,
            "starts_upper": 1.0, "ends_sentence": 1.0}
    assert got == pytest.approx(want)
    assert dict(zip(SURFACE, surface_stats(["cut mid-sentence"])[0]))["starts_upper"] == 0.0


def test_naive_bayes_log_odds_by_hand():
    """Counts of past suspect rows {0, 1} and held-out rows {2} over D = 4 buckets (index 4
    is the padding column): a row with grams {0, 2} scores
    [log 2 − log 1] + [log 1 − log 2] − 2 [log(4 + 2) − log(4 + 1)] = −2 log 1.2."""
    nb = NaiveBayes(buckets=4)
    assert nb.llr(np.array([[0, 2]]), np.array([[1.0, 1.0]]))[0] == 0.0  # no data yet
    nb.update((np.array([[0, 1]]), np.array([[1.0, 1.0]])), (np.array([[2, 4]]), np.array([[1.0, 0.0]])))
    assert nb.llr(np.array([[0, 2]]), np.array([[1.0, 1.0]]))[0] == pytest.approx(-2 * math.log(1.2))
    assert nb.counts[:, 0, 4].tolist() == [0.0, 0.0]  # padding never counts


def _leads():
    from trainspotter.assets import wikipedia_leads

    return wikipedia_leads()


def test_blind_check_rarely_fires_on_iid_splits():
    """60 disjoint random splits of the Wikipedia leads, 200 pairs each. Under
    exchangeability P(fire) ≤ α = 0.05 (Ville), so the binomial test below fails with
    probability ≤ 0.001 when the check is valid; a blind score that peeked at pair t (or a
    payoff that is not centred) fires far more often."""
    leads = [r["text"][:400] for r in _leads()[::4]]
    trials, n = 60, 200
    rows = TextRows(leads)
    rng = np.random.default_rng(7)
    perms = np.stack([rng.permutation(len(leads))[:2 * n] for _ in range(trials)])
    stops, _ = blind_stops(rows, rows, perms[:, :n], perms[:, n:], DEFAULT)
    fires = int((stops > 0).sum())
    assert binomtest(fires, trials, 0.05, alternative="greater").pvalue > 0.001, fires


def test_blind_check_finds_a_topic_shift_and_says_what_differs():
    """Leads about people vs leads about the sciences (the corpus's own topic labels)."""
    leads = _leads()
    people = [r["text"][:400] for r in leads if r["topic"] == "People"][:200]
    science = [r["text"][:400] for r in leads if r["topic"] == "Physical sciences"][:200]
    r = blind_check(people, science, DEFAULT)
    assert r.fired and r.e_value >= 20 and r.pairs_used < 100
    assert r.wealth[-1] == pytest.approx(r.e_value) and len(r.wealth) == r.pairs_used
    assert any("suspect set" in d for d in r.differences)  # e.g. 'born', 'was' more frequent


def test_single_stream_equals_batch_stream():
    """The audit's blind check (one stream) and the Monte Carlo's (B streams) are one code path."""
    leads = [r["text"][:300] for r in _leads()[:120]]
    single = blind_check(leads[:60], leads[60:], DEFAULT)
    rows = TextRows(leads)
    batch = BlindTest(rows, rows, DEFAULT, batch=2)
    for t in range(60):  # stream 0: pairs (t, 60 + t) as in the single check; stream 1: another order
        batch.update(np.array([t, 59 - t]), np.array([60 + t, 119 - t]))
    assert (batch.test.stop_time[0] or None) == single.stop_time
    assert batch.test.e_value[0] == pytest.approx(single.e_value, rel=1e-9)
    assert batch.test.history["wealth"][single.pairs_used - 1][0] == pytest.approx(single.wealth[-1], rel=1e-9)


# ---------------------------------------------------------------- the verdict

def _passages(path, texts):
    path.write_text("".join(json.dumps({"id": f"{path.stem}{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return str(path)


def _fake_extract(member_ids):
    """A feature row per passage: members have a lower target-minus-reference loss."""
    def extract(passages, batch_no):
        return [{"gray_ref_diff": float(np.random.default_rng(zlib.crc32(p["id"].encode())).normal()
                                        - (2.0 if p["id"] in member_ids else 0.0))} for p in passages]
    return extract


@pytest.mark.parametrize("shift_check", ["stop", "continue"])
def test_shifted_sets_give_inconclusive_whatever_the_model_says(tmp_path, shift_check):
    """The model's (fake) features say "member" for every suspect passage, but the held-out
    passages are another topic: the verdict is inconclusive; "stop" queries nothing."""
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.run import audit

    leads = _leads()
    people = [r["text"][:400] for r in leads if r["topic"] == "People"][:120]
    science = [r["text"][:400] for r in leads if r["topic"] == "Physical sciences"][:120]
    s, h = _passages(tmp_path / "s.jsonl", people), _passages(tmp_path / "h.jsonl", science)
    calls = []
    extract = _fake_extract({f"s{i}" for i in range(120)})
    r = audit(AuditConfig(suspect=s, heldout=h, model="hf:m", shift_check=shift_check),
              extract_fn=lambda ps, k: calls.append(k) or extract(ps, k))
    assert r.verdict == "inconclusive" and not r.reject and r.blind.fired
    assert "Inconclusive" in r.explanation and "What to do" in r.explanation
    if shift_check == "stop":
        assert calls == [] and r.pairs_queried == 0 and r.stopped_by == "shift" and r.pairs_available == 120
    else:
        assert r.model_reject and r.pairs_used >= 5  # the model's test ran and rejected


def test_iid_sets_keep_the_model_verdict(tmp_path):
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.loop.run import audit

    leads = [r["text"][:400] for r in _leads()[:240]]
    s, h = _passages(tmp_path / "s.jsonl", leads[::2]), _passages(tmp_path / "h.jsonl", leads[1::2])
    # 120 pairs without a placebo model: the auditor vouches for the split (trainspotter.auditing.placebo)
    r = audit(AuditConfig(suspect=s, heldout=h, model="hf:m", assume_exchangeable=True),
              extract_fn=_fake_extract({f"s{i}" for i in range(120)}))
    assert r.verdict == "trained on" and r.reject and r.model_reject and not r.blind.fired
    assert r.blind.pairs_available == 120  # the blind check saw every pair, not only those queried
    r = audit(AuditConfig(suspect=s, heldout=h, model="hf:m"), extract_fn=_fake_extract(set()))
    assert r.verdict == "no evidence" and not r.reject and not r.model_reject
