"""The guards beside the model's test (issue 34): the placebo check (the same test on a model
that saw neither set) and, without a placebo model, the small-audit rule. Features are fixed
functions of the passage id, so nothing here depends on a model trained on this machine."""

import json
import random
import zlib

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.auditing.config import AuditConfig
from trainspotter.auditing.placebo import run_placebo
from trainspotter.auditing.verdict import PlaceboResult, decide
from trainspotter.loop.run import audit
from trainspotter.presets import UNGUARDED_MIN_PAIRS
from trainspotter.stats.blind import BlindResult
from trainspotter.stats.sequential import TestConfig

WORDS = "the a of river town born album species village known film team city lake music war".split()


def _passages(path, prefix, n, seed):
    """n passages of random words from one vocabulary: two such files are exchangeable text."""
    rng = random.Random(seed)
    rows = [{"id": f"{prefix}{i}", "text": " ".join(rng.choice(WORDS) for _ in range(30))} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _extractor(shift: float, calls: list):
    """Feature rows of a gray-box lean audit whose suspect passages ('s*') score ``shift``
    higher on the member-like direction (lower perplexity) than held-out ones; records calls."""
    def extract_fn(passages, batch_no):
        calls.append(len(passages))
        rows = []
        for p in passages:
            z = np.random.default_rng(zlib.crc32(p["id"].encode())).normal(size=2)
            member_like = shift if p["id"].startswith("s") else 0.0
            rows.append({"gray_ppl": float(np.exp(3 + z[0] - member_like)), "gray_min_k_20": float(z[1] + member_like)})
        return rows
    return extract_fn


def _blind(fired=False, available=100):
    return BlindResult(fired=fired, e_value=30.0 if fired else 1.0, max_wealth=1.0, p_value=1.0, pairs_used=10,
                       pairs_available=available, stop_time=None, alpha=0.05, wealth=[])


@pytest.mark.parametrize("model_reject,evidence,blind,placebo,min_pairs,want", [
    (True, True, False, False, 0, ("trained on", None)),
    (True, True, True, False, 0, ("inconclusive", "blind")),
    (False, False, True, False, 0, ("inconclusive", "blind")),   # the sets differ: whatever the model says
    (True, True, False, True, 0, ("inconclusive", "placebo")),
    (False, False, False, True, 0, ("no evidence", None)),       # nothing to guard
    (False, True, False, True, 0, ("no evidence", "placebo")),   # one of K sets: e-BH must not use it
    (True, True, False, None, 200, ("inconclusive", "small")),   # no placebo model, 100 < 200 pairs
    (True, True, False, None, 100, ("trained on", None)),        # 100 pairs suffice at 100
    (True, True, False, False, 200, ("trained on", None)),       # with a placebo model the rule is off
])
def test_decide(model_reject, evidence, blind, placebo, min_pairs, want):
    p = PlaceboResult(ran=placebo is not None, model=None if placebo is None else "hf:ref", fired=bool(placebo))
    assert decide(model_reject, evidence, _blind(blind), p, min_pairs) == want


def test_placebo_fires_on_a_separation_and_rarely_on_exchangeable_sets():
    """On features where the suspect side is shifted the placebo's W reaches 1/α within the
    pairs; on exchangeable features its firing rate over 150 seeds is ≤ α (Ville): one-sided
    binomial test, false failure ≤ 1e-3."""
    test = TestConfig()
    pairs = [({"id": f"s{i}", "text": ""}, {"id": f"h{i}", "text": ""}) for i in range(40)]
    shifted = run_placebo("hf:ref", pairs, _extractor(2.0, []), test, batch_pairs=16)
    assert shifted.fired and shifted.stop_time <= 40 and shifted.e_value >= 20
    assert shifted.pairs_used == shifted.stop_time and shifted.pairs_available == 40
    assert shifted.features == ["gray_ppl", "gray_min_k_20"]
    fired = 0
    for seed in range(150):
        ids = [({"id": f"x{seed}-{i}", "text": ""}, {"id": f"y{seed}-{i}", "text": ""}) for i in range(40)]
        fired += run_placebo("hf:ref", ids, _extractor(0.0, []), test, batch_pairs=40).fired
    assert binomtest(fired, 150, 0.05, alternative="greater").pvalue > 1e-3, fired


def test_placebo_passages_carry_what_the_audits_do():
    """A twins audit's placebo reads each passage's twin as the audit's own extraction does (its
    changed-position features need it); a `set` label or other field never goes in."""
    seen = []

    def extract_fn(passages, batch_no):
        seen.extend(passages)
        return _extractor(0.0, [])(passages, batch_no)

    pairs = [({"id": f"s{i}", "text": "a b", "twin": "a c", "set": "suspect"},
              {"id": f"s{i}#1", "text": "a c", "twin": "a b"}) for i in range(4)]
    run_placebo("hf:ref", pairs, extract_fn, TestConfig(), batch_pairs=2)
    assert seen[0] == {"id": "s0", "text": "a b", "twin": "a c"} and seen[2] == {"id": "s0#1", "text": "a c", "twin": "a b"}
    assert len(seen) == 8


def _config(tmp_path, n, **kw):
    return AuditConfig(name="g", suspect=_passages(tmp_path / "s.jsonl", "s", n, 1),
                       heldout=_passages(tmp_path / "h.jsonl", "h", n, 2), model="hf:target", batch_pairs=8, **kw)


def test_placebo_that_tells_the_sets_apart_makes_the_audit_inconclusive(tmp_path):
    """The target and the placebo both see the shift: inconclusive, and the placebo ran on
    every available pair's passages until it fired, only after the model's test rejected."""
    calls = []
    r = audit(_config(tmp_path, 40, reference=("hf:ref",)), extract_fn=_extractor(2.0, []),
              placebo_fn=_extractor(2.0, calls))
    assert r.model_reject and r.verdict == "inconclusive" and r.guard == "placebo" and not r.reject
    assert r.placebo.ran and r.placebo.fired and r.placebo.model == "hf:ref"
    assert sum(calls) == 2 * 8 * len(calls) and len(calls) == -(-r.placebo.pairs_used // 8)
    assert "never trained on the suspect set" in r.explanation and "hf:ref" in r.explanation


def test_placebo_that_sees_nothing_lets_the_target_speak(tmp_path):
    calls = []
    r = audit(_config(tmp_path, 40, reference=("hf:ref",)), extract_fn=_extractor(2.0, []),
              placebo_fn=_extractor(0.0, calls))
    assert r.verdict == "trained on" and r.guard is None and r.placebo.ran and not r.placebo.fired
    assert r.placebo.pairs_used == r.placebo.pairs_available == 40 and sum(calls) == 80  # every pair
    assert "could not tell them apart either" in r.explanation


def test_placebo_is_not_queried_when_the_model_finds_nothing(tmp_path):
    calls = []
    r = audit(_config(tmp_path, 40, reference=("hf:ref",)), extract_fn=_extractor(0.0, []),
              placebo_fn=_extractor(2.0, calls))
    assert r.verdict == "no evidence" and not r.placebo.ran and calls == []


def test_without_a_placebo_model_a_small_audit_cannot_say_trained_on(tmp_path):
    r = audit(_config(tmp_path, 40), extract_fn=_extractor(2.0, []))
    assert r.model_reject and r.verdict == "inconclusive" and r.guard == "small"
    assert not r.placebo.ran and r.placebo.model is None
    assert f"at least {UNGUARDED_MIN_PAIRS} pairs" in r.explanation and "--reference" in r.explanation
    vouched = audit(_config(tmp_path, 40, assume_exchangeable=True), extract_fn=_extractor(2.0, []))
    assert vouched.verdict == "trained on" and "--assume-exchangeable" in vouched.explanation
    off = audit(_config(tmp_path, 40, reference=("hf:ref",), placebo_check=False), extract_fn=_extractor(2.0, []))
    assert off.verdict == "inconclusive" and off.guard == "small"  # no placebo: the rule applies again


def test_placebo_config_is_the_audit_with_the_reference_in_the_targets_place():
    from trainspotter.features.features import FEATURE_SETS

    base = {"suspect": "s", "heldout": "h", "model": "hf:t"}
    one = AuditConfig(**base, reference=("hf:r1",), features=FEATURE_SETS["calibrated"]).placebo_config
    assert one.model.text == "hf:r1" and one.reference == () and not one.features.relative_only
    two = AuditConfig(**base, reference=("hf:r1", "hf:r2"), features=FEATURE_SETS["calibrated"]).placebo_config
    assert two.model.text == "hf:r1" and [r.text for r in two.reference] == ["hf:r2"] and two.features.relative_only
    given = AuditConfig(**base, reference=("hf:r1",), placebo="hf:p").placebo_config
    assert given.model.text == "hf:p" and [r.text for r in given.reference] == ["hf:r1"]
    assert AuditConfig(**base).placebo_config is None
    assert AuditConfig(**base, reference=("hf:r1",), placebo_check=False).placebo_config is None
