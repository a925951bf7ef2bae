"""Model specs (docs/architecture.md, "Conventions"; the schemes and their options are listed in
backends/__init__.py). ``parse_spec`` reads a spec string once into a ``ModelSpec``
(syntax and options, nothing on disk); ``resolve_spec`` finds what it points to,
``api_config`` the API backend's settings. Every problem is one InputError naming the spec.

``SCHEMES`` is the one registry of backend schemes: each ``Scheme`` says how to parse, resolve,
fingerprint and load a spec, whether it answers over a network (``remote``) and which library
modules compute its answers (the extraction cache key). Nothing else tests a scheme by name, so
a new backend is its module plus one ``Scheme`` entry (docs/architecture.md, "Registries").
A ``testbed:`` spec is resolved from the files under the artifacts root (``trainspotter.layout``),
never through ``evaluation`` (which builds them).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qsl

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from trainspotter.backends.api.config import APIConfig
from trainspotter.errors import InputError
from trainspotter.layout import load_manifest, load_reference_manifest, references_dir, testbed_dir

_LOCAL_PARAMS = {"device": str, "dtype": str, "batch_size": int}
DTYPES = ("float32", "float16", "bfloat16")

_API_PARAMS = {"tokenizer": str, "key_env": str, "mode": str, "batch": int, "top_logprobs": int,
               "timeout": float, "retries": int, "backoff": float, "seed": int, "max_requests": float,
               "max_tokens": float, "max_cost": float, "price": float, "price_prompt": float,
               "price_completion": float, "cache": str}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec; made by ``parse_spec``. Equal specs are specs written alike."""

    text: str  # as written
    scheme: str  # hf, testbed or openai
    base: str  # without the options: hf:PATH, testbed:NAME[/ROLE], openai:MODEL@URL
    where: str  # hf: the path as written; testbed: NAME; openai: BASE_URL
    role: str = "target"  # testbed: target, reference, out-N or in-N
    model: str = ""  # openai: MODEL
    options: dict = field(default_factory=dict, compare=False)  # validated; openai: APIConfig's fields
    tokenizer: ModelSpec | str | None = field(default=None, compare=False)  # openai: a local spec or path
    weights: bool = field(default=True, compare=False)  # False: a tokenizer only (an API's ?tokenizer=)

    @cached_property
    def snapshot(self):
        """``hf:ORG/NAME[@REVISION]``: the hub snapshot (``trainspotter.hub.Snapshot``) it names,
        resolved once, where the spec is first resolved (the CLI's edge: ``check_loadable``); its
        commit is the model's identity. None for a local path and the other schemes."""
        from trainspotter.backends.hub_models import model_snapshot

        return model_snapshot(self) if self.scheme == "hf" else None

    @property
    def commit(self) -> str | None:
        """The resolved commit of a model named by hub id (None otherwise)."""
        return self.snapshot.commit if self.snapshot is not None else None

    @cached_property
    def fingerprint(self) -> str:
        """Fingerprint of the weights the spec points to (changes when a testbed is rebuilt:
        parse the spec again to see it) and the dtype they run in: bfloat16 gives other
        log-probs than float32, so cached features must not be shared. The device is left
        out on purpose (cpu and cuda agree to float rounding) and so is batch_size (padding
        is masked). For an API: model + endpoint + what shapes the features (tokenizer files,
        mode, top-k); never the key, and no request is sent. A model named by hub id: its commit
        too (a moved branch is another model, never a cache hit)."""
        return SCHEMES[self.scheme].fingerprint(self)

    @property
    def remote(self) -> bool:
        """Answers come over a network (metered, checked reachable, recorded by host)."""
        return SCHEMES[self.scheme].remote


@dataclass(frozen=True)
class Scheme:
    """One backend scheme (``SCHEMES``): everything the library needs to know of it."""

    name: str
    syntax: str  # for help texts and messages: "hf:PATH"
    parse: Callable[[str], ModelSpec]  # the spec string -> ModelSpec (InputError naming the spec)
    resolve: Callable[[ModelSpec], Path]  # the local files it reads (for an API: its tokenizer)
    fingerprint: Callable[[ModelSpec], str]  # what its answers depend on (ModelSpec.fingerprint)
    backend: str  # "module:function", function(spec, batch_size) -> Backend; imported on first load
    code: tuple[str, ...]  # library modules computing its answers (tasks.extract.EXTRACT_CODE)
    remote: bool = False  # answers over a network: usage metered, reachability checked, host recorded
    check: Callable[[ModelSpec], None] | None = None  # cheap check before any flow starts (no request)

    def load(self, spec: ModelSpec, batch_size: int):
        module, _, function = self.backend.partition(":")
        return getattr(importlib.import_module(module), function)(spec, batch_size)


