"""The generative rewriters of twins (trainspotter.rewriters.generative): a tiny Llama built from a
config (random weights, a byte-level BPE tokenizer trained here: nothing downloaded) for the
local path with transformers' watermark, and a fake OpenAI-compatible chat server that records
what it is sent for the openai: path."""

import json

import pytest
from tiny_lm import TEXTS, ChatHandler, fake_chat_server, tiny_llama

from trainspotter.errors import InputError
from trainspotter.twins.folder import write_twins
from trainspotter.rewriters.generative import HFRewriter, OpenAIRewriter, make_rewriter, sample_seed, watermark_key
from trainspotter.rewriters.lexical import KeyedLexicalRewriter
from trainspotter.twins.make import make_twins


@pytest.fixture(scope="module")
def tiny_chat(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-chat") / "model", chat=True)


@pytest.fixture(scope="module")
def tiny_plain(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-plain") / "model", chat=False)


def test_a_rewrite_is_a_function_of_text_and_key_and_keys_differ(tiny_chat):
    rewriter = make_rewriter(f"hf:{tiny_chat}")
    assert isinstance(rewriter, HFRewriter)
    a, b = b"a" * 32, b"b" * 32
    first = rewriter.rewrite(TEXTS[0], a)
    assert first and first == rewriter.rewrite(TEXTS[0], a)  # deterministic in (text, key)
    assert make_rewriter(f"hf:{tiny_chat}").rewrite(TEXTS[0], a) == first  # ... in a fresh load too
    assert rewriter.rewrite(TEXTS[0], b) != first
    assert rewriter.rewrite(TEXTS[1], a) != first
    assert rewriter.redraw(TEXTS[0], a, 1, "p0") not in (first, rewriter.redraw(TEXTS[0], a, 2, "p0"))


def test_generate_gets_the_variants_watermark_a_seeded_sample_and_a_capped_length(tiny_chat, monkeypatch):
    """What reaches ``model.generate``: sampling, the watermark config whose hashing key is the
    variant key's (the same for a redraw of that variant, another for another key), a cap of
    1.5 × the passage's tokens + 16, and the chat template's prompt holding the passage."""
    rewriter = make_rewriter(f"hf:{tiny_chat}")
    tok, model = rewriter.load()
    calls = []
    real = model.generate

    def spy(**kw):
        import torch

        calls.append(kw | {"rng": torch.random.get_rng_state().clone()})
        return real(**kw)

    monkeypatch.setattr(model, "generate", spy)
    a, b = b"a" * 32, b"b" * 32
    rewriter.rewrite(TEXTS[0], a)
    rewriter.redraw(TEXTS[0], a, 1, "p0")
    rewriter.rewrite(TEXTS[0], b)
    keys = [c["watermarking_config"].hashing_key for c in calls]
    assert keys == [watermark_key(a), watermark_key(a), watermark_key(b)] and keys[0] != keys[2]
    assert all(c["do_sample"] and c["watermarking_config"].bias == 2.0 for c in calls)
    n = len(tok(TEXTS[0], add_special_tokens=False)["input_ids"])
    assert calls[0]["max_new_tokens"] == int(1.5 * n) + 16
    prompt = tok.decode(calls[0]["input_ids"][0])
    assert prompt.startswith("<|user|>Paraphrase") and TEXTS[0] in prompt and prompt.endswith("<|assistant|>")
    import torch

    # the global generator was seeded from HMAC(key, attempt, text) for each call, then restored
    for c, (key, attempt) in zip(calls, [(a, 0), (a, 1), (b, 0)]):
        assert torch.equal(c["rng"], torch.Generator().manual_seed(sample_seed(key, TEXTS[0], attempt)).get_state())
    assert len({sample_seed(a, TEXTS[0], 0), sample_seed(a, TEXTS[0], 1), sample_seed(b, TEXTS[0], 0)}) == 3


def test_the_watermark_shows_under_its_own_key_only(tiny_plain, monkeypatch):
    """Kirchenbauer's detector (transformers' WatermarkDetector) on the tokens generated under key
    A: the green share under A's hashing key is far above the 0.25 of unwatermarked text, under
    B's it is not. On random weights the next-token distribution is nearly flat, so the bias of 2
    makes a green token ~2.5x as likely as chance (expected share ~0.7 against 0.25): over ~300
    tokens the gap is many standard deviations on any CPU; no trained model is involved."""
    from transformers import WatermarkDetector

    rewriter = make_rewriter(f"hf:{tiny_plain}")
    tok, model = rewriter.load()
    assert "Paraphrase:" in tok.decode(rewriter.prompt(TEXTS[0])["input_ids"][0])  # no template: plain prompt
    generated = []
    real = model.generate

    def keep(**kw):
        out = real(**kw)
        generated.append(out[0, kw["input_ids"].shape[1] - 1:])  # the last prompt token seeds the first green list
        return out

    monkeypatch.setattr(model, "generate", keep)
    a, b = b"A" * 32, b"B" * 32
    for t in TEXTS:
        for attempt in range(3):
            rewriter.redraw(t, a, attempt, "x")
    share = {}
    for name, key in (("A", a), ("B", b)):
        detector = WatermarkDetector(model.config, "cpu", rewriter.watermarking_config(key))
        scored = [detector(g[None], return_dict=True) for g in generated]
        share[name] = sum(int(s.num_green_tokens[0]) for s in scored) / sum(int(s.num_tokens_scored[0]) for s in scored)
    assert sum(len(g) - 1 for g in generated) >= 200
    assert share["A"] > 0.5 and share["B"] < 0.35, share


def test_settings_record_model_and_watermark_but_never_a_key(tiny_chat, tmp_path):
    rewriter = make_rewriter(f"hf:{tiny_chat}")
    keys = [b"\x11" * 32, b"\x22" * 32]
    twins = make_twins([{"id": f"p{i}", "text": t} for i, t in enumerate(TEXTS)], 2, rewriter, keys=keys,
                       max_edit_rate=1.0)
    folder = write_twins(twins, tmp_path / "twins")
    manifest = json.loads((folder / "manifest.json").read_text())
    r = manifest["rewriter"]
    assert r["name"] == "generative" and r["backend"] == "hf" and r["model"] == f"hf:{tiny_chat}"
    assert r["watermark"]["bias"] == 2.0 and "one per variant" in r["watermark"]["hashing_key"]
    assert r["prompt"] == "chat template" and manifest["passages"] == 2
    text = (folder / "manifest.json").read_text()
    for key in keys:
        assert key.hex() not in text and str(watermark_key(key)) not in text


def test_the_quality_gate_redraws_generated_variants(tiny_chat):
    """A variant whose edit rate passes no gate is redrawn, each attempt sampling anew, and the
    passage is skipped when none passes: the gate applies to generated variants as to lexical ones."""
    rewriter = make_rewriter(f"hf:{tiny_chat}")
    seen = []
    real = rewriter.redraw
    rewriter.redraw = lambda *a: seen.append(real(*a)) or seen[-1]
    twins = make_twins([{"id": "p0", "text": TEXTS[0]}], 2, rewriter, max_edit_rate=1e-9, retries=3)
    assert twins.ids == [] and twins.manifest["skipped"][0]["id"] == "p0"
    assert len(seen) == 4 and len(set(seen)) == 4  # the first sample and three redraws, all different


def test_an_empty_rewrite_is_redrawn_then_one_error_naming_the_passage(tiny_chat, monkeypatch):
    rewriter = make_rewriter(f"hf:{tiny_chat}")
    monkeypatch.setattr(rewriter, "_generate", lambda text, key, attempt: "  \n ")
    with pytest.raises(InputError, match="passage 'p7'.*empty rewrite on all 3 attempts"):
        make_twins([{"id": "p7", "text": TEXTS[0]}], 2, rewriter, retries=2)


@pytest.mark.parametrize("value,problem", [
    ("gpt", "expected lexical, hf:PATH"), ("hf:/no/such/model", "does not exist"),
    ("openai:m", "expected openai:MODEL@http"), ("openai:m@http://h/v1?colour=red", "unknown option 'colour'"),
    ("mistral:x", "unknown backend"),
])
def test_a_bad_rewriter_value_is_one_input_error(value, problem):
    with pytest.raises(InputError, match=problem):
        make_rewriter(value)


def test_lexical_is_the_default():
    assert isinstance(make_rewriter(None), KeyedLexicalRewriter)
    assert make_rewriter("lexical", senses=3).senses == 3


SECRET = "sk-rewriter-SECRET-987"


@pytest.fixture()
def chat_server():
    with fake_chat_server() as url:
        yield url


def test_openai_rewriter_sends_the_prompt_and_a_keyed_seed_and_records_no_key(chat_server, tmp_path, monkeypatch,
                                                                              caplog):
    monkeypatch.setenv("REWRITER_KEY", SECRET)
    rewriter = make_rewriter(f"openai:para-model@{chat_server}?key_env=REWRITER_KEY")
    assert isinstance(rewriter, OpenAIRewriter)
    keys = [b"\x01" * 32, b"\x02" * 32]
    twins = make_twins([{"id": "p0", "text": TEXTS[0]}], 2, rewriter, keys=keys)
    sent = ChatHandler.requests
    assert len(sent) == 2 and all(r["path"] == "/v1/chat/completions" for r in sent)
    assert all(r["auth"] == f"Bearer {SECRET}" for r in sent)  # the key goes to the server, nowhere else
    for r, key in zip(sent, keys):
        body = r["body"]
        assert body["model"] == "para-model" and TEXTS[0] in body["messages"][-1]["content"]
        assert body["messages"][-1]["content"].startswith("Paraphrase the following passage")
        assert body["seed"] == sample_seed(key, TEXTS[0], 0) % 2 ** 31 and body["temperature"] == 0.7
        assert body["max_tokens"] == int(1.5 * -(-4 * len(TEXTS[0].split()) // 3)) + 16
    v0, v1 = twins.variants["p0"][0], twins.variants["p0"][1]
    assert v0 != v1 and not v0.startswith("Here is") and v0.lower() == TEXTS[0].lower()  # preamble stripped
    assert rewriter.rewrite(TEXTS[0], keys[0]) == v0  # the server honours seed: same (text, key), same rewrite
    folder = write_twins(twins, tmp_path / "twins")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["rewriter"]["backend"] == "openai" and manifest["rewriter"]["watermark"] is None
    assert "no watermark" in manifest["rewriter"]["note"]
    for path in folder.iterdir():
        assert SECRET not in path.read_text()
    assert SECRET not in caplog.text


def test_openai_rewriter_failure_is_one_error_naming_the_passage(monkeypatch):
    from trainspotter.errors import APIRequestError

    rewriter = make_rewriter("openai:m@http://127.0.0.1:9/v1?retries=0&timeout=2")
    with pytest.raises(APIRequestError, match='passage "The river town grew quickly after the railway') as e:
        rewriter.rewrite(TEXTS[0], b"k" * 32)
    assert "\n" not in str(e.value)


def _table(path, rows):
    import gzip

    from trainspotter.rewriters.generative import key_fingerprint, text_digest

    lines = [json.dumps({"text_sha256": text_digest(t), "key": key_fingerprint(k), "attempt": a, "text": out})
             for t, k, a, out in rows]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def test_a_paraphrase_table_replays_its_rows_cleaned_and_names_what_it_lacks(tmp_path):
    from trainspotter.rewriters.generative import TableRewriter
    from trainspotter.rewriters.base import EmptyRewrite

    a, b = b"a" * 32, b"b" * 32
    path = _table(tmp_path / "t.jsonl.gz", [(TEXTS[0], a, 0, "Here is the paraphrase:\n  One  way. "),
                                            (TEXTS[0], b, 0, "Another way."), (TEXTS[0], a, 1, "A redraw."),
                                            (TEXTS[1], a, 0, "")])
    rewriter = TableRewriter(path, made={"model": "m"})
    assert rewriter.rewrite(TEXTS[0], a) == "One way."  # cleaned as a generative answer
    assert rewriter.rewrite(TEXTS[0], b) == "Another way."  # the key picks the row
    assert rewriter.redraw(TEXTS[0], a, 1, "p0") == "A redraw."
    with pytest.raises(EmptyRewrite, match="p0.*no attempt 2"):
        rewriter.redraw(TEXTS[0], a, 2, "p0")
    with pytest.raises(EmptyRewrite, match="empty"):
        rewriter.rewrite(TEXTS[1], a)
    with pytest.raises(InputError, match="no paraphrase of passage"):
        rewriter.rewrite("A passage the table never saw.", a)
    settings = rewriter.describe()
    assert settings["name"] == "table" and settings["made"] == {"model": "m"} and len(settings["sha256"]) == 64
    # make_twins on the table: two keys, two distinct variants, the draw among them
    twins = make_twins([{"id": "p0", "text": TEXTS[0]}], 2, rewriter, keys=[a, b], retries=1, max_edit_rate=1.0)
    assert twins.variants["p0"] == {0: "One way.", 1: "Another way."}


def test_a_paraphrase_table_that_is_not_the_expected_one_or_malformed_is_one_error(tmp_path):
    from trainspotter.rewriters.generative import TableRewriter

    path = _table(tmp_path / "t.jsonl.gz", [(TEXTS[0], b"a" * 32, 0, "x")])
    with pytest.raises(InputError, match="t.jsonl.gz: sha256 .* another paraphrase table"):
        TableRewriter(path, sha256="0" * 64)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text_sha256": "x", "key": "y", "attempt": 0, "text": "t"}\n{"key": 1}\n')
    with pytest.raises(InputError, match="bad.jsonl, line 2: not a paraphrase row"):
        TableRewriter(bad)


PASSAGE = ("The river town grew quickly after the railway arrived. Its market became the largest in the region!\n"
           "Was it the biggest? A small observatory on the hill recorded the comet.")


@pytest.fixture(scope="module")
def tiny_sentences(tmp_path_factory):
    from tiny_lm import sentence_llama

    return sentence_llama(tmp_path_factory.mktemp("tiny-sentences") / "model")


def test_by_sentence_each_sentence_is_paraphrased_alone_under_its_own_seed_and_joined(tiny_sentences, monkeypatch):
    """unit="sentence": one generation per sentence (the split of the generative testbed), each
    prompt holding that sentence alone, its cap from its own tokens, the global generator seeded
    from HMAC(key, attempt, sentence) under the variant's watermark; the answers joined by a
    space, or the original's line break. The same as paraphrasing each sentence as a passage."""
    import torch

    from trainspotter.rewriters.generative import split_sentences

    sentences = split_sentences(PASSAGE)
    assert sentences == ["The river town grew quickly after the railway arrived.",
                         "Its market became the largest in the region!", "Was it the biggest?",
                         "A small observatory on the hill recorded the comet."]
    rewriter = make_rewriter(f"hf:{tiny_sentences}", "sentence")
    whole = make_rewriter(f"hf:{tiny_sentences}")  # unit="passage", the library's default
    tok, model = rewriter.load()
    calls, real = [], model.generate

    def spy(**kw):
        calls.append(kw | {"rng": torch.random.get_rng_state().clone()})
        return real(**kw)

    monkeypatch.setattr(model, "generate", spy)
    key = b"k" * 32
    out = rewriter.redraw(PASSAGE, key, 2, "p0")
    assert len(calls) == 4
    for c, s in zip(calls, sentences):
        prompt = tok.decode(c["input_ids"][0])
        assert s in prompt and all(o not in prompt for o in sentences if o != s)
        assert c["max_new_tokens"] == int(1.5 * len(tok(s, add_special_tokens=False)["input_ids"])) + 16
        assert torch.equal(c["rng"], torch.Generator().manual_seed(sample_seed(key, s, 2)).get_state())
        assert c["watermarking_config"].hashing_key == watermark_key(key)
    answers = [whole.redraw(s, key, 2, "p0") for s in sentences]  # each sentence as a passage of its own
    assert out == f"{answers[0]} {answers[1]}\n{answers[2]} {answers[3]}"
    assert len(split_sentences(out)) == 4 and len(split_sentences(whole.redraw(PASSAGE, key, 2, "p0"))) == 1


def test_by_passage_is_one_generation_of_the_whole_passage(tiny_sentences, monkeypatch):
    """unit="passage" (the default) is what it was: one generation, seeded by the whole text."""
    from trainspotter.rewriters.generative import clean

    rewriter = make_rewriter(f"hf:{tiny_sentences}", "passage")
    raw = []
    real = rewriter._generate

    def generate(text, key, attempt):
        raw.append((text, attempt, real(text, key, attempt)))
        return raw[-1][2]

    monkeypatch.setattr(rewriter, "_generate", generate)
    out = rewriter.redraw(PASSAGE, b"k" * 32, 1, "p0")
    assert [(t, a) for t, a, _ in raw] == [(PASSAGE, 1)] and out == clean(raw[0][2], PASSAGE)
    assert rewriter.settings()["unit"] == "passage" and "sentences" not in rewriter.settings()
    assert rewriter.settings()["seed"] == "HMAC-SHA256(variant key, 'sample' || attempt || text)"


def test_a_sentence_answered_empty_keeps_its_words_and_all_empty_is_an_empty_rewrite(tiny_sentences, monkeypatch):
    """Per sentence, an empty answer keeps the sentence as written (as the testbed's table did);
    only when every sentence is answered empty is the attempt empty, so make_twins redraws it
    (every sentence sampled anew) and names the passage when all attempts are."""
    from trainspotter.rewriters.base import EmptyRewrite

    rewriter = make_rewriter(f"hf:{tiny_sentences}", "sentence")
    monkeypatch.setattr(rewriter, "_generate", lambda text, key, attempt: "" if "market" in text else f"<{attempt}>")
    assert rewriter.redraw(PASSAGE, b"k" * 32, 3, "p0") == "<3> Its market became the largest in the region!\n<3> <3>"
    seen = []
    monkeypatch.setattr(rewriter, "_generate", lambda text, key, attempt: seen.append(attempt) or " ")
    with pytest.raises(EmptyRewrite, match="passage 'p0'.*empty paraphrase"):
        rewriter.redraw(PASSAGE, b"k" * 32, 0, "p0")
    with pytest.raises(InputError, match="passage 'p9'.*empty rewrite on all 3 attempts"):
        make_twins([{"id": "p9", "text": PASSAGE}], 2, rewriter, retries=2)
    assert seen == [0] * 4 + [0] * 4 + [1] * 4 + [2] * 4  # every sentence of every attempt asked


def test_the_unit_is_recorded_and_a_bad_unit_is_one_error(tiny_sentences):
    r = make_rewriter(f"hf:{tiny_sentences}", "sentence").describe()
    assert r["unit"] == "sentence" and "sentence tokens" in r["max_new_tokens"] and r["seed"].endswith("sentence)")
    assert "keeps its words" in r["sentences"]
    assert make_rewriter("openai:m@http://127.0.0.1:9/v1", "sentence").settings()["unit"] == "sentence"
    with pytest.raises(InputError, match="unit 'word': expected passage or sentence"):
        make_rewriter(f"hf:{tiny_sentences}", "word")
