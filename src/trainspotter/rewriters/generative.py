"""Generative rewriters of twins (issue 35): a language model paraphrases each passage under the
variant's secret key, as STAMP does (Rastogi, Maini & Pruthi, ICML 2025, Sec. 3: k watermarked
paraphrases of each passage, one published at random).

- ``HFRewriter`` (``hf:PATH`` or ``testbed:NAME``, any local causal LM, a ``.gguf`` file
  included): the passage goes into a paraphrase instruction (the tokenizer's chat template when
  it has one, a plain instruction prompt otherwise) and the model samples a rewrite with
  transformers' own watermark (``WatermarkingConfig``: Kirchenbauer et al., ICML 2023, a green
  list of the vocabulary seeded by the previous token and a hashing key, whose logits get
  ``bias`` added). The hashing key is HMAC-SHA256(variant key, "watermark"), so each variant
  carries its own watermark, the same in every passage: a model trained on the public variant
  learns that key's green lists (Sander et al., NeurIPS 2024, "Watermarking makes language models
  radioactive"). The sampling seed is HMAC-SHA256(variant key, attempt ‖ text): the rewrite is a
  deterministic function of (text, key) on one machine and software stack, and a redraw
  (``make_twins``' attempt ≥ 1) samples again under the same watermark.
- ``OpenAIRewriter`` (``openai:MODEL@URL``, the spec syntax of every ``openai:`` model; its
  ``?tokenizer=`` is optional here and only counts the passage's tokens for the cap): the same
  instruction as one chat message, ``seed`` from the same HMAC and the configured temperature.
  No watermark (a server samples with its own code), and deterministic only where the server
  honours ``seed``; ``settings()`` says both. The API key is read from the environment
  (``key_env``, default OPENAI_API_KEY) and is never recorded.

``unit`` (``GenerativeRewriter``): ``"passage"`` (the default) paraphrases the whole passage in
one generation; ``"sentence"`` splits it into sentences (``split_sentences``: after ".", "!" or
"?" and whitespace, the split the measured generative testbed was made with,
benchmarks/twins_paraphrases.py), paraphrases each alone under the variant's key and watermark
(seed HMAC(key, attempt ‖ sentence): a sentence's rewrite under one key is the same wherever it
occurs) and joins the answers (a single space, or the original's line break). Small local models
answer a whole passage with one or two sentences; a sentence at a time keeps the passage's length
(``twins make`` paraphrases by sentence). A sentence answered empty keeps its own words (as in
the testbed's table: a poorer variant, no gap); only when every sentence is answered empty is the
attempt an ``EmptyRewrite`` (redrawn, every sentence sampled anew).

New tokens are capped at ``max_new_ratio`` × the passage's (or sentence's) tokens + ``extra_tokens``; the
output is stripped of the prompt, of special tokens and of a leading "Here is the paraphrase:"
line. An empty rewrite raises ``EmptyRewrite`` naming the passage (``make_twins`` redraws it and
names the passage's id if every redraw is empty). torch and transformers are imported on first
use only.
"""

from __future__ import annotations

import hashlib
import os
import re

from trainspotter.errors import APIRequestError, InputError
from trainspotter.rewriters.lexical import KeyedLexicalRewriter
from trainspotter.rewriters.base import EmptyRewrite, Rewriter, mac

__all__ = ["GenerativeRewriter", "HFRewriter", "INSTRUCTION", "OpenAIRewriter", "TableRewriter",
           "UNITS", "key_fingerprint", "make_rewriter", "sample_seed", "split_sentences", "text_digest", "watermark_key"]

INSTRUCTION = ("Paraphrase the following passage. Keep its meaning and every fact, name and number, use about "
               "as many words, and reply with the paraphrase only.")
REWRITERS = "lexical, hf:PATH, testbed:NAME or openai:MODEL@URL"
# a first line that only announces the answer ("Here's the paraphrase:", "Paraphrase:")
UNITS = ("passage", "sentence")  # what one generation paraphrases
_SEEDED = {"passage": "text", "sentence": "sentence"}  # what the sampling seed reads besides key and attempt
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")  # the split of the measured generative testbed
_PREAMBLE = re.compile(r"^[^\n]{0,200}\b(?:paraphrase|rewrite|rephrased?|reworded)\b[^\n]{0,80}:\s*\n?",
                       re.IGNORECASE)


def sample_seed(key: bytes, text: str, attempt: int = 0) -> int:
    """The sampling seed of a rewrite: HMAC-SHA256(key, "sample" ‖ attempt ‖ text), 63 bits."""
    return int.from_bytes(mac(key, f"sample\0{attempt}\0{text}")[:8], "big") >> 1


