"""The cost of each per-sample method in the benchmark (TDDBench Sec. 3.5, Table 7).

Each method's own minimal extraction (``Method.extraction``) plus its scoring, run on a
small subsample of members and non-members with the models already loaded and every
lazily loaded helper (MiniLM, BERTScore, WordNet) warmed up by an untimed run, in
interleaved rounds: wall seconds per sample of the fastest round, and the largest peak
increase of the process's resident set size over its value just before a run (garbage
collected and freed heap trimmed first; sampled every 5 ms in a background thread with
psutil). Memory the process already holds (model weights, embedding tables, loaded
helpers) is not counted, so this is the working memory the method needed on top, not its
total. A model-based method's cost includes a forward pass of every bank model over the
passages (and, for RMIA, over as many held-out population passages); a learning-based one's,
the shadow model's pass and the classifier's training.

``fresh_process_cost`` runs one method's cost in a new Python process (TDDBench's protocol
measures each algorithm alone): nothing an earlier method loaded, cached or fragmented is
there, and the process's own import and model loading stay outside the measured run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from trainspotter.errors import InputError
from trainspotter.evaluation.benchmark import (BANK_FEATURES, SHADOW_FEATURES, BenchmarkConfig, bank_columns,
                                               bank_features, config_passages, shadow_model)
from trainspotter.evaluation.learning_based import shadow_columns
from trainspotter.evaluation.mia import METHODS, as_petal, method_scores
from trainspotter.features.features import FeatureConfig

__all__ = ["cost_subsample", "PeakRSS", "warm_up", "method_cost", "method_costs", "fresh_process_cost"]


def cost_subsample(config: BenchmarkConfig) -> tuple[list[dict], list[int], list[dict]]:
    """The seeded subsample the cost is measured on: up to ``cost_samples / 2`` members and
    as many non-members (within the first ``limit`` of each split), with their labels, and as
    many held-out passages (the population, when a selected method needs one; else none)."""
    rng = np.random.default_rng(config.seed)
    passages, labels, population = [], [], []
    needed = any(METHODS[m].needs_population for m in config.methods)
    wanted = (("member", 1), ("nonmember", 0)) + ((("heldout", None),) if needed else ())
    for split, label in wanted:
        ps = config_passages(config, split)
        k = min(config.cost_samples // 2, len(ps))
        chosen = [ps[i] for i in sorted(rng.choice(len(ps), k, replace=False))]
        if label is None:
            population = chosen
        else:
            passages += chosen
            labels += [label] * k
    return passages, labels, population


class PeakRSS:
    """``with PeakRSS() as m: ...`` then ``m.peak_mb``: the peak increase of this process's
    resident set size over its value at entry. On Linux the kernel's own high-water mark
    (VmHWM, reset on entry through /proc/self/clear_refs) makes it exact; elsewhere, or where
    the reset is refused, psutil samples RSS every ``interval`` seconds in a background thread,
    which can miss a short-lived peak. ``peak_mb`` is None when neither is available."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak_mb = interval, None
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil ships with the dev environment
            self._proc = None
        else:
            self._proc = psutil.Process()

    @staticmethod
    def _hwm() -> int | None:
        """VmHWM in bytes, or None off Linux."""
        try:
            status = Path("/proc/self/status").read_text()
        except OSError:
            return None
        line = next((ln for ln in status.splitlines() if ln.startswith("VmHWM:")), None)
        return int(line.split()[1]) * 1024 if line else None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def __enter__(self) -> "PeakRSS":
        if self._proc is None:
            return self
        try:  # "5" resets the peak RSS to the current RSS (Linux ≥ 4.0)
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass
        hwm, self._base = self._hwm(), self._proc.memory_info().rss
        # trust the kernel's mark only where the reset took effect (sandboxed kernels such
        # as gVisor accept the write, or lack VmHWM, without resetting anything)
        self._exact = hwm is not None and hwm - self._base < 16 * 2**20
        self._peak = self._base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is None:
            return
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._proc.memory_info().rss, (self._hwm() or 0) if self._exact else 0)
        self.peak_mb = (self._peak - self._base) / 2**20


