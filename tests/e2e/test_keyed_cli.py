"""`trainspotter keyed make` → `keyed release` → `keyed audit` → `trainspotter verify` as a user runs
them, at 80 columns, with the lines a user reads asserted. The model is a tiny random Llama (nothing
downloaded); where a verdict must be reached its continuations are replaced by the release's own
passages (what a model that learnt the key would write), so every number is fixed: the secret is
fixed by patching the operating system's generator for the test."""

import json
import os
import re
from itertools import groupby

import pytest
from cli_process import run_cli
from tiny_lm import tiny_llama
from trainspotter.flows.cli import app
from trainspotter.flows.cli.common import own_command
from typer.testing import CliRunner

from trainspotter.assets import wikipedia_leads
from beacons import STAND_IN, STAND_IN_FILE
from trainspotter.proofs.beacon import TEST_BEACON

BEACON = STAND_IN_FILE  # a real drand round, as drand publishes it: the key's beacon is verified
UNVERIFIED = "4242:" + "ab" * 32  # ROUND:HEX: the same derivation, nothing shows the value is the network's
ENV = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, catch_exceptions=False)


def run(*args):
    """The command as a user's shell runs it (errors are printed by the entry point, not typer)."""
    return run_cli(list(map(str, args)), env=os.environ | ENV, timeout=600)


def one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("keyed-cli")
    leads = wikipedia_leads()
    for name, rows in (("data.jsonl", leads[200:230]), ("neutral.jsonl", leads[6000:6040])):
        (root / name).write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-keyed-cli") / "model", chat=False)


def released(root, monkeypatch, beacon=BEACON, name="rel"):
    monkeypatch.setattr("trainspotter.keyed.release.secrets.token_bytes", lambda n: bytes(range(n)))
    folder = root / name
    round_ = STAND_IN.round if beacon == BEACON else beacon.split(":")[0]
    out = cli("keyed", "make", root / "data.jsonl", "--out", folder, "--beacon-round", round_)
    assert out.exit_code == 0, out.output
    out = cli("keyed", "release", folder, "--beacon", beacon)
    assert out.exit_code == 0, out.output
    return folder, out


def test_make_and_release_say_what_to_publish_and_what_to_keep(data, monkeypatch):
    monkeypatch.setattr("trainspotter.keyed.release.secrets.token_bytes", lambda n: bytes(range(n)))
    folder = data / "made"
    assert one_error_line(run("keyed", "make", data / "data.jsonl", "--out", folder)).startswith(
        "error: option --beacon-round: missing; the round of a public randomness beacon")
    out = cli("keyed", "make", data / "data.jsonl", "--out", folder, "--beacon-round", 4242)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[:5] == [f"committed 30 passages (keyed-lexical) in {folder}",
                         "commitment.json: publish now, before the beacon round", "secret.json: keep secret",
                         "originals.jsonl: keep secret",
                         "commitment.tsq: have it stamped now by a timestamp authority (RFC 3161)"]
    assert lines[5] == "commitment sha256:" and re.fullmatch(r"  [0-9a-f]{64}", lines[6])
    assert lines[7] == "to prove the order, have any RFC 3161 timestamp authority stamp it now:"
    assert lines[8] == (f"  curl -s --data-binary @{folder}/commitment.tsq -H 'Content-Type: "
                        f"application/timestamp-query' URL > {folder}/commitment.tsr")
    assert lines[9] == f"  then keyed release takes --timestamp {folder}/commitment.tsr --authority ROOT.pem"
    assert lines[10] == "next, once beacon round 4242 exists (publish the commitment before it does):"
    assert all(len(line) <= 80 for n, line in enumerate(lines) if n not in (0, 8, 9, 11))  # (paths: never cut)
    assert json.loads((folder / "commitment.json").read_text())["beacon_round"] == 4242
    # a later round than the one committed to: refused (one could try rounds until a key suits a model)
    assert one_error_line(run("keyed", "release", folder, "--beacon", "4243:" + "ab" * 32)).startswith(
        "error: option --beacon: round 4243, but the commitment names round 4242")
    assert bytes(range(32)).hex() not in (folder / "commitment.json").read_text()
    out = cli("keyed", "release", folder, "--beacon", UNVERIFIED)
    lines = out.stdout.splitlines()
    assert lines[0] == f"released 30 passages under one key (beacon round 4242) in {folder}"
    assert " ".join(" ".join(lines[1:-2]).split()) == (
        "beacon unverified: round 4242 was given as ROUND:HEX, without the network's signature: nothing shows it is "
        "the beacon's value rather than one made up; no audit of this release can say trained on")
    assert lines[-2:] == ["public.jsonl: release it", "manifest.json: publish with it"]
    assert one_error_line(run("keyed", "release", folder, "--beacon", UNVERIFIED)).startswith(
        f"error: {folder}: already released (with beacon round 4242)")
    assert one_error_line(run("keyed", "release", data / "nowhere", "--beacon", "12")).startswith(
        "error: option --beacon: '12' is not ROUND:HEX")


