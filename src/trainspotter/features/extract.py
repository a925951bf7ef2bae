"""Feature extraction with the fewest model queries (BADI Sec. 3, App. A.2–A.6, B.1; EZ-MIA Sec. 3).

Per batch of passages the models are called exactly this often:

- ``target.score``: ONE call on the originals + every perturbed variant (1 + 6 texts
  per passage). Each text gives log-probs, μ, σ² (gray-box) and the greedy token
  (black-box, App. A.6) from the same forward pass, so gray and black token-level
  features share it.
- ``reference.score``: ONE call per reference model on the originals (1 text per
  passage); reference features only compare originals. The first reference gives the
  one-reference features (RefL, EZ, PETAL's surrogate); with K ≥ 2 references the
  ``*_refs_*`` features (``trainspotter.features.references``) combine all K.
- ``target.generate``: ONE call on the original prefix + every perturbed prefix (1 + 6
  prefixes per passage), each with its own suffix length, only when black-box sequence
  features are asked for; with a reference, ``reference.generate``: ONE call on the
  original prefixes (``black_ref_seq_diff``).

Nothing else queries a model: MiniLM embeddings (token table, BERTScore) are local
and each distinct token string is embedded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import pandas as pd

from trainspotter.backends.base import Backend, TokenScores, per_prefix
from trainspotter.errors import InputError
from trainspotter.features import black_answers
from trainspotter.features.answers import ANSWERS, encode, gray_rows
from trainspotter.features.catalog import catalog
from trainspotter.features.features import FeatureConfig, check_references, suffix_length
from trainspotter.features.perturb import perturb
from trainspotter.features.probability import TokenStrings, bertscore_f1, default_token_table_path, token_table

Access = Literal["gray", "black", "both"]


class _Context:
    """Per-run state shared across batches: token-string and (black-box) embedding tables."""

    def __init__(self, target: Backend, references: list[Backend], access: Access, config: FeatureConfig):
        self.config = config
        self.embeddings = None if access == "gray" else token_table(
            config.embedding_cache or default_token_table_path())
        self.t_strings = TokenStrings(target.tokenizer)
        self.r_strings = [TokenStrings(r.tokenizer) for r in references]


def _black_answers(t_orig, t_pert, r_orig, config, ctx: _Context) -> list[dict]:
    """Each passage's black-box answers (``features.black_answers``): only the greedy tokens are
    used (BADI App. A.6), decoded to strings and compared through the MiniLM token table."""
    # Decode every (true, predicted) token pair of the batch, then embed the new strings at once.
    def pairs(scores, strings):
        return [(strings(s.token_ids), strings(s.argmax)) for s in scores]

    t_pairs = pairs(t_orig, ctx.t_strings)
    p_pairs = {k: pairs(v, ctx.t_strings) for k, v in t_pert.items()}
    r_pairs = [pairs(scores, strings) for scores, strings in zip(r_orig, ctx.r_strings)]
    everything = t_pairs + [p for v in p_pairs.values() for p in v] + [p for v in r_pairs for p in v]
    ctx.embeddings.ensure(s for true, pred in everything for s in true + pred)

    def side(s: TokenScores, pair, logprobs: bool = False) -> dict:
        return black_answers.side(s.token_ids, s.argmax, *pair, ctx.embeddings.similarity(*pair),
                                  s.logprobs if logprobs else None)

    petal = config.estimator == "petal"  # PETAL's surrogate: the first reference's log-probs
    return [{"target": side(t, t_pairs[i]),
             "perturbed": {k: side(v[i], p_pairs[k][i]) for k, v in t_pert.items()},
             "references": [side(scores[i], r_pairs[j][i], petal and j == 0) for j, scores in enumerate(r_orig)]}
            for i, t in enumerate(t_orig)]


def _continuations(model: Backend | None, jobs: list[tuple]) -> list[str]:
    """One generate call for every job's prefix, each cut to its own suffix length."""
    if not jobs:
        return []
    lengths = [j[3] for j in jobs]
    outs = model.generate([j[2] for j in jobs], lengths)
    return [model.tokenizer.decode(list(ids)[:s]) for ids, s in zip(outs, lengths)]


