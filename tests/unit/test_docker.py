"""No Docker engine runs here: every command the image and the compose file would run is
resolved against the installed project and tools instead (console script, CLI options,
deployment entrypoints and parameters, paths inside the image)."""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv the image puts first on PATH


def _dockerfile() -> dict[str, str]:
    """The Dockerfile's instructions (continuation lines joined; repeated ones on separate lines)."""
    text = re.sub(r"\\\n", " ", (ROOT / "docker/Dockerfile").read_text())
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            instr, _, rest = line.partition(" ")
            out[instr] = (out[instr] + "\n" if instr in out else "") + rest.strip()
    return out


def _image_env(docker: dict[str, str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in shlex.split(docker["ENV"]))


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker/compose.yaml").read_text())["services"]


def test_image_entrypoint_is_the_installed_cli():
    """ENTRYPOINT names the console script the project declares, installed by the README's
    install script into the venv that the image puts on PATH; ENTRYPOINT + CMD runs."""
    docker = _dockerfile()
    entry, cmd = json.loads(docker["ENTRYPOINT"]), json.loads(docker["CMD"])
    assert "bash scripts/install.sh" in docker["RUN"]
    venv = re.search(r"^VENV=(\S+)$", (ROOT / "scripts/install.sh").read_text(), re.M).group(1)
    assert f"python -m venv {venv} " in docker["RUN"]  # the venv install.sh fills
    path = _image_env(docker)["PATH"].split(":")
    assert str(PurePosixPath(docker["WORKDIR"]) / venv / "bin") == path[0]
    (script,) = importlib.metadata.entry_points(group="console_scripts", name=entry[0])
    from trainspotter.flows.cli import main

    assert script.load() is main
    run = subprocess.run([str(BIN / entry[0]), *cmd], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "audit" in run.stdout, run.stderr[-2000:]


def _commands(service: dict) -> list[list[str]]:
    """The argv of every program a service runs: its exec-form entrypoint, or each command of
    a ``bash -c`` script (split at &&, ||, parentheses; redirections dropped)."""
    if service["entrypoint"][:2] != ["bash", "-c"]:
        return [service["entrypoint"]]
    script = re.sub(r"\s\d?>&?\S+", " ", service["command"][0])
    return [shlex.split(part) for part in re.split(r"&&|\|\||[()]", script) if part.strip()]


def _unknown_options(argv: list[str]) -> list[str]:
    """Options of ``argv`` that its program's --help for the same subcommand does not list."""
    words = argv[1:]
    while words and words[0].startswith("-"):  # global options before the subcommand
        words = words[1:]
    command = list(itertools.takewhile(lambda w: not w.startswith("-"), words))
    out = subprocess.run([str(BIN / argv[0]), *command, "--help"], capture_output=True, text=True, timeout=300,
                         env=os.environ | {"COLUMNS": "200"})
    assert out.returncode == 0, (argv, out.stderr[-2000:])
    options = [w.split("=")[0] for w in argv[1:] if w.startswith("--")]
    return [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", out.stdout)]


def test_compose_services_run_real_commands_with_real_options(compose):
    """Every program the services start (prefect server, mlflow server, the worker's prefect
    commands) is installed in the image's venv and accepts the options given; the worker
    deploys the repository's deployment file to the pool it then serves."""
    argvs = [argv for svc in compose.values() for argv in _commands(svc)]
    assert {a[0] for a in argvs} == {"prefect", "mlflow"}
    with ThreadPoolExecutor(4) as pool:
        unknown = dict(zip(map(" ".join, argvs), pool.map(_unknown_options, argvs)))
    assert not any(unknown.values()), unknown
    worker = {tuple(a[1:3]): a for a in _commands(compose["worker"])}
    deploy = next(a for a in worker.values() if "deploy" in a)
    prefect_file = deploy[deploy.index("--prefect-file") + 1]
    pools = {worker[("work-pool", verb)][3] for verb in ("inspect", "create")} | {worker[("worker", "start")][-1]}
    deployments = yaml.safe_load((ROOT / prefect_file).read_text())["deployments"]
    assert pools == {d["work_pool"]["name"] for d in deployments}  # one pool, created and served


def test_services_share_the_ports_the_servers_listen_on(compose):
    def port(argv):
        return argv[argv.index("--port") + 1]

    env = compose["worker"]["environment"]
    assert env["PREFECT_API_URL"] == f"http://prefect-server:{port(compose['prefect-server']['entrypoint'])}/api"
    assert env["MLFLOW_TRACKING_URI"] == f"http://mlflow:{port(compose['mlflow']['entrypoint'])}"
    artifacts = _image_env(_dockerfile())["TRAINSPOTTER_ARTIFACTS"]
    for svc in compose.values():  # every service sees the one artifacts volume where the CLI writes
        assert svc["build"]["dockerfile"] == "docker/Dockerfile" and f"artifacts:{artifacts}" in svc["volumes"]


def test_deployments_load_real_flows_with_valid_parameters(monkeypatch):
    """Each entrypoint loads as Prefect loads it (a file path relative to the working
    directory, /app = the repository), and the flow accepts the deployment's parameters; the
    passages it names are the files `testbed:NAME` builds in the image's artifacts folder."""
    from prefect.flows import Flow, load_flow_from_entrypoint

    from trainspotter.testbeds.build import split_path

    docker = _dockerfile()
    artifacts = Path(_image_env(docker)["TRAINSPOTTER_ARTIFACTS"])
    monkeypatch.chdir(ROOT)  # the image's WORKDIR holds the repository
    for d in yaml.safe_load((ROOT / "deployments/prefect.yaml").read_text())["deployments"]:
        flow = load_flow_from_entrypoint(d["entrypoint"])
        assert isinstance(flow, Flow)
        config = flow.validate_parameters(d["parameters"])["config"]
        assert config.model.scheme == "testbed"  # a ModelSpec: the spec parsed once, by the config
        testbed = config.model.where
        for side, split in (("suspect", "member"), ("heldout", "heldout")):
            assert Path(docker["WORKDIR"]) / getattr(config, side) == split_path(testbed, split, artifacts)
