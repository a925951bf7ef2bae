"""Green lists of a keyed release's watermark (Kirchenbauer et al., ICML 2023; Sander et al.,
NeurIPS 2024): which vocabulary entries are "green" after a previous token, under one key.

Two schemes, both left-hash with context width 1 (the green list after token a depends on the key
and a only: at most one list per vocabulary entry per key):

- ``KeyedGreenList`` (``SCHEME``, what a keyed release uses): token v is green after a when
  Philox4x32-10(counter (v, 0, 0, 0), key HMAC-SHA256(K, "green-list" ‖ a)[:8]) has a first
  word below T = round(γ 2^32). Each entry is green on its own, with probability exactly
  γ' = T / 2^32 for a key drawn at random (the PRF assumption HMAC rests on everywhere), so the
  null probability of a window is γ' whatever came before; checking a window costs one HMAC and
  one Philox block, so the statistic under M ≥ 1000 random keys is affordable on a CPU
  (``green_many``), and a whole list is one vectorised Philox pass (generation, gray-box).
- ``CudaRandpermGreenList``: transformers' ``WatermarkingConfig`` (lefthash) as it runs on a CUDA
  device, the scheme of the committed SmolLM2 paraphrases (``benchmarks/paraphrase_device.py``).
  There the list is the first int(γV) entries of ``torch.randperm(V)`` seeded by
  hashing key × a mod (2^64 − 1) on a CUDA generator, and CUDA's randperm is not the CPU's: it
  sorts an arange by random 64-bit keys from the Philox kernel of ``random_`` (element i: counter
  (0, 0, i, 0), i.e. subsequence i), by their low ``bits`` bits (34 for V = 49152; a stable radix
  sort), then shuffles runs of equal keys by Fisher-Yates with the generator's next Philox offset
  (aten/src/ATen/native/cuda/Randperm.cu, Randperm.cuh, DistributionTemplates.h). This module
  reproduces that on a CPU, which holds for any device whose grid covers V / 256 blocks in one pass
  (every GPU with ≥ 24 multiprocessors). A fixed-size list makes later windows sharing a previous
  token dependent: their exact null is hypergeometric (``trainspotter.stats.exact_null``).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from pathlib import Path

import numpy as np

__all__ = ["SCHEME", "CudaRandpermGreenList", "GreenBias", "KeyedGreenList", "green_many", "philox4x32",
           "tokenizer_files"]

SCHEME = "trainspotter-green-v1"
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def philox4x32(c0, c1, c2, c3, k0, k1) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 (Salmon et al., SC 2011; curand's ``curand_Philox4x32_10``), vectorised: the
    four 32-bit output words (as uint64 arrays) of counter (c0, c1, c2, c3) under key (k0, k1)."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(a, dtype=np.uint64) for a in (c0, c1, c2, c3, k0, k1))
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _LO, (k1 + _W1) & _LO
        p0, p1 = _M0 * c0, _M1 * c2  # < 2^64: exact in uint64
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ k0, p1 & _LO, (p0 >> _32) ^ c3 ^ k1, p0 & _LO
    return c0, c1, c2, c3


def _prev_keys(key: bytes, prevs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Philox key of each previous token: HMAC-SHA256(K, "green-list" ‖ a as 4 bytes)[:8]."""
    raw = [hmac.digest(key, b"green-list\0" + int(a).to_bytes(4, "big"), "sha256")[:8] for a in prevs]
    words = np.frombuffer(b"".join(raw), dtype=">u4").astype(np.uint64).reshape(-1, 2)
    return words[:, 0], words[:, 1]


class KeyedGreenList:
    """The keyed release's green lists under key ``key`` (≥ 8 bytes; a release derives 32 with
    ``proofs.beacon.derive``) over ``vocab_size`` entries, green share ``gamma`` (module docstring)."""

    fixed_size = False

    def __init__(self, key: bytes, vocab_size: int, gamma: float = 0.25):
        if len(key) < 8:
            raise ValueError("a watermark key of at least 64 bits")
        if not 0.0 < gamma < 1.0 or vocab_size < 2:
            raise ValueError("gamma in (0, 1) and a vocabulary of at least 2 entries")
        self.key, self.vocab_size = key, int(vocab_size)
        self.threshold = round(gamma * 2 ** 32)
        self.gamma = self.threshold / 2 ** 32  # exact: each entry is green with this probability

    def is_green(self, prev, nxt) -> np.ndarray:
        """Whether each window (prev[i], nxt[i]) is green under the key."""
        prev, nxt = np.asarray(prev, dtype=np.int64), np.asarray(nxt, dtype=np.int64)
        uniq, inverse = np.unique(prev, return_inverse=True)
        k0, k1 = _prev_keys(self.key, uniq)
        word = philox4x32(nxt, 0, 0, 0, k0[inverse], k1[inverse])[0]
        return word < np.uint64(self.threshold)

    def mask(self, prev: int) -> np.ndarray:
        """The whole green list after ``prev`` as a boolean vector of ``vocab_size``."""
        k0, k1 = _prev_keys(self.key, np.array([prev]))
        return philox4x32(np.arange(self.vocab_size), 0, 0, 0, k0[0], k1[0])[0] < np.uint64(self.threshold)

    def describe(self) -> dict:
        return {"scheme": SCHEME, "gamma": self.gamma, "vocab_size": self.vocab_size, "context": "lefthash, width 1",
                "green": "Philox4x32-10(ctr (v,0,0,0), key HMAC-SHA256(K, 'green-list' || prev)[:8]).x < gamma 2^32"}


