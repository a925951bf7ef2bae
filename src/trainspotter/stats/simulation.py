"""Monte Carlo evaluation of the sequential test (e-BH: ``trainspotter.stats.ebh``).

BADI paper Sec. 5.1 and App. D: T trials, each a random order (subset without
replacement) of at most N_max pairs; the test runs with the fixed threshold
1/α and a trial counts as a rejection at its first crossing, else as a
non-rejection at the end of its stream. Reported: rejection rates (TPR/FNR on
suspect vs held-out, FPR on held-out vs held-out), mean ± std stopping time of
rejecting trials, the sequential power curve Power(t) = (1/T) Σ_i 1{T_i ≤ t}
(D.5), and the held-out pollution experiment (D.6).

Trials run as a batch of independent streams through the same code as a
single audit (``SequentialTest(batch=B)``), so what is evaluated is exactly
what is shipped. Everything here takes arrays: suspect rows S and held-out rows H (n, p), and
``signs``, each feature's member-like direction (+1/−1, 0 = learned) for the one-sided scorer
(``TestConfig.oriented``); ``trainspotter.auditing.tables`` runs it on a features table.
"""

from __future__ import annotations

import math

import numpy as np

from trainspotter.stats.eprocess import EProcess, wealth_path
from trainspotter.stats.payoffs import make_payoff
from trainspotter.stats.scoring import make_scorer
from trainspotter.stats.sequential import SequentialTest, TestConfig, round_payoff, signs_of, sub_pairs

__all__ = ["run_batch", "stop_times", "stream_stops", "power_curve", "simulate", "simulate_many", "pollution"]


def run_batch(X: np.ndarray, Y: np.ndarray, config: TestConfig, signs=None) -> dict:
    """Run B independent streams X, Y of shape (B, n, p) through the test (``signs``: the
    features' member-like directions, for the scorer's orientation).

    Returns {"stop_time" (B,) with 0 = no crossing, "log_wealth" (B, n),
    "u" (B, n)}. The streams continue after a crossing (the first crossing
    is what counts).
    """
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    B, n, p = X.shape
    test = SequentialTest(p, config, batch=B, signs=signs)
    logw = np.zeros((B, n))
    for t in range(n):
        test.update(X[:, t], Y[:, t])
        logw[:, t] = test.eprocess.log_wealth
    return {"stop_time": test.stop_time, "log_wealth": logw, "u": np.stack(test.history["u"], axis=1)}


def stop_times(payoffs: np.ndarray, strategy: str, lambda_max: float, alpha: float) -> np.ndarray:
    """First t with W_t ≥ 1/α for each payoff stream (B, n); 0 = never."""
    w = wealth_path(payoffs, strategy, lambda_max)
    w = w[None] if w.ndim == 1 else w
    hit = w >= 1.0 / alpha
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)


def power_curve(stops: np.ndarray, n: int) -> np.ndarray:
    """D.5: Power(t) = fraction of trials with T_i ≤ t, for t = 1..n."""
    stops = np.asarray(stops)
    counts = np.bincount(stops[stops > 0], minlength=n + 1)[1: n + 1]
    return np.cumsum(counts) / max(len(stops), 1)


def _summary(stops: np.ndarray, n: int, null: bool) -> dict:
    stops = np.asarray(stops)
    rej = stops > 0
    rate = float(rej.mean()) if len(stops) else 0.0
    st = stops[rej].astype(float)
    return {
        "rejection_rate": rate,
        "tpr": None if null else rate,
        "fnr": None if null else 1.0 - rate,
        "fpr": rate if null else None,
        "mean_stop": float(st.mean()) if len(st) else None,
        "std_stop": float(st.std()) if len(st) else None,
        "power_curve": power_curve(stops, n).tolist(),
        "stop_times": stops.tolist(),
    }


def _chunks(trials: int, batch_size: int):
    for start in range(0, trials, batch_size):
        yield min(batch_size, trials - start)


# The fields that fix the scorer: configurations equal in these see the same scores on
# the same streams, so one scorer pass can feed all their bettors.
SCORER_FIELDS = ("scorer", "lr", "epochs", "trim", "ridge", "seed", "oriented")


