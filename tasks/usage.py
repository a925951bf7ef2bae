"""What an audit spent on API backends, and what stopping early saved."""

from __future__ import annotations

from trainspotter.backends import load_backend

COUNTS = ("requests", "total_tokens", "cost")


class UsageMeter:
    """Snapshots ``usage()`` of the API backends among ``specs`` (local models cost no
    requests and are not loaded here), so one audit's spend is told apart from
    earlier audits in the same process."""

    def __init__(self, specs: list[str | None]):
        self.backends = [load_backend(s) for s in dict.fromkeys(specs) if s and s.startswith("openai:")]
        self.before = [b.usage() for b in self.backends]

    def report(self, pairs_queried: int, pairs_skipped: int) -> dict:
        """{} for local models; else ``usage`` (this audit's requests, tokens, cost, cache
        hits, retries) and ``saved_by_stopping``: the pairs never queried, priced at this
        audit's average per queried pair."""
        if not self.backends:
            return {}
        used: dict[str, float] = {}
        for backend, before in zip(self.backends, self.before):
            for key, value in backend.usage().items():
                used[key] = used.get(key, 0) + value - before.get(key, 0)
        per_pair = {k: used.get(k, 0) / pairs_queried if pairs_queried else 0.0 for k in COUNTS}
        saved = {"pairs": pairs_skipped} | {k: per_pair[k] * pairs_skipped for k in COUNTS}
        return {"usage": used, "saved_by_stopping": saved}