def warm_up(passages: list[dict], target, reference, base: FeatureConfig | None = None) -> None:
    """One untimed run of every extraction path (loads MiniLM, BERTScore, WordNet)."""
    from trainspotter.features.extract import extract

    base = base or FeatureConfig()
    extract(passages[:2], target, reference, "both", base)
    extract(passages[:2], target, reference, "black",
            base.model_copy(update={"estimator": "petal", "perturbations": False, "sequence": False}))


def _release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``), so
    the RSS before a run is not inflated by pages an earlier run freed but kept."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the RSS baseline just stays higher
        pass


def _bank_table(passages: list[dict], target, bank, base: FeatureConfig | None = None) -> pd.DataFrame:
    """What a model-based method reads: the target's ``gray_ppl`` and the bank's columns; with
    ``base`` (Query-ref) the target's and the bank's perturbed variants of its kinds too."""
    from trainspotter.features.extract import extract

    config = bank_features(base)
    tables = [extract(passages, model, None, "gray", config) for model, _ in bank]
    return pd.concat([extract(passages, target, None, "gray", config),
                      bank_columns([p["id"] for p in passages], [t["gray_ppl"] for t in tables], bank,
                                   tables if base is not None else None)], axis=1)


def _transfer_table(passages: list[dict], target, student, population: list[dict]) -> pd.DataFrame:
    """What Query-transfer reads: ``transfer_ll`` under a surrogate distilled (here, each
    time: its training is part of the cost) from ``student`` on the population's texts."""
    from trainspotter.backends.hf import HFBackend
    from trainspotter.evaluation.query_based import build_surrogate
    from trainspotter.features.extract import extract

    with tempfile.TemporaryDirectory() as tmp:
        path = build_surrogate(target, student.path, [p["text"] for p in population], Path(tmp))
        ppl = extract(passages, HFBackend(path, device="cpu"), None, "gray", BANK_FEATURES)["gray_ppl"]
    return pd.DataFrame({"transfer_ll": -np.log(ppl.to_numpy(dtype=float))})


def method_cost(name: str, passages: list[dict], labels, target, reference,
                base: FeatureConfig | None = None, folds: int = 5, seed: int = 0,
                bank: list | None = None, population: list[dict] | None = None) -> dict:
    """Wall time and peak RSS increase of one run of method ``name``'s own minimal
    extraction (``METHODS[name].extraction.config(base)``; a model-based method: the target
    and every ``bank`` model (backend, ids it trained on), and for RMIA the ``population``
    passages too; a learning-based method: the target and the shadow model, the bank's in-0)
    plus its scoring on ``passages``."""
    from trainspotter.features.extract import extract

    method = METHODS[name]
    ex = method.extraction
    config = ex.config(base)
    _release_memory()
    with PeakRSS() as mem:
        start = time.perf_counter()
        pop = None
        if ex.surrogate:  # the distillation on the population is part of the cost
            df = _transfer_table(passages, target, reference[0], population)
        elif ex.bank:
            df = _bank_table(passages, target, bank, config if ex.bank_queries else None)
            pop = _bank_table(population, target, bank) if method.needs_population else None
        else:
            df = extract(passages, target, reference if ex.reference else None, ex.access, config)
            if method.needs_population:
                pop = extract(population, target, reference if ex.reference else None, ex.access, config)
        if ex.shadow:
            model, seen = shadow_model(bank)
            df = pd.concat([df, shadow_columns(extract(passages, model, None, "gray", SHADOW_FEATURES),
                                               [p["id"] for p in passages], seen)], axis=1)
        if ex.estimator == "petal":
            df = as_petal(df)
        method_scores(name, df, labels, folds, seed, population=pop)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_rss_mb": mem.peak_mb}


