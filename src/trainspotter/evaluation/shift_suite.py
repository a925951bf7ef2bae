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

- the placebo check fires: the same test on the reference model's own features (a model that saw
  neither pool) reaches 1/α on all pairs,

for the audits a user runs by default (gray with a reference, gray without, black with a
reference) and the reference-relative ``calibrated`` set, at small audit sizes (20, 40, 80
passages per side, where the blind check has little power) and on the whole pools. The kinds:

- ``length``: 64-token passages vs the first 32 tokens of others;
- ``topic``: leads about people vs leads about the sciences (the corpus's own topic labels);
- ``period``: leads whose latest year mentioned is ≥ 1950 vs < 1900;
- ``source``: Wikipedia leads vs prose paragraphs of the Python 3.11 documentation;
- ``position``: the opening 64 tokens of leads vs the next 64 tokens of other leads;
- ``difficulty``: the third of the passages another language model finds easiest vs the third
  it finds hardest, all of one token length: easier text with little in the words to show it
  (issue 34). The judge is the reference model of a sibling testbed (``DIFFICULTY_JUDGE``:
  another recipe, tokenizer and seed, trained on other Wikipedia leads). (The packaged
  SmolLM2-135M would be a more independent judge, but scoring the pools with it takes hours
  on 2 CPU cores.)

each in both directions (either pool as the suspect set).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, field_validator
from scipy.stats import binomtest

from trainspotter.data import Passage
from trainspotter.features.orientation import directions
from trainspotter.features.text import TextRows
from trainspotter.presets import DEFAULT_PRESET, TEST_PRESETS, UNGUARDED_MIN_PAIRS, check_test_preset
from trainspotter.stats.blind import blind_stops
from trainspotter.stats.sequential import TestConfig
from trainspotter.stats.simulation import stream_stops

__all__ = ["AUDITS", "DIFFICULTY_JUDGE", "KINDS", "ShiftConfig", "guard_of", "placebo_columns", "python_docs_passages", "render_markdown",
           "scenario_trials", "shift_pools", "suite_tests", "summarise", "trial_draws", "unseen_passages", "verdicts"]

KINDS = ("length", "topic", "period", "source", "position", "difficulty")
# testbed -> the sibling testbed whose reference model judges the difficulty shift
DIFFICULTY_JUDGE = {"tiny-pretrain": "tiny", "tiny-pretrain-2k": "tiny", "tiny-pretrain-2k-x2": "tiny",
                    "tiny": "tiny-pretrain", "mini": "mini-pretrain", "mini-pretrain": "mini"}
SCIENCES = ("Biology and health sciences", "Physical sciences", "Technology", "Mathematics")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-2][0-9])\b")


class ShiftConfig(BaseModel):
    """One run of the shift suite."""

    testbed: str = "tiny-pretrain"
    kinds: tuple[str, ...] = KINDS
    trials: int = Field(200, ge=1)       # per shift scenario and size
    sizes: tuple[int, ...] = (20, 40, 80, 160, 320, 0)  # passages per side of an audit; 0: the whole pools
    iid_trials: int = Field(1000, ge=1)  # members / non-members vs held-out
    pollution: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)  # held-out fractions replaced by members
    pollution_trials: int = Field(500, ge=1)
    n_max: int | None = Field(None, ge=4)
    alpha: float = Field(0.05, gt=0, lt=1)
    preset: str = DEFAULT_PRESET
    limit: int | None = Field(None, ge=8)  # passages per pool (tests)
    seed: int = 0
    out: str | None = None

    @field_validator("preset")
    @classmethod
    def _preset(cls, v):
        return check_test_preset(v)

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v):
        bad = sorted(set(v) - set(KINDS))
        if bad or not v:
            raise ValueError(f"unknown shift kinds {bad}; choose from {', '.join(KINDS)}")
        return v

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v):
        if not v or any(n != 0 and n < 4 for n in v):
            raise ValueError("sizes: passages per side, each 0 (the whole pools) or at least 4")
        return v

    def test(self) -> TestConfig:
        return TestConfig(alpha=self.alpha, seed=self.seed, **TEST_PRESETS[self.preset])


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


