"""The paraphrase table of the generative twins testbed (issue 35; ``benchmarks/twins_paraphrases.py``),
made on a GPU: SmolLM2-135M-Instruct paraphrases a passage a minute on this CPU, too slow for 3 ×
1000 passages × k = 4 variants.

1. ``jobs``: the passages of `tiny-pretrain-twins`' splits (the same seed, tokenizer and splits as
   the testbed build), each cut after the first sentence that reaches ``MIN_WORDS`` words (a testbed
   audits a version's first 128 tokens, ~95 words; members are trained on the whole public version),
   and per split and variant the watermark hashing key and sampling seeds that ``HFRewriter``
   derives from the variant's key (the testbed's keys, from its seed);
2. ``benchmarks/paraphrase_device.py`` on a GPU: the raw paraphrases, batched per key;
3. ``table``: the answers as a ``TableRewriter`` table, each passage's sentences joined (a sentence
   left empty keeps its words), serialised reproducibly (``table_bytes``: sorted, gzip without a
   time stamp): the file the preset `tiny-pretrain-twins-smollm2` names by path and sha256.
"""

from __future__ import annotations

import gzip
import json

__all__ = ["K", "MIN_WORDS", "sentences", "jobs", "table", "table_bytes"]

K, MIN_WORDS = 4, 180


def sentences(text: str, words: int = MIN_WORDS) -> list[str]:
    """The passage's sentences (``rewriters.generative.split_sentences``, the split ``twins make
    --unit sentence`` paraphrases by) up to the first at which it has ``words`` words (all of
    them if shorter)."""
    from trainspotter.rewriters.generative import split_sentences

    out = []
    for sentence in split_sentences(text):
        out.append(sentence)
        if len(" ".join(out).split()) >= words:
            break
    return out


def _config_and_splits():
    from trainspotter.assets import wikipedia_leads
    from trainspotter.testbeds.training import train_tokenizer
    from trainspotter.testbeds.build import PRESETS, _splits

    config = PRESETS["tiny-pretrain-twins"].model_copy(update={"twins": K})
    records = wikipedia_leads()
    tokenizer = train_tokenizer([r["text"] for r in records], config.vocab_size)
    encoded = tokenizer([r["text"] for r in records], add_special_tokens=False)["input_ids"]
    return config, records, _splits(config, encoded)[1]


def jobs() -> dict:
    """The GPU's jobs (step 1): the instruction, one group per split and variant (its key's
    fingerprint, watermark hashing key and sampling seeds) and each split's passages as sentences."""
    from trainspotter.testbeds.twins_variant import split_keys
    from trainspotter.rewriters.generative import INSTRUCTION, key_fingerprint, sample_seed, text_digest, watermark_key

    config, records, chosen = _config_and_splits()
    groups, passages = [], {}
    for split, ids in chosen.items():
        for j, key in enumerate(split_keys(config, split)):
            groups.append({"split": split, "variant": j, "key": key_fingerprint(key), "watermark_key": watermark_key(key),
                           "seeds": [sample_seed(key, f"batch:{split}", a) % 2 ** 62 for a in range(4)]})
        passages[split] = [{"id": records[i]["id"], "sha": text_digest(records[i]["text"]),
                            "sentences": sentences(records[i]["text"])} for i in ids]
    return {"instruction": INSTRUCTION, "groups": groups, "passages": passages}


def table(job: dict, answers: list[str]) -> tuple[dict, int, int]:
    """The table's rows {(text sha256, key fingerprint, attempt): paraphrase} from the jobs and the
    GPU's answers (JSON lines, one per sentence); and how many sentences of how many came back
    empty (kept as written)."""
    from trainspotter.rewriters.generative import clean

    key_of = {(g["split"], g["variant"]): g["key"] for g in job["groups"]}
    said: dict[tuple, dict[int, str]] = {}
    for line in answers:
        a = json.loads(line)
        said.setdefault((a["split"], a["id"], a["variant"], a["attempt"]), {})[a["i"]] = a["text"]
    passage = {(s, p["id"]): p for s, ps in job["passages"].items() for p in ps}
    rows, copied, total = {}, 0, 0
    for (split, pid, j, attempt), answer in said.items():
        p = passage[split, pid]
        cleaned = [clean(answer.get(n, ""), text) for n, text in enumerate(p["sentences"])]
        # a sentence the model left empty keeps its original words (a poorer variant, no gap)
        rows[p["sha"], key_of[split, j], attempt] = " ".join(c or t for c, t in zip(cleaned, p["sentences"]))
        copied, total = copied + cleaned.count(""), total + len(cleaned)
    return rows, copied, total


def table_bytes(rows: dict) -> bytes:
    """The table file: one JSON line per row, sorted, gzip-compressed without a time stamp."""
    lines = [json.dumps({"text_sha256": s, "key": k, "attempt": a, "text": t}, ensure_ascii=False)
             for (s, k, a), t in sorted(rows.items())]
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0)
