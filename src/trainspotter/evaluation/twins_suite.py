"""The twins suite (issue 35 item 5, ``trainspotter benchmark --suite twins``): on a twins testbed
(k ≥ 2 versions of every passage, one drawn public; members trained on theirs), what the paired
design buys against today's unpaired audit of the same members.

Input: each version's own lean features (they do not depend on the twin), ``V[split]`` of shape
(N, k, p) in the twins folder's passage and variant order, the held-out passages' (their public
versions) ``H`` (N_h, p), and the testbed's draws (``public1`` members, ``public0`` non-members).
Every row below is oriented by ``features.orientation.directions`` (> 0: member-like) and runs on
the same seeded trials:

- ``paired_auroc``: per passage, d = the public version's value − the mean of its k − 1 private
  versions' values; AUROC (``sklearn.metrics.roc_auc_score``) and TPR at 1% FPR of d, members
  against non-members (their testbed draw), beside the unpaired per-sample AUROC of the public
  versions' own values;
- ``twins_rows``: the twins e-process (the ``twins`` test preset: fixed scorer) with every private
  version (``all``: rounds of k − 1 sub-pairs, ``stream_stops``) and one drawn per round (``one``),
  members over T seeded orders (TPR, censored pairs to decision, 80%/95% quantiles), non-members
  under H0 with a fresh uniform draw of the public version per trial (rate, one-sided binomial p
  against α): every draw the design could have made is equally likely when nothing was trained on;
- ``stamp_ttests``: STAMP's fixed-n paired t-test (public against the mean of the privates);
- ``unpaired``: today's audit of the members' public versions against the held-out passages, with
  its one-split control and the pooled control (non-members ∪ held-out split anew per trial).

``studies.twins_kmean`` (the committed k > 2 results of ``benchmarks/bench_twins.py``) uses the same helpers.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, Field
from scipy.stats import binomtest

from trainspotter.presets import TEST_PRESETS, check_testbed

LEAN = ["gray_ppl", "gray_zlib_ratio", "gray_min_k_20", "gray_min_kpp_20", "gray_ref_ratio", "gray_ref_diff",
        "gray_ez"]
CALIBRATED = ["gray_ref_ratio", "gray_ref_diff", "gray_ez"]
SUBSETS = {"lean": LEAN, "calibrated": CALIBRATED}  # the e-process rows' feature sets (columns of LEAN)
MODES = {"all": "every private version (k − 1 sub-pairs a round)", "one": "one private version drawn per round"}
# STAMP's t-test (Rastogi et al. 2025) on the log-likelihood and on the reference-calibrated gray_ref_diff
STAMP = {"log perplexity": ("gray_ppl", -1), "gray_ref_diff": ("gray_ref_diff", -1)}
STAMP_NS = (25, 50, 100, 150, 200, 300, 400, 500, 600, 700, 800, 1000, 1200, 1500, 1800)
SUITE_NS = (25, 50, 100, 200)  # the suite's fixed n of STAMP's t-test (beside n = all)
__all__ = ["TwinsSuiteConfig", "check_twins_testbed", "run_suite", "paired_auroc", "twins_rows", "stamp_ttests",
           "unpaired", "own_values", "sub_pair_indices", "private_variants", "signal_noise", "summary", "render_markdown"]


class TwinsSuiteConfig(BaseModel):
    """One run of the twins suite."""

    testbed: str = "tiny-pretrain-twins"
    trials: int = Field(200, ge=1)  # Monte Carlo trials of every e-process row (members and H0)
    alpha: float = Field(0.05, gt=0, lt=1)
    seed: int = 0
    limit: int | None = Field(None, ge=4)  # at most this many passages per split
    out: str | None = None



def check_twins_testbed(name: str) -> str:
    """``name`` if it names a built-in testbed with twins (k ≥ 2), else one InputError naming it."""
    from trainspotter.errors import InputError
    from trainspotter.presets import TESTBEDS

    check_testbed(name)
    if TESTBEDS[name].recipe.get("twins", 0) < 2:
        twins = ", ".join(n for n, t in TESTBEDS.items() if t.recipe.get("twins", 0) >= 2)
        raise InputError(f"--testbed {name}: the twins suite needs a testbed with twins (k ≥ 2 versions of every "
                         f"passage); {name} has none (twins testbeds: {twins})")
    return name


def summary(stops: np.ndarray, n: int, alpha: float, h0: bool) -> dict:
    """A row from first-crossing times (0: never): the rate; under H0 the one-sided binomial p of
    "rate > α"; else the censored pairs to decision (never: n), mean, median, 80%/95% quantiles."""
    hits = int((stops > 0).sum())
    out = {"trials": int(len(stops)), "pairs": int(n), "rejected": hits, "rate": hits / len(stops)}
    if h0:
        out["p_above_alpha"] = float(binomtest(hits, len(stops), alpha, alternative="greater").pvalue)
    else:
        censored = np.where(stops > 0, stops, n)
        out |= {"mean_pairs_to_decision": float(censored.mean()),
                "median_pairs_to_decision": float(np.median(censored)),
                **{f"pairs_for_{q}pct": int(np.sort(censored)[math.ceil(q / 100 * len(censored)) - 1])
                   if hits >= q / 100 * len(stops) else None for q in (80, 95)}}
    return out


def own_values(R: np.ndarray, k: int, p: int) -> np.ndarray:
    """(N, k, p): each variant's own value of the first p (lean) columns of pair-feature rows
    f(x_a | x_b) (N·k·k rows, ``studies.twins_kmean.pair_features``), which do not depend on the twin
    (read from the pair (a, a + 1 mod k))."""
    a = np.arange(k)
    return R.reshape(-1, k, k, R.shape[1])[:, a, (a + 1) % k, :p]


def pair_rows(V: np.ndarray) -> np.ndarray:
    """The pair-feature rows (N·k·k, p) of own values (N, k, p): row (n, a, b) is V[n, a]."""
    N, k, p = V.shape
    return np.repeat(V[:, :, None, :], k, axis=2).reshape(N * k * k, p)


def sub_pair_indices(public: np.ndarray, order: np.ndarray, others: np.ndarray, k: int):
    """Index arrays (T, n, m) into pair-feature rows: round t of trial b is passage
    order[b, t]'s public variant (``public`` (T, N)) against each variant in others[b, t]:
    f(pub | j) against f(j | pub)."""
    pub = np.take_along_axis(public, order, axis=1)[..., None]
    base = order[..., None] * k * k
    return base + pub * k + others, base + others * k + pub


def private_variants(public: np.ndarray, order: np.ndarray, k: int, rng) -> dict[str, np.ndarray]:
    """Per trial and round, the private variants bet against: ``one`` drawn uniformly among the
    k − 1 (T, n, 1), ``mean`` all of them (T, n, k − 1)."""
    pub = np.take_along_axis(public, order, axis=1)
    table = np.stack([np.arange(k)[np.arange(k) != i] for i in range(k)])  # variant i's privates
    every = table[pub]
    one = np.take_along_axis(every, rng.integers(0, k - 1, size=pub.shape)[..., None], axis=2)
    return {"one": one, "mean": every}


def paired_differences(V: np.ndarray, public: np.ndarray) -> np.ndarray:
    """(N, p): each passage's public version's value (``public``: (N,) variant indices) minus
    the mean of its k − 1 private versions' values (V: (N, k, p))."""
    k = V.shape[1]
    P = V[np.arange(len(V)), public]
    return P - (V.sum(axis=1) - P) / (k - 1)


