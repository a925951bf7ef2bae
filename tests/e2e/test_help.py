"""The help agrees with the behaviour, and the output fits the terminal (issue 24).

- every default that a help text states equals the default the parser (or, for the
  benchmark's unset options, BenchmarkConfig / ShiftConfig) actually uses;
- every verb and group has a one-sentence short help that the verb lists of `--help`
  show whole, in rich and in plain (TYPER_USE_RICH=0) rendering, at 80 columns;
- `trainspotter assets` never cuts a path with an ellipsis, at 80 or 120 columns.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import re
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from trainspotter.flows.cli import app

ROOT = typer.main.get_command(app)
REPO = Path(__file__).resolve().parents[2]


def _walk(cmd, path=()):
    """(path, command, context) of every verb and group under cmd, depth first."""
    parent = cmd.context_class(cmd, info_name=" ".join(path) or "trainspotter")
    for name, sub in cmd.commands.items():
        yield path + (name,), sub, sub.context_class(sub, info_name=name, parent=parent)
        if hasattr(sub, "commands"):
            yield from _walk(sub, path + (name,))


EVERY = [(path, cmd, ctx) for path, cmd, ctx in _walk(ROOT)]
VERBS = [(path, cmd, ctx) for path, cmd, ctx in EVERY if not hasattr(cmd, "commands")]
GROUPS = [()] + [path for path, cmd, _ in EVERY if hasattr(cmd, "commands")]


def _squash(text: str) -> str:
    """Help or table output with borders and line breaks gone: words separated by one space."""
    return " ".join(re.sub(r"[│┃║|╭╮╰╯─━┏┓┗┛┡┩┣┫╇╋┳┻┃]", " ", text).split())


# ------------------------------------------------------------------ short help of every verb


def test_every_verb_and_group_is_covered():
    names = {path for path, _, _ in EVERY}
    assert {("audit",), ("benchmark",), ("report",), ("assets",), ("testbed", "build"), ("ledger", "show"),
            ("cache", "stats"), ("cache", "clear"), ("features", "list"), ("extract",)} <= names


@pytest.mark.parametrize("path", [path for path, _, _ in EVERY], ids=" ".join)
def test_short_help_is_one_complete_sentence(path):
    """click shortens a missing short_help from the docstring and cuts it with "..."; an
    explicit one-line sentence that fits an 80-column verb list is shown whole."""
    cmd = dict((p, c) for p, c, _ in EVERY)[path]
    short = cmd.short_help
    assert short, f"{' '.join(path)}: no short_help"
    assert "\n" not in short and short == short.strip() and short.endswith(".") and not short.endswith("...")
    assert short[0].isupper() and len(short) <= 60, short


@pytest.mark.parametrize("group,rich", [(g, r) for g in GROUPS for r in (True, False)],  # plain cuts with "..."
                         ids=lambda v: ("rich" if v else "plain") if isinstance(v, bool) else " ".join(v) or "trainspotter")
def test_help_lists_every_verb_with_its_whole_description(monkeypatch, group, rich):
    monkeypatch.setattr("typer.core.HAS_RICH", rich)  # plain: what TYPER_USE_RICH=0 gives
    monkeypatch.setattr("typer.rich_utils.MAX_WIDTH", 80)
    out = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert out.exit_code == 0, out.output
    listing = out.output[out.output.index("Commands"):]
    assert "..." not in listing and "…" not in listing
    text = _squash(listing)
    cmd = ROOT
    for name in group:
        cmd = cmd.commands[name]
    for name, sub in cmd.commands.items():
        described = sub.short_help or " ".join(sub.help.split("\n\n")[0].split())
        assert f"{name} {described}" in text, (name, described, listing)


# ------------------------------------------------------------------ documented defaults


def _shown(param) -> str | None:
    """The default as click prints it in "[default: …]"."""
    value = param.default
    if isinstance(value, bool) and getattr(param, "is_flag", False):
        on, off = param.opts[0].lstrip("-"), (param.secondary_opts or ["--no-" + param.opts[0].lstrip("-")])[0]
        return on if value else off.lstrip("-")
    if isinstance(value, enum.Enum):
        return str(value.value)
    return None if value is None else str(value)


def _benchmark_defaults() -> dict[str, tuple[str, str | None]]:
    """What each benchmark option does when not given: (--suite mia, --suite shift or None
    where the option is not passed to the shift suite)."""
    from trainspotter.config import artifacts_root
    from trainspotter.evaluation.benchmark import BenchmarkConfig
    from trainspotter.evaluation.mia import METHODS
    from trainspotter.evaluation.shift_suite import ShiftConfig
    from trainspotter.flows.benchmark import default_out

    b, s = BenchmarkConfig(), ShiftConfig()
    csv = lambda values: ", ".join(map(str, values))  # noqa: E731  (spaces: rich folds there)
    everything = lambda value, full: "all" if value == full else csv(value)  # noqa: E731
    results = "the artifacts folder's " + default_out().relative_to(artifacts_root()).as_posix()
    assert b.out is None and s.out is None  # the flows then write under default_out()
    return {
        "testbed": (b.testbed, s.testbed),
        "methods": ("all but model- and learning-based"
                    if b.methods == tuple(m for m in METHODS if not METHODS[m].extraction.uses_bank)
                    else everything(b.methods, tuple(METHODS)), None),
        "reference": ("the testbed's reference" if b.reference == () else csv(b.reference), None),
        "reference_models": (str(b.reference_models), None),
        "trials": (str(b.trials), str(s.trials)),
        "null_trials": ("--trials" if b.null_trials is None else str(b.null_trials),
                        f"{s.iid_trials} IID, {s.pollution_trials} pollution"),
        "n_max": ("all" if b.n_max is None else str(b.n_max), "all" if s.n_max is None else str(s.n_max)),
        "strategies": (csv(b.strategies), None),
        "payoffs": (csv(b.payoffs), None),
        "di_access": (csv(b.di_access), None),
        "alphas": (csv(b.alphas), None),
        "limit": ("all" if b.limit is None else str(b.limit), "all" if s.limit is None else str(s.limit)),
        "cost_samples": (str(b.cost_samples), None),
        "cost_repeats": (str(b.cost_repeats), None),
        "partitions": (str(b.partitions), None),
        "n_boot": (str(b.n_boot), None),
        "perturbation_kinds": (csv(b.features.perturbation_kinds), None),
        "seed": (str(b.seed), str(s.seed)),
        "out": (f"{results}/TESTBED/", f"{results}/"),
    }


def _descriptive(verb: str, name: str, stated: str, param) -> bool:
    """Defaults stated in words, each checked against what the code does."""
    from trainspotter.presets import DEFAULT_PRESET, TWINS_PRESET

    if verb == "audit" and name in ("strategy", "payoff", "lambda_max", "scorer"):
        return stated == "from the preset" and param.default is None  # AuditConfig fills it from --preset
    if verb == "audit" and name == "preset":  # AuditConfig: TWINS_PRESET for twins, else DEFAULT_PRESET
        return stated == f"{DEFAULT_PRESET} ({TWINS_PRESET} with --twins)" and param.default is None
    if verb == "audit" and name == "twins_private":  # None: AuditConfig's default, or a continued ledger's choice
        from trainspotter.auditing.config import AuditConfig

        default = AuditConfig.model_fields["twins_private"].default
        return stated.startswith(f"{default} (a --ledger audit: its stored choice") and param.default is None
    if verb == "extract" and name in ("perturbations", "sequence"):
        return stated == "from --features" and param.default is None  # extract_cmd: the set's flag
    if name == "tracking_uri":
        return (stated == "$MLFLOW_TRACKING_URI, else a SQLite store in the artifacts folder"
                and param.default is None and _tracking_default())
    if verb == "serve" and name == "model_name":
        return stated == "SPEC" and param.default is None  # serve_cmd: model_name or spec
    if verb == "twins make" and name == "rate":  # None: the rewriter's own rule, the uniform choice
        from trainspotter.rewriters.lexical import KeyedLexicalRewriter

        return (stated.startswith("each key picks uniformly") and param.default is None
                and KeyedLexicalRewriter().rate is None)
    if verb == "twins make" and name == "unit":  # None: a generative rewriter's unit (the lexical one takes none)
        from trainspotter.flows.cli.twins import DEFAULT_UNIT

        return stated == DEFAULT_UNIT and param.default is None
    if verb == "twins make" and name in ("max_edit_rate", "min_similarity"):  # None: the rewriter's gate
        from trainspotter.twins.make import GATES

        show = lambda v: "none" if v is None else str(v)  # noqa: E731
        return (stated == f"{show(GATES['lexical'][name])} lexical, {show(GATES['generative'][name])} generative"
                and param.default is None)
    if verb == "keyed audit" and name == "prompts":  # None: the packaged corpus, release-like leads left out
        from trainspotter.keyed.audit import SHINGLE

        return stated == f"the packaged Wikipedia leads that share no run of {SHINGLE} words with the release"
    if verb == "serve" and name == "host":
        return stated == "loopback" and ipaddress.ip_address(param.default).is_loopback
    return False


def _tracking_default() -> bool:
    """flows.tracking.tracking_uri(None): the environment's server, else SQLite in artifacts/."""
    from unittest import mock

    from trainspotter.config import artifacts_root
    from trainspotter.flows.tracking import tracking_uri

    with mock.patch.dict(os.environ, {"MLFLOW_TRACKING_URI": "http://mlflow.example:5000"}):
        from_env = tracking_uri(None)
    with mock.patch.dict(os.environ):
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        local = tracking_uri(None)
    return from_env == "http://mlflow.example:5000" and local == f"sqlite:///{artifacts_root() / 'mlflow.db'}"


