"""`trainspotter benchmark`: per-sample MIA methods and DI configurations on a testbed.

A plain typer command function, registered by flows/cli/command.py. Options override a YAML
configuration (``--config``, the fields of trainspotter.evaluation.benchmark.BenchmarkConfig),
which overrides the defaults (the full benchmark). Bad input raises InputError, which
the main CLI turns into one "error: …" line and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pydantic
import typer
from rich.console import Console

from trainspotter.evaluation.method_index import method_help
from trainspotter.flows.cli.common import (JSON, LABEL_COLUMN, MODEL, REFRESH, TESTBED_HELP, TEXT_COLUMN, TRACKING_URI,
                                           Access, choices, emit_json, folded_table, input_error)
from trainspotter.flows.cli.suites import (BenchmarkOptions, alphas_of, csv_list, keyed_suite, load_yaml,
                                           run_suite_flow, shift_suite, twins_suite)
from trainspotter.errors import InputError
from trainspotter.features.perturb import KINDS
from trainspotter.stats.payoffs import PAYOFFS
from trainspotter.stats.strategies import STRATEGIES

_console = Console()


def _default(mia: str, shift: str | None = None) -> str:
    """The "(default: …)" of an option's help: the BenchmarkConfig default (--suite mia)
    and, where it differs, the ShiftConfig one. Lists come from the same constants as
    the configurations' defaults; tests/e2e/test_help.py checks every value against
    BenchmarkConfig and ShiftConfig (importing those here would slow every command)."""
    return f"(default: {mia}" + ("" if shift is None else f"; --suite shift: {shift}") + ")"


# The per-sample methods by paradigm (llm: the LM attacks TDDBench does not have), with
# TDDBench's name where it has one, from the light index METHODS is built from (no sklearn).
METHOD_HELP = method_help()


def _config(base: dict, overrides: dict):
    from trainspotter.evaluation.benchmark import BenchmarkConfig

    data = base | {k: v for k, v in overrides.items() if v is not None}
    try:
        return BenchmarkConfig(**data)
    except pydantic.ValidationError as e:
        raise input_error(e, {"features.perturbation_kinds": "perturbation_kinds",
                              "config": "methods"}) from None  # the one model-level check: methods vs bank


def _tddbench(cfg, tracking_uri, refresh, json_out) -> None:
    """``--suite tddbench``: TDDBench's protocol (trainspotter.evaluation.tddbench)."""
    from trainspotter.evaluation.tddbench import PARADIGMS
    from trainspotter.flows.benchmark import tddbench_flow

    res = run_suite_flow(tddbench_flow, cfg, tracking_uri, refresh, json_out)
    if json_out:
        return emit_json(res)
    t = folded_table(f"TDDBench protocol on {cfg.testbed}, {cfg.partitions} partitions (mean ± std)",
                     ("paradigm", "method", "AUROC", "TPR@1%FPR", "MA", "s/sample", "peak MB"))
    for r in sorted(res["methods"], key=lambda r: (list(PARADIGMS).index(r["paradigm"]), -r["summary"]["auroc"]["mean"])):
        s, c = r["summary"], r["cost"] or {}
        pm = lambda k: f"{s[k]['mean']:.3f} ± {s[k]['std']:.3f}"  # noqa: E731
        t.add_row(r["paradigm"], r["label"], pm("auroc"), pm("tpr_at_1pct_fpr"), pm("advantage"),
                  "—" if c.get("seconds_per_sample") is None else f"{c['seconds_per_sample']:.4f}",
                  "—" if c.get("peak_rss_mb") is None else f"{c['peak_rss_mb']:.1f}")
    _console.print(t)
    _console.print(f"report {res['files']['table']}, MLflow parent run {res['parent_run_id']}")


