"""`trainspotter audit`, `demo` and `ledger show`: an audit of suspect passages against held-out ones
(flows/audit.py: MLflow, the sealed record), the demo's two audits of a testbed, and the stored
evidence of recurring audits. Exit 3 when a guard makes the verdict inconclusive."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from trainspotter.auditing.verdict import format_e
from trainspotter.backends.api.positions import bound_note
from trainspotter.errors import InputError
from trainspotter.flows.cli.common import (ACCESS_HELP, ACCESS_WORDS, ALPHA, COMMITMENT, DASK_ADDRESS, FEATURES_HELP,
                                           JSON, LAMBDA_MAX_HELP, LEDGER, MAX_PAIRS, MODEL, PAYOFF_HELP, REFERENCE,
                                           REFRESH, SCORER_HELP, SEED, SHIFT_CHECK_HELP, STRATEGY_HELP, TESTBED_HELP,
                                           TEXT_COLUMN, TEXT_FEATURES_HELP, TRACKING_URI, TWINS_PRIVATE, Access,
                                           FeatureSet, Payoff, Scorer, ShiftCheck, Strategy, TextFeatures, TwinsPrivate,
                                           Typer, choice,
                                           commitment_digest, decision, edge_specs, emit_json, folded_table,
                                           input_error, progress_lines, TEST_OPTIONS)
from trainspotter.flows.cli.verify import RECORD, SIGN, print_record, record_options, write_record
from trainspotter.presets import (DEFAULT_PRESET, TEST_PRESETS, TWINS_PRESET, UNGUARDED_MIN_PAIRS, check_testbed,
                                  describe)

ledger_app = Typer(help="Evidence ledgers of recurring audits.",
                   short_help="Show the evidence ledgers of recurring audits.", no_args_is_help=True)
console = Console(stderr=True)
INCONCLUSIVE_EXIT = 3  # the audit ran, but its sets were not exchangeable (docs/guide/heldout.md)
DEMO_FIRST_RUN = "a first run builds the testbed (tiny: about 2-3 min on 2 CPU cores), later runs reuse it"


def _results_table(results: list[dict], title: str) -> Table:
    """One row per result; every value on one line (else a vertical layout: ``FittedTable``), and an
    API audit's usage beside its verdict."""
    from trainspotter.auditing.explain import BASELINE_CAPTION

    api = any(r.get("usage") for r in results)
    table = folded_table(title, ("set", "pairs used", "e-value", "p-value (anytime)", "DI p-value (fixed n)",
                                 "blind check e-value", *(["API usage"] if api else []), "decision"),
                         caption=BASELINE_CAPTION, caption_justify="left", whole=True)
    for r in results:
        baseline, blind = r.get("baseline_p_value"), r["blind"]
        table.add_row(r.get("set", r.get("name", "")), f"{r['pairs_used']} / {r['pairs_available']}",
                      format_e(r["e_value"], r["alpha"]), f"{r['p_value']:.3g}",
                      "—" if baseline is None else f"{baseline:.3g}",
                      f"{blind['e_value']:.3g}", *([usage_cell(r.get("usage"))] if api else []), decision(r))
    return table


def usage_cell(usage: dict | None) -> str:
    """An API audit's spend in one line: requests, tokens, cost, and where the answers came from."""
    if not usage:
        return "—"
    spent = f"{usage['requests']:g} requests, {usage['total_tokens']:g} tokens, cost {usage['cost']:.4g}"
    source = usage.get("served_from", "api")
    return spent if source == "api" else f"{spent} ({'from the cache' if source == 'cache' else source})"


def audit_title(kind: str, alpha: float, model: str, access: str) -> str:
    """The results table's title: what was audited, which model and how (access)."""
    return f"{kind} of {model}, {ACCESS_WORDS[access]} (α = {alpha})"


