"""`trainspotter features list` and `trainspotter extract`: the feature catalogue and
library feature extraction (trainspotter.features.extract.extract) from the command line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trainspotter.flows.cli.common import (ACCESS_HELP, DASK_ADDRESS, FEATURES_HELP, JSON, MODEL, REFERENCE, REFRESH, SEED,
                                           Access, FeatureSet, Typer, choice, count_progress, edge_specs, emit_json,
                                           folded_table, input_error)
from trainspotter.errors import InputError

features_app = Typer(help="Membership features: the catalogue.", no_args_is_help=True)


@features_app.command("list", short_help="List the feature sets and families; --all: every column.")
def list_cmd(access: Access = choice(Access, "access", "both", ACCESS_HELP),
             all_: bool = typer.Option(False, "--all", help="Every feature column (name, access, models, "
                                                           "member-like direction, definition, source) and "
                                                           "the per-sample methods that read them."),
             json_out: bool = JSON) -> None:
    """The named feature sets of `audit --features` and `extract --features` with the columns in
    each, and one line per feature family; with --all every feature column: name, access level,
    models needed, which way is member-like (the test's scorer keeps that direction),
    definition, source; then the per-sample methods that read them (``trainspotter benchmark
    --methods``). --json: every column."""
    from trainspotter.features.catalog import catalog
    from trainspotter.features.features import FeatureConfig

    specs = catalog(FeatureConfig(twin_positions=True), access.value)  # every column, a twins audit's too
    if json_out:
        return emit_json([s.as_dict() for s in specs])
    if not all_:
        return _print_summary(access.value, specs)
    table = folded_table(f"{len(specs)} features ({', '.join(f'{n} {a}' for a, n in Counter(s.access for s in specs).items())})",
                         ("name", "access", "models", "member-like", "definition", "source"))
    for s in specs:
        table.add_row(s.name, s.access, "+".join(s.models), {1: "higher", -1: "lower", 0: "learned"}[s.direction],
                      s.definition, s.source)
    Console().print(table)
    from trainspotter.evaluation.mia import METHODS

    methods = folded_table(f"{len(METHODS)} per-sample methods (benchmark --methods)",
                           ("method", "TDDBench name", "paradigm", "access", "reads", "source"))
    for m in METHODS.values():
        methods.add_row(m.name, m.tddbench or "—", m.paradigm, m.access, ", ".join(m.columns), m.source)
    Console().print(methods)


def family(name: str) -> str:
    """A feature column's family: its name without the access prefix and without the trailing
    parameter (a percent, a perturbation kind, an index): gray_min_k_20 -> min_k_*."""
    from trainspotter.features.perturb import KINDS

    stem = name.split("_", 1)[1]
    for kind in sorted(KINDS, key=len, reverse=True):
        if stem.endswith("_" + kind):
            return stem[: -len(kind)] + "*"
    head, _, tail = stem.rpartition("_")
    return f"{head}_*" if head and tail.isdigit() else stem


def _print_summary(access: str, specs) -> None:
    """The short listing: which columns each named set gives (with one reference model, and
    with two or more), then one row per family."""
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    out = Console()
    sets = folded_table("Feature sets (audit and extract --features; gray access, one reference model)",
                        ("set", "columns"))
    for name, config in FEATURE_SETS.items():
        columns = feature_columns(config, "gray", 1)
        shown = ", ".join(columns) if name != "full" else f"every gray column of the families below ({len(columns)})"
        sets.add_row(name, f"{shown} (+{len(feature_columns(config, 'gray', 2)) - len(columns)} "
                           f"*_refs_* with two or more references)")
    out.print(sets)
    families: dict[str, list] = {}
    for s in specs:
        families.setdefault(family(s.name), []).append(s)
    table = folded_table(f"{len(specs)} columns in {len(families)} families (--all: each column)",
                         ("family", "access", "columns", "needs"))
    for name, members in families.items():
        table.add_row(name, ", ".join(dict.fromkeys(s.access for s in members)), str(len(members)),
                      "+".join(dict.fromkeys(m for s in members for m in s.models)))
    out.print(table)


def _feature_config(features: FeatureSet, chosen: dict, n_references: int):
    """The FeatureConfig of extract: the named set, the options given (not None) winning over it,
    checked before any flow starts (values, WordNet for synonyms, a reference where one is needed)."""
    from pydantic import ValidationError

    from trainspotter.errors import FieldError
    from trainspotter.features.features import FEATURE_SETS, FeatureConfig, check_references
    from trainspotter.features.perturb import check_kinds

    try:
        config = FeatureConfig.model_validate(FEATURE_SETS[features.value].model_dump()
                                              | {k: v for k, v in chosen.items() if v is not None})
    except ValidationError as e:
        raise input_error(e) from None
    check_kinds(config.kinds)
    try:
        check_references(config, n_references)
    except FieldError as e:
        raise InputError(f"option --{e.field}: {e}") from None
    return config


def extract_cmd(data: Optional[Path] = typer.Option(None, help="Passages: JSONL, Parquet, CSV, txt, a folder "
                                                                 "of txt files or a saved HF dataset; a `set` "
                                                                 "field or column (suspect or heldout) on every "
                                                                 "passage is kept."),
                suspect: Optional[Path] = typer.Option(None, help="Suspect passages (instead of --data): "
                                                                  "written with set = suspect."),
                heldout: Optional[Path] = typer.Option(None, help="Held-out passages (with --suspect): "
                                                                  "written with set = heldout."),
                model: str = MODEL,
                reference: Optional[list[str]] = REFERENCE,
                access: Access = choice(Access, "access", "gray", ACCESS_HELP),
                features: FeatureSet = choice(FeatureSet, "features", "lean", FEATURES_HELP),
                out: Path = typer.Option(..., help="Output Parquet file (one row per passage)."),
                seed: int = SEED,
                perturbations: Optional[bool] = typer.Option(None, help="Score the six perturbed variants "
                                                                        "(default: from --features)."),
                sequence: Optional[bool] = typer.Option(None, help="Suffix-generation features, black "
                                                                   "(default: from --features)."),
                estimator: str = typer.Option("sigmoid", help="Black-box estimator: sigmoid, raw or petal."),
                batch_size: int = typer.Option(16, help="Passages per batch of model calls."),
                chunk_size: int = typer.Option(64, help="Passages per cached task: a rerun after "
                                                        "a crash recomputes no finished chunk."),
                dask: bool = typer.Option(False, help="Run the chunks on a local Dask cluster."),
                dask_address: Optional[str] = DASK_ADDRESS,
                refresh: bool = REFRESH,
                json_out: bool = JSON) -> None:
    """Extract membership features of passages under MODEL into a Parquet table (the extract
    flow: chunks are cached tasks, so an interrupted extraction resumes). With --suspect and
    --heldout (or `set` labels in --data) the table has a `set` column and is ready for
    `trainspotter test` and `simulate`."""
    from trainspotter.data import load_labeled

    if out.suffix.lower() != ".parquet":
        raise InputError(f"--out {out}: expected a .parquet file name")
    config = _feature_config(features, {"seed": seed, "estimator": estimator, "batch_size": batch_size,
                                        "perturbations": perturbations, "sequence": sequence}, len(reference or ()))
    passages = load_labeled(data, suspect, heldout)  # bad input fails here, before any flow starts
    model, reference, _ = edge_specs(model, reference)
    if chunk_size < 1:
        raise InputError(f"--chunk-size {chunk_size}: must be at least 1")
    if dask and dask_address:
        raise InputError("--dask starts a local Dask cluster, --dask-address uses an existing one: "
                         "give one of them")
    from trainspotter.flows.extract import ExtractConfig, extract_runner, run_on
    from trainspotter.tasks.server import use_local_api
    from trainspotter.tasks.cache import refreshing

    files = {k: str(v) for k, v in {"data": data, "suspect": suspect, "heldout": heldout}.items() if v}
    flow_config = ExtractConfig(**files, model=model, reference=reference, access=access.value,
                                out=str(out), chunk_size=chunk_size, features=config)
    runner = extract_runner(flow_config, dask, dask_address)  # the cluster options checked, before any bar
    use_local_api()  # before refreshing(), whose settings context would not see it
    with count_progress("extracting features", len(passages), transient=json_out) as progress, refreshing(refresh):
        result = run_on(runner, flow_config, progress=progress, passages=passages)
    if json_out:
        return emit_json(result)
    sets = result["sets"]
    labels = f" ({', '.join(f'{n} {s}' for s, n in sets.items())})" if sets else " (no `set` column)"
    Console().print(f"{result['rows']} passages{labels} × {len(result['features'])} features -> {out} "
                    f"({result['chunks_cached']} of {result['chunks']} chunks from the cache)")
