"""No Docker engine runs here: check what can be checked without one."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_wires_worker_to_prefect_and_mlflow():
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"prefect-server", "mlflow", "worker"}
    env = services["worker"]["environment"]
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert "4200" in services["prefect-server"]["entrypoint"] and "5000" in services["mlflow"]["entrypoint"]
    # the YAML anchor gives every service the same image and artifacts volume
    for svc in services.values():
        assert svc["build"]["dockerfile"] == "docker/Dockerfile" and "artifacts:/app/artifacts" in svc["volumes"]
    worker_cmd = services["worker"]["command"][0]
    prefect_file = worker_cmd.split("--prefect-file ")[1].split()[0]
    assert (ROOT / prefect_file).exists()


def test_image_installs_with_the_readme_script():
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    assert "bash scripts/install.sh" in dockerfile
    assert "scripts/install.sh" in (ROOT / "scripts/demo.sh").read_text()
    assert "scripts/install.sh" in (ROOT / "scripts/test.sh").read_text()