def _sequences(t_orig, target: Backend, reference: Backend | None, config: FeatureConfig) -> list[dict | None]:
    """Each passage's ``sequence`` answers (``features.black_answers``): the target's continuations of
    the original and perturbed prefixes (BADI Sec. 3, App. B.1) and the (first) reference's of the
    original prefix (``black_ref_seq_diff``), each with its BERTScore F1 against the true suffix.
    None for a passage too short to split."""
    keys = list(black_answers.sequence_columns(config))  # "" (the original prefix), then each kind
    jobs = []  # (passage index, key, prefix, suffix length, true suffix text)
    for i, t in enumerate(t_orig):
        n = len(t.token_ids)
        s = suffix_length(n, config)
        if s == 0:
            continue
        prefix = target.tokenizer.decode(t.token_ids[: n - s].tolist())
        suffix = target.tokenizer.decode(t.token_ids[n - s:].tolist())
        jobs.append((i, keys[0], prefix, s, suffix))
        jobs += [(i, k, perturb(prefix, k, config.seed), s, suffix) for k in keys[1:]]
    ref_jobs = [(i, "reference", prefix, s, suffix) for i, key, prefix, s, suffix in jobs
                if key == keys[0]] if reference is not None else []
    generated = _continuations(target, jobs) + _continuations(reference, ref_jobs)
    f1 = bertscore_f1(generated, [job[4] for job in jobs + ref_jobs])
    out: list[dict | None] = [None] * len(t_orig)
    for job, text, value in zip(jobs + ref_jobs, generated, f1):
        seq = out[job[0]] = out[job[0]] or {"suffix": job[4], "generated": {}, "f1": {}}
        if job[1] == "reference":
            seq["reference"] = text
        else:
            seq["generated"][job[1]] = text
        seq["f1"][job[1]] = float(value)
    return out


def _batch(passages, target, references, access, config, ctx, answers: bool) -> list[dict]:
    texts = [p["text"] for p in passages]
    n, kinds = len(texts), config.kinds
    variants = [perturb(x, k, config.seed) for k in kinds for x in texts]
    # the one target forward pass per text variant; the whole distribution's arrays only for
    # the gray metric criteria (prediction_row)
    t_all = target.score(texts + variants, access != "black" and config.metric_criteria)
    t_orig = t_all[:n]
    t_pert = {k: t_all[n * (j + 1): n * (j + 2)] for j, k in enumerate(kinds)}
    r_orig = [r.score(texts) for r in references]  # one call per reference, on the originals

    rows = [{"id": p.get("id", str(j)), **({"set": p["set"]} if "set" in p else {})}
            for j, p in enumerate(passages)]
    parts, recorded = [], [{} for _ in passages]  # recorded: each row's answers (features.answers)
    # a twins audit: passages carry their twin's text (``Twins.sides``); its token ids are the
    # target's ``encode`` without the first (BOS) entry, as ``TokenScores.token_ids`` are
    twin_ids = [target.encode(p["twin"])[1:] if isinstance(p.get("twin"), str) else None
                for p in passages] if config.twin_positions else None
    if access in ("gray", "both"):
        parts.append(gray_rows(texts, t_orig, t_pert, r_orig, config, twin_ids))
        for i, t in enumerate(t_orig if answers else ()):  # what the rows came from, for the sealed record
            recorded[i] |= encode(t, {k: v[i] for k, v in t_pert.items()}, [r[i] for r in r_orig])
    if access in ("black", "both"):
        black = _black_answers(t_orig, t_pert, r_orig, config, ctx)
        if config.sequence:
            for b, seq in zip(black, _sequences(t_orig, target, references[0] if references else None, config)):
                b["sequence"] = seq
        parts.append([black_answers.black_row(text, b, config, None if twin_ids is None else twin_ids[i])
                      for i, (text, b) in enumerate(zip(texts, black))])
        for i, b in enumerate(black if answers else ()):
            recorded[i][black_answers.BLACK] = black_answers.encode(b)
    for i, ids in enumerate(twin_ids if answers and twin_ids else ()):  # beside the gray and the black answers
        if ids is not None:
            recorded[i]["twin_ids"] = [int(x) for x in ids]
    for part in parts:
        for row, extra in zip(rows, part):
            row.update(extra)
    if answers:
        for row, a in zip(rows, recorded):
            row[ANSWERS] = a
    return rows


