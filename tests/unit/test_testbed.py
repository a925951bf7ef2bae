import json

import numpy as np

from trainspotter.backends.hf import HFBackend
from trainspotter.data import load_passages
from trainspotter.testbed import PRESETS, SPLITS, build_testbed, load_manifest


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
