"""The extraction benchmark's instruments (studies.extract_cost;
benchmarks/bench_extract.py): stage clocks, and a backend wrapper that counts and keeps what a
configuration asks of each model."""

import pytest

from studies.extract_cost import Recording, Stopwatch, configurations


class Echo:
    fingerprint, tokenizer = "echo", None

    def encode(self, text):
        return [0] + [len(w) for w in text.split()]

    def score(self, texts, distribution=False):
        return [len(t) for t in texts]

    def generate(self, prefixes, max_new_tokens):
        return [[1] * 2 for _ in prefixes]


def test_stopwatch_adds_each_stage_s_seconds(monkeypatch):
    clock = iter([10.0, 10.5, 20.0, 20.25, 30.0, 31.0])
    monkeypatch.setattr("studies.extract_cost.time.perf_counter", lambda: next(clock))
    watch = Stopwatch()
    score, perturb = watch.wrap("score", lambda x: x + 1), watch.wrap("perturb", lambda: None)
    assert score(1) == 2 and score(5) == 6
    perturb()
    assert watch.s["score"] == pytest.approx(0.75) and watch.s["perturb"] == pytest.approx(1.0)
    assert watch.s["BERTScore"] == 0.0


def test_recording_counts_and_keeps_what_was_asked():
    rec = Recording(Echo(), Stopwatch())
    assert rec.score(["a b", "ccc"]) == [3, 3]
    rec.score(["d"], distribution=True)
    rec.generate(["p", "q"], [3, 5])
    rec.generate(["r"], 4)
    assert rec.texts == ["a b", "ccc", "d"] and rec.prefixes == [("p", 3), ("q", 5), ("r", 4)]
    assert (rec.c.scored_texts, rec.c.generated_prefixes, rec.c.generated_tokens) == (3, 3, 12)
    assert rec.fingerprint == "echo" and rec.encode("x yy") == [0, 1, 2]


def test_cold_token_tables_are_new_files_and_the_persisted_one_is_shared(tmp_path):
    configs = configurations(8, tmp_path)
    cold = configs["full set, cold token table (before)"][1]
    assert cold().embedding_cache != cold().embedding_cache
    warm = {configs[name][1]().embedding_cache for name in ("full set, persisted token table (now)",
                                                            "black full set (6 perturbations, suffixes, reference)")}
    assert warm == {str(tmp_path / "warm.npz")}
    assert configs["gray lean, target only"][2] is False and configs["gray lean (no perturbations)"][2] is True
