"""Evidence against the number K of reference models on a pre-training testbed (issue 19,
``benchmarks/bench_references.py``).

Per sample (members against non-members): AUROC and TPR at 1% FPR with stratified bootstrap 95%
CIs of the model-based methods (TDDBench App. A.1.3, ``features.model_based``: Model-loss,
Model-calibration, LiRA online and offline (Carlini et al. 2022, Eq. 4), Model-FPR, RMIA
(Zarifzadeh et al. 2024)) on a bank of K OUT + K IN reference models, and of the audit's reference
features (``features.references``), for each K.

Dataset inference: the default audit (``TestConfig()``) on members against held-out (TPR, censored
pairs to decision) and non-members against held-out (negative-control FPR, one-sided binomial p of
FPR ≤ α), every K on the same trial streams, with the paired bootstrap CI of the saving against
today's single-reference audit. Two reference lists: ``testbed+OUT`` (the testbed's own reference
first, then out-0 … out-(K-2)) and ``OUT only`` (out-0 … out-(K-1)); two feature sets: the
benchmark's DI gray set and ``lean`` (the audit's default).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from harness.memo import MemoBackend
from trainspotter.features import model_based as mb
from trainspotter.features.references import refs_diff, refs_lira, refs_rmia, refs_token_lira

__all__ = ["HAYES", "refs_columns", "di_table", "bank_inputs", "per_sample_rows", "dataset_inference",
           "render_references", "plot_references"]

SPLITS = ("member", "nonmember", "heldout")
REFS = {"diff": refs_diff, "lira": refs_lira, "token_lira": refs_token_lira, "rmia": refs_rmia}
# Hayes et al. 2025 (GPT-2 ~140M, LiRA): per-sample AUROC with 1 and with 256 reference models,
# the two end points quoted in issue 19 (their curve between them is not reproduced here).
HAYES = {1: 0.54, 256: 0.68}


def _per_token(model, texts: list[str]) -> list[np.ndarray]:
    return [s.logprobs for s in model.score(texts)]


def bank_inputs(testbed: str, ks: list[int]) -> dict:
    """Everything the rows read, each text scored once per model (``MemoBackend``): the splits'
    passages, the DI gray set with the testbed's reference and with out-0 (and their ``lean``
    columns), every model's per-token log-probabilities and mean log-likelihoods, the IN models'
    training passages. The bank of max(ks) OUT and IN models is built if missing."""
    from trainspotter.backends import load_backend
    from trainspotter.data import load_passages
    from trainspotter.testbeds.reference_models import build_references, load_reference_manifest
    from trainspotter.testbeds.build import PRESETS, split_path
    from trainspotter.features.extract import extract, feature_columns
    from trainspotter.features.features import FEATURE_SETS, FeatureConfig

    t0, k = time.perf_counter(), max(ks)
    build_references(PRESETS[testbed], k)
    manifest = load_reference_manifest(testbed)["models"]
    passages = {s: load_passages(split_path(testbed, s)) for s in SPLITS}
    texts = [p["text"] for s in SPLITS for p in passages[s]]
    ids = [p["id"] for s in SPLITS for p in passages[s]]
    model = lambda role: MemoBackend(load_backend(f"testbed:{testbed}{role}"))  # noqa: E731
    target, reference = model(""), model("/reference")
    outs, ins = [model(f"/out-{i}") for i in range(k)], [model(f"/in-{i}") for i in range(k)]
    # one forward pass per text variant and model: the DI gray set (with the testbed's reference)
    # and lean (with out-0 as "the" reference for the OUT-only lists)
    rows, full = [{"id": i, "text": t} for i, t in zip(ids, texts)], FeatureConfig(sequence=False)
    sets = {("testbed+OUT", "gray DI set"): extract(rows, target, reference, "gray", full),
            ("OUT only", "gray DI set"): extract(rows, target, outs[0], "gray", full)}
    lean = ["id"] + feature_columns(FEATURE_SETS["lean"], "gray", 1)  # the same values, fewer columns
    for refs_name in ("testbed+OUT", "OUT only"):
        sets[(refs_name, "lean")] = sets[(refs_name, "gray DI set")][lean]
    t_lp = _per_token(target, texts)
    lp = {"reference": _per_token(reference, texts)}
    lp |= {f"out-{i}": _per_token(m, texts) for i, m in enumerate(outs)}
    lp |= {f"in-{i}": _per_token(m, texts) for i, m in enumerate(ins)}
    print(f"scored {len(texts)} passages under {2 + 2 * k} models in {time.perf_counter() - t0:.0f} s", flush=True)
    return {"ids": ids, "split": np.array([s for s in SPLITS for _ in passages[s]]), "sets": sets, "t_lp": t_lp,
            "lp": lp, "mean_ll": {name: np.array([a.mean() for a in v]) for name, v in lp.items()},
            "t_ll": np.array([a.mean() for a in t_lp]), "manifest": manifest,
            "in_ids": [set(manifest[f"in-{i}"]["candidates_in"]) for i in range(k)]}


def _bank_methods(b: dict, k: int) -> dict:
    """The model-based methods' scores on the bank out-0..K-1 (OUT) and in-0..K-1 (IN)."""
    names = [f"out-{i}" for i in range(k)] + [f"in-{i}" for i in range(k)]
    refs = np.stack([b["mean_ll"][n] for n in names], axis=1)
    in_mask = np.zeros_like(refs, dtype=bool)
    for j in range(k):
        in_mask[:, k + j] = [i in b["in_ids"][j] for i in b["ids"]]
    out_only, t_ll, pop = refs[:, :k], b["t_ll"], b["split"] == "heldout"
    no_in = np.zeros_like(out_only, dtype=bool)
    return {"Model-loss (K OUT + K IN)": mb.model_loss(t_ll, refs),
            "Model-calibration (K OUT)": mb.model_calibration(t_ll, out_only, no_in),
            "LiRA online (K OUT + K IN)": mb.lira_online(t_ll, refs, in_mask),
            "LiRA offline (K OUT)": mb.lira_offline(t_ll, out_only, no_in),
            "Model-FPR (K OUT)": mb.model_fpr(t_ll, out_only, no_in),
            "RMIA offline (K OUT)": mb.rmia(t_ll, out_only, no_in, t_ll[pop], out_only[pop]),
            "RMIA online (K OUT + K IN)": mb.rmia(t_ll, refs, in_mask, t_ll[pop], refs[pop])}