def benchmark_cmd(
    suite: str = typer.Option("mia", help="mia: per-sample methods and DI configurations; tddbench: "
                                          "TDDBench's protocol, the methods over --partitions random "
                                          "partitions (mean ± std of its ten metrics, cost in a fresh "
                                          "process per method, grouped by paradigm; tddbench.md); shift: false "
                                          "\"trained on\" rates under held-out shift, the blind-check guard, "
                                          "IID cost and pollution (--trials per shift, --null-trials for "
                                          "the IID splits and pollution; results in shift.md under --out); "
                                          "twins: on a twins --testbed, the per-sample AUROC of the paired "
                                          "features and the twins audit (every private version, and one) "
                                          "against today's unpaired audit of the same members, H0 rates "
                                          "under fresh draws (--trials, one --alphas level, 0.05 unless "
                                          "given; twins-suite.md and decided.png under --out, the artifacts "
                                          "folder's benchmark-results/twins/TESTBED/ unless given); "
                                          "keyed: on a keyed --testbed, the keyed audit's TPR and budget to "
                                          "decision, black and gray, beside Sander's fixed-n test, STAMP's "
                                          "t-test and the key's rank, and H0 rates over fresh keys (--trials, "
                                          "one --alphas level, other settings from --config; keyed-suite.md "
                                          "and evidence.png under --out)."),
    testbed: Optional[str] = typer.Option(None, help=TESTBED_HELP + " "
                                                     + _default("tiny", "tiny-pretrain") + "."),
    dataset: Optional[str] = typer.Option(None, help="--suite mia: a published membership benchmark instead of "
                                                     "a testbed, hf:ORG/NAME, then :CONFIG, /SPLIT and "
                                                     "@REVISION, each optional, from the "
                                                     "Hugging Face cache (WikiMIA's label column, MIMIR's member "
                                                     "and nonmember columns), scored by --model; the methods that "
                                                     "need only the target, or a --reference too."),
    model: Optional[str] = typer.Option(None, help=MODEL.help),  # (needed with --dataset; a testbed has its own)
    text_column: Optional[str] = TEXT_COLUMN,
    label_column: Optional[str] = LABEL_COLUMN,
    methods: Optional[str] = typer.Option(None, help="Comma-separated per-sample methods (" + METHOD_HELP
                                                     + "); the model- and learning-based ones need "
                                                     "--reference-models " + _default("all but model- and learning-based")
                                                     + "."),
    reference: Optional[list[str]] = typer.Option(None, help="Reference model spec of the reference features; "
                                                             "repeat for K (two or more add the *_refs_* "
                                                             "features) " + _default("the testbed's reference")
                                                             + "."),
    reference_models: Optional[int] = typer.Option(None, min=0, help="Reference bank of the model-based "
                                                                     "methods: the testbed's K OUT and K IN "
                                                                     "models, built if needed (pre-training "
                                                                     "testbeds; 0 = none); its in-0 is the "
                                                                     "learning-based methods' shadow model "
                                                                     + _default("0") + "."),
    trials: Optional[int] = typer.Option(None, min=1, help="Monte Carlo trials per DI configuration, per "
                                                           "shift scenario, or per twins row " + _default("200")
                                                           + "."),
    null_trials: Optional[int] = typer.Option(None, min=1, help="Negative-control (FPR) trials per "
                                                                "configuration; with --suite shift, trials of "
                                                                "the IID splits and of pollution "
                                                                + _default("--trials", "1000 IID, 500 pollution")
                                                                + "."),
    n_max: Optional[int] = typer.Option(None, min=4, help="At most this many pairs per DI trial "
                                                          + _default("all") + "."),
    strategies: Optional[str] = typer.Option(None, help="DI betting strategies, comma-separated "
                                                        + _default(", ".join(STRATEGIES)) + "."),
    payoffs: Optional[str] = typer.Option(None, help="DI payoffs, comma-separated "
                                                     + _default(", ".join(PAYOFFS)) + "."),
    di_access: Optional[str] = typer.Option(None, help="DI feature sets: one or more access levels, gray, "
                                                       "black, both (audit --access; comma-separated), or none "
                                                    + _default("gray, black") + "."),
    alphas: Optional[str] = typer.Option(None, help="Significance levels, comma-separated "
                                                    + _default("0.05, 0.01") + "."),
    limit: Optional[int] = typer.Option(None, min=4, help="At most this many passages per split (per pool "
                                                          "with --suite shift) " + _default("all") + "."),
    cost_samples: Optional[int] = typer.Option(None, min=0, help="Passages timed per method; 0 = skip "
                                                                 + _default("32") + "."),
    cost_repeats: Optional[int] = typer.Option(None, min=1, help="Interleaved timing rounds " + _default("3") + "."),
    partitions: Optional[int] = typer.Option(None, min=2, help="--suite tddbench: random partitions of the "
                                                               "candidates " + _default("5") + "."),
    n_boot: Optional[int] = typer.Option(None, min=0, help="Bootstrap resamples per metric " + _default("1000") + "."),
    perturbation_kinds: Optional[str] = typer.Option(None, help="Perturbation kinds, comma-separated, or none "
                                                           + _default(", ".join(KINDS)) + "."),
    seed: Optional[int] = typer.Option(None, help="Seed of every random choice the verb makes: the same seed, "
                                                  "the same result " + _default("0") + "."),
    config: Optional[Path] = typer.Option(None, help="YAML file of benchmark settings (options win)."),
    out: Optional[Path] = typer.Option(None, help="Output folder " + _default(
        "the artifacts folder's benchmark-results/TESTBED/", "the artifacts folder's benchmark-results/")
        + "; the committed tables are rewritten only when named, e.g. --out benchmarks/results/TESTBED."),
    tracking_uri: Optional[str] = TRACKING_URI,
    refresh: bool = REFRESH,
    json_out: bool = JSON,
) -> None:
    """Benchmark per-sample MIA methods (AUROC, TPR at low FPR, cost and more) and DI tests
    (TPR, negative-control FPR, pairs to decision) on a testbed."""
    o = BenchmarkOptions(**locals())  # the options, once; the suites' helpers read them
    for option in ("dataset", "model", "text_column", "label_column"):
        if getattr(o, option) is not None and suite != "mia":
            raise InputError(f"option --{option.replace('_', '-')}: applies to --suite mia (a dataset's members "
                             f"and non-members), not --suite {suite}")
    if suite == "shift":
        return shift_suite(o)
    if suite == "twins":
        return twins_suite(o)
    if suite == "keyed":
        return keyed_suite(o)
    if suite not in ("mia", "tddbench"):
        raise InputError(f"option --suite {suite!r}: expected mia, tddbench, shift, twins or keyed")
    cfg = _mia_config(o)
    if suite == "tddbench":
        return _tddbench(cfg.model_copy(update={"di_access": ()}), tracking_uri, refresh, json_out)
    from trainspotter.flows.benchmark import benchmark_flow

    res = run_suite_flow(benchmark_flow, cfg, tracking_uri, refresh, json_out)
    return emit_json(res) if json_out else _print_mia(res, cfg.dataset or cfg.testbed)


