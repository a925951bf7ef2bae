"""CLI verbs for the black-box API path: `trainspotter serve` and `trainspotter cache`."""

from __future__ import annotations

import json

import typer

from trainspotter.flows.cli.common import JSON, SEED, Typer, emit_json

cache_app = Typer(help="The query cache of API answers (artifacts/query-cache.sqlite).",
                  no_args_is_help=True)


def serve_cmd(spec: str = typer.Argument(..., help="Local model: hf:PATH, testbed:NAME or testbed:NAME/reference."),
              host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default)."),
              port: int = typer.Option(8000, help="TCP port (0: any free port; --json tells which)."),
              model_name: str = typer.Option(None, "--model-name", help="Name in /v1/models (default: SPEC)."),
              fail_rate: float = typer.Option(0.0, min=0.0, max=1.0,
                                              help="Fraction of requests that fail (429, 500, timeout, "
                                                   "truncated or malformed), for testing clients."),
              fail_sleep: float = typer.Option(5.0, help="Seconds an injected timeout sleeps."),
              seed: int = SEED,
              list_prompts: bool = typer.Option(True, "--list-prompts/--no-list-prompts",
                                                help="--no-list-prompts: answer a list of several prompts "
                                                     "with HTTP 500, as llama-cpp-python's server does."),
              echo_logprobs: str = typer.Option("ok", help="ok; shifted: echo's log-probs one position "
                                                           "early (off by one); none: echo returns the "
                                                           "prompt text without its log-probs; fed: each "
                                                           "entry holds the next token's row and its "
                                                           "log-prob of the token fed (llama-cpp-python)."),
              empty_prompt: bool = typer.Option(True, "--empty-prompt/--no-empty-prompt",
                                                help="--no-empty-prompt: answer the prompt \"\" with HTTP "
                                                     "500, as llama-cpp-python does for models adding no BOS."),
              ignore_logprobs: bool = typer.Option(False, help="Accept `logprobs` and return none."),
              chat_only: bool = typer.Option(False, help="Serve only /v1/chat/completions "
                                                         "(/v1/completions answers 404)."),
              json_out: bool = JSON) -> None:
    """Serve a local model as an OpenAI-compatible API (/v1/models, /v1/completions with
    logprobs and echo, /v1/chat/completions); the quirk switches imitate servers that
    differ from the reference, for testing clients. Its result is where it listens: with
    --json, once listening, the base URL, host, port and model name as one JSON line."""
    from trainspotter.backends.serve import ECHO_LOGPROBS, Quirks, serve
    from trainspotter.backends.spec import check_loadable
    from trainspotter.errors import InputError

    check_loadable(spec)  # a bad spec or a folder that is not a model ends as one clear line
    if echo_logprobs not in ECHO_LOGPROBS:
        raise InputError(f"--echo-logprobs {echo_logprobs!r}: expected one of {', '.join(ECHO_LOGPROBS)}")
    quirks = Quirks(list_prompts=list_prompts, echo_logprobs=echo_logprobs, ignore_logprobs=ignore_logprobs,
                    chat_only=chat_only, empty_prompt=empty_prompt)

    def ready(bound_host: str, bound_port: int) -> None:
        url = f"http://{bound_host}:{bound_port}/v1"
        if json_out:  # one line, so a script can read it while the server keeps running
            typer.echo(json.dumps({"url": url, "host": bound_host, "port": bound_port,
                                   "model": model_name or spec, "spec": spec, "quirks": quirks.active()}))
        else:
            typer.echo(f"serving {spec} at {url}" + (f" with quirks {quirks.active()}" if quirks.active() else ""),
                       err=True)

    serve(spec, host=host, port=port, fail_rate=fail_rate, seed=seed, fail_sleep=fail_sleep,
          model_name=model_name, ready=ready, quirks=quirks)


@cache_app.command("stats", short_help="Show the entries and size of the query cache.")
def cache_stats_cmd(json_out: bool = JSON) -> None:
    """Entries and size of the query cache, per backend fingerprint and method."""
    from trainspotter.backends.cache import QueryCache

    stats = QueryCache().stats()
    if json_out:
        return emit_json(stats)
    typer.echo(f"{stats['path']}: {stats['entries']} answers, {stats['bytes'] / 1e6:.2f} MB")
    for row in stats["by_backend"]:
        typer.echo(f"  {row['fingerprint']} {row['method']}: {row['entries']}")


@cache_app.command("clear", short_help="Delete every cached answer.")
def cache_clear_cmd(json_out: bool = JSON) -> None:
    """Delete every cached answer (the next run queries the APIs again)."""
    from trainspotter.backends.cache import QueryCache

    removed = QueryCache().clear()
    if json_out:
        return emit_json({"removed": removed})
    typer.echo(f"removed {removed} cached answers")
