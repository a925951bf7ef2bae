"""Content-addressed cache of API answers, shared by every flow and command.

Queries cost money (BADI App. E), so the same question is never asked twice: one row
per *prompt* (not per request), keyed by sha256 over the backend fingerprint (model +
endpoint, never the key), the method, the request parameters and the sha256 of the
prompt text. Rows are committed as each answer arrives (SQLite in WAL mode), so an
interrupted run resumes without repeating finished requests. Only deterministic
(temperature-0) requests are cached; the caller guarantees that.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from trainspotter.config import artifacts_root

SCHEMA = """CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, method TEXT NOT NULL,
    answer TEXT NOT NULL, created REAL NOT NULL)"""


def default_cache_path() -> Path:
    return artifacts_root() / "query-cache.sqlite"


def query_key(fingerprint: str, method: str, params: dict, text: str) -> str:
    """Key of one prompt's answer: everything that determines it, and nothing secret."""
    text_sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    payload = json.dumps([fingerprint, method, params, text_sha], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class QueryCache:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(SCHEMA)
        self._db.commit()

    def get_many(self, keys: list[str]) -> dict[str, object]:
        found: dict[str, object] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                chunk = keys[start:start + 500]
                rows = self._db.execute(
                    f"SELECT key, answer FROM answers WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                found.update((k, json.loads(a)) for k, a in rows)
        return found

    def put_many(self, fingerprint: str, method: str, items: dict[str, object]) -> None:
        """Store answers in one transaction, committed at once (survives a crash right after)."""
        now = time.time()
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                [(k, fingerprint, method, json.dumps(v), now) for k, v in items.items()])
            self._db.commit()

    def stats(self) -> dict:
        with self._lock:
            total = self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            groups = self._db.execute(
                "SELECT fingerprint, method, COUNT(*) FROM answers GROUP BY fingerprint, method").fetchall()
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))
        return {"path": str(self.path), "entries": total, "bytes": size,
                "by_backend": [{"fingerprint": f, "method": m, "entries": n} for f, m, n in groups]}

    def clear(self) -> int:
        with self._lock:
            n = self._db.execute("DELETE FROM answers").rowcount
            self._db.commit()
            self._db.execute("VACUUM")
        return n

    def close(self) -> None:
        with self._lock:
            self._db.close()