def _mia_config(o: BenchmarkOptions):
    """The BenchmarkConfig of --suite mia or tddbench: the YAML file, then the options; the
    checks that need no flow (perturbation kinds, the reference bank) before any runs."""
    base = load_yaml(o.config)
    features = dict(base.pop("features", None) or {})
    if o.perturbation_kinds is not None:
        features["perturbation_kinds"] = csv_list(o.perturbation_kinds)
    alpha_values = alphas_of(o)
    di_access = [] if o.di_access == "none" else choices(Access, "di-access", o.di_access)
    cfg = _config(base, {"testbed": o.testbed, "dataset": o.dataset, "model": o.model,
                         "text_column": o.text_column, "label_column": o.label_column,
                         "methods": csv_list(o.methods), "reference": o.reference or None,
                         "reference_models": o.reference_models, "trials": o.trials, "null_trials": o.null_trials,
                         "n_max": o.n_max, "strategies": csv_list(o.strategies), "payoffs": csv_list(o.payoffs),
                         "di_access": di_access, "alphas": alpha_values, "limit": o.limit,
                         "cost_samples": o.cost_samples, "cost_repeats": o.cost_repeats, "n_boot": o.n_boot,
                         "seed": o.seed, "partitions": o.partitions, "features": features or None,
                         "out": str(o.out) if o.out else None})
    from trainspotter.features.perturb import check_kinds

    check_kinds(cfg.features.kinds)  # WordNet for synonym, before any flow starts
    if cfg.dataset is not None:  # read once here: a missing id, split or column is one line before any flow
        from trainspotter.evaluation.benchmark_dataset import dataset_splits

        dataset_splits(cfg.dataset, cfg.text_column, cfg.label_column)
    from trainspotter.evaluation.mia import METHODS

    if cfg.reference_models and any(METHODS[m].extraction.uses_bank for m in cfg.methods):
        from trainspotter.testbeds.reference_models import check_request

        check_request(cfg.testbed, cfg.reference_models)  # before anything is built
    return cfg


def _print_mia(res: dict, testbed: str) -> None:
    """The per-sample methods' table, the DI table and where the report is."""
    t = folded_table(f"Per-sample methods on {testbed}",
                     ("method", "AUROC [95% CI]", "TPR@1%FPR", "TPR@0.1%FPR", "MA", "s/sample", "peak MB"))
    for r in res["methods"]:
        m, c = r["metrics"], r["cost"] or {}
        t.add_row(r["label"], f"{m['auroc']:.3f} [{m.get('auroc_ci_low', float('nan')):.3f}, "
                              f"{m.get('auroc_ci_high', float('nan')):.3f}]",
                  f"{m['tpr_at_1pct_fpr']:.3f}", f"{m['tpr_at_0.1pct_fpr']:.3f}", f"{m['advantage']:.3f}",
                  "—" if c.get("seconds_per_sample") is None else f"{c['seconds_per_sample']:.4f}",
                  "—" if c.get("peak_rss_mb") is None else f"{c['peak_rss_mb']:.1f}")
    _console.print(t)
    if res["di"]:
        d = folded_table("Dataset inference (FPR: non-members vs held-out)",
                         ("access", "test", "α", "TPR", "FPR", "pairs to decision"))
        for r in res["di"]:
            stop = "—" if r["mean_stop"] is None else f"{r['mean_stop']:.1f} ± {r['std_stop']:.1f}"
            d.add_row(r["access"], r["test"], f"{r['alpha']:g}", f"{r['tpr']:.3f}", f"{r['fpr']:.3f}", stop)
        _console.print(d)
    _console.print(f"report {res['files']['table']}, MLflow parent run {res['parent_run_id']}")
