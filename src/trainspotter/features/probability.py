"""Black-box token-probability estimation and MiniLM similarities (BADI Sec. 3, App. A.6, B.1, B.2).

A label-only API tells us, at each position t, only its greedy prediction x̂_t.
BADI estimates the token probability from the semantic similarity of x̂_t to the
true token x_t, sim(x_t, x̂_t) = cosine of their all-MiniLM-L6-v2 embeddings:

- ``sigmoid`` (default, Sec. 3 Eq. 1 / App. A.6 Eq. 5): p̃ = σ(2·sim); we return log p̃.
- ``raw`` (App. A.6 Eq. 3): estimated loss 1 − sim, i.e. log p̃ = sim − 1.
- ``petal`` (App. A.6 Eq. 4, App. B.2): a least-squares line log p = a·sim + b fitted
  on a surrogate model's true log-probs against the surrogate's own similarities,
  then applied to the target's similarities. We fit per passage on that passage's
  tokens, so no passage's features depend on any other passage (keeps the online
  test predictable), and use sim (Eq. 4), not log sim (B.2), since sim can be ≤ 0.

Token embeddings: each distinct token *string* is embedded once and kept in a table
shared by every extraction in the process and persisted as an ``.npz`` under
``artifacts/cache/`` (``default_token_table_path``), never per occurrence.
Sequence-level similarity (App. B.1) is BERTScore F1 with MiniLM's 6 layers,
since RoBERTa weights are not available offline.
"""

from __future__ import annotations

import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

ESTIMATORS = ("sigmoid", "raw", "petal")
_TABLES_LOCK = threading.Lock()
SIGMOID_SCALE = 2.0  # App. A.6: of 0.5, 2, 10, the factor 2 separates best


@lru_cache(maxsize=1)
def minilm():
    """The all-MiniLM-L6-v2 sentence encoder, loaded once per process (CPU)."""
    from sentence_transformers import SentenceTransformer

    from trainspotter.assets import minilm_dir

    return SentenceTransformer(str(minilm_dir()), device="cpu", local_files_only=True)


@lru_cache(maxsize=1)
def bert_scorer():
    """BERTScore (Zhang et al. 2020) on MiniLM's 6 layers, loaded once per process."""
    from bert_score import BERTScorer
    from transformers.utils import logging as hf_logging

    from trainspotter.assets import minilm_dir

    hf_logging.disable_progress_bar()
    return BERTScorer(model_type=str(minilm_dir()), num_layers=6, lang="en", device="cpu")


def bertscore_f1(candidates: list[str], references: list[str], batch_size: int = 64) -> np.ndarray:
    """BERTScore F1 of each candidate against its reference (BADI App. B.1: generated
    vs true suffix). Empty strings score 0 (bert_score would warn and return 0 too)."""
    out = np.zeros(len(candidates))
    idx = [i for i, (c, r) in enumerate(zip(candidates, references)) if c.strip() and r.strip()]
    if idx:
        _, _, f1 = bert_scorer().score([candidates[i] for i in idx], [references[i] for i in idx],
                                       batch_size=batch_size)
        out[idx] = f1.double().numpy()
    return out


class TokenEmbeddings:
    """Unit-norm MiniLM embeddings of token strings, each computed once and cached.

    ``encoder`` is anything with ``encode(list[str]) -> array`` (tests pass a fake);
    by default the shared MiniLM. ``path``: optional ``.npz`` table, loaded now and
    merged into on ``save`` (several processes may share one file). Thread-safe: rows
    are only ever appended, so an index never moves."""

    def __init__(self, encoder=None, path: str | Path | None = None):
        self._encoder = encoder
        self.path = Path(path) if path else None
        self.index: dict[str, int] = {}
        self._rows: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None
        self._lock = threading.RLock()
        self.encoded = 0  # strings actually sent to the encoder (for tests/benchmarks)
        self._unsaved = False
        if self.path and self.path.exists():
            self._load()

    def _load(self) -> None:
        with np.load(self.path, allow_pickle=False) as data:
            self.add(list(data["strings"]), data["vectors"])

    def add(self, strings: list[str], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1, norms)
        with self._lock:
            for s, v in zip(strings, vectors):
                if s not in self.index:
                    self.index[s] = len(self._rows)
                    self._rows.append(v)
            self._matrix = None

    def ensure(self, strings) -> None:
        """Embed, in one batch, the strings not yet in the table."""
        missing = sorted({s for s in strings if s not in self.index})
        if missing:
            enc = self._encoder or minilm()
            self.add(missing, enc.encode(missing, batch_size=256, convert_to_numpy=True,
                                         show_progress_bar=False))
            self.encoded += len(missing)
            self._unsaved = True

    def matrix(self) -> np.ndarray:
        with self._lock:
            if self._matrix is None:
                self._matrix = np.stack(self._rows) if self._rows else np.zeros((0, 1), np.float32)
            return self._matrix

    def similarity(self, a: list[str], b: list[str]) -> np.ndarray:
        """Cosine similarity of a[i] and b[i] for every i (exactly 1 where equal)."""
        self.ensure(list(a) + list(b))
        m = self.matrix()
        ia = np.fromiter((self.index[s] for s in a), dtype=np.int64, count=len(a))
        ib = np.fromiter((self.index[s] for s in b), dtype=np.int64, count=len(b))
        sim = np.einsum("ij,ij->i", m[ia], m[ib]).astype(np.float64)
        same = np.fromiter((x == y for x, y in zip(a, b)), dtype=bool, count=len(a))
        sim[same] = 1.0
        return np.clip(sim, -1.0, 1.0)

    def save(self) -> None:
        """Merge with what other runs saved meanwhile and replace the file atomically,
        under a file lock (no run loses another's strings); nothing new, nothing written."""
        if not (self.path and self._unsaved):
            return
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{self.path}.lock", timeout=120), self._lock:
            if self.path.exists():
                self._load()
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.stem, suffix=".tmp.npz")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, strings=np.array(list(self.index), dtype=str), vectors=self.matrix())
            os.replace(tmp, self.path)
            self._unsaved = False