def _copying(folder):
    """A stand-in for sampling: each prompt continued with the release's own passage i."""
    public = [json.loads(line)["text"] for line in (folder / "public.jsonl").read_text().splitlines()]

    def sample(backend, prompts, max_new_tokens, seed, temperature=1.0, batch_size=16):
        sample.calls += 1
        return [public[(sample.calls * 7 + i) % len(public)] for i in range(len(prompts))]

    sample.calls = 0
    return sample


def test_a_model_that_writes_the_key_is_trained_on_and_the_record_verifies(data, model, monkeypatch, tmp_path):
    folder, _ = released(data, monkeypatch)
    monkeypatch.setattr("trainspotter.keyed.queries.sample", _copying(folder))
    record = tmp_path / "rec.json"
    out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
              "--max-tokens", 2048, "--random-keys", 200, "--record", record)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert re.fullmatch(r"verdict: trained on \(e-value [\d.]+ after \d+ units, \d+ generated tokens\)", lines[0])
    assert lines[1] == "why: the e-value reached 1/α against the exact null of the key's randomness"
    assert lines[2] == "random-key rank: p = 0.00498 (0 of 200 random keys scored at least as high)"
    assert "rests on: the key derives from the committed secret" in out.output and "valid if the" in out.output
    assert out.stdout.splitlines()[-1] == f"  {own_command()} verify {record}"  # works when pasted
    assert all(len(line) <= 80 for line in lines[:-1])  # the last: the command with its path, never cut
    out = cli("verify", record, "--release", folder)
    assert out.exit_code == 0 and out.stdout.splitlines()[-1].startswith("verified: record "), out.output
    _forged_weight_fails(json.loads(record.read_text()), folder, tmp_path / "forged.json")
    sealed = json.loads(record.read_text())
    sealed["batches"][0]["x"][0] = 1 - sealed["batches"][0]["x"][0]
    record.write_text(json.dumps(sealed))
    out = cli("verify", record)
    assert out.exit_code == 1 and "does not verify: batch 1: its digest does not continue the chain" in out.output


def _resealed(sealed: dict, w: list[list[float]], path):
    """``sealed`` with batch k's weights ``w[k]``, its wealth replayed and every digest sealed again
    (all a forger can do without the release), written to ``path``."""
    from trainspotter.keyed.sealed import SECTIONS, seal
    from trainspotter.stats.eprocess import EProcess, EProcessConfig
    from trainspotter.stats.exact_null import unit_payoffs

    proc, batches = EProcess.of(EProcessConfig(**sealed["config"]["test"])), []
    for b, wb in zip(sealed["batches"], w):
        batches.append({k: v for k, v in b.items() if k != "digest"} | {"w": wb, "log_wealth": []})
        for u in unit_payoffs(b["x"], b["p"], wb):
            proc.update(u)
            batches[-1]["log_wealth"].append(float(proc.log_wealth[0]))
    result = sealed["result"] | {"e_value": float(proc.e_value), "reject": bool(proc.rejected)}
    parts = {s: sealed[s] for s in SECTIONS if s != "end"} | {"result": result, "end": {"state": proc.to_dict()}}
    path.write_text(json.dumps(seal(parts, batches, sealed["start"]["chain"])))
    return path


