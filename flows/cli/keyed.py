"""`trainspotter keyed`: a keyed release (trainspotter.keyed.release) and its audit
(trainspotter.keyed). ``make`` commits (publish commitment.json, keep the secret), ``release``
derives the key from the secret and a later public random value and writes the release, ``audit``
tests a model (flows/keyed.py: MLflow, sealed record), ``trainspotter verify`` checks the record.
make and release run here, not in a Prefect task: the secret and key must never reach a result
store or cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from trainspotter.flows.cli.common import (
    ALPHA,
    BEACON,
    BEACON_ROUND,
    JSON,
    KEYED_ACCESS_HELP,
    KEYED_PROBE_HELP,
    LAMBDA_MAX_HELP,
    LEDGER,
    MODEL,
    SEED,
    STRATEGY_HELP,
    TEST_OPTIONS,
    TRACKING_URI,
    KeyedAccess,
    KeyedProbe,
    Strategy,
    Typer,
    beacon_option,
    beacon_round_option,
    choice,
    count_progress,
    emit_json,
)
from trainspotter.flows.cli.verify import RECORD, print_record, write_record

from trainspotter.errors import InputError
from trainspotter.keyed.audit import CONTEXTS, SAMPLES, SHINGLE

keyed_app = Typer(help="A keyed release: every passage you publish written under one secret key that "
                       "derives from a public random value nobody chose, and its audit in anything a model "
                       "writes or predicts.", short_help="Release data under one key and audit it.",
                  no_args_is_help=True)
WHO = {"commitment.json": "publish now, before the beacon round", "secret.json": "keep secret",
       "originals.jsonl": "keep secret", "commitment.tsq": "have it stamped now by a timestamp authority (RFC 3161)",
       "public.jsonl": "release it", "manifest.json": "publish with it",
       "review.md": "read it before publishing (every place the key may change the\n  text; it quotes the "
                    "originals: keep it secret)"}


def _say(text: str, path: bool = False) -> None:
    """One line (wrapped at the terminal's width unless it holds a path, which is never cut)."""
    Console().print(text, markup=False, highlight=False, soft_wrap=path)


@keyed_app.command("make", short_help="Commit to passages and a secret, before release.")
def make_cmd(passages: list[Path] = typer.Argument(..., help="Passages to release: JSONL, Parquet, CSV, txt, a "
                                                             "folder of txt files or a saved HF dataset."),
             out: Path = typer.Option(..., "--out", help="New folder for commitment.json, secret.json and "
                                                         "originals.jsonl (and the release later)."),
             rewriter: str = typer.Option("lexical", help="lexical (keyed WordNet rewriter: each word's form by "
                                                          "the key, the same everywhere), lexical-v3 (precision "
                                                          "first: only vetted function-word, adverb and number "
                                                          "phrases) or a local model hf:PATH "
                                                          "or testbed:NAME (paraphrases watermarked with the key's "
                                                          "green lists)."),
             exclude: str = typer.Option("", help="Units to leave unchanged, comma-separated, as review.md "
                                                  "names them (lexical rewriters)."),
             beacon_round: Optional[int] = BEACON_ROUND,
             json_out: bool = JSON) -> None:
    """Draw a 256-bit secret and commit to it and to the passages: publish commitment.json (or its
    sha256) now; after a public random value appears (a drand round later than the publication),
    run `keyed release` with it."""
    from trainspotter.data import load_passages
    from trainspotter.keyed.release import (
        KeyedHFRewriter,
        commit_release,
        commitment_sha256,
    )
    from trainspotter.rewriters.lexical import PHRASES_V3, KeyedLexicalRewriter, phrase_text

    beacon_round_option(beacon_round)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"option --out: {out}: exists and is not an empty folder; a release goes to a new folder")
    units = tuple(u.strip() for u in exclude.split(",") if u.strip())
    if units and not rewriter.startswith("lexical"):
        raise InputError("option --exclude: only for the lexical rewriters (their units are words and phrases)")
    if rewriter in ("lexical", "lexical-v3"):
        made = KeyedLexicalRewriter(version=3 if rewriter == "lexical-v3" else 2, exclude=units)
        if made.version == 3 and (unknown := set(units) - {phrase_text(q) for q in PHRASES_V3}):
            raise InputError(f"option --exclude: {', '.join(sorted(unknown))}: no unit of lexical-v3 (review.md "
                             f"names them)")
    elif rewriter.startswith(("hf:", "testbed:")):
        from trainspotter.backends.spec import parse_spec, resolve_spec

        spec = parse_spec(rewriter)
        resolve_spec(spec)
        made = KeyedHFRewriter(spec)
    else:
        raise InputError(f"option --rewriter {rewriter!r}: expected lexical, lexical-v3, hf:PATH or testbed:NAME "
                         f"(a keyed release needs a watermark the tool computes: no openai: rewriter)")
    rows = [p for path in passages for p in load_passages(path)]
    commitment = commit_release(rows, out, made, beacon_round=beacon_round)
    digest, review = commitment_sha256(commitment), (out / "review.md").is_file()
    if json_out:
        return emit_json({"out": str(out.resolve()), "passages": len(rows), "commitment_sha256": digest,
                          "rewriter": commitment["rewriter"]["name"],
                          "files": {k: " ".join(v.split()) for k, v in WHO.items() if k != "review.md" or review}})
    _say(f"committed {len(rows)} passages ({commitment['rewriter']['name']}) in {out}", path=True)
    for name in ("commitment.json", "secret.json", "originals.jsonl", "commitment.tsq"):
        _say(f"{name}: {WHO[name]}")
    _say(f"commitment sha256:\n  {digest}")
    _say("to prove the order, have any RFC 3161 timestamp authority stamp it now:")
    _say(f"  curl -s --data-binary @{out}/commitment.tsq -H 'Content-Type: application/timestamp-query' URL > "
         f"{out}/commitment.tsr", path=True)
    _say(f"  then keyed release takes --timestamp {out}/commitment.tsr --authority ROOT.pem", path=True)
    _say(f"next, once beacon round {beacon_round} exists (publish the commitment before it does):\n"
         f"  trainspotter keyed release {out} --beacon ROUND.json (round {beacon_round} as drand publishes it)",
         path=True)
    if review:
        _say(f"review.md: {WHO['review.md']}")


