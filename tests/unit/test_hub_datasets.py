"""Datasets named by hub id (issue 65): ``hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION]`` read offline from a
hub-cache layout (tests/hub_cache.py), which files make which split by the hub's conventions, and one
error line naming what exists where a column, split or config is missing."""

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainspotter.config import file_sha256
from trainspotter.data import hub_source, load_passages
from trainspotter.errors import InputError
from trainspotter.hub_data import glob_regex, parse_spec, read_hub_table
from hub_cache import write_snapshot

C1, C2 = "1" * 40, "2" * 40


def parquet(**columns) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "hub"


def test_the_spec_names_repository_config_split_and_revision():
    s = parse_spec("hf:iamgroot42/mimir:wikipedia_(en)/ngram_13_0.8@abc")
    assert (s.repo_id, s.config, s.split, s.revision) == ("iamgroot42/mimir", "wikipedia_(en)", "ngram_13_0.8", "abc")
    assert parse_spec("hf:swj0419/WikiMIA/WikiMIA_length64").split == "WikiMIA_length64"
    for bad in ("hf:nameonly", "hf:a/b/c/d", "hf:a/b:/x"):
        with pytest.raises(InputError, match="ORG/NAME"):
            parse_spec(bad)


def test_globs_follow_fsspec_as_datasets_resolves_them():
    assert glob_regex("**/train[-._ 0-9]*").fullmatch("train.csv")
    assert glob_regex("**/train[-._ 0-9]*").fullmatch("data/train-0.parquet")
    assert not glob_regex("**/train[-._ 0-9]*").fullmatch("data/pretraining.parquet")
    assert not glob_regex("data/*.parquet").fullmatch("data/x/y.parquet")


def test_push_to_hub_shards_make_the_splits_and_the_read_keeps_the_commit(cache):
    """WikiMIA's layout: data/{split}-NNNNN-of-NNNNN.parquet, columns input and label."""
    write_snapshot(cache, "dataset", "swj0419/WikiMIA", {
        "data/WikiMIA_length32-00000-of-00001.parquet": parquet(input=["a32", "b32"], label=[1, 0]),
        "data/WikiMIA_length64-00000-of-00002.parquet": parquet(input=["a64"], label=[1]),
        "data/WikiMIA_length64-00001-of-00002.parquet": parquet(input=["b64"], label=[0])}, C1)
    rows = load_passages("hf:swj0419/WikiMIA/WikiMIA_length64")
    assert [r["text"] for r in rows] == ["a64", "b64"]  # the input column, both shards in order
    assert hub_source("hf:swj0419/WikiMIA/WikiMIA_length64")["commit"] == C1
    with pytest.raises(InputError, match=r"2 splits \(WikiMIA_length32, WikiMIA_length64\); name one"):
        load_passages("hf:swj0419/WikiMIA")
    with pytest.raises(InputError, match=r"no column 'passage' \(columns: input, label\)"):
        load_passages("hf:swj0419/WikiMIA/WikiMIA_length32", text_column="passage")


def test_yaml_configs_say_which_files_make_which_split(cache):
    readme = ("---\nconfigs:\n- config_name: short\n  data_files:\n  - split: members\n    path: m/*.jsonl\n"
              "  - split: nonmembers\n    path: n/*.jsonl\n  default: true\n- config_name: long\n"
              "  data_files: long.csv\n---\n# a card\n").encode()
    write_snapshot(cache, "dataset", "org/set", {
        "README.md": readme, "m/0.jsonl": b'{"text": "m one"}\n{"text": "m two"}\n',
        "n/0.jsonl": b'{"text": "n one"}\n', "long.csv": b"text\nlong one\n"}, C1)
    assert [r["text"] for r in load_passages("hf:org/set/members")] == ["m one", "m two"]  # the default config
    assert [r["text"] for r in load_passages("hf:org/set:short/nonmembers")] == ["n one"]
    assert [r["text"] for r in load_passages("hf:org/set:long")] == ["long one"]  # its only split, train
    with pytest.raises(InputError, match=r"no split 'heldout' \(splits: members, nonmembers\)"):
        load_passages("hf:org/set/heldout")
    with pytest.raises(InputError, match=r"no config 'medium' \(configs: short, long\)"):
        load_passages("hf:org/set:medium/members")


