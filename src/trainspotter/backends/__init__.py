"""Model backends, named by spec strings (DESIGN.md, Conventions):

- ``hf:PATH``            a local Hugging Face model directory or a ``.gguf`` file;
- ``testbed:NAME``       the target model of a built-in testbed
  (``testbed:NAME/reference`` for its reference model).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import InputError
from .base import Backend, TokenScores
from .hf import HFBackend, weights_fingerprint

__all__ = ["Backend", "HFBackend", "TokenScores", "load_backend", "resolve_spec", "spec_fingerprint"]


def resolve_spec(spec: str) -> Path:
    """Local path a spec points to; raises InputError naming the problem."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise InputError(f"model spec {spec!r}: expected hf:PATH or testbed:NAME[/reference]")
    if kind == "hf":
        path = Path(rest).expanduser()
    elif kind == "testbed":
        from ..testbed import testbed_dir

        name, _, role = rest.partition("/")
        role = role or "target"
        if role not in ("target", "reference"):
            raise InputError(f"model spec {spec!r}: role must be target or reference")
        path = testbed_dir(name) / role
        if not path.exists():
            raise InputError(f"model spec {spec!r}: testbed {name!r} is not built; "
                             f"run `trainspotter testbed build {name}`")
    else:
        raise InputError(f"model spec {spec!r}: unknown backend {kind!r} (expected hf or testbed)")
    if not path.exists():
        raise InputError(f"model spec {spec!r}: {path} does not exist")
    return path


@lru_cache(maxsize=4)
def load_backend(spec: str, batch_size: int = 8) -> HFBackend:
    """Load once per process: tasks call this instead of receiving a model as input."""
    return HFBackend(resolve_spec(spec), batch_size=batch_size)


def spec_fingerprint(spec: str) -> str:
    """Fingerprint of the weights a spec points to (changes when a testbed is rebuilt)."""
    return weights_fingerprint(resolve_spec(spec))
