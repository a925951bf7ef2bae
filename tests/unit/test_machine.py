"""Where a benchmark measured and its clocks (harness.machine, cli_cost,
verify_cost; benchmarks/bench_cli_stats.py, bench_cli_overhead.py, bench_verify.py)."""

import gc
import sys
import types

import numpy as np
import pytest

from harness import machine
from studies.cli_cost import breakdown_lines, stats_table
from harness.machine import PhaseClock, cli_command, median_seconds
from studies.verify_cost import FakeBackend, record_sizes


def test_median_seconds_is_the_median_of_the_calls(monkeypatch):
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])  # calls of 3, 1 and 2 seconds
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(clock))
    calls = []
    assert median_seconds(lambda: calls.append(1), 3) == 2.0 and len(calls) == 3


def test_phase_clock_adds_up_a_label_met_twice(monkeypatch):
    module = types.ModuleType("phase_clock_probe")
    module.step = lambda x: x * 2
    module.Thing = type("Thing", (), {"go": lambda self: "went"})
    monkeypatch.setitem(sys.modules, "phase_clock_probe", module)
    clock = PhaseClock()
    try:
        ticks = iter([1.0, 1.5, 2.0, 4.0, 5.0, 5.25, 7.0, 7.5] + [9.0] * 4)
        monkeypatch.setattr(machine.time, "perf_counter", lambda: next(ticks))
        clock.wrap("work", "phase_clock_probe", "step")
        clock.wrap("work", "phase_clock_probe", "Thing.go")
        assert module.step(3) == 6 and module.step(1) == 2 and module.Thing().go() == "went"
        assert clock.seconds["work"] == pytest.approx(0.5 + 2.0 + 0.25)
        with pytest.raises(ValueError), clock.timed("failing"):
            raise ValueError
        assert clock.seconds["failing"] == pytest.approx(0.5)
    finally:
        gc.callbacks.remove(clock._on_gc)
    assert set(clock.totals()) >= {"work", "failing", "garbage collection (within the above)", "in process"}


def test_cli_command_runs_this_interpreter():
    assert cli_command("test", "x") == [sys.executable, "-m", "trainspotter.flows.cli", "test", "x"]


def test_stats_table_is_half_suspect():
    df = stats_table(6, 2, seed=0)
    assert df["set"].tolist() == ["suspect"] * 3 + ["heldout"] * 3 and list(df.columns) == ["set", "f0", "f1"]
    assert np.array_equal(df[["f0", "f1"]].to_numpy(), np.random.default_rng(0).normal(size=(6, 2)))


def test_breakdown_lines_put_before_beside_now_and_leave_missing_phases_empty():
    now = {"library": {"features": 1.0, "wall": 3.0}, "cli --refresh": {"imports: the CLI": 0.5, "wall": 4.5},
           "load_average_1min": 1.0}
    before = {"library": {"features": 2.0, "wall": 5.0}, "cli --refresh": {"wall": 9.0}, "load_average_1min": 3.0}
    lines = breakdown_lines(now, before)
    assert lines[2] == ("| phase | library (now) | cli --refresh (now) | library (before) | cli --refresh (before) |")
    assert "| imports: the CLI |  | 0.50 |  |  |" in lines and "| wall | 3.00 | 4.50 | 5.00 | 9.00 |" in lines
    assert any("now: 1.5 s; before: 4.0 s" in line for line in lines)  # the CLI's wall less the library's
    assert breakdown_lines(now, None)[2] == "| phase | library (now) | cli --refresh (now) |"


def test_fake_backend_answers_depend_on_the_text_and_the_seed_only():
    a, b = FakeBackend(1), FakeBackend(2)
    one, again, other = a.score(["river1 stone2"])[0], a.score(["river1 stone2"])[0], b.score(["river1 stone2"])[0]
    assert np.array_equal(one.logprobs, again.logprobs) and not np.array_equal(one.logprobs, other.logprobs)
    assert len(one.token_ids) == 2 and a.encode("river1 stone2")[0] == 0 and (one.token_ids < 50_001).all()


def test_record_sizes_by_hand():
    record = {"passages": {"suspect": [{"text": "ab"}], "heldout": [{"text": "c"}]},
              "batches": [{"pairs": [{"suspect": {"answers": {"x": 1}, "features": [1, 2, 3]},
                                      "heldout": {"answers": [1, 2]}}]}]}
    assert record_sizes(record) == {"answers_bytes": len('{"x": 1}') + len("[1, 2]"),
                                    "passage_text_bytes": len('"ab"') + len('"c"'), "features_per_passage": 3}
