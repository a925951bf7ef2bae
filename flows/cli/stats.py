"""`trainspotter test` and `trainspotter simulate`: the statistics verbs.

Plain typer command functions, registered by flows/cli/command.py. They read a
features table (Parquet or CSV: a `set` column in {suspect, heldout} and one
numeric column per feature), call the library (trainspotter.stats.sequential /
trainspotter.stats.simulation) and print a short table or JSON. Bad input raises
InputError, which the main CLI turns into one "error: …" line and exit 2.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import pydantic
import typer
from rich.console import Console
from rich.table import Table

from trainspotter.auditing.tables import pollution, run_test, simulate
from trainspotter.auditing.verdict import format_e
from trainspotter.data import read_features
from trainspotter.errors import InputError
from trainspotter.flows.cli.common import (ALPHA, JSON, LAMBDA_MAX_HELP, PAYOFF_HELP, SCORER, SEED, STRATEGY_HELP,
                                           Payoff, Scorer, Strategy, choice, emit_json, input_error)
from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS
from trainspotter.stats.sequential import TestConfig

_console = Console()

_DEFAULT = TEST_PRESETS[DEFAULT_PRESET]  # the audit's default test (docs/guide/benchmarks.md, "Defaults")
STRATEGY = choice(Strategy, "strategy", _DEFAULT["strategy"], STRATEGY_HELP + ".")
PAYOFF = choice(Payoff, "payoff", _DEFAULT["payoff"], PAYOFF_HELP + ".")
LAMBDA_MAX = typer.Option(_DEFAULT["lambda_max"], help=LAMBDA_MAX_HELP + ".")


def _config(**kw) -> TestConfig:
    kw = {k: v.value if isinstance(v, Enum) else v for k, v in kw.items()}
    try:
        return TestConfig(**kw)
    except pydantic.ValidationError as e:
        raise input_error(e) from None


def _with_file(path: Path, fn):
    try:
        return fn()
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _table(title: str, rows: list[tuple[str, object]], caption: str | None = None) -> None:
    t = Table(title=title, show_header=False, caption=caption, caption_justify="left")
    t.add_column("", style="bold")
    t.add_column("")
    for k, v in rows:
        t.add_row(k, _fmt(v))
    _console.print(t)


def test_cmd(
    table: Path = typer.Argument(..., help="Features table (.parquet or .csv) with a `set` column."),
    alpha: float = ALPHA,
    strategy: Strategy = STRATEGY,
    payoff: Payoff = PAYOFF,
    lambda_max: float = LAMBDA_MAX,
    scorer: Scorer = SCORER,
    seed: int = SEED,
    json_out: bool = JSON,
) -> None:
    """Run the anytime-valid sequential test on a features table. Rows are paired as `audit`
    pairs passages with the same --seed (each side's rows in file order, as `extract
    --suspect A --heldout B` writes them), so the table of an audit's files gives that
    audit's e-value; re-ordered rows, a capped (--max-pairs) or continued audit do not."""
    config = _config(alpha=alpha, strategy=strategy, payoff=payoff, lambda_max=lambda_max, scorer=scorer, seed=seed)
    df = read_features(table)
    out = _with_file(table, lambda: run_test(df, config))
    if json_out:
        return emit_json(out)
    from trainspotter.auditing.explain import TEST_ALONE_CAPTION

    verdict = "reject H0: the features separate the sets" if out["reject"] else "no rejection"
    _table(f"Sequential test ({config.strategy}/{config.payoff}, α = {alpha})", [
        ("decision", verdict),
        ("e-value", format_e(out["e_value"], alpha)), ("max wealth", format_e(out["max_wealth"], alpha)),
        ("p-value (anytime)", out["p_value"]), ("stop time", out["stop_time"]), ("pairs used", out["pairs_used"]),
        ("pairs available", out["pairs_available"]), ("features", len(out["feature_cols"])),
    ], caption=TEST_ALONE_CAPTION)


test_cmd.__test__ = False  # a CLI verb, not a pytest test


def _pollution(path: Path, df, config: TestConfig, ratios: str, trials: int, n_max: int | None, seed: int,
               json_out: bool) -> None:
    try:
        values = tuple(float(r) for r in ratios.split(","))
    except ValueError:
        raise InputError(f"option --pollution {ratios!r}: expected comma-separated fractions") from None
    if not all(0.0 <= r < 1.0 for r in values):
        raise InputError(f"option --pollution {ratios!r}: every fraction must lie in [0, 1)")
    out = _with_file(path, lambda: pollution(df, config, values, trials, n_max, seed))
    if json_out:
        return emit_json(out)
    t = Table(title=f"Held-out pollution: {trials} trials × {out['pairs']} pairs ({config.strategy}/{config.payoff})")
    for col in ("pollution", "rejection rate", "rejecting: mean pairs", "pairs to decision (censored)"):
        t.add_column(col)
    for ratio, r in out["ratios"].items():
        t.add_row(f"{float(ratio):.0%}", f"{r['rejection_rate']:.3f}", _fmt(r["mean_stop"]), f"{r['censored_pairs']:.1f}")
    _console.print(t)


def simulate_cmd(
    table: Path = typer.Argument(..., help="Features table (.parquet or .csv) with a `set` column."),
    trials: int = typer.Option(200, min=1, help="Monte Carlo trials (random orders)."),
    null: bool = typer.Option(False, "--null", help="Compare two random halves of the held-out rows (FPR)."),
    n_max: int | None = typer.Option(None, min=1, help="At most this many pairs per trial."),
    alpha: float = ALPHA,
    strategy: Strategy = STRATEGY,
    payoff: Payoff = PAYOFF,
    lambda_max: float = LAMBDA_MAX,
    scorer: Scorer = SCORER,
    seed: int = SEED,
    pollution: str | None = typer.Option(None, help="Comma-separated fractions of the held-out stream to "
                                         "replace by suspect rows outside the trial's suspect stream (members "
                                         "leaking into the held-out set, BADI App. D.6), e.g. 0,0.1,0.25,0.5: "
                                         "rejection rate and pairs to decision per fraction."),
    json_out: bool = JSON,
) -> None:
    """Monte Carlo TPR/FPR and stopping times of the sequential test (paper Sec. 5.1)."""
    if null and pollution is not None:  # pollution trials are suspect vs held-out: --null was dropped silently
        raise InputError("option --null: does not apply with --pollution, which replaces part of the held-out "
                         "stream of suspect-vs-held-out trials; give one or the other")
    config = _config(alpha=alpha, strategy=strategy, payoff=payoff, lambda_max=lambda_max, scorer=scorer,
                     seed=seed)
    df = read_features(table)
    if pollution is not None:
        return _pollution(table, df, config, pollution, trials, n_max, seed, json_out)
    out = _with_file(table, lambda: simulate(df, config, trials=trials, n_max=n_max, null=null, seed=seed))
    if json_out:
        return emit_json(out)
    mean, std = out["mean_stop"], out["std_stop"]
    _table(f"Simulation: {trials} trials × ≤{out['pairs']} pairs ({'null' if null else 'suspect vs held-out'})", [
        ("FPR" if null else "TPR", out["rejection_rate"]),
        ("stop time (mean ± std)", "—" if mean is None else f"{mean:.1f} ± {std:.1f}"),
        ("α", alpha), ("strategy / payoff", f"{config.strategy} / {config.payoff}"),
    ])
