"""The parts of the API backend (backends/api/, backends/budget.py) on hand-written inputs:
the Budget's accounting, each mode's request and parsing, echo's alignment, the probe's
record and its decisions (read from error types and statuses, never from message text).
The whole backend against quirky servers is tests/api/test_api_quirks.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainspotter.backends.api.config import APIConfig
from trainspotter.backends.api.errors import (Incompatible, ListRefused, LogprobsIgnored, MalformedResponse,
                                              Unsupported)
from trainspotter.backends.api.modes import BY_NAME, CHAT, CHAT_INSTRUCTION, ECHO, LABEL, LOGPROBS, shifted
from trainspotter.backends.api.probe import Probe, ServerProfile
from trainspotter.backends.budget import Budget
from trainspotter.errors import APIRequestError, BudgetExhausted, InputError

# ---- Budget -------------------------------------------------------------------------------


def test_budget_charges_checks_and_totals():
    b = Budget(max_tokens=100, price_prompt_1k=2.0, price_completion_1k=10.0)
    b.charge(40, 10)
    b.cache_hits(3)
    u = b.usage()
    assert (u["requests"], u["total_tokens"], u["cache_hits"]) == (1, 50, 3)
    assert u["cost"] == pytest.approx((40 * 2 + 10 * 10) / 1000)
    b.check(40, 10)  # exactly 100 tokens: allowed
    with pytest.raises(BudgetExhausted, match=r"tokens to 101 > limit 100"):
        b.check(41, 10)


def test_budget_recounts_failures_it_learns_more_about():
    """A row of three 500s read as a refusal: the two counted as retries become rejected;
    a list refused twice and then answered: both were faults (retries)."""
    b = Budget()
    b.retry(), b.retry()
    b.refusal(3)  # the third 500 ends the row
    assert (b.usage()["retries"], b.usage()["rejected"]) == (0, 3)
    b.reject()
    b.faults_after_all(2)
    assert (b.usage()["retries"], b.usage()["rejected"]) == (2, 2)
    b.faults_after_all(5)  # never more than were counted
    u = b.usage()
    assert (u["retries"], u["rejected"], u["http_requests"]) == (4, 0, 4)


def test_usage_keys_are_those_reports_read():
    assert list(Budget().usage()) == ["requests", "prompt_tokens", "completion_tokens", "cost", "cache_hits",
                                      "retries", "rejected", "total_tokens", "http_requests"]


# ---- modes: requests (their params are the query cache's keys) and answers -----------------


def test_modes_list_every_mode_a_spec_may_ask_for(mini_testbed):
    from trainspotter.backends import parse_api_spec
    from trainspotter.backends.openai_compat import MODES

    assert MODES == ("auto", "logprobs-echo", "logprobs", "label", "chat") and set(BY_NAME) == set(MODES[1:])
    for mode in MODES:
        assert parse_api_spec(f"openai:m@http://h/v1?tokenizer=testbed:mini&mode={mode}").mode == mode
    with pytest.raises(InputError, match="mode must be one of auto, logprobs-echo, logprobs, label, chat"):
        parse_api_spec("openai:m@http://h/v1?tokenizer=testbed:mini&mode=echo")


def test_request_params_of_each_mode():
    base = {"model": "m", "max_tokens": 1, "temperature": 0}
    assert ECHO.params("m", 1, 5) == base | {"logprobs": 5, "echo": True}
    assert LOGPROBS.params("m", 1, 5) == ECHO.plain.params("m", 1, 5) == base | {"logprobs": 5, "echo": False}
    assert LABEL.params("m", 1, None) == base | {"logprobs": None, "echo": False}
    assert CHAT.params("m", 1, 2) == base | {"top_logprobs": 2, "instruction": CHAT_INSTRUCTION}
    profile = ServerProfile("label", k=5)
    assert (LABEL.k(profile), LOGPROBS.k(profile)) == (None, 5)
    assert (LOGPROBS.probe_ks(5), LOGPROBS.probe_ks(1), LABEL.probe_ks(5), CHAT.probe_ks(5)) == (
        (5, 1), (1,), (None,), (5, None))
    # a spec that leaves top_logprobs open: the largest the server accepts, most first
    assert (LOGPROBS.probe_ks(None), LABEL.probe_ks(None), CHAT.probe_ks(None)) == ((20, 5, 1), (None,), (20, 5, None))


def _choice(i, text="x", logprobs=None):
    return {"index": i, "text": text, "logprobs": logprobs}


def test_completions_parse_orders_choices_and_checks_logprobs():
    lp = {"tokens": ["a"], "token_logprobs": [-0.5], "top_logprobs": [{"a": -0.5}], "text_offset": [0]}
    body = {"choices": [_choice(1, "B", lp), _choice(0, "A", lp)]}
    got = LOGPROBS.parse(body, ["p", "q"], LOGPROBS.params("m", 1, 1), "here")
    assert [a["text"] for a in got] == ["A", "B"] and got[0]["logprobs"] is lp
    # not asked for: dropped even when the server sends them
    assert LABEL.parse(body, ["p", "q"], LABEL.params("m", 1, None), "here")[0] == {"text": "A", "logprobs": None}
    with pytest.raises(LogprobsIgnored, match="here, prompt 0: logprobs requested but not returned"):
        LOGPROBS.parse({"choices": [_choice(0)]}, ["p"], LOGPROBS.params("m", 1, 1), "here")
    bad = lp | {"text_offset": []}
    with pytest.raises(MalformedResponse, match="unequal length"):
        LOGPROBS.parse({"choices": [_choice(0, "A", bad)]}, ["p"], LOGPROBS.params("m", 1, 1), "here")
    for choices, problem in [([_choice(0), _choice(0)], "repeated index 0"), ([_choice(0)], "expected 2 choices")]:
        with pytest.raises(MalformedResponse, match=problem):
            LABEL.parse({"choices": choices}, ["p", "q"], LABEL.params("m", 1, None), "here")


def test_chat_answer_read_in_the_completions_shape():
    content = [{"token": "Hi", "logprob": -0.1, "top_logprobs": [{"token": "Hi", "logprob": -0.1},
                                                                 {"token": "Yo", "logprob": -2.5}]}]
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                         "logprobs": {"content": content}}]}
    (a,) = CHAT.parse(body, ["p"], CHAT.params("m", 1, 2), "here")
    assert a == {"text": "Hi", "logprobs": {"tokens": ["Hi"], "token_logprobs": [-0.1],
                                            "top_logprobs": [{"Hi": -0.1, "Yo": -2.5}], "text_offset": None}}
    assert CHAT.parse(body, ["p"], CHAT.params("m", 1, None), "here") == [{"text": "Hi", "logprobs": None}]
    with pytest.raises(LogprobsIgnored):
        CHAT.parse({"choices": [body["choices"][0] | {"logprobs": None}]}, ["p"], CHAT.params("m", 1, 2), "here")
    with pytest.raises(MalformedResponse, match="no message content"):
        CHAT.parse({"choices": [{"index": 0, "text": "Hi"}]}, ["p"], CHAT.params("m", 1, 2), "here")


def test_echo_alignment_one_to_one_and_by_end_offsets():
    pieces, ends = ["The", " cat", " sat"], [3, 7, 11]
    # same tokenizer: BOS echoed, then the local tokens, then the generated one
    assert ECHO.align(pieces, ends, ["<s>", "The", " cat", " sat", " on"], [0, 0, 3, 7, 11], 11) == [-1, 0, 1, 2, -1]
    # another tokenizer: each server token goes to the local token holding its last character
    assert ECHO.align(pieces, ends, ["The c", "at", " sat", " on"], [0, 5, 7, 11], 11) == [1, 1, 2, -1]
    assert shifted([1, 2, 3], -1) == [None, 1, 2] and shifted([1, 2, 3], 1) == [2, 3, None]


def test_describe_fields_of_each_mode():
    p = ServerProfile("logprobs-echo", lists=False, k=5, shift=-1, empty="<s>", echo_values=False)
    assert ECHO.describe(p) == {"list_prompts": False, "top_logprobs": 5, "echo_shift": -1, "echo_values": False,
                                "empty_prompt": "<s>"}
    assert LABEL.describe(p)["top_logprobs"] is None and LABEL.describe(p)["echo_shift"] is None
    assert CHAT.describe(ServerProfile("chat", lists=True, k=5, empty=None)) == {
        "list_prompts": False, "top_logprobs": 5, "echo_shift": None, "echo_values": None, "empty_prompt": ""}


# ---- the probe ----------------------------------------------------------------------------


def test_profile_record_round_trip_and_older_records():
    p = ServerProfile("logprobs-echo", lists=False, k=1, shift=-1, empty="<s>", echo_values=False)
    assert p.record() == {"mode": "logprobs-echo", "list": False, "k": 1, "shift": -1, "empty": "<s>",
                          "echo_values": False}
    assert ServerProfile.from_record(p.record()) == p
    assert ServerProfile.from_record({"mode": "label", "list": True, "k": None}) == ServerProfile("label")
    with pytest.raises(AttributeError):
        p.mode = "label"  # frozen: adopted whole, never edited in place


class FakeTransport:
    """Answers by a rule instead of HTTP; records what was asked."""

    def __init__(self, rule, **config):
        self.rule, self.calls = rule, []
        self.config = APIConfig(model="m", base_url="http://h/v1", **config)
        self.budget = Budget()

    def request(self, mode, prompts, params, first=0, retries=None, refuse_after=None):
        self.calls.append((mode.name, params.get("logprobs", params.get("top_logprobs")), len(prompts)))
        return self.rule(mode, prompts, params)

    def pause(self, attempt):
        pass


NO_SPECIAL_TOKENS = SimpleNamespace(bos_token=None, eos_token=None)


def probe(rule, want="auto"):
    stored = []
    t = FakeTransport(rule)
    profile = Probe(t, NO_SPECIAL_TOKENS, lambda *a: stored.append(a)).run(want)
    return profile, t.calls, stored


def test_probe_skips_by_error_type_not_by_message_text():
    """Completions refused with a 400 whose text reads like "log-probs ignored" and "echo
    ignored": every completions trial is still made (the text decides nothing); chat works."""
    def rule(mode, prompts, params):
        if mode.method == "completions":
            raise Unsupported("logprobs requested but not returned (echo ignored)", 400)
        return [{"text": "x", "logprobs": None}]

    profile, calls, stored = probe(rule)
    assert [c[:2] for c in calls] == [("logprobs-echo", 20), ("logprobs-echo", 5), ("logprobs-echo", 1),
                                      ("logprobs", 20), ("logprobs", 5), ("logprobs", 1), ("label", None), ("chat", 20)]
    assert profile == ServerProfile("chat", lists=False, k=20, empty="") and stored == []


