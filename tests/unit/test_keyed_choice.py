"""Black-box forced choice on a keyed lexical release (trainspotter.keyed.queries.choose and the
plan it asks): the forms' tokens and where they part by hand, the draws' frequencies against the
model's restricted next-token probabilities computed here from its logits (a chi-square test at a
false-failure rate of 0.001, fixed seeds), calibration by a reference, the tokens counted, and the
units asked in the order the release shows them most."""

import numpy as np
import pytest
from scipy.stats import chisquare
from tiny_lm import tiny_llama

from trainspotter.keyed.queries import branchings, choice_plan, choice_shares, choose, form_tokens
from trainspotter.keyed.units import LexicalForms, Seen
from trainspotter.rewriters.lexical import KeyedLexicalRewriter

CONTEXT = "The river town grew quickly after the railway arrived in the "
DRAWS = 4000


class Words:
    """A tokenizer by table: each text's token ids as given."""

    def __init__(self, table):
        self.table = table

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(self.table[text])}


def test_form_tokens_take_the_space_and_refuse_forms_that_begin_others():
    tok = Words({" big": [5], " large": [7, 8], " larger": [7, 8, 9], "big": [6], "large": [10]})
    assert form_tokens(tok, "a ", ("big", "large")) == [(5,), (7, 8)]
    assert form_tokens(tok, "a (", ("big", "large")) == [(6,), (10,)]  # no space before the form
    assert form_tokens(tok, "a ", ("large", "larger")) is None  # no restricted token tells them apart