def _print_results(results: list[dict], title: str) -> None:
    """The results table, then per result its run, plot, explanation (what the verdict rests on and
    the next step) and notes."""
    out = Console()
    out.print(_results_table(results, title))
    for r in results:  # each set's name first: what follows is about that set alone
        label = r.get("set", r["name"])
        out.print(f"[bold]{label}[/bold]: MLflow run {r['run_id']} (experiment {r['experiment']})")
        # a path on a line of its own, never broken (one that is wider than the terminal wraps there)
        out.print(f"  plot: {r['plot']}", markup=False, highlight=False, soft_wrap=True)
        # what the verdict rests on and what to do next, how little a black-box "no" says, and what a
        # matched audit assumes
        out.print(f"{label}: {r['explanation']}", markup=False, highlight=False)
        if r["verdict"] != "inconclusive" and r["baseline_disagrees"]:
            out.print(f"{label}: {r['baseline_note']}", markup=False, highlight=False)
        if note := bound_note(r.get("usage")):  # over an API: log-probs that are bounds, not values
            out.print(f"{label}: {note}", markup=False, highlight=False)
        print_record(out, r)


def demo_cmd(testbed: str = typer.Option("tiny", help=TESTBED_HELP + "."),
         alpha: float = ALPHA,
         max_pairs: Optional[int] = MAX_PAIRS,
         seed: int = SEED,
         tracking_uri: Optional[str] = TRACKING_URI,
         json_out: bool = JSON) -> None:
    """Audit a testbed's members (must reject) and non-members (must not) vs held-out."""
    check_testbed(testbed)
    # at once, before seconds of imports and the local Prefect API: what runs, and for how long
    console.print(f"demo: two audits of testbed {testbed!r} (members: must say trained on; non-members: must "
                  f"not); {DEMO_FIRST_RUN}", markup=False, highlight=False)
    from trainspotter.flows.demo import demo_flow

    with progress_lines(transient=json_out):
        results = demo_flow(testbed=testbed, alpha=alpha, seed=seed, max_pairs=max_pairs,
                            tracking_uri=tracking_uri)
    if json_out:
        return emit_json(results)
    _print_results(results, audit_title(f"Demo audit on testbed {testbed!r}", alpha, f"testbed:{testbed}", "gray"))