@keyed_app.command("release", short_help="Derive the key from a beacon round and release.")
def release_cmd(folder: Path = typer.Argument(..., help="The folder of `keyed make`."),
                beacon: Optional[str] = BEACON,
                timestamp: Optional[Path] = typer.Option(None, help="A timestamp authority's RFC 3161 reply over "
                                                                     "commitment.json (to commitment.tsq): checked, "
                                                                     "it proves the commitment preceded the round."),
                authority: Optional[Path] = typer.Option(None, help="--timestamp: the authority's certificates "
                                                                     "(PEM: its root, and any intermediates)."),
                json_out: bool = JSON) -> None:
    """Derive the release key from the committed secret and the beacon round, rewrite every passage
    under it, and write public.jsonl (release it) and manifest.json (publish it)."""
    from trainspotter.keyed.release import load_release, release

    b = beacon_option(beacon)
    stamp = _stamp_files(timestamp, authority)
    total = len(load_release(folder).originals or [])
    with count_progress("passages rewritten", total, transient=True) as progress:
        manifest = release(folder, b, progress, stamp)
    if json_out:
        return emit_json({"folder": str(folder.resolve()), "passages": manifest["passages"],
                          "beacon": manifest["beacon"], "files": manifest["files"], "order": manifest.get("order")})
    _say(f"released {manifest['passages']} passages under one key (beacon round {b.round}) in {folder}", path=True)
    status, detail = b.proof()
    _say(f"beacon {status}: {detail}" + ("" if status == "verified" else "; no audit of this release can say "
                                                                          "trained on"))
    if "order" in manifest:
        _say(manifest["order"]["proof"])
    for name in ("public.jsonl", "manifest.json"):
        _say(f"{name}: {WHO[name]}")


def _stamp_files(timestamp: Path | None, authority: Path | None) -> tuple[bytes, bytes] | None:
    """--timestamp and --authority, read (both or neither)."""
    if (timestamp is None) != (authority is None):
        raise InputError("option --timestamp: needs --authority (the authority's certificates), and the other "
                         "way round")
    if timestamp is None:
        return None
    for option, path in (("timestamp", timestamp), ("authority", authority)):
        if not path.is_file():
            raise InputError(f"option --{option}: {path}: no such file")
    return timestamp.read_bytes(), authority.read_bytes()