def unseen_passages(testbed: str, root: Path | None = None) -> list[Passage]:
    """The testbed's non-member and held-out passages: text neither of its models saw."""
    import json

    from trainspotter.testbeds.build import split_path

    return [json.loads(line) for split in ("nonmember", "heldout")
            for line in split_path(testbed, split, root).read_text(encoding="utf-8").splitlines()]


def shift_pools(testbed: str, seed: int = 0, limit: int | None = None, root: Path | None = None,
                difficulty: Mapping[str, float] | None = None) -> dict[str, tuple[str, list[Passage], str, list[Passage]]]:
    """{kind: (label A, pool A, label B, pool B)}: disjoint pools of passages that neither of
    ``testbed``'s models saw (its non-member and held-out leads, later chunks of them, the
    Python docs), differing in one property. At most ``limit`` passages per pool.
    ``difficulty``: an independent model's mean log-probability per token of each unseen
    passage (by id; higher is easier), for the ``difficulty`` kind (left out without it)."""
    from transformers import AutoTokenizer

    from trainspotter.assets import wikipedia_leads
    from trainspotter.testbeds.build import load_manifest, testbed_dir

    manifest = load_manifest(testbed, root)
    if manifest is None or manifest["config"]["base"] != "scratch":
        raise ValueError(f"testbed {testbed!r}: the shift suite needs a built scratch testbed (tiny, tiny-pretrain)")
    L = manifest["config"]["chunk_tokens"]
    tok = AutoTokenizer.from_pretrained(testbed_dir(testbed, root) / "target")
    leads = {r["id"]: r for r in wikipedia_leads()}
    unseen = unseen_passages(testbed, root)
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
    if difficulty is not None:
        ranked = sorted(unseen, key=lambda p: -difficulty[p["id"]])  # easiest first
        third = len(ranked) // 3
        pools["difficulty"] = ("easier text", ranked[:third], "harder text", ranked[-third:])
    return {k: (a, cap(pa), b, cap(pb)) for k, (a, pa, b, pb) in pools.items()}


# ---------------------------------------------------------------- Monte Carlo

# The audits a user runs: name -> (feature set, access, reference models). Each is guarded by
# the blind check and, with a reference, by the placebo check of its access: the same test on
# the reference's own features (trainspotter.auditing.placebo).
AUDITS = {
    "gray": ("lean", "gray", 1),
    "gray_noref": ("lean", "gray", 0),
    "black": ("lean", "black", 1),
    "calibrated": ("calibrated", "gray", 1),
}
NAMES = {"gray": "gray + reference (default)", "gray_noref": "gray, no reference", "black": "black + reference",
         "calibrated": "calibrated", "unoriented": "before (lean, learned direction)"}
PLACEBO_PREFIX = "placebo_{}:"  # feature columns of the reference model in the target's place


def placebo_columns(access: str, available: list[str]) -> list[str]:
    """The placebo check's columns of ``access`` that ``available`` has: the lean set's
    single-model features, computed on the reference model, prefixed."""
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    prefix = PLACEBO_PREFIX.format(access)
    return [prefix + c for c in feature_columns(FEATURE_SETS["lean"], access, 0) if prefix + c in available]


def suite_tests(available: list[str], config: TestConfig) -> dict[str, tuple[list[str], TestConfig]]:
    """Every audit of ``AUDITS``, its placebo check per access (``placebo_gray``,
    ``placebo_black``) and the unoriented lean test, on the columns ``available`` has, with
    ``config``'s betting."""
    from trainspotter.features.extract import feature_columns
    from trainspotter.features.features import FEATURE_SETS

    tests = {name: ([c for c in feature_columns(FEATURE_SETS[fs], access, refs) if c in available], config)
             for name, (fs, access, refs) in AUDITS.items()}
    tests["unoriented"] = (tests["gray"][0], config.model_copy(update={"oriented": False}))
    for access in ("gray", "black"):
        tests[f"placebo_{access}"] = (placebo_columns(access, available), config)
    return {name: (cols, test) for name, (cols, test) in tests.items() if cols}


def guard_of(name: str) -> str | None:
    """The placebo test that guards audit ``name`` (None: it has no reference)."""
    fs, access, refs = AUDITS[name]
    return f"placebo_{access}" if refs else None


