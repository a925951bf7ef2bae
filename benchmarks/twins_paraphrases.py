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

The steps' work: studies.paraphrase_table.

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("jobs").add_argument("--out", type=Path, required=True)
    t = sub.add_parser("table")
    t.add_argument("--jobs", type=Path, required=True)
    t.add_argument("--answers", type=Path, nargs="+", required=True)
    args = parser.parse_args()
    from studies.paraphrase_table import jobs, table, table_bytes

    if args.step == "jobs":
        job = jobs()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_bytes(gzip.compress(json.dumps(job).encode(), mtime=0))
        return print(f"{args.out}: {sum(map(len, job['passages'].values()))} passages, {len(job['groups'])} keys")
    answers = [line for path in args.answers for line in gzip.decompress(path.read_bytes()).decode().splitlines()]
    rows, copied, total = table(json.loads(gzip.decompress(args.jobs.read_bytes())), answers)
    print(f"{len(rows)} paraphrases; {copied} of {total} sentences empty, kept as written", flush=True)
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_bytes(table_bytes(rows))
    print(f"{TABLE}: {len(rows)} rows; sha256 {hashlib.sha256(TABLE.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
