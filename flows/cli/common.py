"""What every CLI verb shares: the choice types, the options that mean the same in every
verb (defined once here, so a name has one meaning and one help text), JSON output and
turning a pydantic ValidationError into one InputError line."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

import pydantic
import typer
import typer.core
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from trainspotter.assets import AssetMissing
from trainspotter.backends.spec import schemes_help
from trainspotter.errors import APIRequestError, InputError
from trainspotter.features.features import FEATURE_SETS
from trainspotter.stats.payoffs import PAYOFFS, payoffs_help
from trainspotter.stats.scoring import SCORERS
from trainspotter.stats.strategies import STRATEGIES

ACCESS_LEVELS = ("gray", "black", "both")
ACCESS_WORDS = {"gray": "gray-box", "black": "black-box", "both": "gray- and black-box"}  # in titles
Access = Enum("Access", {a: a for a in ACCESS_LEVELS}, type=str)
Strategy = Enum("Strategy", {s: s for s in STRATEGIES}, type=str)
Payoff = Enum("Payoff", {p: p for p in PAYOFFS}, type=str)
Scorer = Enum("Scorer", {s: s for s in SCORERS}, type=str)
FeatureSet = Enum("FeatureSet", {f: f for f in FEATURE_SETS}, type=str)
ShiftCheck = Enum("ShiftCheck", {a: a for a in ("stop", "continue", "match")}, type=str)
TextFeatures = Enum("TextFeatures", {a: a for a in ("ngrams", "ngrams+minilm")}, type=str)  # features.text
TwinsPrivate = Enum("TwinsPrivate", {a: a for a in ("all", "one")}, type=str)  # trainspotter.twins.rounds
KeyedAccess = Enum("KeyedAccess", {a: a for a in ("black", "gray")}, type=str)  # trainspotter.keyed.audit
KEYED_ACCESS_HELP = ("black: only the tokens the model writes (its continuations of neutral prompts, or a forced "
                     "choice: --probe; over an API, the forced choice); gray: its next-token probabilities on neutral "
                     "passages (local weights).")
KeyedProbe = Enum("KeyedProbe", {a: a for a in ("continue", "choose")}, type=str)  # trainspotter.keyed.audit
KEYED_PROBE_HELP = ("Black-box on a lexical release: continue: free continuations, units scored where the model "
                    "happens to write them; choose: each unit once, in --contexts neutral contexts, the model's "
                    "next tokens restricted to the unit's forms (what an API's logit_bias gives), --samples draws "
                    "in each, the units the release shows most first.")
SHIFT_CHECK_HELP = ("When the blind check finds that the held-out set differs from the suspect set (the verdict is "
                    "then inconclusive, exit 3): stop before any model query, or continue to record the model's "
                    "e-value anyway; match: first pair passages of the same text-only propensity, drop the rest, "
                    "and audit those pairs (it assumes the words show the whole difference; needs --reference, "
                    "gray access).")
TEXT_FEATURES_HELP = ("What the blind check and matching read of each text without the model: word and character "
                      "n-grams and surface statistics, or those and the packaged MiniLM's sentence embeddings "
                      "(topic and phrasing beyond shared words; about 20-60 ms per passage on one CPU core).")

JSON = typer.Option(False, "--json", help="Print only a machine-readable JSON result on stdout.")
REFRESH = typer.Option(False, "--refresh", help="Recompute cached task results (and overwrite "
                                                "them) instead of reusing them.")
TEXT_COLUMN = typer.Option(None, help="The column of a dataset named by hub id (hf:ORG/NAME...) that holds "
                                       "the text; without it, text, else input.")
LABEL_COLUMN = typer.Option(None, help="The column of --dataset that says which rows are members: 1 or true "
                                       "a member, 0 or false a non-member; without it, label (a dataset with "
                                       "member and nonmember columns, as MIMIR's, needs none).")
TRACKING_URI = typer.Option(None, help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else a SQLite "
                                       "store in the artifacts folder).")
ALPHA = typer.Option(0.05, help="Significance level α: reject H0 once the e-value reaches 1/α.")
SEED = typer.Option(0, help="Seed of every random choice the verb makes: the same seed, the same result.")
MODEL = typer.Option(..., help=f"Target model spec: {schemes_help()} (docs/guide/audit.md: Model specs).")
REFERENCE = typer.Option(None, help="Reference model spec (same forms as --model). Repeat for K references: "
                                    "the first gives RefL and EZ, two or more add the *_refs_* features.")
TESTBED_HELP = "Testbed preset, built if needed"
MAX_PAIRS = typer.Option(None, min=1, help="At most this many pairs queried per audit.")
COMMITMENT = typer.Option(None, help="A twins folder's commitment digest (hex) as you saw it published: a folder "
                                     "with another one fails.")
LEDGER = typer.Option(False, help="Continue the stored evidence of audit NAME with data not used before "
                                  "(recurring audits).")
BEACON = typer.Option(None, help="The public random value of the beacon round the commitment names, once that "
                                 "round exists: the round as drand publishes it, saved as JSON (its signature is "
                                 "checked against the network's key: quicknet, or the chained mainnet), or "
                                 "ROUND:HEX (unverified: no verdict rests on it).")
BEACON_ROUND = typer.Option(None, "--beacon-round", help="Required: the beacon round whose random value will decide "
                                                         "the release (twins: the draw; keyed: the key), named in "
                                                         "the commitment; one that comes after you publish it, e.g. "
                                                         "drand quicknet's round an hour from now.")
DASK_ADDRESS = typer.Option(None, help="Extract on the Dask cluster whose scheduler is at HOST:PORT (workers "
                                       "need the same trainspotter and the model files).")
STRATEGY_HELP = "Betting strategy (ons is the paper's)"
PAYOFF_HELP = "Payoff u_t: " + payoffs_help()
LAMBDA_MAX_HELP = "Largest stake λ_max, in (0, 1)"
# an audit's test settings (``stats.eprocess.EProcessConfig``, checked there once) and the options that set them
TEST_OPTIONS = {"test.alpha": "alpha", "test.strategy": "strategy", "test.lambda_max": "lambda_max"}
ACCESS_HELP = "gray (log-probs), black (greedy tokens and generations only: label-only APIs) or both."
FEATURES_HELP = ("Feature set: lean (one forward pass per text per model), calibrated (its "
                 "target-vs-reference features only: robust to held-out sets of easier or harder text; "
                 "needs --reference), twins (lean + the log-probs where a passage differs from its twin; "
                 "needs --twins) or full (+ six perturbations and suffix generation).")


def edge_specs(model: str, reference, *more: str | None):
    """A verb's model specs, each parsed once at this edge (the ModelSpec travels on: configs,
    tasks, backends), resolved to files that can load, and an API's server reached: a bad spec, a
    folder that is not a model or an API nobody answers is one line now, not after a flow started.
    Returns (model, references, [each of ``more`` given, parsed])."""
    from trainspotter.backends import check_server, parse_spec
    from trainspotter.backends.spec import check_loadable, parse_references

    model, reference = parse_spec(model), parse_references(reference)
    more = [parse_spec(m) for m in more if m is not None]
    for spec in (model, *reference, *more):
        check_loadable(spec)
        check_server(spec)
    return model, reference, more


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


TWINS_PRIVATE = choice(TwinsPrivate, "twins-private", None, "With --twins: each passage's public version against "
                       "every private twin, as one round of sub-pairs (all: fewer passages to a decision, k texts "
                       "queried per passage instead of 2, 2(k-1) with --features twins), or against one of them drawn "
                       "with --seed (one). Default: all (a --ledger audit: its stored choice, one if begun before "
                       "this option).")


def choices(enum: type[Enum], option: str, value: str | None) -> list[str] | None:
    """A comma-separated list of ``enum`` values (an option that takes several), checked
    like ``choice``: one line naming the option and the bad value, exit 2."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    names = [m.value for m in enum]
    bad = [v for v in items if v not in names]
    if bad or not items:
        raise InputError(f"option --{option} {value!r}: expected one or more of {', '.join(names)}, "
                         f"comma-separated")
    return items


