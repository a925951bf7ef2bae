"""The cached Monte Carlo task of the benchmark flow (tasks/simulate.py): every configuration
in one pass over the same trial streams, a repeat served from the cache, --refresh recomputing."""

import numpy as np
import pandas as pd


def test_simulate_task_is_cached_by_table_and_settings(tmp_path, monkeypatch):
    import trainspotter.tasks.simulate as task_simulate
    from trainspotter.stats.sequential import TestConfig
    from trainspotter.tasks.cache import refreshing

    calls = []  # the library function behind the cached task, counted
    library = task_simulate.simulate_many
    monkeypatch.setattr(task_simulate, "simulate_many", lambda *a, **k: calls.append(1) or library(*a, **k))

    rng = np.random.default_rng(3)
    n = 120
    df = pd.concat([pd.DataFrame(rng.normal(size=(n, 3)) + [1.5, 0, 0], columns=list("abc")).assign(set="suspect"),
                    pd.DataFrame(rng.normal(size=(n, 3)), columns=list("abc")).assign(set="heldout")])
    path = tmp_path / "shifted.parquet"
    df.to_parquet(path, index=False)
    configs = [TestConfig(strategy=s, payoff="mmd") for s in ("ons", "kelly")]

    def run(trials=16):
        return task_simulate.simulate_task(str(path), configs, trials, 100, False, 0)

    results = run()
    assert len(calls) == 1 and len(results) == 2  # both configurations in one pass
    for r in results:  # a 1.5 σ shift in one of three features: found within 100 pairs
        assert r["pairs"] == 100 and r["trials"] == 16 and r["tpr"] >= 0.75
        assert r["power_curve"][-1] == r["tpr"]
    tprs = [r["tpr"] for r in results]
    assert [r["tpr"] for r in run()] == tprs and len(calls) == 1  # served from the cache
    with refreshing(True):  # --refresh recomputes (same seed: same numbers)
        assert [r["tpr"] for r in run()] == tprs and len(calls) == 2
    run(trials=17)  # other settings: another key
    assert len(calls) == 3
    df.assign(a=df["a"] + 0.1).to_parquet(path, index=False)  # another table under the same name
    run()
    assert len(calls) == 4