def split_sentences(text: str) -> list[str]:
    """The passage's sentences: split after ".", "!" or "?" followed by whitespace (the split the
    generative testbed's paraphrases were made with, benchmarks/twins_paraphrases.py)."""
    return SENTENCE_BREAK.split(text.strip())


def watermark_key(key: bytes) -> int:
    """The variant's watermark hashing key: HMAC-SHA256(key, "watermark"), 56 bits, odd (never 0:
    the green list of each step is seeded by hashing key × previous token id)."""
    return int.from_bytes(mac(key, "watermark")[:7], "big") | 1


def _opening(text: str) -> str:
    words = text.split()
    return " ".join(words[:8]) + (" …" if len(words) > 8 else "")


def clean(output: str, original: str) -> str:
    """The paraphrase alone: surrounding whitespace and quotes, and a first line announcing it,
    removed; whitespace collapsed to single spaces where the original is one paragraph."""
    out = output.strip()
    m = _PREAMBLE.match(out)
    if m and out[m.end():].strip():
        out = out[m.end():].strip()
    if len(out) > 1 and out[0] == out[-1] and out[0] in "\"'“”":
        out = out[1:-1].strip()
    out = out.strip("“”").strip()
    return out if "\n" in original.strip() else " ".join(out.split())


class GenerativeRewriter(Rewriter):
    """A language model's paraphrase of the passage under the variant's key (module docstring);
    subclasses implement ``_generate(text, key, attempt) -> str`` (the raw answer)."""

    name = "generative"
    version = 1
    backend = ""

    def __init__(self, spec, *, temperature: float = 0.7, top_p: float = 0.95, max_new_ratio: float = 1.5,
                 extra_tokens: int = 16, instruction: str = INSTRUCTION, unit: str = "passage"):
        if not temperature > 0 or not 0 < top_p <= 1 or not max_new_ratio > 0:
            raise ValueError("temperature must be > 0, top_p in (0, 1] and max_new_ratio > 0")
        if unit not in UNITS:
            raise InputError(f"unit {unit!r}: expected {' or '.join(UNITS)}")
        self.spec, self.temperature, self.top_p, self.unit = spec, temperature, top_p, unit
        self.max_new_ratio, self.extra_tokens, self.instruction = max_new_ratio, extra_tokens, instruction

    def rewrite(self, text: str, key: bytes) -> str:
        return self.redraw(text, key, 0, "")

    def redraw(self, text: str, key: bytes, attempt: int, passage: str) -> str:
        """Attempt ``attempt`` under the variant's key: another sampling seed, the same watermark;
        by sentence with ``unit="sentence"`` (module docstring)."""
        out = (clean(self._generate(text, key, attempt), text) if self.unit == "passage"
               else self._by_sentence(text, key, attempt))
        if not out:
            where = f"passage {passage!r}" if passage else f"passage \"{_opening(text)}\""
            raise EmptyRewrite(f"{where}: the rewriter {self.spec.base} returned an empty paraphrase "
                               f"(attempt {attempt}); try another model or --rewriter lexical")
        return out

    def _by_sentence(self, text: str, key: bytes, attempt: int) -> str:
        """Each sentence paraphrased alone (seed from key, attempt and the sentence), joined by
        the original's breaks (a space, or its line break); a sentence answered empty keeps its
        words; "" when every one is (the caller's ``EmptyRewrite``)."""
        sentences, breaks = split_sentences(text), SENTENCE_BREAK.findall(text.strip())
        answers = [clean(self._generate(s, key, attempt), s) for s in sentences]
        if not any(answers):
            return ""
        out = answers[0] or sentences[0]
        for gap, answer, sentence in zip(breaks, answers[1:], sentences[1:]):
            out += (gap if "\n" in gap else " ") + (answer or sentence)
        return out

    def max_new_tokens(self, n_tokens: int) -> int:
        return int(self.max_new_ratio * n_tokens) + self.extra_tokens

    def _generate(self, text: str, key: bytes, attempt: int) -> str:
        raise NotImplementedError

    def settings(self) -> dict:
        out = {"version": self.version, "backend": self.backend, "model": self.spec.base, "unit": self.unit,
               "instruction": self.instruction, "temperature": self.temperature, "top_p": self.top_p,
               "max_new_tokens": f"{self.max_new_ratio} x {self.unit} tokens + {self.extra_tokens}",
               "seed": f"HMAC-SHA256(variant key, 'sample' || attempt || {_SEEDED[self.unit]})"}
        if self.unit == "sentence":
            out["sentences"] = ("split after '.', '!' or '?' and whitespace; each paraphrased alone, joined by a "
                                "space (or the original's line break); a sentence answered empty keeps its words")
        return out


