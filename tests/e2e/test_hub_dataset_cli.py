"""Datasets named by hub id on the command line (issue 65), offline, 80 columns: an audit reads the
split it names from the cached snapshot and its sealed record names the commit; ``@REVISION`` picks
another snapshot; an uncached id and a missing split or column are one line, exit 2; ``benchmark
--dataset`` scores a WikiMIA-shaped and a MIMIR-shaped dataset's members against its non-members."""

import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_process import run_cli

from hub_cache import write_snapshot

C1, C2 = "a" * 40, "b" * 40
MEMBERS = [f"Member passage {i}: the river town grew after the railway came to the valley." for i in range(4)]
NONMEMBERS = [f"Held-out passage {i}: a small observatory on the hill watched the comet." for i in range(4)]


def parquet(**columns) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from tiny_lm import tiny_llama

    return tiny_llama(tmp_path_factory.mktemp("model") / "tiny", chat=False)


@pytest.fixture
def env(tmp_path):
    return os.environ | {"HF_HOME": str(tmp_path / "home"), "COLUMNS": "80"}


def cache(env):
    return os.path.join(env["HF_HOME"], "hub")


def run(*args, env):
    return run_cli(list(args), env=env, timeout=600)


def one_error_line(out) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr + out.stdout, out.stderr
    return lines[0]


def test_an_audit_of_two_splits_reads_them_and_its_record_names_the_commit(tmp_path, model, env):
    write_snapshot(cache(env), "dataset", "org/set", {
        "members.parquet": parquet(text=["stale"] * 4), "nonmembers.parquet": parquet(text=NONMEMBERS)}, C1, ref=None)
    write_snapshot(cache(env), "dataset", "org/set", {
        "members.parquet": parquet(text=MEMBERS), "nonmembers.parquet": parquet(text=NONMEMBERS)}, C2)
    record = tmp_path / "record.json"
    out = run("audit", "--suspect", "hf:org/set/members", "--heldout", "hf:org/set/nonmembers", "--model",
              f"hf:{model}", "--alpha", "0.2", "--features", "lean", "--name", "hub-data", "--record", str(record),
              "--json", env=env)
    assert out.returncode in (0, 3), out.stderr[-3000:]
    sealed = json.loads(record.read_text())
    assert [p["text"] for p in sealed["passages"]["suspect"]] == MEMBERS  # the main branch's snapshot, C2
    assert [p["text"] for p in sealed["passages"]["heldout"]] == NONMEMBERS
    suspect = sealed["inputs"]["suspect"]
    assert suspect["path"] == "hf:org/set/members" and suspect["passages"] == 4
    assert suspect["hub"] | {"files": None} == {"id": "org/set", "config": None, "split": "members", "revision": None,
                                                 "commit": C2, "files": None}
    assert suspect["hub"]["files"] == ["members.parquet"]
    assert run("verify", str(record), env=env).returncode == 0
    # @REVISION: the other snapshot, whose members are another text (no branch names it)
    stale = run("audit", "--suspect", f"hf:org/set/members@{C1}", "--heldout", "hf:org/set/nonmembers",
                "--model", f"hf:{model}", "--alpha", "0.2", "--features", "lean", "--name", "hub-data-old",
                "--record", str(tmp_path / "old.json"), "--json", env=env)
    assert stale.returncode in (0, 3), stale.stderr[-3000:]
    old = json.loads((tmp_path / "old.json").read_text())
    assert {p["text"] for p in old["passages"]["suspect"]} == {"stale"}
    assert old["inputs"]["suspect"]["hub"]["commit"] == C1 and old["inputs"]["suspect"]["hub"]["revision"] == C1


