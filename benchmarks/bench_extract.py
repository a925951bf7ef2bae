"""Query budget, throughput and stage shares of feature extraction
(trainspotter.features.extract.extract), on a built testbed or on any local model.

* counts what each configuration asks of each model per passage (wrapping the
  backends): the full set (access=both) must be 1 + 6 target forward passes, 1
  reference forward pass, 1 + 6 suffix generations on the target and 1 on the reference
  per passage, and nothing more;
* times each configuration against bare forward passes (the model call alone, same
  length-sorted batches, batch size, dtype and threads) and reports two ratios of
  tokens/s: to ONE bare target pass over the passages, and to the configuration's bare
  minimum: forward passes over every text it must score plus KV-cached greedy generation
  of every suffix it asks for, on either model, batched the cheaper of two ways (1.0 = no
  overhead at all);
* splits the wall time into stages: model scoring (forward + per-position statistics),
  suffix generation, perturbation, MiniLM token embeddings, BERTScore, the rest;
* runs the full set twice: with a cold MiniLM token table (every extraction embeds its
  token strings again: how it was before the table was shared and persisted) and with the
  persisted table warmed by an earlier run (the flows' default now).

Model, MiniLM, BERTScore and WordNet loading is done first and not timed; every time is
the minimum over ``--repeats`` interleaved repeats (the machine is shared).

The measurements: studies.extract_cost.

    python benchmarks/bench_extract.py [--testbed tiny] [--passages 64] [--batch-size 16]
    python benchmarks/bench_extract.py --model artifacts/models/smollm2-135m --passages-from tiny-pretrain
    python benchmarks/bench_extract.py --render extract_smollm2-135m   # the .md from its .json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RESULTS = Path(__file__).parent / "results"
# the command line of extract_smollm2-135m.json's run, which the JSON did not record then
SMOLLM2 = "python benchmarks/bench_extract.py --model artifacts/models/smollm2-135m --passages-from tiny-pretrain"


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--testbed", default="tiny", help="target + reference + passages (built if needed)")
    ap.add_argument("--model", help="a local model folder used as both target and reference "
                                    "(throughput does not depend on what it was trained on)")
    ap.add_argument("--passages-from", help="testbed whose member/heldout passages to use with --model")
    ap.add_argument("--passages", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="run only the configurations whose name contains one of these")
    ap.add_argument("--render", metavar="STEM", help="only rewrite results/STEM.md from results/STEM.json")
    return ap.parse_args()


def inputs(args):
    """The passages (half members, half held-out) and both models, loaded with everything the
    extraction loads lazily (MiniLM, BERTScore, WordNet): not timed."""
    from trainspotter.backends import HFBackend
    from trainspotter.data import load_passages
    from trainspotter.testbeds.build import PRESETS, build_testbed
    from trainspotter.features.perturb import synonyms
    from trainspotter.features.probability import bert_scorer, minilm

    root = build_testbed(PRESETS[(args.passages_from or "tiny") if args.model else args.testbed])
    target_dir, reference_dir = (Path(args.model),) * 2 if args.model else (root / "target", root / "reference")
    half = args.passages // 2
    ps = ([dict(p, set="member") for p in load_passages(root / "member.jsonl")[:half]]
          + [dict(p, set="heldout") for p in load_passages(root / "heldout.jsonl")[:args.passages - half]])
    target = HFBackend(target_dir, device="cpu", batch_size=args.batch_size, dtype=args.dtype)
    reference = HFBackend(reference_dir, device="cpu", batch_size=args.batch_size, dtype=args.dtype)
    minilm(), bert_scorer(), synonyms("warm")
    return ps, target, reference


def main() -> None:
    args = parse()
    from studies.extract_cost import bare_forward, configurations, fill_token_table, measure, render_extract

    if args.render:
        result = json.loads((RESULTS / f"{args.render}.json").read_text())
        return (RESULTS / f"{args.render}.md").write_text(render_extract(result, SMOLLM2))
    import torch

    t0 = time.perf_counter()
    ps, target, reference = inputs(args)
    load_s, texts = time.perf_counter() - t0, [p["text"] for p in ps]
    n_tokens = sum(len(target.encode(t)) - 1 for t in texts)
    target.score(texts[: args.batch_size])  # warm-up
    bare = [min(bare_forward(target, texts) for _ in range(args.repeats))]
    tmp = Path(tempfile.mkdtemp(prefix="bench-extract-"))
    configs = configurations(args.batch_size, tmp)
    if args.only:
        configs = {k: v for k, v in configs.items() if any(o in k for o in args.only)}
    fill_token_table(ps, target, reference, args.batch_size, tmp)
    runs = measure(ps, target, reference, configs, args.repeats, n_tokens, bare)
    name = Path(args.model).name if args.model else args.testbed
    command = (f"python benchmarks/bench_extract.py --model {args.model} --passages-from {args.passages_from}"
               if args.model else f"python benchmarks/bench_extract.py --testbed {args.testbed}")
    result = {"date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}", "model": name,
              "vocab": len(target.tokenizer), "passages": len(ps), "passage_tokens": n_tokens,
              "batch_size": args.batch_size, "dtype": args.dtype, "torch_threads": torch.get_num_threads(),
              "load_seconds_untimed": round(load_s, 1), "bare_forward_seconds": round(bare[0], 3),
              "bare_tokens_per_s": round(n_tokens / bare[0], 1), "repeats": args.repeats, "runs": runs,
              "command": command}
    RESULTS.mkdir(exist_ok=True)
    stem = "extract" if name == "tiny" else f"extract_{name}"
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=1))
    text = render_extract(result)
    (RESULTS / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