class HFRewriter(GenerativeRewriter):
    """A local model (``hf:PATH`` or ``testbed:NAME``; the spec's device and dtype options apply)
    with transformers' watermark, one hashing key per variant (module docstring)."""

    backend = "hf"

    def __init__(self, spec, *, watermark: bool = True, bias: float = 2.0, greenlist_ratio: float = 0.25, **kw):
        super().__init__(spec, **kw)
        self.watermark, self.bias, self.greenlist_ratio = watermark, bias, greenlist_ratio
        self._model = self._tokenizer = None

    def load(self):
        """(tokenizer, model), loaded once from local files (nothing is downloaded)."""
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM
            from transformers.utils import logging as hf_logging

            from trainspotter.backends.hf import default_device, gguf_kwargs, load_tokenizer
            from trainspotter.backends.spec import resolve_spec

            hf_logging.disable_progress_bar()
            path = resolve_spec(self.spec)
            folder, kwargs = gguf_kwargs(path)
            dtype = getattr(torch, self.spec.options.get("dtype", "float32"))
            model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype, **kwargs)
            self._tokenizer = load_tokenizer(path)
            self._model = model.to(self.spec.options.get("device") or default_device()).eval()
        return self._tokenizer, self._model

    def watermarking_config(self, key: bytes):
        from transformers import WatermarkingConfig

        return WatermarkingConfig(greenlist_ratio=self.greenlist_ratio, bias=self.bias,
                                  hashing_key=watermark_key(key), seeding_scheme="lefthash", context_width=1)

    def watermark_kwargs(self, key: bytes) -> dict:
        """What ``generate`` is given to watermark under ``key``: transformers' own watermark, one
        hashing key per variant (a keyed release's rewriter uses its own green lists instead)."""
        return {"watermarking_config": self.watermarking_config(key) if self.watermark else None}

    def prompt(self, text: str) -> dict:
        """The tokenized prompt: the chat template's user turn when the tokenizer has one,
        else the instruction, the passage and "Paraphrase:"."""
        tok, model = self.load()
        if getattr(tok, "chat_template", None):
            message = [{"role": "user", "content": f"{self.instruction}\n\n{text}"}]
            enc = tok.apply_chat_template(message, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        else:
            enc = tok(f"{self.instruction}\n\nPassage: {text}\n\nParaphrase:", return_tensors="pt")
        return {k: v.to(model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}

    def _generate(self, text: str, key: bytes, attempt: int) -> str:
        import torch

        tok, model = self.load()
        enc = self.prompt(text)
        n = len(tok(text, add_special_tokens=False)["input_ids"])
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        devices = [model.device.index or 0] if model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(sample_seed(key, text, attempt))
            out = model.generate(**enc, do_sample=True, temperature=self.temperature, top_p=self.top_p, top_k=0,
                                 max_new_tokens=self.max_new_tokens(n), pad_token_id=pad, **self.watermark_kwargs(key))
        return tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)

    def settings(self) -> dict:
        tok, _ = self.load()
        out = super().settings() | {"weights": self.spec.fingerprint,
                                    "prompt": "chat template" if getattr(tok, "chat_template", None) else "plain"}
        out["watermark"] = ({"scheme": "Kirchenbauer et al. 2023 (transformers WatermarkingConfig)",
                             "seeding_scheme": "lefthash", "context_width": 1, "bias": self.bias,
                             "greenlist_ratio": self.greenlist_ratio,
                             "hashing_key": "HMAC-SHA256(variant key, 'watermark'): one per variant, secret"}
                            if self.watermark else None)
        return out


class OpenAIRewriter(GenerativeRewriter):
    """An OpenAI-compatible chat endpoint (``openai:MODEL@URL``; options ``key_env``, ``timeout``,
    ``retries`` and ``tokenizer``, which only counts tokens for the cap). No watermark."""

    backend = "openai"

    def __init__(self, spec, **kw):
        super().__init__(spec, **kw)
        self._client = None
        self._tokenizer = None

    def client(self):
        if self._client is None:
            import openai

            o = self.spec.options
            self._client = openai.OpenAI(api_key=os.environ.get(o.get("key_env", "OPENAI_API_KEY")) or "sk-no-key",
                                         base_url=self.spec.where, max_retries=o.get("retries", 2),
                                         timeout=o.get("timeout", 120.0))
        return self._client

    def n_tokens(self, text: str) -> int:
        """The passage's tokens by the spec's ?tokenizer= if it names one, else ~4/3 per word."""
        if self.spec.tokenizer is not None:
            if self._tokenizer is None:
                from trainspotter.backends.hf import load_tokenizer
                from trainspotter.backends.spec import resolve_spec

                self._tokenizer = load_tokenizer(resolve_spec(self.spec))
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        return -(-4 * len(text.split()) // 3)

    def _generate(self, text: str, key: bytes, attempt: int) -> str:
        import openai

        try:
            answer = self.client().chat.completions.create(
                model=self.spec.model, messages=[{"role": "user", "content": f"{self.instruction}\n\n{text}"}],
                seed=sample_seed(key, text, attempt) % 2 ** 31, temperature=self.temperature, top_p=self.top_p,
                max_tokens=self.max_new_tokens(self.n_tokens(text)))
        except openai.APIError as e:
            status = getattr(e, "status_code", None)
            raise APIRequestError(f"rewriter {self.spec.base}: chat request for passage \"{_opening(text)}\" failed"
                                  f"{f' (HTTP {status})' if status else ''}: {type(e).__name__}") from None
        choices = answer.choices or []
        return (choices[0].message.content or "") if choices else ""

    def settings(self) -> dict:
        return super().settings() | {"watermark": None, "seed": "sent as `seed` (HMAC-SHA256(variant key, 'sample' "
                                     "|| attempt || text) mod 2^31): deterministic only where the server honours it",
                                     "note": "no watermark: the server samples with its own code"}


def key_fingerprint(key: bytes) -> str:
    """What a paraphrase table stores of a variant's key: HMAC-SHA256(key, "table"), 16 hex digits
    (names the key, reveals nothing of it)."""
    return mac(key, "table").hex()[:16]


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TableRewriter(Rewriter):
    """Paraphrases made beforehand, replayed: a JSONL(.gz) table with one row per passage, variant
    key and attempt, ``{"text_sha256", "key", "attempt", "text"}`` (``key``: ``key_fingerprint``),
    the raw answers of a generative rewriter run elsewhere, e.g. batched on a GPU
    (``benchmarks/paraphrase_device.py``, which samples as ``HFRewriter`` does). Answers are
    cleaned as ``GenerativeRewriter``'s; an attempt the table lacks is an empty rewrite (no more
    redraws), a passage it lacks entirely an InputError naming the table. ``settings()``: the
    table's sha256 and ``made``, the settings it was generated with."""

    name = "table"

    def __init__(self, path, sha256: str | None = None, made: dict | None = None):
        import gzip
        import json
        from pathlib import Path

        self.path, self.made = Path(path), dict(made or {})
        raw = self.path.read_bytes()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        if sha256 is not None and sha256 != self.sha256:
            raise InputError(f"{self.path}: sha256 {self.sha256[:12]}… is not the {sha256[:12]}… expected: "
                             "another paraphrase table")
        text = gzip.decompress(raw).decode("utf-8") if self.path.suffix == ".gz" else raw.decode("utf-8")
        self.rows: dict[tuple[str, str, int], str] = {}
        for n, line in enumerate(text.splitlines(), start=1):
            try:
                r = json.loads(line)
                self.rows[r["text_sha256"], r["key"], int(r["attempt"])] = r["text"]
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(f"{self.path}, line {n}: not a paraphrase row ({type(e).__name__}: {e})") from None

    def rewrite(self, text: str, key: bytes) -> str:
        return self.redraw(text, key, 0, "")

    def redraw(self, text: str, key: bytes, attempt: int, passage: str) -> str:
        row = (text_digest(text), key_fingerprint(key), attempt)
        where = f"passage {passage!r}" if passage else f"passage \"{_opening(text)}\""
        if row not in self.rows:
            if attempt == 0:
                raise InputError(f"{self.path}: no paraphrase of {where} under this variant's key")
            raise EmptyRewrite(f"{where}: {self.path} holds no attempt {attempt}")
        out = clean(self.rows[row], text)
        if not out:
            raise EmptyRewrite(f"{where}: the table's paraphrase (attempt {attempt}) is empty")
        return out

    def settings(self) -> dict:
        return {"table": self.path.name, "sha256": self.sha256, "made": self.made}


def make_rewriter(value: str | None, unit: str = "passage", **lexical) -> Rewriter:
    """The rewriter a ``--rewriter`` value names: ``lexical`` (default; ``lexical`` are the keyed
    lexical rewriter's options), a local model spec (``hf:PATH``, ``testbed:NAME``) or an
    ``openai:MODEL@URL`` chat endpoint (paraphrasing by ``unit``), parsed by the specs' one
    parser (backends.spec). A bad value is one InputError naming it."""
    from trainspotter.backends.spec import parse_chat_spec, parse_spec, resolve_spec

    if value is None or value == "lexical":
        return KeyedLexicalRewriter(**lexical)
    if not isinstance(value, str) or ":" not in value:
        raise InputError(f"rewriter {value!r}: expected {REWRITERS}")
    if value.startswith("openai:"):
        return OpenAIRewriter(parse_chat_spec(value), unit=unit)
    spec = parse_spec(value)
    if spec.scheme not in ("hf", "testbed"):
        raise InputError(f"rewriter {value!r}: expected {REWRITERS}")
    resolve_spec(spec)  # the model's files exist (InputError naming the spec)
    return HFRewriter(spec, unit=unit)
