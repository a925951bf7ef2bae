"""The feature catalogue, the one registry of feature columns: one ``FeatureSpec`` per column
that ``extract`` can produce (name, access level, models it needs, member-like direction,
definition, source), in column order. Everything else about a column is derived from its entry:
``features.orientation.direction`` (the scorer's signs), ``features list``, ``feature_columns``.
The row code (``features.features``, ``features.twin_positions``) fills these columns;
``tests/unit/test_registries.py``, ``test_reference_features.py`` and ``test_tddbench.py`` tie
the two together.

This module imports no feature code (only constants), so the member-like directions it holds
(read by ``features.orientation`` and passed to the sequential test as its ``signs``) cost no
feature module.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Literal, Protocol

from trainspotter.backends.base import PROJECTION_DIM, TOP_K

__all__ = ["EVERY_COLUMN", "FeatureSpec", "catalog", "pct"]


class FeatureConfig(Protocol):
    """What the catalogue reads of a ``features.features.FeatureConfig`` (not imported here)."""

    min_k: tuple[float, ...]
    strip_k: tuple[float, ...]
    kinds: tuple[str, ...]
    metric_criteria: bool
    prediction_vectors: bool
    twin_positions: bool
    sequence: bool


@dataclass(frozen=True)
class FeatureSpec:
    """One feature column: stable name, access level, models it needs, definition."""

    name: str
    access: Literal["gray", "black"]
    models: tuple[str, ...]  # "target", and "reference" (the first) or "references" (K ≥ 2 of them)
    # +1: larger values are more member-like, −1: smaller ones, 0: not known before the data
    # (the scorer learns it). Members are fitted better by the target (features.orientation).
    direction: Literal[-1, 0, 1]
    definition: str
    source: str  # paper section / equation

    def as_dict(self) -> dict:
        d = asdict(self)
        d["models"] = list(self.models)
        return d


def pct(k: float) -> int:
    """A fraction as the whole percent that names its column (0.2 → ``min_k_20``)."""
    return int(round(k * 100))


_T, _TR, _TRS = ("target",), ("target", "reference"), ("target", "references")
_KIND_TEXT = {"synonym": "WordNet synonym substitution (p 0.25)",
              "butter_fingers": "butter fingers (keyboard neighbours, p 0.1)",
              "deletion": "random word deletion (p 0.25)", "case": "character case swap (p 0.1)",
              "whitespace": "whitespace removal 0.1 / addition 0.05", "underscore": "underscore trick (p 0.25)"}


def _token_specs(a: str, config: FeatureConfig) -> list[FeatureSpec]:
    lp = "log p(x_i|x_<i)" if a == "gray" else "estimated log p̃ (BADI Eq. 1)"
    on = "" if a == "gray" else " on App. A.6 estimates"
    src = lambda item: f"BADI App. A.2 item {item}{on}"  # noqa: E731
    specs = [
        FeatureSpec(f"{a}_ppl", a, _T, -1, f"perplexity exp(-mean {lp}) under the target", src(1)),
        FeatureSpec(f"{a}_zlib_ratio", a, _T, 1, f"mean {lp} / zlib-compressed bytes of the text", src(6)),
    ]
    specs += [FeatureSpec(f"{a}_min_k_{pct(k)}", a, _T, 1, f"mean of the {pct(k)}% lowest {lp} (Min-K%)",
                          src(2)) for k in config.min_k]
    if a == "gray":
        specs += [FeatureSpec(f"gray_min_kpp_{pct(k)}", "gray", _T, 1,
                              f"mean of the {pct(k)}% lowest (log p − μ)/σ per token (Min-K%++)",
                              "Zhang et al. 2024") for k in config.min_k]
    specs += [FeatureSpec(f"{a}_strip_k_{pct(k)}", a, _T, 1,
                          f"mean {lp} after cutting the {pct(k)}% most extreme at each tail (STRIP-K%)",
                          src(3)) for k in config.strip_k]
    specs += [
        FeatureSpec(f"{a}_ref_ratio", a, _TR, -1, f"log-perplexity target / reference from {lp}", src(5)),
        FeatureSpec(f"{a}_ref_diff", a, _TR, -1, f"log-perplexity target − reference from {lp}", src(5)),
    ]
    if a == "black":  # label-only: the greedy tokens themselves, no probability estimate
        specs += [
            FeatureSpec("black_match_rate", a, _T, 1, "fraction of positions whose greedy token is the actual token",
                        "BADI App. A.6 (label-only); TDDBench Metric-corr"),
            FeatureSpec("black_ref_match_diff", a, _TR, 1, "greedy-match rate of the target − of the reference",
                        "ours: RefL (BADI App. A.2 item 5) on label-only answers"),
        ]
    for kind in config.kinds:
        specs += [
            FeatureSpec(f"{a}_pert_ratio_{kind}", a, _T, 1,
                        f"log-PPL of the {_KIND_TEXT[kind]} variant / log-PPL of the original",
                        src(4) + ", A.3"),
            FeatureSpec(f"{a}_pert_diff_{kind}", a, _T, 1,
                        f"log-PPL of the {_KIND_TEXT[kind]} variant − log-PPL of the original",
                        src(4) + ", A.3"),
        ]
    if a == "gray" and config.metric_criteria:
        specs += _prediction_specs(config)
    specs.append(FeatureSpec(f"{a}_ez", a, _TR, 1,
                             f"Error Zone P/N of the {lp} shift target − reference at target argmax errors",
                             "EZ-MIA Sec. 3.4, App. E.5–E.6" + ("" if a == "gray" else "; on BADI estimates")))
    ks = "the K references"
    specs += [
        FeatureSpec(f"{a}_refs_diff", a, _TRS, -1, f"log-perplexity target − mean log-perplexity of {ks} from {lp}",
                    "Watson et al. 2022; TDDBench A.1.3 Model-calibration"),
        FeatureSpec(f"{a}_refs_lira", a, _TRS, 1, f"Φ((ℓ_target − μ)/σ), μ, σ of the mean {lp} ℓ over {ks}",
                    "Carlini et al. 2022 Eq. 4, offline"),
        FeatureSpec(f"{a}_refs_token_lira", a, _TRS, 1,
                    f"mean over tokens of Φ((target {lp} − μ_i)/σ_i) over {ks} (same tokenizer)",
                    "Carlini et al. 2022 Eq. 4, offline, per token"),
        FeatureSpec(f"{a}_refs_rmia", a, _TRS, 1, f"log likelihood ratio ℓ_target − log mean exp(ℓ) over {ks}",
                    "Zarifzadeh et al. 2024 Eq. 3 (RMIA), offline"),
    ]
    return specs


def _prediction_specs(config: FeatureConfig) -> list[FeatureSpec]:
    """The columns of ``prediction_row``: TDDBench's metric-based criteria per passage."""
    t = "TDDBench Table 3, App. A.1.1"
    specs = [FeatureSpec("gray_conf", "gray", _T, 1, "mean over positions of the largest next-token probability",
                         f"Song et al. 2019 (Metric-conf); {t}"),
             FeatureSpec("gray_ent", "gray", _T, -1, "mean over positions of the next-token entropy −μ_i",
                         f"Shokri et al. 2017 (Metric-ent); {t}"),
             FeatureSpec("gray_ment", "gray", _T, -1, "mean over positions of the modified entropy "
                         "−(1 − p_y) log p_y − Σ_{z≠y} p_z log(1 − p_z)", f"Song & Mittal 2021 Eq. 5 (Metric-ment); {t}"),
             FeatureSpec("gray_true_p", "gray", _T, 1, "mean over positions of p(x_i|x_<i)",
                         "Nasr et al. 2018 (the label's confidence)"),
             FeatureSpec("gray_margin", "gray", _T, 1, "mean over positions of log p(x_i|x_<i) − max_{z≠x_i} log p(z|x_<i), "
                         "the margin to the greedy decision boundary", "ours: Query-adv (Li & Zhang 2021) in log p")]
    if config.prediction_vectors:
        specs += [FeatureSpec(f"gray_top_p_{r}", "gray", _T, int(r == 1), f"mean over positions of the {r}-th largest "
                              "next-token probability", "Salem et al. 2019 (Learn-sorted, -top3)")
                  for r in range(1, TOP_K + 1)]
        specs += [FeatureSpec(f"gray_pv_{j}", "gray", _T, 0, f"mean over positions of coordinate {j} of "
                              "p(·|x_<i) @ R, R a fixed seeded Gaussian V × 16", "Shokri et al. 2017 (Learn-original)")
                  for j in range(1, PROJECTION_DIM + 1)]
    return specs


