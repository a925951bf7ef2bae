"""The held-out shift suite: does an audit say "trained on" about text no model ever saw?

An auditor's held-out set is rarely drawn like the suspect set: it is newer, from another
part of the archive, another source or another style. Such a shift breaks the
exchangeability that dataset inference rests on (BADI Sec. 4) and a model's test can reject
on it (Das et al. 2024; Duan et al. 2024). This suite builds pairs of passage pools that
*neither* model of a scratch testbed (``tiny``, ``tiny-pretrain``) ever saw and that differ
in one property, and measures per shift, over Monte Carlo trials (random orders of the
pools, as in BADI Sec. 5.1 / App. D), how often

- the model's test rejects (every rejection here is a false "trained on"),
- the blind check (trainspotter.stats.blind) fires on the same pairs, and
- "trained on" is reported with the guard: the model rejects and the blind check does not,

for the default feature set and for the reference-relative ``calibrated`` set. The kinds:

- ``length``: 64-token passages vs the first 32 tokens of others;
- ``topic``: leads about people vs leads about the sciences (the corpus's own topic labels);
- ``period``: leads whose latest year mentioned is ≥ 1950 vs < 1900;
- ``source``: Wikipedia leads vs prose paragraphs of the Python 3.11 documentation;
- ``position``: the opening 64 tokens of leads vs the next 64 tokens of other leads;

each in both directions (either pool as the suspect set).
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, field_validator
from scipy.stats import binomtest

from trainspotter.data import Passage
from trainspotter.presets import DEFAULT_PRESET, PRESETS
from trainspotter.stats.blind import TextRows, blind_stops
from trainspotter.stats.sequential import TestConfig
from trainspotter.stats.simulation import stream_stops

__all__ = ["KINDS", "ShiftConfig", "python_docs_passages", "render_markdown", "scenario_trials", "shift_pools",
           "suite_tests", "summarise"]

KINDS = ("length", "topic", "period", "source", "position")
SCIENCES = ("Biology and health sciences", "Physical sciences", "Technology", "Mathematics")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-2][0-9])\b")


class ShiftConfig(BaseModel):
    """One run of the shift suite."""

    testbed: str = "tiny-pretrain"
    kinds: tuple[str, ...] = KINDS
    trials: int = Field(200, ge=1)       # per shift scenario
    iid_trials: int = Field(1000, ge=1)  # members / non-members vs held-out
    pollution: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)  # held-out fractions replaced by members
    pollution_trials: int = Field(500, ge=1)
    n_max: int | None = Field(None, ge=4)
    alpha: float = Field(0.05, gt=0, lt=1)
    preset: str = DEFAULT_PRESET
    limit: int | None = Field(None, ge=8)  # passages per pool (tests)
    seed: int = 0
    out: str | None = None

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v):
        bad = sorted(set(v) - set(KINDS))
        if bad or not v:
            raise ValueError(f"unknown shift kinds {bad}; choose from {', '.join(KINDS)}")
        return v

    def test(self) -> TestConfig:
        return TestConfig(alpha=self.alpha, seed=self.seed, **PRESETS[self.preset])


# ---------------------------------------------------------------- the pools

def _prose(paragraph: str) -> str | None:
    """A paragraph of running text from a reST source, or None (code, directives, tables,
    headings, lists)."""
    lines = paragraph.strip("\n").splitlines()
    if not lines or any(line[:1].isspace() or line.startswith(("..", ">>>", "|", "+", "*", "-", "#", "="))
                        for line in lines):
        return None
    if any(set(line.strip()) <= set("=-~^*#+`':\"") for line in lines):
        return None  # heading underline
    text = " ".join(line.strip() for line in lines)
    return text if len(text.split()) >= 20 else None


def python_docs_passages(tokenizer, length: int, docs: Path | None = None) -> list[Passage]:
    """The first ``length`` tokens of every prose paragraph of the Python docs with at least
    that many tokens, in file order."""
    from trainspotter.assets import python_docs_dir

    root = docs or python_docs_dir()
    out = []
    for path in sorted(root.rglob("*.txt")):
        for k, paragraph in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n\n")):
            text = _prose(paragraph)
            if text is None:
                continue
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(ids) >= length:
                out.append({"id": f"pydocs:{path.relative_to(root)}:{k}", "text": tokenizer.decode(ids[:length])})
    return out


def shift_pools(testbed: str, seed: int = 0, limit: int | None = None,
                root: Path | None = None) -> dict[str, tuple[str, list[Passage], str, list[Passage]]]:
    """{kind: (label A, pool A, label B, pool B)}: disjoint pools of passages that neither of
    ``testbed``'s models saw (its non-member and held-out leads, later chunks of them, the
    Python docs), differing in one property. At most ``limit`` passages per pool."""
    import json

    from transformers import AutoTokenizer

    from trainspotter.assets import wikipedia_leads
    from trainspotter.evaluation.testbed import load_manifest, split_path, testbed_dir

    manifest = load_manifest(testbed, root)
    if manifest is None or manifest["config"]["base"] != "scratch":
        raise ValueError(f"testbed {testbed!r}: the shift suite needs a built scratch testbed (tiny, tiny-pretrain)")
    L = manifest["config"]["chunk_tokens"]
    tok = AutoTokenizer.from_pretrained(testbed_dir(testbed, root) / "target")
    leads = {r["id"]: r for r in wikipedia_leads()}
    unseen = [json.loads(line) for split in ("nonmember", "heldout")
              for line in split_path(testbed, split, root).read_text(encoding="utf-8").splitlines()]
    random.Random(f"{seed}:shift").shuffle(unseen)
    tokens = {p["id"]: tok(leads[p["id"]]["text"], add_special_tokens=False)["input_ids"] for p in unseen}
    piece = lambda p, a, b, tag: {"id": f"{p['id']}#{tag}", "text": tok.decode(tokens[p["id"]][a:b])}  # noqa: E731
    cap = lambda pool: pool[:limit] if limit else pool  # noqa: E731
    half = len(unseen) // 2
    years = {p["id"]: [int(y) for y in _YEAR.findall(leads[p["id"]]["text"])] for p in unseen}
    long_leads = [p for p in unseen if len(tokens[p["id"]]) >= 2 * L]
    docs = python_docs_passages(tok, L)
    random.Random(f"{seed}:pydocs").shuffle(docs)
    pools = {
        "length": (f"{L} tokens", unseen[:half], f"{L // 2} tokens", [piece(p, 0, L // 2, "short") for p in unseen[half:]]),
        "topic": ("people", [p for p in unseen if leads[p["id"]]["topic"] == "People"],
                  "sciences", [p for p in unseen if leads[p["id"]]["topic"] in SCIENCES]),
        "period": ("modern (≥ 1950)", [p for p in unseen if years[p["id"]] and max(years[p["id"]]) >= 1950],
                   "historical (< 1900)", [p for p in unseen if years[p["id"]] and max(years[p["id"]]) < 1900]),
        "source": ("Wikipedia", unseen[:len(docs)], "Python docs", docs[:len(unseen)]),
        "position": ("lead openings", long_leads[: len(long_leads) // 2],
                     "continuations", [piece(p, L, 2 * L, "next") for p in long_leads[len(long_leads) // 2:]]),
    }
    return {k: (a, cap(pa), b, cap(pb)) for k, (a, pa, b, pb) in pools.items()}


# ---------------------------------------------------------------- Monte Carlo

def scenario_trials(suspect: pd.DataFrame, heldout: pd.DataFrame, tests: dict[str, tuple[list[str], TestConfig]],
                    config: TestConfig, trials: int, n_max: int | None = None, seed: int = 0,
                    batch_size: int = 200) -> dict:
    """Monte Carlo on one (suspect pool, held-out pool): each trial pairs a random order of
    each pool (n = the smaller pool, capped by ``n_max``); on the same streams the model's
    test runs for each named (feature columns, test settings) and the blind check, with the
    betting of ``config``, on the ``text`` column. Returns the pair count, each test's
    first-crossing times (0 = none) and the blind check's crossing times and largest wealth,
    one per trial."""
    n = min(len(suspect), len(heldout), n_max or math.inf)
    rows = TextRows(list(suspect["text"])), TextRows(list(heldout["text"]))
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(trials)]
    model = {name: [] for name in tests}
    blind, top = [], []
    for start in range(0, trials, batch_size):
        chunk = rngs[start:start + batch_size]
        ix = np.stack([r.permutation(len(suspect))[:n] for r in chunk])
        iy = np.stack([r.permutation(len(heldout))[:n] for r in chunk])
        for name, (cols, test) in tests.items():
            S, H = suspect[cols].to_numpy(dtype=float), heldout[cols].to_numpy(dtype=float)
            model[name].append(stream_stops(S, H, ix, iy, [test], [test.alpha], cols)[0][0, 0])
        b, w = blind_stops(*rows, ix, iy, config)
        blind.append(b)
        top.append(w)
    return {"pairs": int(n), "trials": trials, "model": {k: np.concatenate(v) for k, v in model.items()},
            "blind_stop": np.concatenate(blind), "blind_max": np.concatenate(top)}


def _rate(hits: np.ndarray, alpha: float) -> dict:
    k, n = int(hits.sum()), len(hits)
    return {"rate": k / n, "count": k, "binom_p": float(binomtest(k, n, alpha, alternative="greater").pvalue)}


def summarise(result: dict, alpha: float, h0: bool, baseline: str = "unoriented") -> dict:
    """Per test: the model's rejection rate, the guarded "trained on" rate (model rejects and
    the blind check does not fire), the censored mean pairs to decision and, on true H1
    streams (``h0`` False), the share of true rejections the guard turns into "inconclusive"
    and the paired saving in pairs against the ``baseline`` test on the same trials; the
    blind check's firing rate. Rates come with the one-sided binomial p-value of rate ≤ α."""
    from trainspotter.evaluation.benchmark_di import paired_saving

    fired = result["blind_stop"] > 0
    out = {"pairs": result["pairs"], "trials": result["trials"], "blind": _rate(fired, alpha), "tests": {}}
    for name, stops in result["model"].items():
        reject = stops > 0
        row = {"model": _rate(reject, alpha), "guarded": _rate(reject & ~fired, alpha),
               "censored_pairs": float(np.where(reject, stops, result["pairs"]).mean())}
        if not h0:
            row["lost_to_guard"] = float((reject & fired).sum() / max(reject.sum(), 1))
            row |= paired_saving(stops, result["model"][baseline], result["pairs"])
        out["tests"][name] = row
    return out