def paired_auroc(V1: np.ndarray, V0: np.ndarray, public1: np.ndarray, public0: np.ndarray,
                 columns: list[str]) -> dict[str, dict]:
    """Per column, members (1) against non-members (0), oriented (> 0 member-like): ``paired``,
    the AUROC of d = public − mean of privates; ``tpr_at_1pct_fpr`` of d; ``unpaired``, the
    AUROC of the public versions' own values (a per-sample attack without twins)."""
    from sklearn.metrics import roc_auc_score

    from trainspotter.evaluation.metrics import tpr_at_fpr
    from trainspotter.features.orientation import directions

    sign = np.asarray(directions(columns), dtype=float)
    d = np.concatenate([paired_differences(V1, public1), paired_differences(V0, public0)]) * sign
    own = np.concatenate([V1[np.arange(len(V1)), public1], V0[np.arange(len(V0)), public0]]) * sign
    y = np.r_[np.ones(len(V1)), np.zeros(len(V0))]
    return {c: {"paired": float(roc_auc_score(y, d[:, j])), "tpr_at_1pct_fpr": tpr_at_fpr(y, d[:, j], 0.01),
                "unpaired": float(roc_auc_score(y, own[:, j]))} for j, c in enumerate(columns)}


def h0_draws(rng, trials: int, n: int, k: int) -> np.ndarray:
    """(T, n): a fresh uniform draw of the public version among the k per passage and trial (H0:
    no version was trained on, so every draw the design could have made is equally likely)."""
    return rng.integers(0, k, size=(trials, n))


