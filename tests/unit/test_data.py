import json
import sys

import pandas as pd
import pytest

from trainspotter.data import load_passages, make_pairs
from trainspotter.errors import InputError


def _write(path, content: bytes):
    path.write_bytes(content)
    return path


def test_jsonl_ids_from_field_or_line(tmp_path):
    p = _write(tmp_path / "a.jsonl", b'{"id": "x", "text": "one"}\n\n{"text": "two"}\n')
    assert load_passages(p) == [{"id": "x", "text": "one"}, {"id": "a.jsonl:3", "text": "two"}]


def test_csv_parquet_txt_and_folder(tmp_path):
    pd.DataFrame({"text": ["a b", "c d"]}).to_csv(tmp_path / "t.csv", index=False)
    pd.DataFrame({"id": ["p", "q"], "text": ["a b", "c d"]}).to_parquet(tmp_path / "t.parquet")
    _write(tmp_path / "t.txt", b"first line\n\nsecond line\n")
    folder = tmp_path / "docs"
    folder.mkdir()
    _write(folder / "b.txt", b"bee\n")
    _write(folder / "a.txt", b"ay\n")
    assert [r["text"] for r in load_passages(tmp_path / "t.csv")] == ["a b", "c d"]
    assert [r["id"] for r in load_passages(tmp_path / "t.parquet")] == ["p", "q"]
    assert [r["text"] for r in load_passages(tmp_path / "t.txt")] == ["first line", "second line"]
    assert load_passages(folder) == [{"id": "a.txt", "text": "ay"}, {"id": "b.txt", "text": "bee"}]


