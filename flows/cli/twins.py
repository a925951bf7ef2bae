"""`trainspotter twins`: make twins of passages not yet released and commit to them (make), draw the
public versions from a beacon round (release), and check a folder's draw from what was published
(verify; trainspotter.twins). The library calls run here, not in a Prefect flow or task: the keys
and the secret must never land in an orchestrator's result store or cache, and there is nothing
to cache or retry (a second draw over the same passages is what the commitment rules out)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from trainspotter.flows.cli.common import (
    BEACON,
    BEACON_ROUND,
    COMMITMENT,
    JSON,
    Typer,
    beacon_option,
    beacon_round_option,
    commitment_digest,
    count_progress,
    emit_json,
    folded_table,
)

from trainspotter.errors import InputError

twins_app = Typer(help="Twins of passages not yet released: k rewrites of each, one drawn at random to "
                       "publish, the others kept, so that a later audit (audit --twins DIR) is exchangeable "
                       "by design.", short_help="Make twins of data before you release it.",
                  no_args_is_help=True)

DEFAULT_UNIT = "sentence"  # a generative rewriter's: how the measured generative testbed was made
WHO = {"public.jsonl": "release", "manifest.json": "publish with it (no secrets)",
       "private.jsonl": "keep secret", "keys.json": "keep secret"}
WHO_COMMITTED = {"manifest.json": "publish it (or its commitment) now", "variants.jsonl": "keep secret",
                 "keys.json": "keep secret"}


@twins_app.command("make", short_help="Rewrite each passage k times and commit to the variants.")
def make_cmd(passages: list[Path] = typer.Argument(..., help="Passages to protect: JSONL, Parquet, CSV, txt, a "
                                                             "folder of txt files or a saved HF dataset (as "
                                                             "audit's --suspect); several files are joined."),
             out: Path = typer.Option(..., "--out", help="New folder for variants.jsonl, keys.json and "
                                                         "manifest.json."),
             beacon_round: Optional[int] = BEACON_ROUND,
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
    paraphrases, each variant watermarked with its own key) and write the folder with a commitment
    to every variant, a secret and the beacon round that will draw the public versions. Publish the
    commitment before that round; then `twins release DIR --beacon ROUND.json` (the round as drand
    publishes it)."""
    from trainspotter.features.perturb import wordnet_root
    from trainspotter.twins.folder import write_twins
    from trainspotter.rewriters.generative import GenerativeRewriter, make_rewriter
    from trainspotter.twins.make import GATES, make_twins

    _check_options(k, rate, max_edit_rate, min_similarity, unit, out)
    beacon_round_option(beacon_round)
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
        twins = make_twins(rows, k, rewriter_, beacon_round=beacon_round, similarity=similarity,
                           progress=progress, **gate)
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
               "commitment": m["commitment"]["digest"], "beacon_round": beacon_round,
               "files": {f: {"sha256": m["files"].get(f), "who": WHO_COMMITTED[f]} for f in WHO_COMMITTED}}
    if json_out:
        return emit_json(summary)
    _print_made(m, out, k)


def _check_options(k: int, rate: float | None, max_edit_rate: float | None, min_similarity: float | None,
                   unit: str | None, out: Path) -> None:
    from trainspotter.rewriters.generative import UNITS

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
    for f, who in WHO_COMMITTED.items():
        out_console.print(f"{out / f}: {who}", markup=False, highlight=False)
    c = m["commitment"]
    out_console.print(f"Publish the commitment before beacon round {c['round']} exists; once it does: "
                      f"trainspotter twins release {out} --beacon ROUND.json (round {c['round']} as drand "
                      "publishes it)",
                      markup=False, highlight=False)
    out_console.print(f"commitment: {c['digest']}", markup=False, highlight=False, soft_wrap=True)


@twins_app.command("release", short_help="Draw the public versions from a beacon round.")
def release_cmd(folder: Path = typer.Argument(..., help="A folder made by twins make, not yet released."),
                beacon: Optional[str] = BEACON,
                json_out: bool = JSON) -> None:
    """Draw each passage's public version from the folder's secret and the beacon round its
    commitment names, and write public.jsonl (release it with manifest.json, which now reveals the
    secret and the public versions' salts) and private.jsonl (keep it). Once per folder."""
    from trainspotter.twins.folder import prove_folder
    from trainspotter.twins.release import release_twins

    value = beacon_option(beacon)
    twins = release_twins(folder, value)
    proof = prove_folder(folder)
    info = {"folder": str(folder), "passages": len(twins.ids), "k": twins.k, "beacon": value.to_dict(),
            "commitment": proof.commitment, "draw": proof.status,
            "files": {f: {"sha256": _sha256(folder / f), "who": who} for f, who in WHO.items()}}
    if json_out:
        return emit_json(info)
    out = Console()
    out.print(f"{folder}: {len(twins.ids)} passages, k = {twins.k}; public versions drawn from beacon round "
              f"{value.round}, {value.source}", markup=False, highlight=False)
    for f, who in WHO.items():
        out.print(f"{folder / f}: {who}", markup=False, highlight=False)
    _print_rests_on(out, proof)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _print_rests_on(out: Console, proof) -> None:
    """The one fact a shown draw rests on, on a line of its own that pastes whole (or why the draw
    is not shown random)."""
    if proof.status != "shown":
        out.print(f"The draw is not shown random: {proof.reason}", markup=False, highlight=False)
        return
    out.print("The draw is random if the commitment was public before the beacon round:", markup=False,
              highlight=False)
    out.print(f"rests on: {proof.rests_on}", markup=False, highlight=False, soft_wrap=True)


