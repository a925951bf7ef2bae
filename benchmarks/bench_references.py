"""Evidence vs the number K of reference models on a pre-training testbed (issue 19).

Per-sample (1000 members vs 1000 non-members of ``tiny-pretrain``): AUROC and TPR at 1% FPR
with stratified bootstrap 95% CIs of the model-based methods (TDDBench A.1.3:
``trainspotter.features.model_based``) on a bank of K OUT + K IN reference models, and of
the audit's reference features, for K = 1, 2, 4, 8 (and more when built).

Dataset inference: the default audit (``TestConfig()``: the default preset) on members vs
held-out (TPR, censored pairs to decision) and non-members vs held-out (negative-control FPR,
one-sided binomial test of FPR ≤ α), every K on the same trial streams, with the paired
bootstrap CI of the saving against today's single-reference audit. Two reference lists:

- ``testbed+OUT``: the testbed's own reference (same seed and visiting order as the target,
  the members left out: an idealised reference no real auditor has) first, then out-0 … out-(K-2);
- ``OUT only``: out-0 … out-(K-1) (other seeds, half the corpus each: what an auditor's
  public models are like).

Two feature sets: the benchmark's DI gray set (every gray feature, perturbations included: the
set of benchmarks/results/tiny-pretrain/benchmark.md) and ``lean`` (the audit's default).

    python benchmarks/bench_references.py [--testbed tiny-pretrain] [--ks 1,2,4,8]
        [--trials 1000] [--null-trials 2000]

Writes benchmarks/results/<testbed>/references.{md,json} and references_auroc.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from trainspotter.auditing.tables import simulate_many
from trainspotter.backends import load_backend
from trainspotter.data import load_passages
from trainspotter.evaluation.benchmark_di import censored_stops, paired_saving
from trainspotter.evaluation.metrics import method_metrics
from trainspotter.evaluation.mia import cross_fit
from trainspotter.evaluation.references import build_references, load_reference_manifest
from trainspotter.evaluation.testbed import PRESETS, split_path
from trainspotter.features import model_based as mb
from trainspotter.features.extract import extract, feature_columns
from trainspotter.features.features import FEATURE_SETS, FeatureConfig
from trainspotter.features.references import refs_diff, refs_lira, refs_rmia, refs_token_lira
from trainspotter.stats.sequential import TestConfig

RESULTS = Path(__file__).parent / "results"
SPLITS = ("member", "nonmember", "heldout")
REFS = {"diff": refs_diff, "lira": refs_lira, "token_lira": refs_token_lira, "rmia": refs_rmia}
# Hayes et al. 2025 (GPT-2 ~140M, LiRA): per-sample AUROC with 1 and with 256 reference models,
# the two end points quoted in issue 19 (their curve between them is not reproduced here).
HAYES = {1: 0.54, 256: 0.68}


class Memo:
    """A backend whose ``score`` remembers every text it has scored (the script scores the
    same passages for several K)."""

    def __init__(self, inner):
        self.inner, self.tokenizer, self.fingerprint = inner, inner.tokenizer, inner.fingerprint
        self.seen: dict[str, object] = {}

    def encode(self, text):
        return self.inner.encode(text)

    def score(self, texts, distribution=False):
        new = list(dict.fromkeys(t for t in texts if (t, distribution) not in self.seen))
        for t, s in zip(new, self.inner.score(new, distribution) if new else []):
            self.seen[t, distribution] = s
        return [self.seen[t, distribution] for t in texts]

    def generate(self, prefixes, n):
        return self.inner.generate(prefixes, n)


def per_token(model: Memo, texts: list[str]) -> list[np.ndarray]:
    return [s.logprobs for s in model.score(texts)]


def refs_columns(target_lp, refs_lp) -> pd.DataFrame:
    """The *_refs_* gray features (the functions extract uses) for K = len(refs_lp) ≥ 2."""
    return pd.DataFrame({f"gray_refs_{n}": [fn(t, [r[i] for r in refs_lp]) for i, t in enumerate(target_lp)]
                         for n, fn in REFS.items()})


def di_table(features: pd.DataFrame, split: np.ndarray, suspect: str) -> pd.DataFrame:
    keep = np.isin(split, [suspect, "heldout"])
    out = features[keep].reset_index(drop=True)
    out.insert(0, "set", np.where(split[keep] == "heldout", "heldout", "suspect"))
    return out


def metrics(labels, scores, seed) -> dict:
    m = method_metrics(labels, scores, n_boot=1000, seed=seed)
    return {k: m[k] for k in ("auroc", "auroc_ci_low", "auroc_ci_high", "tpr_at_1pct_fpr",
                              "tpr_at_1pct_fpr_ci_low", "tpr_at_1pct_fpr_ci_high")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed", default="tiny-pretrain")
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--null-trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot-only", action="store_true", help="redraw the figure from references.json")
    args = ap.parse_args()
    if args.plot_only:
        res = json.loads((RESULTS / args.testbed / "references.json").read_text())
        return plot(RESULTS / args.testbed / "references_auroc.png", res["per_sample"], res["ks"])
    ks = sorted({int(k) for k in args.ks.split(",")})
    t0 = time.perf_counter()
    build_references(PRESETS[args.testbed], max(ks))
    manifest = load_reference_manifest(args.testbed)["models"]
    passages = {s: load_passages(split_path(args.testbed, s)) for s in SPLITS}
    texts = [p["text"] for s in SPLITS for p in passages[s]]
    ids = [p["id"] for s in SPLITS for p in passages[s]]
    split = np.array([s for s in SPLITS for _ in passages[s]])
    model = lambda role: Memo(load_backend(f"testbed:{args.testbed}/{role}"))  # noqa: E731
    target, reference = Memo(load_backend(f"testbed:{args.testbed}")), model("reference")
    outs = [model(f"out-{i}") for i in range(max(ks))]
    ins = [model(f"in-{i}") for i in range(max(ks))]
    in_ids = [set(manifest[f"in-{i}"]["candidates_in"]) for i in range(max(ks))]

    # one forward pass per text variant and model: the DI gray set (with the testbed's reference)
    # and lean (with out-0 as "the" reference for the OUT-only lists)
    full = FeatureConfig(sequence=False)
    sets = {("testbed+OUT", "gray DI set"): extract(
                [{"id": i, "text": t} for i, t in zip(ids, texts)], target, reference, "gray", full),
            ("OUT only", "gray DI set"): extract(
                [{"id": i, "text": t} for i, t in zip(ids, texts)], target, outs[0], "gray", full)}
    lean = ["id"] + feature_columns(FEATURE_SETS["lean"], "gray", 1)  # the same values, fewer columns
    for refs_name in ("testbed+OUT", "OUT only"):
        sets[(refs_name, "lean")] = sets[(refs_name, "gray DI set")][lean]
    t_lp = per_token(target, texts)
    lp = {"reference": per_token(reference, texts)}
    lp |= {f"out-{i}": per_token(m, texts) for i, m in enumerate(outs)}
    lp |= {f"in-{i}": per_token(m, texts) for i, m in enumerate(ins)}
    mean_ll = {name: np.array([a.mean() for a in v]) for name, v in lp.items()}
    t_ll = np.array([a.mean() for a in t_lp])
    print(f"scored {len(texts)} passages under {2 + 2 * max(ks)} models in {time.perf_counter() - t0:.0f} s",
          flush=True)

    cand = np.isin(split, ["member", "nonmember"])
    labels = (split[cand] == "member").astype(int)
    pop = split == "heldout"
    per_sample, di_rows = [], []
    # --- per-sample methods: the bank is out-0..K-1 (OUT) and in-0..K-1 (IN)
    for k in ks:
        names = [f"out-{i}" for i in range(k)] + [f"in-{i}" for i in range(k)]
        refs = np.stack([mean_ll[n] for n in names], axis=1)
        in_mask = np.zeros_like(refs, dtype=bool)
        for j in range(k):
            in_mask[:, k + j] = [i in in_ids[j] for i in ids]
        out_only = refs[:, :k]
        no_in = np.zeros_like(out_only, dtype=bool)
        methods = {
            "Model-loss (K OUT + K IN)": mb.model_loss(t_ll, refs),
            "Model-calibration (K OUT)": mb.model_calibration(t_ll, out_only, no_in),
            "LiRA online (K OUT + K IN)": mb.lira_online(t_ll, refs, in_mask),
            "LiRA offline (K OUT)": mb.lira_offline(t_ll, out_only, no_in),
            "Model-FPR (K OUT)": mb.model_fpr(t_ll, out_only, no_in),
            "RMIA offline (K OUT)": mb.rmia(t_ll, out_only, no_in, t_ll[pop], out_only[pop]),
            "RMIA online (K OUT + K IN)": mb.rmia(t_ll, refs, in_mask, t_ll[pop], refs[pop]),
        }
        for label, scores in methods.items():
            per_sample.append({"K": k, "method": label, **metrics(labels, scores[cand], args.seed)})
        for refs_name, first in (("testbed+OUT", ["reference"]), ("OUT only", [])):
            chosen = (first + [f"out-{i}" for i in range(k)])[:k]
            feats = sets[(refs_name, "gray DI set")]
            if k >= 2:
                feats = pd.concat([feats, refs_columns(t_lp, [lp[n] for n in chosen])], axis=1)
                per_sample.append({"K": k, "method": f"refs_lira feature ({refs_name})",
                                   **metrics(labels, feats["gray_refs_lira"].to_numpy()[cand], args.seed)})
            X = feats.drop(columns=["id"]).to_numpy(dtype=float)
            per_sample.append({"K": k, "method": f"scoring model, gray DI set ({refs_name})",
                               **metrics(labels, cross_fit(X[cand], labels, 5, args.seed), args.seed)})
            for set_name in ("gray DI set", "lean"):
                cols = [c for c in sets[(refs_name, set_name)].columns if c != "id"]
                cols += [c for c in feats.columns if c.startswith("gray_refs_")]
                di_rows.append({"K": k, "references": refs_name, "features": set_name,
                                "pos": di_table(feats[cols], split, "member"),
                                "neg": di_table(feats[cols], split, "nonmember")})
        print(f"K = {k}: per-sample done ({time.perf_counter() - t0:.0f} s)", flush=True)
    # the refl single-reference baseline, for the table
    for name in ("reference", "out-0"):
        per_sample.append({"K": 1, "method": f"RefL vs {name}", **metrics(labels, (t_ll - mean_ll[name])[cand],
                                                                         args.seed)})

    # --- dataset inference: the default audit on the same trial streams for every K
    test = TestConfig()
    di = []
    for row in di_rows:
        pos, = simulate_many(row["pos"], [test], args.trials, None, False, args.seed, alphas=(0.05, 0.01))
        neg, = simulate_many(row["neg"], [test], args.null_trials, None, False, args.seed, alphas=(0.05, 0.01))
        for alpha in (0.05, 0.01):
            p, q = pos["by_alpha"][str(alpha)], neg["by_alpha"][str(alpha)]
            k_rej = int(round(q["rejection_rate"] * neg["trials"]))
            di.append({"K": row["K"], "references": row["references"], "features": row["features"],
                       "alpha": alpha, "tpr": p["rejection_rate"], "fpr": q["rejection_rate"],
                       "fpr_binom_p": float(binomtest(k_rej, neg["trials"], alpha, alternative="greater").pvalue),
                       "mean_pairs": float(censored_stops(p["stop_times"], pos["pairs"]).mean()),
                       "pairs": pos["pairs"], "stop_times": p["stop_times"]})
        print(f"DI K = {row['K']} {row['references']} {row['features']}: "
              f"{di[-2]['mean_pairs']:.1f} pairs ({time.perf_counter() - t0:.0f} s)", flush=True)
    for r in di:  # paired saving against today's audit: K = 1 with the testbed's reference
        base = next(b for b in di if b["K"] == 1 and b["references"] == "testbed+OUT"
                    and b["features"] == r["features"] and b["alpha"] == r["alpha"])
        r.update(paired_saving(r["stop_times"], base["stop_times"], r["pairs"], seed=args.seed))
    for r in di:
        r.pop("stop_times")
    seconds = time.perf_counter() - t0
    out = RESULTS / args.testbed
    out.mkdir(parents=True, exist_ok=True)
    builds = {m: {k: e[k] for k in ("build_seconds", "final_loss", "torch_threads")} for m, e in manifest.items()}
    (out / "references.json").write_text(json.dumps(
        {"ks": ks, "per_sample": per_sample, "di": di, "builds": builds, "seconds": seconds,
         "trials": args.trials, "null_trials": args.null_trials, "hayes_2025": HAYES}, indent=1))
    write_markdown(out / "references.md", args, ks, per_sample, di, builds, seconds)
    plot(out / "references_auroc.png", per_sample, ks)
    print(f"wrote {out}/references.md in {seconds:.0f} s")


def _ci(r, key) -> str:
    return f"{r[key]:.3f} [{r[key + '_ci_low']:.3f}, {r[key + '_ci_high']:.3f}]"


def write_markdown(path, args, ks, per_sample, di, builds, seconds) -> None:
    lines = [f"# Evidence vs the number of reference models K: testbed `{args.testbed}`", "",
             f"`python benchmarks/bench_references.py --ks {','.join(map(str, ks))} --trials {args.trials} "
             f"--null-trials {args.null_trials}`, {seconds / 60:.0f} min on this machine. Reference models: "
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
    path.write_text("\n".join(lines) + "\n")


def plot(path, per_sample, ks) -> None:
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


if __name__ == "__main__":
    main()
