"""Several suspect sets against one held-out set (trainspotter.loop.sets): labels, input checks,
e-BH on the blind-checked e-values, the library loop on synthetic features, and the FDR of
the whole procedure (stop each set at K/α, then e-BH) in simulation."""

import json
import zlib
from collections import Counter

import numpy as np
import pytest
from scipy.stats import binomtest

from trainspotter.errors import InputError

WORDS = [f"w{i}" for i in range(40)]


def _write(path, prefix, n, seed):
    """n passages whose texts all come from one word distribution (exchangeable across
    files, so the blind check has nothing to find), ids prefix0..prefix{n-1}."""
    rng = np.random.default_rng(seed)
    path.write_text("".join(json.dumps({"id": f"{prefix}{i}", "text": " ".join(rng.choice(WORDS, 12))}) + "\n"
                            for i in range(n)))
    return str(path)


def _features(passages, batch_no):
    """Two features per passage, a fixed function of its id; ids starting with "m"
    (members) are shifted on the first, the member-like direction of no named feature."""
    out = []
    for p in passages:
        rng = np.random.default_rng(zlib.crc32(p["id"].encode()))
        out.append({"a": float(rng.normal() + (1.0 if p["id"].startswith("m") else 0.0)), "b": float(rng.normal())})
    return out


def test_labels_are_file_stems_made_unique():
    from trainspotter.loop.sets import AuditSetsConfig, set_labels

    assert set_labels(["x/member.jsonl", "y/member.jsonl", "z/member-2.csv", ".hidden.txt", "a b/c d.jsonl"]) == \
        ["member", "member-2", "member-2-2", "hidden", "c_d"]
    config = AuditSetsConfig(name="pub", suspect=["x/a.jsonl", "y/b.jsonl"], heldout="h.jsonl", model="hf:m",
                             test={"alpha": 0.1})
    sets = config.configs()
    # each set is an ordinary audit named after its label, stopping at K/α = 20, guarded at α
    assert [(c.name, c.suspect, c.test.alpha, c.blind_alpha, c.blind_test.alpha) for c in sets] == \
        [("pub-a", "x/a.jsonl", 0.05, 0.1, 0.1), ("pub-b", "y/b.jsonl", 0.05, 0.1, 0.1)]
    assert sets[0].test.strategy == config.test.strategy and sets[0].heldout == "h.jsonl"
    with pytest.raises(ValueError, match="one distinct label per suspect set"):
        AuditSetsConfig(suspect=["a", "b"], labels=["x", "x"], heldout="h", model="hf:m")


def test_bad_sets_are_one_clear_error_naming_the_file(tmp_path):
    from trainspotter.data import load_passages
    from trainspotter.loop.sets import AuditSetsConfig, check_sets

    a, h = _write(tmp_path / "a.jsonl", "a", 30, 1), _write(tmp_path / "h.jsonl", "h", 30, 2)
    twice = str(tmp_path / "." / "a.jsonl")  # the same file, spelled differently
    read = {p: load_passages(p) for p in (a, h, twice)}
    with pytest.raises(InputError, match=f"^{twice}: given twice as a suspect set$"):
        check_sets(AuditSetsConfig(suspect=[a, twice], heldout=h, model="hf:m"), read)
    with pytest.raises(InputError, match=f"^{h} and {h}: 30 passages in both sets"):
        check_sets(AuditSetsConfig(suspect=[a, h], heldout=h, model="hf:m"), read)
    # 6 pairs suffice for one audit at α = 0.05 (W ≤ 1.8^t: 1.8^6 = 34 ≥ 20), not for one of
    # K = 2 sets, which must reach K/α = 40: 7 pairs (1.8^7 = 61.2)
    small = _write(tmp_path / "small.jsonl", "s", 6, 3)
    read[small] = load_passages(small)
    with pytest.raises(InputError, match=f"^{small}: 6 passages.*needs at least 7 .* alpha=0.025"):
        check_sets(AuditSetsConfig(suspect=[a, small], heldout=h, model="hf:m"), read)


def _result(e_value, fired, guard=None):
    from trainspotter.auditing.verdict import AuditResult
    from trainspotter.stats.blind import BlindResult

    return AuditResult.model_construct(e_value=e_value, blind=BlindResult.model_construct(fired=fired),
                                       guard="blind" if fired else guard)


def test_ebh_sees_zero_where_the_blind_check_fired():
    """K = 3, α = 0.1: thresholds K/(α k) = 30, 15, 10. e = (40, 12, 11): k = 3 qualifies
    (11 ≥ 10), so all three are rejected. When set 1's blind check fired its 40 counts as 0:
    sorted (12, 11, 0), no k qualifies (12 < 30, 11 < 15, 0 < 10), and nothing is rejected,
    the shifted set least of all."""
    from trainspotter.loop.sets import AuditSetsConfig, decide

    config = AuditSetsConfig(suspect=["a", "b", "c"], heldout="h", model="hf:m", test={"alpha": 0.1})
    clean = decide(config, [_result(40.0, False), _result(12.0, False), _result(11.0, False)])
    assert [s.rejected for s in clean.sets] == [True, True, True] and clean.rejections == 3
    assert clean.thresholds == pytest.approx([30.0, 15.0, 10.0])
    shifted = decide(config, [_result(40.0, True), _result(12.0, False), _result(11.0, False)])
    assert [(s.verdict, s.e_value, s.rejected) for s in shifted.sets] == \
        [("inconclusive", 0.0, False), ("no evidence", 12.0, False), ("no evidence", 11.0, False)]
    assert shifted.rejections == 0 and "Inconclusive (held-out differs from the set, or too few pairs to tell): a." in shifted.explanation
    # the placebo check (a model that saw neither set separates them too) zeroes a set alike
    placebo = decide(config, [_result(40.0, False, "placebo"), _result(12.0, False), _result(11.0, False)])
    assert [(s.verdict, s.e_value) for s in placebo.sets] == \
        [("inconclusive", 0.0), ("no evidence", 12.0), ("no evidence", 11.0)]