def per_sample_rows(b: dict, k: int, seed: int) -> tuple[list[dict], list[dict]]:
    """At K = ``k``: the per-sample rows (the bank's methods, the refs_lira feature and the
    cross-fitted scoring model per reference list) and the DI tables (members and non-members
    against held-out) per reference list and feature set."""
    from trainspotter.evaluation.mia import cross_fit

    split = b["split"]
    cand = np.isin(split, ["member", "nonmember"])
    labels = (split[cand] == "member").astype(int)
    rows = [{"K": k, "method": label, **metrics(labels, scores[cand], seed)}
            for label, scores in _bank_methods(b, k).items()]
    di_rows = []
    for refs_name, first in (("testbed+OUT", ["reference"]), ("OUT only", [])):
        chosen = (first + [f"out-{i}" for i in range(k)])[:k]
        feats = b["sets"][(refs_name, "gray DI set")]
        if k >= 2:
            feats = pd.concat([feats, refs_columns(b["t_lp"], [b["lp"][n] for n in chosen])], axis=1)
            rows.append({"K": k, "method": f"refs_lira feature ({refs_name})",
                         **metrics(labels, feats["gray_refs_lira"].to_numpy()[cand], seed)})
        X = feats.drop(columns=["id"]).to_numpy(dtype=float)
        rows.append({"K": k, "method": f"scoring model, gray DI set ({refs_name})",
                     **metrics(labels, cross_fit(X[cand], labels, 5, seed), seed)})
        for set_name in ("gray DI set", "lean"):
            cols = [c for c in b["sets"][(refs_name, set_name)].columns if c != "id"]
            cols += [c for c in feats.columns if c.startswith("gray_refs_")]
            di_rows.append({"K": k, "references": refs_name, "features": set_name,
                            "pos": di_table(feats[cols], split, "member"),
                            "neg": di_table(feats[cols], split, "nonmember")})
    return rows, di_rows


