"""The `trainspotter` command in a process of its own, started from a warm interpreter: how the CLI
tests run it (imported by name: tests/ is on sys.path through its conftest.py).

A test of the command line runs `python -m trainspotter.flows.cli ARGS` with its own environment,
working folder, standard streams and exit status, as a user's shell does. Started cold, every such
process first spends seconds importing torch, transformers, scikit-learn, SciPy, pandas and pyarrow,
which made up most of the suite's time. So one helper process per test worker (the zygote, this
file run as a script) imports those third-party packages once, and each command is a fork of it
that takes the command's environment and folder, points its standard streams at files, and runs
the module as `-m` does. trainspotter, Prefect and MLflow are never preloaded: the command sets
what they read when they are imported (Prefect's home and log level, MLflow's), and imports them
itself as in a cold start. The command's code, options, error lines and exit statuses are the real
ones; what differs from a cold start is only which third-party modules are already in memory, so
tests of a cold start itself (what `import trainspotter` costs, the model worker that a command
forks before torch is imported, kills, parallel processes) start real interpreters instead.

    out = run_cli(["audit", "--suspect", ...], env=env, timeout=600)  # a CompletedProcess
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MODULE = "trainspotter.flows.cli"
# What the command's own defaults set before these load (trainspotter.tasks.configure_environment),
# set in the zygote before it imports them: read once at import, they must be the command's.
PRELOAD_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
PRELOAD = ("numpy", "scipy.stats", "scipy.optimize", "scipy.sparse", "pandas", "pyarrow.parquet", "sklearn.metrics",
           "sklearn.linear_model", "sklearn.feature_extraction.text", "torch", "transformers",
           "transformers.models.llama.modeling_llama", "transformers.models.gpt2.modeling_gpt2", "tokenizers",
           "pydantic", "typer", "rich.console", "rich.progress", "httpx", "sqlalchemy", "matplotlib.pyplot",
           # what Prefect and MLflow import that reads none of their settings (~1.5 s a command)
           "fastapi", "sqlalchemy.orm", "alembic")


class Zygote:
    """One warm interpreter (``serve``), asked over its stdin and stdout to fork a command at a time."""

    def __init__(self):
        env = os.environ | PRELOAD_ENV | {"MPLBACKEND": "Agg"}
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, bufsize=1)
        self.lock = threading.Lock()

    def run(self, args: list[str], env: dict[str, str], cwd: str | None, timeout: float | None,
            input: str | None = None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="cli-") as tmp, self.lock:
            files = {name: str(Path(tmp) / name) for name in ("stdin", "stdout", "stderr")}
            Path(files["stdin"]).write_text(input or "", encoding="utf-8")
            request = {"argv": [MODULE, *args], "env": dict(env), "cwd": cwd or os.getcwd(),
                       "timeout": timeout, **files}
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the CLI zygote died")
            reply = json.loads(line)
            out, err = (Path(files[s]).read_text(encoding="utf-8", errors="replace") for s in ("stdout", "stderr"))
        command = [sys.executable, "-m", *request["argv"]]
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(command, timeout, out, err)
        return subprocess.CompletedProcess(command, reply["returncode"], out, err)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


_zygote: list[Zygote] = []


def run_cli(args, env: dict[str, str] | None = None, cwd=None, timeout: float | None = 600,
            input: str | None = None) -> subprocess.CompletedProcess:
    """`python -m trainspotter.flows.cli ARGS` with ``env`` (default: this process's environment),
    in ``cwd``: its exit status, stdout and stderr, as ``subprocess.run(..., capture_output=True,
    text=True)`` gives them; ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the command
    is killed)."""
    if not _zygote:
        _zygote.append(Zygote())
    return _zygote[0].run([str(a) for a in args], os.environ.copy() if env is None else env,
                          None if cwd is None else str(cwd), timeout, input)


def close() -> None:
    """End the zygote (the session's end)."""
    while _zygote:
        _zygote.pop().close()


# -- the zygote itself ---------------------------------------------------------------------------


def _child(request: dict) -> None:
    """In the fork: become the command (streams, folder, environment, argv) and run it as `-m` does."""
    import atexit
    import runpy
    import traceback

    code = 1
    try:
        os.setsid()  # its own process group: a timeout kills what it started in the foreground too
        for fd, name, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY | os.O_TRUNC),
                                (2, "stderr", os.O_WRONLY | os.O_TRUNC)):
            os.dup2(os.open(request[name], flags | os.O_CREAT, 0o644), fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        sys.path[0] = request["cwd"]  # as `python -m` puts the working folder first
        runpy.run_module(request["argv"][0], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # what the interpreter prints for an uncaught exception
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # as at a normal exit: MLflow ends its runs, the Prefect client leaves
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """Import the third-party packages once, then fork one command per request line on stdin and
    answer each with its exit status (and whether it ran out of time)."""
    import importlib
    import signal

    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a preloaded package started a thread: forking would not be safe"
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        deadline = None if request["timeout"] is None else time.monotonic() + request["timeout"]
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if deadline is not None and time.monotonic() > deadline:
                timed_out = True
                os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        code = os.waitstatus_to_exitcode(status)
        sys.stdout.write(json.dumps({"returncode": code, "timed_out": timed_out}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
