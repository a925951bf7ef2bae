"""`trainspotter verify`: check sealed audit records offline (trainspotter.record.verify), and the
audit verb's --record/--sign checks. Exit 0 when every check passes, 1 when a record does not
verify (the first failing check names the pair and field), 2 for an unreadable record."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trainspotter.errors import InputError
from trainspotter.flows.cli.common import JSON, SEED, emit_json, folded_table, own_command

NOT_VERIFIED_EXIT = 1
RECORD = typer.Option(None, help="Also write the sealed audit record (one JSON file; always in the MLflow run "
                                 "as record.json) here. Check it with `trainspotter verify`.")
SIGN = typer.Option(None, help="Sign the sealed record with this Ed25519 private key (PEM, e.g. "
                               "`openssl genpkey -algorithm ed25519`).")


def record_options(record: Path | None, sign: Path | None, sets: int):
    """Check the audit's --record and --sign before any model loads; the private key of --sign."""
    if record is not None and sets > 1:
        raise InputError("option --record: one file holds one audit's record; with several --suspect each set's "
                         "record is its MLflow run's record.json (the JSON output's sets[].record)")
    if record is not None and (record.is_dir() or not record.parent.is_dir()):
        raise InputError(f"option --record: {record}: " + ("is a folder" if record.is_dir() else
                                                           f"folder {record.parent} does not exist"))
    if sign is None:
        return None
    from trainspotter.record.keys import load_private_key

    return load_private_key(sign)


def write_record(result: dict, record: Path | None) -> None:
    """The audit's --record: a copy of the run's record.json, which the JSON result then names."""
    if record is not None:
        import shutil

        shutil.copyfile(result["record"], record)
        result["record"] = str(record)


def print_record(out: Console, result: dict) -> None:
    """Where an audit's sealed record is and the command that checks it, as it runs when pasted."""
    if result.get("record_digest"):  # the command on a line of its own: it fits 80 columns unless the path can't
        out.print(f"sealed record {result['record_digest'][:16]}…; check it with:\n  {own_command()} verify "
                  f"{result['record']}", markup=False, highlight=False, soft_wrap=True)


def verify_cmd(records: list[Path] = typer.Argument(..., help="Sealed audit record(s) (record.json of an audit "
                                                              "run, or its --record file); the runs of a recurring "
                                                              "audit oldest first, to check that each continues "
                                                              "the one before."),
               public_key: Optional[Path] = typer.Option(None, help="The auditor's Ed25519 public key (PEM): the "
                                                                    "record must be signed with it."),
               requery: int = typer.Option(0, min=0, help="Also load the model and extract the features of N "
                                                          "random passages again: has the model changed?"),
               seed: int = SEED,
               release: Optional[Path] = typer.Option(None, help="Keyed audit records: the release folder with "
                                                                 "the owner's secret.json, to re-derive the key "
                                                                 "and score every unit again."),
               json_out: bool = JSON) -> None:
    """Check sealed audit records offline: every hash and the chain, the blind check replayed
    from the texts and the e-process pair by pair from the features, the verdict; with
    --requery N, also N passages against the model. A keyed audit's record: its hashes and
    chain, the e-process replayed unit by unit, and with --release every unit scored again."""
    from trainspotter.record.keys import load_public_key
    from trainspotter.record.requery import requery as requery_fn
    from trainspotter.record.verify import load_record, verify_records

    keyed = _keyed_records(records)
    if keyed is not None:
        return _verify_keyed(records, keyed, release, json_out)

    key = load_public_key(public_key) if public_key is not None else None
    loaded = [(str(path), load_record(path)) for path in records]
    with _progress(transient=json_out) as progress:  # a large record's replays take a while
        result = verify_records(loaded, key, progress)
    if requery:
        result.checks += [requery_fn(record, requery, seed) for _, record in loaded]
    if json_out:
        emit_json(result.to_dict())
    else:
        _print(result)
    if not result.ok:
        raise typer.Exit(NOT_VERIFIED_EXIT)


@contextmanager
def _progress(transient: bool):
    """A progress bar on stderr of the records' verification stages (``record.verify.STAGES``),
    the stage under way beside it; yields ``verify_records``'s ``progress`` callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress("verifying", BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[now]}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=transient) as bar:
        task = bar.add_task("verify", total=None, now="")
        yield lambda done, total, now: bar.update(task, completed=done, total=total, now=now)


def _keyed_records(paths: list[Path]) -> list[dict] | None:
    """The records if every one is a keyed audit's (None if none is; one that is not among
    keyed ones is one InputError naming it)."""
    import json

    from trainspotter.keyed.sealed import FORMAT

    loaded = []
    for path in paths:
        try:
            loaded.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            loaded.append(None)
    keyed = [isinstance(r, dict) and r.get("format") == FORMAT for r in loaded]
    if not any(keyed):
        return None
    if not all(keyed):
        raise InputError(f"{paths[keyed.index(False)]}: not a keyed audit record, unlike {paths[keyed.index(True)]}")
    return loaded


def _print(result) -> None:
    out = Console()
    names = ", ".join(f"{r['name']!r} ({r['verdict']})" for r in result.records)
    table = folded_table(f"Audit record of {names}", ("check", "result", "what"))
    for c in result.checks:
        table.add_row(c.name, "[red]FAILED[/red]" if not c.ok else "[green]ok[/green]" if c.done else "none", c.detail)
    out.print(table)
    digests = ", ".join(str(r["digest"]) for r in result.records)
    if result.ok:
        out.print(f"verified: record {digests}", markup=False, highlight=False, soft_wrap=True)
        return
    first, cause = result.failure, result.cause  # the cause first: the replays that disagree follow from it
    because = f"{cause.detail}, and so " if cause is not None and cause is not first else ""
    out.print(f"does not verify: {because}{first.detail}", markup=False, highlight=False)


def _verify_keyed(paths: list[Path], loaded: list[dict], release: Path | None, json_out: bool) -> None:
    """`trainspotter verify` on keyed records: their digests and chain, the e-process replayed unit by unit,
    and with ``release`` every unit scored again."""
    from trainspotter.keyed.sealed import load_keyed, verify_keyed

    records = [(str(p), load_keyed(p, r)) for p, r in zip(paths, loaded)]
    checks = verify_keyed(records, release)
    ok = all(c[1] is not False for c in checks)  # None: nothing shown, nothing failed (an unverified beacon)
    if json_out:
        emit_json({"ok": ok, "records": [{"path": p, "digest": r["digest"], "verdict": r["result"]["verdict"]}
                                         for p, r in records],
                   "checks": [{"name": n, "ok": k, "detail": d} for n, k, d in checks]})
    else:
        table = folded_table("Keyed audit record", ("check", "result", "what"))
        for n, k, d in checks:
            table.add_row(n, "[red]FAILED[/red]" if k is False else "[green]ok[/green]" if k else "none", d)
        Console().print(table)
        first = next((d for _, k, d in checks if k is False), None)
        Console().print(f"verified: record {records[-1][1]['digest']}" if ok else f"does not verify: {first}",
                      markup=False, highlight=False, soft_wrap=True)
    if not ok:
        raise typer.Exit(NOT_VERIFIED_EXIT)