def method_costs(names: list[str], passages: list[dict], labels, target, reference,
                 base: FeatureConfig | None = None, folds: int = 5, seed: int = 0,
                 repeats: int = 3, bank: list | None = None, population: list[dict] | None = None) -> dict[str, dict]:
    """``method_cost`` of every method after an untimed ``warm_up``, ``repeats`` interleaved
    rounds (method 1, 2, …, then again), so a busy machine or a first-call effect hits all
    methods alike. Per method: the fastest round's seconds (and seconds per sample) and the
    largest peak RSS increase of any round."""
    warm_up(passages, target, reference, base)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(repeats):
        for name in names:
            runs[name].append(method_cost(name, passages, labels, target, reference, base, folds, seed,
                                          bank, population))
    return {name: _fastest(rs, len(passages)) for name, rs in runs.items()}


def _fastest(runs: list[dict], n: int) -> dict:
    """One method's rounds: the fastest round's seconds (and per sample), the largest peak."""
    seconds = min(r["seconds"] for r in runs)
    peaks = [r["peak_rss_mb"] for r in runs if r["peak_rss_mb"] is not None]
    return {"seconds": seconds, "seconds_per_sample": seconds / n, "peak_rss_mb": max(peaks) if peaks else None,
            "cost_samples": n, "repeats": len(runs)}


def fresh_process_cost(name: str, passages: list[dict], labels, target: str, references: list[str],
                       base: FeatureConfig | None = None, folds: int = 5, seed: int = 0, repeats: int = 3,
                       bank: list[tuple[str, frozenset[str]]] | None = None,
                       population: list[dict] | None = None) -> dict:
    """``method_costs`` of the one method ``name`` in a new Python process that loads the
    models from their specs (``target``, ``references``, ``bank``) and warms the method up by
    an untimed run of the same work first; the same dict as ``method_costs`` gives per method."""
    job = {"name": name, "passages": passages, "labels": list(map(int, labels)), "target": target,
           "references": list(references), "base": (base or FeatureConfig()).model_dump(mode="json"),
           "folds": folds, "seed": seed, "repeats": repeats,
           "bank": [[spec, sorted(seen)] for spec, seen in (bank or [])], "population": population or []}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(job))
        done = subprocess.run([sys.executable, "-m", "trainspotter.evaluation.benchmark_cost", str(path)],
                              capture_output=True, text=True, env=os.environ.copy())
        if done.returncode != 0:
            raise RuntimeError(f"cost of {name!r} in a fresh process failed:\n{done.stderr[-2000:]}")
        return json.loads((Path(tmp) / "cost.json").read_text())


def _fresh_main(path: str) -> None:
    """The child of ``fresh_process_cost``: the job file in, ``cost.json`` beside it out."""
    from trainspotter.backends import load_backend

    job = json.loads(Path(path).read_text())
    name, passages, labels = job["name"], job["passages"], job["labels"]
    base = FeatureConfig(**job["base"])
    target, references = load_backend(job["target"]), [load_backend(r) for r in job["references"]]
    bank = [(load_backend(spec), frozenset(seen)) for spec, seen in job["bank"]]
    args = (target, references, base, job["folds"], job["seed"])
    # one untimed run first: lazy loads (MiniLM, WordNet) and first-call effects stay out
    method_cost(name, passages, labels, *args, bank=bank, population=job["population"] or None)
    runs = [method_cost(name, passages, labels, *args, bank=bank, population=job["population"] or None)
            for _ in range(job["repeats"])]
    out = _fastest(runs, len(passages)) | {"fresh_process": True}
    Path(path).with_name("cost.json").write_text(json.dumps(out))


if __name__ == "__main__":  # pragma: no cover - run by fresh_process_cost
    try:
        _fresh_main(sys.argv[1])
    except InputError as e:
        sys.exit(f"error: {e}")
