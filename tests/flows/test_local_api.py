"""The local Prefect API shared by the commands of one artifacts folder (tasks/server.py):
found again by the next command, replaced when its record is stale, gone once idle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from isolated_env import env_for

USE = "from trainspotter.tasks.server import use_local_api; print(use_local_api())"


def use(root: Path, **env: str) -> str:
    """The API address a fresh process of this artifacts folder gets."""
    out = subprocess.run([sys.executable, "-c", USE], capture_output=True, text=True, timeout=300,
                         env=env_for(root, **env))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def test_the_next_command_finds_the_server_and_it_stops_once_idle(tmp_path):
    root, idle = tmp_path / "artifacts", "15"
    first = use(root, TRAINSPOTTER_API_IDLE_S=idle)
    record = root / "prefect" / "api.json"
    pid = json.loads(record.read_text())["pid"]
    assert json.loads(record.read_text())["url"] == first and alive(pid)
    assert use(root, TRAINSPOTTER_API_IDLE_S=idle) == first  # found, not started again
    assert wait_for(lambda: not alive(pid), timeout=90), "the idle server did not stop"
    assert not record.exists()
    assert not list((root / "prefect" / "api-clients").iterdir())  # the users' files are gone too


def test_a_stale_record_starts_a_new_server(tmp_path):
    root = tmp_path / "artifacts"
    (root / "prefect").mkdir(parents=True)
    dead = "http://127.0.0.1:9/api"  # nothing answers there
    (root / "prefect" / "api.json").write_text(json.dumps({"url": dead, "pid": 1}))
    url = use(root, TRAINSPOTTER_API_IDLE_S="2")
    assert url != dead and url.startswith("http://127.0.0.1:")
    assert json.loads((root / "prefect" / "api.json").read_text())["url"] == url


def test_a_set_api_url_wins(tmp_path):
    """A real Prefect server named by PREFECT_API_URL is used as is; nothing is started."""
    url = "http://127.0.0.1:9/api"
    assert use(tmp_path / "artifacts", PREFECT_API_URL=url) == url
    assert not (tmp_path / "artifacts" / "prefect" / "api.json").exists()
