"""Library side of the benchmark: configuration checks, DI tables, the fixed-n p-value
baseline's rejection rates, the RSS sampler and the Markdown table."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pydantic
import pytest

from trainspotter.evaluation.benchmark import BenchmarkConfig
from trainspotter.evaluation.benchmark_di import (best_valid, censored_stops, di_frame, di_row, paired_saving,
                                                  pooled_frame, pvalue_baseline)
from trainspotter.evaluation.benchmark_tables import render_markdown


def test_config_validation():
    c = BenchmarkConfig(methods=["loss", "refl", "loss"], alphas=[0.05, 0.05])
    assert c.methods == ("loss", "refl") and c.alphas == (0.05,)
    for bad, match in [({"methods": ["loss", "nope"]}, "unknown method.*'nope'.*choose from loss"),
                       ({"strategies": ["martingale"]}, "unknown strategy"),
                       ({"di_access": ["white"]}, "unknown access"),
                       ({"alphas": [1.5]}, r"alphas must lie in \(0, 1\)"),
                       ({"cost_samples": 3}, "at least 4")]:
        with pytest.raises(pydantic.ValidationError, match=match):
            BenchmarkConfig(**bad)


def test_di_frame_labels_and_columns():
    table = pd.DataFrame({"id": list("abcdef"), "split": ["member", "member", "nonmember", "nonmember",
                                                           "heldout", "heldout"],
                          "gray_ppl": np.arange(6.0), "black_ppl": -np.arange(6.0), "petal_ppl": np.ones(6)})
    pos = di_frame(table, "member", "gray")
    assert list(pos.columns) == ["set", "gray_ppl"]
    assert pos["set"].tolist() == ["suspect", "suspect", "heldout", "heldout"]
    assert pos["gray_ppl"].tolist() == [0, 1, 4, 5]
    neg = di_frame(table, "nonmember", "black")
    assert list(neg.columns) == ["set", "black_ppl"] and neg["black_ppl"].tolist() == [-2, -3, -4, -5]
    # the pooled control: non-members and held-out, one pool that simulate(null=True) splits per trial
    pool = pooled_frame(table, "gray")  # the members stay suspect rows, unused by a null run
    assert pool["set"].tolist() == ["suspect"] * 2 + ["heldout"] * 4
    assert pool["gray_ppl"].tolist() == [0, 1, 2, 3, 4, 5]


def test_di_row_reports_both_controls_with_their_binomial_tests():
    from math import comb

    from trainspotter.stats.sequential import TestConfig

    def result(rate, trials, stops=(3, 0)):
        return {"trials": trials, "pairs": 40, "by_alpha": {"0.05": {"rejection_rate": rate, "mean_stop": 3.0,
                                                                    "std_stop": 0.0, "stop_times": list(stops)}}}

    row = di_row("gray", TestConfig(), 0.05, result(0.5, 2), result(0.02, 100), result(0.10, 100))
    tail = sum(comb(100, k) * 0.05 ** k * 0.95 ** (100 - k) for k in range(10, 101))  # P(Bin(100, α) ≥ 10)
    assert row["fpr_pooled"] == 0.10 and row["fpr_pooled_binom_p"] == pytest.approx(tail, rel=1e-9)
    assert row["fpr"] == 0.02 and row["fpr_binom_p"] == pytest.approx(
        sum(comb(100, k) * 0.05 ** k * 0.95 ** (100 - k) for k in range(2, 101)), rel=1e-9)
    assert row["mean_pairs"] == (3 + 40) / 2  # the non-rejection counted as N_max
    assert "fpr_pooled" not in di_row("gray", TestConfig(), 0.05, result(0.5, 2), result(0.02, 100))


def _features(shift, n=100, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(np.r_[rng.normal(size=(n, 3)) + [shift, 0, 0], rng.normal(size=(n, 3))],
                        columns=list("abc")).assign(set=["suspect"] * n + ["heldout"] * n)


def test_pvalue_baseline_rejects_a_shift_and_holds_level_under_the_null():
    few = pvalue_baseline(_features(1.5), trials=40, n_max=40, alphas=(0.05, 0.01), seed=0)
    assert few["pairs"] == 40 and few["trials"] == 40 and len(few["p_values"]) == 40
    rate = few["rejection_rate"]
    assert 0.5 < rate["0.01"] < rate["0.05"] < 1.0  # measured 0.675 < 0.875
    many = pvalue_baseline(_features(1.5), trials=20, n_max=80, alphas=(0.05, 0.01), seed=0)
    assert many["rejection_rate"] == {"0.05": 1.0, "0.01": 1.0}  # more pairs, more power
    null = pvalue_baseline(_features(0.0), trials=60, n_max=40, alphas=(0.05,), seed=0)
    assert null["rejection_rate"]["0.05"] <= 0.1  # Brown–Šidák combination: valid, conservative
    once = pvalue_baseline(_features(0.0), trials=5, n_max=None, seed=0)
    assert once["pairs"] == 100 and pvalue_baseline(_features(0.0), trials=5, n_max=None, seed=0) == once


PEAKS = """
import json, time
import numpy as np
from trainspotter.evaluation.benchmark_cost import PeakRSS

