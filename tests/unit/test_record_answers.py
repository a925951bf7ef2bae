"""The model's answers a gray-box row came from (``features.answers``): extraction with
``answers=True`` and ``recompute`` from the answers (after a JSON round trip, as a sealed
record holds them) give the same row bit for bit, for every gray feature family (token-level,
Min-K%++, perturbations, one and several references, EZ, TDDBench's criteria and prediction
vectors, twins' changed positions); a changed answer changes the row. Fake backends (answers
drawn from each text's hash) keep it fast; the CLI test records a real mini-testbed audit."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from trainspotter.backends.base import PROJECTION_DIM, TOP_K, TokenScores
from trainspotter.errors import InputError
from trainspotter.features.answers import ANSWERS, decode, encode, recompute
from trainspotter.features.extract import extract
from trainspotter.features.features import FEATURE_SETS, FeatureConfig


class WordTokenizer:
    def batch_decode(self, ids):
        return [f"w{i[0]}" for i in ids]


class FakeBackend:
    """Words as tokens (a word's id from its hash, ``shift`` apart between two tokenizers);
    every answer a seeded function of the text and ``seed``."""

    def __init__(self, seed: int, shift: int = 0):
        self.seed, self.shift = seed, shift
        self.fingerprint, self.tokenizer = f"fake-{seed}", WordTokenizer()

    def encode(self, text: str) -> list[int]:
        return [0] + [int(hashlib.sha256(w.encode()).hexdigest()[:4], 16) % 997 + 1 + self.shift for w in text.split()]

    def score(self, texts: list[str], distribution: bool = False) -> list[TokenScores]:
        out = []
        for text in texts:
            ids = np.asarray(self.encode(text)[1:], dtype=np.int64)
            rng = np.random.default_rng([self.seed, int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)])
            n = len(ids)
            lp = -rng.exponential(2.0, n)
            top = -np.sort(rng.exponential(1.0, (n, TOP_K)), axis=1)
            extra = dict(max_logprob=top[:, 0], mentr=rng.random(n), top_logprobs=top,
                         projection=rng.random((n, PROJECTION_DIM))) if distribution else {}
            out.append(TokenScores(token_ids=ids, logprobs=lp, argmax=np.where(rng.random(n) < 0.4, ids, ids + 1),
                                   mu=lp - rng.random(n), sigma2=rng.random(n) * 3, **extra))
        return out

    def generate(self, prefixes, max_new_tokens):
        raise AssertionError("gray access generates nothing")


WORDS = "river stone light paper garden window market silver winter orange music engine".split()


def passages(n: int, twins: bool = False, seed: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = list(rng.choice(WORDS, rng.integers(8, 20)))
        p = {"id": f"p{i}", "text": " ".join(words) + "."}
        if twins:
            words[int(rng.integers(len(words)))] = "quiet"
            p["twin"] = " ".join(words) + "."
        out.append(p)
    return out


CONFIGS = {
    "lean, one reference": (FEATURE_SETS["lean"], 1, False),
    "full, two references": (FeatureConfig(prediction_vectors=True, sequence=False), 2, False),
    "twins": (FEATURE_SETS["twins"], 1, True),
    "no reference": (FEATURE_SETS["lean"], 0, False),
    "calibrated, other tokenizer": (FEATURE_SETS["calibrated"], 1, False),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_recomputing_from_the_answers_gives_the_extracted_row_bit_for_bit(name):
    config, k, twins = CONFIGS[name]
    refs = [FakeBackend(10 + j, shift=1000 if "other tokenizer" in name else 0) for j in range(k)]
    ps = passages(9, twins)
    df = extract(ps, FakeBackend(1), refs, "gray", config.model_copy(update={"batch_size": 4}), answers=True)
    assert list(df.columns)[-1] == ANSWERS
    features = [c for c in df.columns if c not in ("id", ANSWERS)]
    for p, row in zip(ps, df.to_dict("records")):
        answers = json.loads(json.dumps(row[ANSWERS]))  # as a record holds them
        again = recompute(p["text"], answers, config)
        for c in features:
            assert again[c] == row[c] or (math.isnan(again[c]) and math.isnan(row[c])), (name, c)
        if refs and "other tokenizer" not in name:
            assert all("token_ids" not in r for r in answers["references"])  # one tokenizer: ids once
    if "other tokenizer" in name:
        assert "token_ids" in answers["references"][0] and math.isnan(row["gray_ez"])
    if twins:
        assert "twin_ids" in answers and np.isfinite(df["gray_twin_lp"]).all()
    if "full" in name:
        assert {"top_logprobs", "projection", "mentr"} <= set(answers["target"]) and set(answers["perturbed"]) == set(
            config.kinds)
    # without answers=True: no answers column (the extract verb's parquet)
    assert ANSWERS not in extract(ps[:2], FakeBackend(1), refs, "gray", config).columns


def test_a_changed_answer_changes_the_row():
    config = FEATURE_SETS["lean"]
    p = passages(1)[0]
    t, r = FakeBackend(1).score([p["text"]])[0], FakeBackend(2).score([p["text"]])[0]
    answers = json.loads(json.dumps(encode(t, {}, [r])))
    row = recompute(p["text"], answers, config)
    back = decode(answers)
    assert np.array_equal(back[0].logprobs, t.logprobs) and np.array_equal(back[0].argmax, t.argmax)
    lp = back[0].logprobs.copy()
    lp[0] -= 0.5
    changed = dict(answers, target=dict(answers["target"], logprobs=encode(
        TokenScores(t.token_ids, lp, t.argmax, t.mu, t.sigma2), {}, [])["target"]["logprobs"]))
    again = recompute(p["text"], changed, config)
    assert again["gray_ppl"] != row["gray_ppl"] and again["gray_ref_diff"] != row["gray_ref_diff"]
    assert recompute(p["text"] + " x", answers, config)["gray_zlib_ratio"] != row["gray_zlib_ratio"]


def test_answers_of_a_label_only_model_are_refused_as_extraction_refuses_them():
    t = FakeBackend(1).score(["river stone"])[0]
    t.logprobs[:] = np.nan
    with pytest.raises(InputError, match="no log-probabilities"):
        recompute("river stone", encode(t, {}, []), FEATURE_SETS["lean"])


# -- in a sealed record: verify computes every feature again from the recorded answers ----------


class MemberBackend(FakeBackend):
    """A target that trained on ``members``: their log-probs are 0.5 higher."""

    def __init__(self, seed: int, members: set[str]):
        super().__init__(seed)
        self.members = members

    def score(self, texts, distribution=False):
        out = super().score(texts, distribution)
        for text, s in zip(texts, out):
            if text in self.members:
                s.logprobs = np.minimum(s.logprobs + 0.5, 0.0)
        return out


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    """A gray lean audit with a reference and a placebo check, both extracted with answers."""
    from trainspotter import audit

    folder = tmp_path_factory.mktemp("answers")
    sides = {"suspect": passages(80), "heldout": passages(80, seed=2)}
    for side, ps in sides.items():
        (folder / f"{side}.jsonl").write_text("".join(json.dumps(dict(p, id=f"{side[0]}{i}")) + "\n"
                                                      for i, p in enumerate(ps)))
    for name in ("model", "reference"):
        (folder / name).mkdir()
        (folder / name / "model.safetensors").write_bytes(name.encode())
    target = MemberBackend(1, {p["text"] for p in sides["suspect"]})
    reference = FakeBackend(2)
    lean = FEATURE_SETS["lean"]

    def extract_fn(ps, batch_no):
        return extract(ps, target, [reference], "gray", lean, answers=True).to_dict("records")

    def placebo_fn(ps, batch_no):
        return extract(ps, reference, [], "gray", lean, answers=True).to_dict("records")

    result = audit(suspect=str(folder / "suspect.jsonl"), heldout=str(folder / "heldout.jsonl"),
                   model=f"hf:{folder / 'model'}", reference=[f"hf:{folder / 'reference'}"], batch_pairs=8,
                   extract_fn=extract_fn, placebo_fn=placebo_fn)
    return json.loads(json.dumps(result.record))


def _check(record):
    from trainspotter.record.verify import verify_records

    return verify_records([("record.json", record)])


def _side(record, k=2, side="suspect"):
    return [p for b in record["batches"] for p in b["pairs"]][k][side]


def test_a_sealed_gray_record_holds_the_answers_and_verify_recomputes_every_feature(sealed):
    from trainspotter.record.format import VERSION

    assert sealed["version"] == VERSION == 2 and sealed["result"]["verdict"] == "trained on"
    assert sealed["placebo"]["pairs"] and all("answers" in p[s] for p in sealed["placebo"]["pairs"]
                                              for s in ("suspect", "heldout"))
    side = _side(sealed)
    assert set(side["answers"]) == {"target", "perturbed", "references"} and "gray_ez" in side["features"]
    check = _check(sealed)
    assert check.ok, check.failure
    pairs, placebo = sealed["result"]["pairs_this_run"], len(sealed["placebo"]["pairs"])
    assert {c.name: c.detail for c in check.checks}["features"] == (
        f"every feature of {pairs} pairs and the placebo model's {placebo} recomputed from the model's recorded "
        f"answers matches bit-for-bit")


def _answer(record):
    """One log-prob of pair 3's suspect passage, 0.25 lower."""
    target = _side(record)["answers"]["target"]
    lp = decode({"target": target, "perturbed": {}, "references": []})[0].logprobs.copy()
    lp[3] -= 0.25
    target["logprobs"] = encode(TokenScores(np.zeros(len(lp), dtype=np.int64), lp, lp, lp, lp), {}, [])["target"][
        "logprobs"]


def _answer_rehashed(record):
    _answer(record)
    _side(record)["answers_sha256"] = sha256(_side(record)["answers"])


def _feature(record):
    _side(record)["features"]["gray_min_kpp_20"] += 0.01


def _feature_rehashed(record):
    _feature(record)
    _side(record)["features_sha256"] = sha256(_side(record)["features"])


def _placebo_answer(record):
    answers = record["placebo"]["pairs"][1]["heldout"]["answers"]
    answers["target"]["token_ids"][0] += 1


def _removed(record):
    del _side(record, 5, "heldout")["answers"]


from trainspotter.record.format import sha256  # noqa: E402


@pytest.mark.parametrize("tamper, words", [
    (_answer, ["pair 3, suspect 's", "answer changed after sealing", "gray_ppl computed from them is"]),
    (_answer_rehashed, ["pair 3, suspect 's", "feature gray_ppl: recorded", "an answer or a feature changed"]),
    (_feature, ["pair 3, suspect 's", "feature gray_min_kpp_20 changed after sealing: recorded"]),
    (_feature_rehashed, ["pair 3, suspect 's", "feature gray_min_kpp_20: recorded"]),
    (_placebo_answer, ["placebo pair 2, heldout 'h", "answer changed after sealing"]),
    (_removed, ["hold no model answers, the others do"]),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
def test_a_changed_answer_or_feature_fails_verify_naming_pair_side_and_field(sealed, tamper, words):
    record = json.loads(json.dumps(sealed))
    tamper(record)
    failure = _check(record).failure
    assert failure is not None and failure.name == "features", failure
    for w in words:
        assert w in failure.detail, failure.detail


def _reseal(record: dict) -> dict:
    """The record as a version 1 trainspotter would have sealed it: no answers."""
    from trainspotter.record.format import SECTIONS, batch_digest, record_digest

    for pair in [p for b in record["batches"] for p in b["pairs"]] + record["placebo"]["pairs"]:
        for s in ("suspect", "heldout"):
            pair[s].pop("answers"), pair[s].pop("answers_sha256")
    prev = record["start"]["previous"]
    for b in record["batches"]:
        b["digest"] = prev = batch_digest(prev, b["pairs"])
    record["end"]["chain"], record["version"] = prev, 1
    record["sections"] = {s: sha256(record[s]) for s in SECTIONS}
    record["digest"] = record_digest(record)
    return record


def test_a_version_1_record_verifies_and_says_its_features_were_not_recomputed(sealed, tmp_path):
    from trainspotter.record.verify import load_record

    old = _reseal(json.loads(json.dumps(sealed)))
    check = _check(old)
    assert check.ok, check.failure
    assert "not recomputed: the record holds no model answers (a version 1 record" in {
        c.name: c.detail for c in check.checks}["features"]
    (tmp_path / "r.json").write_text(json.dumps(dict(old, version=3)))
    with pytest.raises(InputError, match="record version 3; this trainspotter reads 1, 2"):
        load_record(tmp_path / "r.json")


def test_columns_the_answers_do_not_give_are_named_as_not_recomputed(tmp_path):
    """An audit with access "both" records black-box columns beside the gray ones: the gray ones
    are recomputed, the others are named as not recomputed (their answers are not recorded)."""
    from trainspotter import audit

    for side, seed in (("suspect", 3), ("heldout", 4)):
        (tmp_path / f"{side}.jsonl").write_text("".join(json.dumps(dict(p, id=f"{side[0]}{i}")) + "\n"
                                                        for i, p in enumerate(passages(40, seed=seed))))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"m")
    target = FakeBackend(1)

    def extract_fn(ps, batch_no):
        rows = extract(ps, target, [], "gray", FEATURE_SETS["lean"], answers=True).to_dict("records")
        return [dict(r, black_match_rate=len(p["text"]) / 100) for r, p in zip(rows, ps)]

    record = audit(suspect=str(tmp_path / "suspect.jsonl"), heldout=str(tmp_path / "heldout.jsonl"),
                   model=f"hf:{tmp_path / 'model'}", batch_pairs=8, assume_exchangeable=True,
                   extract_fn=extract_fn).record
    check = _check(json.loads(json.dumps(record)))
    assert check.ok, check.failure
    detail = {c.name: c.detail for c in check.checks}["features"]
    assert "matches bit-for-bit; not recomputed (black-box, their answers are not recorded): black_match_rate" in detail


# -- black-box answers (features.black_answers): greedy tokens, their strings, continuations ----


class SpeakingTokenizer(WordTokenizer):
    def decode(self, ids):
        return " ".join(f"w{i}" for i in ids)


class BlackBackend(FakeBackend):
    """A FakeBackend that also continues prefixes (seeded by the prefix's hash)."""

    def __init__(self, seed: int, shift: int = 0):
        super().__init__(seed, shift)
        self.tokenizer = SpeakingTokenizer()

    def generate(self, prefixes, max_new_tokens):
        lengths = [max_new_tokens] * len(prefixes) if isinstance(max_new_tokens, int) else max_new_tokens
        out = []
        for prefix, n in zip(prefixes, lengths):
            rng = np.random.default_rng([self.seed, int(hashlib.sha256(prefix.encode()).hexdigest()[:8], 16)])
            out.append([int(x) for x in rng.integers(1, 60, n)])
        return out


BLACK_CONFIGS = {
    "both, full, two references": ("both", FeatureConfig(batch_size=4), 2),
    "black, petal, other tokenizer": ("black", FeatureConfig(batch_size=4, estimator="petal", sequence=False), 1),
    "black, twins": ("black", FEATURE_SETS["twins"].model_copy(update={"batch_size": 4}), 1),
}


@pytest.mark.parametrize("name", BLACK_CONFIGS)
def test_black_rows_recomputed_from_the_answers_equal_the_extracted_ones_bit_for_bit(name):
    """With the real packaged MiniLM and BERTScore: every black (and gray) column of the row
    computed again from JSON round-tripped answers equals extraction's; a fresh MiniLM encoder
    (another batch) and BERTScore run give the recorded similarities and F1s within tolerance."""
    from trainspotter.features import black_answers as B
    from trainspotter.features.probability import TokenEmbeddings, bertscore_f1

    access, config, k = BLACK_CONFIGS[name]
    refs = [BlackBackend(10 + j, shift=1000 if "other" in name else 0) for j in range(k)]
    ps = passages(6, twins="twins" in name)
    df = extract(ps, BlackBackend(1), refs, access, config, answers=True)
    features = [c for c in df.columns if c not in ("id", ANSWERS)]
    assert "black_match_rate" in features and list(df.columns)[-1] == ANSWERS
    decoded = []
    for p, row in zip(ps, df.to_dict("records")):
        answers = json.loads(json.dumps(row[ANSWERS]))
        assert ("target" in answers) == (access == "both") and B.BLACK in answers
        again = recompute(p["text"], answers, config)
        for c in features:
            assert again[c] == row[c] or (math.isnan(again[c]) and math.isnan(row[c])), (name, c)
        decoded.append((p["id"], B.decode(answers[B.BLACK])))
    black = answers[B.BLACK]
    if "full" in name:
        assert set(black["perturbed"]) == set(config.kinds) and set(black["sequence"]["f1"]) == {"", *config.kinds,
                                                                                                 "reference"}
        assert np.isfinite(df[[c for c in features if "_seq_" in c]].to_numpy()).all()
        assert all("token_ids" not in r and "true" not in r for r in black["references"])  # one tokenizer
    elif "twins" in name:  # the changed-position columns, and the twin's ids beside the black answers
        assert {"black_twin_lp", "black_twin_ref_diff", "black_twin_match"} <= set(features)
        assert np.isfinite(df[["black_twin_lp", "black_twin_ref_diff", "black_twin_match"]].to_numpy()).all()
        assert "twin_ids" in answers and "target" not in answers
        assert not any(c.startswith("gray_") for c in features)
    else:
        assert "token_ids" in black["references"][0] and "logprobs" in black["references"][0]  # PETAL's surrogate
        assert math.isnan(row["black_ez"])
    problem, sim, f1 = B.check_models(decoded, TokenEmbeddings().similarity, bertscore_f1)
    assert problem is None and sim <= B.SIM_TOLERANCE and f1 <= B.F1_TOLERANCE, (problem, sim, f1)
    # a changed token string, or a changed continuation, is named
    where, first = decoded[0]
    first["target"]["pred"][2] = "zebra" if first["target"]["pred"][2] != "zebra" else "cloud"
    problem, _, _ = B.check_models(decoded[:1], TokenEmbeddings().similarity, bertscore_f1)
    assert problem.startswith(f"{where}: answer black.target.sim[2] is"), problem
    if "full" in name:
        first["target"]["pred"][2] = first["target"]["true"][2]
        first["target"]["sim"][2] = 1.0
        first["sequence"]["generated"]["case"] = "an entirely different continuation"
        problem, _, _ = B.check_models(decoded[:1], TokenEmbeddings().similarity, bertscore_f1)
        assert problem and "answer black.sequence.f1['case']" in problem, problem


@pytest.fixture(scope="module")
def sealed_black(tmp_path_factory):
    """A black-box lean audit with a reference, extracted with answers (no model: fakes)."""
    from trainspotter import audit

    folder = tmp_path_factory.mktemp("black")
    for side, seed in (("suspect", 3), ("heldout", 4)):
        (folder / f"{side}.jsonl").write_text("".join(json.dumps(dict(p, id=f"{side[0]}{i}")) + "\n"
                                                      for i, p in enumerate(passages(40, seed=seed))))
    for name in ("model", "reference"):
        (folder / name).mkdir()
        (folder / name / "model.safetensors").write_bytes(name.encode())
    target, reference = BlackBackend(1), BlackBackend(2)

    def extract_fn(ps, batch_no):
        return extract(ps, target, [reference], "black", FEATURE_SETS["lean"], answers=True).to_dict("records")

    result = audit(suspect=str(folder / "suspect.jsonl"), heldout=str(folder / "heldout.jsonl"),
                   model=f"hf:{folder / 'model'}", reference=[f"hf:{folder / 'reference'}"], access="black",
                   batch_pairs=8, assume_exchangeable=True, extract_fn=extract_fn)
    return json.loads(json.dumps(result.record))


def test_a_sealed_black_record_holds_the_answers_and_verify_recomputes_every_feature(sealed_black):
    side = _side(sealed_black)
    assert set(side["answers"]) == {"black"} and "black_ez" in side["features"]
    check = _check(sealed_black)
    assert check.ok, check.failure
    detail = {c.name: c.detail for c in check.checks}["features"]
    assert detail.startswith("every feature of ") and "matches bit-for-bit; the black-box token similarities " \
        "computed again from the recorded token strings with MiniLM" in detail, detail
    assert "not recomputed" not in detail


def _black_sim(record, j=1):
    """Pair 3's suspect passage: the similarity of its target's token j, 0.3 further from 1."""
    from trainspotter.features.answer_codec import decode_floats, encode_floats

    answers = _side(record)["answers"]["black"]["target"]
    sim = decode_floats(answers["sim"]).copy()
    sim[j] -= 0.3
    answers["sim"] = encode_floats(sim)


def _black_sim_rehashed(record):
    _black_sim(record)
    _side(record)["answers_sha256"] = sha256(_side(record)["answers"])


def _black_string_rehashed(record):
    answers = _side(record)["answers"]["black"]["target"]
    answers["pred"][1] = answers["true"][1] + "zz"
    _side(record)["answers_sha256"] = sha256(_side(record)["answers"])


def _black_argmax(record):
    answers = _side(record, 4, "heldout")["answers"]["black"]["target"]
    answers["argmax"][0] = answers["argmax"][0] + 1 if answers["argmax"][0] == answers["token_ids"][0] else \
        answers["token_ids"][0]


@pytest.mark.parametrize("tamper, words", [
    (_black_sim, ["pair 3, suspect 's", "answer changed after sealing", "black_ppl computed from them is"]),
    (_black_sim_rehashed, ["pair 3, suspect 's", "feature black_ppl: recorded", "an answer or a feature changed"]),
    (_black_string_rehashed, ["pair 3, suspect 's", "answer black.target.sim[1] is", "MiniLM similarity of the "
                                                                                     "recorded strings"]),
    (_black_argmax, ["pair 5, heldout 'h", "answer changed after sealing", "black_match_rate computed from them"]),
    (_feature, None),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
def test_a_changed_black_answer_fails_verify_naming_pair_side_and_field(sealed_black, tamper, words):
    record = json.loads(json.dumps(sealed_black))
    if tamper is _feature:  # a black feature value, not its answers
        _side(record)["features"]["black_min_k_20"] += 0.01
        words = ["pair 3, suspect 's", "feature black_min_k_20 changed after sealing: recorded"]
    else:
        tamper(record)
    failure = _check(record).failure
    assert failure is not None and failure.name == "features", failure
    for w in words:
        assert w in failure.detail, failure.detail