def twins_rows(R1: np.ndarray, R0: np.ndarray, trials1: tuple, trials0: tuple, k: int, columns: list[str],
               subsets: dict[str, list[str]], alpha: float) -> tuple[dict, dict]:
    """The twins e-process (the ``twins`` preset) per subset and mode on pair-feature rows R1
    (members) and R0 (non-members); ``trials*`` = (public (T, N), order (T, n), private_variants).
    Rows keyed "members, MODE: SUBSET" / "nonmembers, MODE: SUBSET" (MODE: ``mean`` is --twins-private
    all); returns them and the stop times of every row."""
    from trainspotter.features.orientation import directions
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops

    config = TestConfig(**(TEST_PRESETS["twins"] | {"alpha": alpha}))
    rows, stops = {}, {}
    for name, names in subsets.items():
        cols, signs = [columns.index(c) for c in names], directions(names)
        for mode in ("one", "mean"):
            for split, R, (pub, order, priv), h0 in (("members", R1, trials1, False),
                                                     ("nonmembers", R0, trials0, True)):
                ix, iy = sub_pair_indices(pub, order, priv[mode], k)
                st = stream_stops(R[:, cols], R[:, cols], ix, iy, [config], [alpha], signs)[0][0, 0]
                stops[f"{split}, {mode}: {name}"] = st
                rows[f"{split}, {mode}: {name}"] = summary(st, order.shape[1], alpha, h0)
    return rows, stops


def stamp_ttests(V: dict, public1, order1, public0, order0, columns: list[str], tests: dict,
                 ns=STAMP_NS, alpha: float = 0.05) -> dict:
    """STAMP's fixed-n paired t-test with k − 1 private versions: per passage, the public
    version's value against the mean of its private versions' (one-sided, at α), on the first
    n passages of each members' trial order (power; the e-process rows' orders) and of each fresh
    H0 draw (rate), for n in ``ns``; n = all: the one test on every member. ``V``: per split, own
    values (N, k, p) of ``columns``, or the values f(x_a | x_b) of every ordered pair (N, k, k, p)
    where a column depends on the twin (the changed positions): then a passage's difference is
    the mean over its private j of f(pub | j) − f(j | pub), which for a column that does not
    depend on the twin is the public value minus the privates' mean."""
    from scipy.stats import ttest_1samp

    out = {}
    for name, (column, sign) in tests.items():
        j = columns.index(column)
        diffs = []
        for split, pub, order in (("member", public1, order1), ("nonmember", public0, order0)):
            v = V[split][..., j]  # (N, k) or (N, k, k)
            k, rows = v.shape[1], np.arange(len(v))
            if column == "gray_ppl":  # the log-likelihood: −log perplexity
                v, sign = -np.log(v), 1
            if v.ndim == 3:  # (T, N): per trial, the mean over the private j (the diagonal is unused)
                d = sum(np.where(pub == b, 0.0, v[rows, pub, b] - v[rows, b, pub]) for b in range(k)) / (k - 1)
            else:
                P = v[rows, pub]  # (T, N): the public version per trial
                d = P - (v.sum(axis=1) - P) / (k - 1)
            diffs.append(np.take_along_axis(sign * d, order, axis=1))  # > 0: the public version fits better
        d1, d0 = diffs
        row = {"all": {"n": int(d1.shape[1]), "p": float(ttest_1samp(d1[0], 0.0, alternative="greater").pvalue)}}
        # (members: the testbed's one draw, so every trial's d1 is the same values reordered)
        for n in (n for n in ns if n <= min(d1.shape[1], d0.shape[1])):
            p1 = ttest_1samp(d1[:, :n], 0.0, axis=1, alternative="greater").pvalue
            p0 = ttest_1samp(d0[:, :n], 0.0, axis=1, alternative="greater").pvalue
            row[str(n)] = {"power": float((p1 <= alpha).mean()), "h0": float((p0 <= alpha).mean())}
        out[name] = row
    return out


