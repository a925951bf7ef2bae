import json

import numpy as np
import pytest
from brief_training import brief_training

from trainspotter.backends.hf import HFBackend
from trainspotter.data import load_passages
from trainspotter.testbeds.build import (
    PRESETS,
    SPLITS,
    build_testbed,
    load_manifest,
)


def test_splits_are_disjoint_sized_and_recorded(mini_testbed):
    manifest = load_manifest("mini")
    n = PRESETS["mini"].n_per_split
    ids = {s: set(manifest["splits"][s]) for s in SPLITS}
    assert all(len(v) == n for v in ids.values())
    assert not (ids["member"] & ids["nonmember"] or ids["member"] & ids["heldout"]
                or ids["nonmember"] & ids["heldout"])
    for split in SPLITS:
        rows = load_passages(mini_testbed / f"{split}.jsonl")
        assert {r["id"] for r in rows} == ids[split]


def test_chunks_have_the_fixed_token_length(mini_testbed):
    backend = HFBackend(mini_testbed / "reference")
    rows = load_passages(mini_testbed / "member.jsonl")[:20]
    lengths = [len(backend.encode(r["text"])) - 1 for r in rows]
    # decode -> re-encode of a byte-level BPE chunk can merge at most a few tokens
    assert all(58 <= n <= PRESETS["mini"].chunk_tokens for n in lengths), lengths


def test_target_memorised_members_and_reference_did_not(mini_testbed):
    def mean_nll(model, split):
        texts = [r["text"] for r in load_passages(mini_testbed / f"{split}.jsonl")]
        return -np.mean([s.logprobs.mean() for s in model.score(texts)])

    target, ref = HFBackend(mini_testbed / "target"), HFBackend(mini_testbed / "reference")
    t_mem, t_held = mean_nll(target, "member"), mean_nll(target, "heldout")
    r_mem, r_held = mean_nll(ref, "member"), mean_nll(ref, "heldout")
    assert t_mem < t_held - 0.5  # fine-tuning lowered member loss by > 0.5 nats/token
    assert abs(r_mem - r_held) < 0.25  # the reference never saw either


def test_rebuild_is_cached_by_config(mini_testbed):
    before = (mini_testbed / "manifest.json").stat().st_mtime_ns
    build_testbed(PRESETS["mini"])
    assert (mini_testbed / "manifest.json").stat().st_mtime_ns == before
    assert json.loads((mini_testbed / "manifest.json").read_text())["config"]["name"] == "mini"


def _tiny_lm(seed=0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=2, max_position_embeddings=32))


def _blocks(seed, n=16, length=12):
    import torch

    return torch.randint(0, 64, (n, length), generator=torch.Generator().manual_seed(seed))


def test_finetune_keeps_the_epoch_with_the_lowest_validation_loss():
    """EZ-MIA App. A: the saved target is the best epoch on validation, not the last one
    (random tokens: members get memorised while validation loss turns up)."""
    from trainspotter.testbeds.training import finetune, mean_loss

    config = PRESETS["smollm2"].model_copy(update={"target_epochs": 6, "target_lr": 3e-2,
                                                   "target_batch_size": 4})
    model, epochs = finetune(_tiny_lm(), _blocks(1), _blocks(2), config, None)
    val = [e["validation_loss"] for e in epochs]
    assert len(val) == 6 and val.index(min(val)) < 5  # the last epoch was not the best here
    assert mean_loss(model, _blocks(2)) == pytest.approx(min(val), rel=1e-6)


def test_lora_finetune_trains_only_attention_adapters_and_merges_them():
    import torch

    from trainspotter.testbeds.training import finetune

    base = _tiny_lm()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    config = PRESETS["smollm2-lora"].model_copy(update={"target_epochs": 2, "target_lr": 1e-2,
                                                        "target_batch_size": 4, "lora_r": 4})
    model, _ = finetune(base, _blocks(1), _blocks(2), config, None)
    after = model.state_dict()
    assert type(model).__name__ == "LlamaForCausalLM" and set(after) == set(before)  # merged, plain
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(any(p in k for p in ("q_proj", "k_proj", "v_proj", "o_proj")) for k in changed)


