"""`trainspotter benchmark --suite shift|twins|keyed`: each suite's config built from the options,
its flow run and its tables printed; and what ``benchmark_cmd`` (flows/cli/benchmark.py) shares with
them: the options as given (``BenchmarkOptions``), a YAML configuration, --alphas, a suite's flow
with its progress on stderr."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pydantic
from rich.console import Console

from trainspotter.errors import InputError
from trainspotter.flows.cli.common import emit_json, folded_table, input_error, progress_lines

_console = Console()


def csv_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return [] if items == ["none"] else items


def load_yaml(path: Path | None) -> dict:
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
    dataset: str | None
    model: str | None
    text_column: str | None
    label_column: str | None
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


def alphas_of(o: BenchmarkOptions) -> list[float] | None:
    """--alphas as numbers (None: not given); anything else is one error line."""
    values = csv_list(o.alphas)
    try:
        return None if values is None else [float(a) for a in values]
    except ValueError:
        raise InputError(f"option --alphas {o.alphas!r}: expected comma-separated numbers") from None


def run_suite_flow(flow, config, tracking_uri: str | None, refresh: bool, json_out: bool = False) -> dict:
    """The suite's flow on the local Prefect API (started before refreshing(), whose settings
    context would not see it), with its stages' progress on stderr."""
    from trainspotter.tasks.cache import refreshing

    with progress_lines(transient=json_out), refreshing(refresh):
        return flow(config, tracking_uri=tracking_uri)


def shift_suite(o: BenchmarkOptions) -> None:
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

    res = run_suite_flow(shift_flow, cfg, tracking_uri, refresh, json_out)
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


def twins_suite(o: BenchmarkOptions) -> None:
    """``--suite twins``: what twins buy on a twins testbed (trainspotter.evaluation.twins_suite)."""
    from trainspotter.evaluation.twins_suite import TwinsSuiteConfig, check_twins_testbed

    if o.testbed is None:
        raise InputError("option --testbed: --suite twins needs a twins testbed, e.g. --testbed mini-pretrain-twins")
    check_twins_testbed(o.testbed)  # one line naming it, before any flow starts
    alpha = alphas_of(o)
    if alpha is not None and len(alpha) != 1:
        raise InputError(f"option --alphas {o.alphas!r}: --suite twins takes one level")
    try:
        cfg = TwinsSuiteConfig(**{k: v for k, v in {
            "testbed": o.testbed, "trials": o.trials, "alpha": alpha[0] if alpha else None, "limit": o.limit,
            "seed": o.seed, "out": str(o.out) if o.out else None}.items() if v is not None})
    except pydantic.ValidationError as e:
        raise input_error(e, {"alpha": "alphas"}) from None
    from trainspotter.flows.twins_suite import twins_suite_flow

    res = run_suite_flow(twins_suite_flow, cfg, o.tracking_uri, o.refresh, o.json_out)
    if o.json_out:
        return emit_json(res)
    _print_twins(res)


def keyed_suite(o: BenchmarkOptions) -> None:
    """``--suite keyed``: a keyed release's audit on a keyed testbed (trainspotter.evaluation.keyed_suite)."""
    from trainspotter.evaluation.keyed_suite import KeyedSuiteConfig
    from trainspotter.presets import TESTBEDS, check_testbed

    testbed = check_testbed(o.testbed or "tiny-pretrain-keyed")
    if not TESTBEDS[testbed].recipe.get("keyed"):
        keyed = ", ".join(n for n, t in TESTBEDS.items() if t.recipe.get("keyed"))
        raise InputError(f"option --testbed: --suite keyed needs a keyed testbed ({keyed}); {testbed} is not one")
    alpha = alphas_of(o)
    if alpha is not None and len(alpha) != 1:
        raise InputError(f"option --alphas {o.alphas!r}: --suite keyed takes one level")
    try:
        cfg = KeyedSuiteConfig(**(load_yaml(o.config) | {k: v for k, v in {
            "testbed": testbed, "trials": o.trials, "alpha": alpha[0] if alpha else None, "seed": o.seed,
            "out": str(o.out) if o.out else None}.items() if v is not None}))
    except pydantic.ValidationError as e:
        raise input_error(e, {"test.alpha": "alphas"}) from None
    if cfg.original:
        from trainspotter.backends import parse_spec, resolve_spec

        resolve_spec(parse_spec(cfg.original))
    from trainspotter.flows.keyed_suite import keyed_suite_flow

    res = run_suite_flow(keyed_suite_flow, cfg, o.tracking_uri, o.refresh, o.json_out)
    if o.json_out:
        return emit_json(res)
    _print_keyed(res)


def _print_keyed(res: dict) -> None:
    """The keyed suite's tables (keyed-suite.md has them whole): power on the members' release,
    then each test's "trained on" rate over fresh keys on models that never saw a release."""
    cfg = res["config"]
    t = folded_table(f"{res['testbed']}: {res['members']} members, {100 * res['member_fraction']:.1f}% of the "
                     f"tokens, {cfg['trials']} trials, α = {cfg['test']['alpha']:g}",
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
    for label, h1, h0 in di_rows(res):
        t.add_row(label, f"{h1['rate']:.3f}", f"{h1['mean_pairs_to_decision']:.1f}",
                  str(h1["pairs_for_95pct"] or "–"), f"{h0['rate']:.3f}", f"{h0['p_above_alpha']:.2g}")
    _console.print(t)
    _console.print(f"report {res['files']['table']}, plot {res['files']['plot']}")
    _console.print(f"MLflow run {res['run_id']}")


def di_rows(res: dict):
    """(label, members' row, H0 row) of the twins e-process and of the unpaired audit (H0: the pooled control)."""
    from trainspotter.evaluation.twins_suite import SUBSETS

    for name in SUBSETS:
        for mode, shown in (("mean", "all"), ("one", "one")):
            yield (f"twins {shown}, {name}", res["twins"][f"members, {mode}: {name}"],
                   res["twins"][f"nonmembers, {mode}: {name}"])
    for scorer in ("online", "fixed"):
        yield (f"unpaired, lean ({scorer})", res["unpaired"][f"unpaired, members against held-out: lean ({scorer})"],
               res["unpaired"][f"unpaired, pooled control (H0, a fresh split per trial): lean ({scorer})"])
