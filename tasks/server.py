"""One local Prefect API per artifacts folder, shared by every command that runs a flow.

Prefect 3 runs each flow against an API. Without ``PREFECT_API_URL`` each process would
start a temporary server of its own (8 s on an idle 2-core machine, 20 s on a busy one):
most of a short CLI audit. Instead the first command starts one in the background, in a
session of its own (so the caller's Ctrl-C or kill -9 does not take down another command's
flow), and writes its address to ``$PREFECT_HOME/api.json``; later commands find it there.
It stops by itself once no command has used it for ``TRAINSPOTTER_API_IDLE_S`` seconds
(default 300) and no process that asked for it is alive; a set ``PREFECT_API_URL`` (a real
Prefect server) always wins.

    python -m trainspotter.tasks.server PORT    # the server itself (started by use_local_api)
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from filelock import FileLock

# Prefect's own temporary server runs with these (no UI; no services meant for a long-lived server).
SERVER_ENV = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}


def idle_seconds() -> float:
    return float(os.environ.get("TRAINSPOTTER_API_IDLE_S", "300"))


def use_local_api() -> str:
    """The API this process's flows use: ``PREFECT_API_URL`` if set, else the artifacts
    folder's local server, started if none answers. Registers this process as a user of it."""
    from prefect.settings import PREFECT_API_URL

    if url := PREFECT_API_URL.value():
        return url
    home = Path(os.environ["PREFECT_HOME"])
    _register(home)
    with FileLock(home / "server-start.lock"):
        url = _answering(home) or _start(home)
    _pin(url)
    return url


def _register(home: Path) -> None:
    """A file per live user: the server stays up while any of them runs."""
    clients = home / "api-clients"
    clients.mkdir(parents=True, exist_ok=True)
    mine = clients / str(os.getpid())
    mine.touch()
    atexit.register(mine.unlink, missing_ok=True)


def _answering(home: Path) -> str | None:
    """The recorded server's API address if it answers its health check."""
    import httpx

    try:
        url = json.loads((home / "api.json").read_text())["url"]
        with httpx.Client(timeout=5, verify=False) as client:  # plain http: no TLS context to build (80 ms)
            return url if client.get(f"{url}/health").status_code == 200 else None
    except (OSError, ValueError, KeyError, httpx.HTTPError):
        return None


def _start(home: Path) -> str:
    """Start the server detached, wait for its health check, record its address."""
    import httpx
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    log = home / "api-server.log"
    deadline = time.monotonic() + PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
    for _ in range(3):  # a server that exits at once most likely lost its port to another process
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "trainspotter.tasks.server", str(port)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=os.environ | SERVER_ENV)
        with httpx.Client(timeout=5, verify=False) as client:  # one client: each new one builds a TLS context
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if client.get(f"{url}/health").status_code == 200:
                        tmp = home / f"api.json.{os.getpid()}.tmp"
                        tmp.write_text(json.dumps({"url": url, "pid": proc.pid}))
                        os.replace(tmp, home / "api.json")
                        return url
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        if proc.poll() is None:  # still starting at the deadline
            proc.kill()
            break
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"the local Prefect API did not start; its log, {log}, ends:\n{tail}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pin(url: str) -> None:
    """Point Prefect at ``url`` in this process and its children: the environment (read by
    children, Dask workers included) and Prefect's global settings, which it read once at
    import. (A settings context already entered keeps its own: call this before one.)"""
    from prefect.context import refresh_global_settings_context

    os.environ["PREFECT_API_URL"] = url
    refresh_global_settings_context()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _users(home: Path) -> int:
    """Live registered users; the files of dead ones are removed."""
    live = 0
    for f in (home / "api-clients").glob("*"):
        if f.name.isdigit() and _alive(int(f.name)):
            live += 1
        else:
            f.unlink(missing_ok=True)
    return live


def _watch(server, home: Path, last_request: list[float], idle: float) -> None:
    """Stop the server once it has had no users and no requests for ``idle`` seconds. The
    decision is taken under the start lock, so a command that has just found it keeps it."""
    while not server.should_exit:
        time.sleep(min(2.0, idle))
        if _users(home) or time.monotonic() - last_request[0] < idle:
            continue
        with FileLock(home / "server-start.lock"):
            if _users(home):
                continue
            record = home / "api.json"
            try:
                if json.loads(record.read_text()).get("pid") == os.getpid():
                    record.unlink()
            except (OSError, ValueError):
                pass
            server.should_exit = True


def main(port: int) -> None:
    os.environ.update(SERVER_ENV)
    import uvicorn
    from prefect.server.api.server import create_app

    app = create_app(ephemeral=True, final=True)
    last_request = [time.monotonic()]

    async def touched(scope, receive, send):
        last_request[0] = time.monotonic()
        await app(scope, receive, send)

    server = uvicorn.Server(uvicorn.Config(touched, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    home = Path(os.environ["PREFECT_HOME"])
    threading.Thread(target=_watch, args=(server, home, last_request, idle_seconds()), daemon=True).start()
    server.run()


if __name__ == "__main__":
    main(int(sys.argv[1]))
