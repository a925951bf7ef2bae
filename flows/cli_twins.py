"""`trainspotter twins`: make twins of passages not yet released (trainspotter.twins), and check
a folder's commitment. The library call runs here, not in a Prefect flow or task: the draw and
the keys must never land in an orchestrator's result store or cache, and there is nothing to
cache or retry (a second draw over the same passages is what the commitment rules out)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trainspotter.errors import InputError
from trainspotter.flows.cli_common import JSON, Typer, count_progress, emit_json, folded_table

twins_app = Typer(help="Twins of passages not yet released: k rewrites of each, one drawn at random to "
                       "publish, the others kept, so that a later audit (audit --twins DIR) is exchangeable "
                       "by design.", short_help="Make twins of data before you release it.",
                  no_args_is_help=True)

DEFAULT_UNIT = "sentence"  # a generative rewriter's: how the measured generative testbed was made
WHO = {"public.jsonl": "release", "manifest.json": "publish with it (no secrets)",
       "private.jsonl": "keep secret", "keys.json": "keep secret"}


@twins_app.command("make", short_help="Rewrite each passage k times and draw the public version.")
def make_cmd(passages: list[Path] = typer.Argument(..., help="Passages to protect: JSONL, Parquet, CSV, txt, a "
                                                             "folder of txt files or a saved HF dataset (as "
                                                             "audit's --suspect); several files are joined."),
             out: Path = typer.Option(..., "--out", help="New folder for public.jsonl, private.jsonl, keys.json "
                                                         "and manifest.json."),
             k: int = typer.Option(2, "-k", "--k", help="Variants per passage (≥ 2): one public, k-1 private."),
             rewriter: str = typer.Option("lexical", help="lexical (keyed WordNet rewriter, CPU-cheap), a local "
                                                          "model hf:PATH or testbed:NAME (paraphrases with a "
                                                          "watermark keyed per variant), or an openai:MODEL@URL chat "
                                                          "endpoint (no watermark; key from $OPENAI_API_KEY or "
                                                          "?key_env=VAR)."),
             unit: Optional[str] = typer.Option(None, help="Generative rewriters only: what one generation "
                                                          "paraphrases, sentence or passage (default: "
                                                          f"{DEFAULT_UNIT}). Sentence by "
                                                          "sentence is how the measured generative testbed was made "
                                                          "(tiny-pretrain-twins-smollm2): a small model answers a "
                                                          "whole passage with one or two sentences, a sentence at a "
                                                          "time keeps its length."),
             rate: Optional[float] = typer.Option(None, help="Lexical rewriter only: the share of rewritable words "
                                                             "each variant's key rewrites (default: each key picks "
                                                             "uniformly among a word and its alternatives, so two "
                                                             "variants differ as often as they can)."),
             senses: int = typer.Option(2, min=1, help="Lexical rewriter only: alternatives from the word's N most "
                                                       "frequent WordNet senses (more: more edits, less faithful)."),
             max_edit_rate: Optional[float] = typer.Option(None, help="A variant changing more of the passage's "
                                                                      "words is redrawn (default: 0.5 lexical, 1.0 "
                                                                      "generative)."),
             min_similarity: Optional[float] = typer.Option(None, help="A variant whose MiniLM similarity to the "
                                                                       "original is lower is redrawn (default: none "
                                                                       "lexical, 0.7 generative)."),
             similarity: bool = typer.Option(True, "--similarity/--no-similarity",
                                             help="Score each variant's MiniLM similarity to the original."),
             json_out: bool = JSON) -> None:
    """Rewrite each passage k times (default: the keyed lexical rewriter, WordNet alternatives, each
    variant's secret key choosing consistently across the dataset; --rewriter hf:PATH: a model's
    paraphrases, each variant watermarked with its own key), draw per passage with a cryptographic
    generator which variant is public, and write the folder with a commitment to the draw. Release
    public.jsonl (and manifest.json); keep private.jsonl and keys.json secret."""
    from trainspotter.features.perturb import wordnet_root
    from trainspotter.twins.folder import write_twins
    from trainspotter.twins.generative import GenerativeRewriter, make_rewriter
    from trainspotter.twins.make import GATES, make_twins

    _check_options(k, rate, max_edit_rate, min_similarity, unit, out)
    try:
        rewriter_ = make_rewriter(rewriter, unit or DEFAULT_UNIT, rate=rate, senses=senses)
    except InputError as e:
        raise InputError(f"option --rewriter: {e}") from None
    generative = isinstance(rewriter_, GenerativeRewriter)
    if unit is not None and not generative:
        raise InputError("option --unit: applies to a generative rewriter (hf:, testbed:, openai:); the lexical "
                         "rewriter rewrites word by word")
    if generative:
        from trainspotter.backends import check_server
        from trainspotter.backends.spec import check_loadable

        if not rewriter_.spec.remote:
            check_loadable(rewriter_.spec)  # a folder that is not a model: one line now, not after minutes
        check_server(rewriter_.spec)  # an openai: endpoint that nobody answers: one line now, not per passage
    rows = _read_passages(passages)
    if not generative:
        wordnet_root()  # AssetMissing (one line) before any work
    gate = GATES["generative" if generative else "lexical"] | {
        name: value for name, value in (("max_edit_rate", max_edit_rate), ("min_similarity", min_similarity))
        if value is not None}
    with count_progress("passages rewritten", len(rows), transient=json_out) as progress:
        twins = make_twins(rows, k, rewriter_, similarity=similarity, progress=progress, **gate)
    if not twins.ids:
        if generative:
            raise InputError(f"{passages[0]}: no passage got {k} variants that pass the gate (--max-edit-rate "
                             f"{gate['max_edit_rate']}, --min-similarity {gate['min_similarity']}) within "
                             f"{gate['retries']} redraws; try another model or --rewriter lexical")
        raise InputError(f"{passages[0]}: no passage got {k} distinct variants (too short, or no word WordNet can "
                         f"rewrite); try a larger --rate or --senses")
    write_twins(twins, out)
    m = twins.manifest
    summary = {"out": str(out.resolve()), "k": k, "passages": m["passages"], "skipped": m["skipped"],
               "rewriter": m["rewriter"], "redrawn": m["redrawn"], "quality": m["quality"],
               "commitment": m["commitment"]["digest"],
               "files": {f: {"sha256": m["files"].get(f), "who": WHO[f]} for f in WHO}}
    if json_out:
        return emit_json(summary)
    _print_made(m, out, k)


def _check_options(k: int, rate: float | None, max_edit_rate: float | None, min_similarity: float | None,
                   unit: str | None, out: Path) -> None:
    from trainspotter.twins.generative import UNITS

    if k < 2:
        raise InputError(f"option -k: {k}; twins need at least 2 variants per passage (one public, one private)")
    if rate is not None and not 0.0 < rate <= 1.0:
        raise InputError(f"option --rate: {rate} is not in (0, 1]")
    if max_edit_rate is not None and not 0.0 < max_edit_rate <= 1.0:
        raise InputError(f"option --max-edit-rate: {max_edit_rate} is not in (0, 1]")
    if min_similarity is not None and not -1.0 <= min_similarity < 1.0:
        raise InputError(f"option --min-similarity: {min_similarity} is not in [-1, 1)")
    if unit is not None and unit not in UNITS:
        raise InputError(f"option --unit: {unit!r}; expected {' or '.join(UNITS)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"option --out: {out}: exists and is not an empty folder; twins go to a new folder")


def _read_passages(passages: list[Path]) -> list[dict]:
    from trainspotter.data import load_passages

    rows, origin = [], {}
    for path in passages:
        for p in load_passages(path):
            if p["id"] in origin:
                raise InputError(f"{path}: passage id {p['id']!r} is also in {origin[p['id']]}; twins are matched "
                                 f"by id, so ids must be unique")
            origin[p["id"]] = path
            rows.append(p)
    return rows


def _print_made(m: dict, out: Path, k: int) -> None:
    table = folded_table(f"Twins of {m['passages']} passages (k = {k}) in {out}", ("variant", "passages",
                         "mean edit rate", "mean similarity"))
    for j, q in m["quality"].items():
        table.add_row(j, str(q["passages"]), f"{q.get('edit_rate', float('nan')):.3f}",
                      f"{q['similarity']:.3f}" if "similarity" in q else "—")
    out_console = Console()
    out_console.print(table)
    if m["skipped"]:
        out_console.print(f"{len(m['skipped'])} passages skipped (no {k} distinct variants), e.g. "
                          f"{m['skipped'][0]['id']!r}: not in the folder, not covered by a twins audit.",
                          markup=False, highlight=False)
    for f, who in WHO.items():
        out_console.print(f"{out / f}: {who}", markup=False, highlight=False)
    out_console.print(f"commitment to the draw: {m['commitment']['digest']} (publish it with public.jsonl)",
                      markup=False, highlight=False)


@twins_app.command("verify", short_help="Check a twins folder and the commitment to its draw.")
def verify_cmd(folder: Path = typer.Argument(..., help="A twins folder (twins make --out)."),
               salt: Optional[str] = typer.Option(None, help="The revealed salt (hex); without it, the folder's "
                                                             "keys.json."),
               json_out: bool = JSON) -> None:
    """Check the folder's files against their sha256 in manifest.json and the draw its files hold
    against the published commitment. Exit 0 when it holds, 1 when it does not, 2 for bad input."""
    from trainspotter.twins.folder import load_twins, verify_commitment

    twins = load_twins(folder)
    ok = verify_commitment(folder, salt)
    info = {"folder": str(folder), "passages": len(twins.ids), "k": twins.k,
            "commitment": twins.manifest["commitment"]["digest"], "verified": ok}
    if json_out:
        emit_json(info)
    else:
        Console().print(f"{folder}: {len(twins.ids)} passages, k = {twins.k}; files match manifest.json; "
                        f"commitment {'holds' if ok else 'DOES NOT hold'} for the draw the files hold",
                        markup=False, highlight=False)
    if not ok:
        raise typer.Exit(1)