NAMES = {"unoriented": "before (lean, learned direction)", "lean": "default (lean, oriented)",
         "calibrated": "calibrated (oriented)"}
TESTS = {  # name: (feature set, scorer keeps the features' member-like directions)
    "unoriented": ("lean", False),  # the default before the guard: BADI's learned direction
    "lean": ("lean", True),          # the default
    "calibrated": ("calibrated", True),
}


def suite_tests(available: list[str], config: TestConfig) -> dict[str, tuple[list[str], TestConfig]]:
    """The tests of ``TESTS`` on the gray-box (with a reference) columns of their feature set
    that ``available`` has, with ``config``'s betting."""
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    return {name: ([c for c in feature_columns(FEATURE_SETS[fs], "gray", 1) if c in available],
                   config.model_copy(update={"oriented": oriented})) for name, (fs, oriented) in TESTS.items()}


def _cell(r: dict) -> str:
    return f"{r['rate']:.3f} (p {r['binom_p']:.2g})"


def render_markdown(summary: dict, alpha: float) -> str:
    """shift.md: the shift scenarios, the IID cost of the guard and held-out pollution."""
    lines = ["# Held-out shift suite", "", summary["header"], "",
             "## Shifts: passages that neither model saw, differing in one property", "",
             f"Every rejection here is a false \"trained on\". Monte Carlo over random orders of the two pools "
             f"(pairs = the smaller pool), α = {alpha:g}. *before*: the default test as it was (learned "
             f"direction, no guard); *default*: the test with the scorer oriented; *+ guard*: it rejects and "
             f"the blind check (texts only, same pairs) does not fire — what the audit now reports as "
             f"\"trained on\"; *calibrated*: the reference-relative feature set. Rate (one-sided binomial p "
             f"of rate ≤ α; p < 0.05 marks a rate significantly above α).", "",
             "| shift | suspect | held-out | pairs | trials | blind check fires | before | default | default + guard "
             "| calibrated | calibrated + guard |", "|---" * 11 + "|"]
    for s in summary["scenarios"]:
        t = s["tests"]
        lines.append(f"| {s['kind']} | {s['suspect']} | {s['heldout']} | {s['pairs']} | {s['trials']} "
                     f"| {s['blind']['rate']:.3f} | {_cell(t['unoriented']['model'])} | {_cell(t['lean']['model'])} "
                     f"| {_cell(t['lean']['guarded'])} | {_cell(t['calibrated']['model'])} "
                     f"| {_cell(t['calibrated']['guarded'])} |")
    lines += ["", "## IID splits: what the guard costs", "",
              "Members vs held-out (H1: rejections are right) and non-members vs held-out (H0). *lost to the "
              "guard*: share of the model's rejections that the guard turns into \"inconclusive\". Pairs: "
              "censored mean pairs to decision (a non-rejection counts as all pairs).", "",
              "| suspect | pairs | trials | blind check fires | test | model rejects | + guard | lost to the guard "
              "| pairs to decision | saving vs before [95% CI] |", "|---" * 10 + "|"]
    for r in summary["iid"]:
        for name, t in r["tests"].items():
            lost = "—" if r["h0"] else f"{t['lost_to_guard']:.3f}"
            saving = "—" if r["h0"] else \
                f"{t['saving']:+.1%} [{t['saving_ci_low']:+.1%}, {t['saving_ci_high']:+.1%}]"
            lines.append(f"| {r['suspect']} | {r['pairs']} | {r['trials']} | {_cell(r['blind'])} | {NAMES[name]} "
                         f"| {_cell(t['model'])} | {_cell(t['guarded'])} | {lost} | {t['censored_pairs']:.1f} "
                         f"| {saving} |")
    lines += ["", "## Held-out pollution (default test)", "",
              "A fraction of the held-out stream replaced by members (BADI App. D.6). Suspect = members: "
              "pollution may cost power. Suspect = non-members (H0: the suspect set was not trained on): "
              "any rejection would be a false \"trained on\".", "",
              "| suspect | pollution | pairs | rejection rate | rejecting: mean pairs | pairs to decision (censored) |",
              "|---" * 6 + "|"]
    for name, p in summary["pollution"].items():
        for ratio, v in p.items():
            if ratio == "pairs":
                continue
            mean = "—" if v["mean_stop"] is None else f"{v['mean_stop']:.1f}"
            lines.append(f"| {name} | {float(ratio):.0%} | {p['pairs']} | {v['rejection_rate']:.3f} | {mean} "
                         f"| {v['censored_pairs']:.1f} |")
    return "\n".join(lines) + "\n"