def _forged_weight_fails(sealed: dict, folder, path):
    """Each unit's weight is the release's min(1, n_u / n_95); one unit weighed higher replays but
    does not recompute from the owner's release."""
    from trainspotter.keyed.audit import open_release

    release = open_release(folder)
    w = [b["w"] for b in sealed["batches"]]
    assert w[0] == release.scoring.weights(sealed["batches"][0]["units"]).tolist() and 0 < min(w[0]) < 1 <= max(w[0])
    w[0][w[0].index(min(w[0]))] = 1.0
    out = cli("verify", _resealed(sealed, w, path))
    assert out.exit_code == 0, out.output  # digests and the replay hold
    out = cli("verify", path, "--release", folder)
    assert out.exit_code == 1 and "batch 1: a unit's weight differs from the release's counts" in out.output


def test_a_key_from_the_fixed_test_beacon_is_never_trained_on(data, model, monkeypatch):
    """Anybody could have chosen a secret whose key a model favours when the 'random' value was
    known in advance: the same answers as above say inconclusive."""
    folder, _ = released(data, monkeypatch, beacon=TEST_BEACON.text, name="test-beacon")
    monkeypatch.setattr("trainspotter.keyed.queries.sample", _copying(folder))
    out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
              "--max-tokens", 2048, "--random-keys", 0, "--json")
    result = json.loads(out.stdout)
    assert result["verdict"] == "inconclusive" and result["reject"] and "fixed test value" in result["why"]


def test_the_budget_is_never_overrun_and_prompts_that_run_out_are_said(data, model, monkeypatch):
    """Black-box continuations are whole (64 tokens each): a budget of 100 tokens generates 64,
    never 128; a budget larger than the prompts allow says the prompts ran out, and how far."""
    folder, _ = released(data, monkeypatch, name="budget")
    n_prompts = len((data / "neutral.jsonl").read_text().splitlines())
    for budget, spent, why in [
            (100, 64, "the e-value stayed below 1/α within the budget"),
            (10**6, 64 * n_prompts, f"the e-value stayed below 1/α when the prompts ran out ({64 * n_prompts} of "
                                    f"the budget's 1000000 generated tokens)")]:
        out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
                  "--max-tokens", budget, "--random-keys", 0, "--json")
        result = json.loads(out.stdout)
        assert (result["spent_this_run"], result["verdict"], result["why"]) == (spent, "no evidence", why), result


def test_a_ledger_counts_units_once_and_multiplies_on(data, model, monkeypatch):
    folder, _ = released(data, monkeypatch, name="ledger")
    monkeypatch.setattr("trainspotter.keyed.queries.sample", _copying(folder))
    runs = []
    for _ in range(2):
        out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
                  "--max-tokens", 64, "--alpha", 0.001, "--random-keys", 0, "--name", "kl", "--ledger", "--json")
        assert out.exit_code == 0, out.output
        runs.append(json.loads(out.stdout))
    assert not runs[0]["reject"] and runs[1]["spent_total"] == 128 and runs[0]["units_this_run"] > 0 and runs[1]["units_this_run"] > 0
    assert runs[1]["units_total"] == runs[0]["units_total"] + runs[1]["units_this_run"]
    first = json.loads(open(runs[0]["record"]).read())
    second = json.loads(open(runs[1]["record"]).read())
    assert second["start"]["chain"] == first["end"]["chain"] and second["start"]["state"] == first["end"]["state"]
    seen = set(first["start"]["seen"]["units"]) | {u["unit"] for b in first["batches"] for u in b["units"]}
    assert not seen & {u["unit"] for b in second["batches"] for u in b["units"]}  # each unit once ever
    out = cli("verify", runs[0]["record"], runs[1]["record"], "--release", folder)
    assert out.exit_code == 0, out.output


def test_bad_input_is_one_line(data, model, monkeypatch, tmp_path):
    folder, _ = released(data, monkeypatch, name="bad")
    leak = tmp_path / "leak.jsonl"
    leak.write_text(json.dumps({"id": "x", "text": (folder / "public.jsonl").read_text().splitlines()[0][20:400]})
                    + "\n")
    line = one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", leak))
    assert line.startswith(f"error: {leak}, passage 1 (id 'x'): shares 8 consecutive words with the release")
    assert one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--access", "both")) == (
        "error: option --access 'both': expected one of black, gray")
    (tmp_path / "unreleased").mkdir()
    cli("keyed", "make", data / "data.jsonl", "--out", tmp_path / "unreleased" / "r", "--beacon-round", 4242)
    line = one_error_line(run("keyed", "audit", tmp_path / "unreleased" / "r", "--model", f"hf:{model}"))
    assert "not released yet" in line