def feature_columns(config: FeatureConfig, access: Access, references: int) -> list[str]:
    """The columns ``extract`` returns (after id/set), in catalogue order: those the given
    number of reference models allows (``reference`` features need one, ``references``
    features two), and only the reference-relative ones when ``config.relative_only``."""
    allowed = lambda s: (("reference" not in s.models or references >= 1)  # noqa: E731
                         and ("references" not in s.models or references >= 2))
    return [s.name for s in catalog(config, access) if allowed(s)
            and (not config.relative_only or {"reference", "references"} & set(s.models))]


def as_references(reference: Backend | Sequence[Backend] | None) -> list[Backend]:
    """None, one backend or several, as a list."""
    if reference is None:
        return []
    return list(reference) if isinstance(reference, (list, tuple)) else [reference]


def extract(passages: list[dict], target: Backend, reference: Backend | Sequence[Backend] | None = None,
            access: Access = "gray", config: FeatureConfig | None = None,
            progress: Callable[[int, int], None] | None = None, answers: bool = False) -> pd.DataFrame:
    """One row per passage: ``id``, ``set`` (if the passages carry one) and every feature
    column of ``catalog(config, access)`` that the given models allow (reference
    features need ``reference``: one backend, or a list of K for the ``*_refs_*``
    features). Batched by ``config.batch_size``; model calls per batch as in the module
    docstring. ``progress(done, total)`` after each batch. ``answers``: also the column
    ``ANSWERS``, each row's model answers (``features.answers``, its black-box part
    ``features.black_answers``: what the row was computed from, so a sealed record lets
    ``verify`` compute it again)."""
    config = config or FeatureConfig()
    references = as_references(reference)
    if access not in ("gray", "black", "both"):
        raise InputError(f"access {access!r}: expected gray, black or both")
    if not passages:
        raise InputError("no passages to extract features from")
    check_references(config, len(references))
    if config.twin_positions and not any(p.get("twin") for p in passages):
        raise InputError("the changed-position features (the twins set) need each passage's twin: audit --twins DIR")
    for j, p in enumerate(passages):
        if not isinstance(p.get("text"), str) or not p["text"].strip():
            raise InputError(f"passage {p.get('id', j)!r}: `text` must be a non-empty string")
    ctx = _Context(target, references, access, config)
    rows: list[dict] = []
    for start in range(0, len(passages), config.batch_size):
        rows += _batch(passages[start:start + config.batch_size], target, references, access, config, ctx, answers)
        if progress is not None:
            progress(len(rows), len(passages))
    if ctx.embeddings is not None:
        ctx.embeddings.save()
    head = ["id"] + (["set"] if any("set" in p for p in passages) else [])
    tail = [ANSWERS] if answers else []
    return pd.DataFrame(rows, columns=head + feature_columns(config, access, len(references)) + tail)


class CountingBackend:
    """Wraps a backend and counts what is asked of it (tests and benchmarks check the
    one-forward-pass-per-text-variant budget with it)."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.fingerprint, self.tokenizer = inner.fingerprint, inner.tokenizer
        self.score_calls = self.scored_texts = self.generate_calls = self.generated_prefixes = 0
        self.generated_tokens = 0

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def score(self, texts: list[str], distribution: bool = False) -> list[TokenScores]:
        self.score_calls += 1
        self.scored_texts += len(texts)
        return self.inner.score(texts, distribution)

    def generate(self, prefixes: list[str], max_new_tokens: int | Sequence[int]) -> list[list[int]]:
        self.generate_calls += 1
        self.generated_prefixes += len(prefixes)
        self.generated_tokens += sum(per_prefix(max_new_tokens, len(prefixes)))
        return self.inner.generate(prefixes, max_new_tokens)
