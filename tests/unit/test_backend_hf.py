import numpy as np
import pytest
import torch

from trainspotter.backends import load_backend, resolve_spec
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
        logp = torch.log_softmax(backend.model(input_ids=ids).logits[0, :-1].double(), -1)
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


def test_fingerprint_changes_with_weights(mini_testbed):
    from trainspotter.backends import spec_fingerprint

    assert spec_fingerprint("testbed:mini") != spec_fingerprint("testbed:mini/reference")
    assert spec_fingerprint("testbed:mini") == spec_fingerprint("testbed:mini")


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
    """Generated token k equals the argmax of a forward pass over prefix + tokens < k."""
    prefixes = ["The river flows", "Paris is the capital of France and"]
    for prefix, gen in zip(prefixes, backend.generate(prefixes, max_new_tokens=5)):
        assert len(gen) == 5
        ids = backend.encode(prefix)
        for tok in gen:
            with torch.no_grad():
                nxt = int(backend.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            assert tok == nxt
            ids.append(tok)
