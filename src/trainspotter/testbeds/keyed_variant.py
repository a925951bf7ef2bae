"""Keyed-release testbeds (issue 53): the member split released under one key (``keyed.release``:
committed with a secret drawn from the testbed's seed, released with ``TEST_BEACON``), the members
trained on their public versions; ``testbeds.build`` calls ``build_keyed`` for the splits."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainspotter.testbeds.recipes import TestbedConfig

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
    from trainspotter.proofs.beacon import TEST_BEACON
    from trainspotter.keyed.release import commit_release, load_release, release
    from trainspotter.rewriters.lexical import KeyedLexicalRewriter

    members = chosen["member"][:config.keyed_members]
    folder = out / RELEASE
    shutil.rmtree(folder, ignore_errors=True)  # a rebuild commits again (same secret: same key)
    if config.keyed == "smollm2":
        public, made = _table_release(config, records, members, folder)
    else:
        commit_release([{"id": records[i]["id"], "text": records[i]["text"]} for i in members], folder,
                       KeyedLexicalRewriter(), beacon_round=TEST_BEACON.round, secret=keyed_secret(config))
        release(folder, TEST_BEACON)
        public = [p["text"] for p in load_release(folder).public]
        made = {"rewriter": "keyed-lexical (one key for every member)",
                "key": "derive(secret from the seed, TEST_BEACON, 'keyed-release')"}
    kept = []
    for i, text in zip(members, public):
        if text is None:
            continue
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) >= config.chunk_tokens:
            encoded[i] = ids
            kept.append(i)
    made = {"folder": RELEASE, "released": len(members), "members": len(kept)} | made
    return chosen | {"member": kept}, made


def _table_release(config: TestbedConfig, records: list[dict], members: list[int], folder: Path
                   ) -> tuple[list[str | None], dict]:
    """The generative release from the committed SmolLM2 paraphrases (tiny-pretrain-twins-smollm2's
    table): of the member split's four variant keys, the beacon picks one,
    ``uniform_index(derive(secret, TEST_BEACON, "keyed-release/table-variant"), 4)``, and every
    member's public version is its paraphrase under that key (attempt 0; None where the table has
    none). release/keyed-table.json names the key and how its green lists are drawn."""
    import json

    from trainspotter.errors import InputError
    from trainspotter.testbeds.twins_variant import rewriter_of, split_keys
    from trainspotter.presets import TESTBEDS
    from trainspotter.proofs.beacon import TEST_BEACON, derive, uniform_index
    from trainspotter.rewriters.generative import key_fingerprint, watermark_key

    table = TESTBEDS["tiny-pretrain-twins-smollm2"].recipe
    rewriter, _ = rewriter_of(config.model_copy(update={"twins": table["twins"],
                                                        "twins_rewriter": table["twins_rewriter"]}))
    keys = split_keys(config.model_copy(update={"twins": table["twins"]}), "member")
    j = uniform_index(derive(keyed_secret(config), TEST_BEACON, "keyed-release/table-variant"), len(keys))
    public = []
    for i in members:
        try:
            public.append(rewriter.rewrite(records[i]["text"], keys[j]))
        except InputError:  # no paraphrase of this passage under the key (or an empty one)
            public.append(None)
    folder.mkdir(parents=True)
    made = {"rewriter": "SmolLM2-135M-Instruct paraphrases under one transformers watermark key (the committed "
                        "table)", "variant": j, "key": key_fingerprint(keys[j]),
            "scheme": "transformers-lefthash-cuda", "gamma": 0.25, "vocab_size": 49152,
            "tokenizer": "SmolLM2-135M-Instruct (packaged gguf)", "table_sha256": rewriter.sha256}
    (folder / "keyed-table.json").write_text(json.dumps(made | {"variant_key": keys[j].hex(),
                                                                "hashing_key": watermark_key(keys[j])}, indent=1))
    (folder / "public.jsonl").write_text("".join(json.dumps({"id": records[i]["id"], "text": t}) + "\n"
                                                 for i, t in zip(members, public) if t is not None))
    return public, made
