"""scripts/system-packages.sh (run by install.sh): the Debian packages are optional; without
root or apt-get they are skipped with one note, and the install goes on."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash")


def fake_bin(tmp_path: Path, uid: int, apt: bool) -> dict:
    """A PATH of its own: `id -u` says ``uid``, dpkg knows no package, apt-get (if ``apt``)
    only records that it ran, and the few tools the script copies WordNet with."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("mkdir", "find", "cp"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    scripts = {"id": f"echo {uid}", "dpkg": "exit 1"}
    if apt:
        scripts["apt-get"] = f'echo "$@" >> {tmp_path}/apt.log'
    for name, body in scripts.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    return os.environ | {"PATH": str(bin_)}


@pytest.mark.parametrize("uid,apt,why", [(1000, True, "not root"), (0, False, "no apt-get")])
def test_without_root_or_apt_the_packages_are_skipped_with_one_note(tmp_path, uid, apt, why):
    out = subprocess.run([BASH, str(ROOT / "scripts/system-packages.sh"), str(tmp_path / "venv")],
                         capture_output=True, text=True, env=fake_bin(tmp_path, uid, apt), timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"note: {why}: skipped the system packages"), out.stderr
    assert "synonym perturbation" in lines[0] and "shift suite" in lines[0] and "sudo apt-get install" in lines[0]
    assert not (tmp_path / "apt.log").exists()  # apt-get was never called


def test_as_root_with_apt_get_they_are_installed(tmp_path):
    out = subprocess.run([BASH, str(ROOT / "scripts/system-packages.sh"), str(tmp_path / "venv")],
                         capture_output=True, text=True, env=fake_bin(tmp_path, 0, True), timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "install -y -qq wordnet-base wordnet-sense-index python3.11-doc" in (tmp_path / "apt.log").read_text()