SCORER_HELP = ("Scoring model: online (Newton step on running statistics, constant cost per pair), paper (30 "
               "Adam epochs over all past pairs) or fixed (no weights learned: each feature's known member-like "
               "direction, scaled by its past pair differences)")
SCORER = choice(Scorer, "scorer", "online", SCORER_HELP + ".")


# ------------------------------------------------------------------ output that fits the terminal

# Below this many columns, `--help` uses click's plain layout: option names on the left, help
# wrapped in about 46 columns on the right. typer's rich panel gives the help column what its
# six other columns leave (18 of 80), cutting option names and words with "…" (issue 38).
RICH_HELP_COLUMNS = 100


def _fits_narrow(cls):
    class Fitted(cls):
        def format_help(self, ctx, formatter):
            if shutil.get_terminal_size().columns >= RICH_HELP_COLUMNS or not typer.core.HAS_RICH:
                return super().format_help(ctx, formatter)
            mode, self.rich_markup_mode = self.rich_markup_mode, None
            try:
                return super().format_help(ctx, formatter)
            finally:
                self.rich_markup_mode = mode

    Fitted.__name__ = cls.__name__
    return Fitted


FittedCommand, FittedGroup = _fits_narrow(typer.core.TyperCommand), _fits_narrow(typer.core.TyperGroup)