def unpaired(V: dict, H: np.ndarray, public1: np.ndarray, public0: np.ndarray, lean: list[str], rng, T: int,
             alpha: float = 0.05) -> tuple[dict, dict]:
    """Today's unpaired audit of the same members (their public versions, lean) against the
    testbed's held-out passages (their public versions: the same rewriter on both sides), each
    side in its own random order, with the default's learned scorer and with fixed directions.
    Its controls (H0): the non-members' public versions against the held-out passages (one split,
    reordered per trial: the benchmark's usual FPR) and the pooled control, non-members ∪
    held-out split afresh in every trial (issue 35 item 6). ``V``: own values (N, k, p) per split.
    Returns the rows and their stop times."""
    from trainspotter.features.orientation import directions
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.stats.simulation import stream_stops

    S = V["member"][np.arange(len(public1)), public1]
    N = V["nonmember"][np.arange(len(public0)), public0]
    n = min(len(S), len(H))
    pool = np.concatenate([N, H])
    perm = np.stack([rng.permutation(len(pool)) for _ in range(T)])
    streams = {"members against held-out": (S, H, False, [rng.permutation(len(S))[:n] for _ in range(T)],
                                            [rng.permutation(len(H))[:n] for _ in range(T)]),
               "non-members against held-out (H0, one split)": (N, H, True,
                                                                [rng.permutation(len(N))[:n] for _ in range(T)],
                                                                [rng.permutation(len(H))[:n] for _ in range(T)]),
               "pooled control (H0, a fresh split per trial)": (pool, pool, True, perm[:, :n], perm[:, n:2 * n])}
    out, stops = {}, {}
    for name, (X, Y, h0, ix, iy) in streams.items():
        for scorer in ("online", "fixed"):
            key = f"unpaired, {name}: lean ({scorer})"
            stops[key] = stream_stops(X, Y, np.asarray(ix), np.asarray(iy), [TestConfig(alpha=alpha, scorer=scorer)],
                                      [alpha], directions(lean))[0][0, 0]
            out[key] = summary(stops[key], n, alpha, h0)
    return out, stops


def signal_noise(V1: np.ndarray, H: np.ndarray, public1: np.ndarray, lean: list[str]) -> dict:
    """Why pairs are many or few, per lean column (oriented: > 0 is member-like): the members'
    mean difference μ, its standard deviation σ and δ = μ/σ, for the twins round (public version
    minus the mean of its k − 1 private versions) and the unpaired pair (a member's public version
    minus an independent held-out passage: σ² = Var S + Var H). A one-sided z-test at α = 0.05 with
    the direction and σ known, the most powerful test of a mean shift, needs n = ((z_0.95 +
    z_0.95)/δ)² pairs for 95% power. ``oracle``: the same for the best linear combination of the
    lean columns, δ² = μᵀΣ⁻¹μ fitted on these very members (optimistic): no test that scores a
    pair linearly in these features decides sooner. ``V1``: the members' own values (N, k, p)."""
    from scipy.stats import norm

    from trainspotter.features.orientation import directions

    z = 2 * norm.ppf(0.95)
    sign = np.asarray(directions(lean), dtype=float)
    V, Ho = V1 * sign, H * sign
    P = V[np.arange(len(public1)), public1]
    D = paired_differences(V, public1)  # the twins round, per member
    designs = {"twins": (D.mean(axis=0), np.cov(D.T)),
               "unpaired": (P.mean(axis=0) - Ho.mean(axis=0), np.cov(P.T) + np.cov(Ho.T))}

    def row(mu, var):
        delta = mu / math.sqrt(var)
        return {"mu": float(mu), "sigma": math.sqrt(var), "delta": float(delta), "n95": float((z / delta) ** 2)}

    out = {c: {d: row(mu[j], cov[j, j]) for d, (mu, cov) in designs.items()} for j, c in enumerate(lean)}
    out["oracle"] = {}
    for d, (mu, cov) in designs.items():
        d2 = float(mu @ np.linalg.solve(cov, mu))
        out["oracle"][d] = {"delta": math.sqrt(d2), "n95": z * z / d2}
    return out


def decided_curves(stops: dict[str, np.ndarray], n: dict[str, int]) -> dict[str, list[float]]:
    """Per row, the fraction of its trials decided by t pairs (t = 1..n): ``simulation.power_curve``."""
    from trainspotter.stats.simulation import power_curve

    return {label: power_curve(s, n[label]).tolist() for label, s in stops.items()}


