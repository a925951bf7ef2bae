"""A backend that answers each text once: a benchmark that scores the same passages for several
configurations (K reference models, the k(k − 1) ordered pairs of a passage's twins) asks the
model once per distinct text and kind of answer."""

from __future__ import annotations


class MemoBackend:
    """``score`` remembers every answer by (text, distribution); everything else is the wrapped
    backend's. New texts are scored ``chunk`` at a time (None: all at once, in one call)."""

    def __init__(self, inner, chunk: int | None = None):
        self.inner, self.chunk, self.memo = inner, chunk, {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def prefill(self, texts: list[str], distribution: bool = False, label: str = "") -> None:
        """Score the texts not answered yet; with ``label``, print the progress."""
        new = list(dict.fromkeys(t for t in texts if (t, distribution) not in self.memo))
        step = self.chunk or len(new) or 1
        for start in range(0, len(new), step):
            part = new[start: start + step]
            self.memo.update({(t, distribution): s for t, s in zip(part, self.inner.score(part, distribution))})
            if label:
                print(f"{label}: {min(start + step, len(new))}/{len(new)} texts scored", flush=True)

    def score(self, texts: list[str], distribution: bool = False):
        self.prefill(texts, distribution)
        return [self.memo[t, distribution] for t in texts]
