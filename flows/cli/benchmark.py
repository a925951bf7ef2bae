"""`trainspotter benchmark`: per-sample MIA methods and DI configurations on a testbed.

A plain typer command function, registered by flows/cli/command.py. Options override a YAML
configuration (``--config``, the fields of trainspotter.evaluation.benchmark.BenchmarkConfig),
which overrides the defaults (the full benchmark). Bad input raises InputError, which
the main CLI turns into one "error: …" line and exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pydantic
import typer
from rich.console import Console

from trainspotter.evaluation.method_index import method_help
from trainspotter.flows.cli.common import (JSON, REFRESH, TESTBED_HELP, TRACKING_URI, Access, choices,
                                           emit_json, folded_table, input_error, progress_lines)
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


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return [] if items == ["none"] else items


def _config(base: dict, overrides: dict):
    from trainspotter.evaluation.benchmark import BenchmarkConfig

    data = base | {k: v for k, v in overrides.items() if v is not None}
    try:
        return BenchmarkConfig(**data)
    except pydantic.ValidationError as e:
        raise input_error(e, {"features.perturbation_kinds": "perturbation_kinds",
                              "config": "methods"}) from None  # the one model-level check: methods vs bank


def _load_yaml(path: Path | None) -> dict:
    if path is None:
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: cannot read the configuration ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of BenchmarkConfig fields")
    return data


@dataclass(frozen=True)
class BenchmarkOptions:
    """The options of ``benchmark``, as given (None: not given), built once by benchmark_cmd."""

    suite: str
    testbed: str | None
    methods: str | None
    reference: list[str] | None
    reference_models: int | None
    trials: int | None
    null_trials: int | None
    n_max: int | None
    strategies: str | None
    payoffs: str | None
    di_access: str | None
    alphas: str | None
    limit: int | None
    cost_samples: int | None
    cost_repeats: int | None
    n_boot: int | None
    partitions: int | None
    perturbation_kinds: str | None
    seed: int | None
    config: Path | None
    out: Path | None
    tracking_uri: str | None
    refresh: bool
    json_out: bool


def _alphas(o: BenchmarkOptions) -> list[float] | None:
    """--alphas as numbers (None: not given); anything else is one error line."""
    values = _csv(o.alphas)
    try:
        return None if values is None else [float(a) for a in values]
    except ValueError:
        raise InputError(f"option --alphas {o.alphas!r}: expected comma-separated numbers") from None


def _run_flow(flow, config, tracking_uri: str | None, refresh: bool, json_out: bool = False) -> dict:
    """The suite's flow on the local Prefect API (started before refreshing(), whose settings
    context would not see it), with its stages' progress on stderr."""
    from trainspotter.tasks.cache import refreshing

    with progress_lines(transient=json_out), refreshing(refresh):
        return flow(config, tracking_uri=tracking_uri)


def _shift(o: BenchmarkOptions) -> None:
    """``--suite shift``: the held-out shift suite (trainspotter.evaluation.shift_suite)."""
    from trainspotter.evaluation.shift_suite import ShiftConfig

    tracking_uri, refresh, json_out = o.tracking_uri, o.refresh, o.json_out
    try:
        cfg = ShiftConfig(**{k: v for k, v in {
            "testbed": o.testbed, "trials": o.trials, "iid_trials": o.null_trials, "pollution_trials": o.null_trials,
            "n_max": o.n_max, "limit": o.limit, "seed": o.seed, "out": str(o.out) if o.out else None}.items()
            if v is not None})
    except pydantic.ValidationError as e:
        raise input_error(e, {"iid_trials": "null_trials"}) from None
    from trainspotter.assets import python_docs_dir

    python_docs_dir()  # the out-of-domain source pool, before any flow starts (else one error line)
    from trainspotter.flows.shift_suite import shift_flow

    res = _run_flow(shift_flow, cfg, tracking_uri, refresh, json_out)
    if json_out:
        return emit_json(res)
    t = folded_table(f'False "trained on" under held-out shift ({cfg.testbed}, α = {cfg.alpha:g})',
                     ("shift", "suspect vs held-out", "n", "blind fires", "placebo fires", "default: before", "now",
                      "no reference: now", "black: now"))
    for r in res["scenarios"]:
        tests = r["tests"]
        now = lambda name: f"{tests[name]['guarded']['rate']:.3f}" if name in tests else "—"  # noqa: E731
        placebo = r["placebo"].get("placebo_gray")
        t.add_row(r["kind"], f"{r['suspect']} vs {r['heldout']}", str(r["pairs"]), f"{r['blind']['rate']:.3f}",
                  "—" if placebo is None else f"{placebo['rate']:.3f}", f"{tests['gray']['blind_only']['rate']:.3f}",
                  now("gray"), now("gray_noref"), now("black"))
    _console.print(t)
    _console.print(f"report {res['files']['table']}, MLflow run {res['run_id']}")


