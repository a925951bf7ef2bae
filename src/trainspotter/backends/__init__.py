"""Model backends, named by spec strings (DESIGN.md, Conventions):

- ``hf:PATH[?key=value&...]``  a local Hugging Face model directory or a ``.gguf`` file;
- ``testbed:NAME[?key=value&...]``  the target model of a built-in testbed
  (``testbed:NAME/reference`` for its reference model).
  Keys of both: ``device`` (cpu, cuda, cuda:N, mps; default cuda when available, else
  cpu), ``dtype`` (float32, float16, bfloat16; default float32 on every device, so a
  spec gives the same features on any machine), ``batch_size`` (texts per forward pass).
- ``openai:MODEL@BASE_URL[?key=value&...]``  any OpenAI-compatible server (openai_compat.py),
  e.g. ``openai:gpt-3.5-turbo-instruct@https://api.openai.com/v1?tokenizer=hf:/models/gpt2``.
  Keys: ``tokenizer`` (required: a local HF tokenizer dir or an hf:/testbed: spec; it
  defines positions), ``key_env`` (env var holding the API key, default OPENAI_API_KEY),
  ``mode`` (auto|label|logprobs|chat), ``batch`` (prompts per request, 32),
  ``top_logprobs`` (5), ``timeout`` (s), ``retries``, ``backoff`` (s), ``seed``,
  ``max_requests``, ``max_tokens``, ``max_cost``, ``price`` (per 1k tokens, both ways) or
  ``price_prompt``/``price_completion``, ``cache`` (SQLite path). The key itself never
  appears in a spec.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.backends.base import Backend, TokenScores
from trainspotter.backends.hf import HFBackend, model_fingerprint

__all__ = ["Backend", "HFBackend", "TokenScores", "load_backend", "parse_api_spec", "parse_local_spec",
           "resolve_spec", "spec_fingerprint"]

_LOCAL_PARAMS = {"device": str, "dtype": str, "batch_size": int}
DTYPES = ("float32", "float16", "bfloat16")

_API_PARAMS = {"tokenizer": str, "key_env": str, "mode": str, "batch": int, "top_logprobs": int,
               "timeout": float, "retries": int, "backoff": float, "seed": int, "max_requests": float,
               "max_tokens": float, "max_cost": float, "price": float, "price_prompt": float,
               "price_completion": float, "cache": str}


def parse_api_spec(spec: str):
    """``openai:MODEL@BASE_URL[?k=v&...]`` -> APIConfig (no network, no tokenizer loading)."""
    import re
    from trainspotter.backends.openai_compat import MODES, APIConfig

    m = re.fullmatch(r"openai:(?P<model>[^?]+?)@(?P<url>https?://[^?]+)(?:\?(?P<query>.*))?", spec)
    if not m:
        raise InputError(f"model spec {spec!r}: expected openai:MODEL@http(s)://HOST[:PORT]/PATH[?k=v&...]")
    kwargs = _query_options(spec, m["query"] or "", _API_PARAMS)
    if "price" in kwargs:
        price = kwargs.pop("price")
        kwargs.setdefault("price_prompt", price)
        kwargs.setdefault("price_completion", price)
    for short in ("price_prompt", "price_completion"):
        if short in kwargs:
            kwargs[short + "_1k"] = kwargs.pop(short)
    if kwargs.get("mode", "auto") not in MODES:
        raise InputError(f"model spec {spec!r}: mode must be one of {', '.join(MODES)}")
    if not kwargs.get("tokenizer"):
        raise InputError(f"model spec {spec!r}: name the local tokenizer that defines positions, "
                         f"e.g. ?tokenizer=hf:/path/to/model or ?tokenizer=testbed:tiny")
    tok = kwargs["tokenizer"]
    kwargs["tokenizer"] = str(resolve_spec(tok) if tok.startswith(("hf:", "testbed:")) else _existing(spec, tok))
    return APIConfig(model=m["model"], base_url=m["url"].rstrip("/"), **kwargs)


def _existing(spec: str, path: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"model spec {spec!r}: tokenizer {p} does not exist")
    return p


def _query_options(spec: str, query: str, params: dict) -> dict:
    """The ``k=v&...`` options of a model spec, each converted by ``params[k]`` (an unknown
    key or a bad value is an InputError naming the spec and the option)."""
    from urllib.parse import parse_qsl

    opts: dict = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in params:
            raise InputError(f"model spec {spec!r}: unknown option {key!r} "
                             f"(expected one of {', '.join(params)})")
        try:
            opts[key] = params[key](value)
        except ValueError:
            kind = params[key].__name__
            raise InputError(f"model spec {spec!r}: option {key}={value!r} is not "
                             f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}") from None
    return opts


def parse_local_spec(spec: str) -> tuple[str, dict]:
    """``hf:PATH?k=v&...`` / ``testbed:NAME?k=v&...`` -> (spec without the query, options).
    Options are validated here (unknown key, bad value: InputError naming spec and key)."""
    import re
    import torch

    base, _, query = spec.partition("?")
    opts = _query_options(spec, query, _LOCAL_PARAMS)
    if opts.get("dtype", "float32") not in DTYPES:
        raise InputError(f"model spec {spec!r}: option dtype={opts['dtype']!r} is not one of {', '.join(DTYPES)}")
    if opts.get("batch_size", 1) < 1:
        raise InputError(f"model spec {spec!r}: option batch_size={opts['batch_size']} must be at least 1")
    device = opts.get("device")
    if device is not None:
        if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", device):
            raise InputError(f"model spec {spec!r}: option device={device!r} is not cpu, cuda, cuda:N or mps")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InputError(f"model spec {spec!r}: option device={device!r} but CUDA is not available")
    return base, opts


def resolve_spec(spec: str) -> Path:
    """Local path a spec points to (for openai: specs, the local tokenizer); raises
    InputError naming the problem (a local spec's query options included)."""
    if spec.startswith("openai:"):
        return Path(parse_api_spec(spec).tokenizer)
    spec, _ = parse_local_spec(spec)
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise InputError(f"model spec {spec!r}: expected hf:PATH or testbed:NAME[/reference]")
    if kind == "hf":
        path = Path(rest).expanduser()
    elif kind == "testbed":
        from trainspotter.evaluation.testbed import testbed_dir

        name, _, role = rest.partition("/")
        role = role or "target"
        if role not in ("target", "reference"):
            raise InputError(f"model spec {spec!r}: role must be target or reference")
        path = testbed_dir(name) / role
        if not path.exists():
            raise InputError(f"model spec {spec!r}: testbed {name!r} is not built; "
                             f"run `trainspotter testbed build {name}`")
    else:
        raise InputError(f"model spec {spec!r}: unknown backend {kind!r} (expected hf, testbed or openai)")
    if not path.exists():
        raise InputError(f"model spec {spec!r}: {path} does not exist")
    return path


_LOADING = threading.Lock()


def load_backend(spec: str, batch_size: int = 8) -> Backend:
    """Load once per process: tasks call this instead of receiving a model as input
    (so an API backend's ``usage()`` adds up over a whole audit). Locked: tasks on a
    thread pool must not load the same weights twice at once."""
    with _LOADING:
        return _load_backend(spec, batch_size)


@lru_cache(maxsize=4)
def _load_backend(spec: str, batch_size: int) -> Backend:
    if spec.startswith("openai:"):
        from trainspotter.backends.openai_compat import OpenAIBackend

        return OpenAIBackend(parse_api_spec(spec))
    _, opts = parse_local_spec(spec)
    return HFBackend(resolve_spec(spec), device=opts.get("device"), dtype=opts.get("dtype", "float32"),
                     batch_size=opts.get("batch_size", batch_size))


def spec_fingerprint(spec: str) -> str:
    """Fingerprint of the weights a spec points to (changes when a testbed is rebuilt)
    and the dtype they run in: bfloat16 gives other log-probs than float32, so cached
    features must not be shared. The device is left out on purpose (cpu and cuda agree
    to float rounding) and so is batch_size (padding is masked).
    For an API: model + endpoint + what shapes the features (tokenizer files, mode,
    top-k); never the key, and no request is sent."""
    if spec.startswith("openai:"):
        from trainspotter.config import fingerprint
        from trainspotter.backends.openai_compat import api_fingerprint, tokenizer_identity

        c = parse_api_spec(spec)
        return fingerprint(api_fingerprint(c.model, c.base_url), tokenizer_identity(c.tokenizer),
                           c.mode, c.top_logprobs)
    _, opts = parse_local_spec(spec)
    return model_fingerprint(resolve_spec(spec), opts.get("dtype", "float32"))