def test_branchings_by_hand():
    assert branchings([(1,), (2,)]) == 1
    assert branchings([(1, 2), (1, 3)]) == 1  # both begin with 1: only the second token is asked
    assert branchings([(1, 2), (1, 3), (4,)]) == 2
    assert branchings([(1, 2, 5), (4,)]) == 1  # after 1, one form is left: its tokens follow


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The tiny random Llama and a reference: the same architecture, other random weights; their
    output layers scaled so that each prefers some tokens clearly (random weights alone give
    nearly uniform next tokens, which would not tell a right draw from a uniform one)."""
    import torch
    from transformers import LlamaForCausalLM

    from trainspotter.backends.hf import HFBackend

    folder = tiny_llama(tmp_path_factory.mktemp("choice") / "model", chat=False)
    target = HFBackend(folder, device="cpu")
    torch.manual_seed(1)
    other = LlamaForCausalLM(target.model.config)
    ref_folder = folder.parent / "reference"
    other.save_pretrained(ref_folder)
    target.tokenizer.save_pretrained(ref_folder)
    reference = HFBackend(ref_folder, device="cpu")
    for backend in (target, reference):
        backend.model.lm_head.weight.data *= 8
    return target, reference


def _logp(backend, extra=()):
    import torch

    tok = backend.tokenizer
    ids = [tok.bos_token_id] + tok(CONTEXT.rstrip(), add_special_tokens=False)["input_ids"] + list(extra)
    with torch.inference_mode():
        return torch.log_softmax(backend.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1).numpy()


def _restricted(logp, tokens):
    q = np.exp(logp[tokens] - logp[tokens].max()).astype(float)
    return q / q.sum()


def _fits(counts, want):
    """Chi-square of draws against probabilities (renormalised in float64)."""
    return chisquare(counts, counts.sum() * want / want.sum()).pvalue


def _counts(draws, m):
    return np.bincount(draws, minlength=m)


def test_draws_follow_the_models_next_tokens_restricted_to_the_forms(models):
    target, _ = models
    seqs = [(11,), (40,), (97,)]
    [(draws, spent)] = choose(target, [(CONTEXT, seqs)], DRAWS, seed=0)
    want = _restricted(_logp(target), [11, 40, 97])
    assert spent == DRAWS and len(draws) == DRAWS  # one generated token a draw
    assert _fits(_counts(draws, 3), want) > 0.001
    assert _fits(_counts(draws, 3), np.ones(3)) < 0.001  # and the model's preference is not a uniform draw


def test_where_forms_share_their_first_token_the_second_is_asked(models):
    target, _ = models
    seqs = [(11, 40), (11, 97), (60,)]
    [(draws, spent)] = choose(target, [(CONTEXT, seqs)], DRAWS, seed=1)
    root, after = _restricted(_logp(target), [11, 60]), _restricted(_logp(target, [11]), [40, 97])
    want = np.array([root[0] * after[0], root[0] * after[1], root[1]])
    counts = _counts(draws, 3)
    assert _fits(counts, want) > 0.001
    assert spent == DRAWS + counts[0] + counts[1]  # a second token for every draw that began with 11
    # the exact probabilities the draws follow, computed without drawing
    [shares] = choice_shares(target, [(CONTEXT, seqs)])
    assert shares == pytest.approx(want, rel=1e-5) and shares.sum() == pytest.approx(1.0)


def test_a_reference_divides_each_tokens_probability_out(models):
    target, reference = models
    seqs = [(11,), (40,), (97,)]
    lp = _logp(target) - _logp(reference)
    [(draws, _)] = choose(target, [(CONTEXT, seqs)], DRAWS, seed=2, reference=reference)
    assert _fits(_counts(draws, 3), _restricted(lp, [11, 40, 97])) > 0.001
    assert _fits(_counts(draws, 3), _restricted(_logp(target), [11, 40, 97])) < 0.001  # not the model's own
    # the model against itself: every form alike, whatever the model prefers
    [(draws, _)] = choose(target, [(CONTEXT, seqs)], DRAWS, seed=3, reference=target)
    assert chisquare(_counts(draws, 3)).pvalue > 0.001
    [shares] = choice_shares(target, [(CONTEXT, seqs)], reference=reference)
    assert shares == pytest.approx(_restricted(lp, [11, 40, 97]), rel=1e-5)
    assert choice_shares(target, [(CONTEXT, seqs)], reference=target)[0] == pytest.approx([1 / 3] * 3)


def test_units_are_asked_the_most_shown_first_each_once():
    texts = ["The council often met in the large hall; the large hall was old and the hall was cold.",
             "A large storm hit the town."]
    forms = LexicalForms(KeyedLexicalRewriter(), texts)
    assert forms.count["hall"] == 3 and forms.count["large"] == 3 and forms.count["storm"] == 1
    seen = Seen({"often"})
    neutral = ["The old hall and a storm.", "A large town hall, often cold.", "The hall; a hall again."]
    asked = forms.asked_first(neutral, seen)
    units = [u for u, _ in asked]
    assert units[:2] == ["hall", "large"] and "often" not in units and len(set(units)) == len(units)
    assert dict(asked)["hall"] == [(0, "The old ")]  # its first context
    assert seen.units == {"often"}  # asking marks a unit, planning does not
    # with more contexts: its first one in each of the first texts that show it, never two from one text
    assert dict(forms.asked_first(neutral, seen, 2))["hall"] == [(0, "The old "), (1, "A large town ")]
    assert dict(forms.asked_first(neutral, seen, 5))["hall"] == [(0, "The old "), (1, "A large town "), (2, "The ")]
    assert dict(forms.asked_first(neutral, seen, 5))["storm"] == [(0, "The old hall and a ")]
    tok = Words({" " + f: [hash(f) % 1000 + 1] for u in units for f in forms.forms[u]})
    plan = choice_plan(forms, tok, neutral, seen, 8)
    assert [u for u, _, _ in plan] == units and all(cost == 8 for *_, cost in plan)
    # each context's draws cost: 3 contexts of hall, one token per draw in each
    assert dict((u, cost) for u, _, cost in choice_plan(forms, tok, neutral, seen, 8, contexts=3))["hall"] == 24


def test_a_choice_record_is_the_share_of_draws_on_each_form():
    forms = LexicalForms(KeyedLexicalRewriter(), ["the large hall"])
    m = len(forms.forms["large"])
    rec = forms.choice_record("large", [0, 1, 1, 0, 0])
    assert rec["unit"] == "large" and len(rec["h"]) == m
    assert rec["h"][:2] == [0.6, 0.4] and sum(rec["h"]) == pytest.approx(1.0)