def _twins(o: BenchmarkOptions) -> None:
    """``--suite twins``: what twins buy on a twins testbed (trainspotter.evaluation.twins_suite)."""
    from trainspotter.evaluation.twins_suite import TwinsSuiteConfig, check_twins_testbed

    if o.testbed is None:
        raise InputError("option --testbed: --suite twins needs a twins testbed, e.g. --testbed mini-pretrain-twins")
    check_twins_testbed(o.testbed)  # one line naming it, before any flow starts
    alpha = _alphas(o)
    if alpha is not None and len(alpha) != 1:
        raise InputError(f"option --alphas {o.alphas!r}: --suite twins takes one level")
    try:
        cfg = TwinsSuiteConfig(**{k: v for k, v in {
            "testbed": o.testbed, "trials": o.trials, "alpha": alpha[0] if alpha else None, "limit": o.limit,
            "seed": o.seed, "out": str(o.out) if o.out else None}.items() if v is not None})
    except pydantic.ValidationError as e:
        raise input_error(e, {"alpha": "alphas"}) from None
    from trainspotter.flows.twins_suite import twins_suite_flow

    res = _run_flow(twins_suite_flow, cfg, o.tracking_uri, o.refresh, o.json_out)
    if o.json_out:
        return emit_json(res)
    _print_twins(res)


def _keyed(o: BenchmarkOptions) -> None:
    """``--suite keyed``: a keyed release's audit on a keyed testbed (trainspotter.evaluation.keyed_suite)."""
    from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig
    from trainspotter.presets import TESTBEDS, check_testbed

    testbed = check_testbed(o.testbed or "tiny-pretrain-keyed")
    if not TESTBEDS[testbed].recipe.get("keyed"):
        keyed = ", ".join(n for n, t in TESTBEDS.items() if t.recipe.get("keyed"))
        raise InputError(f"option --testbed: --suite keyed needs a keyed testbed ({keyed}); {testbed} is not one")
    alpha = _alphas(o)
    if alpha is not None and len(alpha) != 1:
        raise InputError(f"option --alphas {o.alphas!r}: --suite keyed takes one level")
    try:
        cfg = KeyedSuiteConfig(**(_load_yaml(o.config) | {k: v for k, v in {
            "testbed": testbed, "trials": o.trials, "alpha": alpha[0] if alpha else None, "seed": o.seed,
            "out": str(o.out) if o.out else None}.items() if v is not None}))
    except pydantic.ValidationError as e:
        raise input_error(e, {"alpha": "alphas"}) from None
    if cfg.original:
        from trainspotter.backends import parse_spec, resolve_spec

        resolve_spec(parse_spec(cfg.original))
    from trainspotter.flows.keyed_suite import keyed_suite_flow

    res = _run_flow(keyed_suite_flow, cfg, o.tracking_uri, o.refresh, o.json_out)
    if o.json_out:
        return emit_json(res)
    _print_keyed(res)


def _print_keyed(res: dict) -> None:
    """The keyed suite's tables (keyed-suite.md has them whole): power on the members' release,
    then each test's "trained on" rate over fresh keys on models that never saw a release."""
    cfg = res["config"]
    t = folded_table(f"{res['testbed']}: {res['members']} members, {100 * res['member_fraction']:.1f}% of the "
                     f"tokens, {cfg['trials']} trials, α = {cfg['alpha']:g}",
                     ("access", "budget", "TPR", "unweighted", "median to decision", "fixed-n", "STAMP", "key rank"))
    for access, unit in (("black", "tokens"), ("choice", "tokens"), ("gray", "passages")):
        r = res.get(access)
        if r is None:
            t.add_row(access, "–", "not measured", "", "", "", "", "")
            continue
        t.add_row(access, f"{r['budget']} {unit}", f"{r['tpr']:.2f}", f"{r['flat_tpr']:.2f}",
                  f"{r['median_to_decision']:.0f}",
                  f"{r['fixed_power']:.2f}", f"{r['stamp_power']:.2f}", f"{r['rank_power']:.2f}")
    _console.print(t)
    h = folded_table(f"H0: \"trained on\" rate over {cfg['random_keys']} fresh keys (never seen)",
                     ("model", "access", "e-process", "fixed-n", "STAMP", "key rank"))
    for model, rows in res["h0"].items():
        for access, row in rows.items():
            h.add_row(model, access, *(f"{row[k]['rate']:.3f}" if k in row else "–"
                                       for k in ("eprocess", "fixed_n", "stamp", "rank")))
    _console.print(h)
    _console.print(f"report {res['files']['table']}, plot {res['files']['plot']}")
    _console.print(f"MLflow run {res['run_id']}")