def refl_rows(b: dict, seed: int) -> list[dict]:
    """The single-reference RefL baseline (target minus reference mean log-likelihood), K = 1."""
    cand = np.isin(b["split"], ["member", "nonmember"])
    labels = (b["split"][cand] == "member").astype(int)
    return [{"K": 1, "method": f"RefL vs {name}", **metrics(labels, (b["t_ll"] - b["mean_ll"][name])[cand], seed)}
            for name in ("reference", "out-0")]


def dataset_inference(di_rows: list[dict], trials: int, null_trials: int, seed: int) -> list[dict]:
    """The default audit on every DI table, the same trial streams for every K, at α = 0.05 and
    0.01, with the paired saving against today's audit (K = 1, the testbed's reference)."""
    from scipy.stats import binomtest

    from trainspotter.auditing.tables import simulate_many
    from trainspotter.evaluation.benchmark_di import censored_stops, paired_saving
    from trainspotter.stats.sequential import TestConfig

    test, di = TestConfig(), []
    for row in di_rows:
        pos, = simulate_many(row["pos"], [test], trials, None, False, seed, alphas=(0.05, 0.01))
        neg, = simulate_many(row["neg"], [test], null_trials, None, False, seed, alphas=(0.05, 0.01))
        for alpha in (0.05, 0.01):
            p, q = pos["by_alpha"][str(alpha)], neg["by_alpha"][str(alpha)]
            k_rej = int(round(q["rejection_rate"] * neg["trials"]))
            di.append({"K": row["K"], "references": row["references"], "features": row["features"],
                       "alpha": alpha, "tpr": p["rejection_rate"], "fpr": q["rejection_rate"],
                       "fpr_binom_p": float(binomtest(k_rej, neg["trials"], alpha, alternative="greater").pvalue),
                       "mean_pairs": float(censored_stops(p["stop_times"], pos["pairs"]).mean()),
                       "pairs": pos["pairs"], "stop_times": p["stop_times"]})
        print(f"DI K = {row['K']} {row['references']} {row['features']}: {di[-2]['mean_pairs']:.1f} pairs", flush=True)
    for r in di:  # paired saving against today's audit: K = 1 with the testbed's reference
        base = next(b for b in di if b["K"] == 1 and b["references"] == "testbed+OUT"
                    and b["features"] == r["features"] and b["alpha"] == r["alpha"])
        r.update(paired_saving(r["stop_times"], base["stop_times"], r["pairs"], seed=seed))
    for r in di:
        r.pop("stop_times")
    return di


def refs_columns(target_lp, refs_lp) -> pd.DataFrame:
    """The *_refs_* gray features (the functions extract uses) for K = len(refs_lp) ≥ 2."""
    return pd.DataFrame({f"gray_refs_{n}": [fn(t, [r[i] for r in refs_lp]) for i, t in enumerate(target_lp)]
                         for n, fn in REFS.items()})


def di_table(features: pd.DataFrame, split: np.ndarray, suspect: str) -> pd.DataFrame:
    """The rows of ``suspect`` (set suspect) and the held-out rows (set heldout), in table order."""
    keep = np.isin(split, [suspect, "heldout"])
    out = features[keep].reset_index(drop=True)
    out.insert(0, "set", np.where(split[keep] == "heldout", "heldout", "suspect"))
    return out


def metrics(labels, scores, seed) -> dict:
    """AUROC and TPR at 1% FPR with their stratified bootstrap 95% CIs (1000 resamples)."""
    from trainspotter.evaluation.metrics import method_metrics

    m = method_metrics(labels, scores, n_boot=1000, seed=seed)
    return {k: m[k] for k in ("auroc", "auroc_ci_low", "auroc_ci_high", "tpr_at_1pct_fpr",
                              "tpr_at_1pct_fpr_ci_low", "tpr_at_1pct_fpr_ci_high")}