STATED = [re.compile(r"\(default: (?P<value>[^;)]*)(?:; --suite shift: (?P<shift>[^)]*))?"),
          re.compile(r"\bDefault: (?P<value>[^\s.]+(?: \([^)]*\))?)\."),
          re.compile(r"\((?P<value>[^()]*) by default\)")]


@pytest.mark.parametrize("path,cmd,ctx", VERBS, ids=[" ".join(p) for p, _, _ in VERBS])
def test_documented_defaults_are_the_real_ones(path, cmd, ctx):
    verb = " ".join(path)
    bench = _benchmark_defaults() if verb == "benchmark" else {}
    checked = set()
    for param in cmd.params:
        record = param.get_help_record(ctx)
        if record is None:
            continue
        help_text = " ".join(record[1].split())
        # typer's own "[default: …]" (from the parameter itself)
        for shown in re.findall(r"\[default: ([^\];]*)", help_text):
            assert shown == _shown(param), (verb, param.name, shown, param.default)
        own = re.sub(r"\[default: [^\]]*\]", "", help_text)
        stated = [m for pattern in STATED for m in pattern.finditer(own)]
        if "default" in own.lower():
            assert stated, f"{verb} --{param.name}: help mentions a default in a form this test cannot check: {own}"
        for m in stated:
            value, shift = m.group("value").strip(), m.groupdict().get("shift")
            checked.add(param.name)
            if param.name in bench:
                mia_default, shift_default = bench[param.name]
                assert value == mia_default, (verb, param.name, value, mia_default)
                if shift_default is None:
                    assert shift is None, (verb, param.name, "does not apply to --suite shift")
                else:
                    assert (shift or value) == shift_default, (verb, param.name, shift or value, shift_default)
            elif param.default is not None and not isinstance(param.default, bool):
                assert value == _shown(param) or _descriptive(verb, param.name, value, param), \
                    (verb, param.name, value, param.default)
            else:
                assert _descriptive(verb, param.name, value, param), (verb, param.name, value, param.default)
    # every benchmark option left unset states the default it falls back to
    assert set(bench) <= checked, set(bench) - checked


