"""The index of the per-sample methods: each method's name, TDDBench paradigm and TDDBench name
(where it has one), in the order of ``evaluation.mia.METHODS``, which takes each method's paradigm
and TDDBench name from here and refuses to load when the two name different methods.

Kept apart from ``evaluation.mia`` (which imports pandas and sklearn) so that ``benchmark --help``
lists the methods cheaply (``method_help``).
"""

from __future__ import annotations

__all__ = ["METHOD_INDEX", "PARADIGMS", "method_help"]

# TDDBench's paradigms (Sec. 3), and the LM attacks TDDBench does not have
PARADIGMS = {"metric": "Metric-based", "learning": "Learning-based", "model": "Model-based",
             "query": "Query-based", "llm": "LLM attacks (trainspotter, not in TDDBench)"}

_LEARN = ("original", "top3", "sorted", "label", "merge")  # evaluation.learning_based.INPUTS
METHOD_INDEX: dict[str, tuple[str, str | None]] = {  # name -> (paradigm, TDDBench's name or None)
    "loss": ("metric", "Metric-loss"), "metric_conf": ("metric", "Metric-conf"),
    "metric_corr": ("metric", "Metric-corr"), "metric_ent": ("metric", "Metric-ent"),
    "metric_ment": ("metric", "Metric-ment"),
    **{f"learn_{k}": ("learning", f"Learn-{k}") for k in _LEARN},
    "zlib": ("llm", None), "min_k": ("llm", None), "min_kpp": ("llm", None), "refl": ("llm", None),
    "neighbor": ("query", "Query-neighbor"), "query_augment": ("query", "Query-augment"),
    "query_ref": ("query", "Query-ref"), "query_transfer": ("query", "Query-transfer"),
    "query_adv": ("query", "Query-adv"), "query_qrm": ("query", "Query-qrm"),
    "ez_mia": ("llm", None), "petal": ("llm", None), "baseline": ("llm", None),
    "scoring_gray": ("llm", None), "scoring_black": ("llm", None),
    "model_loss": ("model", "Model-loss"), "model_calibration": ("model", "Model-calibration"),
    "lira_online": ("model", "Model-lira"), "lira_offline": ("model", "Model-lira"),
    "model_fpr": ("model", "Model-fpr"), "rmia": ("model", "Model-robust"),
}


def method_help() -> str:
    """'metric: loss (Metric-loss), ...; learning: ...': the methods by paradigm, for --methods."""
    return "; ".join(f"{p}: " + ", ".join(f"{n} ({t})" if t else n for n, (q, t) in METHOD_INDEX.items() if q == p)
                     for p in PARADIGMS)