_TABLES: dict[str | None, TokenEmbeddings] = {}


def token_table(path: str | Path | None = None) -> TokenEmbeddings:
    """The process's MiniLM token table for ``path`` (None: in memory only), shared by
    every ``extract`` call: token strings recur across chunks, flows and tokenizers."""
    key = str(Path(path).resolve()) if path else None
    with _TABLES_LOCK:
        if key not in _TABLES:
            _TABLES[key] = TokenEmbeddings(path=key)
        return _TABLES[key]


def default_token_table_path() -> Path:
    """The token table every extraction reads and extends unless its FeatureConfig names
    another (library calls and the flow's cached chunks alike, so both see the same
    embeddings): one file per MiniLM weights under the artifacts root."""
    from trainspotter.assets import minilm_dir
    from trainspotter.backends.hf import weights_fingerprint
    from trainspotter.config import artifacts_root

    return artifacts_root() / "cache" / f"minilm-tokens-{weights_fingerprint(minilm_dir())}.npz"


class TokenStrings:
    """id -> decoded string for one tokenizer, each id decoded once. Id -1 is a greedy
    token an API named only as part of a character (backends/openai_compat.py): it reads
    as U+FFFD, the string a lone byte-fragment token decodes to locally too."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.cache: dict[int, str] = {-1: "\ufffd"}

    def __call__(self, ids) -> list[str]:
        ids = [int(i) for i in ids]
        missing = sorted({i for i in ids if i not in self.cache})
        if missing:
            for i, s in zip(missing, self.tokenizer.batch_decode([[i] for i in missing])):
                self.cache[i] = s
        return [self.cache[i] for i in ids]


def sigmoid_logprob(sim: np.ndarray, scale: float = SIGMOID_SCALE) -> np.ndarray:
    """log p̃ = log σ(scale·sim) (BADI Sec. 3 Eq. 1, App. A.6 Eq. 5), computed stably."""
    return -np.logaddexp(0.0, -scale * np.asarray(sim, dtype=np.float64))


def raw_logprob(sim: np.ndarray) -> np.ndarray:
    """log p̃ = −(1 − sim) (BADI App. A.6 Eq. 3: the estimated loss is 1 − sim)."""
    return np.asarray(sim, dtype=np.float64) - 1.0


def petal_fit(surrogate_sim: np.ndarray, surrogate_logprobs: np.ndarray) -> tuple[float, float]:
    """Least-squares slope a and intercept b of log P_s(x_t|p) ≈ a·sim(x_t, x̂_t) + b
    (PETAL, BADI App. A.6 Eq. 4 / App. B.2). Constant similarities: a = 0, b = mean."""
    x = np.asarray(surrogate_sim, dtype=np.float64)
    y = np.asarray(surrogate_logprobs, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if y.size == 0:
        raise ValueError("PETAL needs a surrogate with finite log-probs (a gray-box reference)")
    var = float(((x - x.mean()) ** 2).sum())
    if var == 0.0:
        return 0.0, float(y.mean())
    a = float(((x - x.mean()) * (y - y.mean())).sum() / var)
    return a, float(y.mean() - a * x.mean())


def petal_logprob(sim: np.ndarray, a: float, b: float) -> np.ndarray:
    """log p̃ = a·sim + b, capped at 0 so it stays a log-probability."""
    return np.minimum(a * np.asarray(sim, dtype=np.float64) + b, 0.0)


def estimate_logprobs(sim: np.ndarray, estimator: str = "sigmoid", scale: float = SIGMOID_SCALE,
                      petal: tuple[float, float] | None = None) -> np.ndarray:
    """Per-token black-box log-prob estimates from similarities (BADI App. A.6)."""
    if estimator == "sigmoid":
        return sigmoid_logprob(sim, scale)
    if estimator == "raw":
        return raw_logprob(sim)
    if estimator == "petal":
        if petal is None:
            raise ValueError("the petal estimator needs a fitted (a, b)")
        return petal_logprob(sim, *petal)
    raise ValueError(f"unknown estimator {estimator!r}; expected one of {', '.join(ESTIMATORS)}")
