"""Model backends, named by spec strings (docs/architecture.md, "Conventions"):

- ``hf:PATH[?key=value&...]``  a local Hugging Face model directory or a ``.gguf`` file, or
  ``hf:ORG/NAME[@REVISION][?...]``  a model named by hub id, resolved to one snapshot of the
  Hugging Face cache (hub_models.py: its commit is the model's identity; a local path wins);
- ``testbed:NAME[?key=value&...]``  the target model of a built-in testbed
  (``testbed:NAME/reference`` for its reference model; for a pre-training testbed,
  ``testbed:NAME/out-N`` and ``testbed:NAME/in-N`` for its extra reference models, N = 0..K-1,
  built by ``trainspotter testbed build NAME --references K``; testbeds/reference_models.py).
  Keys of both: ``device`` (cpu, cuda, cuda:N, mps; default cuda when available, else
  cpu), ``dtype`` (float32, float16, bfloat16; default float32 on every device, so a
  spec gives the same features on any machine), ``batch_size`` (texts per forward pass).
- ``openai:MODEL@BASE_URL[?key=value&...]``  any OpenAI-compatible server (openai_compat.py),
  e.g. ``openai:gpt-3.5-turbo-instruct@https://api.openai.com/v1?tokenizer=hf:/models/gpt2``.
  Keys: ``tokenizer`` (required: a local HF tokenizer dir, a hub id or an hf:/testbed: spec; it
  defines positions), ``key_env`` (env var holding the API key, default OPENAI_API_KEY),
  ``mode`` (auto|logprobs-echo|logprobs|label|chat), ``batch`` (prompts per request, 32),
  ``top_logprobs`` (default: the largest of 20 and 5 the server accepts), ``timeout`` (s),
  ``retries``, ``backoff`` (s), ``seed``,
  ``max_requests``, ``max_tokens``, ``max_cost``, ``price`` (per 1k tokens, both ways) or
  ``price_prompt``/``price_completion``, ``cache`` (SQLite path). The key itself never
  appears in a spec.

A spec string is parsed once (spec.py: ``parse_spec`` -> ``ModelSpec``); ``load_backend``,
``spec_fingerprint`` and ``resolve_spec`` take either.
"""

from __future__ import annotations

import threading
from functools import lru_cache

from trainspotter.backends.base import Backend, TokenScores
from trainspotter.backends.spec import (SCHEMES, ModelSpec, References, Scheme, Spec, parse_api_spec, parse_local_spec,
                                        parse_spec, resolve_spec)

__all__ = ["Backend", "HFBackend", "ModelSpec", "References", "SCHEMES", "Scheme", "Spec", "TokenScores", "check_server", "load_backend",
           "parse_api_spec", "parse_local_spec", "parse_spec", "resolve_spec", "spec_fingerprint"]

MAY_IMPORT = ()  # besides the foundation (tests/unit/test_layering.py)
_LOADING = threading.Lock()


def __getattr__(name: str):
    """``HFBackend`` on first use: it imports torch, which parsing a spec or making a
    config (``Spec`` fields) must not pay for."""
    if name == "HFBackend":
        from trainspotter.backends.hf import HFBackend

        return HFBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_backend(spec: str | ModelSpec, batch_size: int = 8) -> Backend:
    """Load once per process: tasks call this instead of receiving a model as input
    (so an API backend's ``usage()`` adds up over a whole audit). Locked: tasks on a
    thread pool must not load the same weights twice at once."""
    spec = parse_spec(spec)
    with _LOADING:
        return _load_backend(spec, batch_size, spec.commit)


@lru_cache(maxsize=4)
def _load_backend(spec: ModelSpec, batch_size: int, commit: str | None) -> Backend:
    # ``commit``: a spec of a hub id is written alike whatever commit its branch resolved to
    return SCHEMES[spec.scheme].load(spec, batch_size)


def check_server(spec: str | ModelSpec) -> None:
    """The scheme's cheap check before any flow starts (``Scheme.check``): for an ``openai:``
    spec, that something listens at its URL (one TCP connection, no request): ``Unreachable``
    (an APIRequestError) at once when the connection is refused or the host name does not
    resolve. Local specs: nothing to check."""
    spec = parse_spec(spec)
    check = SCHEMES[spec.scheme].check
    if check is not None:
        check(spec)


def spec_fingerprint(spec: str | ModelSpec) -> str:
    """``ModelSpec.fingerprint``: the weights (and dtype) or the API model, endpoint and
    what shapes its features; never the key, and no request is sent."""
    return parse_spec(spec).fingerprint
