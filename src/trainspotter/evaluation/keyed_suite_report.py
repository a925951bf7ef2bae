"""The keyed suite run on a built testbed (``run_suite``), its table (``render_markdown``) and its
plot of evidence against the budget (``evidence_plot``); ``trainspotter.evaluation.keyed_suite``
holds the trials and tests."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np

from trainspotter.evaluation.keyed_suite import (Answers, KeyedBed, KeyedSuiteConfig, black_answers, choice_answers,
                                                 evaluate, fresh_keys, gray_answers, h0_rates, keyed_bed, opening,
                                                 summarise)

__all__ = ["choice_passages", "effect_runs", "evidence_plot", "render_effect", "render_markdown", "run_suite",
           "unit_effect"]


def _prompts(backend, bed: KeyedBed, cfg: KeyedSuiteConfig, trial: int) -> list[str]:
    n = math.ceil(cfg.black_tokens / cfg.new_tokens)
    texts = random.Random(f"{cfg.seed}:prompts:{trial}").sample(bed.neutral, min(n, len(bed.neutral)))
    return [opening(backend, t, cfg.prompt_tokens) for t in texts]


def _passages(bed: KeyedBed, cfg: KeyedSuiteConfig, trial: int) -> list[str]:
    return random.Random(f"{cfg.seed}:passages:{trial}").sample(bed.neutral, min(cfg.gray_passages, len(bed.neutral)))


def choice_passages(bed: KeyedBed, cfg: KeyedSuiteConfig, trial: int) -> list[str]:
    """Forced choice: every neutral passage, in a trial's order (a unit is asked in its first context)."""
    return random.Random(f"{cfg.seed}:choice:{trial}").sample(bed.neutral, len(bed.neutral))


def _answers(probe: str, backend, bed: KeyedBed, cfg: KeyedSuiteConfig, trial: int, seed: int, ref):
    """One trial's answers of ``backend`` for a row of the suite."""
    if probe == "black":
        return black_answers(backend, bed, _prompts(backend, bed, cfg, trial), cfg.new_tokens, seed=seed)
    if probe == "choice":
        return choice_answers(backend, bed.scoring.forms, choice_passages(bed, cfg, trial), cfg.black_tokens,
                              cfg.samples, seed=seed, reference=ref, contexts=cfg.contexts)
    return gray_answers(backend, bed.scoring.forms, _passages(bed, cfg, trial), ref)


def _release_prompts_h0(backend, bed: KeyedBed, keys: list[bytes], cfg: KeyedSuiteConfig, progress) -> dict:
    """For each fresh key, the release written under it; its passages' openings prompt a model that
    never saw it, scored under that key: each key's e-process and fixed-n test."""
    from trainspotter.evaluation.keyed_suite import _fixed_p, _rate
    from trainspotter.stats.exact_null import unit_eprocess

    rewriter, n = bed.scoring.forms.rewriter, math.ceil(cfg.black_tokens / cfg.new_tokens)
    hits, fixed, units = [], [], []
    for m, key in enumerate(keys):
        texts = random.Random(f"{cfg.seed}:release-prompts:{m}").sample(bed.originals, min(n, len(bed.originals)))
        prompts = [opening(backend, rewriter.rewrite(t, key), cfg.prompt_tokens) for t in texts]
        ans: Answers = black_answers(backend, bed, prompts, cfg.new_tokens, seed=cfg.seed + 7919 * m)
        x, p = bed.scoring.outcomes(ans.records, key)
        w = bed.scoring.weights(ans.records)
        hits.append(bool(len(x)) and bool(unit_eprocess(x, p, cfg.test, w=w).rejected))
        fixed.append(_fixed_p(x, p) < cfg.test.alpha)
        units.append(len(x))
        if progress:
            progress("release prompts", m + 1, len(keys))
    return {"keys": len(keys), "mean_units": float(np.mean(units)), "eprocess": _rate(np.array(hits), cfg.test.alpha),
            "fixed_n": _rate(np.array(fixed), cfg.test.alpha)}