def _twin_specs(access: str) -> list[FeatureSpec]:
    """The changed-position columns of a twins audit (``features.twin_positions``): from the
    target's log-probabilities (gray) or from its greedy tokens (black: log-probabilities
    estimated from them as every black column is, and the greedy match rate)."""
    where = "at the tokens where the passage differs from its twin (difflib alignment of token ids)"
    lp = "log p(x_i|x_<i)" if access == "gray" else "estimated log p(x_i|x_<i) (BADI App. A.6)"
    specs = [FeatureSpec(f"{access}_twin_lp", access, _T, 1, f"mean target {lp} {where}",
                         "ours: LOSS (Yeom et al. 2018) at twins' changed tokens; needs a twins audit"),
             FeatureSpec(f"{access}_twin_ref_diff", access, _TR, 1, f"mean target − reference {lp} {where}",
                         "ours: RefL (Carlini et al. 2021; BADI App. A.2 item 5) at twins' changed tokens")]
    if access == "black":
        specs.append(FeatureSpec("black_twin_match", "black", _T, 1, "fraction of the changed tokens whose greedy "
                                 f"token (given the passage's own prefix) is the actual token; {where}",
                                 "ours: a radioactivity count (Sander et al. 2024) of the version's own word "
                                 "choices, label-only (Choquette-Choo et al. 2021)"))
    return specs


