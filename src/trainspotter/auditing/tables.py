"""The sequential test and its Monte Carlo evaluation on a features table (``trainspotter
extract`` writes one: a ``set`` column and one numeric column per feature).

``trainspotter.stats`` works on arrays; here a table is split into suspect and held-out rows
(``data.split_features``) and each column's member-like sign is read from the feature catalogue
(``features.orientation.directions``: +1/−1, 0 for a column outside it, whose direction the
scorer then learns) and passed in. Same names and results as the array functions of
``stats.sequential`` and ``stats.simulation``; ``feature_cols`` picks the columns (default: every
numeric one).
"""

from __future__ import annotations

import pandas as pd

import trainspotter.stats.sequential as sequential
import trainspotter.stats.simulation as simulation
from trainspotter.data import split_features
from trainspotter.features.orientation import directions
from trainspotter.stats.sequential import TestConfig

__all__ = ["run_test", "simulate", "simulate_many", "pollution"]


def run_test(df: pd.DataFrame, config: TestConfig | None = None, feature_cols: list[str] | None = None) -> dict:
    """``stats.sequential.run_test`` on the table's rows; the summary also names the columns."""
    S, H, cols = split_features(df, feature_cols)
    return {**sequential.run_test(S, H, config, directions(cols)), "feature_cols": cols}


def simulate(df: pd.DataFrame, config: TestConfig | None = None, trials: int = 200, n_max: int | None = None,
             null: bool = False, seed: int = 0, feature_cols: list[str] | None = None,
             batch_size: int = 500, alphas: tuple[float, ...] | None = None) -> dict:
    """``stats.simulation.simulate`` on the table's rows (Sec. 5.1, App. D)."""
    return simulate_many(df, [config or TestConfig()], trials, n_max, null, seed, feature_cols, batch_size, alphas)[0]


def simulate_many(df: pd.DataFrame, configs: list[TestConfig], trials: int = 200, n_max: int | None = None,
                  null: bool = False, seed: int = 0, feature_cols: list[str] | None = None,
                  batch_size: int = 500, alphas: tuple[float, ...] | None = None) -> list[dict]:
    """``stats.simulation.simulate_many`` on the table's rows: several configurations on the
    same trial streams."""
    S, H, cols = split_features(df, feature_cols)
    return simulation.simulate_many(S, H, configs, trials, n_max, null, seed, directions(cols), batch_size, alphas)


def pollution(df: pd.DataFrame, config: TestConfig | None = None, ratios=(0.0, 0.2, 0.5, 0.7, 0.9),
              trials: int = 50, n_max: int | None = None, seed: int = 0, feature_cols: list[str] | None = None,
              batch_size: int = 64, pollutant: pd.DataFrame | None = None) -> dict:
    """``stats.simulation.pollution`` (D.6) on the table's rows; ``pollutant``: a table whose
    rows in the same columns are injected into the held-out stream."""
    S, H, cols = split_features(df, feature_cols)
    P = None if pollutant is None else pollutant[cols].to_numpy(dtype=float)
    return simulation.pollution(S, H, config, ratios, trials, n_max, seed, directions(cols), batch_size, P)