def parse_spec(spec: str | ModelSpec) -> ModelSpec:
    """The one parser of spec strings (a ModelSpec is returned as it is)."""
    if isinstance(spec, ModelSpec):
        return spec
    if not isinstance(spec, str):
        raise InputError(f"model spec {spec!r}: expected a string such as {schemes_help()}")
    scheme = SCHEMES.get(spec.partition(":")[0]) if ":" in spec else None
    return scheme.parse(spec) if scheme else _parse_local(spec)


# A config field holding a model spec: a string is parsed once, where the config is made (the
# edge), and the ModelSpec travels on; dumped (MLflow params, ledgers, Prefect) as written.
Spec = Annotated[ModelSpec, PlainValidator(parse_spec), PlainSerializer(lambda s: s.text, return_type=str),
                 WithJsonSchema({"type": "string"})]


def _parse_local(spec: str) -> ModelSpec:
    """``hf:PATH?k=v&...`` / ``testbed:NAME[/ROLE]?k=v&...``: options first (an unknown key or
    bad value names the whole spec), then the scheme and role (naming the spec without options)."""
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
        if device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise InputError(f"model spec {spec!r}: option device={device!r} but CUDA is not available")
    kind, sep, rest = base.partition(":")
    if not sep or not rest:
        raise InputError(f"model spec {base!r}: expected hf:PATH or testbed:NAME[/reference]")
    if kind == "hf":
        return ModelSpec(spec, "hf", base, rest, options=opts)
    if kind != "testbed":
        names = list(SCHEMES)
        raise InputError(f"model spec {base!r}: unknown backend {kind!r} "
                         f"(expected {', '.join(names[:-1])} or {names[-1]})")
    name, _, role = rest.partition("/")
    if not re.fullmatch(r"target|reference|(out|in)-(0|[1-9]\d*)", role or "target"):
        raise InputError(f"model spec {base!r}: role must be target or reference (or out-N, in-N: "
                         f"a pre-training testbed's reference models, N = 0, 1, ...)")
    return ModelSpec(spec, "testbed", base, name, role=role or "target", options=opts)


def _parse_api(spec: str, tokenizer_required: bool = True) -> ModelSpec:
    """``openai:MODEL@BASE_URL[?k=v&...]`` (no network, no tokenizer loading)."""
    from trainspotter.backends.api.modes import MODES

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
    tok = kwargs.pop("tokenizer", None)
    if not tok and tokenizer_required:
        raise InputError(f"model spec {spec!r}: name the local tokenizer that defines positions, "
                         f"e.g. ?tokenizer=hf:/path/to/model or ?tokenizer=testbed:tiny")
    return ModelSpec(spec, "openai", spec.partition("?")[0], m["url"].rstrip("/"), model=m["model"],
                     options=kwargs, tokenizer=_tokenizer_spec(tok))


def _tokenizer_spec(tok: str | None) -> ModelSpec | str | None:
    """An API spec's ``?tokenizer=``: an ``hf:``/``testbed:`` spec or a bare hub id ``ORG/NAME[@REV]``
    (its tokenizer files only, no weights), else a local path as written."""
    from trainspotter.hub import is_hub_id

    if tok and (tok.startswith(("hf:", "testbed:")) or is_hub_id(tok)):
        return replace(parse_spec(tok if ":" in tok else f"hf:{tok}"), weights=False)
    return tok or None


def parse_chat_spec(spec: str) -> ModelSpec:
    """An ``openai:MODEL@BASE_URL[?k=v&...]`` chat endpoint asked for text only (a twins
    rewriter): ``parse_spec``'s syntax and options, its ``?tokenizer=`` optional."""
    return _parse_api(spec, tokenizer_required=False)


def _query_options(spec: str, query: str, params: dict) -> dict:
    """The ``k=v&...`` options of a model spec, each converted by ``params[k]`` (an unknown
    key or a bad value is an InputError naming the spec and the option)."""
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


def resolve_spec(spec: str | ModelSpec) -> Path:
    """Local path a spec points to (for openai: specs, the local tokenizer); raises
    InputError naming the problem (a local spec's query options included)."""
    s = parse_spec(spec)
    return SCHEMES[s.scheme].resolve(s)


def _existing(s: ModelSpec, path: Path) -> Path:
    if not path.exists():
        raise InputError(f"model spec {s.base!r}: {path} does not exist")
    return path