class Typer(typer.Typer):
    """typer.Typer whose groups and verbs print a `--help` that fits a narrow terminal
    (``RICH_HELP_COLUMNS``): every group and verb of `trainspotter` is made with it."""

    def __init__(self, **kwargs):
        super().__init__(cls=kwargs.pop("cls", FittedGroup), **kwargs)

    def command(self, *args, cls=None, **kwargs):
        return super().command(*args, cls=cls or FittedCommand, **kwargs)


def _plain(cell) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)


class FittedTable(Table):
    """A rich table that never breaks a word across lines: each column is at least as wide as its
    longest word (``whole``: as its longest value, so every value stays on one line and only
    headers fold, between words), the space left goes to the columns that need least to make
    their cells one line, and where that minimum does not fit side by side, each row prints as
    "header: value" lines under the row's first cell (a vertical layout)."""

    def __init__(self, *args, whole: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.whole = whole

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        cells = [[_plain(column.header), *map(_plain, column._cells)] for column in self.columns]
        longest = lambda lines: max((len(line) for c in lines for line in c.splitlines() or [""]), default=1)  # noqa: E731
        widths = [max((len(w) for c in col for w in c.split()), default=1) for col in cells]
        if self.whole:
            widths = [max(width, longest(col[1:])) for width, col in zip(widths, cells)]
        room = options.max_width - (3 * len(self.columns) + 1)  # borders and one space each side of a cell
        if sum(widths) > room:
            yield from self._vertical(console, options, cells)
            return
        spare = room - sum(widths)
        for i in sorted(range(len(widths)), key=lambda i: longest(cells[i]) - widths[i]):
            step = min(longest(cells[i]) - widths[i], spare)
            widths[i], spare = widths[i] + step, spare - step
        for column, width in zip(self.columns, widths):
            column.width, column.overflow = width, "fold"
        yield from super().__rich_console__(console, options)

    def _vertical(self, console: Console, options: ConsoleOptions, cells: list[list[str]]) -> RenderResult:
        if self.title:
            yield Text(_plain(self.title), style="bold")
        for r in range(len(self.columns[0]._cells)):
            grid = Table.grid(padding=(0, 1))
            grid.add_column(no_wrap=True, style="bold")
            grid.add_column(overflow="fold")
            for c, column in enumerate(self.columns[1:], 1):
                grid.add_row(f"  {cells[c][0]}:", column._cells[r])
            yield Text(cells[0][r + 1], style="bold")
            yield grid
        if self.caption:
            yield Text(_plain(self.caption))


def folded_table(title: str, columns: tuple[str, ...], **kwargs) -> Table:
    """A table that fits the console without cutting a word (``FittedTable``; ``whole=True``:
    nor a value)."""
    table = FittedTable(title=title, **kwargs)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


@contextmanager
def count_progress(label: str, total: int, transient: bool = False):
    """A progress bar of ``total`` items on stderr (label, bar, done/total, time elapsed); yields
    the ``progress(done, total)`` callback the flows and ``make_twins`` take."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(label, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                  transient=transient) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done, _total: bar.update(task, completed=done)


@contextmanager
def progress_lines(transient: bool = False):
    """Start the local Prefect API and show on stderr the progress of whatever the flows run in this
    context report (``tasks.progress.step``): one line per stage (label, bar, done/total, note, time
    elapsed), in the order the stages begin, so a long run shows what it did and what it is doing
    (the demo: the testbed's training, then each audit)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainspotter.tasks.progress import reporting

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=Console(stderr=True),
                  transient=transient) as bar:
        lines: dict[str, int] = {}

        def report(label: str, done: int, total: int | None, note: str) -> None:
            if label not in lines:
                lines[label] = bar.add_task(label, total=total, note=note)
            bar.update(lines[label], completed=done, total=total, note=note)

        with reporting(report):
            from trainspotter.tasks.server import use_local_api

            step = "Prefect's local API"  # a first start takes seconds: say what the wait is
            report(step, 0, 1, "")
            use_local_api()
            report(step, 1, 1, "")
            yield


def own_command() -> str:
    """This command as the user's shell runs it: ``trainspotter`` where that name on PATH is this
    installation's script, else the script's path (``.venv/bin/trainspotter`` from the repository
    after `bash scripts/demo.sh`, which puts nothing on PATH), so a printed hint works when pasted."""
    script = Path(sys.executable).parent / "trainspotter"
    on_path = shutil.which("trainspotter")
    if not script.exists() or (on_path and Path(on_path).resolve() == script.resolve()):
        return "trainspotter"
    return os.path.relpath(script) if script.absolute().is_relative_to(Path.cwd()) else str(script)


def emit_json(obj) -> None:
    """The verb's result as JSON, alone on stdout (logs and progress go to stderr)."""
    typer.echo(json.dumps(obj, indent=1, default=str))


def input_error(e: pydantic.ValidationError, rename: dict[str, str] | None = None) -> InputError:
    """The first validation error as ``option --NAME: message`` (``rename`` maps a config
    field path to the CLI option that sets it; a check on several fields names its field with
    ``FieldError``, and one that names none is the message alone)."""
    err = e.errors()[0]
    where = getattr(err.get("ctx", {}).get("error"), "field", None) or ".".join(map(str, err["loc"])) or "config"
    where = (rename or {}).get(where, where).replace("_", "-")
    message = err["msg"].removeprefix("Value error, ")
    return InputError(message if where == "config" else f"option --{where}: {message}")


EXPLAINED = (InputError, APIRequestError, AssetMissing)  # what the CLI prints as one `error: ...` line


class HideExplained(logging.Filter):
    """Drops Prefect's ERROR records (the task's and the flow's traceback, "Finished in state
    Failed(...)") about an error the CLI explains in one line anyway; any other failure is
    still logged in full."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        if record.exc_info and isinstance(record.exc_info[1], EXPLAINED):
            return False
        message = record.getMessage()
        return not any(f"{name}(" in message or f"{name}:" in message for name in _explained_names())


def _explained_names() -> set[str]:
    names, todo = set(), list(EXPLAINED)
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def hide_explained_failures() -> None:
    """Keep Prefect's tracebacks of explained errors off the terminal (not with -v). A filter on
    the loggers that log them survives Prefect's logging set-up, which replaces handlers."""
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, HideExplained) for f in logger.filters):
            logger.addFilter(HideExplained())