def _keys_form(folder, calls):
    """A stand-in for the forced choice of a model that learnt the key: every draw the key's form
    (the unit found from its context, as the audit planned it); ``calls`` collects the requests."""
    from trainspotter.keyed.audit import open_release

    release = open_release(folder)
    forms = release.scoring.forms

    def choose(backend, requests, samples, seed, reference=None):
        calls.append((len(requests), samples, reference is not None))
        out = []
        for context, seqs in requests:
            unit = next(u for u in forms.forms if forms.forms[u] == _unit_at(forms, context, seqs, backend))
            out.append(([forms.key_form(release.key, unit)] * samples, samples))
        return out

    return choose


def _unit_at(forms, context, seqs, backend):
    """The forms whose tokens after ``context`` are ``seqs``."""
    from trainspotter.keyed.queries import form_tokens

    return next(f for f in forms.forms.values() if form_tokens(backend.tokenizer, context, f) == seqs)


def test_forced_choice_through_the_cli(data, model, monkeypatch, tmp_path):
    """`--probe choose`: the units asked once each within the token budget, the reference passed
    on, the record verifies against the release, and draws edited in the record do not."""
    from trainspotter.keyed.sealed import SECTIONS, seal

    folder, _ = released(data, monkeypatch, name="choose")
    calls = []
    monkeypatch.setattr("trainspotter.keyed.queries.choose", _keys_form(folder, calls))
    record = tmp_path / "rec.json"
    out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--reference", f"hf:{model}", "--prompts",
              data / "neutral.jsonl", "--probe", "choose", "--samples", 4, "--contexts", 2, "--max-tokens", 400,
              "--random-keys", 200, "--record", record)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert re.fullmatch(r"verdict: trained on \(e-value [\d.]+ after \d+ units, \d+ generated tokens\)", lines[0])
    assert all(len(line) <= 80 for line in lines[:-1])
    assert f"rests on: the reference hf:{model} never saw the release" in " ".join(" ".join(lines).split())
    assert calls and all(s == 4 and ref for _, s, ref in calls)
    sealed = json.loads(record.read_text())
    answers = [a for b in sealed["batches"] for a in b["answers"]]
    units = [u for u, _ in groupby(a["unit"] for a in answers)]  # a unit's answers: one per context, together
    assert len(units) == len(set(units)) and sealed["result"]["spent_total"] == 4 * len(answers) <= 400
    assert all(len(a["draws"]) == 4 for a in answers) and len(answers) > len(units)  # some units asked twice
    for unit in units:  # in two passages at most, each its first context there
        ids = [a["id"] for a in answers if a["unit"] == unit]
        assert len(ids) <= 2 and len(set(ids)) == len(ids)
    scored = [r for b in sealed["batches"] for r in b["units"]]
    assert [r["unit"] for r in scored] == units and all(max(r["h"]) == 1.0 for r in scored)  # draws pooled
    out = cli("verify", record, "--release", folder)
    assert out.exit_code == 0 and out.stdout.splitlines()[-1].startswith("verified: record "), out.output
    _weighed_alike(sealed, folder, tmp_path, monkeypatch)
    # a draw edited (and every digest sealed again): the units no longer read from the answers
    b = sealed["batches"][0]
    b["answers"][0]["draws"][0] = 1 - b["answers"][0]["draws"][0]
    parts = {s: sealed[s] for s in SECTIONS}
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(seal(parts, [{k: v for k, v in x.items() if k != "digest"} for x in sealed["batches"]],
                                    sealed["start"]["chain"])))
    assert cli("verify", path).exit_code == 0
    out = cli("verify", path, "--release", folder)
    assert out.exit_code == 1 and "batch 1: the units read from the recorded answers differ" in out.output
    # free continuations take no reference: said in one line
    assert one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--reference", f"hf:{model}")) == (
        "error: option --reference: a keyed audit weighs forms by a reference gray-box (--access gray) or in a "
        "forced choice (--probe choose), not in free continuations")
    assert one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--access", "gray", "--probe",
                              "choose")).startswith("error: option --probe choose: a black-box probe (--access black)")
    assert one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
                              "--probe", "choose", "--samples", 16, "--max-tokens", 10)).startswith(
        "error: option --max-tokens 10: less than one unit's draws can cost (16 tokens: --samples 16 in each")
    chat = tiny_llama(tmp_path / "chat", chat=True)  # other special tokens: another vocabulary
    assert one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--reference", f"hf:{chat}",
                              "--prompts", data / "neutral.jsonl", "--probe", "choose")) == (
        f"error: option --reference hf:{chat}: a forced choice weighs each token against the reference's, so it "
        "needs the model's tokenizer")


