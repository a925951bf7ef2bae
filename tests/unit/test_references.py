"""Reference models of a pre-training testbed (testbeds/reference_models.py, issue 19): what each
OUT and IN model was trained on (recorded at the optimiser's input), reuse when K grows, the
specs testbed:NAME/out-N and /in-N, and builds killed half-way."""

import json
import shutil
from collections import Counter

import numpy as np
import pytest

from trainspotter.backends import load_backend, parse_spec, resolve_spec
from trainspotter.errors import InputError
from trainspotter.testbeds import reference_models as R
from trainspotter.testbeds import build as testbed
from trainspotter.testbeds.build import PRESETS, build_testbed, load_manifest
from cli_process import run_cli

NAME = "mini-pretrain"
CONFIG = PRESETS[NAME]


def _recording_build(k, root=None, testbed_=NAME, **kwargs):
    """build_references(testbed_, k), returning {model: the blocks it was trained on, in visiting
    order} for the models it trained (train_causal_lm's calls, named by their progress stage)."""
    calls, stages = [], []
    real = testbed.train_causal_lm

    def recording(model, blocks, **kw):
        calls.append(blocks[kw["order"]].clone())
        return real(model, blocks, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(testbed, "train_causal_lm", recording)
        R.build_references(testbed_, k, root, progress=lambda s, i, n: stages.append(s) if i == 1 else None,
                           **kwargs)
    assert len(stages) == len(calls)
    return dict(zip(stages, calls))


@pytest.fixture(scope="module")
def refs(artifacts):
    """mini-pretrain in the session's artifacts root with K=1, then grown to K=2."""
    base = build_testbed(CONFIG)
    # from no reference models: another module (the benchmark's) may have built them this session
    shutil.rmtree(R.references_dir(NAME), ignore_errors=True)
    first = _recording_build(1)
    weights = {m: (R.references_dir(NAME) / m / "model.safetensors").stat().st_mtime_ns for m in first}
    second = _recording_build(2)
    return {"base": base, "manifest": load_manifest(NAME), "models": R.load_reference_manifest(NAME)["models"],
            "trained": first | second, "first": first, "second": second, "weights": weights}


def _chunks(base, ids):
    """Every full chunk (BOS first) of the named passages, tokenised with the testbed's tokenizer."""
    from transformers import AutoTokenizer

    from trainspotter.assets import wikipedia_leads

    tok = AutoTokenizer.from_pretrained(base / "target")
    text = {r["id"]: r["text"] for r in wikipedia_leads()}
    L = CONFIG.chunk_tokens
    out = []
    for i in ids:
        t = tok(text[i], add_special_tokens=False)["input_ids"]
        out += [(tok.bos_token_id, *t[s:s + L]) for s in range(0, len(t) - L + 1, L)]
    return out


def _seen(refs, model) -> Counter:
    return Counter(map(tuple, refs["trained"][model].tolist()))


def test_out_models_saw_their_recorded_corpus_and_no_candidate_or_heldout_text(refs):
    splits, corpus = refs["manifest"]["splits"], refs["manifest"]["corpus"]
    outside = set(_chunks(refs["base"], splits["member"] + splits["nonmember"] + splits["heldout"]))
    for model in ("out-0", "out-1"):
        entry, seen = refs["models"][model], _seen(refs, model)
        assert "candidates_in" not in entry and not outside & set(seen)
        # the default recipe: the whole corpus, as the target (only the seed differs)
        assert sorted(entry["corpus"]) == sorted(corpus) and entry["corpus_passages"] == len(corpus) == 400
        # exactly the recorded passages, every block once per epoch
        assert seen == Counter({c: CONFIG.pretrain_epochs for c in _chunks(refs["base"], entry["corpus"])})


def test_in_models_saw_exactly_their_recorded_half_of_the_candidates(refs):
    splits = refs["manifest"]["splits"]
    candidates = splits["member"] + splits["nonmember"]
    heldout = set(_chunks(refs["base"], splits["heldout"]))
    for model in ("in-0", "in-1"):
        entry, seen = refs["models"][model], _seen(refs, model)
        assert len(entry["candidates_in"]) == len(candidates) // 2 == CONFIG.n_per_split
        # as many passages as an OUT model: the candidates take the place of corpus passages
        assert entry["corpus_passages"] + len(entry["candidates_in"]) == refs["models"]["out-0"]["corpus_passages"]
        assert set(entry["candidates_in"]) <= set(candidates)
        chunks_in = _chunks(refs["base"], entry["candidates_in"])
        chunks_out = set(_chunks(refs["base"], sorted(set(candidates) - set(entry["candidates_in"]))))
        assert all(seen[c] == CONFIG.pretrain_epochs for c in chunks_in)
        assert not (chunks_out | heldout) & set(seen)
        assert seen == Counter({c: CONFIG.pretrain_epochs
                                for c in _chunks(refs["base"], entry["corpus"]) + chunks_in})
        assert entry["candidate_blocks"] == len(chunks_in)


def test_in_models_repeat_their_candidates_as_the_target_repeats_its_members(tmp_path, briefly_trained):
    config = CONFIG.model_copy(update={"member_repeats": 2})  # as the tiny-pretrain-2k-xK presets
    base = build_testbed(config, tmp_path)
    trained = _recording_build(1, tmp_path, config)
    entry = R.load_reference_manifest(NAME, tmp_path)["models"]["in-0"]
    chunks_in = _chunks(base, entry["candidates_in"])
    seen_in, seen_out = (Counter(map(tuple, trained[m].tolist())) for m in ("in-0", "out-0"))
    assert chunks_in and all(seen_in[c] == 2 * CONFIG.pretrain_epochs for c in chunks_in)
    assert entry["candidate_blocks"] == 2 * len(chunks_in)
    # the corpus once per epoch, as the target's
    assert {n for c, n in seen_in.items() if c not in set(chunks_in)} == {CONFIG.pretrain_epochs}
    assert set(seen_out.values()) == {CONFIG.pretrain_epochs}


def test_each_model_has_its_own_seed_corpus_subset_and_candidates(refs):
    models = refs["models"]
    assert set(models) == {"out-0", "in-0", "out-1", "in-1"}
    seeds = {e["seed"] for e in models.values()}
    assert len(seeds) == 4 and CONFIG.seed not in seeds
    corpora = {m: frozenset(e["corpus"]) for m, e in models.items()}
    assert corpora["out-0"] == corpora["out-1"] != corpora["in-0"] != corpora["in-1"]
    assert corpora["in-0"] < corpora["out-0"] and corpora["in-1"] < corpora["out-0"]
    assert set(models["in-0"]["candidates_in"]) != set(models["in-1"]["candidates_in"])
    # another seed: another initial model and block order, so the visiting orders differ
    assert not refs["trained"]["out-0"][:8].equal(refs["trained"]["out-1"][:8])


def test_growing_k_trains_only_the_new_models(refs):
    assert list(refs["first"]) == ["out-0", "in-0"] and list(refs["second"]) == ["out-1", "in-1"]
    for model, mtime in refs["weights"].items():  # not rewritten either
        assert (R.references_dir(NAME) / model / "model.safetensors").stat().st_mtime_ns == mtime
    assert _recording_build(2) == {}


def test_reference_specs_load_and_score_their_own_weights(refs):
    texts = [json.loads(line)["text"] for line in (refs["base"] / "member.jsonl").read_text().splitlines()[:5]]
    means = {}
    for model in ("out-0", "in-0", "out-1"):
        spec = parse_spec(f"testbed:{NAME}/{model}?dtype=float32")
        assert spec.role == model and resolve_spec(spec) == R.references_dir(NAME) / model
        means[model] = np.array([s.logprobs.mean() for s in load_backend(spec).score(texts)])
        assert np.isfinite(means[model]).all() and (means[model] < 0).all()
    assert len({m.round(6).tobytes() for m in means.values()}) == 3  # three different models
    assert len({parse_spec(f"testbed:{NAME}/{m}").fingerprint for m in ("target", "out-0", "in-0")}) == 3


def test_a_spec_to_a_model_not_built_names_the_command(refs, tmp_path, monkeypatch):
    with pytest.raises(InputError, match=f"reference model in-4 of testbed '{NAME}' is not built; "
                                         f"run `trainspotter testbed build {NAME} --references 5`"):
        resolve_spec(f"testbed:{NAME}/in-4")
    # read from the files alone (trainspotter.layout), never from evaluation's recipes
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(tmp_path))
    with pytest.raises(InputError, match="testbed 'tiny' is not built; run `trainspotter testbed build tiny`"):
        resolve_spec("testbed:tiny/out-0")
    (tmp_path / "testbeds" / "tiny").mkdir(parents=True)
    (tmp_path / "testbeds" / "tiny" / "manifest.json").write_text(json.dumps({"config": {"mode": "finetune"}}))
    with pytest.raises(InputError, match="testbed 'tiny' has no reference models"):
        resolve_spec("testbed:tiny/out-0")