def test_probe_keeps_the_largest_top_k_the_server_accepts():
    """OpenAI's completions take at most 5 log-probs: top-20 is refused (a 400), top-5 kept."""
    def rule(mode, prompts, params):
        if (params.get("logprobs") or 0) > 5:
            raise Unsupported("logprobs must be at most 5", 400)
        top = {"x": -0.1, "y": -2.0} if params.get("logprobs") else None
        lp = {"tokens": ["x"], "token_logprobs": [-0.1], "top_logprobs": [top], "text_offset": [0]} if top else None
        return [{"text": "x", "logprobs": lp} for _ in prompts]

    profile, calls, _ = probe(rule, want="logprobs")
    asked = [c[:2] for c in calls]
    assert asked[:2] == [("logprobs-echo", 20), ("logprobs-echo", 5)]  # (no echo in these answers)
    assert asked[2:4] == [("logprobs", 20), ("logprobs", 5)] and (profile.mode, profile.k) == ("logprobs", 5)


def test_probe_log_probs_ignored_rules_out_every_k_and_keeps_label():
    def rule(mode, prompts, params):
        if params["logprobs"] is not None:
            raise LogprobsIgnored("anything", None)
        return [{"text": "x", "logprobs": None} for _ in prompts]

    profile, calls, stored = probe(rule)
    # top-20 ignored: no other k, no logprobs trial; label: the list works, then the empty prompt
    assert calls == [("logprobs-echo", 20, 2), ("label", None, 2), ("label", None, 1)]
    assert profile == ServerProfile("label", lists=True, k=None, empty="")
    assert [(m.name, prompt) for m, _, prompt, _ in stored] == [("label", "")]


