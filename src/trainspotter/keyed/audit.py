"""The audit of a keyed release (README "Protect data before you release it"; docs/architecture.md,
"Keyed releases"): batches of a model's answers on neutral text, their units scored under the
release key, one e-process over the units (``stats.exact_null``), until W ≥ 1/α or the budget is spent.

Black-box: prompts that are not the release (the user's neutral text, or the packaged Wikipedia
leads), each cut to ``prompt_tokens`` tokens, continued by ``new_tokens`` sampled tokens; the budget
is generated tokens. Black-box forced choice (``probe="choose"``, a lexical release): each unit once
ever, in its first context in each of the first ``contexts`` neutral texts that show it, the units
the release shows most first, ``samples`` draws in each restricted to its forms
(``keyed.queries.choose``; relative to a ``reference`` when given), pooled into the unit's share;
the budget is generated tokens too. Gray-box: neutral passages, each unit scored in its first
context; the budget is passages. A prompt that shares a run of ``SHINGLE`` words with the release is refused (a prompt
must not show the key; the units it shows are skipped anyway). A named audit (``name``) keeps a
ledger (``keyed.ledger``): its units count once across runs, the next run multiplies onto the
stored wealth and takes the neutral texts after those used. Beside the e-process, the same
statistic under ``keys`` random keys ranks the release key (an exact p-value that rests on the
key's randomness alone). The verdict says "trained on" only when W crossed 1/α and the release's
key derives from a public random value (a beacon round) that the tool is not told is a fixed test
value; it states what it rests on.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from trainspotter.backends.spec import Spec
from trainspotter.errors import InputError
from trainspotter.keyed.units import Seen, lexical_units, window_units
from trainspotter.stats.eprocess import EProcess, EProcessConfig, nest_test_settings
from trainspotter.stats.exact_null import key_rank, unit_eprocess, unit_payoffs

__all__ = ["KeyedAuditConfig", "Release", "choice_items", "neutral_texts", "open_release", "random_keys",
           "run_batches"]

SHINGLE = 8  # words: a prompt sharing this many consecutive words with the release is refused
# forced choice: each unit asked in its first context in CONTEXTS neutral texts, SAMPLES draws in each: chosen on
# exploration trials apart from the suite's (benchmarks/bench_keyed_contexts.py: a model's preference for a form
# varies more between contexts than between draws in one)
CONTEXTS, SAMPLES = 16, 4


class KeyedAuditConfig(BaseModel):
    """One run of a keyed release's audit (module docstring)."""

    release: Path
    model: Spec
    reference: Spec | None = None  # lexical, gray or forced choice: forms relative to a model that never saw it
    access: Literal["black", "gray"] = "black"
    probe: Literal["continue", "choose"] = "continue"  # black-box: free continuations, or forced choice (lexical)
    samples: int = Field(SAMPLES, ge=1)  # forced choice: draws per unit and context
    contexts: int = Field(CONTEXTS, ge=1)  # forced choice: neutral passages each unit is asked in
    prompts: Path | None = None
    max_tokens: int = Field(20000, ge=1)
    max_passages: int = Field(40, ge=1)
    prompt_tokens: int = Field(32, ge=1)
    new_tokens: int = Field(64, ge=1)
    batch: int = Field(16, ge=1)
    test: EProcessConfig = Field(default_factory=EProcessConfig)  # α, strategy, λ_max: as every audit's
    random_keys: int = Field(1000, ge=0)
    seed: int = 0
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat_test(cls, data):
        """A flat ``alpha`` and ``strategy``, as records were sealed before ``test``, go into ``test``."""
        return nest_test_settings(data)

    @property
    def forced_choice(self) -> bool:
        """Black-box by forced choice (``probe`` matters for black-box only)."""
        return self.access == "black" and self.probe == "choose"


class Release:
    """An audited release: its folder read back, the key, and how its units are scored."""

    def __init__(self, folder: Path):
        from trainspotter.keyed.score import GreenScoring, LexicalScoring
        from trainspotter.keyed.units import LexicalForms
        from trainspotter.keyed.release import load_release, order_proof, rewriter_of

        self.kr = kr = load_release(folder)
        if kr.manifest is None:
            raise InputError(f"{folder}: not released yet (no manifest.json); run `trainspotter keyed release`")
        if kr.secret is None or kr.originals is None:
            raise InputError(f"{folder}: auditing a keyed release needs the owner's secret.json and originals.jsonl")
        self.key, self.beacon, self.tokenizer = kr.key, kr.beacon, None
        # checked once, when the release is opened: what shows the beacon round is the network's
        # (``Beacon.proof``; a verdict rests on the key only when "verified") and what shows the
        # commitment preceded it (``keyed.release.order_proof``: an RFC 3161 stamp, checked again)
        self.beacon_proof, self.order_proof = kr.beacon.proof(), order_proof(kr)
        if kr.lexical:
            self.scoring = LexicalScoring(LexicalForms(rewriter_of(kr.commitment), [p["text"] for p in kr.originals]))
        else:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
            s = kr.commitment["scoring"]
            self.scoring = GreenScoring(int(s["vocab_size"]), float(s["gamma"]))
        self._shingles = {tuple(w[i:i + SHINGLE]) for p in kr.public + kr.originals
                          for w in [p["text"].split()] for i in range(max(0, len(w) - SHINGLE + 1))}

    def shows_release(self, text: str) -> bool:
        w = text.split()
        return any(tuple(w[i:i + SHINGLE]) in self._shingles for i in range(max(0, len(w) - SHINGLE + 1)))