@pytest.mark.parametrize("role", ["out-01", "out-", "in-x", "mid-1", "out-1/x"])
def test_malformed_reference_roles_are_refused_at_parse_time(role):
    with pytest.raises(InputError, match=f"model spec 'testbed:t/{role}': role must be target or reference"):
        parse_spec(f"testbed:t/{role}")
    assert parse_spec("testbed:t/in-12").role == "in-12"


def test_only_pretraining_testbeds_get_references(monkeypatch):
    monkeypatch.setattr(R, "build_testbed", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(InputError, match="reference models are built for pre-training testbeds without twins only"):
        R.build_references("mini", 1)
    with pytest.raises(InputError, match="at least 1, got 0"):
        R.build_references(NAME, 0)


@pytest.fixture
def copy_root(refs, tmp_path, monkeypatch, briefly_trained):
    """A fresh artifacts root holding a copy of the built base testbed (no reference models),
    whose reference builds train briefly (these tests check what is built and recorded)."""
    shutil.copytree(refs["base"], testbed.testbed_dir(NAME, tmp_path), ignore=shutil.ignore_patterns("refs"))
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(tmp_path))
    return tmp_path


def test_a_model_killed_while_saving_is_not_taken_as_complete(copy_root, monkeypatch):
    real, saved = R.save_model, []

    def dies_on_the_second(model, tok, path):
        real(model, tok, path)  # its files are there, its manifest entry is not
        saved.append(path)
        if len(saved) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(R, "save_model", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        R.build_references(NAME, 1)
    assert set(R.load_reference_manifest(NAME)["models"]) == {"out-0"}
    with pytest.raises(InputError, match="reference model in-0 .* is not built"):
        resolve_spec(f"testbed:{NAME}/in-0")
    monkeypatch.setattr(R, "save_model", real)
    assert list(_recording_build(1)) == ["in-0"]  # rebuilt; out-0 reused
    assert resolve_spec(f"testbed:{NAME}/in-0") == R.references_dir(NAME) / "in-0"

    # a forced rebuild killed half-way: the old model's entry goes before its files do
    monkeypatch.setattr(R, "save_model", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        R.build_references(NAME, 1, force=True)
    assert set(R.load_reference_manifest(NAME)["models"]) == {"in-0"}
    with pytest.raises(InputError, match="reference model out-0 .* is not built"):
        resolve_spec(f"testbed:{NAME}/out-0")


def test_a_rebuilt_base_testbed_invalidates_its_reference_models(copy_root):
    R.build_references(NAME, 1)
    manifest_path = testbed.testbed_dir(NAME) / "manifest.json"
    base = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps(base | {"fingerprint": "another-build"}))  # as a new recipe's build
    assert R.load_reference_manifest(NAME)["models"] == {}
    with pytest.raises(InputError, match="reference model out-0 .* is not built"):
        resolve_spec(f"testbed:{NAME}/out-0")


def test_cli_builds_references_and_reports_seconds_per_model(refs):
    """`testbed build NAME --references 2 --json` over the models built already: reused, and
    the JSON gives each model's build seconds and final loss from the manifest."""
    def run(*args):
        return run_cli(["testbed", "build", *args], timeout=600)

    out = run(NAME, "--references", "2", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout)
    assert list(info["references"]) == ["out-0", "in-0", "out-1", "in-1"]
    for model, row in info["references"].items():
        assert row["build_seconds"] == refs["models"][model]["build_seconds"] > 0
        assert row["final_loss"] == refs["models"][model]["final_loss"]
    assert info["target_final_loss"] == refs["manifest"]["target_final_loss"]
    bad = run("mini", "--references", "1")
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: testbed 'mini': reference models are built for pre-training testbeds without twins only "
        "(tiny-pretrain, tiny-pretrain-2k, tiny-pretrain-2k-x2, tiny-pretrain-2k-x4, tiny-pretrain-keyed, "
        "tiny-pretrain-keyed-3pct, tiny-pretrain-keyed-1pct, tiny-pretrain-keyed-0.3pct, tiny-pretrain-keyed-smollm2, "
        "mini-pretrain, mini-pretrain-keyed)")
    twins = run("mini-pretrain-twins", "--references", "1")
    assert twins.returncode == 2 and "without twins only" in twins.stderr


def test_a_corpus_fraction_gives_each_model_its_own_seeded_subset(copy_root):
    R.build_references(NAME, 1, recipe=R.ReferenceConfig(corpus_fraction=0.5))
    models, corpus = R.load_reference_manifest(NAME)["models"], load_manifest(NAME)["corpus"]
    out, inn = models["out-0"], models["in-0"]
    assert set(out["corpus"]) < set(corpus) and out["corpus_passages"] == len(corpus) // 2
    assert set(inn["corpus"]) < set(corpus) and inn["corpus_passages"] == len(corpus) // 2 - len(inn["candidates_in"])
    assert set(out["corpus"]) != set(inn["corpus"]) | set(out["corpus"])  # subsets of their own