def audit_cmd(suspect: Optional[list[Path]] = typer.Option(None, help="Suspect passages: JSONL, Parquet, CSV, txt, a folder of "
                                                       "txt files, a saved HF dataset or one on the hub, "
                                                       "hf:ORG/NAME, then :CONFIG, /SPLIT and @REVISION, "
                                                       "each optional. "
                                                       "Repeat for several sets: "
                                                       "e-BH then decides at false discovery rate α."),
          heldout: Optional[Path] = typer.Option(None, help="Held-out passages known not to be trained on."),
          text_column: Optional[str] = TEXT_COLUMN,
          twins: Optional[Path] = typer.Option(None, help="A twins folder (`trainspotter twins make`) instead of "
                                                          "--suspect and --heldout: each passage's public version "
                                                          "against its private twins (--twins-private)."),
          twins_private: Optional[TwinsPrivate] = TWINS_PRIVATE,
          commitment: Optional[str] = COMMITMENT,
          model: str = MODEL,
          reference: Optional[list[str]] = REFERENCE,
          access: Access = choice(Access, "access", "gray", ACCESS_HELP),
          features: FeatureSet = choice(FeatureSet, "features", "lean", FEATURES_HELP),
          alpha: float = ALPHA,
          max_pairs: Optional[int] = MAX_PAIRS,
          name: str = typer.Option("audit", help="Audit name (MLflow experiment audit/NAME)."),
          preset: Optional[str] = typer.Option(
              None, help="Named test settings: " + " or ".join(map(describe, TEST_PRESETS)) + "; badi is the "
                         f"paper's. Default: {DEFAULT_PRESET} ({TWINS_PRESET} with --twins). Explicit --strategy, "
                         "--payoff, --lambda-max, --scorer win."),
          strategy: Optional[Strategy] = choice(Strategy, "strategy", None, STRATEGY_HELP + " (default: from the preset)."),
          payoff: Optional[Payoff] = choice(Payoff, "payoff", None, PAYOFF_HELP + " (default: from the preset)."),
          lambda_max: Optional[float] = typer.Option(None, help=LAMBDA_MAX_HELP + " (default: from the preset)."),
          scorer: Optional[Scorer] = choice(Scorer, "scorer", None, SCORER_HELP + " (default: from the preset)."),
          batch_pairs: int = typer.Option(16, help="Pairs queried per batch between stop checks."),
          seed: int = SEED,
          ledger: bool = LEDGER,
          shift_check: ShiftCheck = choice(ShiftCheck, "shift-check", "stop", SHIFT_CHECK_HELP),
          text_features: TextFeatures = choice(TextFeatures, "text-features", "ngrams", TEXT_FEATURES_HELP),
          placebo: Optional[str] = typer.Option(
              None, help="The placebo check's model (a spec, or none to skip the check): once the model's "
                         "e-value reaches 1/α, the same test runs with it in the target's place, and if it "
                         "tells the sets apart too the verdict is inconclusive. Without it the first "
                         "--reference is the placebo model."),
          assume_exchangeable: bool = typer.Option(
              False, "--assume-exchangeable", help="Vouch that the held-out passages are a random part of the suspect set's own "
                          "collection: without a placebo model, a small audit may then say trained on "
                          f"(otherwise it needs {UNGUARDED_MIN_PAIRS} pairs); of twins whose draw the folder does "
                          "not show random, the verdict then rests on your word."),
          tracking_uri: Optional[str] = TRACKING_URI,
          dask_address: Optional[str] = DASK_ADDRESS,
          refresh: bool = REFRESH,
          record: Optional[Path] = RECORD,
          sign: Optional[Path] = SIGN,
          json_out: bool = JSON) -> None:
    """Was SUSPECT used to train MODEL? Sequential test against HELDOUT; with several
    --suspect, which of them were, at false discovery rate α (e-BH)."""
    from pydantic import ValidationError

    from trainspotter.data import load_passages
    from trainspotter.features.features import FEATURE_SETS
    from trainspotter.hub_data import is_hub_dataset
    from trainspotter.stats.sequential import TestConfig

    # Validate everything before any flow starts, so bad input is one clear line.
    if twins is not None and (suspect or heldout is not None):
        raise InputError("option --twins: replaces --suspect and --heldout (the public and private versions of "
                         "the folder's passages); give one or the other")
    for option, value in (("twins-private", twins_private), ("commitment", commitment)):
        if twins is None and value is not None:
            raise InputError(f"option --{option}: applies to a twins audit only; give --twins DIR")
    if twins is None and (not suspect or heldout is None):
        raise InputError(f"option --{'suspect' if not suspect else 'heldout'}: missing; give --suspect FILE and "
                         f"--heldout FILE, or --twins DIR")
    sign_key = record_options(record, sign, len(suspect or [None]))
    passages = {str(path): load_passages(path, text_column if is_hub_dataset(path) else None)
                for path in (*suspect, heldout)} if twins is None else {}
    if text_column is not None and not any(map(is_hub_dataset, (*(suspect or ()), heldout or ""))):
        raise InputError("option --text-column: applies to a dataset named by hub id (hf:ORG/NAME...); "
                         "a local file's text is its `text` field")
    placebo_check = placebo is None or placebo.lower() != "none"
    model, reference, named = edge_specs(model, reference, placebo if placebo_check else None)
    placebo = named[0] if named else None
    explicit = {"strategy": strategy and strategy.value, "payoff": payoff and payoff.value,
                "lambda_max": lambda_max, "scorer": scorer and scorer.value}
    try:
        from trainspotter.auditing.config import AuditConfig
        from trainspotter.loop.inputs import checked_sides
        from trainspotter.loop.sets import AuditSetsConfig, check_sets

        sides = {"twins": str(twins), "twins_commitment": commitment_digest(commitment)} | (
            {"twins_private": twins_private.value} if twins_private else {}) \
            if twins is not None else {"suspect": str(suspect[0]), "heldout": str(heldout)}
        config = AuditConfig(name=name, **sides, model=model,
                             reference=reference, access=access.value, features=FEATURE_SETS[features.value],
                             max_pairs=max_pairs, batch_pairs=batch_pairs, seed=seed, ledger=ledger,
                             **({"preset": preset} if preset else {}), shift_check=shift_check.value, placebo=placebo,
                             placebo_check=placebo_check, assume_exchangeable=assume_exchangeable,
                             text_features=text_features.value,
                             test=TestConfig(alpha=alpha, seed=seed,
                                             **{k: v for k, v in explicit.items() if v is not None}))
    except ValidationError as e:
        raise input_error(e, TEST_OPTIONS) from None
    from trainspotter.features.perturb import check_kinds

    check_kinds(config.features.kinds)  # WordNet, before any flow starts
    # checked once, before any model loads; the flow's audit takes them as checked (loop.inputs.Checked)
    if len(suspect or []) > 1:  # several sets, one held-out set: e-BH over their audits
        config = AuditSetsConfig(**{k: v for k, v in config if k != "suspect"}, suspect=list(map(str, suspect)))
        passages = check_sets(config, passages)
    else:  # (twins: the checked folder's public versions and its private twins, all or one each)
        passages = checked_sides(config, passages)
    from trainspotter.tasks.worker import serving

    # The models every batch needs load in a worker process while this one imports Prefect and MLflow.
    with serving(() if dask_address else (config.model, *config.reference)):
        total, start = _pairs_to_query(passages, suspect or [config.suspect], config.heldout, max_pairs,
                                       name if ledger else None)
        result = _run_audit(config, passages, (total, start), tracking_uri, dask_address, refresh, sign_key,
                            transient=json_out)
    write_record(result, record)
    if json_out:
        emit_json(result)
    elif len(suspect or []) > 1:
        _print_sets(result)
    else:
        _print_results([result], audit_title(f"Audit {name!r}", alpha, config.model.base, access.value))
    if any(r["verdict"] == "inconclusive" for r in result.get("sets", [result])):
        raise typer.Exit(INCONCLUSIVE_EXIT)


