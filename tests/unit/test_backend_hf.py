import numpy as np
import pytest
import torch

from trainspotter.backends import load_backend, parse_local_spec, resolve_spec
from trainspotter.backends.hf import HFBackend
from trainspotter.errors import InputError

TEXTS = ["The river flows north through the valley.",
         "Paris is the capital of France and its largest city, with many museums.",
         "a"]


@pytest.fixture(scope="module")
def backend(mini_testbed):
    return HFBackend(mini_testbed / "target", batch_size=2)


def _reference(backend, text):
    """Definition, one unpadded text at a time: log_softmax of the logits at i-1."""
    ids = torch.tensor([backend.encode(text)])
    with torch.no_grad():
        logits = backend.model(input_ids=ids.to(backend.device)).logits[0, :-1].cpu()
    logp = torch.log_softmax(logits.double(), -1)
    actual = logp.gather(-1, ids[0, 1:, None])[:, 0]
    p = logp.exp()
    mu = (p * logp).sum(-1)
    return actual.numpy(), logp.argmax(-1).numpy(), mu.numpy(), ((p * (logp - mu[:, None]) ** 2).sum(-1)).numpy()


def test_batched_scores_equal_unbatched_definition(backend):
    scores = backend.score(TEXTS)  # batch of 2 + 1, padded, sorted by length
    for text, s in zip(TEXTS, scores):
        lp, am, mu, var = _reference(backend, text)
        assert len(s.token_ids) == len(backend.encode(text)) - 1
        np.testing.assert_allclose(s.logprobs, lp, atol=2e-5)
        np.testing.assert_array_equal(s.argmax, am)
        np.testing.assert_allclose(s.mu, mu, atol=2e-5)
        np.testing.assert_allclose(s.sigma2, var, atol=2e-4)
        assert np.all(s.logprobs <= 0)


def test_bos_makes_first_token_scored(backend):
    s = backend.score(["a"])[0]
    assert s.token_ids.tolist() == backend.tokenizer("a", add_special_tokens=False)["input_ids"]


def test_spec_resolution_and_errors(mini_testbed):
    assert resolve_spec("testbed:mini") == mini_testbed / "target"
    assert resolve_spec("testbed:mini/reference") == mini_testbed / "reference"
    assert load_backend("testbed:mini") is load_backend("testbed:mini")  # loaded once per process
    for bad, msg in [("mini", "expected hf:PATH"), ("gpt:x", "unknown backend"),
                     ("testbed:nope", "not built"), ("hf:/no/such/dir", "does not exist"),
                     ("testbed:mini/other", "role must be")]:
        with pytest.raises(InputError, match=msg):
            resolve_spec(bad)