def green_many(keys: list[bytes], prev, nxt, gamma: float = 0.25) -> np.ndarray:
    """(M, n): whether window i is green under each of M keys of ``KeyedGreenList`` (the
    statistic under random keys, one HMAC per key and distinct previous token)."""
    prev, nxt = np.asarray(prev, dtype=np.int64), np.asarray(nxt, dtype=np.int64)
    uniq, inverse = np.unique(prev, return_inverse=True)
    threshold = np.uint64(round(gamma * 2 ** 32))
    out = np.empty((len(keys), len(prev)), dtype=bool)
    for m, key in enumerate(keys):
        k0, k1 = _prev_keys(key, uniq)
        out[m] = philox4x32(nxt, 0, 0, 0, k0[inverse], k1[inverse])[0] < threshold
    return out


class CudaRandpermGreenList:
    """transformers' lefthash green lists (``WatermarkingConfig``, context width 1) as a CUDA
    device draws them, reproduced on a CPU (module docstring): a fixed-size list of
    int(γV) entries after each previous token, for ``hashing_key``."""

    fixed_size = True

    def __init__(self, hashing_key: int, vocab_size: int, gamma: float = 0.25):
        self.hashing_key, self.vocab_size = int(hashing_key), int(vocab_size)
        self.size = int(vocab_size * gamma)
        self.gamma = self.size / self.vocab_size
        n = float(vocab_size)  # randperm's key bits: P(no equal keys) ≥ 0.9 (Randperm.cu)
        self.bits = min(64, math.ceil(math.log2(n - (6 * n * n + 1) / (12 * math.log(0.9)))))
        if self.bits <= 32:
            raise ValueError("the 32-bit key path of CUDA's randperm (V < ~3000) is not reproduced")
        self._cache: dict[int, np.ndarray] = {}  # green masks by previous token
        self.last_islands = 0  # equal sort keys in the last permutation (tests reach the shuffle)

    def _seed(self, prev: int) -> int:
        return (self.hashing_key * int(prev)) % (2 ** 64 - 1)

    def permutation(self, prev: int) -> np.ndarray:
        """torch.randperm(V) on a CUDA generator seeded for ``prev``: the green list is its head."""
        seed, V = self._seed(prev), self.vocab_size
        x, y, _, _ = philox4x32(0, 0, np.arange(V), 0, seed & 0xFFFFFFFF, seed >> 32)
        raw = (x << _32) | y  # random_(int64 min, int64 max): (raw mod (2^64 − 1)) + min
        raw[raw == np.uint64(2 ** 64 - 1)] = 0
        keys = raw & np.uint64((1 << self.bits) - 1)  # the radix sort reads the low `bits` bits
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        ties = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
        self.last_islands = len(ties)
        if len(ties):  # an island of equal keys: Fisher-Yates from its first index, Philox offset 4
            starts = [t for t in ties if t == 0 or sorted_keys[t] != sorted_keys[t - 1]]
            for s in starts:
                size = 1
                while s + size < V and sorted_keys[s + size] == sorted_keys[s]:
                    size += 1
                words = np.concatenate(philox4x32(np.arange(1, 2 + size // 4), 0, s, 0, seed & 0xFFFFFFFF,
                                                  seed >> 32)).reshape(4, -1).T.ravel()
                island = order[s:s + size].copy()
                for n, i in enumerate(range(size - 1, 0, -1)):
                    r = int(words[n]) % (i + 1)
                    island[i], island[r] = island[r], island[i]
                order[s:s + size] = island
        return order

    def mask(self, prev: int) -> np.ndarray:
        if (out := self._cache.get(prev)) is None:
            out = np.zeros(self.vocab_size, dtype=bool)
            out[self.permutation(prev)[:self.size]] = True
            if len(self._cache) < 2048:  # 100 MB at V = 49152
                self._cache[prev] = out
        return out

    def is_green(self, prev, nxt) -> np.ndarray:
        prev, nxt = np.asarray(prev, dtype=np.int64), np.asarray(nxt, dtype=np.int64)
        out = np.zeros(len(prev), dtype=bool)
        for a in np.unique(prev):
            at = prev == a
            out[at] = self.mask(int(a))[nxt[at]]
        return out

    def describe(self) -> dict:
        return {"scheme": "transformers-lefthash-cuda", "gamma": self.gamma, "vocab_size": self.vocab_size,
                "context": "lefthash, width 1", "green": f"first {self.size} of CUDA torch.randperm(V) seeded by "
                                                          "hashing_key * prev mod (2^64 - 1)"}


class GreenBias:
    """A transformers logits processor: ``bias`` added to the logits of the green list after each
    row's last token (the watermark a keyed generative release is sampled with)."""

    def __init__(self, green: KeyedGreenList, bias: float = 2.0):
        self.green, self.bias = green, float(bias)

    def __call__(self, input_ids, scores):
        import torch

        V = min(scores.shape[-1], self.green.vocab_size)
        rows = [torch.from_numpy(self.green.mask(int(a))[:V]) for a in input_ids[:, -1].tolist()]
        add = torch.stack(rows).to(scores.device, scores.dtype) * self.bias
        return torch.cat([scores[:, :V] + add, scores[:, V:]], dim=1)


def tokenizer_files(folder: Path) -> dict[str, str]:
    """sha256 of every file of a saved tokenizer (what a manifest records of the watermark's
    tokenizer: the lists are defined over its ids)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).iterdir()) if p.is_file()}