def _run_audit(config, passages: dict, pairs: tuple[int, float], tracking_uri: str | None,
               dask_address: str | None, refresh: bool, sign_key, transient: bool) -> dict:
    """The audit flow on the local Prefect API; a progress bar of ``pairs`` (most queried, e before)."""
    from trainspotter.flows.audit import AuditSetsConfig, audit_runner, run_audit_on
    from trainspotter.tasks.cache import refreshing
    from trainspotter.tasks.server import use_local_api

    runner = audit_runner(config, dask_address)  # a Dask cluster checked, before the progress bar
    use_local_api()  # before refreshing(), whose settings context would not see it
    with _audit_progress(*pairs, transient=transient) as progress, refreshing(refresh):
        result = run_audit_on(runner, config, tracking_uri, dask_address is not None, progress=progress,
                              passages=passages, sign_key=sign_key)
        if not isinstance(config, AuditSetsConfig):  # the bar ends on the result's e-value, also when nothing was queried
            progress(result["pairs_queried"], result["e_value"])
    return result


def _print_sets(summary: dict) -> None:
    """An audit of several suspect sets: one row per set, decided by e-BH (its caption says
    what that controls), then each set's inconclusive explanation and where the runs are."""
    from trainspotter.auditing.explain import EBH_CAPTION

    table = folded_table(f"Audit {summary['name']!r}: {len(summary['sets'])} suspect sets, e-BH at FDR "
                         f"α = {summary['alpha']:g}", ("set", "pairs used", "e-value", "blind check", "decision"),
                         caption=EBH_CAPTION, caption_justify="left", whole=True)
    for s in summary["sets"]:
        r = s["result"]
        table.add_row(s["label"], f"{r['pairs_used']} / {r['pairs_available']}", format_e(r["e_value"], r["alpha"]),
                      f"fired ({r['blind']['e_value']:.3g})" if r["blind"]["fired"] else f"{r['blind']['e_value']:.3g}",
                      decision({"verdict": s["verdict"], "guard": s["result"].get("guard")}))
    out = Console()
    out.print(table)
    for s in summary["sets"]:
        if s["verdict"] == "inconclusive":
            out.print(f"{s['label']}: {s['result']['explanation']}", markup=False, highlight=False)
    out.print(f"[bold]e-BH[/bold]: MLflow run {summary['run_id']} (experiment {summary['experiment']}, one "
              f"nested run per set), report {summary['report']}")


