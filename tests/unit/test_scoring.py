"""Scoring models: normalisation, the paper's Adam fit, the online Newton fit, P², predictability, persistence."""

import json

import numpy as np
import pytest

from trainspotter.stats.adam_scorer import AdamScorer  # the paper scorer (A.4)
from trainspotter.stats.newton_scorer import NewtonScorer
from trainspotter.stats.quantiles import P2Quantile
from trainspotter.stats.scoring import make_scorer, scorer_from_dict


def _pairs(n, p, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, 0] += shift
    return X, rng.normal(size=(n, p))


def test_normalisation_uses_past_rows_only():
    X, Y = _pairs(30, 3, seed=1)
    sc = AdamScorer(3, trim=0.025)
    for x, y in zip(X, Y):
        sc.update(x, y)
    past = np.vstack([np.column_stack([X[i], Y[i]]).T for i in range(30)])  # 60 rows, x then y
    np.testing.assert_allclose(sc.mu[0], past.mean(axis=0), rtol=1e-12)       # Eq. 6
    np.testing.assert_allclose(sc.sd[0], past.std(axis=0), rtol=1e-12)        # Eq. 7 (1/n)
    lo, hi = sc._bounds()
    np.testing.assert_array_equal(lo[0], np.quantile(past, 0.025, axis=0, method="lower"))
    np.testing.assert_array_equal(hi[0], np.quantile(past, 0.975, axis=0, method="higher"))
    # With 60 rows the 2.5% order statistic is the 2nd smallest: the minimum is trimmed to the mean.
    z = sc._normalise(past[None])[0]
    i_min = past[:, 0].argmin()
    assert z[i_min, 0] == 0.0
    j = past[:, 0].argsort()[5]
    assert z[j, 0] == pytest.approx((past[j, 0] - past[:, 0].mean()) / past[:, 0].std())


def test_no_trimming_before_enough_rows():
    sc = AdamScorer(1)
    sc.update([1.0], [3.0])
    z = sc._normalise(np.array([[[1.0], [3.0], [2.0]]]))[0, :, 0]
    np.testing.assert_allclose(z, [-1.0, 1.0, 0.0])  # μ = 2, σ = 1, extremes kept


