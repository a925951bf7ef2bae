"""mkdocs hook: the reference pages made from the code at build time, so they cannot drift from it.

- ``reference/cli.md``: every verb of the `trainspotter` command, walked from the typer app
  (``trainspotter.flows.cli.app`` as click sees it): usage, help and each option's help and default.
- ``reference/api/PACKAGE.md``: one page per package of ``src/trainspotter`` (its ``__init__`` says
  what it owns), rendered by mkdocstrings from the docstrings by static analysis, and
  ``reference/api.md`` listing them.
- Figures: an image ``results/NAME`` in a page is ``benchmarks/results/NAME`` (the committed results
  file it comes from; tests/unit/test_docs.py checks that each exists and that its caption names it).
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p.parent.name for p in (ROOT / "src" / "trainspotter").glob("*/__init__.py"))
log = logging.getLogger("mkdocs.hooks.reference")


def on_config(config):
    config["nav"] = _with_packages(config["nav"])
    return config


def _with_packages(nav):
    """The nav's "reference/api.md" entry becomes that index and one page per package under it."""
    if isinstance(nav, list):
        return [_with_packages(i) for i in nav]
    if isinstance(nav, dict):
        return {k: ([v, "reference/api/trainspotter.md", *(f"reference/api/{p}.md" for p in PACKAGES)]
                    if v == "reference/api.md" else _with_packages(v)) for k, v in nav.items()}
    return nav


def on_files(files: Files, config) -> Files:
    generated = {"reference/cli.md": cli_reference(), "reference/api.md": api_index(),
                 "reference/api/trainspotter.md": root_page()} | {f"reference/api/{p}.md": api_page(p) for p in PACKAGES}
    for path, text in generated.items():
        files.append(File.generated(config, path, content=text))
    for page in Path(config["docs_dir"]).rglob("*.md"):
        for name in figures(page.read_text()):
            files.append(File(f"results/{name}", str(ROOT / "benchmarks"), config["site_dir"],
                              config["use_directory_urls"]))
    return files


def figures(markdown: str) -> list[str]:
    """The committed results an image of ``markdown`` shows: ``![...](results/NAME)`` -> NAME."""
    import re

    return re.findall(r"!\[[^\]]*\]\((?:\.\./)*results/([^)\s]+)\)", markdown)


def cli_reference() -> str:
    import typer.main

    from trainspotter.flows.cli import app

    root = typer.main.get_command(app)
    out = ["# Command line\n",
           "Generated from the `trainspotter` command itself when the guide is built: every verb, its usage, "
           "its help and each option. `trainspotter VERB --help` prints the same.\n"]
    for path, command in _walk(root, ("trainspotter",)):
        out += _command(path, command)
    return "\n".join(out)


def _walk(command, path):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            yield from _walk(sub, (*path, name))


def _command(path: tuple[str, ...], command) -> list[str]:
    ctx = command.context_class(command, info_name=" ".join(path))  # typer's own (vendored) click
    lines = [f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`\n", (command.help or command.short_help or "").strip()
             + "\n", f"```text\n{command.get_usage(ctx)}\n```\n"]
    options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    if arguments or options:
        lines.append("| argument or option | what | default |\n|---|---|---|")
    for p in arguments:
        lines.append(f"| `{p.name.upper()}` | {_cell(getattr(p, 'help', '') or '')} | |")
    for p in options:
        names = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
        value = getattr(p.default, "value", p.default)  # a choice's Enum member: its value
        default = "" if value is None or value is False or value == () or p.required else f"`{value}`"
        lines.append(f"| {names} | {_cell(p.help or '')} | {'required' if p.required else _cell(default)} |")
    return lines + [""]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def api_index() -> str:
    rows = "\n".join(f"- [`trainspotter.{p}`](api/{p}.md)" for p in PACKAGES)
    return ("# Python packages\n\nFrom the docstrings, by static analysis (nothing is imported). The package "
            "root, `trainspotter`, holds the foundation (errors, config, data, presets, assets, layout) and "
            "`audit`/`AuditConfig` ([Python API](../guide/python-api.md)); each package below owns one concept "
            "and says in its `__init__` what it may import ([Architecture](../architecture.md)).\n\n"
            "- [`trainspotter`](api/trainspotter.md)\n" + rows + "\n")


def api_page(package: str) -> str:
    return f"# trainspotter.{package}\n\n::: trainspotter.{package}\n"


def root_page() -> str:
    """The package root: its foundation modules, each on its own (the packages have pages of their own)."""
    modules = sorted(p.stem for p in (ROOT / "src" / "trainspotter").glob("*.py") if p.stem != "__init__")
    return "# trainspotter\n\n" + "".join(f"::: trainspotter.{m}\n\n" for m in modules)