def test_audit_sets_is_ordinary_audits_then_ebh_reading_each_file_once(tmp_path, monkeypatch):
    import sys

    from trainspotter import AuditSetsConfig, audit, audit_sets
    from trainspotter.record.report import sets_html
    from trainspotter.stats.ebh import ebh

    member, other = _write(tmp_path / "member.jsonl", "m", 60, 1), _write(tmp_path / "other.jsonl", "o", 60, 2)
    heldout = _write(tmp_path / "heldout.jsonl", "h", 60, 3)
    audit_module = sys.modules["trainspotter.loop.inputs"]  # where the audit reads its files
    reads, load = Counter(), audit_module.load_passages
    monkeypatch.setattr(audit_module, "load_passages", lambda path: reads.update([path]) or load(path))
    # exchangeable by construction: small sets without a reference may then say "trained on"
    config = AuditSetsConfig(name="pub", suspect=[member, other], heldout=heldout, model="hf:m", batch_pairs=8,
                             assume_exchangeable=True)
    r = audit_sets(config, extract_fn=_features)
    assert reads == {member: 1, other: 1, heldout: 1}
    assert [(s.label, s.verdict) for s in r.sets] == [("member", "trained on"), ("other", "no evidence")]
    m, o = (s.result for s in r.sets)
    assert not m.blind.fired and not o.blind.fired and m.blind.alpha == 0.05
    # the member set stopped querying at K/α = 40, the other ran to the end of its data
    assert m.stopped_by == "rejected" and m.e_value >= 40 > m.history["wealth"][-2] and m.stop_time == m.pairs_used
    assert o.stopped_by == "data" and o.pairs_used == 60 and o.e_value < 20
    # each set is the ordinary audit of its config; the decision is e-BH on their e-values
    alone = [audit(c, extract_fn=_features) for c in config.configs()]
    assert [a.e_value for a in alone] == [m.e_value, o.e_value] and [a.name for a in alone] == ["pub-member", "pub-other"]
    assert [s.rejected for s in r.sets] == ebh([m.e_value, o.e_value], 0.05).tolist()
    page = sets_html(r.model_dump(), b"png")  # a library result has no MLflow runs
    assert page.count('<tr class="reject">') == 1 and "Trained on: member (e = " in page and "None" not in page


@pytest.mark.parametrize("alternatives", [1, 3])
def test_fdr_of_stopping_at_k_over_alpha_then_ebh_in_simulation(alternatives):
    """K = 10 suspect sets sharing one held-out stream (so their e-values are dependent),
    `alternatives` of them shifted, 500 replicates of the whole procedure: each set's
    sequential test at level α/K from ``AuditSetsConfig.configs`` (it stops at its first
    W ≥ K/α; e = W there, else W at the end of its 150 pairs), then e-BH at α.

    FDR ≤ α is checked with an exact one-sided binomial test at a false-failure rate of
    1e-3: replicate r counts as a success with probability FDP_r (an independent uniform
    draw), so the count is Binomial(500, FDR). The same streams with every set rejected
    at its own 1/α (no multiplicity correction) are checked to fail it with one
    alternative, so the check can see a procedure that ignores the K sets."""
    from trainspotter.loop.sets import AuditSetsConfig
    from trainspotter.stats.ebh import ebh
    from trainspotter.stats.simulation import run_batch

    alpha, K, n, p, B = 0.05, 10, 150, 4, 500
    config = AuditSetsConfig(suspect=[f"s{i}.jsonl" for i in range(K)], heldout="h.jsonl", model="hf:m",
                             test={"alpha": alpha})
    rng = np.random.default_rng(alternatives)
    Y = rng.normal(size=(B, n, p))  # the shared held-out stream, in the same order for every set
    e, crossed = np.zeros((B, K)), np.zeros((B, K), dtype=bool)
    for i, set_config in enumerate(config.configs()):
        assert set_config.test.alpha == alpha / K
        X = rng.normal(size=(B, n, p))
        X[:, :, :2] += 0.6 if i < alternatives else 0.0
        run = run_batch(X, Y, set_config.test)  # no catalogued column: no sign to keep
        stop, log_w = run["stop_time"], run["log_wealth"]
        e[:, i] = np.exp(np.where(stop > 0, log_w[np.arange(B), np.maximum(stop, 1) - 1], log_w[:, -1]))
        crossed[:, i] = (log_w >= np.log(1 / alpha)).any(axis=1)  # 1/α comes before K/α: the path has it
    draw = rng.random(B)

    def fdr_test(rejected):
        fdp = rejected[:, alternatives:].sum(axis=1) / np.maximum(rejected.sum(axis=1), 1)
        return binomtest(int((draw < fdp).sum()), B, alpha, alternative="greater").pvalue, fdp.mean()

    rejected = np.array([ebh(row, alpha) for row in e])
    pvalue, fdr = fdr_test(rejected)
    assert pvalue > 1e-3, f"FDR {fdr:.3f} above α = {alpha}"
    assert rejected[:, :alternatives].mean() > 0.9  # not vacuous: the shifted sets are found
    if alternatives == 1:
        naive_p, naive_fdr = fdr_test(crossed)
        assert naive_p < 1e-3, f"uncorrected FDR {naive_fdr:.3f}"
