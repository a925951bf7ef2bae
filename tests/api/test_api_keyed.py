"""A keyed audit's forced choice over an OpenAI-compatible API (``logit_bias``, ``n``, ``seed``;
``OpenAIBackend.draw``): the draws follow the served model's next tokens restricted to the forms'
tokens, as the local weights give them (a chi-square test at a false-failure rate of 0.001), a
local reference divides its own probabilities out, and `trainspotter keyed audit --probe choose`
runs through the API from the command line at 80 columns, its record verifying against the
release."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from beacons import STAND_IN, STAND_IN_FILE
from cli_process import run_cli
from scipy.stats import chisquare

from trainspotter.assets import wikipedia_leads

CONTEXT = "The history of the city begins with a small settlement on the river, and its"
DRAWS = 1500


@pytest.fixture(scope="module")
def served(mini_testbed, start_server):
    with start_server() as (app, url):
        yield app, url


def _restricted(logp, tokens):
    q = np.exp(logp[tokens] - logp[tokens].max()).astype(float)
    return q / q.sum()


def test_api_draws_follow_the_served_models_restricted_next_tokens(served):
    import torch

    from trainspotter.backends import load_backend
    from trainspotter.keyed.queries import choose

    app, url = served
    api, local = load_backend(f"openai:mini@{url}?tokenizer=testbed:mini"), load_backend("testbed:mini")
    tok = local.tokenizer
    ids = [tok.bos_token_id] + tok(CONTEXT, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logp = torch.log_softmax(local.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1).numpy()
    tokens = [int(t) for t in np.argsort(logp)[::-1][:3]]  # the model's three likeliest: a choice it has views on
    before = app.state.stats["prompts"]
    [(draws, spent)] = choose(api, [(CONTEXT + " ", [(t,) for t in tokens])], DRAWS, seed=0)
    counts = np.bincount(draws, minlength=3)
    want = _restricted(logp, tokens)
    assert spent == DRAWS and counts.sum() == DRAWS and app.state.stats["prompts"] == before + 1  # one request
    assert chisquare(counts, DRAWS * want).pvalue > 0.001
    assert chisquare(counts).pvalue < 0.001  # and not a uniform draw
    # relative to the same weights held locally: the bias divides the model's preference out
    [(draws, _)] = choose(api, [(CONTEXT + " ", [(t,) for t in tokens])], DRAWS, seed=1, reference=local)
    assert chisquare(np.bincount(draws, minlength=3)).pvalue > 0.001


def test_keyed_audit_forced_choice_through_the_api_from_the_command_line(served, tmp_path):
    app, url = served
    leads = wikipedia_leads()
    for name, rows in (("data.jsonl", leads[200:230]), ("neutral.jsonl", leads[6000:6040])):
        (tmp_path / name).write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows))
    env = os.environ | {"COLUMNS": "80"}
    rel = tmp_path / "rel"
    for args in (["keyed", "make", tmp_path / "data.jsonl", "--out", rel, "--beacon-round", STAND_IN.round],
                 ["keyed", "release", rel, "--beacon", STAND_IN_FILE]):
        out = run_cli([str(a) for a in args], env=env, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
    record = tmp_path / "rec.json"
    before = app.state.stats["prompts"]
    out = run_cli(["keyed", "audit", str(rel), "--model", f"openai:mini@{url}?tokenizer=testbed:mini",
                   "--reference", "testbed:mini", "--prompts", str(tmp_path / "neutral.jsonl"), "--probe", "choose",
                   "--samples", "4", "--max-tokens", "200", "--random-keys", "50", "--record", str(record)],
                  env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    m = re.fullmatch(r"verdict: (no evidence|trained on) \(e-value [\d.]+ after (\d+) units, (\d+) generated "
                     r"tokens\)", lines[0].rstrip())
    assert m and 0 < int(m.group(3)) <= 200 and all(len(line) <= 80 for line in lines[:-1]), out.stdout
    asked = app.state.stats["prompts"] - before
    assert asked >= int(m.group(2))  # a request per unit at least (one per point where its forms part)
    out = run_cli(["verify", str(record), "--release", str(rel)], env=env, timeout=600)
    assert out.returncode == 0 and out.stdout.splitlines()[-1].startswith("verified: record "), out.stdout