def trial_draws(n_s: int, n_h: int, n: int, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of each trial's draw, [trials, n] per side: n of the n_s suspect and of the n_h
    held-out rows, in a random order, from a generator of its own per trial (``seed`` spawned)."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(trials)]
    draws = [(r.permutation(n_s)[:n], r.permutation(n_h)[:n]) for r in rngs]
    return np.stack([x for x, _ in draws]), np.stack([y for _, y in draws])


def scenario_trials(suspect: pd.DataFrame, heldout: pd.DataFrame, tests: dict[str, tuple[list[str], TestConfig]],
                    config: TestConfig, trials: int, n_max: int | None = None, seed: int = 0,
                    batch_size: int = 200, text_rows: tuple[TextRows, TextRows] | None = None) -> dict:
    """Monte Carlo on one (suspect pool, held-out pool): each trial pairs a random draw of
    n passages from each pool in random order (n = the smaller pool, capped by ``n_max``: an
    audit of n passages per side); on the same streams each named test (feature columns,
    settings; a column ``placebo_<access>:NAME`` is feature NAME of the reference model) runs
    over all n pairs, and so does the blind check, with the betting of ``config``, on the
    ``text`` column. Returns the pair count, each test's first-crossing times (0 = none) and
    the blind check's crossing times and largest wealth, one per trial. ``text_rows``: the
    blind inputs of both pools' texts, already built (``TextRows``; default: built here)."""
    n = int(min(len(suspect), len(heldout), n_max or math.inf))
    rows = text_rows or (TextRows(list(suspect["text"])), TextRows(list(heldout["text"])))
    draws = trial_draws(len(suspect), len(heldout), n, trials, seed)
    model = {name: [] for name in tests}
    blind, top = [], []
    for start in range(0, trials, batch_size):
        ix, iy = (d[start:start + batch_size] for d in draws)
        for name, (cols, test) in tests.items():
            S, H = suspect[cols].to_numpy(dtype=float), heldout[cols].to_numpy(dtype=float)
            signs = directions([c.split(":")[-1] for c in cols])  # the catalogue name keeps its direction
            model[name].append(stream_stops(S, H, ix, iy, [test], [test.alpha], signs)[0][0, 0])
        b, w = blind_stops(*rows, ix, iy, config)
        blind.append(b)
        top.append(w)
    return {"pairs": int(n), "trials": trials, "model": {k: np.concatenate(v) for k, v in model.items()},
            "blind_stop": np.concatenate(blind), "blind_max": np.concatenate(top)}


def _rate(hits: np.ndarray, alpha: float) -> dict:
    k, n = int(hits.sum()), len(hits)
    return {"rate": k / n, "count": k, "binom_p": float(binomtest(k, n, alpha, alternative="greater").pvalue)}


def verdicts(result: dict, name: str) -> dict[str, np.ndarray]:
    """Per trial of audit ``name``: the model's test rejects (``model``), "trained on" as the
    audit said it before issue 34 (the blind check alone guards: ``blind_only``) and as it
    says it now (``guarded``: the blind and placebo checks; without a reference, the blind
    check and at least ``UNGUARDED_MIN_PAIRS`` pairs); see trainspotter.auditing.verdict.decide."""
    reject = result["model"][name] > 0
    fired = result["blind_stop"] > 0
    guard = guard_of(name)
    if guard is None:
        blocked = np.full_like(reject, result["pairs"] < UNGUARDED_MIN_PAIRS)
    else:
        blocked = result["model"][guard] > 0 if guard in result["model"] else np.zeros_like(reject)
    return {"model": reject, "blind_only": reject & ~fired, "guarded": reject & ~fired & ~blocked}


def summarise(result: dict, alpha: float, h0: bool, baseline: str = "unoriented") -> dict:
    """Per audit: the model's rejection rate, "trained on" before and now (``verdicts``), the
    censored mean pairs to decision and, on true H1 streams (``h0`` False), the share of true
    rejections the guards turn into "inconclusive" and the paired saving in pairs against the
    ``baseline`` test on the same trials; the blind check's and placebo checks' firing rates.
    Rates come with the one-sided binomial p-value of rate ≤ α."""
    from trainspotter.evaluation.benchmark_di import paired_saving

    fired = result["blind_stop"] > 0
    out = {"pairs": result["pairs"], "trials": result["trials"], "blind": _rate(fired, alpha), "tests": {},
           "placebo": {k: _rate(v > 0, alpha) for k, v in result["model"].items() if k.startswith("placebo_")}}
    for name, stops in result["model"].items():
        if name not in AUDITS:
            continue
        v = verdicts(result, name)
        row = {k: _rate(hits, alpha) for k, hits in v.items()}
        row["censored_pairs"] = float(np.where(v["model"], stops, result["pairs"]).mean())
        if not h0:
            row["lost_to_guard"] = float((v["model"] & ~v["guarded"]).sum() / max(v["model"].sum(), 1))
            if baseline in result["model"]:
                row |= paired_saving(stops, result["model"][baseline], result["pairs"])
        out["tests"][name] = row
    return out


def _cell(r: dict) -> str:
    return f"{r['rate']:.3f} (p {r['binom_p']:.2g})"


def _short(r: dict) -> str:
    return f"**{r['rate']:.3f}**" if r["binom_p"] < 0.05 else f"{r['rate']:.3f}"


def render_markdown(summary: dict, alpha: float) -> str:
    """shift.md: the shift scenarios at every audit size, the IID cost of the guards and
    held-out pollution."""
    audits = [a for a in AUDITS if any(a in s["tests"] for s in summary["scenarios"])]
    lines = ["# Held-out shift suite", "", summary["header"], "",
             "## Shifts: passages that neither model saw, differing in one property", "",
             f"Every \"trained on\" here is false. Monte Carlo over random draws of n passages per side from "
             f"the two pools (n = the audit size, or the smaller pool: *all*), α = {alpha:g}. Per audit: "
             f"*before*: \"trained on\" as the audit said it before issue 34 (the model's test rejects and the "
             f"blind check, texts only, does not fire); *now*: also the placebo check (the same test on the "
             f"reference model's own features, all n pairs) does not fire, and without a reference the "
             f"audit has at least {UNGUARDED_MIN_PAIRS} pairs. **Bold**: significantly above α "
             f"(one-sided binomial p < 0.05). Firing rates of the blind check and of the placebo checks "
             f"(gray, black) are beside them.", "",
             "| shift | suspect | held-out | n | blind fires | placebo fires (gray/black) | "
             + " | ".join(f"{NAMES[a]}: before | now" for a in audits) + " |",
             "|---" * (6 + 2 * len(audits)) + "|"]
    for s in summary["scenarios"]:
        t, p = s["tests"], s["placebo"]
        placebo = "/".join(f"{p[k]['rate']:.3f}" if k in p else "—" for k in ("placebo_gray", "placebo_black"))
        cells = [f"{_short(t[a]['blind_only'])} | {_short(t[a]['guarded'])}" if a in t else "— | —" for a in audits]
        lines.append(f"| {s['kind']} | {s['suspect']} | {s['heldout']} | {s['pairs']} | {s['blind']['rate']:.3f} "
                     f"| {placebo} | " + " | ".join(cells) + " |")
    lines += ["", "## IID splits: what the guards cost", "",
              "Members vs held-out (H1: rejections are right) and non-members vs held-out (H0), at each audit "
              "size. *now*: \"trained on\" with both guards; *lost to the guards*: share of the model's "
              "rejections that the guards turn into \"inconclusive\". Pairs: censored mean pairs to decision "
              "(a non-rejection counts as all pairs).", "",
              "| suspect | n | trials | blind fires | placebo fires (gray/black) | audit | model rejects | before "
              "| now | lost to the guards | pairs to decision |", "|---" * 11 + "|"]
    for r in summary["iid"]:
        p = r["placebo"]
        placebo = "/".join(f"{p[k]['rate']:.3f}" if k in p else "—" for k in ("placebo_gray", "placebo_black"))
        for name, t in r["tests"].items():
            lost = "—" if r["h0"] else f"{t['lost_to_guard']:.3f}"
            lines.append(f"| {r['suspect']} | {r['pairs']} | {r['trials']} | {_cell(r['blind'])} | {placebo} "
                         f"| {NAMES[name]} | {_cell(t['model'])} | {_cell(t['blind_only'])} | {_cell(t['guarded'])} "
                         f"| {lost} | {t['censored_pairs']:.1f} |")
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