@pytest.mark.parametrize("name,content,message", [
    ("empty.jsonl", b"", r"empty\.jsonl: no passages"),
    ("notext.jsonl", b'{"text": "ok"}\n{"body": "x"}\n', r"notext\.jsonl:2: no `text` field"),
    ("badjson.jsonl", b'{"text": "ok"}\n{"text": \n', r"badjson\.jsonl:2: invalid JSON"),
    ("latin1.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n', r"latin1\.jsonl:2: not valid UTF-8 \(byte 0xe9\)"),
    ("blank.jsonl", b'{"text": "  "}\n', r"blank\.jsonl:1: `text` is empty"),
    ("number.jsonl", b'{"text": 3}\n', r"number\.jsonl:1: `text` must be a string"),
    ("latin1.txt", b"fine\nna\xefve\n", r"latin1\.txt:2: not valid UTF-8"),
    ("nocol.csv", b"body\nx\n", r"nocol\.csv: no `text` column"),
    ("blankrow.csv", b"text\nx\n\"\"\n", r"blankrow\.csv:row 3: `text` is empty"),
    ("data.xlsx", b"x", r"unsupported format '\.xlsx'"),
])
def test_bad_input_names_file_line_and_problem(tmp_path, name, content, message):
    with pytest.raises(InputError, match=message):
        load_passages(_write(tmp_path / name, content))


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file"):
        load_passages(tmp_path / "nope.jsonl")


def test_make_pairs_is_seeded_and_uses_the_smaller_side():
    xs = [{"id": f"x{i}", "text": "t"} for i in range(10)]
    ys = [{"id": f"y{i}", "text": "t"} for i in range(7)]
    a, b = make_pairs(xs, ys, seed=3), make_pairs(xs, ys, seed=3)
    assert a == b and len(a) == 7
    assert make_pairs(xs, ys, seed=4) != a
    assert len({x["id"] for x, _ in a}) == 7 and {y["id"] for _, y in a} == {f"y{i}" for i in range(7)}
    assert len(make_pairs(xs, ys, seed=3, max_pairs=5)) == 5
    # the order is shuffled, not file order
    assert [x["id"] for x, _ in a] != [f"x{i}" for i in range(7)]


def test_jsonl_roundtrip_of_unicode(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_text(json.dumps({"text": "naïve café ✓"}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_passages(p)[0]["text"] == "naïve café ✓"


# A Hugging Face dataset saved with `save_to_disk`, written by the real `datasets` library
# (a dev dependency) and read back with pyarrow alone.

@pytest.fixture
def hf_datasets():
    datasets = pytest.importorskip("datasets")  # in the `dev` extra (pyproject.toml)
    datasets.disable_progress_bars()
    return datasets


def _no_datasets(monkeypatch):
    """Reading must not need `datasets`: make importing it fail, as without the package."""
    monkeypatch.setitem(sys.modules, "datasets", None)


def test_saved_hf_dataset_reads_without_the_datasets_package(tmp_path, monkeypatch, hf_datasets):
    folder = tmp_path / "saved"
    hf_datasets.Dataset.from_dict({"id": ["p", "q", "r"], "text": ["one", "two", "three"],
                                   "extra": [1, 2, 3]}).save_to_disk(str(folder))
    _no_datasets(monkeypatch)
    assert load_passages(folder) == [{"id": "p", "text": "one"}, {"id": "q", "text": "two"},
                                     {"id": "r", "text": "three"}]


def test_saved_hf_dataset_in_several_shards_keeps_order(tmp_path, monkeypatch, hf_datasets):
    texts = [f"passage number {i}" for i in range(7)]
    ds = hf_datasets.Dataset.from_dict({"text": texts, "set": ["suspect"] * 4 + ["heldout"] * 3})
    folder = tmp_path / "sharded"
    ds.save_to_disk(str(folder), num_shards=2)
    assert len(list(folder.glob("*.arrow"))) == 2
    expected = hf_datasets.load_from_disk(str(folder))["text"]
    _no_datasets(monkeypatch)
    rows = load_passages(folder)
    assert [r["text"] for r in rows] == expected == texts
    assert [r["id"] for r in rows] == [f"sharded:{n}" for n in range(7)]  # no `id` column: folder:row
    assert [r["set"] for r in rows] == ["suspect"] * 4 + ["heldout"] * 3


def test_saved_hf_dataset_selection_is_read_as_saved(tmp_path, hf_datasets):
    """save_to_disk writes a shuffled/selected dataset in its visible order."""
    ds = hf_datasets.Dataset.from_dict({"text": ["a", "b", "c", "d"]}).select([3, 1])
    ds.save_to_disk(str(tmp_path / "sel"))
    assert [r["text"] for r in load_passages(tmp_path / "sel")] == ["d", "b"]


def test_saved_hf_dataset_dict_asks_for_one_split(tmp_path, hf_datasets):
    ds = hf_datasets.Dataset.from_dict({"text": ["a", "b"]})
    folder = tmp_path / "dd"
    hf_datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(folder))
    with pytest.raises(InputError) as e:
        load_passages(folder)
    message = str(e.value)
    assert message.startswith(f"{folder}: ") and "DatasetDict" in message and "one split" in message
    assert str(folder / "train") in message and str(folder / "test") in message
    assert [r["text"] for r in load_passages(folder / "train")] == ["a", "b"]


@pytest.mark.parametrize("columns,message", [
    ({"body": ["a", "b"]}, r"data-00000-of-00001\.arrow: no `text` column \(columns: body\)"),
    ({"text": ["a", "b", "  ", "c"]}, r"saved:row 2: `text` is empty"),
    ({"text": ["a", None]}, r"saved:row 1: `text` must be a string, got NoneType"),
    ({"text": [1, 2]}, r"saved:row 0: `text` must be a string, got int"),
    ({"text": ["a", "b"], "set": ["suspect", "train"]}, r"saved:row 1: `set` is 'train'"),
])
def test_saved_hf_dataset_bad_rows(tmp_path, hf_datasets, columns, message):
    hf_datasets.Dataset.from_dict(columns).save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(InputError, match=message):
        load_passages(tmp_path / "saved")


def test_saved_hf_dataset_broken_folder(tmp_path, hf_datasets):
    folder = tmp_path / "saved"
    hf_datasets.Dataset.from_dict({"text": ["a", "b", "c", "d"]}).save_to_disk(str(folder), num_shards=2)
    state = folder / "state.json"
    good = state.read_text()
    # a shard that state.json lists is gone
    shard = folder / "data-00001-of-00002.arrow"
    data = shard.read_bytes()
    shard.unlink()
    with pytest.raises(InputError, match=r"data-00001-of-00002\.arrow: data file listed in state\.json is missing"):
        load_passages(folder)
    # a shard that is not an Arrow stream
    shard.write_bytes(b"not arrow at all")
    with pytest.raises(InputError, match=r"data-00001-of-00002\.arrow: cannot read as an Arrow stream"):
        load_passages(folder)
    shard.write_bytes(data)
    # state.json unreadable, without its file list, or absent
    state.write_text("{")
    with pytest.raises(InputError, match=r"state\.json:1: invalid JSON"):
        load_passages(folder)
    state.write_text(json.dumps({"_fingerprint": "x"}))
    with pytest.raises(InputError, match=r"state\.json: no `_data_files` list"):
        load_passages(folder)
    state.unlink()
    with pytest.raises(InputError, match=r"state\.json: missing"):
        load_passages(folder)
    state.write_text(good)
    assert [r["text"] for r in load_passages(folder)] == ["a", "b", "c", "d"]