@keyed_app.command("audit", short_help="Test a model for a keyed release, anytime-valid.")
def audit_cmd(folder: Path = typer.Argument(..., help="The released folder (with the owner's secret.json)."),
              model: str = MODEL,
              reference: Optional[str] = typer.Option(None, help="Lexical release, gray-box or --probe choose: a "
                                                                 "model of the target's kind (its tokenizer) that "
                                                                 "never saw the release; each form is weighed "
                                                                 "relative to it (more power, the same exact null)."),
              access: KeyedAccess = choice(KeyedAccess, "access", "black", KEYED_ACCESS_HELP),
              probe: KeyedProbe = choice(KeyedProbe, "probe", "continue", KEYED_PROBE_HELP),
              samples: int = typer.Option(SAMPLES, min=1, help="--probe choose: draws per unit and context (one "
                                                               "generated token each where the forms part)."),
              contexts: int = typer.Option(CONTEXTS, min=1, help="--probe choose: each unit is asked in its first "
                                                                 "context in this many neutral passages, its draws "
                                                                 "pooled (a model's preference varies more between "
                                                                 "contexts than between draws)."),
              prompts: Optional[Path] = typer.Option(None, help="Neutral text that is not the release (as audit's "
                                                                "--heldout: JSONL, Parquet, CSV, txt...): prompts "
                                                                "(black) or passages (gray) (default: the packaged "
                                                                f"Wikipedia leads that share no run of {SHINGLE} "
                                                                "words with the release)."),
              max_tokens: int = typer.Option(20000, min=1, help="Black-box budget of a run: generated tokens."),
              max_passages: int = typer.Option(40, min=1, help="Gray-box budget of a run: neutral passages."),
              random_keys: int = typer.Option(1000, min=0, help="Random keys the release key is ranked among "
                                                                "(the exact p-value beside the e-value; 0: none)."),
              name: str = typer.Option("audit", help="Audit name (MLflow experiment audit/NAME)."),
              ledger: bool = LEDGER,
              alpha: float = ALPHA,
              strategy: Strategy = choice(Strategy, "strategy", "mixture", STRATEGY_HELP + "."),
              lambda_max: float = typer.Option(0.8, help=LAMBDA_MAX_HELP + "."),
              seed: int = SEED,
              tracking_uri: Optional[str] = TRACKING_URI,
              record: Optional[Path] = RECORD,
              json_out: bool = JSON) -> None:
    """Sample the model's continuations of neutral prompts or its forced choice among each unit's
    forms (black), or read its next-token probabilities on neutral passages (gray), score every
    unit of the release once under its key, and bet until the e-value reaches 1/α or the budget is
    spent."""
    from pydantic import ValidationError
    from trainspotter.flows.cli.common import edge_specs, input_error

    from trainspotter.keyed.audit import KeyedAuditConfig, open_release

    spec, _, more = edge_specs(model, None, reference)
    if probe.value == "choose" and access.value != "black":
        raise InputError("option --probe choose: a black-box probe (--access black); gray-box reads the forms' "
                         "probabilities themselves")
    if reference is not None and access.value != "gray" and probe.value != "choose":
        raise InputError("option --reference: a keyed audit weighs forms by a reference gray-box (--access gray) or "
                         "in a forced choice (--probe choose), not in free continuations")
    try:
        config = KeyedAuditConfig(release=folder, model=spec, reference=more[0] if more else None,
                                  access=access.value, probe=probe.value, samples=samples, contexts=contexts,
                                  prompts=prompts, max_tokens=max_tokens, max_passages=max_passages,
                                  random_keys=random_keys, seed=seed, name=name if ledger else None,
                                  test={"alpha": alpha, "strategy": strategy.value, "lambda_max": lambda_max})
    except ValidationError as e:
        raise input_error(e, TEST_OPTIONS) from None
    open_release(folder)  # a folder that is not a complete, released one: one line before any model loads
    from trainspotter.flows.keyed import PROGRESS, keyed_audit_flow
    from trainspotter.tasks.server import use_local_api

    budget = max_tokens if access.value == "black" else max_passages
    unit = "tokens" if access.value == "black" else "passages"
    use_local_api()
    with count_progress(f"{unit} asked", budget, transient=True) as progress:
        token = PROGRESS.set(progress)
        try:
            result = keyed_audit_flow(config, tracking_uri)
        finally:
            PROGRESS.reset(token)
    write_record(result, record)
    if json_out:
        return emit_json(result)
    _print_result(result)


def _print_result(r: dict) -> None:
    e, units = r["e_value"], r["units_total"]
    _say(f"verdict: {r['verdict']} (e-value {e:.3g} after {units} units, {r['spent_total']} {r['budget_unit']})")
    _say(f"why: {r['why']}")
    if r["rank"]:
        k = r["rank"]
        _say(f"random-key rank: p = {k['p_value']:.3g} ({k['at_least']} of {k['keys']} random keys scored at "
             f"least as high)")
    for line in r["rests_on"]:
        _say(f"rests on: {line}")
    print_record(Console(), r)