def run_suite(cfg: KeyedSuiteConfig, folder: Path, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Every row of the suite on a built keyed testbed (``keyed_suite`` module docstring)."""
    from trainspotter.backends.hf import HFBackend

    bed = keyed_bed(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    keys = fresh_keys(cfg.random_keys, cfg.seed)
    models = {"target": HFBackend(folder / "target", device="cpu"), "reference": HFBackend(folder / "reference",
                                                                                         device="cpu")}
    if cfg.original:  # a model spec, e.g. testbed:tiny-pretrain (its members: the originals, unkeyed)
        from trainspotter.backends import load_backend

        models["original"] = load_backend(cfg.original)
    res = {"testbed": bed.name, "member_fraction": manifest["member_fraction"], "members": manifest["keyed"]["members"],
           "release_units": len(bed.scoring.forms.forms) if bed.tokenizer is None else None,
           "n_95": getattr(bed.scoring, "n_95", None),
           "unit": "word type" if bed.tokenizer is None else "window (SmolLM2 tokens)", "h0": {}}
    ref = models["reference"] if cfg.calibrate else None
    # choice and gray read a lexical release's forms; a watermarked release's windows are read black-box only
    probes = [a for a in ("black", "choice", "gray") if a in cfg.probes and (a == "black" or bed.tokenizer is None)]
    trials: dict[str, list[dict]] = {a: [] for a in probes}
    for t in range(cfg.trials):
        for probe in probes:
            ans = _answers(probe, models["target"], bed, cfg, t, cfg.seed * 100_003 + t, ref)
            trials[probe].append(evaluate(bed, ans, bed.key, keys, cfg, probe == "choice"))
        if progress:
            progress("members' trials", t + 1, cfg.trials)
    for probe, budget in (("black", cfg.black_tokens), ("choice", cfg.black_tokens), ("gray", cfg.gray_passages)):
        res[probe] = (summarise(trials[probe], cfg.test.alpha, budget) | {"budget": budget}
                      if trials.get(probe) else None)
    paths = {probe: [t["path"] for t in rows] for probe, rows in trials.items()}
    for name, backend in models.items():
        res["h0"][name] = {}
        for probe in probes:
            ans = _answers(probe, backend, bed, cfg, -1, cfg.seed, ref)
            res["h0"][name][probe] = h0_rates(bed, ans, keys, cfg, probe == "choice")
            if name != "target":  # the public key on a model that never saw the release: its path
                paths[f"{probe} {name}"] = [evaluate(bed, ans, bed.key, keys[:8], cfg, probe == "choice")["path"]]
        if progress:
            progress("H0 models", len(res["h0"]), len(models))
    # (a generative release under a fresh key would need new paraphrases)
    if cfg.release_prompts and bed.tokenizer is None and "black" in probes:
        res["h0"]["reference, release prompts"] = {"black": _release_prompts_h0(models["reference"], bed, keys, cfg,
                                                                                 progress)}
    return res | {"paths": paths}


def _whole_forms(backend, bed: KeyedBed, cfg: KeyedSuiteConfig, trial: int, ref) -> Answers:
    """What the forced choice would give if every form were one token (SmolLM2's tokenizer writes
    most units so; the testbed's 2048 tokens split most forms): the choice row's units, each with
    ``samples`` draws in each context from the whole forms' shares (``form_probabilities``, relative
    to ``ref``). A simulation from gray-box answers, labelled so wherever it is reported."""
    from trainspotter.evaluation.keyed_suite import choice_plan_within, pooled
    from trainspotter.keyed.queries import form_probabilities

    forms = bed.scoring.forms
    plan = choice_plan_within(forms, backend.tokenizer, choice_passages(bed, cfg, trial), cfg.black_tokens,
                              cfg.samples, cfg.contexts)
    hs = form_probabilities(backend, [(context, forms.forms[unit]) for unit, where, _ in plan
                                      for _, context, _ in where], ref)
    rng = np.random.default_rng(cfg.seed * 100_003 + trial)
    draws = [rng.choice(len(h), size=cfg.samples, p=np.asarray(h) / np.sum(h)).tolist() for h in hs]
    return pooled(plan, draws, forms, [cfg.samples] * len(draws))


def unit_effect(cfg: KeyedSuiteConfig, folder: Path, trials: int, null_keys: int = 50,
                accesses: tuple[str, ...] = ("black", "choice", "gray")) -> dict:
    """Why a budget does or does not suffice: on the members' target, over ``trials`` of the suite's
    own trials (its prompts and passages), each unit's excess x − p under the public key, pooled:
    its mean δ and standard error, the same mean under ``null_keys`` fresh keys (their mean and
    spread: the null's), the units per trial, and the units a one-sided fixed-n z-test at α would
    need for power 0.95, n = ((z_α + z_0.05)·sd/δ)², where δ > 0; the same n for the weighted
    payoffs w·u that the e-process bets on (``keyed.score``); and ``by_count``: the mean payoff u
    per unit by how often the release shows it (n_u), the dose-response the weights rest on.
    ``accesses``: rows of the suite (black, choice, gray) and "choice, whole forms" (``_whole_forms``)."""
    from trainspotter.backends.hf import HFBackend
    from trainspotter.stats.exact_null import unit_payoffs

    bed = keyed_bed(folder)
    target, ref = (HFBackend(folder / m, device="cpu") for m in ("target", "reference"))
    keys = fresh_keys(null_keys, cfg.seed + 1)
    out = {}
    for access in [a for a in accesses if a == "black" or bed.tokenizer is None]:
        d, null, units, pay, w, n_u = [], [], [], [], [], []
        for t in range(trials):
            ans = (_whole_forms(target, bed, cfg, t, ref if cfg.calibrate else None) if access == "choice, whole forms"
                   else _answers(access, target, bed, cfg, t, cfg.seed * 100_003 + t, ref if cfg.calibrate else None))
            x, p = bed.scoring.outcomes(ans.records, bed.key)
            xs, ps = bed.scoring.outcomes_many(ans.records, keys)
            d.append(x - p)
            null.append(xs - ps)
            units.append(len(x))
            pay.append(unit_payoffs(x, p))
            w.append(bed.scoring.weights(ans.records))
            if bed.tokenizer is None:  # lexical units: how often the release shows each
                n_u.append([bed.scoring.forms.count[r["unit"]] for r in ans.records])
        d, null = np.concatenate(d), np.concatenate(null, axis=1).mean(axis=1)
        pay, w, n_u = np.concatenate(pay), np.concatenate(w), np.concatenate(n_u or [np.zeros(0)])
        delta, sd = float(d.mean()), float(d.std(ddof=1))
        out[access] = {"trials": trials, "units_per_trial": float(np.mean(units)), "delta": delta,
                       "se": sd / math.sqrt(len(d)), "sd": sd, "null_delta_mean": float(null.mean()),
                       "null_delta_sd": float(null.std(ddof=1)), "null_keys": null_keys,
                       "units_for_power_95": _units_needed(d, cfg.test.alpha),
                       "weighted_units_for_power_95": _units_needed(w * pay, cfg.test.alpha),
                       "by_count": [{"n_u": _bin(lo, hi), "units": int(s.sum()),
                                     "mean_payoff": float(pay[s].mean()),
                                     "se": float(pay[s].std(ddof=1) / math.sqrt(s.sum()))}
                                    for lo, hi in COUNT_BINS if (s := (n_u >= lo) & (n_u <= hi)).sum() > 1]}
    return out


COUNT_BINS = ((1, 1), (2, 3), (4, 9), (10, 29), (30, math.inf))


def _bin(lo, hi) -> str:
    return str(lo) if hi == lo else f"{lo}+" if hi == math.inf else f"{lo}–{hi}"


def _units_needed(d: np.ndarray, alpha: float) -> int | None:
    """Units a one-sided fixed-n z-test at ``alpha`` needs for power 0.95 on outcomes like ``d``."""
    from scipy.stats import norm

    z = norm.ppf(1 - alpha) + norm.ppf(0.95)
    return math.ceil((z * d.std(ddof=1) / d.mean()) ** 2) if d.mean() > 0 else None


EFFECT_ROWS = ("black", "choice", "choice, whole forms", "gray")


def effect_runs(report: dict) -> list[dict]:
    """The runs whose rows effect.json holds (one, written before runs were listed: black and gray;
    a forced choice's run without ``contexts`` asked one context, 16 draws, the defaults then)."""
    return report.get("runs") or [{"date": report["date"], "seconds": report["seconds"], "trials": report["trials"],
                                   "accesses": ["black", "gray"]}]


def render_effect(report: dict) -> str:
    """effect.md from effect.json (``benchmarks/bench_keyed_effect.py``): ``unit_effect`` per testbed."""
    lines = ["# Keyed releases: the key's effect per unit", "",
             "`python benchmarks/bench_keyed_effect.py` ("
             + "; ".join(f"`--trials {r['trials']}`, {r['date']}, {r['seconds']:.0f} s: {', '.join(r['accesses'])}"
                         + (f" ({r.get('contexts', 1)} context{'s' * (r.get('contexts', 1) > 1)} × "
                            f"{r.get('samples', 16)} draws a unit)" if any("choice" in a for a in r["accesses"]) else "")
                         for r in effect_runs(report))
             + "): per testbed and access, over the keyed suite's first trials (as many as the run's `--trials`; "
             "its prompts and passages, seed 0) on the target that saw the release once: δ, the mean of "
             "x − p over every unit scored (x: the key's form written, or its share among the forms; p: the null "
             "1/(m + 1)) with its standard error; the same mean under fresh keys (the null's spread); and n, the units "
             "a one-sided fixed-n z-test at α = 0.05 needs for power 0.95 (none where δ ≤ 0).", "",
             "| testbed | access | units per trial | δ (se) | fresh keys: mean ± sd | units for power 0.95 | "
             "weighted: units for power 0.95 |", "|---|---|---|---|---|---|---|"]

    def need(n):
        return "–" if n is None else f"{n:,}"

    rows = [(testbed, access, by[access]) for testbed, by in report["results"].items() for access in EFFECT_ROWS
            if access in by]
    for testbed, access, r in rows:
        lines.append(f"| {testbed} | {access} | {r['units_per_trial']:.0f} | {r['delta']:+.4f} ({r['se']:.4f}) | "
                     f"{r['null_delta_mean']:+.4f} ± {r['null_delta_sd']:.4f} | {need(r['units_for_power_95'])} | "
                     f"{need(r['weighted_units_for_power_95'])} |")
    if report.get("single_token"):
        lines += ["", "Forced choice restricts the model's next token to the tokens that begin each form; where a "
                  "form is several tokens, the first is shared with other words and carries only part of the model's "
                  "preference for the form (\"choice, whole forms\" above: the same units' draws simulated from the "
                  "whole forms' shares). Units of the first choice trial whose forms are each one token: " + "; ".join(
                      f"{testbed}, " + ", ".join(f"{name} tokenizer ({r['vocab']:,} tokens) {r['first_400']} of the "
                                                 f"first 400 units, {r['all']:,} of {r['units']:,}"
                                                 for name, r in shares.items())
                      for testbed, shares in report["single_token"].items()) + "."]
    lines += ["", "The weighted payoffs w·u are what the e-process bets on: w = min(1, n_u/n_95), n_u the times "
              "the release shows the unit (`keyed.score`). Why, measured: the mean payoff u = (x − p)/max(p, 1 − p) "
              "per unit by n_u (its standard error, units counted as independent; a unit recurs across trials "
              "with the same key, so the spread under fresh keys above is the null's honest scale), and the "
              "units in each bin:", "",
              "| testbed | access | " + " | ".join(f"n_u {_bin(lo, hi)}" for lo, hi in COUNT_BINS) + " |",
              "|---|---|" + "---|" * len(COUNT_BINS)]
    for testbed, access, r in rows:
        cells = {b["n_u"]: f"{b['mean_payoff']:+.3f} ({b['se']:.3f}), {b['units']}" for b in r["by_count"]}
        lines.append(f"| {testbed} | {access} | " + " | ".join(cells.get(_bin(lo, hi), "–") for lo, hi in COUNT_BINS)
                     + " |")
    return "\n".join(lines) + "\n"


ROWS = (("black", "generated tokens"), ("choice", "generated tokens"), ("gray", "neutral passages"))
LABEL = {"black": "black, continuations", "choice": "black, forced choice", "gray": "gray"}


def _cell(row: dict, key: str) -> str:
    r = row.get(key)
    return "–" if r is None else f"{r['rate']:.3f} ({r['rejected']}/{row['keys']}, p {r['p_above_alpha']:.2f})"


def render_markdown(res: dict, cfg: KeyedSuiteConfig, header: str) -> str:
    """The suite's tables: power on the members' release, then H0 over fresh keys."""
    c = res.get("choice") or {}
    counted = (f" Weighed by n as the other probes are, the forced choice's TPR would be {c['counted_tpr']:.2f} "
               f"(median {c['counted_median_to_decision']:.0f} to decision)." if "counted_tpr" in c else "")
    lines = [f"# Keyed suite: testbed `{res['testbed']}`", "", header, "",
             f"Release: {res['members']} members, {100 * res['member_fraction']:.2f}% of the training tokens, "
             f"seen once; unit: {res['unit']}" + (f", {res['release_units']} rewritable units" if res["release_units"]
                                                  else "") + f". α = {cfg.test.alpha:g}, {cfg.trials} trials, "
             f"{cfg.random_keys} random keys. The e-process weighs each unit by how often the release shows it, "
             "min(1, n/n_95) with n_95" + (f" = {res['n_95']:g}" if res.get("n_95") else "") + " the 95th percentile "
             "of n over the release's units, except the forced choice's, which weigh 1 (its plan asks the units "
             "shown most; `keyed.score`); \"unweighted\": the same e-process on the same units, every weight 1."
             + counted, "",
             "| access | budget | e-process TPR | mean / median / 95% to decision | unweighted: TPR, median | "
             "fixed-n (Sander) | STAMP t-test | key rank | units |", "|---|---|---|---|---|---|---|---|---|"]
    for access, unit in ROWS:
        r = res.get(access)
        if r is None:
            why = ("not run (--config probes)" if access not in cfg.probes else
                   "not measured: a forced choice reads a lexical release's forms" if access == "choice" else
                   "not measured: the testbed's models do not share the watermark's tokenizer")
            lines.append(f"| {LABEL[access]} | – | {why} | | | | | | |")
            continue
        lines.append(f"| {LABEL[access]} | {r['budget']} {unit} | {r['tpr']:.2f} | {r['mean_to_decision']:.0f} / "
                     f"{r['median_to_decision']:.0f} / {r['q95_to_decision']:.0f} | "
                     f"{r['flat_tpr']:.2f}, {r['flat_median_to_decision']:.0f} | {r['fixed_power']:.2f} | "
                     f"{r['stamp_power']:.2f} | {r['rank_power']:.2f} | {r['mean_units']:.0f} |")
    lines += ["", "H0: each fresh key public in turn on answers of a model that never saw a release under it "
                  "(rate of \"trained on\", rejected/keys, one-sided binomial p of rate > α):", "",
              "| model | access | units | e-process | fixed-n (Sander) | STAMP t-test | key rank |", "|---|---|---|---|---|---|---|"]
    for name, rows in res["h0"].items():
        for access, row in rows.items():
            units = row.get("units", row.get("mean_units"))
            lines.append(f"| {name} | {LABEL[access]} | {units:.0f} | {_cell(row, 'eprocess')} | "
                         f"{_cell(row, 'fixed_n')} | {_cell(row, 'stamp')} | {_cell(row, 'rank')} |")
    return "\n".join(lines) + "\n"


def evidence_plot(paths: dict[str, list], path: Path, alpha: float, title: str = "") -> Path:
    """log W against the budget: the members' trials (median and 10-90% band) and the public key on
    models that never saw the release, one panel per row of the suite that has trials."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from trainspotter.evaluation.plots import save_figure

    rows = [(access, unit) for access, unit in ROWS if paths.get(access)] or list(ROWS[::2])
    fig, axes = plt.subplots(1, len(rows), figsize=(4.8 * len(rows), 3.8), dpi=120, squeeze=False)
    for ax, (access, unit) in zip(axes[0], rows):
        trials = [np.array(p) for p in paths.get(access, []) if len(p)]
        if trials:
            grid = np.unique(np.concatenate([t[:, 0] for t in trials]))
            at = np.stack([np.interp(grid, t[:, 0], t[:, 1], left=0.0) for t in trials])
            ax.fill_between(grid, np.quantile(at, 0.1, axis=0), np.quantile(at, 0.9, axis=0), alpha=0.25)
            ax.plot(grid, np.median(at, axis=0), label="members' release (median)")
        for label, runs in paths.items():
            if label.startswith(f"{access} ") and runs and len(runs[0]):
                run = np.array(runs[0])
                ax.plot(run[:, 0], run[:, 1], ls="--", lw=1, label=label.removeprefix(f"{access} ") + " (public key)")
        ax.axhline(math.log(1 / alpha), color="grey", lw=0.8, ls=":", label="log 1/α")
        ax.set_xlabel(unit)
        ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))  # 20,000 tokens: labels that do not run together
        ax.set_ylabel("log W")
        ax.set_title(LABEL[access], fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=9)
    return save_figure(fig, path)
