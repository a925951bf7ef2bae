"""Check a sealed audit record (``trainspotter.record``) offline, without the model: every
text against its sha256, the pair order against the seed, every feature computed again from
the model's answers the record holds (``trainspotter.record.recompute``), the blind check replayed
from the texts, the model's e-process replayed pair by pair from the recorded features, the
result and verdict against the replay, the hash chain, the section digests, the signature.

Replayed floats match bit-for-bit on the platform that made the record; across machines
(another BLAS, another CPU) they are accepted within ``TOLERANCE`` (|a − b| ≤ 1e-9 ·
max(1, |a|, |b|)), and the checks say which they were. ``requery`` loads the model and
compares the features of a few passages again (``trainspotter.record.requery``).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.record.checks import Check, Verification
from trainspotter.record.format import (GENESIS, RESULT_FIELDS, SECTIONS, STEP_FIELDS, batch_digest, file_sha256,
                                        load_record, record_digest, sha256, state_sha256, text_sha256)
from trainspotter.record.keys import public_hex
from trainspotter.record.recompute import SIDES, TOLERANCE, apart, check_recomputed, close

__all__ = ["Check", "TOLERANCE", "Verification", "load_record", "verify_records"]

# The sections the replays read: one changed after sealing makes them disagree (a symptom, not the cause).
INPUT_SECTIONS = ("header", "config", "inputs", "model", "reference", "code", "start")


def _pairs(record: dict) -> list[dict]:
    return [p for b in record["batches"] for p in b["pairs"]]


def _check_passages(record: dict) -> Check:
    for side in SIDES:
        for p in record["passages"][side]:
            if text_sha256(p["text"]) != p["sha256"]:
                return Check("passages", False, f"passage {side} {p['id']!r}: its text does not match its sha256")
    n = [len(record["passages"][s]) for s in SIDES]
    names = ("public", "private") if record.get("inputs", {}).get("twins") else ("suspect", "held-out")
    return Check("passages", True, f"the texts of {sum(n)} passages ({n[0]} {names[0]}, {n[1]} {names[1]}) match "
                                   f"their sha256")


def _check_twins(record: dict):
    """A twins audit's draw, re-derived from the record alone (``twins.draw.prove``: the manifest's
    commitment and draw it holds, its public and private texts and their salts) and compared with
    what the audit found; where the folder is here, its manifest must be the one audited. Returns
    the recorded ``DrawProof`` (None: a record from before the draw was checked) and the check."""
    from trainspotter.twins.draw import DrawProof, prove
    from trainspotter.twins.rounds import passage_of

    twins, manifest = record["inputs"]["twins"], Path(record["inputs"]["twins"]["path"]) / "manifest.json"
    if twins["manifest_sha256"] and manifest.is_file() and file_sha256(manifest) != twins["manifest_sha256"]:
        return None, Check("twins", False, f"{manifest}: not the manifest the audit read (sha256 differs)")
    if twins.get("draw") is None:  # an audit from before the draw was checked (or of passages without a folder)
        return None, Check("twins", twins["commitment"] is not None, "no commitment recorded: nothing shows the "
                           "public versions were drawn before the audit" if not twins["commitment"] else
                           f"commitment {twins['commitment'][:16]}… recorded before draws were checked: it shows the "
                           f"public versions were fixed at twins make, not that nobody chose them")
    recorded = DrawProof(**twins["draw"])
    proof, private = twins.get("proof"), {}
    for p in record["passages"]["heldout"] if proof and proof["salts"] else ():
        i, j = passage_of(p["id"])
        private.setdefault(i, {})[j] = (p["text"], bytes.fromhex(proof["salts"].get(p["id"], "")))
    public = {p["id"]: p["text"] for p in record["passages"]["suspect"]}
    again = DrawProof(status="unproven", reason="no folder bound the draw") if proof is None else prove(
        proof["manifest"], public, private or None, recorded.pinned)
    if (again.status, again.commitment, again.round) != (recorded.status, recorded.commitment, recorded.round):
        return recorded, Check("twins", False, f"draw: recorded {recorded.status!r}, re-derived from the record "
                                               f"{again.status!r} ({again.reason})")
    said = {"shown": f"the draw re-derives from the record ({again.reason}); it rests on: {again.rests_on}",
            "unproven": f"the draw was not shown random, as recorded: {again.reason}",
            "failed": f"the draw fails to re-derive, as recorded: {again.reason}"}[again.status]
    return recorded, Check("twins", True, said)


def _check_pair_order(record: dict, config) -> Check:
    """The pairs bet on are those the seed draws from the passages not used before, in the
    rounds it draws (a twins audit of every private variant: a passage's sub-pairs share a t)."""
    from trainspotter.twins.rounds import audit_rounds, unused

    used = {s: set(record["start"]["used"][s]) for s in SIDES}
    sides = (unused(*(record["passages"][s] for s in SIDES), used["suspect"]) if config.every_private
             else [[p for p in record["passages"][s] if p["id"] not in used[s]] for s in SIDES])
    rounds = audit_rounds(config, *sides)
    drawn = [pair for r in rounds for pair in r]
    t = [record["start"]["t0"] + n + 1 for n, r in enumerate(rounds) for _ in r]
    pairs = _pairs(record)
    for i, pair in enumerate(pairs):
        got = tuple(pair[s]["id"] for s in SIDES) + (pair["t"],)
        want = tuple(p["id"] for p in drawn[i]) + (t[i],) if i < len(drawn) else None
        if got != want:
            return Check("pair order", False, f"pair {pair['t']}: ids {got} are not the pair that seed {config.seed} "
                                              f"draws there ({want}): config.seed or the passages were changed")
        for s, p in zip(SIDES, drawn[i]):
            if pair[s]["sha256"] != p["sha256"]:
                return Check("pair order", False, f"pair {pair['t']}, {s} {p['id']!r}: sha256 differs "
                                                  f"from the passage's")
    return Check("pair order", True, f"{len(pairs)} pairs are the ones seed {config.seed} draws")


def _check_features(record: dict, config) -> Check:
    """Every feature value against its sha256 and, where the record holds the model's answers,
    computed again from them (``trainspotter.record.recompute``)."""
    return Check("features", *check_recomputed(record, config))


def _replay_blind(record: dict, config):
    from trainspotter.auditing.auditor import blind_on
    from trainspotter.twins.rounds import audit_guard_pairs

    every = audit_guard_pairs(config, record["passages"]["suspect"], record["passages"]["heldout"])
    blind = blind_on(every, config)
    recorded = record["blind"]["wealth"]
    exact = blind.wealth == recorded
    for t, (a, b) in enumerate(zip(recorded, blind.wealth), 1):
        if not close(a, b):
            return blind, Check("blind check", False, f"blind pair {t}: wealth recorded {a!r}, replayed {b!r}")
    if len(recorded) != len(blind.wealth):
        return blind, Check("blind check", False, f"blind wealth: {len(recorded)} pairs recorded, "
                                                  f"{len(blind.wealth)} replayed")
    how = "bit-for-bit" if exact else f"within {TOLERANCE:g}"
    return blind, Check("blind check", True, f"replayed from the texts: {len(recorded)} pairs' wealth match {how}")


def _replay_model(record: dict, config):
    """The model's e-process fed the recorded feature rows batch by batch, as the audit fed them."""
    from trainspotter.auditing.auditor import Auditor
    from trainspotter.stats.sequential import SequentialTest

    start = record["start"]
    if state_sha256(start["state"]) != start["state_sha256"]:
        return None, Check("model test", False, "start: the stored e-process state does not match its sha256")
    state = SequentialTest.from_dict(copy.deepcopy(start["state"])) if start["state"] is not None else None
    auditor = Auditor(config.test, state, start["columns"] if state is not None else None)
    for b in record["batches"]:  # the rounds as recorded: a round's sub-pairs share their t
        rounds = list(Counter(p["t"] for p in b["pairs"]).values())
        auditor.feed([dict(p[s]["features"], id=p[s]["id"], set=s) for s in SIDES for p in b["pairs"]], rounds)
    pairs, hist, t0 = _pairs(record), auditor.history, start["t0"]
    for pair in pairs:  # pair t's steps are round t's (the sub-pairs of one round share them)
        i = pair["t"] - t0 - 1
        if i >= len(hist["wealth"]):
            return auditor, Check("model test", False, f"pair {pair['t']}: recorded, but the replayed test "
                                                       f"rejected at pair {pair['t'] - 1} and stopped")
        for f in STEP_FIELDS:
            if not close(pair[f], hist[f][i]):
                return auditor, Check("model test", False, f"pair {pair['t']} (suspect {pair['suspect']['id']!r}, "
                                                           f"held-out {pair['heldout']['id']!r}): {f} recorded "
                                                           f"{pair[f]!r}, replayed {hist[f][i]!r}")
    rounds = len({p["t"] for p in pairs})
    if len(hist["wealth"]) != rounds:
        return auditor, Check("model test", False, f"{rounds} pairs recorded, {len(hist['wealth'])} replayed")
    how = "bit-for-bit" if _bit_for_bit(record, auditor) else f"within {TOLERANCE:g}"
    subs = f" ({len(pairs)} sub-pairs)" if len(pairs) != rounds else ""
    hub = (record["model"] or {}).get("hub")  # a model named by hub id: the revision asked, the commit answering
    of = f" of {hub['id']}{'@' + hub['revision'] if hub['revision'] else ''} at commit {hub['commit']}" if hub else ""
    return auditor, Check("model test", True, f"replayed from the features{of}: wealth, stake, payoff and scores of "
                                              f"{rounds} pairs{subs} match {how}")


def _replay_placebo(record: dict, config, auditor, blind):
    """The placebo check (trainspotter.auditing.placebo) replayed from its recorded rows: the audit's test
    at the guards' level on the placebo model's features of every available pair, batch by batch."""
    from trainspotter.auditing.auditor import Auditor
    from trainspotter.auditing.verdict import PlaceboResult
    from trainspotter.twins.rounds import audit_guard_pairs

    recorded = PlaceboResult(**record["placebo"]["result"])
    pairs = record["placebo"]["pairs"]
    should = (record["result"]["stopped_by"] != "shift" and config.placebo_config is not None
              and auditor.evidence(blind.alpha))
    if not recorded.ran:
        ok = not should and not pairs
        return recorded, Check("placebo check", ok, "did not run, as the replay says" if ok else
                               "placebo.result.ran: recorded false, but the model's e-value reached the "
                               "guards' 1/α with a placebo model, so it must have run")
    every = audit_guard_pairs(config, record["passages"]["suspect"], record["passages"]["heldout"])
    every = every if config.ledger else every[:config.max_pairs]
    test = Auditor(config.blind_test)
    for start in range(0, len(pairs), config.batch_pairs):
        for pair, drawn in zip(pairs[start:start + config.batch_pairs], every[start:start + config.batch_pairs]):
            for s, p in zip(SIDES, drawn):
                if (pair[s]["id"], pair[s]["sha256"]) != (p["id"], p["sha256"]) or \
                        sha256(pair[s]["features"]) != pair[s]["features_sha256"]:
                    return recorded, Check("placebo check", False, f"placebo pair {pair['t']}, {s} "
                                           f"{pair[s]['id']!r}: not the pair the seed draws there, or its "
                                           f"feature values do not match their sha256")
        test.feed([dict(p[s]["features"], id=p[s]["id"], set=s) for s in SIDES
                   for p in pairs[start:start + config.batch_pairs]])
    wealth = test.history["wealth"]
    for i, pair in enumerate(pairs):
        if i >= len(wealth) or not close(pair["wealth"], wealth[i]) or not close(recorded.wealth[i], wealth[i]):
            return recorded, Check("placebo check", False, f"placebo pair {pair['t']}: wealth recorded "
                                   f"{pair['wealth']!r}, replayed {wealth[i] if i < len(wealth) else None!r}")
    for k in ("fired", "e_value", "max_wealth", "p_value", "pairs_used", "stop_time"):
        replayed = {"fired": test.rejected, "e_value": test.test.e_value, "max_wealth": test.test.max_wealth,
                    "p_value": test.test.p_value, "pairs_used": test.test.t, "stop_time": test.test.stop_time}[k]
        if not close(getattr(recorded, k), replayed):
            return recorded, Check("placebo check", False, f"placebo.result.{k}: recorded {getattr(recorded, k)!r}, "
                                                           f"replayed {replayed!r}")
    return recorded, Check("placebo check", True, f"replayed from the placebo model's features ({recorded.model}): "
                                                  f"{len(pairs)} pairs' wealth match")


def _check_result(record: dict, config, auditor, blind, placebo, draw=None) -> Check:
    recorded = record["result"]
    shift = recorded["stopped_by"] == "shift"
    unguarded = 0 if shift else config.unguarded_min_pairs
    try:
        replayed = auditor.result(blind, config.name, recorded["stopped_by"], recorded["pairs_available"], config.seed,
                                  placebo=None if shift else placebo, unguarded_min_pairs=unguarded,
                                  twins=config.twins is not None, draw=draw, vouched=config.assume_exchangeable)
    except InputError as e:
        return Check("result", False, f"result: cannot be replayed ({e})")
    if recorded["stopped_by"] != "shift" and (recorded["stopped_by"] == "rejected") != replayed.model_reject:
        return Check("result", False, f"result.stopped_by: recorded {recorded['stopped_by']!r}, but the replayed "
                                      f"test {'rejected' if replayed.model_reject else 'did not reject'}")
    fields = [(f"result.{k}", recorded[k], getattr(replayed, k)) for k in RESULT_FIELDS]
    fields += [(f"result.blind.{k}", v, getattr(replayed.blind, k)) for k, v in recorded["blind"].items()]
    for name, a, b in fields:
        if not close(a, b):
            return Check("result", False, f"{name}: recorded {a!r}, replayed {b!r}")
    return Check("result", True, f"verdict {recorded['verdict']!r}, e-value {recorded['e_value']:.6g} and the "
                                 f"blind check's {recorded['blind']['e_value']:.6g} match the replay")


def _bit_for_bit(record: dict, auditor) -> bool:
    """Whether the replayed steps equal the recorded ones exactly (this machine's arithmetic is the sealer's)."""
    hist, t0 = auditor.history, record["start"]["t0"]
    return all(p["t"] - t0 <= len(hist[f]) and p[f] == hist[f][p["t"] - t0 - 1] for p in _pairs(record)
               for f in STEP_FIELDS)


def _check_end(record: dict, auditor) -> Check:
    """The state the audit left (the ledger's, which its next run continues from) against the replay's:
    bit-for-bit by its sha256; on another machine's arithmetic, value by value within ``TOLERANCE``
    against the state the record keeps. Older records keep only its sha256: where the steps replay
    within tolerance only, it cannot be compared; where they replay bit-for-bit, it must match."""
    state = auditor.test.to_dict() if auditor.test is not None else record["start"]["state"]
    end = record["end"]
    if state_sha256(state) == end["state_sha256"]:
        return Check("end state", True, "the e-process state after the last pair matches its sha256")
    if "state" not in end:
        if _bit_for_bit(record, auditor):
            return Check("end state", False, "end: the replayed e-process state does not match the recorded sha256")
        return Check("end state", True, "not compared: the replayed state's sha256 differs, and this record (sealed "
                     "before end states were kept) holds only that sha256, so another machine's arithmetic, which "
                     "differs in the last bits, cannot be told from another state", done=False)
    if state_sha256(end["state"]) != end["state_sha256"]:
        return Check("end state", False, "end.state: does not match its sha256")
    where = apart(end["state"], json.loads(json.dumps(state)), "end.state")
    return Check("end state", where is None, where or "the e-process state after the last pair matches the recorded "
                                                      f"one within {TOLERANCE:g} (another machine's arithmetic)")


def _check_chain(record: dict) -> Check:
    prev = record["start"]["previous"]
    for k, b in enumerate(record["batches"], 1):
        ts = f"pairs {b['pairs'][0]['t']}-{b['pairs'][-1]['t']}" if b["pairs"] else "no pairs"
        if batch_digest(prev, b["pairs"]) != b["digest"]:
            return Check("chain", False, f"batch {k} ({ts}): its pairs do not match its chain digest")
        prev = b["digest"]
    if prev != record["end"]["chain"]:
        return Check("chain", False, "end.chain is not the last batch's digest")
    after = f"the earlier run's chain {record['start']['previous'][:16]}…"
    if record["start"]["previous"] == GENESIS:
        after = "a fresh e-process" if record["start"]["t0"] == 0 else \
            f"the start (the {record['start']['t0']} pairs before were bet on by runs without sealed records)"
    n = len(record["batches"])
    return Check("chain", True, f"{n} batch{'es' * (n != 1)} chained from {after}")


def _check_digests(record: dict) -> Check:
    for s in SECTIONS:
        if sha256(record[s]) != record["sections"].get(s):
            return Check("digest", False, f"section {s!r} does not match its sha256 (changed after sealing)",
                         cause=s in INPUT_SECTIONS)
    if record_digest(record) != record["digest"]:
        return Check("digest", False, "the record digest does not match its sections and chain")
    return Check("digest", True, f"every section and the record digest {record['digest'][:16]}… match")


def _check_signature(record: dict, public_key) -> Check:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    sig = record.get("signature")
    if sig is None:
        return Check("signature", public_key is None, "unsigned record: nothing shows who made it (audit "
                     "--sign KEY.pem signs one)" if public_key is None else
                     "signature: a public key was given but the record is not signed", done=False)
    if public_key is not None and public_hex(public_key) != sig.get("public_key"):
        return Check("signature", False, f"signature: made with key {str(sig.get('public_key'))[:16]}…, not the "
                                         f"given public key {public_hex(public_key)[:16]}…")
    try:
        key = public_key or Ed25519PublicKey.from_public_bytes(bytes.fromhex(sig["public_key"]))
        key.verify(bytes.fromhex(sig["signature"]), record["digest"].encode("ascii"))
    except (InvalidSignature, ValueError):
        return Check("signature", False, "signature: does not verify over the record digest")
    pinned = "the given public key" if public_key is not None else \
        f"the key in the record, {sig['public_key'][:16]}… (pin the auditor's with --public-key)"
    return Check("signature", True, f"Ed25519 signature verifies with {pinned}")


def _check_code(record: dict) -> Check:
    from trainspotter.config import code_digest
    from trainspotter.record.format import REPLAY_CODE

    same = record["code"].get("replay_digest") == code_digest(*REPLAY_CODE)
    return Check("code", True, f"made by trainspotter {record['code'].get('trainspotter')} at commit "
                               f"{str(record['code'].get('git_commit'))[:12]}; the replay code here is "
                               + ("the same" if same else "different (a mismatch may then be the code's)"))


# What ``verify_one`` does, in order: the stages a progress display counts (the replays take longest).
STAGES = ("texts", "features", "blind check", "model test", "placebo check", "hashes and signature")


def verify_one(record: dict, public_key=None, stage: Callable[[str], None] = lambda name: None) -> list[Check]:
    """Every check of one record, in order (the replay checks only with a readable config);
    ``stage(name)`` as each of ``STAGES`` begins."""
    from pydantic import ValidationError

    from trainspotter.auditing.config import AuditConfig

    stage("texts")
    checks, draw = [_check_passages(record)], None
    if "twins" in record["inputs"]:
        draw, twins_check = _check_twins(record)
        checks.append(twins_check)
    try:
        config = AuditConfig(**{"twins_private": "one", **record["config"]})  # (older records: one drawn)
    except (ValidationError, InputError) as e:
        checks.append(Check("config", False, f"config: not a valid audit config ({str(e).splitlines()[0]})"))
        config = None
    auditor = None
    if config is not None:
        stage("features")
        checks += [_check_pair_order(record, config), _check_features(record, config)]
        stage("blind check")
        blind, blind_check = _replay_blind(record, config)
        stage("model test")
        auditor, model_check = _replay_model(record, config)
        checks += [blind_check, model_check]
        if auditor is not None:
            stage("placebo check")
            placebo, placebo_check = _replay_placebo(record, config, auditor, blind)
            checks += [placebo_check, _check_result(record, config, auditor, blind, placebo, draw)]
    # The digests before the end state: a changed config names its section, not the state it changed.
    stage("hashes and signature")
    checks += [_check_digests(record), _check_chain(record)]
    if auditor is not None:
        checks.append(_check_end(record, auditor))
    return checks + [_check_signature(record, public_key), _check_code(record)]


def _check_link(before: dict, after: dict, k: int) -> Check:
    name = f"link {k}-{k + 1}"
    if before["header"]["name"] != after["header"]["name"]:
        return Check(name, False, f"record {k + 1} is of audit {after['header']['name']!r}, "
                                  f"record {k} of {before['header']['name']!r}")
    if after["start"]["previous"] != before["end"]["chain"]:
        return Check(name, False, f"record {k + 1} does not continue the chain of record {k}")
    if after["start"]["state_sha256"] != before["end"]["state_sha256"]:
        return Check(name, False, f"record {k + 1} starts from another e-process state than record {k} left")
    return Check(name, True, f"record {k + 1} continues record {k}'s chain and e-process state")


def verify_records(records: list[tuple[str, dict]], public_key=None,
                   progress: Callable[[int, int, str], None] = lambda done, total, now: None) -> Verification:
    """Verify each (path, record) and, for several, that each continues the one before
    (the runs of a recurring audit, oldest first); ``progress(stages done, stages, what now)``
    as each stage of each record begins (``STAGES``), and once at the end."""
    out, total = Verification(), len(records) * len(STAGES)
    for k, (path, record) in enumerate(records):
        stage = lambda name, k=k, path=path: progress(k * len(STAGES) + STAGES.index(name), total,  # noqa: E731
                                                      f"{Path(path).name}: {name}")
        try:
            checks = verify_one(record, public_key, stage)
        except (KeyError, TypeError, IndexError, AttributeError) as e:
            raise InputError(f"{path}: malformed record ({type(e).__name__}: {e})") from None
        prefix = f"{Path(path).name}: " if len(records) > 1 else ""
        out.checks += [Check(c.name, c.ok, prefix + c.detail, c.done, c.cause) for c in checks]
        out.records.append({"path": str(path), "digest": record.get("digest"), "name": record["header"].get("name"),
                            "verdict": record["result"].get("verdict")})
        if k:
            out.checks.append(_check_link(records[k - 1][1], record, k))
    progress(total, total, "done")
    return out