def stream_stops(S: np.ndarray, H: np.ndarray, idx_x: np.ndarray, idx_y: np.ndarray,
                  configs: list[TestConfig], alphas: list[float],
                  signs=None) -> tuple[np.ndarray, np.ndarray]:
    """Run B streams X_t = S[idx_x[:, t]], Y_t = H[idx_y[:, t]] through the test of every
    configuration (all with the scorer settings of ``configs[0]``, oriented by ``signs``),
    one round at a time. ``idx_x``, ``idx_y`` of shape (B, n, m) make each round m sub-pairs
    (S[idx_x[:, t, j]], H[idx_y[:, t, j]]), bet on with the mean of their payoffs
    (``SequentialTest.update``; e.g. a public version against each of its k − 1 private variants).

    A round is ``SequentialTest.update`` shared out: the pair is scored once by the scorer
    of pairs < t; each payoff in use gives u_t from its witness of rounds < t (a witness
    sees only scores, so strategies share it); each configuration's strategy bets on its
    payoff; then witnesses and scorer absorb pair t. Returns first-crossing times
    (configs, alphas, B), 0 = never, and Σ_b log W_t per configuration and round
    (configs, n). No per-round history is kept, so memory does not grow with n beyond the
    index arrays. The wealth does not depend on α, so one pass serves every 1/α.
    """
    B, n = idx_x.shape[:2]
    c0 = configs[0]
    scorer = make_scorer(c0.scorer, S.shape[1], lr=c0.lr, epochs=c0.epochs, ridge=c0.ridge, trim=c0.trim,
                         seed=c0.seed, batch=B, signs=signs_of(c0, signs))
    payoffs = {c.payoff: make_payoff(c.payoff, dim=1, batch=B) for c in configs}
    eprocesses = [EProcess.of(c, B) for c in configs]
    log_thr = np.array([math.log(1.0 / a) for a in alphas])[:, None]
    stops = np.zeros((len(configs), len(alphas), B), dtype=int)
    sum_logw = np.zeros((len(configs), n))
    for t in range(n):
        xs, ys = sub_pairs(S[idx_x[:, t]], H[idx_y[:, t]], S.shape[1], B)
        sx, sy = [scorer.score(r) for r in xs], [scorer.score(r) for r in ys]
        u = {name: round_payoff(payoff, sx, sy) for name, payoff in payoffs.items()}
        for k, (config, eprocess) in enumerate(zip(configs, eprocesses)):
            eprocess.update(u[config.payoff])
            logw = eprocess.log_wealth
            stops[k][(stops[k] == 0) & (logw[None, :] >= log_thr)] = t + 1
            sum_logw[k, t] = logw.sum()
        for payoff in payoffs.values():
            for a, b in zip(sx, sy):
                payoff.update(a, b)
        for a, b in zip(xs, ys):
            scorer.update(a, b)
    return stops, sum_logw


def simulate(S: np.ndarray, H: np.ndarray, config: TestConfig | None = None, trials: int = 200,
             n_max: int | None = None, null: bool = False, seed: int = 0, signs=None,
             batch_size: int = 500, alphas: tuple[float, ...] | None = None) -> dict:
    """Monte Carlo estimate of the test's rejection rate (Sec. 5.1, App. D) on suspect rows
    ``S`` and held-out rows ``H``.

    null=False: suspect vs held-out streams (the rate is a TPR).
    null=True: two disjoint random halves of the held-out rows (an FPR).
    ``alphas``: levels evaluated from the same wealth paths (the stop for α is
    the first t with W_t ≥ 1/α); ``config.alpha`` is always one of them and
    gives the top-level keys. ``by_alpha[str(α)]`` holds each level's
    rejection_rate, mean_stop, std_stop, power_curve, stop_times (and tpr/fpr/fnr).
    """
    return simulate_many(S, H, [config or TestConfig()], trials, n_max, null, seed, signs, batch_size, alphas)[0]


