"""Wall time of `trainspotter verify` on a sealed record (issue 39: "verify of a 1000-pair record
takes seconds"; ``benchmarks/bench_verify.py``), and the size of such a record.

The record is sealed by a real library audit (``trainspotter.audit``) of synthetic passage pairs
(64 words each, texts of one generator; α = 1e-9 so that the e-process bets on every pair and the
blind check runs on all of them too). Its feature rows come from the library's own gray-box
extraction (``features.extract.extract(..., answers=True)``, the lean feature set with one
reference) on two fake backends whose answers are drawn from each text's hash (``FakeBackend``:
one token per word, ids below 50 000, float64 log-probs, μ, σ² and greedy tokens), so the record
holds every pair's model answers and ``verify`` computes every feature again from them
(``record.recompute``)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

__all__ = ["FakeBackend", "make_record", "record_sizes", "verify_seconds", "render_verify"]

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
    """A record of ``pairs`` pairs sealed by the library's audit under ``folder`` (module docstring):
    record.json beside the passages and the two models' (one-file) folders."""
    from trainspotter.loop.run import audit
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


def record_sizes(record: dict) -> dict:
    """Bytes of the model's answers and of the passages' texts in a record (as JSON)."""
    answers = sum(len(json.dumps(p[s]["answers"])) for b in record["batches"] for p in b["pairs"]
                  for s in ("suspect", "heldout"))
    texts = sum(len(json.dumps(p["text"])) for s in ("suspect", "heldout") for p in record["passages"][s])
    return {"answers_bytes": answers, "passage_text_bytes": texts,
            "features_per_passage": len(record["batches"][0]["pairs"][0]["suspect"]["features"])}


def verify_seconds(path: Path, repeats: int) -> tuple[dict, object]:
    """The record at ``path`` verified (it must pass, its features recomputed from the answers),
    then the medians of ``repeats`` runs each: the recomputation alone, the library check
    (``load_record`` + ``verify_records``), the bare import and `trainspotter verify` as a user
    runs it. Returns the seconds and the check."""
    from trainspotter.auditing.config import AuditConfig
    from harness.machine import median_seconds, run_cli
    from trainspotter.record.recompute import check_recomputed
    from trainspotter.record.verify import load_record, verify_records

    record = load_record(path)
    check = verify_records([(str(path), record)])
    assert check.ok, check.failure
    features = {c.name: c.detail for c in check.checks}["features"]
    assert "recomputed from the model's recorded answers" in features, features
    config = AuditConfig(**record["config"])
    return {"recompute": median_seconds(lambda: check_recomputed(record, config), repeats),
            "library": median_seconds(lambda: verify_records([(str(path), load_record(path))]), repeats),
            "import": median_seconds(lambda: run_cli(["--help"]), repeats),
            "cli": median_seconds(lambda: run_cli(["verify", str(path)]), repeats)}, check


def render_verify(info: dict, features_per_passage: int | None = None) -> str:
    """verify.md from verify.json's ``info``; ``features_per_passage`` where it does not say (a
    report written before it did: 7, the lean set with one reference)."""
    timings, pairs, load = info["seconds"], info["pairs"], info["load"]
    features = info.get("features_per_passage", features_per_passage)
    return "\n".join([
        "# `trainspotter verify` of a sealed record, wall time", "",
        f"{info['date']} · {info['cpus']} CPU cores · git {info['commit']} · 1-min load average {load[0]:.1f} → "
        f"{load[1]:.1f} (other jobs may have been running: upper bounds) · `python benchmarks/bench_verify.py`", "",
        f"A record of {pairs} pairs from a gray-box audit with the lean feature set and one reference "
        f"({features} features per passage, 64 tokens per passage, the blind check over {pairs} pairs): "
        f"{info['record_bytes'] / 1e6:.1f} MB, of which {info['answers_bytes'] / 1e6:.1f} MB are the model's answers "
        f"(target and reference log-probs, μ, σ², token ids and greedy tokens, float64 as base64) and "
        f"{info['passage_text_bytes'] / 1e6:.1f} MB the passages' texts. Checked in full: every passage's, feature "
        f"row's and answer's sha256, every feature computed again from the recorded answers "
        f"({info['features_check'].split(' matches ')[-1]}), the pair order from the seed, the blind check replayed "
        f"from the texts, the e-process replayed pair by pair, the result, the section digests, the chain and the "
        f"end state. The answers are the fake backends' of `benchmarks/bench_verify.py` (drawn from each text's "
        f"hash), not a model's: the record's shape and the work of verifying it are an audit's.", "",
        "| what | seconds (median) |", "|---|---|",
        f"| library: `load_record` + `verify_records` | {timings['library']:.2f} |",
        f"| of which: every feature computed again from the answers (`recompute.check_recomputed`) | "
        f"{timings['recompute']:.2f} |",
        f"| `trainspotter --help` (import only) | {timings['import']:.2f} |",
        f"| `trainspotter verify record.json` | {timings['cli']:.2f} |",
        f"| beyond the import | {timings['cli'] - timings['import']:.2f} |", ""])
