"""What every CLI verb shares: the choice types, ``--json``, ``--refresh``, JSON output and
turning a pydantic ValidationError into one InputError line."""

from __future__ import annotations

import json
from enum import Enum

import pydantic
import typer
from rich.console import Console

from trainspotter.errors import InputError
from trainspotter.stats.betting import PAYOFFS, STRATEGIES

Access = Enum("Access", {a: a for a in ("gray", "black", "both")}, type=str)
Strategy = Enum("Strategy", {s: s for s in STRATEGIES}, type=str)
Payoff = Enum("Payoff", {p: p for p in PAYOFFS}, type=str)
ShiftCheck = Enum("ShiftCheck", {a: a for a in ("stop", "continue")}, type=str)

JSON = typer.Option(False, "--json", help="Print only a machine-readable JSON result on stdout.")
REFRESH = typer.Option(False, "--refresh", help="Recompute cached task results (and overwrite "
                                                "them) instead of reusing them.")


def choice(enum: type[Enum], option: str, default: str, help: str):
    """A typer option whose value is a member of ``enum``. A bad value ends as one line
    ``error: option --OPTION 'VALUE': expected one of ...`` and exit 2 (typer's own
    choice check prints a multi-line usage box)."""
    names = [m.value for m in enum]

    def parse(value):
        if isinstance(value, enum):
            return value
        try:
            return enum(value)
        except ValueError:
            Console(stderr=True).print(f"error: option --{option} {value!r}: expected one of "
                                       f"{', '.join(names)}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return typer.Option(default, f"--{option}", parser=parse, metavar=f"[{'|'.join(names)}]",
                        help=help)


def emit_json(obj) -> None:
    """The verb's result as JSON, alone on stdout (logs and progress go to stderr)."""
    typer.echo(json.dumps(obj, indent=1, default=str))


def input_error(e: pydantic.ValidationError, rename: dict[str, str] | None = None) -> InputError:
    """The first validation error as ``option --NAME: message`` (``rename`` maps a config
    field path to the CLI option that sets it)."""
    err = e.errors()[0]
    where = ".".join(map(str, err["loc"])) or "config"
    where = (rename or {}).get(where, where).replace("_", "-")
    return InputError(f"option --{where}: {err['msg'].removeprefix('Value error, ')}")
