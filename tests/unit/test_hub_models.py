"""Models named by hub id (issue 65): ``hf:ORG/NAME[@REVISION]`` resolved to a snapshot of a hub
cache made in the test (tests/hub_cache.py) holding a tiny Llama, offline. The commit is the
model's identity: its fingerprint and extract cache key (a moved ``main`` is never a cache hit), the
sealed record's model section, the MLflow params and the report, and ``verify --requery``'s load."""

import fnmatch
import shutil
from pathlib import Path

import pytest

from hub_cache import repo_folder, write_snapshot
from trainspotter.backends import load_backend, parse_spec, resolve_spec
from trainspotter.backends.hub_models import MODEL_FILES, TOKENIZER_FILES, model_snapshot
from trainspotter.backends.spec import api_config, check_loadable
from trainspotter.errors import InputError
from trainspotter.record.format import model_identity

A, B, C = "a1" * 20, "b2" * 20, "c3" * 20


def other_weights(folder, to):
    """A copy of the model in ``folder`` whose weights are all doubled (another model, same files)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(folder, to)
    tensors = load_file(to / "model.safetensors")
    save_file({k: v * 2 for k, v in tensors.items()}, to / "model.safetensors", metadata={"format": "pt"})
    return to


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from tiny_lm import tiny_llama

    root = tmp_path_factory.mktemp("hub-models")
    tiny = tiny_llama(root / "tiny", chat=False)
    return tiny, other_weights(tiny, root / "doubled")


@pytest.fixture
def cache(tmp_path, monkeypatch, models):
    """``org/tiny``: commit A on main, commit B (other weights) on branch v2."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    hub = tmp_path / "home" / "hub"
    write_snapshot(hub, "model", "org/tiny", {"": models[0]}, A)
    write_snapshot(hub, "model", "org/tiny", {"": models[1]}, B, ref="v2")
    return hub


def test_a_hub_id_and_a_revision_each_resolve_to_their_snapshot_once(cache):
    main, v2 = parse_spec("hf:org/tiny?dtype=float32"), parse_spec("hf:org/tiny@v2")
    assert check_loadable(main) == cache / "models--org--tiny" / "snapshots" / A and main.commit == A
    assert resolve_spec(v2).name == B and v2.snapshot.revision == "v2" and v2.snapshot.name == f"org/tiny@{B}"
    (repo_folder(cache, "model", "org/tiny") / "refs" / "main").write_text(B)  # moved after the spec was resolved:
    assert resolve_spec(main).name == A  # the spec keeps the commit it resolved to
    assert main.fingerprint != v2.fingerprint  # other weights