def test_an_uncached_id_a_missing_split_and_a_missing_column_are_one_line_each(tmp_path, model, env):
    write_snapshot(cache(env), "dataset", "org/set", {
        "members.parquet": parquet(text=MEMBERS), "nonmembers.parquet": parquet(text=NONMEMBERS)}, C1)
    common = ("--model", f"hf:{model}", "--alpha", "0.2")
    line = one_error_line(run("audit", "--suspect", "hf:org/absent/members", "--heldout", "hf:org/set/nonmembers",
                              *common, env=env))
    assert "org/absent: not in the Hugging Face cache" in line and "hf download org/absent" in line
    line = one_error_line(run("audit", "--suspect", "hf:org/set/heldout", "--heldout", "hf:org/set/nonmembers",
                              *common, env=env))
    assert "no split 'heldout'" in line and "members, nonmembers" in line
    line = one_error_line(run("audit", "--suspect", "hf:org/set/members", "--heldout", "hf:org/set/nonmembers",
                              "--text-column", "body", *common, env=env))
    assert line.startswith("error: option --text-column: ") and "no column 'body' (columns: text)" in line


def _benchmark(dataset: str, model, env, tmp_path, *more):
    return run("benchmark", "--dataset", dataset, "--model", f"hf:{model}", "--methods", "loss,zlib,min_k",
               "--cost-samples", "0", "--n-boot", "0", "--perturbation-kinds", "none", "--out", str(tmp_path / "out"),
               *more, env=env)


def test_benchmark_on_wikimia_and_mimir_layouts_prints_the_per_sample_table(tmp_path, model, env):
    write_snapshot(cache(env), "dataset", "swj0419/WikiMIA", {
        "data/WikiMIA_length32-00000-of-00001.parquet": parquet(input=["short one", "short two"], label=[1, 0]),
        "data/WikiMIA_length64-00000-of-00001.parquet": parquet(input=MEMBERS + NONMEMBERS, label=[1] * 4 + [0] * 4)},
        C1)
    lines = lambda texts: "".join(json.dumps(t) + "\n" for t in texts).encode()  # noqa: E731
    write_snapshot(cache(env), "dataset", "iamgroot42/mimir", {
        "mimir.py": b"# the loading script",
        "cache_100_200_1000_512/train/arxiv_ngram_13_0.8.jsonl": lines(MEMBERS),
        "cache_100_200_1000_512/test/arxiv_ngram_13_0.8.jsonl": lines(NONMEMBERS)}, C2)
    wiki = _benchmark("hf:swj0419/WikiMIA/WikiMIA_length64", model, env, tmp_path)
    assert wiki.returncode == 0, wiki.stderr[-3000:]
    assert "Per-sample methods on hf:swj0419/WikiMIA/WikiMIA_length64" in wiki.stdout.replace("\n", " ")
    for label in ("LOSS", "Zlib", "Min-K%"):
        assert label in wiki.stdout
    assert "AUROC" in wiki.stdout and "TPR@1%FPR" in wiki.stdout
    assert all(len(line) <= 80 for line in wiki.stdout.splitlines())
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert summary["dataset"]["commit"] == C1 and summary["dataset"]["split"] == "WikiMIA_length64"
    mimir = _benchmark("hf:iamgroot42/mimir:arxiv/ngram_13_0.8", model, env, tmp_path, "--json")
    assert mimir.returncode == 0, mimir.stderr[-3000:]
    result = json.loads(mimir.stdout)
    assert {r["method"] for r in result["methods"]} == {"loss", "zlib", "min_k"}
    assert result["dataset"]["commit"] == C2 and result["dataset"]["config"] == "arxiv"
    assert all(0 <= r["metrics"]["auroc"] <= 1 for r in result["methods"])
    # a label column the dataset lacks, and a method that needs a testbed: one line each
    line = one_error_line(_benchmark("hf:swj0419/WikiMIA/WikiMIA_length64", model, env, tmp_path,
                                     "--label-column", "member"))
    assert "option --label-column: " in line and "no column 'member' (columns: input, label)" in line
    line = one_error_line(run("benchmark", "--dataset", "hf:swj0419/WikiMIA/WikiMIA_length64", "--model",
                              f"hf:{model}", "--methods", "refl", env=env))
    assert line.startswith("error: option --methods: refl need a testbed")