def test_concurrent_builds_of_one_testbed_build_it_once(tmp_path, monkeypatch):
    """Two processes (here threads, each with its own lock file handle) asking for the same
    testbed: the second waits for the first build and reuses it instead of overwriting it."""
    import threading
    import time

    from trainspotter.testbeds import build as testbed

    calls = []

    def slow_build(config, out, key, progress):
        calls.append(config.name)
        time.sleep(0.5)
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").write_text(json.dumps({"fingerprint": key}))
        return out

    monkeypatch.setattr(testbed, "_build", slow_build)
    config = PRESETS["mini"].model_copy(update={"name": "race"})
    threads = [threading.Thread(target=build_testbed, args=(config, tmp_path)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert calls == ["race"]


def test_a_held_build_lock_times_out_naming_the_lock_file(tmp_path, monkeypatch):
    """A build that cannot get the lock in ``lock_timeout`` s fails with one line naming the
    lock file, without building."""
    from filelock import FileLock

    from trainspotter.errors import InputError
    from trainspotter.testbeds import build as testbed

    monkeypatch.setattr(testbed, "_build", lambda *a: pytest.fail("built without the lock"))
    config = PRESETS["mini"].model_copy(update={"name": "held"})
    lock_file = tmp_path / "testbeds" / ".held.lock"
    lock_file.parent.mkdir(parents=True)
    with FileLock(lock_file):  # another holder (its own file handle, as another process has)
        with pytest.raises(InputError, match=f"build lock {lock_file}"):
            build_testbed(config, tmp_path, lock_timeout=0.2)


@pytest.fixture(scope="module", params=[1, 2], ids=["once", "repeated"])
def pretrain_build(tmp_path_factory, request):
    """`mini-pretrain` built in a fresh root, recording what each model was trained on; also
    with every member block repeated (``member_repeats``, the tiny-pretrain-2k-xK presets)."""
    from trainspotter.testbeds import build as testbed

    seen = []

    def recording(model, blocks, **kwargs):
        seen.append((blocks.clone(), kwargs["order"].clone()))
        return real(model, blocks, **kwargs)

    root = tmp_path_factory.mktemp("pretrain")
    config = PRESETS["mini-pretrain"].model_copy(update={"member_repeats": request.param})
    with pytest.MonkeyPatch.context() as mp:
        brief_training(mp)  # what is trained, recorded before the call, not how well
        real = testbed.train_causal_lm
        mp.setattr(testbed, "train_causal_lm", recording)
        out = build_testbed(config, root)
    (ref_blocks, ref_order), (tgt_blocks, tgt_order) = seen  # reference is trained first
    return out, load_manifest("mini-pretrain", root), {
        "reference": ref_blocks[ref_order], "target": tgt_blocks[tgt_order]}


def _passage_chunks(out, ids, length):
    """Every full `length`-token chunk (BOS first) of the named Wikipedia passages, re-tokenised
    with the testbed's tokenizer, as tuples."""
    from transformers import AutoTokenizer

    from trainspotter.assets import wikipedia_leads

    tok = AutoTokenizer.from_pretrained(out / "target")
    text = {r["id"]: r["text"] for r in wikipedia_leads()}
    chunks = []
    for i in ids:
        ids_ = tok(text[i], add_special_tokens=False)["input_ids"]
        chunks += [tuple([tok.bos_token_id] + ids_[s:s + length])
                   for s in range(0, len(ids_) - length + 1, length)]
    return chunks


def test_pretrain_members_are_trained_k_times_per_epoch_by_the_target_only(pretrain_build):
    from collections import Counter

    out, manifest, trained = pretrain_build
    config, k = PRESETS["mini-pretrain"], manifest["member_repeats"]
    members = _passage_chunks(out, manifest["splits"]["member"], config.chunk_tokens)
    assert len(members) == manifest["member_blocks"] >= config.n_per_split  # >= 1 chunk each
    target = Counter(map(tuple, trained["target"].tolist()))
    reference = Counter(map(tuple, trained["reference"].tolist()))
    assert all(target[c] == config.pretrain_epochs * k for c in members)
    assert not any(reference[c] for c in members)
    # the reference saw exactly the target's blocks minus the members'
    assert target - reference == Counter({c: config.pretrain_epochs * k for c in members})
    # the copies are spread by the shuffle, not trained back to back
    positions = [i for i, row in enumerate(trained["target"].tolist()) if tuple(row) == members[0]]
    assert len(positions) == config.pretrain_epochs * k and (k == 1 or min(np.diff(positions)) > 1)


def test_pretrain_nonmember_and_heldout_passages_are_in_neither_corpus(pretrain_build):
    out, manifest, trained = pretrain_build
    outside = manifest["splits"]["nonmember"] + manifest["splits"]["heldout"]
    assert not set(outside) & set(manifest["corpus"])
    assert not set(manifest["splits"]["member"]) & set(manifest["corpus"])
    chunks = set(_passage_chunks(out, outside, PRESETS["mini-pretrain"].chunk_tokens))
    assert len(chunks) >= len(outside)
    for role in ("target", "reference"):
        assert not chunks & set(map(tuple, trained[role].tolist())), role


def test_pretrain_manifest_member_fraction_is_the_member_share_of_trained_tokens(pretrain_build):
    out, manifest, trained = pretrain_build
    members = set(_passage_chunks(out, manifest["splits"]["member"],
                                  PRESETS["mini-pretrain"].chunk_tokens))
    target = trained["target"]
    member_rows = sum(tuple(row) in members for row in target.tolist())
    assert manifest["member_fraction"] == pytest.approx(member_rows / len(target), rel=1e-12)
    per_epoch = len(target) // manifest["epochs"]
    assert manifest["member_tokens"] + manifest["corpus_tokens"] == per_epoch * target.shape[1]
    assert manifest["corpus_tokens"] == trained["reference"].numel() // manifest["epochs"]
    assert manifest["target_steps"] == -(-len(target) // PRESETS["mini-pretrain"].batch_size)


def test_a_rebuild_killed_half_way_is_not_taken_for_a_finished_testbed(tmp_path, monkeypatch):
    """--force (or a new recipe) over a built testbed: until the new manifest is written last,
    none is there, so a build that dies mid-way is rebuilt next time, not reused half-written."""
    from trainspotter.testbeds import build as testbed

    config = PRESETS["mini"].model_copy(update={"name": "killed"})
    out = testbed.testbed_dir(config.name, tmp_path)
    out.mkdir(parents=True)
    key = testbed.fingerprint(config, testbed.__version__)
    (out / "manifest.json").write_text(json.dumps({"fingerprint": key}))  # a finished build

    def dies(*a, **k):  # the first step after the build starts writing
        raise KeyboardInterrupt

    monkeypatch.setattr(testbed, "wikipedia_leads", dies)
    with pytest.raises(KeyboardInterrupt):
        build_testbed(config, tmp_path, force=True)
    assert testbed.load_manifest(config.name, tmp_path) is None
    calls = []
    monkeypatch.setattr(testbed, "_build", lambda c, o, k, p: calls.append(c.name) or o)
    build_testbed(config, tmp_path)
    assert calls == ["killed"]


def test_member_repeats_at_one_keeps_the_fingerprint_of_earlier_builds():
    from trainspotter.config import fingerprint

    once, twice = PRESETS["tiny-pretrain-2k"], PRESETS["tiny-pretrain-2k-x2"]
    assert "member_repeats" not in once.model_dump()  # testbeds built before the field stay valid
    assert twice.model_dump()["member_repeats"] == 2
    assert fingerprint(twice) != fingerprint(once.model_copy(update={"name": twice.name}))


def test_twins_testbed_trains_members_public_versions_only(tmp_path):
    """`mini-pretrain-twins`: the target trains on each member's public version (its audited
    first chunk among its blocks), on no private version and on no non-member's version; the
    reference on none of them; each split's twins folder opens its commitment and its public
    versions are the split file."""
    from transformers import AutoTokenizer

    from trainspotter.testbeds import build as testbed
    from trainspotter.twins.folder import load_twins, verify_commitment

    seen = []

    def recording(model, blocks, **kwargs):
        seen.append(set(map(tuple, blocks[kwargs["order"]].tolist())))
        return real(model, blocks, **kwargs)

    config = PRESETS["mini-pretrain-twins"]
    with pytest.MonkeyPatch.context() as mp:
        brief_training(mp)  # what is trained, recorded before the call, not how well
        real = testbed.train_causal_lm
        mp.setattr(testbed, "train_causal_lm", recording)
        out = build_testbed(config, tmp_path)
    reference, target = seen
    tok = AutoTokenizer.from_pretrained(out / "target")

    def chunk(text):
        return tuple([tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"][:config.chunk_tokens])

    for split in ("member", "nonmember"):
        folder = out / f"twins-{split}"
        twins = load_twins(folder)
        assert verify_commitment(folder) and len(twins.ids) >= config.n_per_split // 2
        public, private = twins.sides()
        assert [json.loads(line)["text"] for line in (out / f"{split}.jsonl").read_text().splitlines()] == \
            [p["text"] for p in public]
        assert all(p["text"] != q["text"] for p, q in zip(public, private))
        assert not any(chunk(q["text"]) in target | reference for q in private)
        hits = sum(chunk(p["text"]) in target for p in public)
        # a member's public chunk re-tokenised from its decoded text is (nearly always) the trained block
        assert (hits >= 0.9 * len(public)) if split == "member" else hits == 0
        assert not any(chunk(p["text"]) in reference for p in public)


def test_twins_at_zero_keeps_the_fingerprint_of_earlier_builds():
    assert "twins" not in PRESETS["tiny-pretrain"].model_dump()
    assert "twins_rewriter" not in PRESETS["tiny-pretrain"].model_dump()
    # the fingerprints (with version 0.1.0) of these presets before twins_rewriter existed
    from trainspotter.config import fingerprint

    assert fingerprint(PRESETS["tiny-pretrain"], "0.1.0") == "d60fe42179b9a00d"
    assert fingerprint(PRESETS["tiny"], "0.1.0") == "a7e24244ecefc07e"
    assert PRESETS["tiny-pretrain-twins"].model_dump()["twins"] == 2


def test_the_twins_rewriter_is_in_the_fingerprint():
    """A twins testbed records its rewriter's settings (with its version) and how its keys are
    drawn, so a testbed made by another rewriter is rebuilt, never silently reused."""
    from trainspotter.config import fingerprint
    from trainspotter.errors import InputError
    from trainspotter.testbeds.build import TestbedConfig
    from trainspotter.testbeds.twins_variant import rewriter_of
    from trainspotter.rewriters.lexical import KeyedLexicalRewriter

    twins = PRESETS["tiny-pretrain-twins"]
    assert twins.model_dump()["twins_rewriter"] == KeyedLexicalRewriter().describe() | {"keys": "per split"}
    assert twins.twins_rewriter["version"] == 2
    older = twins.model_copy(update={"twins_rewriter": KeyedLexicalRewriter(rate=0.5, senses=1).describe()})
    assert fingerprint(older) != fingerprint(twins)
    rewriter, per_split = rewriter_of(older)
    assert rewriter.describe() == older.twins_rewriter and not per_split  # no "keys": shared, as before
    with pytest.raises(InputError, match="not one this version"):  # a version-1 description is refused
        rewriter_of(twins.model_copy(update={"twins_rewriter": {"name": "keyed-lexical", "rate": 0.5}}))
    # "per passage" (the unkeyed control): per-split keys re-derived per passage, so a key's choice of
    # the same words differs between passages (keyed: the same tail in all 4; here 4 keys × 4 passages)
    unkeyed = twins.model_copy(update={"twins_rewriter": twins.twins_rewriter | {"keys": "per passage"}})
    assert fingerprint(unkeyed) != fingerprint(twins)
    rewriter, per_split = rewriter_of(unkeyed)
    assert per_split and rewriter.describe() == KeyedLexicalRewriter().describe()
    texts = [f"Passage {n}: the {w} grew while the river ran, because it is not clear; however, they stayed."
             for n, w in enumerate(["town", "city", "village", "port"])]
    keyed, _ = rewriter_of(twins)
    for key in (bytes([j]) * 32 for j in range(4)):
        assert len({keyed.rewrite(t, key).split(" grew ", 1)[1] for t in texts}) == 1
    tails = [{rewriter.rewrite(t, bytes([j]) * 32).split(" grew ", 1)[1] for t in texts} for j in range(4)]
    assert max(len(t) for t in tails) > 1, tails
    with pytest.raises(InputError, match="not one this version"):
        rewriter_of(twins.model_copy(update={"twins_rewriter": twins.twins_rewriter | {"keys": "per word"}}))
    # a copy that sets twins without the rewriter gets it when built (build_testbed validates again)
    copied = PRESETS["mini-pretrain"].model_copy(update={"twins": 2})
    assert TestbedConfig.model_validate(copied.model_dump()).twins_rewriter == twins.twins_rewriter


def test_a_generative_twins_testbed_replays_the_table_it_names_by_sha256():
    """tiny-pretrain-twins-smollm2's paraphrases are a table in the repository (made on a GPU):
    the preset names it by path and sha256, so another table (or none) is refused, and its rows
    cover every variant key of every split passage that the build asks for."""
    from trainspotter.config import fingerprint
    from trainspotter.errors import InputError
    from trainspotter.testbeds.twins_variant import rewriter_of, split_keys
    from trainspotter.rewriters.generative import key_fingerprint

    bed = PRESETS["tiny-pretrain-twins-smollm2"]
    rewriter, per_split = rewriter_of(bed)
    assert rewriter.name == "table" and per_split and rewriter.describe()["sha256"] == bed.twins_rewriter["sha256"]
    keys = {key_fingerprint(key) for split in ("member", "nonmember", "heldout") for key in split_keys(bed, split)}
    assert {k for _, k, _ in rewriter.rows} == keys and len(rewriter.rows) == 3 * 1000 * 4
    other = bed.model_copy(update={"twins_rewriter": bed.twins_rewriter | {"sha256": "0" * 64}})
    assert fingerprint(other) != fingerprint(bed)
    with pytest.raises(InputError, match="another paraphrase table"):
        rewriter_of(other)
    with pytest.raises(InputError, match="is not in this checkout"):
        rewriter_of(bed.model_copy(update={"twins_rewriter": bed.twins_rewriter | {"path": "nowhere.jsonl.gz"}}))