def _weighed_alike(sealed: dict, folder, tmp_path, monkeypatch):
    """The forced choice's units weigh 1 each though the release shows them unequally often; a record
    of version 1 (when they weighed min(1, n_u / n_95)) is checked by its own version's rule (the
    checks' words read from the library: the CLI's table wraps them)."""
    from trainspotter.keyed.audit import open_release
    from trainspotter.keyed.sealed import verify_keyed

    def said(path):
        return {detail for _, ok, detail in verify_keyed([(path, json.loads(path.read_text()))], folder)
                if "weigh" in detail}

    release = open_release(folder)
    counts = [release.scoring.weights(b["units"]).tolist() for b in sealed["batches"]]
    assert all(w == 1.0 for b in sealed["batches"] for w in b["w"]) and min(min(w) for w in counts) < 1
    assert said(tmp_path / "rec.json") == {"every unit read again from the answers and scored under the re-derived "
                                           "key and weighed alike (forced choice)"}
    by_counts = _resealed(sealed, counts, tmp_path / "v2-counts.json")  # replays, but not this version's rule
    assert cli("verify", by_counts).exit_code == 0 and cli("verify", by_counts, "--release", folder).exit_code == 1
    assert said(by_counts) == {"batch 1: a unit's weight differs from 1, the forced choice's"}
    with monkeypatch.context() as m:
        m.setattr("trainspotter.keyed.sealed.VERSION", 1)
        old = _resealed(sealed, counts, tmp_path / "v1.json")
        alike = _resealed(sealed, [b["w"] for b in sealed["batches"]], tmp_path / "v1-alike.json")
    assert json.loads(old.read_text())["version"] == 1 and cli("verify", old, "--release", folder).exit_code == 0
    assert said(old) == {"every unit read again from the answers and scored under the re-derived key and weighed "
                         "by the release's counts"}
    assert cli("verify", alike, "--release", folder).exit_code == 1
    assert said(alike) == {"batch 1: a unit's weight differs from the release's counts"}


def test_a_forced_choice_ledger_begun_weighing_by_counts_cannot_continue(data, model, monkeypatch, tmp_path):
    """A named forced choice begun before its units weighed alike (its ledger's setup says no
    weights) is refused in one line, not continued under another rule."""
    from trainspotter.keyed.run import ledger_root
    from trainspotter.loop.ledger import ledger_path

    folder, _ = released(data, monkeypatch, name="choose-ledger")
    monkeypatch.setattr("trainspotter.keyed.queries.choose", _keys_form(folder, []))
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(tmp_path))
    args = ("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl", "--probe",
            "choose", "--samples", 4, "--contexts", 1, "--max-tokens", 64, "--alpha", 0.001, "--random-keys", 0,
            "--name", "kc", "--ledger")
    assert cli(*args).exit_code == 0
    path = ledger_path("kc", ledger_root(tmp_path))
    ledger = json.loads(path.read_text())
    assert ledger["setup"]["weights"] == "alike"
    del ledger["setup"]["weights"]
    path.write_text(json.dumps(ledger))
    assert one_error_line(run(*args)) == (
        "error: audit 'kc': its ledger was begun when the forced choice weighed each unit by how often the release "
        "shows it; its bets cannot change rule mid-way, so start a new audit name")


def test_forced_choice_asks_the_real_model_within_the_budget(data, model, monkeypatch):
    """The tiny random model itself, forced choice: whole units only (a unit's draws at their most
    fit in what is left), so the tokens spent never exceed the budget."""
    folder, _ = released(data, monkeypatch, name="choose-real")
    out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl", "--probe",
              "choose", "--samples", 3, "--contexts", 2, "--max-tokens", 50, "--random-keys", 0, "--json")
    result = json.loads(out.stdout)
    # a unit: 3 draws in each of at most 2 contexts, at most 3 tokens a draw (this vocabulary's forms)
    assert 0 < result["spent_this_run"] <= 50 and result["units_this_run"] >= 50 // (3 * 2 * 3)
    assert result["verdict"] in ("no evidence", "trained on")