def test_without_configs_a_file_or_folder_named_after_the_split_is_that_split(cache):
    write_snapshot(cache, "dataset", "org/plain", {
        "members.parquet": parquet(text=["m1", "m2"], id=["x", "y"]),
        "nonmembers.parquet": parquet(text=["n1"])}, C1)
    rows = load_passages("hf:org/plain/members")
    assert [(r["id"], r["text"]) for r in rows] == [("x", "m1"), ("y", "m2")]
    assert [r["text"] for r in load_passages("hf:org/plain/nonmembers")] == ["n1"]  # not members: 'non' before it
    assert load_passages(Path("hf:org/plain/members")) == rows  # as keyed audit --prompts passes it, a Path
    with pytest.raises(InputError, match=r"no split 'heldout' \(splits: train, members, nonmembers\)"):
        load_passages("hf:org/plain/heldout")


def test_a_revision_picks_its_snapshot_and_a_moved_branch_is_read_anew(cache):
    write_snapshot(cache, "dataset", "org/plain", {"members.parquet": parquet(text=["old"])}, C1)
    write_snapshot(cache, "dataset", "org/plain", {"members.parquet": parquet(text=["new"])}, C2)
    assert load_passages("hf:org/plain/members")[0]["text"] == "new"
    assert load_passages(f"hf:org/plain/members@{C1}")[0]["text"] == "old"
    assert hub_source(f"hf:org/plain/members@{C1}")["commit"] == C1
    # the report's input digest (config.file_sha256) is that of the files read, so it tells the snapshots apart
    assert file_sha256(f"hf:org/plain/members@{C1}") != file_sha256("hf:org/plain/members")


def test_an_uncached_dataset_is_one_error_naming_it_and_the_fetch_command(cache):
    with pytest.raises(InputError, match=r"org/absent: not in the Hugging Face cache .*--repo-type dataset"):
        load_passages("hf:org/absent/train")


def test_an_empty_text_is_an_error_naming_the_file_and_row(cache):
    write_snapshot(cache, "dataset", "org/bad", {"train.parquet": parquet(text=["fine", " "])}, C1)
    with pytest.raises(InputError, match=r"org/bad/train@1{40} \(train.parquet\):row 1: `text` is empty"):
        load_passages("hf:org/bad")


def test_mimir_script_layout_gives_member_and_nonmember_columns(cache):
    """MIMIR's mimir.py: cache_100_200_1000_512/{train,test}/CONFIG_SPLIT.jsonl, a JSON string a line."""
    lines = lambda *texts: "".join(json.dumps(t) + "\n" for t in texts).encode()  # noqa: E731
    write_snapshot(cache, "dataset", "iamgroot42/mimir", {
        "mimir.py": b"# the loading script", "README.md": b"---\nlicense: mit\n---\n",
        "cache_100_200_1000_512/train/arxiv_ngram_13_0.8.jsonl": lines("member one", "member two"),
        "cache_100_200_1000_512/test/arxiv_ngram_13_0.8.jsonl": lines("non one", "non two"),
        "cache_100_200_1000_512/train/arxiv_ngram_7_0.2.jsonl": lines("m7"),
        "cache_100_200_1000_512/test/arxiv_ngram_7_0.2.jsonl": lines("n7"),
        "cache_100_200_1000_512/train_neighbors/arxiv_ngram_7_0.2_neighbors_25_bert_in_place_swap.jsonl":
            lines(["x"])}, C1)
    table = read_hub_table("hf:iamgroot42/mimir:arxiv/ngram_13_0.8")
    assert table.columns == {"member": ["member one", "member two"], "nonmember": ["non one", "non two"]}
    with pytest.raises(InputError, match=r"no split 'ngram_13_0.2' \(splits: ngram_13_0.8, ngram_7_0.2\)"):
        read_hub_table("hf:iamgroot42/mimir:arxiv/ngram_13_0.2")
