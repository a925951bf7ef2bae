"""A sealed record's feature values computed again from the model's answers it holds, offline
and without the model (issue 39; ``trainspotter.record.verify`` runs it as its "features" check).

Each side of each pair (the model's and the placebo check's) holds its feature values and, from
a gray-box extraction, the answers they came from (``features.answers``: token ids and
log-probs of the target, its perturbed passages and the references). The row is computed
again by ``features.answers.recompute``, the function extraction itself calls, and every
recorded value it gives must equal the recorded one: bit for bit with the same numpy, within
``TOLERANCE`` (|a − b| ≤ 1e-9 · max(1, |a|, |b|)) where another platform's reductions may
round differently. The first difference is named: pair, side, passage, feature, and whether
the answer or the feature value is the one changed since sealing (their sha256 tell).

Black-box columns are recomputed from their answers (``features.black_answers``: greedy token ids,
their strings, MiniLM similarities, continuations and BERTScore F1s) bit for bit too; then the
similarities are computed again from the recorded strings with the packaged MiniLM token table
and the F1s from the recorded texts with BERTScore, within ``black_answers.SIM_TOLERANCE`` /
``F1_TOLERANCE`` (another encoder run rounds float32 differently). Only their sha256 shows that
the strings are the target tokenizer's decoding of the ids and the continuations the target's:
that needs the model. Not recomputed, and said so: records of audits whose ``extract_fn`` gave no
answers, version 1 records (made before answers were recorded) and black-box columns of
records made before black-box answers were recorded.
"""

from __future__ import annotations

import binascii
import math

from trainspotter.errors import InputError
from trainspotter.features import black_answers
from trainspotter.features.answers import recompute
from trainspotter.features.features import FeatureConfig
from trainspotter.record.format import sha256

__all__ = ["SIDES", "TOLERANCE", "apart", "check_recomputed", "close"]

TOLERANCE = 1e-9
SIDES = ("suspect", "heldout")  # a pair's two sides, as the record names them


def close(a, b) -> bool:
    """Equal, NaN to NaN, or within ``TOLERANCE`` relative (at least absolute for |x| < 1)."""
    if isinstance(a, bool) or isinstance(b, bool) or not all(isinstance(v, (int, float)) for v in (a, b)):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def apart(recorded, replayed, where: str = "") -> str | None:
    """The first place (``weights[3]``) where two stored states differ by more than ``close``; None: none."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        if recorded.keys() != replayed.keys():
            return f"{where} (keys {sorted(recorded)} recorded, {sorted(replayed)} replayed)"
        return next((w for k in recorded if (w := apart(recorded[k], replayed[k], f"{where}.{k}"))), None)
    if isinstance(recorded, list) and isinstance(replayed, list):
        if len(recorded) != len(replayed):
            return f"{where} ({len(recorded)} values recorded, {len(replayed)} replayed)"
        return next((w for i, (a, b) in enumerate(zip(recorded, replayed)) if (w := apart(a, b, f"{where}[{i}]"))),
                    None)
    return None if close(recorded, replayed) else f"{where}: recorded {recorded!r}, replayed {replayed!r}"


class _Tally:
    def __init__(self):
        self.sides = self.without = 0
        self.exact = True
        self.skipped: set[str] = set()
        self.blacks: list[tuple[str, dict]] = []  # (where, decoded black-box answers): for check_models


def _side(where: str, side: dict, text: str, features: FeatureConfig, tally: _Tally) -> str | None:
    """None when the side's features are what its answers give; else what differs."""
    features_ok = sha256(side["features"]) == side["features_sha256"]
    answers = side.get("answers")
    if answers is None:
        tally.without += 1
        return None if features_ok else (f"{where}: feature values do not match their sha256 (changed after "
                                          f"sealing; the record holds no answers to recompute them from)")
    answers_ok = sha256(answers) == side.get("answers_sha256")
    try:
        row = recompute(text, answers, features)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, binascii.Error, InputError) as e:
        return f"{where}: answer: the recorded model answers cannot be read ({type(e).__name__}: {e})"
    for name, value in side["features"].items():
        if name not in row:
            tally.skipped.add(name)
            continue
        if not close(value, row[name]):
            if not answers_ok:
                return (f"{where}: answer changed after sealing (the answers do not match their sha256): "
                        f"{name} computed from them is {row[name]!r}, recorded {value!r}")
            if not features_ok:
                return (f"{where}: feature {name} changed after sealing: recorded {value!r}, computed from the "
                        f"model's answers {row[name]!r}")
            return (f"{where}: feature {name}: recorded {value!r}, computed from the model's answers "
                    f"{row[name]!r} (an answer or a feature changed and its sha256 recomputed, or other feature code)")
        tally.exact = tally.exact and value == row[name]
    if not answers_ok:
        return f"{where}: answer changed after sealing (the answers do not match their sha256)"
    if not features_ok:
        return f"{where}: feature values do not match their sha256 (changed after sealing)"
    if black_answers.BLACK in answers:
        tally.blacks.append((where, black_answers.decode(answers[black_answers.BLACK])))
    tally.sides += 1
    return None