@pytest.fixture(scope="module")
def tiny_model(mini_testbed, tmp_path_factory):
    """A Llama built from a config (random weights, 3.7 MB of safetensors: more than the
    first and last MiB) with the mini testbed's tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(mini_testbed / "target")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256,
                                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                                         max_position_embeddings=128, tie_word_embeddings=False,
                                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    path = tmp_path_factory.mktemp("tiny") / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    assert (path / "model.safetensors").stat().st_size > 2 * 2**20
    return path


def test_fingerprint_changes_with_weights(tiny_model, tmp_path):
    import shutil

    from transformers import AutoModelForCausalLM

    from trainspotter.backends import spec_fingerprint

    base = spec_fingerprint(f"hf:{tiny_model}")
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model, copy)
    assert spec_fingerprint(f"hf:{copy}") == base  # identical weights, another folder
    model = AutoModelForCausalLM.from_pretrained(copy)
    with torch.no_grad():  # one weight of a middle layer, as a partial fine-tune would change
        model.model.layers[2].mlp.up_proj.weight[3, 5] += 1e-3
    changed = tmp_path / "changed"
    model.save_pretrained(changed)
    assert (changed / "model.safetensors").stat().st_size == (tiny_model / "model.safetensors").stat().st_size
    assert spec_fingerprint(f"hf:{changed}") != base


def test_local_spec_options_parse(mini_testbed):
    assert parse_local_spec("hf:/m?device=cpu&dtype=bfloat16&batch_size=32") == (
        "hf:/m", {"device": "cpu", "dtype": "bfloat16", "batch_size": 32})
    assert parse_local_spec("testbed:mini/reference") == ("testbed:mini/reference", {})
    assert resolve_spec("testbed:mini/reference?dtype=float16") == mini_testbed / "reference"


@pytest.mark.parametrize("query,problem", [
    ("colour=red", "unknown option 'colour'"), ("dtype=int8", "dtype='int8' is not one of"),
    ("batch_size=many", "batch_size='many' is not an int"), ("batch_size=0", "batch_size=0 must be"),
    ("device=tpu", "device='tpu' is not cpu, cuda"),
])
def test_bad_local_spec_option_is_one_line_naming_spec_and_key(mini_testbed, query, problem):
    spec = f"testbed:mini?{query}"
    with pytest.raises(InputError) as e:
        resolve_spec(spec)
    assert str(e.value).startswith(f"model spec {spec!r}: ") and problem in str(e.value)
    assert "\n" not in str(e.value)


def test_dtype_and_batch_size_are_applied(tiny_model):
    b = load_backend(f"hf:{tiny_model}?dtype=bfloat16&batch_size=3&device=cpu")
    assert {p.dtype for p in b.model.parameters()} == {torch.bfloat16}
    assert b.batch_size == 3 and b.device == "cpu" and b.dtype == "bfloat16"
    plain = load_backend(f"hf:{tiny_model}")
    assert {p.dtype for p in plain.model.parameters()} == {torch.float32}
    assert plain.device == ("cuda" if torch.cuda.is_available() else "cpu")
    # bfloat16 rounds the weights: other log-probs, hence another fingerprint and cache key
    lb, lp = b.score(TEXTS[:1])[0].logprobs, plain.score(TEXTS[:1])[0].logprobs
    assert not np.allclose(lb, lp, atol=1e-6) and np.allclose(lb, lp, atol=0.5)
    assert b.fingerprint != plain.fingerprint


def test_explicit_cpu_float32_scores_like_the_plain_spec(tiny_model):
    explicit = load_backend(f"hf:{tiny_model}?device=cpu&dtype=float32")
    plain = HFBackend(tiny_model, device="cpu")
    assert explicit is not plain and explicit.fingerprint == plain.fingerprint
    for a, b in zip(explicit.score(TEXTS), plain.score(TEXTS)):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_array_equal(a.logprobs, b.logprobs)
        np.testing.assert_array_equal(a.argmax, b.argmax)


@pytest.mark.slow
def test_smollm2_gguf_loads_offline_and_prefers_natural_text():
    from trainspotter.assets import smollm2_gguf

    backend = HFBackend(smollm2_gguf(), batch_size=2)
    natural = "The cat sat on the mat and looked out of the window at the birds."
    shuffled = "window the mat birds of on the looked sat at cat out the and The."
    a, b = backend.score([natural, shuffled])
    assert np.all(np.isfinite(a.logprobs)) and a.argmax.max() < backend.model.config.vocab_size
    assert a.logprobs.mean() > b.logprobs.mean() + 1.0


def test_generate_is_greedy_argmax_continuation(backend):
    """Generated token k equals the argmax of a forward pass over prefix + tokens < k;
    per-prefix lengths cut each row to its own length (one call for all of them)."""
    prefixes = ["The river flows", "Paris is the capital of France and", "A"]
    lengths = [5, 3, 0]
    gens = backend.generate(prefixes, lengths)
    assert [len(g) for g in gens] == lengths
    assert gens[:2] == [g[:k] for g, k in zip(backend.generate(prefixes[:2], 5), lengths)]
    with pytest.raises(ValueError, match="2 lengths for 3 prefixes"):
        backend.generate(prefixes, [1, 2])
    for prefix, gen in zip(prefixes[:2], backend.generate(prefixes[:2], max_new_tokens=5)):
        assert len(gen) == 5
        ids = backend.encode(prefix)
        for tok in gen:
            with torch.no_grad():
                nxt = int(backend.model(input_ids=torch.tensor([ids], device=backend.device)).logits[0, -1].argmax())
            assert tok == nxt
            ids.append(tok)


def test_tddbench_token_arrays_equal_their_definitions(backend):
    """Max log p, top-10 log p, Song & Mittal's modified entropy and the projection, from the
    definitions on one unpadded text at a time (fp64)."""
    from trainspotter.backends.hf import TOP_K, projection_matrix

    assert backend.score(TEXTS[:1])[0].mentr is None  # computed only when asked for
    for text, s in zip(TEXTS, backend.score(TEXTS, distribution=True)):
        ids = torch.tensor([backend.encode(text)])
        with torch.no_grad():
            logp = torch.log_softmax(backend.model(input_ids=ids).logits[0, :-1].double(), -1)
        p, y = logp.exp(), ids[0, 1:]
        top = torch.sort(logp, -1, descending=True).values[:, :TOP_K]
        mentr = []
        for t in range(len(y)):  # Mentr = −(1 − p_y) log p_y − Σ_{z≠y} p_z log(1 − p_z)
            others = torch.cat([p[t, :y[t]], p[t, y[t] + 1:]])
            mentr.append(float(-(1 - p[t, y[t]]) * logp[t, y[t]] - (others * torch.log1p(-others)).sum()))
        np.testing.assert_allclose(s.max_logprob, top[:, 0].numpy(), atol=2e-5)
        np.testing.assert_allclose(s.top_logprobs, top.numpy(), atol=2e-5)
        np.testing.assert_allclose(s.mentr, mentr, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(s.projection, (p @ projection_matrix(p.shape[1], "cpu")).numpy(), atol=1e-6)
        assert s.top_logprobs.shape == (len(y), TOP_K) and np.all(np.diff(s.top_logprobs, axis=1) <= 0)


def test_modified_entropy_on_a_hand_computed_distribution():
    """p = (0.5, 0.25, 0.25), y = 0: Mentr = −0.5 log 0.5 − 2 · 0.25 log 0.75 (Song & Mittal Eq. 5);
    y = 1: −0.75 log 0.25 − 0.5 log 0.5 − 0.25 log 0.75; max log p = log 0.5."""
    from trainspotter.backends.hf import token_stats

    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25]]))
    out = token_stats(logits, torch.tensor([0, 1]), distribution=True)
    want = [-0.5 * np.log(0.5) - 0.5 * np.log(0.75), -0.75 * np.log(0.25) - 0.5 * np.log(0.5) - 0.25 * np.log(0.75)]
    np.testing.assert_allclose(out["mentr"], want, rtol=1e-6)
    np.testing.assert_allclose(out["max_logprob"], np.log([0.5, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(out["mu"], [0.5 * np.log(0.5) + 0.5 * np.log(0.25)] * 2, rtol=1e-6)
