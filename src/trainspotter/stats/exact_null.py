"""Testing a keyed release by betting on its scoring units (docs/architecture.md, "Keyed releases").

A unit t (a distinct window (previous token, next token) of a model's text, a word type, or a
context's next-token distribution) gives an outcome x_t ∈ [0, 1] (green or not, the key's form
or not; a probability mass, gray-box) whose conditional mean under H0 "the model never saw the
release" is an exact number p_t given units < t, known from the key's randomness alone: the key
was drawn independently of the model, so whatever the model does, the key's choice agrees with it
at the rate the key's distribution says (γ for a window, 1/(m+1) for a word with m alternatives,
the hypergeometric (G − g)/(V − n) for a later window of a fixed-size list). The payoff

    u_t = w_t (x_t − p_t) / max(p_t, 1 − p_t) ∈ [−1, 1],

with a weight w_t ∈ [0, 1] that is a function of which unit t is (never of the key), then has
E[u_t | F_{t−1}] = 0 under H0 (the units a model's answers hold do not depend on the key, so
given them x_t still has mean p_t: a weight moves where the stake goes, not the null), and the wealth W_t = Π_{s≤t} (1 + λ_s u_s) with a stake
λ_s ∈ [0, λ_max] chosen from units < s (BADI Sec. 4, App. C: testing by betting;
``stats.strategies``) is a test martingale: E[W_t | F_{t−1}] = W_{t−1}(1 + λ_t E[u_t | F_{t−1}]) =
W_{t−1} and W_t > 0, so by Ville's inequality P(sup_t W_t ≥ 1/α) ≤ α (``unit_eprocess``).

Beside it, the same statistic under M keys drawn as the release's key was gives an exact p-value
that needs nothing but the key's randomness (``key_rank``): under H0 the statistics of the public
key and of the M random keys are exchangeable, so (1 + #{m: S_m ≥ S}) / (M + 1) is a p-value.
``fixed_n_pvalue`` is Sander et al.'s fixed-n test (NeurIPS 2024: a binomial tail on the green
count at a budget fixed in advance; exact Poisson-binomial when p_t differ), valid at that n only.
"""

from __future__ import annotations

import math

import numpy as np

from trainspotter.stats.eprocess import EProcess, EProcessConfig

__all__ = ["fixed_n_pvalue", "hypergeometric_null", "key_rank", "unit_eprocess", "unit_payoffs"]


def unit_payoffs(x, p, w=None) -> np.ndarray:
    """u_t = w_t (x_t − p_t) / max(p_t, 1 − p_t) (module docstring); x in [0, 1], p in (0, 1),
    key-blind weights w in [0, 1] (default 1)."""
    x, p = np.asarray(x, dtype=float), np.asarray(p, dtype=float)
    if np.any((p <= 0) | (p >= 1)) or np.any((x < 0) | (x > 1)) or not np.all(np.isfinite(x)):
        raise ValueError("outcomes must lie in [0, 1] and null probabilities in (0, 1)")
    u = (x - p) / np.maximum(p, 1.0 - p)
    if w is None:
        return u
    w = np.asarray(w, dtype=float)
    if np.any((w < 0) | (w > 1)) or not np.all(np.isfinite(w)):
        raise ValueError("unit weights must lie in [0, 1]")
    return w * u


def hypergeometric_null(prev, green, size: int, vocab_size: int, counts: dict | None = None) -> np.ndarray:
    """The exact null probability of each distinct window of a fixed-size green list (``size`` of
    ``vocab_size`` entries, drawn uniformly for each previous token by a random key), in scoring
    order: a window whose previous token a had n earlier distinct windows, g of them green, is
    green with probability (size − g) / (vocab_size − n) given them (drawing without replacement).
    ``counts``: {a: [n, g]} from earlier runs (a ledger), updated in place with these windows."""
    counts = {} if counts is None else counts
    out = np.empty(len(prev))
    for i, (a, x) in enumerate(zip(np.asarray(prev).tolist(), np.asarray(green).tolist())):
        n, g = counts.get(a, (0, 0))
        if n >= vocab_size:
            raise ValueError(f"more distinct windows after token {a} than the vocabulary holds")
        out[i] = (size - g) / (vocab_size - n)
        counts[a] = [n + 1, g + int(x)]
    return out


def unit_eprocess(x, p, test: EProcessConfig | None = None, state: dict | None = None, w=None) -> EProcess:
    """The e-process over units (module docstring): outcomes ``x`` and null means ``p``, shape
    (n,) for one key or (M, n) for M keys at once (one stream each), weights ``w`` (n,) the same
    for every key, bet with the settings ``test`` (α, strategy, λ_max; default ``EProcessConfig()``);
    ``state``: an e-process stored by an earlier run (``EProcess.to_dict``), which the wealth
    multiplies onto."""
    u = unit_payoffs(x, p, w)
    batch = None if u.ndim == 1 else u.shape[0]
    proc = EProcess.from_dict(state) if state else EProcess.of(test or EProcessConfig(), batch=batch)
    for t in range(u.shape[-1]):
        proc.update(u[..., t])
    return proc


def key_rank(statistic: float, null: np.ndarray) -> dict:
    """The public key's statistic ranked among those of M random keys: p = (1 + #{S_m ≥ S}) / (M + 1),
    exact under H0 (the M + 1 keys are exchangeable draws, independent of the model)."""
    null = np.asarray(null, dtype=float)
    ge = int(np.sum(null >= statistic))
    return {"statistic": float(statistic), "keys": int(null.size), "at_least": ge, "p_value": (1 + ge) / (null.size + 1)}


def fixed_n_pvalue(x, p) -> float:
    """P(Σ X_t ≥ Σ x_t) for independent X_t ~ Bernoulli(p_t), binary x (Sander et al.'s test at a
    budget fixed in advance; the binomial tail when every p_t is equal), by the exact recursion over
    the count distribution."""
    x, p = np.asarray(x, dtype=float), np.asarray(p, dtype=float)
    if not np.all((x == 0) | (x == 1)):
        raise ValueError("the fixed-n test counts binary outcomes")
    k = int(x.sum())
    if len(p) and np.all(p == p[0]):
        from scipy.stats import binom

        return float(binom.sf(k - 1, len(p), p[0]))
    dist = np.zeros(len(p) + 1)
    dist[0] = 1.0
    for i, q in enumerate(p, start=1):
        dist[1:i + 1] = dist[1:i + 1] * (1 - q) + dist[:i] * q
        dist[0] *= 1 - q
    return float(min(1.0, math.fsum(dist[k:])))