def open_release(folder: Path) -> Release:
    return Release(Path(folder))


def neutral_texts(config: KeyedAuditConfig, release: Release) -> list[dict]:
    """The neutral texts in the order an audit takes them: the user's (file order) or the packaged
    Wikipedia leads (shuffled with the seed); one that shows the release is refused (the user's) or
    left out (packaged)."""
    if config.prompts is None:
        from trainspotter.assets import wikipedia_leads

        rows = [{"id": r["id"], "text": r["text"]} for r in wikipedia_leads()]
        random.Random(f"{config.seed}:neutral").shuffle(rows)
        return [r for r in rows if not release.shows_release(r["text"])]
    from trainspotter.data import load_passages

    rows = [{"id": str(p["id"]), "text": p["text"]} for p in load_passages(config.prompts)]
    for n, r in enumerate(rows, start=1):
        if release.shows_release(r["text"]):
            raise InputError(f"{config.prompts}, passage {n} (id {r['id']!r}): shares {SHINGLE} consecutive words "
                             f"with the release; prompts must be text that is not the release")
    return rows


def random_keys(n: int, seed: int) -> list[bytes]:
    """The rank's random keys: sha256("trainspotter-random-key" ‖ seed ‖ m), drawn without the model
    (anyone can derive them again to check the rank)."""
    return [hashlib.sha256(f"trainspotter-random-key\0{seed}\0{m}".encode()).digest() for m in range(n)]


def _units(config: KeyedAuditConfig, release: Release, backend, texts: list[dict], seen: Seen,
           batch_seed: int, reference=None) -> tuple[list[dict], list[dict], int]:
    """One batch: (answers to record, unit records, budget spent)."""
    from trainspotter.keyed.queries import choose, form_probabilities, sample, top_answers

    if config.forced_choice:
        forms = release.scoring.forms
        asked = iter(choose(backend, [(a["context"], a["tokens"]) for t in texts for a in t["asked"]], config.samples,
                            batch_seed, reference))
        answers, records, spent = [], [], 0
        for t in texts:  # a unit's draws in each of its contexts, pooled into one record
            pooled = []
            for a in t["asked"]:
                draws, cost = next(asked)
                answers.append({"id": a["id"], "at": a["at"], "unit": t["unit"], "draws": draws})
                pooled, spent = pooled + draws, spent + cost
            records += [r] if (r := forms.choice_record(t["unit"], pooled)) is not None else []
            seen.units.add(t["unit"])
        return answers, records, spent
    if config.access == "black":
        tok = backend.tokenizer
        prompts = [tok.decode(tok(t["text"], add_special_tokens=False)["input_ids"][:config.prompt_tokens])
                   for t in texts]
        conts = sample(backend, prompts, config.new_tokens, batch_seed)
        records = []
        for prompt, cont in zip(prompts, conts):
            if release.tokenizer is None:
                records += [{"unit": u, "form": j} for u, j in lexical_units(release.scoring.forms, prompt, cont, seen)]
            else:
                ids = release.tokenizer(cont, add_special_tokens=False)["input_ids"]
                given = release.tokenizer(prompt, add_special_tokens=False)["input_ids"]
                records += [{"prev": a, "next": b} for a, b in window_units(given, ids, seen)]
        answers = [{"id": t["id"], "prompt": p, "continuation": c} for t, p, c in zip(texts, prompts, conts)]
        return answers, records, len(texts) * config.new_tokens
    if release.tokenizer is None:
        contexts = [(u, c) for t in texts for u, c in release.scoring.forms.contexts(t["text"], seen)]
        hs = form_probabilities(backend, [(c, release.scoring.forms.forms[u]) for u, c in contexts], reference)
        records = [{"unit": u, "h": h} for (u, _), h in zip(contexts, hs)]
    else:
        if backend.tokenizer.get_vocab() != release.tokenizer.get_vocab():
            raise InputError(f"model {config.model.base}: gray-box on a watermarked release needs a model with the "
                             "watermark's tokenizer (release tokenizer/); audit it black-box (--access black)")
        records = top_answers(backend, [t["text"] for t in texts], seen)
    return [{"id": t["id"], "text": t["text"]} for t in texts], records, len(texts)


