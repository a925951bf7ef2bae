"""The forced choice's plans compared (studies.keyed_contexts): a plan's draws by hand."""

import numpy as np

from studies.keyed_contexts import draw_plan


def _units(n):
    # every unit: three contexts, the first two cost one token a draw, the third two; in context 0 a
    # draw is always form 0, in context 1 always form 1, in context 2 always form 2
    return [{"unit": f"u{i}", "cost": [1, 1, 2], "h": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]} for i in range(n)]


def test_a_plan_pools_each_units_draws_over_its_first_contexts():
    rng = np.random.default_rng(0)
    records, spent = draw_plan(_units(3), 2, 4, 1000, rng)
    assert [r["unit"] for r in records] == ["u0", "u1", "u2"] and spent == [8, 16, 24]
    assert all(r["h"] == [0.5, 0.5, 0.0] for r in records)  # 4 draws in each of two contexts
    records, spent = draw_plan(_units(3), 3, 2, 1000, rng)
    assert records[0]["h"] == [1 / 3] * 3 and spent == [8, 16, 24]  # 2 × (1 + 1 + 2) tokens a unit
    records, _ = draw_plan(_units(3), 1, 5, 1000, rng)
    assert all(r["h"] == [1.0, 0.0, 0.0] for r in records)


def test_a_plan_takes_whole_units_within_the_budget():
    records, spent = draw_plan(_units(10), 3, 4, 50, np.random.default_rng(0))  # 16 tokens a unit
    assert len(records) == 3 and spent[-1] == 48
    assert draw_plan(_units(10), 3, 4, 15, np.random.default_rng(0)) == ([], [])