def run_suite(V1: np.ndarray, V0: np.ndarray, H: np.ndarray, public1: np.ndarray, public0: np.ndarray,
              columns: list[str], trials: int, alpha: float = 0.05, seed: int = 0) -> dict:
    """Every row of the suite (module docstring) on own values V1 (members), V0 (non-members)
    (N, k, p) and H (held-out, (N_h, p)) of ``columns`` (LEAN), the testbed's draws ``public1``,
    ``public0``; the same seeded trials for every row. Returns {"auroc", "twins", "stamp",
    "unpaired", "signal_noise", "curves"} (curves: members' fraction decided by t pairs)."""
    if V1.shape[1] < 2 or V1.shape[1] != V0.shape[1]:
        raise ValueError(f"twins need k ≥ 2 versions on both sides (members {V1.shape[1]}, non-members "
                         f"{V0.shape[1]})")
    k, T, n1, n0 = V1.shape[1], trials, len(V1), len(V0)
    rng = np.random.default_rng(seed)
    pub1 = np.broadcast_to(public1, (T, n1))
    order1 = np.stack([rng.permutation(n1) for _ in range(T)])
    priv1 = private_variants(pub1, order1, k, rng)
    pub0 = h0_draws(rng, T, n0, k)
    order0 = np.stack([rng.permutation(n0) for _ in range(T)])
    priv0 = private_variants(pub0, order0, k, rng)
    twins, stops = twins_rows(pair_rows(V1), pair_rows(V0), (pub1, order1, priv1), (pub0, order0, priv0), k,
                              columns, SUBSETS, alpha)
    V = {"member": V1, "nonmember": V0}
    flat, unpaired_stops = unpaired(V, H, public1, public0, LEAN, rng, T, alpha)
    stamp = stamp_ttests(V, pub1, order1, pub0, order0, columns, STAMP, SUITE_NS, alpha)
    shown = {f"twins {'all' if m == 'mean' else 'one'}, {s}": stops[f"members, {m}: {s}"]
             for s in SUBSETS for m in ("mean", "one")}
    shown |= {f"unpaired ({sc}), lean": unpaired_stops[f"unpaired, members against held-out: lean ({sc})"]
              for sc in ("online", "fixed")}
    lengths = {label: (n1 if label.startswith("twins") else min(n1, len(H))) for label in shown}
    return {"k": k, "members": n1, "nonmembers": n0, "heldout": len(H), "trials": T, "alpha": alpha,
            "auroc": paired_auroc(V1, V0, public1, public0, columns), "twins": twins, "stamp": stamp,
            "unpaired": flat, "signal_noise": signal_noise(V1, H, public1, columns),
            "curves": decided_curves(shown, lengths)}


def _rate(r: dict) -> str:
    return f"{r['rate']:.3f} ({r['rejected']}/{r['trials']})"


def render_markdown(res: dict, title: str, header: str) -> str:
    """The suite's Markdown report: the per-sample AUROC table, the e-process rows, STAMP and
    the unpaired audit."""
    k = res["k"]
    lines = [f"# {title}", "", header, "",
             f"{res['members']} members and {res['nonmembers']} non-members, k = {k} versions each; "
             f"{res['heldout']} held-out passages; {res['trials']} trials, α = {res['alpha']:g}.", "",
             "## Per-sample AUROC, members against non-members", "",
             "Paired: d = the public version's value − "
             f"{'its private version' if k == 2 else f'the mean of its {k - 1} private versions'}' (oriented); "
             "unpaired: the public version's own value.", "",
             "| feature | paired AUROC | paired TPR@1%FPR | unpaired AUROC |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {a['paired']:.3f} | {a['tpr_at_1pct_fpr']:.3f} | {a['unpaired']:.3f} |"
              for c, a in res["auroc"].items()]
    lines += ["", "## Dataset inference: the twins e-process (twins preset, fixed scorer)", "",
              "| features | private versions | members: \"trained on\" | mean pairs (censored) | 80% by | 95% by | "
              "H0, fresh draw per trial | p (rate > α) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in SUBSETS:
        for mode, label in (("mean", "all"), ("one", "one")):
            h1, h0 = res["twins"][f"members, {mode}: {name}"], res["twins"][f"nonmembers, {mode}: {name}"]
            lines.append(f"| {name} | {label} | {_rate(h1)} | {h1['mean_pairs_to_decision']:.1f} | "
                         f"{h1['pairs_for_80pct'] or '–'} | {h1['pairs_for_95pct'] or '–'} | {_rate(h0)} | "
                         f"{h0['p_above_alpha']:.3g} |")
    lines += ["", "## Today's unpaired audit of the same members (lean)", "",
              "| stream | pairs | \"trained on\" | mean pairs (censored) | 95% by | p (rate > α) |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, r in res["unpaired"].items():
        if "p_above_alpha" in r:  # a control (H0)
            cells = f" | | {r['p_above_alpha']:.3g} |"
        else:
            cells = f"{r['mean_pairs_to_decision']:.1f} | {r['pairs_for_95pct'] or '–'} | |"
        lines.append(f"| {name.removeprefix('unpaired, ')} | {r['pairs']} | {_rate(r)} | {cells}")
    lines += ["", "## STAMP's paired t-test (fixed n): power (H0 rate)", ""]
    for name, row in res["stamp"].items():
        cells = [f"n = {n}: {v['power']:.2f} ({v['h0']:.3f})" for n, v in row.items() if n != "all"]
        lines.append(f"- {name}: " + "; ".join(cells + [f"n = all ({row['all']['n']}): p = {row['all']['p']:.2g}"]))
    return "\n".join(lines) + "\n"
