"""The `trainspotter` command (typer): its app, every verb and group registered in the order
`--help` lists them, and ``main``, which turns bad input into one ``error: FILE:LINE: problem`` line
on stderr and exit status 2. The verbs live one group a module beside this one."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console

from trainspotter.assets import AssetMissing
from trainspotter.errors import APIRequestError, InputError
from trainspotter.flows.cli import api, audit, benchmark, features, keyed, report, stats, testbed, twins, verify
from trainspotter.flows.cli.common import Typer, hide_explained_failures

app = Typer(help="Was this dataset used to train that language model? "
                 "Anytime-valid dataset inference with e-values.",
            no_args_is_help=True, pretty_exceptions_show_locals=False)


def _version(value: bool) -> None:
    if value:
        from trainspotter import __version__

        typer.echo(f"trainspotter {__version__}")
        raise typer.Exit()


@app.callback()
def _quiet(verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's and MLflow's INFO "
                                        "log lines (each task run, server start, database setup)."),
           version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                        help="Print trainspotter's version and exit.")) -> None:
    """Quiet by default: the verbs print their own results and progress bars; the
    orchestration's INFO lines only with -v (an explicit PREFECT_LOGGING_LEVEL or
    MLFLOW_LOGGING_LEVEL in the environment wins over the default, not over -v)."""
    for var in ("PREFECT_LOGGING_LEVEL", "MLFLOW_LOGGING_LEVEL"):  # read when prefect/mlflow are imported
        if verbose:
            os.environ[var] = "INFO"
        else:
            os.environ.setdefault(var, "WARNING")
    if not verbose:
        hide_explained_failures()


# Every verb and group has a short_help: one complete sentence for the verb lists of
# `--help` (click would otherwise cut the docstring mid-sentence; tests/e2e/test_help.py).
app.add_typer(testbed.testbed_app, name="testbed")
app.add_typer(audit.ledger_app, name="ledger")
app.command("assets", short_help="List the packaged models and corpora and where they are.")(testbed.assets_cmd)
app.command("demo", short_help="Audit a testbed's members and non-members against held-out.")(audit.demo_cmd)
app.command("audit", short_help="Test whether SUSPECT was used to train MODEL.")(audit.audit_cmd)
app.command("report", short_help="Write the HTML report of an audit or benchmark run.")(report.report_cmd)
app.command("test", short_help="Run the anytime-valid sequential test on a features table.")(stats.test_cmd)
app.command("simulate", short_help="Simulate the test's TPR, FPR and stopping times.")(stats.simulate_cmd)
app.command("serve", short_help="Serve a local model as an OpenAI-compatible API.")(api.serve_cmd)
app.add_typer(api.cache_app, name="cache", short_help="Show or clear the query cache of API answers.")
app.command("extract", short_help="Extract membership features of passages into Parquet.")(features.extract_cmd)
app.add_typer(features.features_app, name="features", short_help="List the membership features.")
app.add_typer(twins.twins_app, name="twins", short_help="Make twins of data before you release it.")
app.add_typer(keyed.keyed_app, name="keyed", short_help="Release data under one key and audit it.")
app.command("verify", short_help="Check a sealed audit record offline, without the model.")(verify.verify_cmd)
app.command("benchmark", short_help="Benchmark MIA methods and DI tests on a testbed.")(benchmark.benchmark_cmd)


def _error(message: str, status: int = 2):
    Console(stderr=True).print("error: " + " ".join(message.split()), markup=False, highlight=False, soft_wrap=True)
    sys.exit(status)


def main() -> None:
    from trainspotter.tasks.worker import allow_fork
    allow_fork()  # this process is the command's own: an audit may fork its model worker
    try:
        status = app(standalone_mode=False)  # typer's usage errors come here instead of a box
    except InputError as e:
        _error(str(e))
    except (APIRequestError, AssetMissing) as e:  # an API server failed; an optional asset is missing
        _error(str(e), 1)
    except typer.TyperException as e:  # bad or missing option value, unknown option or command
        if type(e).__name__ == "NoArgsIsHelpError":
            sys.exit(e.exit_code)  # the help is already printed
        _error(e.format_message(), e.exit_code)
    except typer.Abort:
        _error("aborted", 130)
    sys.exit(status if isinstance(status, int) else 0)
