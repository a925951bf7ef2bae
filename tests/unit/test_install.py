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


def test_a_second_install_after_the_system_packages_added_wordnet_installs_nothing(tmp_path):
    """On a fresh root machine the first run installs WordNet (system-packages.sh). The stamp
    hashed `ls /usr/share/wordnet` from before that, so the second run reinstalled everything;
    it must find the stamp current, and a changed pyproject.toml or setup.py must still reinstall."""
    repo, bin_, mark, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "wordnet-installed", tmp_path / "pip.log"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", repo)
    shutil.copy(ROOT / "setup.py", repo)
    shutil.copy(ROOT / "scripts/install.sh", repo / "scripts")
    # the system packages "install WordNet"; `ls /usr/share/wordnet` lists it from then on
    (repo / "scripts/system-packages.sh").write_text(f"touch {mark}\n")
    bin_.mkdir()
    for tool in ("bash", "cat", "sha256sum", "cut", "dirname", "python3", "touch"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    fakes = {bin_ / "ls": f'[ "$1" = /usr/share/wordnet ] && [ -f {mark} ] && echo index.noun || exit 2',
             repo / ".venv/bin/python": f'echo "$@" >> {log}'}
    for path, body in fakes.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    install = lambda: subprocess.run([BASH, str(repo / "scripts/install.sh")], capture_output=True, text=True,  # noqa: E731
                                     env=os.environ | {"PATH": str(bin_)}, timeout=60)
    pip_calls = lambda: len(log.read_text().splitlines()) if log.exists() else 0  # noqa: E731
    first = install()
    assert first.returncode == 0 and pip_calls() >= 4 and mark.exists(), first.stderr
    calls = pip_calls()
    second = install()
    assert second.returncode == 0 and second.stderr == "" and pip_calls() == calls  # nothing reinstalled
    for changed in ("pyproject.toml", "setup.py"):  # what the packages are built from
        with open(repo / changed, "a") as f:
            f.write("# changed\n")
        assert install().returncode == 0 and pip_calls() > calls, changed
        calls = pip_calls()
