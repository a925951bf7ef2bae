"""Keyed-release testbeds (issue 53): the member split released under one key (``twins.keyed``:
committed with a secret drawn from the testbed's seed, released with ``TEST_BEACON``), the members
trained on their public versions; ``evaluation.testbed`` calls ``build_keyed`` for the splits."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainspotter.evaluation.recipes import TestbedConfig

__all__ = ["build_keyed", "keyed_secret"]

RELEASE = "release"  # the testbed's keyed release folder


def keyed_secret(config: TestbedConfig) -> bytes:
    """The owner's secret of a testbed's release: from the seed (a testbed is reproducible; a real
    release draws it from the operating system's generator)."""
    return random.Random(f"{config.seed}:keyed").randbytes(32)


def build_keyed(config: TestbedConfig, records: list[dict], encoded: list[list[int]], tokenizer,
                chosen: dict[str, list[int]], out: Path) -> tuple[dict[str, list[int]], dict]:
    """The first ``keyed_members`` (all by default) member passages committed and released under
    one key (the keyed lexical rewriter); ``encoded[i]`` becomes a member's public version (what
    the target trains on; one shorter than a chunk is dropped). Returns the splits (the member
    split: the release) and what the manifest records."""
    from trainspotter.twins.beacon import TEST_BEACON
    from trainspotter.twins.keyed import commit_release, load_release, release
    from trainspotter.twins.lexical import KeyedLexicalRewriter

    members = chosen["member"][:config.keyed_members]
    folder = out / RELEASE
    shutil.rmtree(folder, ignore_errors=True)  # a rebuild commits again (same secret: same key)
    commit_release([{"id": records[i]["id"], "text": records[i]["text"]} for i in members], folder,
                   KeyedLexicalRewriter(), secret=keyed_secret(config))
    release(folder, TEST_BEACON)
    kept = []
    for i, p in zip(members, load_release(folder).public):
        ids = tokenizer(p["text"], add_special_tokens=False)["input_ids"]
        if len(ids) >= config.chunk_tokens:
            encoded[i] = ids
            kept.append(i)
    made = {"folder": RELEASE, "rewriter": "keyed-lexical (one key for every member)", "released": len(members),
            "members": len(kept), "key": "derive(secret from the seed, TEST_BEACON, 'keyed-release')"}
    return chosen | {"member": kept}, made