def test_benchmark_help_and_features_list_name_every_method_and_tddbench_algorithm(monkeypatch):
    """METHOD_HELP is the registry by paradigm, so all 21 TDDBench names are in --help; the
    methods table of `features list --all` shows them too (the short listing has none)."""
    from trainspotter.evaluation.mia import METHODS
    from trainspotter.evaluation.tddbench import PARADIGMS
    from trainspotter.flows.cli.benchmark import METHOD_HELP

    tddbench = {m.tddbench for m in METHODS.values() if m.tddbench}
    assert len(tddbench) == 21  # LiRA online and offline are both TDDBench's Model-lira
    assert METHOD_HELP == "; ".join(f"{p}: " + ", ".join(f"{n} ({m.tddbench})" if m.tddbench else n
                                                         for n, m in METHODS.items() if m.paradigm == p)
                                    for p in PARADIGMS)
    monkeypatch.setattr("typer.core.HAS_RICH", False)
    squeeze = lambda args: "".join(_squash(CliRunner().invoke(app, args, env={"COLUMNS": "400"}).output).split())  # noqa: E731
    text, listed = squeeze(["benchmark", "--help"]), squeeze(["features", "list", "--all"])  # wrapped lines joined
    for name in tddbench | set(METHODS):
        assert name in text and name in listed, name