def choice_items(config: KeyedAuditConfig, release: Release, backend, texts: list[dict], seen: Seen) -> list[dict]:
    """Forced choice: the units to ask, in order (``keyed.queries.choice_plan``), each with its
    contexts (the text's id, where the context ends in it: ``at``, the context, its forms' tokens)
    and the most tokens its draws can cost."""
    from trainspotter.keyed.queries import choice_plan

    if release.tokenizer is not None:
        raise InputError("option --probe choose: forced choice asks a lexical release's forms; a watermarked "
                         "release is audited black-box by its continuations (--probe continue)")
    plan = choice_plan(release.scoring.forms, backend.tokenizer, [t["text"] for t in texts], seen, config.samples,
                       config.contexts)
    return [{"unit": unit, "cost": cost, "asked": [{"id": texts[i]["id"], "at": len(context), "context": context,
                                                     "tokens": seqs} for i, context, seqs in asked]}
            for unit, asked, cost in plan]


def run_batches(config: KeyedAuditConfig, release: Release, backend, texts: list[dict], seen: Seen,
                state: dict | None, progress=None, reference=None) -> dict:
    """Batches until W ≥ 1/α (or already above it), the budget or the texts run out (``ran_out``:
    the texts did, before W ≥ 1/α or the budget). Each batch: the answers, the units, their (x, p),
    the units' weights (``keyed.score``) and the log-wealth after each unit. A batch takes only what
    the budget still pays for in full (a text's continuation, a unit's draws at their most)."""
    proc = EProcess.from_dict(state) if state else EProcess.of(config.test)
    budget = config.max_tokens if config.access == "black" else config.max_passages
    choosing = config.forced_choice
    if choosing and reference is not None and reference.tokenizer.get_vocab() != backend.tokenizer.get_vocab():
        raise InputError(f"option --reference {config.reference.text}: a forced choice weighs each token against the "
                         "reference's, so it needs the model's tokenizer")
    items = choice_items(config, release, backend, texts, seen) if choosing else texts
    costs = ([t["cost"] for t in items] if choosing else [config.new_tokens if config.access == "black" else 1]
             * len(items))
    if choosing and items and min(costs) > budget:
        raise InputError(f"option --max-tokens {budget}: less than one unit's draws can cost ({min(costs)} tokens: "
                         f"--samples {config.samples} in each of its contexts, at each token where its forms part)")
    batches, spent, start = [], 0, 0
    while start < len(items) and not proc.rejected:
        end, cost = start, 0
        while end < len(items) and end - start < config.batch and spent + cost + costs[end] <= budget:
            cost += costs[end]
            end += 1
        if end == start:
            break
        chunk, start = items[start:end], end
        answers, records, cost = _units(config, release, backend, chunk, seen, config.seed * 1_000_003 + start,
                                        reference)
        spent += cost
        x, p = release.scoring.outcomes(records, release.key, seen)
        w = release.scoring.weights(records, choosing)
        logw = []
        for u in unit_payoffs(x, p, w):
            proc.update(u)
            logw.append(float(proc.log_wealth[0]))
        batches.append({"answers": answers, "units": records, "x": x.tolist(), "p": p.tolist(), "w": w.tolist(),
                        "log_wealth": logw})
        if progress:
            progress(spent, budget)
    ran_out = start >= len(items) and spent < budget and not proc.rejected
    return {"batches": batches, "spent": spent, "budget": budget, "ran_out": ran_out,
            "texts_used": 0 if choosing else start, "eprocess": proc}


def rank(config: KeyedAuditConfig, release: Release, records: list[dict], log_wealth: float) -> dict | None:
    """The release key's statistic (the log-wealth over every unit so far) ranked among ``keys``
    random keys' on the same units (``stats.exact_null.key_rank``); None without keys or units."""
    if not config.random_keys or not records:
        return None
    xs, ps = release.scoring.outcomes_many(records, random_keys(config.random_keys, config.seed))
    null = unit_eprocess(xs, ps, config.test, w=release.scoring.weights(records, config.forced_choice))
    return key_rank(log_wealth, np.log(null.wealth))


def _key_rests_on(release: Release) -> str:
    """What the key's derivation rests on, after the beacon round it names (the next line of
    ``rests_on`` says what shows the round is the network's)."""
    status, ordered = release.beacon_proof[0], release.order_proof
    if status == "test":
        return ": a fixed test value, so nothing shows that nobody chose the key"
    if status != "verified":
        return f": the beacon is {status}, so nothing shows that nobody chose the key"
    if ordered[0] == "proven":
        return f": {ordered[1]}"
    return ": valid if the commitment was published before that round"


def rests_on(release: Release, reference: Spec | None = None) -> list[str]:
    """What a verdict on this release rests on, in words."""
    b, s = release.beacon, release.kr.commitment["scoring"]
    null = ("1/(m+1) per word type with m alternatives" if release.tokenizer is None
            else f"γ = {s['gamma']:g} per distinct window ({s['scheme']}, tokenizer {s['tokenizer']['name']})")
    key = (f"the key derives from the committed secret (commitment sha256 "
           f"{release.kr.manifest['commitment_sha256'][:16]}…) and beacon round {b.round} ({b.source})")
    return [key + _key_rests_on(release),
            f"the beacon: {release.beacon_proof[1]}",
            f"the exact null per unit: {null}; units counted once, those the prompt shows skipped"] + (
        [f"the reference {reference.text} never saw the release (nor was made from its key): forms weighed against "
         "it stay independent of the key"] if reference is not None else [])