def _black_specs(config: FeatureConfig) -> list[FeatureSpec]:
    """The black-box columns: the token ones, the perturbed greedy matches, the sequence ones."""
    specs = _token_specs("black", config)
    specs += [FeatureSpec(f"black_pert_match_rate_{kind}", "black", _T, 1, "fraction of positions whose greedy "
                          f"token is the actual token, on the {_KIND_TEXT[kind]} variant",
                          "Choquette-Choo et al. 2021 (Query-augment); TDDBench App. A.1.4") for kind in config.kinds]
    if config.sequence:
        specs.append(FeatureSpec("black_seq_bertscore", "black", _T, 1,
                                 "BERTScore F1 (MiniLM) of the greedy continuation of the prefix vs the true suffix",
                                 "BADI Sec. 3, App. A.1, B.1"))
        specs += [FeatureSpec(f"black_seq_bertscore_{kind}", "black", _T, 1,
                              f"BERTScore F1 of the continuation of the {_KIND_TEXT[kind]} prefix vs the true suffix",
                              "BADI Sec. 3 (sequence-perturb), A.3") for kind in config.kinds]
        specs.append(FeatureSpec("black_ref_seq_diff", "black", _TR, 1,
                                 "BERTScore F1 of the target's greedy continuation − of the reference's "
                                 "(same prefix, same true suffix)",
                                 "ours: RefL (BADI App. A.2 item 5) on BADI Sec. 3's suffix similarity"))
    return specs


def catalog(config: FeatureConfig, access: str = "both") -> list[FeatureSpec]:
    """Every feature column ``extract`` can produce under ``config`` (a ``FeatureConfig``, or
    ``EVERY_COLUMN``), in column order."""
    specs = _token_specs("gray", config) if access in ("gray", "both") else []
    specs += _twin_specs("gray") if config.twin_positions and access in ("gray", "both") else []
    if access in ("black", "both"):
        specs += _black_specs(config) + (_twin_specs("black") if config.twin_positions else [])
    return specs


# A configuration with every option on (one percent each for Min-K%/STRIP-K%, every perturbation):
# its catalogue holds every column family once (features.orientation derives directions from it).
EVERY_COLUMN = SimpleNamespace(min_k=(0.2,), strip_k=(0.1,), kinds=tuple(_KIND_TEXT), metric_criteria=True,
                               prediction_vectors=True, twin_positions=True, sequence=True)