def _check_models(tally: _Tally, features: FeatureConfig) -> tuple[str | None, str]:
    """The black-box answers' similarities and F1s computed again by the local models
    (``black_answers.check_models``): (the problem, or None; what was checked)."""
    from trainspotter.features.probability import bertscore_f1, default_token_table_path, token_table

    table = token_table(features.embedding_cache or default_token_table_path())
    # every recorded string the table lacks (another machine's verify) embedded in one batch
    table.ensure(x for _, b in tally.blacks for _, s in black_answers.sides(b) for x in s["true"] + s["pred"])
    problem, sim, f1 = black_answers.check_models(tally.blacks, table.similarity, bertscore_f1)
    seq = any(b.get("sequence") for _, b in tally.blacks)
    done = (f"the black-box token similarities computed again from the recorded token strings with MiniLM "
            f"(largest difference {sim:.2g}, tolerance {black_answers.SIM_TOLERANCE:g})"
            + (f" and the continuations' BERTScore F1 from the recorded texts (largest difference {f1:.2g}, "
               f"tolerance {black_answers.F1_TOLERANCE:g})" if seq else "")
            + "; only their sha256 shows that the token strings are the target tokenizer's"
            + (" and the continuations the target's" if seq else ""))
    return problem, done


def _pairs(pairs: list[dict], label: str, texts: dict, features: FeatureConfig, tally: _Tally) -> str | None:
    for pair in pairs:
        for s in SIDES:
            side = pair[s]
            where = f"{label} {pair['t']}, {s} {side['id']!r}"
            text = texts.get((s, side["id"]))
            if text is None:
                return f"{where}: no such passage in the record"
            problem = _side(where, side, text, features, tally)
            if problem:
                return problem
    return None


def check_recomputed(record: dict, config) -> tuple[bool, str]:
    """(ok, detail) of the record's feature values against its answers (module docstring);
    ``config``: the record's ``AuditConfig`` (its feature set, and the placebo audit's)."""
    texts = {(s, p["id"]): p["text"] for s in SIDES for p in record["passages"][s]}
    tally = _Tally()
    model = [p for b in record["batches"] for p in b["pairs"]]
    problem = _pairs(model, "pair", texts, config.features, tally)
    placebo, placebo_config = record["placebo"]["pairs"], config.placebo_config
    if problem is None and placebo:
        features = placebo_config.features if placebo_config is not None else config.features
        problem = _pairs(placebo, "placebo pair", texts, features, tally)
    if problem is None and tally.blacks:
        problem, models = _check_models(tally, config.features)
    if problem:
        return False, problem
    n = 2 * (len(model) + len(placebo))
    if tally.sides and tally.without:
        return False, (f"{tally.without} of {n} recorded passages hold no model answers, the others do: "
                       f"answers were removed")
    if not tally.sides:
        why = ("a version 1 record, made before answers were recorded" if record["version"] == 1 else
               "black-box access" if config.access == "black" else "its extractor gave none")
        return True, (f"the feature values of {n // 2} pairs match their sha256; not recomputed: the record holds "
                      f"no model answers ({why})")
    how = "bit-for-bit" if tally.exact else f"within {TOLERANCE:g}"
    placebo_pairs = f" and the placebo model's {len(placebo)}" if placebo else ""
    detail = (f"every feature of {len(model)} pairs{placebo_pairs} recomputed from the model's recorded answers "
              f"matches {how}")
    if tally.blacks:
        detail += f"; {models}"
    if tally.skipped:
        detail += f"; not recomputed (black-box, their answers are not recorded): {', '.join(sorted(tally.skipped))}"
    return True, detail