@twins_app.command("verify", short_help="Check a twins folder's draw from what was published.")
def verify_cmd(folder: Path = typer.Argument(..., help="A released twins folder: public.jsonl and manifest.json "
                                                       "are enough."),
               commitment: Optional[str] = COMMITMENT,
               salt: Optional[str] = typer.Option(None, help="A folder made before twins release: the salt its owner "
                                                             "revealed (hex), to open its commitment to the draw."),
               json_out: bool = JSON) -> None:
    """Check the draw from public.jsonl and manifest.json: the commitment opens, the draw
    re-derives from the revealed secret and the beacon, every public text is the variant the draw
    names (and, where private.jsonl is in the folder, every private one a committed variant);
    keys.json is never read. Exit 0 when what was checked holds, 1 when it does not, 2 for bad input."""
    from trainspotter.twins.draw import prove
    from trainspotter.twins.folder import read_release

    pinned = commitment_digest(commitment)
    manifest, public, private = read_release(folder)
    if manifest.get("version", 1) < 2:
        return _verify_legacy(folder, pinned, salt, json_out)
    if salt is not None:
        raise InputError("option --salt: applies to a folder made before twins release; this one's draw re-derives "
                         "from the secret its manifest reveals")
    proof = prove(manifest, public, private, pinned)
    info = {"folder": str(folder), "passages": len(public), "k": manifest["k"], "status": proof.status,
            "proof": proof.model_dump(), "rests_on": proof.rests_on if proof.status == "shown" else None,
            "checked": {"public.jsonl": True, "private.jsonl": private is not None, "keys.json": False}}
    if json_out:
        emit_json(info)
    else:
        _print_verified(folder, proof, len(public), manifest["k"], private is not None)
    if proof.status != "shown":
        raise typer.Exit(1)


def _print_verified(folder: Path, proof, passages: int, k: int, private: bool) -> None:
    out = Console()
    say = lambda text: out.print(text, markup=False, highlight=False)  # noqa: E731
    say(f"{folder}: {passages} passages, k = {k}")
    if proof.status == "failed":
        say(f"the draw DOES NOT hold: {proof.reason}")
        return
    if proof.status != "shown":  # it re-derives, but nothing shows that nobody chose it (exit 1 all the same)
        _print_rests_on(out, proof)
        return
    files = "public.jsonl, manifest.json and private.jsonl" if private else "public.jsonl and manifest.json"
    say(f"checked from {files}: {proof.reason}"
        + ("; the commitment is the one pinned (--commitment)" if proof.pinned else ""))
    say("not checked: " + ("keys.json (never read)" if private else "the private versions (private.jsonl is not "
                           "here; keys.json is never read)")
        + ("" if proof.pinned else "; that this commitment is the one published (pin it with --commitment HEX)"))
    _print_rests_on(out, proof)


def _verify_legacy(folder: Path, pinned: str | None, salt: str | None, json_out: bool) -> None:
    """A folder made before twins release: its commitment covers the draw, which only private.jsonl
    shows, and opens only with the salt its owner reveals; either way it shows the draw was fixed at
    twins make, not that nobody chose it."""
    from trainspotter.twins.folder import load_twins, verify_commitment

    if not (folder / "private.jsonl").is_file():
        raise InputError(f"{folder}: made before twins release, and its commitment covers the draw, which only "
                         f"private.jsonl shows: nothing to check from public.jsonl alone")
    twins = load_twins(folder)
    digest = twins.manifest["commitment"]["digest"]
    problem = (f"its commitment {digest[:16]}… is not the pinned {pinned[:16]}…" if pinned not in (None, digest)
               else "its commitment DOES NOT hold for the draw the files hold"
               if salt and not verify_commitment(folder, salt) else None)
    info = {"folder": str(folder), "passages": len(twins.ids), "k": twins.k, "status": "failed" if problem else
            "unproven", "commitment": digest, "commitment_checked": salt is not None and problem is None}
    opened = (problem or ("its commitment holds for the draw the files hold" if salt else
                          "its commitment was not checked (give --salt SALT_HEX, revealed by the owner; keys.json is "
                          "never read)"))
    if json_out:
        emit_json(info)
    else:
        Console().print(f"{folder}: {len(twins.ids)} passages, k = {twins.k}; files match manifest.json; {opened}. "
                        f"Made before twins release: its draw was fixed at twins make, which shows it was not "
                        f"changed afterwards, not that nobody chose it.", markup=False, highlight=False)
    if problem:
        raise typer.Exit(1)