def touch_305_mib(hold):
    block = np.ones(40_000_000)
    block += 1
    time.sleep(hold)
    del block

with PeakRSS() as small:
    pass
with PeakRSS(interval=0.005) as sampled:  # sampling sees an allocation held for 0.2 s
    touch_305_mib(0.2)
# sampling once a minute never runs inside the block: only the kernel's high-water mark
# can see the peak, which is freed again before the block ends
with PeakRSS(interval=60) as kernel:
    touch_305_mib(0.0)
with PeakRSS(interval=60) as after:  # the reset on entry forgets the earlier peak
    pass
print(json.dumps({"small": small.peak_mb, "sampled": sampled.peak_mb, "kernel": kernel.peak_mb,
                  "exact": kernel._exact, "after": after.peak_mb}))
"""


@pytest.fixture(scope="module")
def peaks() -> dict:
    """PeakRSS in a fresh interpreter: in a long test process the allocator may hand a new
    array pages that are already resident, so the RSS would not grow (seen in the full suite)."""
    out = subprocess.run([sys.executable, "-c", PEAKS], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_peak_rss_sampling_sees_a_held_allocation(peaks):
    assert peaks["small"] < 50 and peaks["sampled"] > 250


def test_peak_rss_kernel_mark_sees_a_peak_between_samples(peaks):
    if not peaks["exact"]:
        pytest.skip("this kernel does not reset VmHWM through /proc/self/clear_refs")
    assert peaks["kernel"] > 250 and peaks["after"] < 50


def test_markdown_table():
    metrics = {"auroc": 0.9, "auroc_ci_low": 0.8, "auroc_ci_high": 0.95, "n_members": 3, "n_nonmembers": 4}
    metrics |= dict.fromkeys(["tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr", "tpr_at_10pct_fpr", "precision", "recall",
                              "f1", "accuracy", "fpr", "fnr", "advantage"], 0.5)
    md = render_markdown("T", "header line", [{"label": "LOSS", "access": "gray", "metrics": metrics,
                                                "cost": {"seconds_per_sample": 0.01, "peak_rss_mb": 2.0}}],
                         [{"access": "gray", "test": "ons/mmd", "alpha": 0.05, "tpr": 1.0, "fpr": 0.0,
                           "mean_stop": 12.0, "std_stop": 3.0, "pairs": 50, "trials": 10}])
    assert md.startswith("# T\n\nheader line\n")
    assert "(3 members vs 4 non-members)" in md
    assert "| LOSS | gray | 0.900 [0.800, 0.950] | 0.500 |" in md and "| 0.0100 | 2.0 |" in md
    assert "| gray | ons/mmd | 0.05 | 1.000 | 0.000 (—) | — | — | — | 12.0 ± 3.0 | 50 | 10 (10) |" in md


def test_censored_pairs_and_paired_saving_by_hand():
    # a non-rejection (0) counts as the N_max = 40 pairs it used
    np.testing.assert_array_equal(censored_stops([10, 0, 20], 40), [10.0, 40.0, 20.0])
    s = paired_saving([10, 0, 20], [20, 30, 0], 40, n_boot=500)
    assert s["saving"] == pytest.approx(1 - (70 / 3) / 30)  # means 23.33 vs 30
    assert s["saving_ci_low"] < s["saving_ci_high"]
    assert paired_saving([5, 5], [5, 5], 10)["saving"] == 0.0


def test_best_valid_skips_configurations_whose_fpr_is_significantly_above_alpha():
    def row(test, access, pairs, p):
        return {"test": test, "access": access, "alpha": 0.05, "mean_pairs": pairs, "fpr_binom_p": p,
                "tpr": 1.0, "fpr": 0.05}

    rows = [row("A", "gray", 100, 0.5), row("A", "black", 120, 0.6),
            row("B", "gray", 80, 0.5), row("B", "black", 90, 0.01),  # fastest, but FPR above α in black
            row("C", "gray", 110, 0.9), row("C", "black", 115, 0.9)]
    best = best_valid(rows, 0.05)
    assert best["test"] == "A" and best["mean_pairs"] == 110.0
    assert best_valid([r for r in rows if r["test"] == "B"], 0.05) is None
    assert best_valid(rows, 0.01) is None  # no rows at that level
    rows[0]["fpr_pooled_binom_p"] = 0.001  # A's pooled control is above α in gray: C is the best valid one
    assert best_valid(rows, 0.05)["test"] == "C"
