"""The twins release benchmarks' helpers (studies.paraphrase_table,
rewriters_bench; benchmarks/twins_paraphrases.py, bench_rewriters.py) on hand-made inputs."""

import gzip
import json

import pytest

from studies.paraphrase_table import sentences, table, table_bytes
from studies.rewriters import examples, quality


def test_sentences_stop_at_the_first_that_reaches_the_words():
    text = "One two three. Four five. Six seven eight nine. Ten."
    assert sentences(text, words=5) == ["One two three.", "Four five."]
    assert sentences(text, words=4) == ["One two three.", "Four five."]  # 3 words, then 5 ≥ 4
    assert sentences(text, words=100) == ["One two three.", "Four five.", "Six seven eight nine.", "Ten."]


def test_table_joins_each_passage_s_sentences_and_keeps_an_empty_one_as_written():
    job = {"groups": [{"split": "member", "variant": 0, "key": "k0"}, {"split": "member", "variant": 1, "key": "k1"}],
           "passages": {"member": [{"id": "a", "sha": "s-a", "sentences": ["First one.", "Second one."]}]}}
    answers = [json.dumps({"split": "member", "id": "a", "variant": 0, "attempt": 0, "i": 0, "text": '"Initial."'}),
               json.dumps({"split": "member", "id": "a", "variant": 0, "attempt": 0, "i": 1, "text": "  "}),
               json.dumps({"split": "member", "id": "a", "variant": 1, "attempt": 2, "i": 1, "text": "Latter."})]
    rows, copied, total = table(job, answers)
    # variant 0: the quotes cleaned off, the blank second sentence kept as written; variant 1
    # answered the second sentence only (attempt 2)
    assert rows == {("s-a", "k0", 0): "Initial. Second one.", ("s-a", "k1", 2): "First one. Latter."}
    assert (copied, total) == (2, 4)
    lines = gzip.decompress(table_bytes(rows)).decode().splitlines()
    assert [json.loads(x)["key"] for x in lines] == ["k0", "k1"] and table_bytes(rows) == table_bytes(dict(
        reversed(list(rows.items()))))  # sorted, no time stamp: the same bytes whatever the order


def test_quality_counts_what_the_gate_dropped_and_redrew():
    result = {"rows": [{"id": str(i), "text": "x"} for i in range(4)], "kept": {}, "skipped": ["3"], "redrawn": 2,
              "seconds": 8.0}
    q = quality(result)
    assert (q["passages"], q["kept"], q["dropped"]) == (4, 0, 1)
    assert q["dropped_share"] == 0.25 and q["redrawn_share"] == pytest.approx(2 / 8) and q["seconds_per_passage"] == 2.0
    assert q["edit_rate"] is None and q["similarity"] is None  # nothing kept, nothing to compare
    kept = dict(result, kept={"1": ["a", "b"], "2": ["c", "d"], "0": ["e", "f"]})
    assert [e["id"] for e in examples(kept)] == ["1", "2"] and examples(kept)[0]["variant 1"] == "b"
