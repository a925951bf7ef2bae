"""Models named by hub id on the command line (issue 65 items 1 and 4), offline, 80 columns: an audit of
``hf:org/tiny`` loads the cached snapshot main points at and its sealed record names that commit;
``@REVISION`` selects another snapshot (other weights); ``verify`` shows the revision and the commit, and
``verify --requery`` loads the recorded commit after main moved; an uncached id is one line, exit 2."""

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_process import run_cli

from hub_cache import repo_folder, write_snapshot

A, B = "a" * 40, "b" * 40
MEMBERS = [f"Member passage {i}: the river town grew after the railway came to the valley." for i in range(4)]
NONMEMBERS = [f"Held-out passage {i}: a small observatory on the hill watched the comet." for i in range(4)]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """HF_HOME whose cache holds org/tiny: commit A on main, commit B (doubled weights) on branch v2;
    and the two passage files."""
    from safetensors.torch import load_file, save_file
    from tiny_lm import tiny_llama

    root = tmp_path_factory.mktemp("hub-model-cli")
    tiny = tiny_llama(root / "tiny", chat=False)
    doubled = Path(shutil.copytree(tiny, root / "doubled"))
    save_file({k: v * 2 for k, v in load_file(tiny / "model.safetensors").items()}, doubled / "model.safetensors",
              metadata={"format": "pt"})
    write_snapshot(root / "home" / "hub", "model", "org/tiny", {"": tiny}, A)
    write_snapshot(root / "home" / "hub", "model", "org/tiny", {"": doubled}, B, ref="v2")
    for name, texts in (("members", MEMBERS), ("heldout", NONMEMBERS)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return root


def run(*args, hub):
    env = os.environ | {"HF_HOME": str(hub / "home"), "COLUMNS": "80"}
    env.pop("HF_HUB_CACHE", None)
    return run_cli([str(a) for a in args], env=env, cwd=str(hub), timeout=600)


def audit(model: str, record: Path, hub):
    out = run("audit", "--suspect", hub / "members.jsonl", "--heldout", hub / "heldout.jsonl", "--model", model,
              "--alpha", "0.2", "--features", "lean", "--name", "hub-model", "--record", record, "--json", hub=hub)
    assert out.returncode in (0, 3), out.stderr[-3000:]
    return json.loads(out.stdout), json.loads(record.read_text())


def test_an_audit_of_a_hub_id_seals_its_commit_and_verify_requeries_that_commit(hub, tmp_path):
    result, sealed = audit("hf:org/tiny", tmp_path / "main.json", hub)
    assert sealed["model"]["hub"] == {"id": "org/tiny", "revision": None, "commit": A}
    assert sealed["model"]["spec"] == "hf:org/tiny" and sealed["config"]["model"] == "hf:org/tiny"
    assert f"org/tiny@{A}" in Path(result["report"]).read_text()  # the HTML report names the snapshot
    (repo_folder(hub / "home" / "hub", "model", "org/tiny") / "refs" / "main").write_text(B)  # main moved since
    try:
        out = run("verify", tmp_path / "main.json", "--requery", "2", "--json", hub=hub)
    finally:
        (repo_folder(hub / "home" / "hub", "model", "org/tiny") / "refs" / "main").write_text(A)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    checks = {c["name"]: c["detail"] for c in json.loads(out.stdout)["checks"]}
    assert f"of org/tiny at commit {A}" in checks["model test"]
    assert f"sha256 are unchanged (commit {A}, as recorded)" in checks["requery"]  # not B, where main is now


def test_a_revision_selects_the_other_snapshot_and_verify_shows_it(hub, tmp_path):
    _, main = audit("hf:org/tiny", tmp_path / "main.json", hub)
    _, v2 = audit("hf:org/tiny@v2", tmp_path / "v2.json", hub)
    assert v2["model"]["hub"] == {"id": "org/tiny", "revision": "v2", "commit": B}
    assert v2["model"]["weights_sha256"] != main["model"]["weights_sha256"]
    assert v2["model"]["fingerprint"] != main["model"]["fingerprint"]
    out = run("verify", tmp_path / "v2.json", hub=hub)
    assert out.returncode == 0, out.stdout[-3000:]
    what = " ".join(row.split("│")[3].strip() for row in out.stdout.splitlines() if row.count("│") == 4)
    assert f"replayed from the features of org/tiny@v2 at commit {B}: wealth" in what, out.stdout  # (cells wrapped)
    assert all(len(row) <= 80 for row in out.stdout.splitlines() if "│" in row)  # the table fits 80 columns


def test_an_uncached_id_is_one_line_naming_it_and_how_to_fetch_it(hub):
    out = run("audit", "--suspect", hub / "members.jsonl", "--heldout", hub / "heldout.jsonl", "--model",
              "hf:org/absent@v1", hub=hub)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr + out.stdout, out.stderr
    assert lines[0].startswith("error: model spec hf:org/absent@v1: not in the Hugging Face cache "), lines[0]
    assert str(hub / "home" / "hub") in lines[0] and "`hf download org/absent --revision v1`" in lines[0]