def test_benchmark_help_states_every_default_payoff(monkeypatch):
    from trainspotter.evaluation.benchmark import BenchmarkConfig
    from trainspotter.evaluation.benchmark_di import di_configs

    monkeypatch.setattr("typer.core.HAS_RICH", False)
    out = CliRunner().invoke(app, ["benchmark", "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    config = BenchmarkConfig()
    payoffs = {t.payoff for t in di_configs(config)}  # what the benchmark actually runs
    assert "mmd-std" in payoffs and set(config.payoffs) == payoffs
    assert f"(default: {', '.join(config.payoffs)})" in " ".join(out.output.split())


def test_report_help_names_benchmark_runs_too(monkeypatch):
    monkeypatch.setattr("typer.core.HAS_RICH", False)
    out = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    text = " ".join(out.output.split())
    assert out.exit_code == 0 and "benchmark" in text and "audit" in text
    assert "benchmark" in ROOT.commands["report"].short_help


# ------------------------------------------------------------------ tables fit the terminal


@pytest.mark.parametrize("columns", [80, 120])
def test_assets_prints_every_path_whole(columns):
    from trainspotter.assets import assets_as_dicts

    out = CliRunner().invoke(app, ["assets"], env={"COLUMNS": str(columns)})
    assert out.exit_code == 0, out.output
    assert "…" not in out.output and "..." not in out.output
    rows = assets_as_dicts()
    assert any(r["installed"] for r in rows)
    # the table fits; each path (or install command) is whole on a line of its own (issue 52: a cell broke it)
    paths = {f"{r['name']}: {r['path'] if r['installed'] else r['install']}" for r in rows}
    assert paths <= set(out.output.splitlines()), out.output
    assert max(len(line) for line in out.output.splitlines() if line not in paths) <= columns


@pytest.mark.parametrize("path", [path for path, _, _ in VERBS], ids=" ".join)
def test_help_fits_100_columns_without_cutting_a_word(path):
    """rich cuts a word longer than its help column with "…": help texts keep lists and
    alternatives breakable (", " rather than "," or "/")."""
    out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": "100"})
    assert out.exit_code == 0, out.output
    assert "…" not in out.output, [line for line in out.output.splitlines() if "…" in line]


# ------------------------------------------------------------------ one meaning per option name

# Option names whose help may differ between verbs, and why (everything else shared by
# several verbs must be the one definition in flows/cli/common.py).
MAY_DIFFER = {
    "suspect": "extract labels rows, audit tests them", "heldout": "extract labels rows, audit tests them",
    "out": "a page, a table or a folder",
    "n_max": "per simulation trial or per benchmark trial",
    "trials": "of one simulation, or of each benchmark configuration",
    "reference": "audit and extract query the models named; benchmark defaults to the testbed's own reference",
    "access": "an audit's features (gray, black, both); a keyed audit's answers (sampled continuations or "
              "next-token probabilities)",
    "rewriter": "twins make keys each variant and may call an openai: endpoint; a keyed release has one key "
                "and a watermark the tool computes",
}


def _meaning(help_text: str) -> str:
    """A help text without its default and range notes: what the option means."""
    text = re.sub(r"\s*\[(default|required|x>=|x<=)[^\]]*\]", "", " ".join(help_text.split()))
    return re.sub(r"\s*\(default: [^)]*\)", "", text).rstrip(".")


def test_an_option_name_means_one_thing_in_every_verb():
    meanings: dict[str, dict[str, str]] = {}
    for path, cmd, ctx in VERBS:
        for param in cmd.params:
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param, typer.core.TyperOption):
                meanings.setdefault(param.name, {})[" ".join(path)] = _meaning(record[1])
    shared = {name: verbs for name, verbs in meanings.items() if len(verbs) > 1}
    assert {"alpha", "seed", "tracking_uri", "model", "reference", "scorer", "max_pairs"} <= set(shared)
    for name, verbs in shared.items():
        if name not in MAY_DIFFER:
            assert len(set(verbs.values())) == 1, (name, verbs)
    for name in MAY_DIFFER:  # an exemption is kept only while the meanings really differ
        assert name in shared, f"--{name} is in one verb only: drop it from MAY_DIFFER"
        assert len(set(shared[name].values())) > 1, f"--{name} means one thing now: drop it from MAY_DIFFER"
        assert all(shared[name].values()), (name, shared[name])
    assert set(shared["scorer"]) == {"audit", "test", "simulate"}
    assert {"audit", "extract"} <= set(shared["features"]) and "dask_address" in shared
