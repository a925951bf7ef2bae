"""`trainspotter twins make` → `twins release` → `trainspotter audit --twins` as a user runs them
(a stand-in beacon round (tests/beacons.py) in place of a real beacon round)."""

import json
import os
import re

from beacons import STAND_IN, STAND_IN_FILE
from cli_process import run_cli

ROUND = str(STAND_IN.round)


def run(*args, env=None):
    return run_cli(list(args), env=env or os.environ.copy(), timeout=600)


def make_and_release(data, folder, *args):
    """`twins make DATA --out FOLDER --beacon-round ROUND ARGS`, then `twins release FOLDER --beacon`
    with the test beacon; the JSON `twins make` printed."""
    out = run("twins", "make", str(data), "--out", str(folder), "--beacon-round", ROUND, *args, "--json")
    assert out.returncode == 0, out.stderr
    released = run("twins", "release", str(folder), "--beacon", STAND_IN_FILE, "--json")
    assert released.returncode == 0, released.stderr
    assert json.loads(released.stdout)["draw"] == "shown"
    return json.loads(out.stdout)


def one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    return lines[0]


def test_make_then_audit_twins_nobody_trained_on(tmp_path, mini_testbed):
    """Twins of the mini testbed's held-out passages (no model saw any version): the audit is not
    "trained on" (exit 0, "no evidence"; false-failure rate ≤ α = 0.01 by the guarantee under test),
    without a reference or --assume-exchangeable; its sealed record verifies (paired order)."""
    folder = tmp_path / "twins"
    made = make_and_release(mini_testbed / "heldout.jsonl", folder, "-k", "3", "--no-similarity")
    assert made["k"] == 3 and made["passages"] + len(made["skipped"]) == 80 and made["passages"] >= 70
    assert made["files"]["keys.json"]["who"] == "keep secret" and made["beacon_round"] == STAND_IN.round
    out = run("twins", "verify", str(folder), "--commitment", made["commitment"], "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "shown", out.stderr
    record = tmp_path / "record.json"
    out = run("audit", "--twins", str(folder), "--model", "testbed:mini", "--alpha", "0.01", "--record",
              str(record), "--features", "twins", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["verdict"] == "no evidence" and result["pairs_available"] == made["passages"]
    assert result["guard"] is None and not result["blind"]["fired"] and result["draw"]["status"] == "shown"
    assert "gray_twin_lp" in result["features"]  # --features twins reads the changed positions
    sealed = json.loads(record.read_text())
    assert (sealed["config"]["preset"], sealed["config"]["test"]["scorer"]) == ("twins", "fixed")  # the twins default
    pairs = [p for b in sealed["batches"] for p in b["pairs"]]
    assert all(p["heldout"]["id"].startswith(p["suspect"]["id"] + "#") for p in pairs)  # paired by passage
    out = run("verify", str(record), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["twins"]["ok"] and "commitment opens" in checks["twins"]["detail"]  # re-derived from the record
    assert f"({made['passages']} public, " in checks["passages"]["detail"]  # a twins audit's sides, named as such
    assert f"it rests on: commitment {made['commitment']} was public before beacon round {ROUND}" in checks["twins"]["detail"]
    # the changed-position features too were computed again from the recorded answers (twin token ids included)
    assert "twin_ids" in pairs[0]["suspect"]["answers"] and "matches bit-for-bit" in checks["features"]["detail"]
    # black box (greedy tokens only): the changed-position greedy matches, recorded and recomputed too
    black = tmp_path / "black.json"
    out = run("audit", "--twins", str(folder), "--model", "testbed:mini", "--alpha", "0.01", "--access", "black",
              "--features", "twins", "--record", str(black), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["verdict"] == "no evidence" and "black_twin_match" in result["features"]
    assert not any(f.startswith("gray_") for f in result["features"])
    out = run("verify", str(black), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert "matches bit-for-bit" in checks["features"]["detail"] and "black_twin_match" not in checks["features"][
        "detail"].partition("not recomputed")[2]
    manifest = folder / "manifest.json"
    manifest.write_text(manifest.read_text() + "\n")  # any change to the committed manifest
    out = run("verify", str(record), "--json")
    assert out.returncode != 0 and json.loads(out.stdout)["first_failure"]["name"] == "twins"
    assert "not the manifest the audit read" in json.loads(out.stdout)["first_failure"]["detail"]


def test_a_tampered_twins_folder_and_mixed_options_are_one_error_line(tmp_path, mini_testbed):
    folder = tmp_path / "twins"
    out = run("twins", "make", str(mini_testbed / "heldout.jsonl"), "--out", str(folder), "--no-similarity")
    assert one_error_line(out).startswith("error: option --beacon-round: missing; the round of a public randomness")
    out = run("twins", "make", str(mini_testbed / "heldout.jsonl"), "--out", str(folder), "--no-similarity",
              "--beacon-round", ROUND)
    assert out.returncode == 0, out.stderr
    line = one_error_line(run("audit", "--twins", str(folder), "--model", "testbed:mini"))
    assert line == (f"error: {folder}: committed but not released yet: once beacon round {ROUND} exists, run `trainspotter "
                    f"twins release {folder} --beacon ROUND.json` (the round as drand publishes it)")
    assert one_error_line(run("twins", "release", str(folder))).startswith("error: option --beacon: missing")
    assert run("twins", "release", str(folder), "--beacon", STAND_IN_FILE).returncode == 0
    line = one_error_line(run("twins", "release", str(folder), "--beacon", STAND_IN_FILE))
    assert line == (f"error: {folder}: already released with beacon round {ROUND}; a folder is released once (a second draw "
                    f"could choose among rounds)")
    public = folder / "public.jsonl"
    first, *rest = public.read_text().splitlines(keepends=True)
    edited = json.loads(first)
    public.write_text(json.dumps(edited | {"text": edited["text"] + " (edited)"}) + "\n" + "".join(rest))
    line = one_error_line(run("audit", "--twins", str(folder), "--model", "testbed:mini"))
    assert line == (f"error: {public}: sha256 differs from the one in manifest.json: the file was changed after "
                    f"`trainspotter twins release` wrote it")  # the step that wrote it, not twins make
    (folder / "private.jsonl").unlink()  # a third party's copy: what was published, and a changed text
    out = run("twins", "verify", str(folder))
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"the draw DOES NOT hold: passage {edited['id']!r}: the public text is none of its committed variants" in \
        " ".join(out.stdout.split())
    line = one_error_line(run("twins", "verify", str(folder), "--commitment", "abc"))
    assert line == "error: option --commitment: 'abc' is not a sha256 digest (64 hex digits)"
    line = one_error_line(run("audit", "--suspect", str(public), "--heldout", str(public), "--commitment", "ab" * 32,
                              "--model", "testbed:mini"))
    assert line == "error: option --commitment: applies to a twins audit only; give --twins DIR"
    line = one_error_line(run("audit", "--twins", str(folder), "--suspect", str(public), "--model", "testbed:mini"))
    assert "--twins" in line and "--suspect" in line
    assert "--twins DIR" in one_error_line(run("audit", "--model", "testbed:mini"))
    line = one_error_line(run("audit", "--suspect", str(public), "--heldout", str(public), "--features", "twins",
                              "--model", "testbed:mini"))
    assert "twins feature set" in line and "--twins DIR" in line
    line = one_error_line(run("twins", "make", str(mini_testbed / "heldout.jsonl"), "--out", str(folder)))
    assert "not an empty folder" in line


def _finetuned(mini_testbed, texts: list[str], out):
    """The mini testbed's reference fine-tuned as its target was (same steps, rate, seed) on
    ``texts``, saved to ``out``: a model whose training set a test chooses."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainspotter.testbeds.training import save_model, train_causal_lm
    from trainspotter.testbeds.build import PRESETS

    config = PRESETS["mini"]
    tokenizer = AutoTokenizer.from_pretrained(mini_testbed / "reference")
    model = AutoModelForCausalLM.from_pretrained(mini_testbed / "reference")
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    n = min(len(i) for i in ids)  # equal-length blocks, BOS first, as the testbed trains
    blocks = torch.tensor([[tokenizer.bos_token_id] + i[:n] for i in ids])
    train_causal_lm(model, blocks, steps=config.target_epochs, batch_size=config.target_batch_size,
                    lr=config.target_lr, seed=config.seed + 1, epochs=True)
    save_model(model, tokenizer, out)
    return out


def test_released_versions_trained_on_are_found_and_a_leaked_private_set_accuses_no_one(tmp_path, mini_testbed):
    """make twins → release → a model trains on the public versions: "trained on". If the
    private versions leak too and the model trains on both, the model no longer depends on
    the draw (its training texts are every version, in variant order), so the two sides are
    exchangeable again: "trained on" at most α = 0.01 of the time (the guarantee), and the
    explanation says what a leak does."""
    from trainspotter.twins.folder import load_twins

    folder = tmp_path / "twins"
    made = make_and_release(mini_testbed / "heldout.jsonl", folder, "--no-similarity")
    twins = load_twins(folder)
    public = [twins.variants[i][twins.public[i]] for i in twins.ids]
    both = [twins.variants[i][j] for i in twins.ids for j in sorted(twins.variants[i])]  # no trace of the draw
    for model, texts, verdict in [("released", public, "trained on"), ("leaked", both, "no evidence")]:
        path = _finetuned(mini_testbed, texts, tmp_path / model)
        out = run("audit", "--twins", str(folder), "--model", f"hf:{path}", "--alpha", "0.01", "--json")
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["verdict"] == verdict, (model, result["e_value"], result["pairs_used"])
        if model == "released":  # what it rests on: the draw, the commitment and the round it names
            assert (f"That rests on one fact no file shows: commitment {made['commitment']} was public before beacon "
                    f"round {ROUND};") in result["explanation"]
            _unproven_needs_your_word(twins, path, tmp_path)
        if model == "leaked":
            assert "trained on both versions" in result["explanation"] and "leaked" in result["explanation"]


def _unproven_needs_your_word(twins, model, tmp_path):
    """The same draw in a folder made before twins release (version 1: nothing shows it random), as
    a user reads the audit at 80 columns: the model's test rejects, the draw guard makes it
    inconclusive and says what to do (exit 3); vouching for the draw (--assume-exchangeable) makes
    it "trained on", resting on the auditor's word."""
    from studies.framing import write_legacy

    folder = write_legacy(twins, twins.public, tmp_path / "legacy")
    env = os.environ | {"COLUMNS": "80"}
    out = run("audit", "--twins", str(folder), "--model", f"hf:{model}", "--alpha", "0.01", env=env)
    text = " ".join(re.sub("[│┃]", " ", out.stdout).split())  # a table cell's wrapped lines read as one
    assert out.returncode == 3 and "inconclusive: the twins draw is not shown random" in text, out.stdout
    assert ("nothing shows that the public versions were drawn at random: the folder was made before twins release: "
            "its commitment (sha256(salt ‖ draw)) shows the draw was fixed at twins make, not that nobody chose it. "
            "Public versions chosen by a model's preference (the target's own, or the target's over a reference's) "
            "make this test reject about a model that saw none of them, and the placebo check does not catch every "
            "such choice (benchmarks/results/framing.md). What to do: release twins with a beacon (`twins make "
            "--beacon-round N`, publish the commitment, then `twins release --beacon`) and audit those; if you know "
            "this draw was random, say so with --assume-exchangeable and the verdict rests on your word.") in text
    out = run("audit", "--twins", str(folder), "--model", f"hf:{model}", "--alpha", "0.01", "--assume-exchangeable",
              env=env)
    text = " ".join(re.sub("[│┃]", " ", out.stdout).split())
    assert out.returncode == 0 and re.search(r"│ trained on +│", out.stdout), out.stdout  # the decision cell
    assert ("you vouched for it (--assume-exchangeable), so the verdict rests on your word, not on a draw.") in text


def test_make_twins_with_a_generative_rewriter_records_it_and_a_bad_rewriter_is_one_error_line(tmp_path):
    """`twins make --rewriter hf:DIR` with a tiny Llama (random weights, a chat template): the
    folder holds public, private, keys and a manifest recording the generative rewriter (model,
    watermark keyed per variant, the gate it ran under) and no key; a bad --rewriter is one line."""
    from tiny_lm import TEXTS, tiny_llama

    model = tiny_llama(tmp_path / "model", chat=True)
    data = tmp_path / "passages.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    folder = tmp_path / "twins"
    made = make_and_release(data, folder, "--rewriter", f"hf:{model}", "--min-similarity", "-1", "--no-similarity")
    assert made["passages"] == 2 and made["rewriter"]["name"] == "generative"
    manifest = json.loads((folder / "manifest.json").read_text())
    r = manifest["rewriter"]
    assert r["backend"] == "hf" and r["model"] == f"hf:{model}" and r["prompt"] == "chat template"
    assert "one per variant" in r["watermark"]["hashing_key"]
    assert (manifest["max_edit_rate"], manifest["min_similarity"]) == (1.0, -1.0)  # the generative gate
    assert sorted(p.name for p in folder.iterdir()) == ["keys.json", "manifest.json", "private.jsonl", "public.jsonl"]
    public = [json.loads(line) for line in (folder / "public.jsonl").read_text().splitlines()]
    assert [p["id"] for p in public] == ["p0", "p1"] and all(p["text"] not in TEXTS for p in public)
    keys = json.loads((folder / "keys.json").read_text())["keys"]
    assert len(keys) == 2 and not any(key in (folder / "manifest.json").read_text() for key in keys)
    assert run("twins", "verify", str(folder)).returncode == 0
    for bad, problem in [("gpt2", "option --rewriter: rewriter 'gpt2': expected lexical, hf:PATH"),
                         (f"hf:{tmp_path / 'nope'}", "does not exist"),
                         ("openai:m@ftp://x", "expected openai:MODEL@http")]:
        line = one_error_line(run("twins", "make", str(data), "--out", str(tmp_path / "other"), "--rewriter", bad,
                                  "--beacon-round", ROUND))
        assert problem in line, line
    assert not (tmp_path / "other").exists()


def test_make_twins_through_an_openai_chat_endpoint_keeps_the_key_out_of_every_output(tmp_path):
    """`twins make --rewriter openai:MODEL@URL` against a fake chat server: each variant is one chat
    request carrying the prompt and a seed, the key (from $OPENAI_API_KEY) reaches the server only:
    not stdout, stderr, nor any file of the folder; the manifest says there is no watermark."""
    from tiny_lm import TEXTS, ChatHandler, fake_chat_server

    secret = "sk-cli-rewriter-SECRET-4242"
    data = tmp_path / "passages.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    folder = tmp_path / "twins"
    with fake_chat_server() as url:
        out = run_cli(["twins", "make", str(data), "--out", str(folder), "--rewriter", f"openai:para@{url}",
                       "--beacon-round", ROUND, "--json"], timeout=600, env=os.environ | {"OPENAI_API_KEY": secret})
    assert out.returncode == 0, out.stderr
    sent = ChatHandler.requests
    assert len(sent) >= 4 and all(r["auth"] == f"Bearer {secret}" and isinstance(r["body"]["seed"], int)
                                  for r in sent)
    assert {t for r in sent for t in TEXTS if t in r["body"]["messages"][-1]["content"]} == set(TEXTS)
    assert secret not in out.stdout + out.stderr
    assert not any(secret in f.read_text() for f in folder.iterdir())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["rewriter"]["backend"] == "openai" and manifest["rewriter"]["watermark"] is None
    assert manifest["passages"] == 2 and manifest["min_similarity"] == 0.7


def test_make_twins_by_sentence_records_the_unit_and_keeps_each_passages_sentences(tmp_path):
    """`twins make --rewriter hf:DIR` paraphrases sentence by sentence by default (the measured
    generative testbed's way): with a tiny Llama whose every answer is one non-empty sentence
    (tiny_lm.sentence_llama), every variant has as many sentences as its passage (paraphrased
    whole it would have one), and the manifest records the unit; --unit passage is recorded too;
    --unit with the lexical rewriter, or an unknown unit, is one error line."""
    from tiny_lm import sentence_llama

    from trainspotter.twins.folder import load_twins
    from trainspotter.rewriters.generative import split_sentences

    model = sentence_llama(tmp_path / "model")
    texts = ["The river town grew quickly after the railway arrived. Its market became the largest in the region.",
             "A small observatory on the hill recorded the comet! It did so every night for three weeks. Then clouds "
             "covered the sky?",
             "One sentence only."]
    data = tmp_path / "passages.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    env = os.environ | {"COLUMNS": "80"}
    gate = ["--min-similarity", "-1", "--no-similarity", "-k", "3", "--beacon-round", ROUND]
    out = run_cli(["twins", "make", str(data), "--out", str(tmp_path / "twins"), "--rewriter", f"hf:{model}", *gate],
                  env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert run("twins", "release", str(tmp_path / "twins"), "--beacon", STAND_IN_FILE).returncode == 0
    twins = load_twins(tmp_path / "twins")
    assert twins.manifest["rewriter"]["unit"] == "sentence" and twins.ids == ["p0", "p1", "p2"]
    for i, text in zip(twins.ids, texts):
        for variant in twins.variants[i].values():
            assert variant not in texts and len(split_sentences(variant)) == len(split_sentences(text)), variant
    made = make_and_release(data, tmp_path / "whole", "--rewriter", f"hf:{model}", "--unit", "passage", *gate)
    assert made["rewriter"]["unit"] == "passage"
    assert all(len(split_sentences(v)) == 1 for v in load_twins(tmp_path / "whole").variants["p1"].values())
    line = one_error_line(run("twins", "make", str(data), "--out", str(tmp_path / "lex"), "--unit", "sentence",
                              "--beacon-round", ROUND))
    assert line == ("error: option --unit: applies to a generative rewriter (hf:, testbed:, openai:); the lexical "
                    "rewriter rewrites word by word")
    line = one_error_line(run("twins", "make", str(data), "--out", str(tmp_path / "w"), "--rewriter", f"hf:{model}",
                              "--unit", "word", "--beacon-round", ROUND))
    assert line == "error: option --unit: 'word'; expected passage or sentence"
    assert not any((tmp_path / d).exists() for d in ("lex", "w"))


def test_a_draw_from_the_fixed_test_value_is_said_not_shown_random(tmp_path):
    """Released from TEST_BEACON (known to all in advance), the draw re-derives but nothing shows
    nobody chose it: `twins release` and `twins verify` say so in those words, name no fact it
    "rests on", and verify exits 1 without claiming the draw fails."""
    from trainspotter.assets import wikipedia_leads
    from trainspotter.proofs.beacon import TEST_BEACON

    data, folder = tmp_path / "passages.jsonl", tmp_path / "twins"
    data.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in wikipedia_leads()[:8]))
    env = os.environ | {"COLUMNS": "80"}
    made = run("twins", "make", str(data), "--out", str(folder), "--no-similarity", "--beacon-round",
               str(TEST_BEACON.round), env=env)
    assert made.returncode == 0, made.stderr
    said = ("The draw is not shown random: the draw re-derives, but from fixed test value (tests and built-in "
            "testbeds; not a real beacon round), which anyone knew before the commitment: a secret could have "
            "been tried against it until the draw suited a model")
    released = run("twins", "release", str(folder), "--beacon", TEST_BEACON.text, env=env)
    assert released.returncode == 0 and said in " ".join(released.stdout.split()), released.stdout
    assert "rests on:" not in released.stdout
    checked = run("twins", "verify", str(folder), env=env)
    text = " ".join(checked.stdout.split())
    assert checked.returncode == 1 and said in text and "DOES NOT hold" not in text, checked.stdout