def _print_twins(res: dict) -> None:
    """The suite's compact tables: the paired AUROC, then every DI row (members and H0)."""
    a = folded_table(f"AUROC, {res['members']} members vs {res['nonmembers']} (k = {res['k']})",
                     ("feature", "paired", "TPR@1%FPR", "unpaired"))
    for col, r in res["auroc"].items():
        a.add_row(col, f"{r['paired']:.3f}", f"{r['tpr_at_1pct_fpr']:.3f}", f"{r['unpaired']:.3f}")
    _console.print(a)
    t = folded_table(f"Dataset inference, {res['trials']} trials, α = {res['alpha']:g}",
                     ("row", "TPR", "mean pairs", "95% by", "H0 rate", "H0 p"))
    for label, h1, h0 in _di_rows(res):
        t.add_row(label, f"{h1['rate']:.3f}", f"{h1['mean_pairs_to_decision']:.1f}",
                  str(h1["pairs_for_95pct"] or "–"), f"{h0['rate']:.3f}", f"{h0['p_above_alpha']:.2g}")
    _console.print(t)
    _console.print(f"report {res['files']['table']}, plot {res['files']['plot']}")
    _console.print(f"MLflow run {res['run_id']}")


def _di_rows(res: dict):
    """(label, members' row, H0 row) of the twins e-process and of the unpaired audit (H0: the pooled control)."""
    from trainspotter.evaluation.twins_suite import SUBSETS

    for name in SUBSETS:
        for mode, shown in (("mean", "all"), ("one", "one")):
            yield (f"twins {shown}, {name}", res["twins"][f"members, {mode}: {name}"],
                   res["twins"][f"nonmembers, {mode}: {name}"])
    for scorer in ("online", "fixed"):
        yield (f"unpaired, lean ({scorer})", res["unpaired"][f"unpaired, members against held-out: lean ({scorer})"],
               res["unpaired"][f"unpaired, pooled control (H0, a fresh split per trial): lean ({scorer})"])


def _tddbench(cfg, tracking_uri, refresh, json_out) -> None:
    """``--suite tddbench``: TDDBench's protocol (trainspotter.evaluation.tddbench)."""
    from trainspotter.evaluation.tddbench import PARADIGMS
    from trainspotter.flows.benchmark import tddbench_flow

    res = _run_flow(tddbench_flow, cfg, tracking_uri, refresh, json_out)
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
    if suite == "shift":
        return _shift(o)
    if suite == "twins":
        return _twins(o)
    if suite == "keyed":
        return _keyed(o)
    if suite not in ("mia", "tddbench"):
        raise InputError(f"option --suite {suite!r}: expected mia, tddbench, shift, twins or keyed")
    cfg = _mia_config(o)
    if suite == "tddbench":
        return _tddbench(cfg.model_copy(update={"di_access": ()}), tracking_uri, refresh, json_out)
    from trainspotter.flows.benchmark import benchmark_flow

    res = _run_flow(benchmark_flow, cfg, tracking_uri, refresh, json_out)
    return emit_json(res) if json_out else _print_mia(res, cfg.testbed)


def _mia_config(o: BenchmarkOptions):
    """The BenchmarkConfig of --suite mia or tddbench: the YAML file, then the options; the
    checks that need no flow (perturbation kinds, the reference bank) before any runs."""
    base = _load_yaml(o.config)
    features = dict(base.pop("features", None) or {})
    if o.perturbation_kinds is not None:
        features["perturbation_kinds"] = _csv(o.perturbation_kinds)
    alpha_values = _alphas(o)
    di_access = [] if o.di_access == "none" else choices(Access, "di-access", o.di_access)
    cfg = _config(base, {"testbed": o.testbed, "methods": _csv(o.methods), "reference": o.reference or None,
                         "reference_models": o.reference_models, "trials": o.trials, "null_trials": o.null_trials,
                         "n_max": o.n_max, "strategies": _csv(o.strategies), "payoffs": _csv(o.payoffs),
                         "di_access": di_access, "alphas": alpha_values, "limit": o.limit,
                         "cost_samples": o.cost_samples, "cost_repeats": o.cost_repeats, "n_boot": o.n_boot,
                         "seed": o.seed, "partitions": o.partitions, "features": features or None,
                         "out": str(o.out) if o.out else None})
    from trainspotter.features.perturb import check_kinds

    check_kinds(cfg.features.kinds)  # WordNet for synonym, before any flow starts
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
