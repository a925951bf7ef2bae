"""A recurring matched audit (trainspotter.loop.matched_ledger) on hand-built passages: a continued run
matches only the passages its ledger never bet on, its guards see the earlier matched pairs with
its own, and a run with too few new matches queries nothing and leaves the stored wealth as it was.
Features are fixed functions of the passage id: nothing here loads a model."""

import json
import random
import zlib

import numpy as np

from trainspotter.auditing.config import AuditConfig
from trainspotter.loop.ledger import load_ledger, unused_passages
from trainspotter.loop.matched_ledger import continue_matching, pairs_to_reach
from trainspotter.loop.run import audit

WORDS = "the a of river town born album species village known film team city lake music war".split()


def _rows(prefix: str, n: int, seed: int, start: int = 0) -> list[dict]:
    rng = random.Random(seed)  # one vocabulary for both sides: exchangeable text, most of it matches
    return [{"id": f"{prefix}{i}", "text": " ".join(rng.choice(WORDS) for _ in range(30))} for i in range(start, n)]


def _config(models=None, **kw) -> AuditConfig:
    """A matched recurring audit; ``models``: a folder where its (never loaded) models' folders lie,
    for the ledger's fingerprint of the target."""
    where = {m: models / m for m in ("target", "reference")} if models else {m: f"/never-loaded-{m}" for m in "ab"}
    for folder in where.values() if models else ():
        folder.mkdir(exist_ok=True)
        (folder / "model.safetensors").write_bytes(b"never loaded")
    model, reference = (f"hf:{v}" for v in where.values())
    return AuditConfig(model=model, reference=reference, shift_check="match", ledger=True, **kw)


def test_a_continued_run_matches_only_passages_never_bet_on():
    suspect, heldout = _rows("s", 30, 1), _rows("h", 30, 2)
    # earlier runs bet on three matched pairs (read side by side) and on nothing else
    ledger = {"used": {"suspect": ["s4", "s0", "s9"], "heldout": ["h7", "h2", "h5"]}}
    config = _config(suspect="unused", heldout="unused")
    unused = unused_passages(config, suspect, heldout, ledger)
    (new_s, new_h), match, available = continue_matching(config, unused, (suspect, heldout), ledger, 3)
    used = set(ledger["used"]["suspect"]) | set(ledger["used"]["heldout"])
    assert match.suspect_total == 27 and match.heldout_total == 27  # the propensity saw the unused texts only
    assert match.matched >= 10 and len(new_s) == len(new_h) == match.matched
    assert not {p["id"] for p in new_s + new_h} & used  # no passage bet on before is matched again
    # the guards' pairs: the earlier pairs as bet on, then this run's, aligned
    assert [p["id"] for p in available[0]] == ["s4", "s0", "s9"] + [p["id"] for p in new_s]
    assert [p["id"] for p in available[1]] == ["h7", "h2", "h5"] + [p["id"] for p in new_h]
    assert match.pairs_before == 3 and "not bet on before" in match.describe()
    # an earlier pair whose passages this run was not given is not among them
    (_, _), _, fewer = continue_matching(config, unused, (suspect[1:], heldout), ledger, 3)
    assert [p["id"] for p in fewer[0]][:2] == ["s4", "s9"]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _extract(calls: list):
    def extract_fn(passages, batch_no):  # members ("s*") look member-like in the gray-box lean direction
        calls.append(len(passages))
        return [{"gray_ref_diff": float(np.random.default_rng(zlib.crc32(p["id"].encode())).normal()
                                        - (1.0 if p["id"].startswith("s") else 0.0))} for p in passages]
    return extract_fn


def test_too_few_new_matches_query_nothing_and_keep_the_stored_wealth(tmp_path):
    calls = []
    s1, h1 = _rows("s", 40, 3), _rows("h", 40, 4)
    first = audit(_config(tmp_path, name="few-new-matches", suspect=_write(tmp_path / "s1.jsonl", s1),
                          heldout=_write(tmp_path / "h1.jsonl", h1), max_pairs=3),
                  extract_fn=_extract(calls), placebo_fn=_extract([]))
    assert first.pairs_used == 3 and calls and not first.model_reject
    stored = load_ledger("few-new-matches")
    used = stored["used"]
    assert pairs_to_reach(first.wealth, _config(suspect="x", heldout="y").test) > 2  # two new pairs cannot reach 1/α
    # run 2 is given the passages bet on and two new ones a side: two matches at most
    again = [p for p in s1 if p["id"] in used["suspect"]] + _rows("s", 42, 5, start=40)
    held = [p for p in h1 if p["id"] in used["heldout"]] + _rows("h", 42, 6, start=40)
    calls.clear()
    second = audit(_config(tmp_path, name="few-new-matches", suspect=_write(tmp_path / "s2.jsonl", again),
                           heldout=_write(tmp_path / "h2.jsonl", held)), extract_fn=_extract(calls))
    after = load_ledger("few-new-matches")
    assert calls == [] and second.pairs_queried == 0 and second.pairs_this_run == 0  # nothing queried
    assert second.verdict == "inconclusive" and second.guard == "overlap"
    assert second.wealth == second.wealth_start == first.wealth  # the stored wealth as it was
    assert after["state"] == stored["state"] and after["used"] == used
    assert after["runs"][-1]["pairs_added"] == 0 and after["runs"][-1]["match"]["suspect_total"] == 2
    assert "this run queried nothing and left the ledger's e-value as it was" in second.explanation
    assert "of 2 suspect passages not bet on before" in second.explanation