def _pairs_to_query(passages: dict, suspect: list, heldout, max_pairs: int | None,
                    ledger: str | None) -> tuple[int, float]:
    """At most how many pairs this run queries, and the e-value it starts from: for a recurring
    audit (``ledger``: its name), the pairs not bet on before and the stored e-value."""
    from trainspotter.loop.ledger import load_ledger

    stored = load_ledger(ledger) if ledger and len(suspect) == 1 else None
    used = {side: set(ids) for side, ids in stored["used"].items()} if stored else {}
    fresh = lambda path, side: [p for p in passages[str(path)] if p["id"] not in used.get(side, ())]  # noqa: E731
    held = len(fresh(heldout, "heldout"))
    total = sum(min(len(fresh(s, "suspect")), held, max_pairs or held) for s in suspect)
    return total, (stored["runs"][-1]["e_value"] if stored and stored["runs"] else 1.0)


@contextmanager
def _audit_progress(total: int, start: float, transient: bool):
    """A progress bar on stderr: pairs queried (of at most ``total``) and the current
    e-value (``start`` before the first batch); yields the ``progress(pairs queried, e-value)``
    callback of ``run_audit``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress("pairs queried", BarColumn(), MofNCompleteColumn(), TextColumn("e-value {task.fields[e]:.3g}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=transient) as bar:
        task = bar.add_task("audit", total=total, e=start)
        yield lambda done, e: bar.update(task, completed=min(done, total), e=e)


@ledger_app.command("show", short_help="Show each run of a recurring audit: pairs and wealth.")
def ledger_show(name: str = typer.Argument(..., help="Audit name."), json_out: bool = JSON) -> None:
    """History of a recurring audit: each run's pairs and wealth before and after."""
    from trainspotter.loop.ledger import ledger_path, load_ledger

    ledger = load_ledger(name)
    if ledger is None:
        raise InputError(f"{ledger_path(name)}: no ledger for audit {name!r} (run `trainspotter "
                         f"audit --name {name} --ledger ...` first)")
    runs = ledger["runs"]
    if json_out:
        return emit_json({"name": name, "columns": ledger.get("columns"), "runs": runs,
                           "pairs_used": {k: len(v) for k, v in ledger["used"].items()}})
    table = folded_table(f"Evidence ledger {name!r}",
                         ("run", "model", "pairs added", "pairs total", "wealth start → end", "verdict"), whole=True)
    for r in runs:  # runs recorded before the blind check have no verdict of their own
        verdict = r.get("verdict") or ("trained on" if r["reject"] else "no evidence")
        table.add_row(r["run_id"][:8], r["model"], str(r["pairs_added"]), str(r["pairs_total"]),
                      f"{r['wealth_start']:.3g} → {r['wealth_end']:.3g}", decision({"verdict": verdict}))
    Console().print(table)
