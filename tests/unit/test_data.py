import json

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
