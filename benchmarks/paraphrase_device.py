"""Generative twins on a GPU (issue 35): SmolLM2-135M-Instruct paraphrases a testbed's passages,
sentence by sentence, under each variant's watermark, batched, for `twins_paraphrases.py` (which
writes the jobs and joins the answers into the testbed's paraphrase table). Whole passages came
back as one or two sentences from this small model; single sentences keep their length better.

Standalone on purpose (torch, transformers and gguf only: the device machine has none of
trainspotter's other dependencies). It samples as ``trainspotter.rewriters.generative.HFRewriter``
does, on a CUDA device, batched, one sentence at a time: the same instruction in the tokenizer's chat template, sampling at
temperature 0.7 / top-p 0.95 / top-k 0, new tokens capped at 1.5 × the sentence's tokens + 16,
and transformers' watermark (``WatermarkingConfig``: lefthash, context width 1, bias 2.0, green
share 0.25) with the variant's hashing key. A group of batches holds one variant of one split (one key);
its sampling seed comes with the job (a batch shares one generator, so a passage's rewrite
depends on its batch: the table, not this script, is what a testbed is rebuilt from).

transformers' ``WatermarkLogitsProcessor`` loops over the rows of a batch and draws a green list
per row and step (a ``randperm`` seeded by key × previous token). With one key per batch and the
left-hash scheme the green list depends on the previous token alone, so the script draws every
green list once per key, with the same generator calls, into a (vocab × vocab) mask and replaces
the per-row loop by one lookup; it checks on random rows that both give the same logits.

    python benchmarks/paraphrase_device.py --jobs JOBS.json.gz --gguf DIR/FILE.gguf --out OUT.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import time

import torch
import transformers.generation.logits_process as lp
from transformers import AutoModelForCausalLM, AutoTokenizer, WatermarkingConfig

TABLES: dict[int, torch.Tensor] = {}
_loop_call = lp.WatermarkLogitsProcessor.__call__


def green_mask(vocab: int, hashing_key: int, ratio: float, device) -> torch.Tensor:
    """Row v: the green list after previous token v, drawn exactly as
    ``WatermarkLogitsProcessor._get_greenlist_ids`` draws it (lefthash, context width 1)."""
    rng, size = torch.Generator(device=device), int(vocab * ratio)
    mask = torch.zeros(vocab, vocab, dtype=torch.bool, device=device)
    for v in range(vocab):
        rng.manual_seed((hashing_key * v) % (2 ** 64 - 1))
        mask[v, torch.randperm(vocab, device=device, generator=rng)[:size]] = True
    return mask


def _table_call(self, input_ids, scores):
    mask = TABLES[self.hash_key]
    return scores + self.bias * mask[input_ids[:, -1]].to(scores.dtype)


def check(vocab: int, hashing_key: int, device) -> None:
    """The lookup equals transformers' loop on random rows (else the script stops)."""
    proc = WatermarkingConfig(greenlist_ratio=0.25, bias=2.0, hashing_key=hashing_key, seeding_scheme="lefthash",
                              context_width=1).construct_processor(vocab, device)
    ids = torch.randint(0, vocab, (16, 5), device=device)
    scores = torch.randn(16, vocab, device=device)
    assert torch.equal(_loop_call(proc, ids, scores), _table_call(proc, ids, scores)), "green lists differ"
    lp.WatermarkLogitsProcessor.__call__ = _table_call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", required=True)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--time-limit", type=float, default=420.0, help="seconds; later attempts are skipped")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=int, help="a trial run: this many passages of the first group")
    args = parser.parse_args()
    start, device = time.time(), args.device
    jobs = json.loads(gzip.open(args.jobs, "rt").read())
    if args.limit:
        jobs["groups"] = jobs["groups"][:1]
        jobs["passages"] = {s: ps[:args.limit] for s, ps in jobs["passages"].items()}
    folder, name = args.gguf.rsplit("/", 1)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tok.padding_side = "left"
    if tok.pad_token is None:  # (the gguf's tokenizer on some versions): pad with end-of-text, masked anyway
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16).to(device).eval()
    vocab = model.config.get_text_config().vocab_size
    print(f"loaded in {time.time() - start:.0f} s; vocab {vocab}", flush=True)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out = gzip.open(args.out, "wt")
    for attempt in range(args.attempts):
        for group in jobs["groups"]:  # one split, one variant (one key)
            if time.time() - start > args.time_limit:
                print(f"time limit: attempt {attempt} of {group['split']}/{group['variant']} skipped", flush=True)
                continue
            t0, key = time.time(), group["watermark_key"]
            if args.limit:  # a trial (on a CPU): no watermark, whose green lists take minutes there
                key = None
            elif key not in TABLES:  # 2.4 GB each: the twelve keys fit beside the model
                TABLES[key] = green_mask(vocab, key, 0.25, device)
                check(vocab, key, device)
            cfg = key and WatermarkingConfig(greenlist_ratio=0.25, bias=2.0, hashing_key=key,
                                             seeding_scheme="lefthash", context_width=1)
            items = sorted(((p["id"], i, text) for p in jobs["passages"][group["split"]]
                            for i, text in enumerate(p["sentences"])), key=lambda r: len(r[2]))
            for b in range(0, len(items), args.batch):
                rows = items[b:b + args.batch]
                prompts = [tok.apply_chat_template([{"role": "user", "content": f"{jobs['instruction']}\n\n{text}"}],
                                                   add_generation_prompt=True, tokenize=False) for _, _, text in rows]
                enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
                caps = [int(1.5 * len(tok(text, add_special_tokens=False)["input_ids"])) + 16 for _, _, text in rows]
                torch.manual_seed(group["seeds"][attempt] + b)
                with torch.inference_mode():
                    gen = model.generate(**enc, do_sample=True, temperature=0.7, top_p=0.95, top_k=0,
                                         max_new_tokens=max(caps), pad_token_id=pad, watermarking_config=cfg)
                new = gen[:, enc["input_ids"].shape[1]:]
                for (pid, i, _), ids, cap in zip(rows, new, caps):
                    out.write(json.dumps({"split": group["split"], "id": pid, "i": i, "variant": group["variant"],
                                          "attempt": attempt, "text": tok.decode(ids[:cap], skip_special_tokens=True)})
                              + "\n")
            out.flush()
            print(f"attempt {attempt} {group['split']}/{group['variant']}: {len(items)} sentences in "
                  f"{time.time() - t0:.0f} s", flush=True)
    out.close()
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