def simulate_many(S: np.ndarray, H: np.ndarray, configs: list[TestConfig], trials: int = 200,
                  n_max: int | None = None, null: bool = False, seed: int = 0, signs=None,
                  batch_size: int = 500, alphas: tuple[float, ...] | None = None) -> list[dict]:
    """``simulate`` for several configurations on the same trial streams (one result each,
    in order). Configurations that share the scorer settings share one scorer pass, which
    is where the time goes; trial t's stream is the same for every configuration, so the
    stopping times can be compared trial by trial (paired)."""
    if trials < 1:
        raise ValueError("trials must be ≥ 1")
    if not configs:
        raise ValueError("no configuration to simulate")
    levels = [sorted({float(c.alpha), *(float(a) for a in (alphas or ()))}) for c in configs]
    if not all(0.0 < a < 1.0 for lv in levels for a in lv):
        raise ValueError(f"every alpha must lie in (0, 1); got {sorted(set().union(*levels))}")
    every = sorted(set().union(*levels))
    S, H = np.asarray(S, dtype=float), np.asarray(H, dtype=float)
    n = len(H) // 2 if null else min(len(S), len(H))
    if n_max is not None:
        n = min(n, int(n_max))
    if n < 1:
        raise ValueError("not enough rows for one pair")
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(configs):
        groups.setdefault(tuple(getattr(c, f) for f in SCORER_FIELDS), []).append(i)
    stops = np.zeros((len(configs), len(every), trials), dtype=int)
    sum_logw = np.zeros((len(configs), n))
    # One generator per trial, so a trial's stream does not depend on batch_size.
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(trials)]
    for start in range(0, trials, batch_size):
        chunk = rngs[start: start + batch_size]
        if null:
            perms = np.stack([r.permutation(len(H)) for r in chunk])
            X, ix, iy = H, perms[:, :n], perms[:, n: 2 * n]
        else:
            X = S
            ix = np.stack([r.permutation(len(S))[:n] for r in chunk])
            iy = np.stack([r.permutation(len(H))[:n] for r in chunk])
        for members in groups.values():
            st, lw = stream_stops(X, H, ix, iy, [configs[i] for i in members], every, signs)
            stops[members, :, start: start + len(chunk)] = st
            sum_logw[members] += lw
    results = []
    for k, config in enumerate(configs):
        lv = levels[k]
        by_alpha = {}
        for a in lv:
            by_alpha[str(a)] = _summary(stops[k, every.index(a)], n, null)
        res = {"null": null, "trials": int(trials), "pairs": int(n), "n_max": n_max, "alpha": config.alpha,
               "alphas": lv, "features": S.shape[1], "config": config.model_dump()}
        res.update(_summary(stops[k, every.index(float(config.alpha))], n, null))
        res["by_alpha"] = by_alpha
        res["mean_log_wealth"] = (sum_logw[k] / trials).tolist()
        results.append(res)
    return results


def pollution(S: np.ndarray, H: np.ndarray, config: TestConfig | None = None, ratios=(0.0, 0.2, 0.5, 0.7, 0.9),
              trials: int = 50, n_max: int | None = None, seed: int = 0, signs=None,
              batch_size: int = 64, pollutant: np.ndarray | None = None) -> dict:
    """D.6: replace a fraction ρ of the held-out stream by true members.

    The injected members are suspect rows that are not in the trial's suspect stream
    (suspect = members: what pollution costs in power), or rows of ``pollutant`` (e.g.
    members while the suspect rows are non-members: whether pollution breaks validity), in
    the columns of S and H.
    Returns per ratio the rejection rate, mean stop, censored mean pairs to decision and
    the mean log-wealth trajectory (the paper plots the latter).
    """
    config = config or TestConfig()
    S, H = np.asarray(S, dtype=float), np.asarray(H, dtype=float)
    P = None if pollutant is None else np.asarray(pollutant, dtype=float)
    rmax = max(ratios)
    n = min(len(H), len(S)) if P is not None else min(len(H), int(len(S) / (1.0 + rmax)))
    if n_max is not None:
        n = min(n, int(n_max))
    if n < 1 or (P is not None and len(P) < round(rmax * n)):
        raise ValueError("not enough member rows to pollute the held-out stream")
    out = {"pairs": int(n), "trials": int(trials), "alpha": config.alpha, "ratios": {}}
    for ratio in ratios:
        rng = np.random.default_rng(seed)  # same orders for every ratio
        k = int(round(ratio * n))
        stops, mean_logw = [], np.zeros(n)
        for b in _chunks(trials, batch_size):
            ps = np.stack([rng.permutation(len(S)) for _ in range(b)])
            X = S[ps[:, :n]]
            Y = H[np.stack([rng.permutation(len(H))[:n] for _ in range(b)])]
            for i in range(b):  # members at k random positions of the held-out stream
                pos = rng.choice(n, size=k, replace=False)
                Y[i, pos] = S[ps[i, n: n + k]] if P is None else P[rng.choice(len(P), size=k, replace=False)]
            res = run_batch(X, Y, config, signs)
            stops.append(res["stop_time"])
            mean_logw += res["log_wealth"].sum(axis=0)
        stops = np.concatenate(stops)
        summ = _summary(stops, n, null=False)
        summ["censored_pairs"] = float(np.where(stops > 0, stops, n).mean())
        summ["mean_log_wealth"] = (mean_logw / trials).tolist()
        out["ratios"][str(ratio)] = summ
    return out