def test_a_local_folder_of_that_name_wins(cache, models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(models[1], tmp_path / "org" / "tiny")
    spec = parse_spec("hf:org/tiny")
    assert spec.snapshot is None and spec.commit is None and resolve_spec(spec) == Path("org/tiny")
    assert "hub" not in model_identity(spec)


def test_a_moved_main_is_a_new_fingerprint_and_extract_key_even_with_the_same_weights(cache, models):
    from trainspotter.features.features import FeatureConfig
    from trainspotter.tasks.extract import chunk_cache_key

    def key(spec):
        return chunk_cache_key(None, {"model": spec, "reference": None, "access": "gray", "features": FeatureConfig(),
                                      "passages": [{"id": "a", "text": "some text"}]})

    before = parse_spec("hf:org/tiny")
    assert before.commit == A  # resolved (an audit's edge resolves it: check_loadable)
    write_snapshot(cache, "model", "org/tiny", {"": models[0]}, C)  # main moved: same files, another commit
    after = parse_spec("hf:org/tiny")
    assert after.commit == C and before == after  # written alike ...
    assert model_identity(before)["weights_sha256"] == model_identity(after)["weights_sha256"]
    assert before.fingerprint != after.fingerprint and key(before) != key(after)  # ... never one cache entry
    assert load_backend(before) is not load_backend(after)  # nor one loaded model
    assert key(parse_spec(f"hf:org/tiny@{C}")) == key(after)  # the commit pinned: the same model


def test_an_uncached_id_is_one_input_error_naming_it_the_cache_and_the_fetch(cache):
    for spec, words in [("hf:org/absent", ["model spec hf:org/absent: not in the Hugging Face cache",
                                            "`hf download org/absent`"]),
                        ("hf:org/tiny@v3", ["model spec hf:org/tiny@v3: not in", "--revision v3"])]:
        with pytest.raises(InputError) as e:
            check_loadable(spec)
        assert all(w in str(e.value) for w in [*words, str(cache), "HF_HUB_OFFLINE=1"]) and "\n" not in str(e.value)
        assert str(e.value).endswith(f"(nor is {spec[3:]} a local folder or file)")  # a mistyped folder, maybe


def test_the_record_names_the_id_the_revision_asked_and_the_commit(cache):
    from trainspotter.record.format import file_sha256

    identity = model_identity(parse_spec("hf:org/tiny@v2"))
    assert identity["hub"] == {"id": "org/tiny", "revision": "v2", "commit": B} and identity["spec"] == "hf:org/tiny@v2"
    snapshot = cache / "models--org--tiny" / "snapshots" / B
    assert identity["weights_sha256"] == {"model.safetensors": file_sha256(snapshot / "model.safetensors")}
    assert model_identity(parse_spec("hf:org/tiny"))["hub"] == {"id": "org/tiny", "revision": None, "commit": A}


def test_requery_loads_the_recorded_commit_not_where_the_branch_points_now(cache):
    from trainspotter.record.requery import _recorded, _same

    spec = parse_spec("hf:org/tiny?dtype=bfloat16")
    identity = model_identity(spec)
    (repo_folder(cache, "model", "org/tiny") / "refs" / "main").write_text(B)  # main moved since the audit
    again = _recorded(parse_spec("hf:org/tiny?dtype=bfloat16"), identity)
    assert again.text == f"hf:org/tiny@{A}?dtype=bfloat16" and again.commit == A
    assert _same(model_identity(again), identity) and not _same(model_identity(parse_spec("hf:org/tiny")), identity)
    assert _recorded(parse_spec("hf:org/tiny@v2"), {"hub": {"commit": B}}).base == f"hf:org/tiny@{B}"


def test_an_api_tokenizer_may_be_named_by_hub_id(cache):
    bare, spec = (parse_spec(f"openai:m@http://127.0.0.1:9/v1?tokenizer={t}") for t in ("org/tiny@v2", "hf:org/tiny"))
    assert api_config(bare).tokenizer == str(cache / "models--org--tiny" / "snapshots" / B)
    assert api_config(spec).tokenizer.endswith(A) and not bare.tokenizer.weights
    assert model_identity(bare)["tokenizer"] == {"hub": {"id": "org/tiny", "revision": "v2", "commit": B}}


def test_the_patterns_fetch_what_a_saved_model_holds_and_bin_weights_only_without_safetensors(models, monkeypatch,
                                                                                            tmp_path):
    import trainspotter.backends.hub_models as hm
    from trainspotter.hub import Snapshot

    saved = [p.name for p in models[0].iterdir()]
    assert all(any(fnmatch.fnmatch(n, p) for p in MODEL_FILES) for n in saved), saved
    assert not any(fnmatch.fnmatch("model.safetensors", p) for p in TOKENIZER_FILES)
    calls = []
    bins = tmp_path / "bins"
    bins.mkdir()
    (bins / "pytorch_model.bin").write_bytes(b"")

    def resolve(repo, revision, allow_patterns, where):
        calls.append((revision, allow_patterns))
        return Snapshot("model", repo, revision, A, models[0] if len(calls) == 1 and not older else bins)

    monkeypatch.setattr(hm, "resolve_snapshot", resolve)
    for older in (False, True):
        calls.clear()
        snap = model_snapshot(parse_spec("hf:org/m@v1"))
        assert snap.revision == "v1" and not any(".bin" in p for p in calls[0][1]) and "*.safetensors" in calls[0][1]
        assert len(calls) == (2 if older else 1)
    assert calls[1][0] == A and "pytorch_model*.bin" in calls[1][1]  # the same commit, its .bin weights too


def test_mlflow_params_and_the_report_name_the_snapshot(cache):
    from trainspotter.auditing.config import AuditConfig
    from trainspotter.flows.tracking import _named, absolute_paths, snapshot_params

    config = AuditConfig(suspect="s.jsonl", heldout="h.jsonl", model="hf:org/tiny", reference=["hf:org/tiny@v2"])
    assert snapshot_params(config) == {"model_snapshot": f"org/tiny@{A}", "reference_snapshot": f"org/tiny@{B}"}
    assert absolute_paths({"model": "hf:org/tiny@v2"}) == {"model": "hf:org/tiny@v2"}
    named = _named(config.model)
    assert named["snapshot"] == f"org/tiny@{A}" and named["spec"] == "hf:org/tiny"
    assert "snapshot" not in _named(parse_spec(f"hf:{cache / 'models--org--tiny' / 'snapshots' / A}"))
