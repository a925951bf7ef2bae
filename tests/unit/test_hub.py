"""Hub ids resolved to a snapshot of a hub cache made in the test (tests/hub_cache.py), offline."""

import pytest

from hub_cache import write_snapshot
from trainspotter.errors import InputError
from trainspotter.hub import cache_dir, is_hub_id, resolve_snapshot, split_revision

A, B = "a1" * 20, "b2" * 20


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    hub = tmp_path / "home" / "hub"
    write_snapshot(hub, "model", "org/tiny", {"config.json": b'{"v": 1}'}, A)
    write_snapshot(hub, "model", "org/tiny", {"config.json": b'{"v": 2}'}, B, ref="v2")
    return hub


def test_the_default_branch_a_branch_and_a_commit_each_resolve_to_their_snapshot(cache):
    assert cache_dir() == cache
    main, v2, pinned = (resolve_snapshot("org/tiny", r) for r in (None, "v2", A))
    assert (main.commit, v2.commit, pinned.commit) == (A, B, A)
    assert (v2.path / "config.json").read_text() == '{"v": 2}' and main.name == f"org/tiny@{A}"
    assert (main.revision, v2.revision) == (None, "v2")


def test_a_moved_branch_is_another_snapshot(cache):
    (cache / "models--org--tiny" / "refs" / "main").write_text(B)
    assert resolve_snapshot("org/tiny").commit == B


@pytest.mark.parametrize("repo, revision, words", [
    ("org/absent", None, ["org/absent: not in the Hugging Face cache", "HF_HUB_OFFLINE=1", "`hf download org/absent`"]),
    ("org/tiny", "v3", ["org/tiny@v3: not in the Hugging Face cache", "`hf download org/tiny --revision v3`"]),
])
def test_an_id_the_cache_lacks_offline_is_one_error_naming_it_and_how_to_fetch_it(cache, repo, revision, words):
    with pytest.raises(InputError) as e:
        resolve_snapshot(repo, revision, where="option --model: ")
    assert str(e.value).startswith("option --model: ") and str(cache) in str(e.value)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_a_local_folder_is_never_read_as_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "suspect").mkdir(parents=True)
    assert not is_hub_id("models/suspect") and is_hub_id("models/other") and is_hub_id("org/name@v1.0")
    assert not is_hub_id("a/b/c") and not is_hub_id("name") and not is_hub_id("/abs/path") and not is_hub_id("o/a--b")
    assert split_revision("org/name@v1.0") == ("org/name", "v1.0") and split_revision("org/name") == ("org/name", None)
