"""What every rewriter of twins is (``Rewriter``): a passage rewritten under a variant's secret
key, deterministic in (text, key); ``mac``, the keyed hash every choice is drawn from."""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod

from trainspotter.errors import InputError

__all__ = ["EmptyRewrite", "Rewriter", "mac", "unit"]


class EmptyRewrite(InputError):
    """A rewriter returned nothing usable for a passage (the message names it); ``make_twins``
    redraws it."""


class Rewriter(ABC):
    """Rewrites a passage keeping its meaning; ``rewrite(text, key)`` depends on the text and the
    variant's secret key only (deterministic), so one key means one consistent rewrite of a
    whole dataset. ``settings()``: what manifest.json records about it (never a key)."""

    name: str = "rewriter"

    @abstractmethod
    def rewrite(self, text: str, key: bytes) -> str: ...

    def redraw(self, text: str, key: bytes, attempt: int, passage: str) -> str:
        """Another rewrite of ``text`` for the same variant (``make_twins``' redraw ``attempt`` ≥ 1
        of passage ``passage``): by default the rewrite under a key derived for that passage and
        attempt, HMAC(key, "redraw" ‖ passage ‖ attempt). A generative rewriter keeps the
        variant's watermark and samples again (``rewriters.generative``)."""
        return self.rewrite(text, mac(key, f"redraw\0{passage}\0{attempt}"))

    def settings(self) -> dict:
        return {}

    def describe(self) -> dict:
        return {"name": self.name, **self.settings()}


def mac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def unit(digest: bytes) -> float:
    """The first 8 bytes of a digest as a number in [0, 1)."""
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64
