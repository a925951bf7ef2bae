"""`trainspotter testbed build`: the built-in testbeds (models with known training members); `trainspotter
assets`: the packaged models and corpora they are made from."""

from __future__ import annotations

import typer
from rich.console import Console

from trainspotter.flows.cli.common import JSON, Typer, emit_json, folded_table, progress_lines
from trainspotter.presets import TESTBEDS, check_testbed

testbed_app = Typer(help="Built-in testbeds with known ground truth:\n\n" + "\n\n".join(
    f"{name}: {testbed.description}" for name, testbed in TESTBEDS.items()),
    short_help="Build testbeds: models with known training members.", no_args_is_help=True)


@testbed_app.command("build", short_help="Build a testbed: splits, reference and target LMs.")
def testbed_build(name: str = typer.Argument("tiny", help="Preset: " + ", ".join(TESTBEDS) + "."),
                  force: bool = typer.Option(False, help="Rebuild even if cached."),
                  references: int = typer.Option(
                      0, min=0, help="Also build K OUT and K IN reference models (refs/out-N, refs/in-N; "
                                     "pre-training testbeds without twins; models built already are reused)."),
                  json_out: bool = JSON) -> None:
    """Build a testbed (splits, reference and target LMs) under artifacts/testbeds/NAME."""
    from trainspotter.testbeds.build import load_manifest

    check_testbed(name)
    from trainspotter.testbeds.reference_models import check_request

    config = check_request(name, references) if references else None  # before any output; the flow takes it as it is
    from trainspotter.flows.testbed import testbed_flow

    with progress_lines(transient=json_out):  # each model's training steps
        path = testbed_flow(name, force=force, config=config, references=references)
    manifest = load_manifest(name)
    info = {"name": name, "path": path, "build_seconds": manifest["build_seconds"],
            "splits": {k: len(v) for k, v in manifest["splits"].items()}}
    if references:
        from trainspotter.testbeds.reference_models import load_reference_manifest

        models = load_reference_manifest(name)["models"]
        info["target_final_loss"] = manifest["target_final_loss"]
        info["references"] = {m: {f: models[m][f] for f in ("build_seconds", "final_loss", "steps", "seed")}
                              for i in range(references) for m in (f"out-{i}", f"in-{i}")}
    if json_out:
        return emit_json(info)
    Console().print(f"testbed {name} at {path} ({info['splits']}, built in {info['build_seconds']} s)")
    for m, e in info.get("references", {}).items():
        Console().print(f"  {m}: final loss {e['final_loss']:.3f} (target {info['target_final_loss']:.3f}), "
                        f"built in {e['build_seconds']} s")


def assets_cmd(json_out: bool = JSON) -> None:
    """List the packaged models and corpora, installed or not, and where."""
    from trainspotter.assets import assets_as_dicts

    rows = assets_as_dicts()
    if json_out:
        return emit_json(rows)
    table = folded_table("Packaged assets", ("name", "kind", "installed"), whole=True)
    for r in rows:
        table.add_row(r["name"], r["kind"], "yes" if r["installed"] else "no")
    out = Console()
    out.print(table)
    for r in rows:  # each path (or install command) whole on a line of its own: a cell broke it mid-name
        out.print(f"{r['name']}: {r['path'] if r['installed'] else r['install']}", markup=False, highlight=False,
                  soft_wrap=True)