def _ci(r, key) -> str:
    return f"{r[key]:.3f} [{r[key + '_ci_low']:.3f}, {r[key + '_ci_high']:.3f}]"


def render_references(report: dict, testbed: str) -> str:
    """references.md from references.json's ``report``."""
    ks, per_sample, di, builds = report["ks"], report["per_sample"], report["di"], report["builds"]
    lines = [f"# Evidence vs the number of reference models K: testbed `{testbed}`", "",
             f"`python benchmarks/bench_references.py --ks {','.join(map(str, ks))} --trials {report['trials']} "
             f"--null-trials {report['null_trials']}`, {report['seconds'] / 60:.0f} min on this machine. Reference models: "
             f"{len(builds)} built, {min(b['build_seconds'] for b in builds.values()):.0f}–"
             f"{max(b['build_seconds'] for b in builds.values()):.0f} s each (torch threads: "
             f"{sorted({b['torch_threads'] for b in builds.values()})}).", "",
             "## Per-sample (1000 members vs 1000 non-members)", "",
             "Value [95% stratified bootstrap CI]. The bank at K: out-0 … out-(K-1) and, for the online "
             "methods, in-0 … in-(K-1) (each IN model trained on a random half of the candidates).", "",
             "| method | " + " | ".join(f"K = {k} AUROC" for k in ks) + " | " +
             " | ".join(f"K = {k} TPR@1%FPR" for k in ks) + " |",
             "|---|" + "---|" * (2 * len(ks))]
    for name in dict.fromkeys(r["method"] for r in per_sample):
        by_k = {r["K"]: r for r in per_sample if r["method"] == name}
        cells = [_ci(by_k[k], "auroc") if k in by_k else "—" for k in ks]
        cells += [_ci(by_k[k], "tpr_at_1pct_fpr") if k in by_k else "—" for k in ks]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Dataset inference with the default audit (mixture/diff, λ_max 0.8)", "",
              "Members vs held-out (TPR, pairs to decision: mean over all trials, a non-rejection counted "
              "as N_max) and non-members vs held-out (FPR; binomial p: one-sided test of FPR ≤ α). Saving: "
              "1 − pairs / pairs of today's audit (K = 1, the testbed's reference) on the same trials, "
              "[95% paired bootstrap CI].", "",
              "| features | references | K | α | TPR | FPR | binomial p | pairs to decision | saving |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in di:
        lines.append(f"| {r['features']} | {r['references']} | {r['K']} | {r['alpha']:g} | {r['tpr']:.3f} | "
                     f"{r['fpr']:.4f} | {r['fpr_binom_p']:.3f} | {r['mean_pairs']:.1f} | "
                     f"{r['saving']:+.1%} [{r['saving_ci_low']:+.1%}, {r['saving_ci_high']:+.1%}] |")
    return "\n".join(lines) + "\n"


def plot_references(path, per_sample, ks) -> None:
    """references_auroc.png: per-sample AUROC [95% CI] against K, per method with several K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    names = [n for n in dict.fromkeys(r["method"] for r in per_sample)
             if sum(r["method"] == n for r in per_sample) > 1]
    colors = plt.get_cmap("tab20")(np.linspace(0, 1, len(names)))
    for name, color in zip(names, colors):
        rows = sorted((r for r in per_sample if r["method"] == name), key=lambda r: r["K"])
        ax.errorbar([r["K"] for r in rows], [r["auroc"] for r in rows],
                    yerr=[[r["auroc"] - r["auroc_ci_low"] for r in rows],
                          [r["auroc_ci_high"] - r["auroc"] for r in rows]],
                    marker="o", capsize=2, color=color, alpha=0.85, label=name)
    ax.plot(list(HAYES), list(HAYES.values()), "k--", marker="s",
            label="Hayes et al. 2025, LiRA, GPT-2 140M\n(their K = 1 and 256 only, joined)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("reference models K (per kind)")
    ax.set_ylabel("per-sample AUROC [95% CI]")
    ax.axhline(0.5, color="grey", lw=0.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("Per-sample AUROC vs number of reference models (members vs non-members)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
