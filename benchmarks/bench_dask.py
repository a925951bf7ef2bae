"""Scale-out of the extract flow on Dask: 1 vs 2 Dask workers for one extraction, and what
each Dask task costs at the default chunk size.

In one run of this script (so both sides see the same machine load):

* the default runner (this process, 1 torch thread) extracts the passages;
* a Dask cluster of 1 worker process, then one of 2, each single-threaded, started and
  warmed before the clock (every worker has imported the task module, loaded the models
  and run a first small extraction flow: a cluster outlives many extractions), extracts
  the same passages through ``flows.extract.run_extract(dask_address=...)``, the CLI's
  --dask-address path;
* worker scaling = wall(1 worker) / wall(2 workers); per-task overhead =
  (wall(1 worker) - wall(default runner)) / chunks: both do the same model work on one
  core with the models already loaded; the Dask run adds shipping every chunk (the task,
  its parameters, Prefect's context) to a worker process and its rows back.

Every extraction starts from empty Prefect result storage (nothing is read from the task
cache). Passages: the `mini` testbed's three splits (240) and 16 more taken again under
new ids, 256 in all; the full feature set (access both: six perturbations, suffix
generation, BERTScore), default chunk size 64.

    python benchmarks/bench_dask.py [--passages 256] [--chunk-size 64] [--access both|gray]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per worker; the same for the local run
os.environ.setdefault("TRAINSPOTTER_ARTIFACTS", tempfile.mkdtemp(prefix="bench-dask-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

RESULTS = Path(__file__).parent / "results"


def passages(n: int, folder: Path) -> Path:
    from trainspotter.testbeds.build import PRESETS, build_testbed

    root = build_testbed(PRESETS["mini"])
    rows = [json.loads(line) for split in ("member", "nonmember", "heldout")
            for line in (root / f"{split}.jsonl").read_text().splitlines()]
    rows += [dict(r, id=f"again-{r['id']}") for r in rows[:max(0, n - len(rows))]]
    path = folder / "passages.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:n]))
    return path


def warm(data: Path, access: str) -> None:
    """Import the task module and load every model a chunk needs (target, MiniLM,
    BERTScore) in this process: what each worker does once, before the clock."""
    from trainspotter.tasks.extract import extract_chunk
    from trainspotter.data import load_passages
    from trainspotter.features.features import FeatureConfig

    extract_chunk.fn(load_passages(data)[:2], "testbed:mini", None, access, FeatureConfig())


def timed_extract(data: Path, folder: Path, label: str, chunk_size: int, access: str,
                  address: str | None) -> dict:
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH, temporary_settings

    from trainspotter.flows.extract import ExtractConfig, run_extract

    config = ExtractConfig(data=str(data), model="testbed:mini", access=access,
                           out=str(folder / f"{label}.parquet"), chunk_size=chunk_size)
    with temporary_settings(updates={PREFECT_LOCAL_STORAGE_PATH: str(folder / f"results-{label}")}):
        start = time.perf_counter()
        result = run_extract(config, dask_address=address)
        seconds = time.perf_counter() - start
    assert result["chunks_computed"] == result["chunks"], result
    return {"seconds": round(seconds, 2), "chunks": result["chunks"], "rows": result["rows"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=256)
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--access", default="both", help="both: the full feature set (suffix generation, "
                                                      "BERTScore), enough work per chunk to show scaling")
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    from trainspotter.tasks.server import use_local_api

    use_local_api()
    folder = Path(tempfile.mkdtemp(prefix="bench-dask-run-"))
    data = passages(args.passages, folder)
    warm(data, args.access)
    small = folder / "warmup.jsonl"  # other ids: nothing the timed runs could read from the cache
    small.write_text("".join(json.dumps(dict(json.loads(line), id=f"warm-{i}")) + "\n"
                             for i, line in enumerate(data.read_text().splitlines()[:8])))
    # Prefect's database, the MiniLM token table, the flow's own imports
    timed_extract(data, folder, "warmup", args.chunk_size, args.access, None)
    runs = {"default runner": timed_extract(data, folder, "local", args.chunk_size, args.access, None)}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            client.run(warm, data, args.access)  # every worker, before the clock
            # and a first extraction flow: a worker's first Prefect task run sets up its engine
            # and API client (seconds, once per worker process), which is not a per-task cost
            timed_extract(small, folder, f"warmup-dask{workers}", 1, args.access, cluster.scheduler_address)
            runs[f"dask, {workers} worker{'s' * (workers > 1)}"] = timed_extract(
                data, folder, f"dask{workers}", args.chunk_size, args.access, cluster.scheduler_address)
    one, two, local = (runs[k]["seconds"] for k in ("dask, 1 worker", "dask, 2 workers", "default runner"))
    chunks = runs["default runner"]["chunks"]
    out = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
           "passages": args.passages, "chunk_size": args.chunk_size, "chunks": chunks, "access": args.access,
           "omp_num_threads": os.environ["OMP_NUM_THREADS"], "runs": runs,
           "speedup_2_vs_1_workers": round(one / two, 2),
           "overhead_per_task_s": round((one - local) / chunks, 2),
           "compute_per_chunk_s": round(local / chunks, 2)}
    print(json.dumps(out, indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "dask.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
