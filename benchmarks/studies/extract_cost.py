"""Query budget, throughput and stage shares of feature extraction (``features.extract.extract``;
``benchmarks/bench_extract.py``): what each configuration asks of each model per passage (the
backends wrapped by ``Recording``: the full set, access "both", must be 1 + 6 target forward
passes, 1 reference forward pass, 1 + 6 suffix generations on the target and 1 on the reference,
BADI App. A.3 and App. B.1), its wall time against the bare model calls (one bare target pass over
the passages, and the configuration's bare minimum: forward passes over every text it scored plus
KV-cached greedy generation of every suffix it asked for, batched the cheaper of two ways; 1.0 =
no overhead at all), and the wall time split into stages."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["STAGES", "Stopwatch", "Recording", "bare_forward", "bare_generate", "bare_generation", "bare_minimum",
           "configurations", "measure", "render_extract"]

STAGES = ("score", "generate", "perturb", "token embeddings", "BERTScore")


class Stopwatch:
    """Seconds spent per stage; ``wrap`` times a function under a stage name."""

    def __init__(self):
        self.s = dict.fromkeys(STAGES, 0.0)

    def wrap(self, stage, fn):
        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.s[stage] += time.perf_counter() - t
        return timed


class Recording:
    """CountingBackend that also times its calls and keeps every scored text."""

    def __init__(self, inner, watch: Stopwatch):
        from trainspotter.features.extract import CountingBackend

        self.c = CountingBackend(inner)
        self.fingerprint, self.tokenizer, self.encode = inner.fingerprint, inner.tokenizer, inner.encode
        self.texts: list[str] = []
        self.prefixes: list[tuple[str, int]] = []  # (prefix, asked length)
        self.score = watch.wrap("score", self._score)
        self.generate = watch.wrap("generate", self._generate)

    def _score(self, texts, distribution=False):
        self.texts += texts
        return self.c.score(texts, distribution)

    def _generate(self, prefixes, max_new_tokens):
        from trainspotter.backends.base import per_prefix

        self.prefixes += list(zip(prefixes, per_prefix(max_new_tokens, len(prefixes))))
        return self.c.generate(prefixes, max_new_tokens)


def bare_forward(backend, texts: list[str]) -> float:
    """Seconds of the model call alone over ``texts``, batched exactly as HFBackend.score."""
    import torch

    encoded = [backend.encode(t) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
    start = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(order), backend.batch_size):
            idx = order[s:s + backend.batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.zeros((len(idx), width), dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids[row, :len(encoded[i])] = torch.tensor(encoded[i])
                mask[row, :len(encoded[i])] = 1
            backend.model(input_ids=ids.to(backend.device), attention_mask=mask.to(backend.device)).logits
    return time.perf_counter() - start


def bare_generate(backend, asked: list[tuple[str, int]], per_length: bool = False) -> float:
    """Seconds of KV-cached greedy generation alone (``model.generate``, cache on) of every
    (prefix, length), left-padded as a batched decoder must be. Batches as HFBackend.generate
    makes them (sorted by asked length, then prefix length; each batch runs to its longest
    asked length), or with ``per_length`` one group per distinct length, as extraction did
    before it asked for all lengths in one call (no wasted step, but more, smaller batches)."""
    import torch

    rows = sorted((k, len(e), e) for e, k in ((backend.encode(p), k) for p, k in asked) if k > 0)
    if per_length:
        groups = [[r for r in rows if r[0] == k] for k in sorted({r[0] for r in rows})]
    else:
        groups = [rows]
    batches = [g[s:s + backend.batch_size] for g in groups for s in range(0, len(g), backend.batch_size)]
    pad = backend.tokenizer.pad_token_id if backend.tokenizer.pad_token_id is not None else 0
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in batches:
            width = max(n for _, n, _ in batch)
            ids = torch.tensor([[pad] * (width - n) + e for _, n, e in batch])
            mask = torch.tensor([[0] * (width - n) + [1] * n for _, n, _ in batch])
            backend.model.generate(input_ids=ids.to(backend.device), attention_mask=mask.to(backend.device),
                                   max_new_tokens=batch[-1][0], do_sample=False, use_cache=True,
                                   pad_token_id=pad, eos_token_id=None)
    return time.perf_counter() - start


def bare_generation(backend, asked: list[tuple[str, int]]) -> float:
    """KV-cached generation of ``asked`` batched the cheaper of the two ways (the backend's
    batches, or one group per suffix length): neither wastes work the other avoids always."""
    return min(bare_generate(backend, asked), bare_generate(backend, asked, per_length=True))


def bare_minimum(target, reference, tgt, ref) -> float:
    """The model calls alone over exactly what a configuration asked of each model: forward
    passes over its scored texts plus KV-cached generation of its suffixes."""
    return (bare_forward(target, tgt.texts) + bare_generation(target, tgt.prefixes)
            + (bare_forward(reference, ref.texts) + bare_generation(reference, ref.prefixes) if ref else 0.0))


def configurations(batch_size: int, tmp: Path) -> dict:
    """name: (access, FeatureConfig factory, with reference). The cold token table: a fresh file
    every time (every extraction embeds its token strings again: before the table was shared and
    persisted); the persisted one (``tmp``/warm.npz) warmed by ``fill_token_table``."""
    from trainspotter.features.features import FeatureConfig

    warm_table, fresh = str(tmp / "warm.npz"), iter(range(10**6))
    return {
        "full set, cold token table (before)": ("both", lambda: FeatureConfig(
            batch_size=batch_size, embedding_cache=str(tmp / f"cold{next(fresh)}.npz")), True),
        "full set, persisted token table (now)": ("both", lambda: FeatureConfig(
            batch_size=batch_size, embedding_cache=warm_table), True),
        "black full set (6 perturbations, suffixes, reference)": ("black", lambda: FeatureConfig(
            batch_size=batch_size, embedding_cache=warm_table), True),
        "black, no suffix generation": ("black", lambda: FeatureConfig(
            batch_size=batch_size, sequence=False, embedding_cache=warm_table), True),
        "gray, 6 perturbations": ("gray", lambda: FeatureConfig(batch_size=batch_size), True),
        "gray lean (no perturbations)": ("gray", lambda: FeatureConfig(batch_size=batch_size, perturbations=False),
                                         True),
        "gray lean, target only": ("gray", lambda: FeatureConfig(batch_size=batch_size, perturbations=False), False),
    }


def fill_token_table(passages: list[dict], target, reference, batch_size: int, tmp: Path) -> None:
    """Untimed: fill the persisted token table as an earlier audit of these passages would have."""
    import trainspotter.features.extract as X
    from trainspotter.features.features import FeatureConfig

    warm_table = str(tmp / "warm.npz")
    X.extract(passages, target, reference, "both", FeatureConfig(batch_size=batch_size, embedding_cache=warm_table))
    X.token_table(warm_table).save()


def _fastest(passages, target, reference, access: str, make, with_ref: bool, repeats: int):
    """The fastest of ``repeats`` extractions, each stage timed: (wall, target and reference
    ``Recording``, ``Stopwatch``, features)."""
    import trainspotter.features.extract as X
    from trainspotter.features.probability import TokenEmbeddings

    originals, best = (X.perturb, X.bertscore_f1, TokenEmbeddings.ensure), None
    for _ in range(repeats):
        watch = Stopwatch()
        X.perturb = watch.wrap("perturb", originals[0])
        X.bertscore_f1 = watch.wrap("BERTScore", originals[1])
        TokenEmbeddings.ensure = watch.wrap("token embeddings", originals[2])
        tgt = Recording(target, watch)
        ref = Recording(reference, watch) if with_ref else None
        t = time.perf_counter()
        try:
            df = X.extract(passages, tgt, ref, access, make())
        finally:
            X.perturb, X.bertscore_f1, TokenEmbeddings.ensure = originals
        wall = time.perf_counter() - t
        if best is None or wall < best[0]:
            best = (wall, tgt, ref, watch, df)
    return best


def measure(passages: list[dict], target, reference, configs: dict, repeats: int, n_tokens: int,
            bare: list[float]) -> dict:
    """Per configuration: its counts per passage, fastest wall time, bare minimum, stage shares and
    ratios. ``bare``: [the bare target forward's seconds so far], lowered by one more interleaved
    measurement per configuration (so load changes hit both sides)."""
    import json

    runs, n = {}, len(passages)
    texts = [p["text"] for p in passages]
    for name_c, (access, make, with_ref) in configs.items():
        wall, tgt, ref, watch, df = _fastest(passages, target, reference, access, make, with_ref, repeats)
        needed = bare_minimum(target, reference, tgt, ref)
        # the backend's batches (longest asked length per batch) against one group per length
        per_length = bare_generate(target, tgt.prefixes, per_length=True) - bare_generate(target, tgt.prefixes)
        bare[0] = min(bare[0], bare_forward(target, texts))
        shares = {k: round(v / wall, 3) for k, v in watch.s.items()}
        shares["rest"] = round(1 - sum(watch.s.values()) / wall, 3)
        runs[name_c] = {
            "access": access, "reference": with_ref, "features": df.shape[1] - 2, "seconds": round(wall, 2),
            "target_forward_passes_per_passage": tgt.c.scored_texts / n,
            "reference_forward_passes_per_passage": ref.c.scored_texts / n if ref else 0,
            "generations_per_passage": tgt.c.generated_prefixes / n,
            "generated_tokens_per_passage": tgt.c.generated_tokens / n,
            "reference_generations_per_passage": ref.c.generated_prefixes / n if ref else 0,
            "bare_needed_seconds": round(needed, 2), "stage_shares": shares,
            # what one generate call per suffix length (the old batching) costs beyond it
            "per_length_batching_extra_seconds": round(per_length, 2),
            "tokens_per_s": round(n_tokens / wall, 1),
            "ratio_to_bare_forward": round(bare[0] / wall, 4),
            "ratio_to_bare_minimum": round(needed / wall, 4),
        }
        print(name_c, json.dumps(runs[name_c]), flush=True)
    return runs


NOTE = ("The bare minimum is the model calls alone over exactly what the configuration asked of "
        "each model: forward passes over every text it scored (perturbed variants included) and "
        "KV-cached greedy generation (`model.generate`) of every suffix it asked for, target and "
        "reference, batched the cheaper of two ways: the backend's own batches (sorted by asked "
        "length, each run to its longest) or one group per suffix length (the JSON's "
        "`per_length_batching_extra_seconds`: the second minus the first). Its ratio to the "
        "wall time is 1.0 with no overhead at all; the rest is per-position statistics, "
        "perturbation, MiniLM token embeddings and BERTScore.")


def render_extract(result: dict, command: str | None = None) -> str:
    """extract[_MODEL].md from its JSON ``result``; ``command``: the run's command line without the
    common options, where the result does not record it (one written before it did)."""
    runs, bare_s, n_tokens = result["runs"], result["bare_forward_seconds"], result["passage_tokens"]
    lines = [
        f"# Feature extraction on `{result['model']}`: query budget, throughput, stage shares", "",
        f"{result['date']} · `{result.get('command', command)} --passages {result['passages']} --batch-size "
        f"{result['batch_size']} --dtype {result['dtype']}` · CPU, {result['torch_threads']} torch threads, "
        f"vocabulary {result['vocab']} · every time the minimum of {result['repeats']} interleaved repeats · "
        f"{n_tokens} passage tokens. Bare target forward over the passages: {bare_s:.2f} s = "
        f"{n_tokens / bare_s:.0f} tokens/s. Loading ({result['load_seconds_untimed']:.0f} s) not timed.", "",
        "| configuration | features | target fwd / passage | reference fwd / passage | target generations / "
        "passage (tokens) | reference generations / passage | seconds | bare minimum s | tokens/s | "
        "ratio to one bare target fwd | ratio to its bare minimum |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(f"| {name_c} | {r['features']} | {r['target_forward_passes_per_passage']:g} | "
          f"{r['reference_forward_passes_per_passage']:g} | {r['generations_per_passage']:g} "
          f"({r['generated_tokens_per_passage']:g}) | {r['reference_generations_per_passage']:g} | "
          f"{r['seconds']} | {r['bare_needed_seconds']} | {r['tokens_per_s']} | "
          f"{r['ratio_to_bare_forward']} | {r['ratio_to_bare_minimum']} |" for name_c, r in runs.items()),
        "", "Share of wall time per stage (score = forward passes + per-position statistics):", "",
        "| configuration | " + " | ".join(STAGES) + " | rest |", "|---|" + "---|" * (len(STAGES) + 1),
        *(f"| {name_c} | " + " | ".join(f"{r['stage_shares'][k]:.1%}" for k in STAGES + ("rest",)) + " |"
          for name_c, r in runs.items()),
        "", NOTE]
    return "\n".join(lines) + "\n"