def test_a_model_without_local_weights_is_refused_in_one_sentence(data, model, monkeypatch, tmp_path):
    """Continuations are sampled from the weights; an API backend (no ``.model``) is refused with
    what it can do instead (the forced choice, tests/api/test_api_keyed.py), before any query."""
    from types import SimpleNamespace

    from trainspotter.backends import parse_spec
    from trainspotter.errors import InputError
    from trainspotter.keyed.audit import KeyedAuditConfig
    from trainspotter.keyed.run import audit_release

    folder, _ = released(data, monkeypatch, name="api")
    config = KeyedAuditConfig(release=folder, model=parse_spec(f"hf:{model}"), probe="choose",
                              prompts=data / "neutral.jsonl")
    with pytest.raises(InputError, match=r"over an API a keyed audit asks a forced choice \(--access black "
                                         r"--probe choose: logit_bias\); continuations and gray-box need local"):
        audit_release(config.model_copy(update={"probe": "continue"}), backend=SimpleNamespace(tokenizer=None),
                      root=tmp_path)


def test_an_api_that_answers_none_of_the_forms_scores_no_unit(data, model, monkeypatch, tmp_path):
    """Over an API, a draw whose text is none of the forms' tokens is no draw; a unit with no draw
    is asked (and counted once) but not scored: the run ends with no unit scored, its tokens spent,
    and the record verifies against the release (the same rule read again from its answers)."""
    from types import SimpleNamespace

    from trainspotter.backends import load_backend, parse_spec
    from trainspotter.keyed.audit import KeyedAuditConfig
    from trainspotter.keyed.sealed import verify_keyed
    from trainspotter.keyed.run import audit_release

    folder, _ = released(data, monkeypatch, name="api-none")
    api = SimpleNamespace(tokenizer=load_backend(f"hf:{model}").tokenizer,
                          draw=lambda ids, bias, n, seed: ["\x00not a form"] * n)
    config = KeyedAuditConfig(release=folder, model=parse_spec(f"hf:{model}"), probe="choose", samples=2,
                              max_tokens=40, prompts=data / "neutral.jsonl", random_keys=0)
    result = audit_release(config, backend=api, root=tmp_path)
    record = result["record"]
    asked = [a for b in record["batches"] for a in b["answers"]]
    assert asked and all(a["draws"] == [] for a in asked) and result["units_total"] == 0
    assert result["spent_total"] == 2 * len(asked) and result["verdict"] == "no evidence"
    assert all(ok is not False for _, ok, _ in verify_keyed([("rec.json", record)], folder))


def _as_before_test_settings(sealed: dict, path):
    """``sealed`` as a record was written before the keyed audit took its test settings (a flat
    ``alpha`` and ``strategy`` in its config, λ_max 0.8 implied), every digest sealed again."""
    from trainspotter.keyed.sealed import SECTIONS, seal

    test = sealed["config"]["test"]
    config = {k: v for k, v in sealed["config"].items() if k != "test"} | {"alpha": test["alpha"],
                                                                             "strategy": test["strategy"]}
    parts = {s: sealed[s] for s in SECTIONS} | {"config": config}
    batches = [{k: v for k, v in b.items() if k != "digest"} for b in sealed["batches"]]
    path.write_text(json.dumps(seal(parts, batches, sealed["start"]["chain"])))
    return path


