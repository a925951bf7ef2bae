"""Learning-based membership inference (TDDBench Sec. 2.3, Table 3, App. A.1.2): an auxiliary
classifier trained on a shadow model's outputs for passages whose membership in the shadow's
training set is known, then applied to the target's outputs.

The shadow model is the testbed's reference model ``in-0`` (``trainspotter.testbeds.reference_models``):
the target's recipe with its own seed, trained on a seeded half of the candidates, the IN flag
of each candidate recorded — a ready shadow model of known membership (Shokri et al. 2017's
shadow training; TDDBench uses one shadow model per method, App. A.1.2).

The classifier is TDDBench's (Sec. 3): two hidden layers of 64 and 32 units, Adam at learning
rate 1e-3, early stopping when the validation accuracy has not improved for 30 epochs, at most
500 epochs (sklearn's ``MLPClassifier``; 10% of the training rows are its validation split).
The inputs are standardised first (fitted on the training rows): the MLP is then insensitive
to the scale of the probabilities (ours; TDDBench feeds raw outputs).

The inputs. A classifier's prediction vector is one distribution over C classes; a causal LM
gives one next-token distribution over V tokens per position. We aggregate per passage by
averaging over positions (``trainspotter.features.features.prediction_row``):

- **Learn-original** (Shokri et al. 2017, the unsorted prediction vector): the mean next-token
  distribution p̄ ∈ Δ^V, projected to 16 dimensions by a fixed seeded Gaussian matrix
  (``gray_pv_*``; ours: V = 2048 to 49k inputs are too many for a few hundred passages);
- **Learn-top3** (Salem et al. 2019): the mean of the 3 largest probabilities per position;
- **Learn-sorted** (Salem et al. 2019): the mean of the sorted vector, cut at the 10 largest
  (``gray_top_p_*``; ours: the cut);
- **Learn-label** (Nasr et al. 2018, prediction vector + true label): Learn-original's inputs
  plus the mean probability of the true token (``gray_true_p``), what the label tells a
  classifier that also sees the prediction vector;
- **Learn-merge** (Amit et al. 2024, merged detection criteria): the sorted vector plus the
  per-passage loss (log PPL), entropy, modified entropy, confidence and true-token probability.
  (The greedy-correctness criterion is black-box and left out: the shadow's features are gray.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from trainspotter.features.features import PROJECTION_DIM, TOP_K

__all__ = ["INPUTS", "SHADOW_PREFIX", "SHADOW_IN", "classifier", "fit_score", "shadow_columns"]

SHADOW_PREFIX = "shadow_"  # + a gray_* column: the shadow model's value for the passage
SHADOW_IN = "shadow_in"  # 1 if the shadow model trained on the passage, else 0

_TOP = [f"gray_top_p_{r}" for r in range(1, TOP_K + 1)]
_PV = [f"gray_pv_{j}" for j in range(1, PROJECTION_DIM + 1)]
INPUTS: dict[str, list[str]] = {
    "original": _PV,
    "top3": _TOP[:3],
    "sorted": _TOP,
    "label": _PV + ["gray_true_p"],
    "merge": _TOP + ["gray_ppl", "gray_ent", "gray_ment", "gray_conf", "gray_true_p"],
}


MIN_VALIDATED = 20  # rows of each class below which no 10% validation split holds both classes


def classifier(seed: int = 0, early_stopping: bool = True) -> Pipeline:
    """TDDBench's auxiliary classifier (Sec. 3) behind a standardisation."""
    return Pipeline([("scale", StandardScaler()),
                     ("mlp", MLPClassifier(hidden_layer_sizes=(64, 32), learning_rate_init=1e-3, solver="adam",
                                           early_stopping=early_stopping, validation_fraction=0.1,
                                           n_iter_no_change=30, max_iter=500, random_state=seed))])


def _inputs(df: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The columns, log PPL for ``gray_ppl`` (the loss, on a scale the MLP trains well on)."""
    X = df[columns].to_numpy(dtype=float).copy()
    for j, c in enumerate(columns):
        if c.endswith("gray_ppl"):
            X[:, j] = np.log(X[:, j])
    return X


def fit_score(train: pd.DataFrame, test: pd.DataFrame, inputs: str, seed: int = 0) -> np.ndarray:
    """Fit the classifier on ``train``'s shadow columns (``shadow_<input>``) against
    ``shadow_in``, then return P(member) of ``test``'s target columns (``<input>``). With
    fewer than ``MIN_VALIDATED`` rows of a class (a cost subsample) it trains without the
    validation split, for the 500 epochs."""
    columns = INPUTS[inputs]
    y = train[SHADOW_IN].to_numpy(dtype=int)
    if len(np.unique(y)) < 2:
        raise ValueError("the shadow model's training rows need both IN and OUT passages")
    validated = np.bincount(y, minlength=2).min() >= MIN_VALIDATED
    model = classifier(seed, early_stopping=validated).fit(_inputs(train, [SHADOW_PREFIX + c for c in columns]), y)
    return model.predict_proba(_inputs(test, columns))[:, 1]


def shadow_columns(shadow: pd.DataFrame, ids: list[str], seen: frozenset[str]) -> pd.DataFrame:
    """The shadow model's ``gray_*`` features renamed ``shadow_gray_*``, and ``shadow_in``."""
    out = shadow[[c for c in shadow.columns if str(c).startswith("gray_")]].add_prefix(SHADOW_PREFIX)
    out = out.reset_index(drop=True)
    out[SHADOW_IN] = [int(i in seen) for i in ids]
    return out