# What transformers needs to load a model folder offline (any one file of each group).
WEIGHTS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")
TOKENIZER = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt", "*.tiktoken")


def load_problem(path: Path, weights: bool = True) -> str | None:
    """Why transformers cannot load this model (``weights``) or tokenizer folder or ``.gguf``
    file offline, in words ("has no config.json and no tokenizer (...)"); None when it can, as
    far as the files show. Reads no more than a gguf's first four bytes."""
    if path.is_file():
        if path.suffix != ".gguf":
            return "is a file, but neither a model folder nor a .gguf file"
        with open(path, "rb") as f:
            return None if f.read(4) == b"GGUF" else "is not a GGUF file (it does not start with the GGUF header)"
    has = lambda patterns: any(next(path.glob(p), None) for p in patterns)  # noqa: E731
    found = {"config.json": not weights or (path / "config.json").is_file(),
             "weights (*.safetensors or pytorch_model*.bin)": not weights or has(WEIGHTS),
             "tokenizer (tokenizer.json, tokenizer.model or vocab.json)": has(TOKENIZER)}
    missing = [f"no {what}" for what, ok in found.items() if not ok]
    return None if not missing else "has " + (missing[0] if len(missing) == 1 else
                                              ", ".join(missing[:-1]) + " and " + missing[-1])


def check_loadable(spec: str | ModelSpec) -> Path:
    """``resolve_spec``, then whether what it points to can load (``load_problem``): an ``hf:``
    or ``testbed:`` model folder or gguf, an ``openai:`` spec's tokenizer. One InputError naming
    the folder and what it lacks, before any flow or run starts: a model loads much later, in a
    task. The CLI's edge (``edge_specs``) and ``make_rewriter`` call it."""
    s = parse_spec(spec)
    path = resolve_spec(s)
    if problem := load_problem(path, weights=s.scheme != "openai"):
        what = "the tokenizer " if s.scheme == "openai" else ""
        raise InputError(f"model spec {s.base!r}: {what}{path} {problem}")
    return path


def _resolve_api(s: ModelSpec) -> Path:
    """An openai: spec's local tokenizer (the files that define its positions)."""
    if isinstance(s.tokenizer, ModelSpec):
        return resolve_spec(s.tokenizer)
    path = Path(s.tokenizer).expanduser()
    if not path.exists():
        raise InputError(f"model spec {s.text!r}: tokenizer {path} does not exist")
    return path


def _resolve_testbed(s: ModelSpec) -> Path:
    """A built testbed's target or reference model, or one of its reference models out-N/in-N."""
    if s.role not in ("target", "reference"):
        return _existing(s, _reference_model(s))
    path = testbed_dir(s.where) / s.role
    if not path.exists():
        raise InputError(f"model spec {s.base!r}: testbed {s.where!r} is not built; "
                         f"run `trainspotter testbed build {s.where}`")
    return _existing(s, path)


def _reference_model(s: ModelSpec) -> Path:
    """A testbed's reference model ``out-N``/``in-N``: complete only once the reference
    manifest lists it for the current build of the testbed (a killed build is not)."""
    base = load_manifest(s.where)
    if base is None:
        raise InputError(f"model spec {s.base!r}: testbed {s.where!r} is not built; "
                         f"run `trainspotter testbed build {s.where}`")
    if base["config"]["mode"] != "pretrain":
        raise InputError(f"model spec {s.base!r}: testbed {s.where!r} has no reference models "
                         f"(only pre-training testbeds have out-N and in-N)")
    manifest = load_reference_manifest(s.where)
    if manifest is None or s.role not in manifest["models"]:
        k = int(s.role.partition("-")[2]) + 1
        raise InputError(f"model spec {s.base!r}: reference model {s.role} of testbed {s.where!r} is not "
                         f"built; run `trainspotter testbed build {s.where} --references {k}`")
    return references_dir(s.where) / s.role


def _resolve_hf(s: ModelSpec) -> Path:
    """An ``hf:`` spec's files: the hub snapshot it names, else the local folder or gguf."""
    return s.snapshot.path if s.snapshot is not None else _existing(s, Path(s.where).expanduser())


def _local_fingerprint(s: ModelSpec) -> str:
    from trainspotter.backends.hub_models import hub_fingerprint
    from trainspotter.backends.weights import model_fingerprint

    weights = model_fingerprint(resolve_spec(s), s.options.get("dtype", "float32"))
    return weights if s.commit is None else hub_fingerprint(weights, s.commit)


