"""The user guide (mkdocs.yml, docs/) builds with `mkdocs build --strict`: a broken link or a
missing page fails the suite. Its CLI reference comes from the command itself and its API
reference from the docstrings (docs/hooks/reference.py); every figure names the committed
results file it shows, and that file exists; the README stays an onboarding (issue 52)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ENV = os.environ | {"NO_MKDOCS_2_WARNING": "1"}


def mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, cwd=config.parent, env=ENV, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    out = mkdocs(ROOT / "mkdocs.yml", site)
    assert out.returncode == 0, out.stderr[-4000:]
    return site


def test_the_guide_builds_strict_with_the_generated_references(site):
    import typer.main

    from trainspotter.flows.cli import app

    cli = (site / "reference" / "cli" / "index.html").read_text()
    root = typer.main.get_command(app)
    for name, command in root.commands.items():  # every verb and its options, from the command itself
        assert f"trainspotter {name}" in cli, name
        for p in command.params:
            for opt in getattr(p, "opts", []):
                if opt.startswith("--"):
                    assert opt in cli, (name, opt)
    packages = sorted(p.parent.name for p in (ROOT / "src" / "trainspotter").glob("*/__init__.py"))
    for package in packages:  # one page per package, from its docstrings
        page = (site / "reference" / "api" / package / "index.html").read_text()
        assert f"trainspotter.{package}" in page and "doc-module" in page, package
    assert "check_loadable" in (site / "reference" / "api" / "backends" / "index.html").read_text()


def test_strict_fails_on_a_broken_link_or_a_missing_page(tmp_path):
    """The guide's own settings (strict, link validation) on a one-page site: a link to a page that
    does not exist fails the build, and so does a nav entry without its page."""
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert ours["strict"] is True
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the guide](guide/missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    settings = {"site_name": "t", "strict": ours["strict"], "validation": ours["validation"], "theme": "mkdocs"}
    config.write_text(yaml.safe_dump(settings | {"nav": [{"Home": "index.md"}]}))
    broken = mkdocs(config, tmp_path / "site")
    assert broken.returncode != 0 and "guide/missing.md" in broken.stderr, broken.stderr
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    config.write_text(yaml.safe_dump(settings | {"nav": [{"Home": "index.md"}, {"Gone": "gone.md"}]}))
    missing = mkdocs(config, tmp_path / "site")
    assert missing.returncode != 0 and "gone.md" in missing.stderr, missing.stderr


def test_every_figure_names_its_results_file_and_it_exists():
    figures = 0
    for page in (ROOT / "docs").rglob("*.md"):
        text = page.read_text()
        for m in re.finditer(r"!\[[^\]]*\]\((?:\.\./)*results/([^)\s]+)\)", text):
            figures += 1
            assert (ROOT / "benchmarks" / "results" / m[1]).is_file(), (page, m[1])
            caption = text[m.end():].lstrip("\n").split("\n\n")[0]
            assert f"benchmarks/results/{m[1]}" in caption, (page, m[1], caption)
        # no other image: a figure is a committed result, named where it comes from
        others = [i for i in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text) if "results/" not in i]
        assert not others, (page, others)
    assert figures >= 2


def test_the_readme_is_an_onboarding():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 200
    assert "bash scripts/demo.sh    # (1)" in text and "bash scripts/test.sh    # (2)" in text  # CI calls the second
    assert any("Audit your own model on your own files" in line for line in lines[:15])  # the first screen
    for link in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", text):
        assert (ROOT / link).exists(), link
