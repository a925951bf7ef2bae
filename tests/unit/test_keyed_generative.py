"""A generative keyed release (trainspotter.keyed.release.KeyedHFRewriter) with a tiny random Llama
(tests/tiny_lm.py: nothing downloaded), and its windows' outcomes (trainspotter.keyed.score): the
release's windows are green far above γ under its key and at γ under others, gray-box answers'
green share is read from the top answers, and a fixed-size list's later windows get their
hypergeometric null."""

import json

import numpy as np
import pytest
from scipy.stats import binomtest
from tiny_lm import TEXTS, tiny_llama

from trainspotter.backends.hf import HFBackend
from trainspotter.backends.spec import parse_spec
from trainspotter.keyed.queries import top_answers
from trainspotter.keyed.score import GreenScoring
from trainspotter.keyed.units import Seen, window_units
from trainspotter.proofs.beacon import TEST_BEACON
from trainspotter.keyed.release import KeyedHFRewriter, commit_release, load_release, release, verify_release
from trainspotter.keyed.watermark import CudaRandpermGreenList, KeyedGreenList


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-keyed") / "model", chat=True)


@pytest.fixture(scope="module")
def released(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("keyed-gen") / "release"
    rewriter = KeyedHFRewriter(parse_spec(f"hf:{tiny}"), bias=4.0)
    commit_release([{"id": f"p{i}", "text": t} for i, t in enumerate(TEXTS * 3)], out, rewriter,
                   beacon_round=TEST_BEACON.round, secret=bytes(32) + b"x")
    release(out, TEST_BEACON)
    return out


def test_the_manifest_names_the_watermark_and_its_tokenizer(released):
    manifest = json.loads((released / "manifest.json").read_text())
    scoring = manifest["scoring"]
    assert scoring["gamma"] == 0.25 and scoring["scheme"] == "trainspotter-green-v1" and scoring["unit"].startswith("window")
    files = scoring["tokenizer"]["files"]
    assert files and all(len(h) == 64 for h in files.values()) and (released / "tokenizer" / next(iter(files))).exists()
    checks = dict((name, ok) for name, ok, _ in verify_release(released))
    assert checks["files"] and checks["secret"]


def test_green_bias_adds_the_bias_on_the_green_list_of_each_rows_last_token():
    import torch

    from trainspotter.keyed.watermark import GreenBias

    green = KeyedGreenList(bytes(range(32)), 300)
    scores = torch.zeros(2, 310)  # a model's output may be wider than the tokenizer: the rest untouched
    out = GreenBias(green, 2.0)(torch.tensor([[1, 7], [3, 9]]), scores)
    for row, prev in enumerate((7, 9)):
        np.testing.assert_array_equal(out[row, :300].numpy(), 2.0 * green.mask(prev))
    assert not out[:, 300:].any()


def test_the_release_is_green_under_its_key_and_not_under_another(released):
    """With bias 4 on a random model most sampled tokens are green under the release key (the
    text is decoded and re-tokenised, which changes some windows of random byte-level tokens):
    more than γ, one-sided binomial p < 0.001; under another key the windows are green at γ
    (binomial test, false failure 0.001)."""
    from transformers import AutoTokenizer

    kr = load_release(released)
    tok = AutoTokenizer.from_pretrained(released / "tokenizer")
    seen, windows = Seen(), []
    for p in kr.public:
        windows += window_units([], tok(p["text"], add_special_tokens=False)["input_ids"], seen)
    records = [{"prev": a, "next": b} for a, b in windows]
    scoring = GreenScoring(len(tok))
    x, p = scoring.outcomes(records, kr.key)
    assert len(x) > 50 and np.all(p == 0.25)
    assert binomtest(int(x.sum()), len(x), 0.25, alternative="greater").pvalue < 0.001
    other, _ = scoring.outcomes(records, b"another key of 32 bytes.........")
    assert binomtest(int(other.sum()), len(other), 0.25).pvalue > 0.001


def test_gray_answers_read_the_green_share_of_the_top_answers(tiny):
    backend = HFBackend(tiny, device="cpu")
    seen = Seen()
    records = top_answers(backend, TEXTS[:1], seen)
    prevs = [r["prev"] for r in records]
    assert len(prevs) == len(set(prevs)) and len(records[0]["top"]) == min(256, len(backend.tokenizer))
    assert top_answers(backend, TEXTS[:1], seen) == []  # each previous token once ever
    key = bytes(range(32))
    green = KeyedGreenList(key, len(backend.tokenizer))
    r = records[0]
    q = np.array([w for _, w in r["top"]])
    want = sum(w for v, w in r["top"] if green.mask(r["prev"])[v]) / q.sum()
    x, p = GreenScoring(len(backend.tokenizer)).outcomes(records, key)
    assert x[0] == pytest.approx(want) and p[0] == 0.25
    many, _ = GreenScoring(len(backend.tokenizer)).outcomes_many(records, [key, bytes(32)])
    np.testing.assert_allclose(many[0], x)


def test_a_fixed_size_list_makes_later_windows_hypergeometric():
    scheme = GreenScoring(49152, green=lambda key: CudaRandpermGreenList(int.from_bytes(key[:7], "big") | 1, 49152))
    key = bytes(range(32))
    perm = scheme.green(key).permutation(5)
    records = [{"prev": 5, "next": int(perm[0])}, {"prev": 5, "next": int(perm[-1])}, {"prev": 5, "next": int(perm[1])}]
    seen = Seen()
    x, p = scheme.outcomes(records, key, seen)
    np.testing.assert_array_equal(x, [1, 0, 1])
    np.testing.assert_allclose(p, [12288 / 49152, 12287 / 49151, 12287 / 49150])
    assert seen.counts == {5: [3, 2]}