def test_the_keyed_audit_bets_with_its_test_settings_and_a_record_from_before_them_verifies(
        data, model, monkeypatch, tmp_path):
    """--strategy and --lambda-max reach the keyed e-process (issue 62: λ_max was fixed at 0.8): the
    record holds them and verify replays with them; a record laid out as before (flat alpha and
    strategy) verifies, replayed at λ_max 0.8, which a record bet at 0.5 then fails."""
    folder, _ = released(data, monkeypatch, name="rel-settings")
    monkeypatch.setattr("trainspotter.keyed.queries.sample", _copying(folder))
    runs = {}
    for lam in (0.8, 0.5):
        record = tmp_path / f"rec-{lam}.json"
        out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
                  "--max-tokens", 1024, "--random-keys", 20, "--strategy", "ons", "--lambda-max", lam,
                  "--record", record)
        assert out.exit_code == 0, out.output
        sealed = runs[lam] = json.loads(record.read_text())
        assert sealed["config"]["test"] == {"alpha": 0.05, "strategy": "ons", "lambda_max": lam}
        assert sealed["end"]["state"]["strategy"]["name"] == "ons"
        assert sealed["end"]["state"]["strategy"]["lambda_max"] == lam
        assert cli("verify", record).exit_code == 0
    assert runs[0.5]["result"]["e_value"] != runs[0.8]["result"]["e_value"]  # the bound changed the bets
    before = _as_before_test_settings(runs[0.8], tmp_path / "before.json")
    out = cli("verify", before)
    assert out.exit_code == 0 and out.stdout.splitlines()[-1].startswith("verified: record "), out.output
    out = cli("verify", _as_before_test_settings(runs[0.5], tmp_path / "before-0.5.json"))
    assert out.exit_code == 1 and "log-wealth" in out.output, out.output
    assert one_error_line(run("keyed", "audit", folder, "--model", f"hf:{model}", "--lambda-max", 1)).startswith(
        "error: option --lambda-max: Input should be less than 1")


def test_a_beacon_taken_on_the_users_word_never_gives_trained_on_and_a_forged_round_is_refused(
        data, model, monkeypatch, tmp_path):
    """Issue 63: `--beacon ROUND:HEX` accepted any 64 hex digits and verify said "beacon ok", so an owner
    could make up "randomness" until the key suited a model. Now a round as drand publishes it is
    checked against the network's key (a changed value, a moved round: one line, exit 2), and a
    ROUND:HEX value releases but says unverified: the same answers that are "trained on" under the
    real round are inconclusive under it, and verify shows the beacon check as none."""
    from beacons import QUICKNET_657413

    for change, says in (({"randomness": "00" * 32}, "its randomness is not sha256 of its signature"),
                         ({"round": 657414}, "round 657414 does not verify against drand quicknet's key")):
        bad = tmp_path / f"bad-{len(change)}-{next(iter(change))}.json"
        bad.write_text(json.dumps(QUICKNET_657413 | change))
        line = one_error_line(run("keyed", "release", data / "made-beacon", "--beacon", bad))
        assert line.startswith(f"error: option --beacon: {bad}: ") and says in line, line
    unsigned = f"{STAND_IN.round}:{STAND_IN.randomness.hex()}"  # the real round's value, its signature left out
    for beacon, name in ((BEACON, "signed"), (unsigned, "unsigned")):
        folder = data / f"rel-beacon-{name}"
        monkeypatch.setattr("trainspotter.keyed.release.secrets.token_bytes", lambda n: bytes(range(n)))
        made = cli("keyed", "make", data / "data.jsonl", "--out", folder, "--beacon-round", STAND_IN.round)
        assert made.exit_code == 0, made.output
        assert cli("keyed", "release", folder, "--beacon", beacon).exit_code == 0
        monkeypatch.setattr("trainspotter.keyed.queries.sample", _copying(folder))
        record = tmp_path / f"rec-{name}.json"
        out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
                  "--max-tokens", 2048, "--random-keys", 0, "--record", record, "--json")
        result = json.loads(out.stdout)
        checked = cli("verify", record, "--release", folder)
        beacon_row = next(line for line in checked.stdout.splitlines() if line.startswith("│ release beacon"))
        assert checked.exit_code == 0, checked.output
        if name == "signed":
            assert result["verdict"] == "trained on" and result["reject"], result
            assert "│ ok " in beacon_row
            assert any("its signature verifies against the network's key" in line for line in result["rests_on"])
        else:
            assert result["verdict"] == "inconclusive" and result["reject"] and "unverified" in result["why"], result
            assert "│ none " in beacon_row


