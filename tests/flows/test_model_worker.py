"""The CLI audit's model worker (trainspotter.tasks.worker, issue 38 item 7): the local models
load and the feature rows are computed in a forked process while the CLI imports Prefect and
MLflow; the rows, errors and e-values are those of an audit without it, and it never outlives
the audit or its parent. Each check runs in a fresh interpreter: forking needs a process with
no other thread and no torch (the pytest process may have both)."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from trainspotter.testbeds.build import split_path

FAKE = """
import json, os, sys
from trainspotter.tasks import worker

worker.allow_fork()  # as the `trainspotter` command's main() does

class Spec:  # a local model spec as serving() sees one (its load fails in the worker, unused here)
    remote = False

"""


def python(code: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FAKE + code], capture_output=True, text=True, timeout=300,
                          env=os.environ | (env or {}))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_rows_come_from_the_worker_and_it_ends_with_the_block():
    out = python("""
worker.extract_rows = lambda *args: [{"pid": os.getpid(), "passages": args[0]}]
with worker.serving([Spec()]) as forked:
    rows = worker.rows([{"id": "a"}], "hf:/no/such/model", None, "gray", None, False)
    # an API model's rows never: its budget and usage meter live in this process
    api = worker.rows([{"id": "b"}], "hf:/no/such/model", ["openai:m@http://127.0.0.1:9/v1?tokenizer=hf:/no/such"],
                      "gray", None, False)
    process = worker._active["process"]
process.join(5)
print(json.dumps({"forked": forked, "here": os.getpid(), "rows": rows, "api": api, "alive": process.is_alive(),
                  "exitcode": process.exitcode, "active": bool(worker._active)}))
""")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["forked"] and r["rows"][0]["pid"] != r["here"] and r["rows"][0]["passages"] == [{"id": "a"}]
    assert r["api"][0]["pid"] == r["here"]
    assert not r["alive"] and r["exitcode"] == 0 and not r["active"]


def test_no_worker_where_forking_is_unsafe_or_switched_off():
    out = python("""
class Remote:
    remote = True
print(worker.can_fork([Spec()]), worker.can_fork([Spec(), Remote()]))
import threading, time
t = threading.Thread(target=time.sleep, args=(2,)); t.start()
print(worker.can_fork([Spec()]))
t.join()
import torch
print(worker.can_fork([Spec()]))
with worker.serving([Spec()]) as forked:
    print(forked, bool(worker._active))
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "False", "False", "False", "False"]
    off = python("print(worker.can_fork([Spec()]))", env={"TRAINSPOTTER_MODEL_WORKER": "0"})
    assert off.stdout.split() == ["False"]
    hosted = python("worker._allowed.clear()\nprint(worker.can_fork([Spec()]))")  # not the command's process
    assert hosted.stdout.split() == ["False"], hosted.stderr


def test_an_error_in_the_worker_is_raised_here():
    out = python("""
class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("no")

def fail(passages, *rest):
    if passages == "value":
        raise ValueError("bad passage")
    raise Unpicklable("odd")

worker.extract_rows = fail
with worker.serving([Spec()]):
    for what in ("value", "odd"):
        try:
            worker.rows(what, "hf:/no/such/model", None, "gray", None, False)
        except Exception as e:
            print(type(e).__name__, str(e).splitlines()[0])
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["ValueError bad passage",
                                       "RuntimeError in the model worker: Unpicklable: odd"]


def test_the_worker_ends_when_its_parent_is_killed():
    out = subprocess.Popen([sys.executable, "-c", FAKE + """
import time
with worker.serving([Spec()]):
    print(worker._active["process"].pid, flush=True)
    time.sleep(600)
"""], stdout=subprocess.PIPE, text=True)
    child = int(out.stdout.readline())
    assert not gone(child)
    out.send_signal(signal.SIGKILL)
    out.wait(30)
    deadline = time.monotonic() + 30
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gone(child)


WATCH = """
import atexit, json, os, sys
import trainspotter.tasks.worker as worker
pids, compute = [], worker.extract_rows

def recorded(*args):
    with open(os.environ["ROWS_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    return compute(*args)

worker.extract_rows = recorded

def loaded():  # how many models this (the CLI's) process loaded
    from trainspotter.backends import _load_backend
    with open(os.environ["ROWS_PIDS"] + ".main", "w") as f:
        json.dump({"pid": os.getpid(), "models": _load_backend.cache_info().currsize,
                   "torch": "torch" in sys.modules}, f)

atexit.register(loaded)
sys.argv = ["trainspotter", *sys.argv[1:]]
from trainspotter.flows.cli import main
main()
"""


def test_a_cli_audit_loads_its_model_in_the_worker_with_the_same_result(mini_testbed, tmp_path):
    """The same audit (features computed again) with the worker and without: with it every
    batch is computed in another process, which is gone afterwards, and the CLI's own process
    loads no model and imports no torch (the fingerprints, tags and sealed record need only the
    weights' files); the e-values are equal."""
    e_values = {}
    for worker in ("1", "0"):
        pids = tmp_path / f"pids-{worker}"
        out = subprocess.run([sys.executable, "-c", WATCH, "audit", "--name", "worker", "--suspect",
                              str(split_path("mini", "member")), "--heldout", str(split_path("mini", "heldout")),
                              "--model", "testbed:mini", "--max-pairs", "16", "--assume-exchangeable", "--json",
                              "--refresh"], capture_output=True, text=True, timeout=600,
                             env=os.environ | {"ROWS_PIDS": str(pids), "TRAINSPOTTER_MODEL_WORKER": worker})
        assert out.returncode in (0, 1), out.stderr
        main = json.loads((tmp_path / f"pids-{worker}.main").read_text())
        computed_in = {int(p) for p in pids.read_text().split()}
        if worker == "1":
            assert main["pid"] not in computed_in and main["models"] == 0 and not main["torch"]
            assert all(gone(p) for p in computed_in)
        else:
            assert computed_in == {main["pid"]} and main["models"] == 1
        e_values[worker] = json.loads(out.stdout)["e_value"]
    assert e_values["1"] == e_values["0"]