def test_probe_missing_endpoint_rules_out_its_modes_and_lists_none_works():
    def rule(mode, prompts, params):
        if mode.method == "completions":
            raise ListRefused("no route", 404)
        raise Unsupported("refused", 400)

    with pytest.raises(Incompatible) as err:
        probe(rule)
    # echo top-20 (404: no other completions trial), chat top-20, top-5, without log-probs
    assert len(err.value.args[0].split("; ")) == 4
    with pytest.raises(Incompatible, match="mode=label: label: no route"):
        probe(rule, "label")


@pytest.mark.parametrize("fails,lists", [(3, False), (2, True)])
def test_probe_tells_lists_refused_from_faults(fails, lists):
    """A list fails (HTTP 500 from the server) while one prompt works: it is sent again,
    LIST_TRIES = 3 times in all; three failures are a refusal (rejected; later requests go
    one by one), an answer before that makes the failures faults (recounted as retries)."""
    t = FakeTransport(None)
    failed = []

    def rule(mode, prompts, params):
        if len(prompts) > 1 and len(failed) < fails:
            failed.append(1)
            t.budget.reject()  # as Transport counts a failure given up on (retries=0)
            raise APIRequestError("HTTP 500")
        return [{"text": "x", "logprobs": None} for _ in prompts]

    t.rule = rule
    profile = Probe(t, NO_SPECIAL_TOKENS, lambda *a: None).run("label")
    assert profile == ServerProfile("label", lists=lists, k=None, empty="")
    assert [n for _, _, n in t.calls] == [2, 1, 2, 2, 1]  # list, one prompt, two more lists, ""
    u = t.budget.usage()
    assert (u["rejected"], u["retries"]) == ((3, 0) if not lists else (0, 2))