def test_one_round_of_adam_matches_torch():
    torch = pytest.importorskip("torch")
    X, Y = _pairs(20, 4, shift=1.0, seed=2)
    sc = AdamScorer(4, lr=0.01, epochs=30, seed=3)
    theta0 = sc.theta[0].copy()
    for x, y in zip(X, Y):
        sc.update(x, y)  # 20 rounds × 30 epochs, one Adam optimiser kept warm
    lin = torch.nn.Linear(4, 1).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(theta0[:4])[None])
        lin.bias.copy_(torch.tensor(theta0[4:]))
    opt = torch.optim.Adam(lin.parameters(), lr=0.01)
    ref = AdamScorer(4, seed=3)
    for x, y in zip(X, Y):
        ref.update(x, y)  # only to get the same past-only normalised design matrix
        z = torch.tensor(ref._design()[0, :4].T)
        labels = torch.tensor(np.tile([1.0, 0.0], len(z) // 2))
        for _ in range(30):
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(lin(z)[:, 0], labels)
            loss.backward()
            opt.step()
    np.testing.assert_allclose(sc.theta[0, :4], lin.weight.detach().numpy()[0], atol=1e-9)
    np.testing.assert_allclose(sc.theta[0, 4], lin.bias.detach().numpy()[0], atol=1e-9)


def test_pair_t_is_scored_by_a_model_of_pairs_before_t_and_leaking_would_show():
    X, Y = _pairs(40, 5, shift=0.5, seed=4)
    t = 25  # pair t (1-based) = index 24
    online = AdamScorer(5, seed=7)
    scores = []
    for x, y in zip(X, Y):
        scores.append((online.score(x), online.score(y)))  # score before update, as SequentialTest does
        online.update(x, y)
    # Scorer trained on pairs 1..t−1 only.
    past = AdamScorer(5, seed=7)
    for x, y in zip(X[: t - 1], Y[: t - 1]):
        past.update(x, y)
    assert scores[t - 1] == (past.score(X[t - 1]), past.score(Y[t - 1]))
    # A leaky variant (pair t absorbed before it is scored) gives different scores,
    # so the equality above really pins the order down.
    leaky = AdamScorer(5, seed=7)
    for x, y in zip(X[:t], Y[:t]):
        leaky.update(x, y)
    assert abs(leaky.score(X[t - 1]) - scores[t - 1][0]) > 1e-6
    assert abs(leaky.score(Y[t - 1]) - scores[t - 1][1]) > 1e-6


def test_future_pairs_do_not_change_past_scores():
    X, Y = _pairs(30, 3, seed=5)
    a, b = AdamScorer(3, seed=1), AdamScorer(3, seed=1)
    Y2 = Y.copy()
    Y2[20:] += 100.0  # wildly different future
    sa, sb = [], []
    for i in range(30):
        sa.append(a.score(X[i]))
        sb.append(b.score(X[i]))
        a.update(X[i], Y[i])
        b.update(X[i], Y2[i])
    assert sa[:21] == sb[:21]
    assert sa[21] != sb[21]


def test_learns_member_direction_and_is_deterministic():
    X, Y = _pairs(300, 6, shift=1.5, seed=6)
    runs = []
    for _ in range(2):
        sc = AdamScorer(6, seed=11)
        for x, y in zip(X, Y):
            sc.update(x, y)
        runs.append(sc.theta.copy())
    np.testing.assert_array_equal(runs[0], runs[1])
    Xt, Yt = _pairs(200, 6, shift=1.5, seed=99)
    assert sc.score(Xt).mean() > sc.score(Yt).mean() + 1.0  # suspect = 1 ⇒ higher score
    other = AdamScorer(6, seed=12)
    assert not np.array_equal(other.theta, AdamScorer(6, seed=11).theta)


def test_batch_streams_match_single_streams():
    X, Y = _pairs(15, 3, shift=0.5, seed=8)
    X2, Y2 = _pairs(15, 3, seed=9)
    batch = AdamScorer(3, seed=0, batch=2)
    singles = [AdamScorer(3, seed=0), AdamScorer(3, seed=0)]
    singles[1].theta = batch.theta[1:2].copy()  # same initial layer as batch row 1
    for i in range(15):
        bx = np.stack([X[i], X2[i]])
        s = batch.score(bx)
        assert s[0] == pytest.approx(singles[0].score(X[i]), abs=1e-12)
        assert s[1] == pytest.approx(singles[1].score(X2[i]), abs=1e-12)
        batch.update(bx, np.stack([Y[i], Y2[i]]))
        singles[0].update(X[i], Y[i])
        singles[1].update(X2[i], Y2[i])


def test_save_load_continuation_is_exact():
    X, Y = _pairs(80, 4, shift=0.3, seed=10)
    full = AdamScorer(4, seed=2)
    for x, y in zip(X, Y):
        full.update(x, y)
    part = AdamScorer(4, seed=2)
    for x, y in zip(X[:37], Y[:37]):
        part.update(x, y)
    resumed = AdamScorer.from_dict(json.loads(json.dumps(part.to_dict())))
    for x, y in zip(X[37:], Y[37:]):
        resumed.update(x, y)
    np.testing.assert_array_equal(resumed.theta, full.theta)
    assert resumed.score(X[0]) == full.score(X[0])


# ---------------------------------------------------------------------------
# The online scorer (NewtonScorer) and its P² trimming quantiles
# ---------------------------------------------------------------------------


def test_newton_scorer_by_hand():
    # One feature, no trimming, ρ = ridge·p = 1.
    sc = NewtonScorer(1, ridge=1.0, trim=0.0)
    assert sc.score([5.0]) == 0.0  # θ = 0 before any data
    sc.update([1.0], [3.0])
    # rows 1, 3: r̄ = 2, C = 2, σ² = 1 → φ = ½(1 − 3) / (¼·2 + 1·1) = −2/3; score(5) = φ(5 − r̄) = −2.
    assert sc.phi[0, 0] == pytest.approx(-2 / 3)
    assert sc.score([5.0]) == pytest.approx(-2.0)
    sc.update([4.0], [0.0])
    # rows 1, 3, 4, 0: r̄ = 2, C = 10, σ² = 2.5 → φ = ½(−2 + 4) / (2.5 + 2.5) = 0.2; score(5) = 0.6.
    assert sc.phi[0, 0] == pytest.approx(0.2)
    assert sc.score([5.0]) == pytest.approx(0.6)
    assert sc.w[0, 0] == pytest.approx(0.2 * np.sqrt(2.5))  # weight of z = (x − μ)/σ


def test_newton_scorer_equals_its_definition_on_normalised_rows():
    """w = (¼ C_z + ρI)⁻¹ ½ Σ(z_x − z_y), b = −w·z̄ with z from the current μ, σ (no trimming yet)."""
    X, Y = _pairs(12, 3, shift=0.7, seed=20)
    X[:, 2] *= 50.0  # scales differ: the ridge acts on normalised weights
    sc = NewtonScorer(3, ridge=0.5)
    for t in range(12):
        sc.update(X[t], Y[t])
        rows = np.vstack([X[: t + 1], Y[: t + 1]])
        mu, sd = rows.mean(axis=0), rows.std(axis=0)
        Z = (rows - mu) / sd
        Zc = Z - Z.mean(axis=0)
        w = np.linalg.solve(Zc.T @ Zc / 4 + 0.5 * 3 * np.eye(3), 0.5 * (Z[: t + 1] - Z[t + 1:]).sum(axis=0))
        b = -w @ Z.mean(axis=0)
        new = np.array([0.3, -1.0, 20.0])
        assert sc.score(new) == pytest.approx(w @ ((new - mu) / sd) + b, rel=1e-9, abs=1e-12)
        np.testing.assert_allclose(sc.w[0], w, rtol=1e-9)
        np.testing.assert_allclose(sc.theta[0], np.append(w, b), rtol=1e-9, atol=1e-12)  # as AdamScorer.theta


def _p2_reference(values, tau):
    """P² (Jain & Chlamtac 1985) for one stream, written out plainly from the paper."""
    q = sorted(values[:5])
    n = [1, 2, 3, 4, 5]
    f = [0, tau / 2, tau, (1 + tau) / 2, 1]
    for c, x in enumerate(values[5:], start=6):
        if x < q[0]:
            q[0], k = x, 0
        elif x >= q[4]:
            q[4], k = x, 3
        else:
            k = max(i for i in range(4) if q[i] <= x)
        for i in range(k + 1, 5):
            n[i] += 1
        for i in (1, 2, 3):
            d = 1 + (c - 1) * f[i] - n[i]
            if (d >= 1 and n[i + 1] - n[i] > 1) or (d <= -1 and n[i - 1] - n[i] < -1):
                d = 1 if d > 0 else -1
                qp = q[i] + d / (n[i + 1] - n[i - 1]) * ((n[i] - n[i - 1] + d) * (q[i + 1] - q[i]) / (n[i + 1] - n[i])
                                                         + (n[i + 1] - n[i] - d) * (q[i] - q[i - 1]) / (n[i] - n[i - 1]))
                if not q[i - 1] < qp < q[i + 1]:
                    qp = q[i] + d * (q[i + d] - q[i]) / (n[i + d] - n[i])
                q[i], n[i] = qp, n[i] + d
    return q, n


def test_p2_by_hand_and_against_the_plain_algorithm():
    est = P2Quantile(0.5, ())
    for v in [3.0, 1.0, 5.0, 2.0]:
        est.add(np.array(v))
    assert est.value == 2.0  # exact 'lower' order statistic while < 5 values: sorted 1,2,3,5 → index 1
    for v in [4.0, 6.0, 7.0]:
        est.add(np.array(v))
    # 6: q4 ← 6, positions 1,2,3,4,6, desired 1,2.25,3.5,4.75,6 → nothing moves.
    # 7: q4 ← 7, desired 1,2.5,4,5.5,7; marker 3 (d = 1.5) moves up one by the parabola:
    #    4 + 1/(7−3)·((4−3+1)(7−4)/(7−4) + (7−4−1)(4−3)/(4−3)) = 5.
    np.testing.assert_array_equal(est.q, [1, 2, 3, 5, 7])
    np.testing.assert_array_equal(est.pos, [1, 2, 3, 5, 7])
    assert est.value == 3.0
    # Vectorised over streams = the plain loop per stream, on heavy-tailed data.
    rng = np.random.default_rng(21)
    data = rng.standard_t(3, size=(3000, 2, 3))
    vec = P2Quantile(0.025, (2, 3))
    for row in data:
        vec.add(row)
    for a in range(2):
        for b in range(3):
            q, n = _p2_reference(list(data[:, a, b]), 0.025)
            np.testing.assert_allclose(vec.q[:, a, b], q, rtol=1e-12)
            np.testing.assert_array_equal(vec.pos[:, a, b], n)
    # And it estimates the 2.5% quantile: on 3000 N(0, 1) values (empirical quantile's
    # s.e. ≈ 0.05) within 0.15 of the exact order statistic in each of 6 streams.
    normal = rng.normal(size=(3000, 6))
    est = P2Quantile(0.025, (6,))
    for row in normal:
        est.add(row)
    assert np.abs(est.value - np.quantile(normal, 0.025, axis=0)).max() < 0.15


def test_newton_trimming_uses_past_quantiles_from_the_41st_row():
    rng = np.random.default_rng(22)
    X, Y = rng.normal(size=(2, 400, 2))
    sc = NewtonScorer(2)
    for t in range(400):
        lo, hi = sc._bounds()
        if 2 * t < 41:  # the exact 2.5% tail of < 41 rows holds no whole row: nothing trimmed
            assert np.isinf(lo).all() and np.isinf(hi).all()
        sc.update(X[t], Y[t])
    past = np.vstack([X, Y])
    lo, hi = sc._bounds()
    np.testing.assert_allclose(lo[0], np.quantile(past, 0.025, axis=0), atol=0.2)
    np.testing.assert_allclose(hi[0], np.quantile(past, 0.975, axis=0), atol=0.2)
    # A value beyond the bounds counts as the past mean: its score is the mean's score.
    far = np.array([hi[0, 0] + 100.0, 0.1])
    assert sc.score(far) == pytest.approx(sc.score(np.array([sc.mu[0, 0], 0.1])))


def test_newton_pair_t_is_scored_by_pairs_before_t_and_leaking_would_show():
    X, Y = _pairs(60, 5, shift=0.5, seed=23)
    t = 50  # beyond the 41st row, so the trimming bounds are in play too
    online = NewtonScorer(5)
    scores = []
    for x, y in zip(X, Y):
        scores.append((online.score(x), online.score(y)))
        online.update(x, y)
    past = NewtonScorer(5)
    for x, y in zip(X[: t - 1], Y[: t - 1]):
        past.update(x, y)
    assert scores[t - 1] == (past.score(X[t - 1]), past.score(Y[t - 1]))
    # Changing pair t's features does not change pair t's score.
    other = NewtonScorer.from_dict(past.to_dict())
    assert other.score(X[t - 1] + 3.0) != scores[t - 1][0]  # the scorer does look at x …
    changed = NewtonScorer(5)
    X2 = X.copy()
    X2[t - 1] += 3.0
    for x, y in zip(X2[: t - 1], Y[: t - 1]):
        changed.update(x, y)
    assert changed.score(Y[t - 1]) == scores[t - 1][1]  # … but not at pair t before scoring it
    leaky = NewtonScorer(5)
    for x, y in zip(X[:t], Y[:t]):
        leaky.update(x, y)
    assert abs(leaky.score(X[t - 1]) - scores[t - 1][0]) > 1e-6


def test_newton_learns_member_direction():
    X, Y = _pairs(300, 6, shift=1.5, seed=24)
    sc = NewtonScorer(6)
    for x, y in zip(X, Y):
        sc.update(x, y)
    Xt, Yt = _pairs(200, 6, shift=1.5, seed=98)
    assert sc.score(Xt).mean() > sc.score(Yt).mean() + 1.0
    assert np.argmax(np.abs(sc.w[0])) == 0 and sc.w[0, 0] > 0


def test_newton_batch_streams_match_single_streams():
    X, Y = _pairs(60, 3, shift=0.5, seed=25)
    X2, Y2 = _pairs(60, 3, seed=26)
    batch = NewtonScorer(3, batch=2)
    singles = [NewtonScorer(3), NewtonScorer(3)]
    for i in range(60):
        bx = np.stack([X[i], X2[i]])
        s = batch.score(bx)
        assert s[0] == pytest.approx(singles[0].score(X[i]), rel=1e-12, abs=1e-12)
        assert s[1] == pytest.approx(singles[1].score(X2[i]), rel=1e-12, abs=1e-12)
        batch.update(bx, np.stack([Y[i], Y2[i]]))
        singles[0].update(X[i], Y[i])
        singles[1].update(X2[i], Y2[i])


def test_newton_save_load_is_exact_and_does_not_grow_with_n():
    X, Y = _pairs(300, 4, shift=0.3, seed=27)
    full = NewtonScorer(4)
    for x, y in zip(X, Y):
        full.update(x, y)
    part = NewtonScorer(4)
    sizes = {}
    for i, (x, y) in enumerate(zip(X[:137], Y[:137])):
        part.update(x, y)
        if i + 1 in (10, 137):
            d = part.to_dict()
            sizes[i + 1] = {k: np.asarray(v, dtype=float).size for k, v in d.items() if isinstance(v, list)}
            sizes[i + 1].update({f"tails.{k}": np.asarray(v).size for k, v in d["tails"].items()
                                 if isinstance(v, list)})
    assert sizes[10] == sizes[137]  # state of fixed size
    resumed = scorer_from_dict(json.loads(json.dumps(part.to_dict())))
    assert isinstance(resumed, NewtonScorer)
    for x, y in zip(X[137:], Y[137:]):
        resumed.update(x, y)
    np.testing.assert_array_equal(resumed.phi, full.phi)
    np.testing.assert_array_equal(resumed.tails.q, full.tails.q)
    assert resumed.score(X[0]) == full.score(X[0])


def test_make_scorer_and_legacy_states():
    assert isinstance(make_scorer("online", 3), NewtonScorer)
    assert isinstance(make_scorer("paper", 3), AdamScorer)
    with pytest.raises(ValueError, match="unknown scorer"):
        make_scorer("sgd", 3)
    legacy = AdamScorer(3).to_dict()
    del legacy["kind"]  # saved before scorers had a kind: the paper scorer
    assert isinstance(scorer_from_dict(legacy), AdamScorer)