# The verdict in words (the table's caption says how the e-value decides, reject H0 or keep it).
DECISIONS = {"trained on": "[red]trained on[/red]", "no evidence": "[green]no evidence[/green]"}
# Why an inconclusive verdict is (AuditResult.guard): the decision column says it in words.
GUARDS = {"blind": "held-out differs from suspect", "placebo": "a model that saw neither set tells them apart",
          "small": "too few pairs to rule out a shift", "draw": "the twins draw is not shown random"}


def commitment_digest(value: str | None) -> str | None:
    """The --commitment option's value, checked: a sha256 digest (64 hex digits), lower case."""
    import re

    if value is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", value):
        raise InputError(f"option --commitment: {value!r} is not a sha256 digest (64 hex digits)")
    return value.lower() if value else None


def decision(r: dict) -> str:
    """A result's verdict in words for a table cell (why, when inconclusive)."""
    if r["verdict"] == "inconclusive":
        return f"[yellow]inconclusive: {GUARDS.get(r.get('guard') or 'blind')}[/yellow]"
    return DECISIONS[r["verdict"]]


def beacon_round_option(beacon_round: int | None) -> int:
    """--beacon-round, which every commitment must name (a release from a round picked later could
    have been picked to suit a model)."""
    if beacon_round is None or beacon_round < 0:
        raise InputError("option --beacon-round: " + ("missing" if beacon_round is None else f"{beacon_round} < 0")
                         + "; the round of a public randomness beacon (e.g. drand) whose value will decide the "
                           "release, one that comes after you publish the commitment")
    return beacon_round


def beacon_option(beacon: str | None):
    """--beacon as a ``Beacon`` (the fixed test value named as such); missing is one InputError."""
    from trainspotter.proofs.beacon import TEST_BEACON, parse_beacon

    if beacon is None:
        raise InputError("option --beacon: missing; the beacon round the commitment names, as drand publishes it "
                         "(JSON), once it exists")
    value = parse_beacon(beacon)
    return TEST_BEACON if value.known_in_advance and value.round == TEST_BEACON.round else value
