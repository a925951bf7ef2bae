"""Wall time of `trainspotter verify` on a 1000-pair record (issue 39: "verify of a 1000-pair
record takes seconds"), and the size of such a record.

The record is sealed by a real library audit (``trainspotter.audit``) of 1000 synthetic
passage pairs (64 words each, texts of one generator; α = 1e-9 so the e-process bets on all
1000 pairs and the blind check on all 1000 too). Its feature rows come from the library's own
gray-box extraction (``features.extract.extract(..., answers=True)``, the lean feature set with
one reference, as an audit of a testbed makes them) on two fake backends whose answers are
drawn from each text's hash (64 tokens per passage, token ids below 50 000, float64 log-probs,
μ, σ² and greedy tokens), so the record holds every pair's model answers and ``verify``
computes every feature again from them. Timed, each the median of ``--repeats`` runs: the
library check (``load_record`` + ``verify_records``: every hash, the recomputation, the chain,
both replays) and the CLI as a user runs it, beside the bare import (`trainspotter --help`).
Writes benchmarks/results/verify.{md,json}.

    python benchmarks/bench_verify.py [--pairs 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CLI = [sys.executable, "-m", "trainspotter.flows.cli"]
WORDS = "river stone light paper garden window market silver winter orange music engine".split()


class FakeBackend:
    """Answers of a gray-box model drawn from each text's hash: one token per word."""

    def __init__(self, seed: int):
        self.seed, self.fingerprint, self.tokenizer = seed, f"fake-{seed}", None

    def encode(self, text: str) -> list[int]:
        return [0] + [int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % 50_000 + 1 for w in text.split()]

    def score(self, texts, distribution=False):
        import numpy as np

        from trainspotter.backends.base import TokenScores

        out = []
        for text in texts:
            ids = np.asarray(self.encode(text)[1:], dtype=np.int64)
            rng = np.random.default_rng([self.seed, int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)])
            lp = -rng.exponential(3.0, len(ids))
            greedy = np.where(rng.random(len(ids)) < 0.4, ids, ids + 1)
            out.append(TokenScores(token_ids=ids, logprobs=lp, argmax=greedy, mu=lp - rng.random(len(ids)),
                                   sigma2=rng.random(len(ids)) * 3))
        return out


def make_record(folder: Path, pairs: int, words: int = 64) -> Path:
    from trainspotter import audit
    from trainspotter.features.extract import extract
    from trainspotter.features.features import FEATURE_SETS

    rng = random.Random(0)
    for side in ("suspect", "heldout"):
        with open(folder / f"{side}.jsonl", "w") as f:
            for i in range(pairs):
                text = " ".join(rng.choice(WORDS) + str(rng.randint(0, 99)) for _ in range(words))
                f.write(json.dumps({"id": f"{side[0]}{i}", "text": text}) + "\n")
    for name in ("model", "reference"):
        (folder / name).mkdir()
        (folder / name / "model.safetensors").write_bytes(name.encode())
    target, reference = FakeBackend(1), FakeBackend(2)

    def extract_fn(passages, batch_no):
        return extract(passages, target, [reference], "gray", FEATURE_SETS["lean"], answers=True).to_dict("records")

    result = audit(suspect=str(folder / "suspect.jsonl"), heldout=str(folder / "heldout.jsonl"),
                   model=f"hf:{folder / 'model'}", reference=[f"hf:{folder / 'reference'}"], test={"alpha": 1e-9},
                   extract_fn=extract_fn)
    assert result.pairs_used == pairs, result.pairs_used
    path = folder / "record.json"
    path.write_text(json.dumps(result.record))
    return path


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from trainspotter.record.verify import load_record, verify_records

    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRAINSPOTTER_ARTIFACTS"] = str(Path(tmp) / "artifacts")
        path = make_record(Path(tmp), args.pairs)
        record = load_record(path)
        check = verify_records([(str(path), record)])
        assert check.ok, check.failure
        features = {c.name: c.detail for c in check.checks}["features"]
        assert "recomputed from the model's recorded answers" in features, features
        answers = sum(len(json.dumps(p[s]["answers"])) for b in record["batches"] for p in b["pairs"]
                      for s in ("suspect", "heldout"))
        texts = sum(len(json.dumps(p["text"])) for s in ("suspect", "heldout") for p in record["passages"][s])

        def cli(*extra):
            out = subprocess.run(CLI + list(extra), capture_output=True, text=True)
            assert out.returncode == 0, out.stderr[-2000:]

        from trainspotter.auditing.config import AuditConfig
        from trainspotter.record.recompute import check_recomputed

        config = AuditConfig(**record["config"])
        timings = {"recompute": _median(lambda: check_recomputed(record, config), args.repeats),
                   "library": _median(lambda: verify_records([(str(path), load_record(path))]), args.repeats),
                   "import": _median(lambda: cli("--help"), args.repeats),
                   "cli": _median(lambda: cli("verify", str(path)), args.repeats)}
        size = path.stat().st_size
    load.append(os.getloadavg()[0])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    info = {"pairs": args.pairs, "record_bytes": size, "answers_bytes": answers, "passage_text_bytes": texts,
            "features_check": features, "seconds": timings, "repeats": args.repeats,
            "cpus": os.cpu_count(), "machine": platform.machine(), "commit": commit, "load": load,
            "checks": [c.name for c in check.checks],
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "verify.json").write_text(json.dumps(info, indent=1))
    (RESULTS / "verify.md").write_text("\n".join([
        "# `trainspotter verify` of a sealed record, wall time", "",
        f"{info['date']} · {info['cpus']} CPU cores · git {commit} · 1-min load average {load[0]:.1f} → "
        f"{load[1]:.1f} (other jobs may have been running: upper bounds) · `python benchmarks/bench_verify.py`", "",
        f"A record of {args.pairs} pairs from a gray-box audit with the lean feature set and one reference "
        f"({len(record['batches'][0]['pairs'][0]['suspect']['features'])} features per passage, 64 tokens per passage, "
        f"the blind check over {args.pairs} pairs): {size / 1e6:.1f} MB, of which {answers / 1e6:.1f} MB are the "
        f"model's answers (target and reference log-probs, μ, σ², token ids and greedy tokens, float64 as base64) "
        f"and {texts / 1e6:.1f} MB the passages' texts. Checked in full: every passage's, feature row's and "
        f"answer's sha256, every feature computed again from the recorded answers ({features.split(' matches ')[-1]}), "
        f"the pair order from the seed, the blind check replayed from the texts, the e-process replayed pair by pair, "
        f"the result, the section digests, the chain and the end state. The answers are the fake backends' of "
        f"`benchmarks/bench_verify.py` (drawn from each text's hash), not a model's: the record's shape and the "
        f"work of verifying it are an audit's.", "",
        "| what | seconds (median) |", "|---|---|",
        f"| library: `load_record` + `verify_records` | {timings['library']:.2f} |",
        f"| of which: every feature computed again from the answers (`recompute.check_recomputed`) | "
        f"{timings['recompute']:.2f} |",
        f"| `trainspotter --help` (import only) | {timings['import']:.2f} |",
        f"| `trainspotter verify record.json` | {timings['cli']:.2f} |",
        f"| beyond the import | {timings['cli'] - timings['import']:.2f} |", ""]))
    print((RESULTS / "verify.md").read_text())


if __name__ == "__main__":
    main()