def _api_fingerprint(s: ModelSpec) -> str:
    from trainspotter.backends.api.config import api_fingerprint, tokenizer_identity
    from trainspotter.config import fingerprint

    c = api_config(s)
    return fingerprint(api_fingerprint(c.model, c.base_url), tokenizer_identity(c.tokenizer), c.mode, c.top_logprobs)


def _check_api(s: ModelSpec) -> None:
    from trainspotter.backends.api.errors import check_reachable

    check_reachable(s.where, s.model)


_COMMON = ("trainspotter.backends", "trainspotter.backends.base", "trainspotter.backends.spec",
           "trainspotter.backends.weights")
_LOCAL = _COMMON + ("trainspotter.backends.hf", "trainspotter.backends.hub_models")
# The one registry of backend schemes, in the order error messages list them (the parsers are
# looked up when called, so a test may wrap them).
SCHEMES: dict[str, Scheme] = {s.name: s for s in [
    Scheme("hf", "hf:PATH", lambda spec: _parse_local(spec), _resolve_hf, _local_fingerprint,
           "trainspotter.backends.hf:from_spec", _LOCAL),
    Scheme("testbed", "testbed:NAME", lambda spec: _parse_local(spec), _resolve_testbed, _local_fingerprint, "trainspotter.backends.hf:from_spec",
           _LOCAL),
    Scheme("openai", "openai:MODEL@URL with ?tokenizer=SPEC", lambda spec: _parse_api(spec), _resolve_api, _api_fingerprint,
           "trainspotter.backends.openai_compat:from_spec",
           _COMMON + ("trainspotter.backends.openai_compat", "trainspotter.backends.api.config",
                      "trainspotter.backends.api.modes", "trainspotter.backends.api.positions",
                      "trainspotter.backends.api.probe", "trainspotter.backends.api.transport"),
           remote=True, check=_check_api),
]}


def schemes_help() -> str:
    """'hf:PATH, testbed:NAME or openai:MODEL@URL with ?tokenizer=SPEC' (help texts, messages)."""
    forms = [s.syntax for s in SCHEMES.values()]
    return ", ".join(forms[:-1]) + " or " + forms[-1]


def api_config(spec: ModelSpec) -> APIConfig:
    """The API backend's settings of an openai: spec, its tokenizer resolved to a path."""
    if spec.scheme != "openai":  # this scheme's own settings
        raise InputError(f"model spec {spec.text!r}: expected openai:MODEL@http(s)://HOST[:PORT]/PATH[?k=v&...]")
    return APIConfig(model=spec.model, base_url=spec.where, tokenizer=str(resolve_spec(spec)), **spec.options)


def parse_api_spec(spec: str | ModelSpec) -> APIConfig:
    """``openai:MODEL@BASE_URL[?k=v&...]`` -> APIConfig (no network, no tokenizer loading)."""
    return api_config(spec if isinstance(spec, ModelSpec) else _parse_api(spec))


def parse_local_spec(spec: str | ModelSpec) -> tuple[str, dict]:
    """``hf:PATH?k=v&...`` / ``testbed:NAME?k=v&...`` -> (spec without the query, options)."""
    s = spec if isinstance(spec, ModelSpec) else _parse_local(spec)
    return s.base, dict(s.options)


def parse_references(value) -> tuple[ModelSpec, ...]:
    """Reference models as given: none (None, "" or []), one spec, or a list of specs; each
    parsed once. A model named twice is an InputError: two copies of one reference would
    fake agreement between references (zero spread)."""
    if value is None or value == "":
        return ()
    specs = tuple(parse_spec(v) for v in ([value] if isinstance(value, (str, ModelSpec)) else value))
    seen = set()
    for s in specs:
        if s.base in seen:
            raise InputError(f"reference model {s.base!r} is given twice; each --reference must be another model")
        seen.add(s.base)
    return specs


def _dump_references(specs: tuple[ModelSpec, ...]):
    # None / one string as before several references existed (ledgers and Prefect parameters
    # written then read back the same); a list of strings from two on.
    texts = [s.text for s in specs]
    return None if not texts else texts[0] if len(texts) == 1 else texts


# A config field holding K ≥ 0 reference models (``--reference`` given K times).
References = Annotated[tuple[ModelSpec, ...], PlainValidator(parse_references), PlainSerializer(_dump_references),
                       WithJsonSchema({"anyOf": [{"type": "null"}, {"type": "string"},
                                                 {"type": "array", "items": {"type": "string"}}]})]
