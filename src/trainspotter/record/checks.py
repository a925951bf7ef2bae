"""What `verify` reports: one check's outcome, and every check of one or more records."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["Check", "Verification"]


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    done: bool = True  # False: nothing to check (an unsigned record verified without a public key)
    cause: bool = False  # a changed input of the replays: the replays that fail too are its symptoms


@dataclass
class Verification:
    """Every check of one or more records, in order; ``failure``: the first that failed; ``cause``: one
    that explains it (``Check.cause``: alpha edited in the config makes the replays disagree)."""

    records: list[dict] = field(default_factory=list)  # path, digest, name, verdict of each record
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failure(self) -> Check | None:
        return next((c for c in self.checks if not c.ok), None)

    @property
    def cause(self) -> Check | None:
        return next((c for c in self.checks if not c.ok and c.cause), None)

    def to_dict(self) -> dict:
        first, cause = self.failure, self.cause
        return {"ok": self.ok, "records": self.records, "checks": [asdict(c) for c in self.checks],
                "first_failure": None if first is None else asdict(first),
                "cause": None if cause is None else asdict(cause)}