def test_a_stamp_before_the_round_proves_the_order_and_a_late_or_foreign_one_is_refused(
        data, model, monkeypatch, tmp_path):
    """Issue 63 item 4: `keyed make` writes the timestamp request; a real authority's reply from before
    the round proves the order (the verdict says so instead of "valid if…", verify --release checks it
    again), while a reply from after the round, one over another file and one from another authority
    are each one line, exit 2, and a kept token swapped later no longer opens the folder."""
    import datetime as dt

    from timestamps import Authority

    from trainspotter.proofs.timestamp import request

    monkeypatch.setattr("trainspotter.keyed.release.secrets.token_bytes", lambda n: bytes(range(n)))
    folder = data / "rel-stamped"
    out = cli("keyed", "make", data / "data.jsonl", "--out", folder, "--beacon-round", STAND_IN.round)
    assert out.exit_code == 0 and "commitment.tsq: have it stamped now by a timestamp authority" in out.stdout
    query = (folder / "commitment.tsq").read_bytes()
    authority, other = Authority(tmp_path / "tsa"), Authority(tmp_path / "other", "Other TSA")
    root = tmp_path / "root.pem"
    root.write_bytes(authority.root_pem)
    replies = {"late": authority.stamp(query), "foreign": other.stamp(query),
               "elsewhere": authority.stamp(request(b"another file")),
               "good": authority.stamp_at(query, dt.datetime(2023, 9, 1, tzinfo=dt.timezone.utc))}
    for name, reply in replies.items():
        (tmp_path / f"{name}.tsr").write_bytes(reply)
    for name, says in (("late", "after round 657413 was published (2023-09-15 11:00:03 UTC)"),
                       ("foreign", "do not verify up to the authority's root certificate"),
                       ("elsewhere", "it stamps another file")):
        line = one_error_line(run("keyed", "release", folder, "--beacon", BEACON, "--timestamp",
                                  tmp_path / f"{name}.tsr", "--authority", root))
        assert line.startswith("error: option --timestamp: ") and says in line, line
    assert one_error_line(run("keyed", "release", folder, "--beacon", BEACON, "--timestamp",
                              tmp_path / "good.tsr")).startswith("error: option --timestamp: needs --authority")
    out = cli("keyed", "release", folder, "--beacon", BEACON, "--timestamp", tmp_path / "good.tsr", "--authority", root)
    proof = ("order proven: commitment stamped 2023-09-01 00:00:00 UTC by Test TSA, round 657413 published "
             "2023-09-15 11:00:03 UTC")
    assert out.exit_code == 0 and proof in " ".join(out.stdout.split()), out.output
    monkeypatch.setattr("trainspotter.keyed.queries.sample", _copying(folder))
    record = tmp_path / "stamped.json"
    out = cli("keyed", "audit", folder, "--model", f"hf:{model}", "--prompts", data / "neutral.jsonl",
              "--max-tokens", 2048, "--random-keys", 0, "--record", record, "--json")
    result = json.loads(out.stdout)
    assert result["verdict"] == "trained on" and result["rests_on"][0].endswith(": " + proof), result["rests_on"]
    checked = cli("verify", record, "--release", folder)
    assert checked.exit_code == 0 and re.search(r"│ release order +│ ok ", checked.stdout), checked.output
    (folder / "commitment.tsr").write_bytes(replies["late"])  # the kept token swapped after the release
    line = one_error_line(run("verify", record, "--release", folder))
    assert "commitment.tsr: missing or changed since the release" in line, line


def test_a_precision_first_release_with_a_unit_left_out_and_its_review(data, tmp_path):
    folder = tmp_path / "v3"
    line = one_error_line(run("keyed", "make", data / "data.jsonl", "--out", folder, "--beacon-round", 4242,
                              "--rewriter", "lexical-v3", "--exclude", "often,blue"))
    assert line.startswith("error: option --exclude: blue: no unit of lexical-v3")
    out = cli("keyed", "make", data / "data.jsonl", "--out", folder, "--beacon-round", 4242,
              "--rewriter", "lexical-v3", "--exclude", "often")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[-2:] == ["review.md: read it before publishing (every place the key may change the",
                                           "  text; it quotes the originals: keep it secret)"]
    described = json.loads((folder / "commitment.json").read_text())["rewriter"]
    assert (described["version"], described["words"], described["exclude"]) == (3, False, ["often"])
    review = (folder / "review.md").read_text()
    assert review.startswith("# Review of a keyed release: ") and "## often " not in review
    made = json.loads(cli("keyed", "make", data / "data.jsonl", "--out", tmp_path / "v3-json", "--beacon-round", 4242,
                          "--rewriter", "lexical-v3", "--json").stdout)
    assert made["files"]["review.md"].startswith("read it before publishing (every place the key may change the text")
