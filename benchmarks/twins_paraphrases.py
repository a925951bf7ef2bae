"""The paraphrase table of the generative twins testbed (issue 35), made on a GPU.

On the CPU here SmolLM2-135M-Instruct paraphrases one passage a minute (README,
`results/twins/rewriters.md`): too slow for a testbed of 3 × 1000 passages × k = 4 variants. So:

1. ``jobs``: the passages of `tiny-pretrain-twins`' splits (the same seed, tokenizer and
   splits as the testbed build), each cut after the first sentence that reaches 180 words (a
   testbed audits a version's first 128 tokens, ~95 words; members are trained on the whole public
   version), and per split and variant the watermark hashing key and sampling seeds that
   ``HFRewriter`` derives from the variant's key (the testbed's keys, from its seed);
2. ``benchmarks/paraphrase_device.py`` on a GPU: the raw paraphrases, batched per key;
3. ``table``: the answers as a ``TableRewriter`` table, each passage's sentences joined (a
   sentence left empty keeps its words), written reproducibly (sorted, gzip without a time stamp)
   to ``benchmarks/data/twins-smollm2/``, the file the preset `tiny-pretrain-twins-smollm2` names
   by path and sha256. The testbed build applies the generative gate (MiniLM similarity ≥ 0.7).

    python benchmarks/twins_paraphrases.py jobs --out .gpu/jobs.json.gz
    python benchmarks/twins_paraphrases.py table --jobs .gpu/jobs.json.gz --answers OUT/*.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "benchmarks" / "data" / "twins-smollm2" / "paraphrases.jsonl.gz"
K, MIN_WORDS = 4, 180


def sentences(text: str, words: int = MIN_WORDS) -> list[str]:
    """The passage's sentences (``twins.generative.split_sentences``, the split ``twins make
    --unit sentence`` paraphrases by) up to the first at which it has ``words`` words (all of
    them if shorter)."""
    from trainspotter.twins.generative import split_sentences

    out = []
    for sentence in split_sentences(text):
        out.append(sentence)
        if len(" ".join(out).split()) >= words:
            break
    return out


def config_and_splits():
    from trainspotter.assets import wikipedia_leads
    from trainspotter.evaluation.lm_training import train_tokenizer
    from trainspotter.evaluation.testbed import PRESETS, _splits

    config = PRESETS["tiny-pretrain-twins"].model_copy(update={"twins": K})
    records = wikipedia_leads()
    tokenizer = train_tokenizer([r["text"] for r in records], config.vocab_size)
    encoded = tokenizer([r["text"] for r in records], add_special_tokens=False)["input_ids"]
    return config, records, _splits(config, encoded)[1]


def jobs(out: Path) -> None:
    from trainspotter.evaluation.testbed_twins import split_keys
    from trainspotter.twins.generative import INSTRUCTION, key_fingerprint, sample_seed, text_digest, watermark_key

    config, records, chosen = config_and_splits()
    groups, passages = [], {}
    for split, ids in chosen.items():
        for j, key in enumerate(split_keys(config, split)):
            groups.append({"split": split, "variant": j, "key": key_fingerprint(key), "watermark_key": watermark_key(key),
                           "seeds": [sample_seed(key, f"batch:{split}", a) % 2 ** 62 for a in range(4)]})
        passages[split] = [{"id": records[i]["id"], "sha": text_digest(records[i]["text"]),
                            "sentences": sentences(records[i]["text"])} for i in ids]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(json.dumps({"instruction": INSTRUCTION, "groups": groups,
                                              "passages": passages}).encode(), mtime=0))
    print(f"{out}: {sum(map(len, passages.values()))} passages, {len(groups)} keys")


def table(jobs_file: Path, answers: list[Path]) -> None:
    from trainspotter.twins.generative import clean

    job = json.loads(gzip.decompress(jobs_file.read_bytes()))
    key_of = {(g["split"], g["variant"]): g["key"] for g in job["groups"]}
    said: dict[tuple, dict[int, str]] = {}
    for path in answers:  # one answer per sentence
        for line in gzip.decompress(path.read_bytes()).decode().splitlines():
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
    print(f"{len(rows)} paraphrases; {copied} of {total} sentences empty, kept as written", flush=True)
    _write(TABLE, rows)
    print(f"{TABLE}: {len(rows)} rows; sha256 {hashlib.sha256(TABLE.read_bytes()).hexdigest()}")


def _write(path: Path, rows: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"text_sha256": s, "key": k, "attempt": a, "text": t}, ensure_ascii=False)
             for (s, k, a), t in sorted(rows.items())]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("jobs").add_argument("--out", type=Path, required=True)
    t = sub.add_parser("table")
    t.add_argument("--jobs", type=Path, required=True)
    t.add_argument("--answers", type=Path, nargs="+", required=True)
    args = parser.parse_args()
    jobs(args.out) if args.step == "jobs" else table(args.jobs, args.answers)


if __name__ == "__main__":
    main()
