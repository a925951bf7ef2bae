"""How to read a verdict: one paragraph on what it rests on and the next step that can change it
(``explain``), how the fixed-n DI p-value reads beside the e-value (``explain_baseline``), and the
captions of the audit table, the report and the several-sets table."""

from __future__ import annotations

from pydantic import BaseModel

from trainspotter.auditing.verdict import PlaceboResult
from trainspotter.stats.blind import BlindResult
from trainspotter.twins.draw import DrawProof

__all__ = ["BASELINE_CAPTION", "BLACK_BOX_CAVEAT", "Context", "EBH_CAPTION", "KEEP_THE_RECORD",
           "TEST_ALONE_CAPTION", "explain", "explain_baseline"]


# A black-box "no evidence" is weak evidence of absence (docs/guide/black-box.md).
BLACK_BOX_CAVEAT = (
    " With greedy tokens only (black-box) this says little: a model changes its greedy token only "
    "where the true token was already close to the top, and text seen once in pre-training moved "
    "log-probabilities mostly elsewhere (measured on tiny-pretrain-2k: no black-box test decided "
    "within 2000 pairs where gray-box access did; text seen twice was found). Log-probabilities "
    "(--access gray), several reference models and more pairs are what help.")


# Twins (trainspotter.twins): why the sets are exchangeable, and what a guard firing on them means.
TWINS_BASIS = (" Each pair is one passage's public version against a private twin, and which version was "
               "public was drawn at random per passage, so under H0 (no version of these passages trained on) "
               "the two sides are exchangeable by design.")


def twins_basis(draw: DrawProof | None, vouched: bool = False) -> str:
    """What a twins verdict rests on: the draw where the folder shows it random (naming the
    commitment and the beacon round: the one fact no file shows), the auditor's word where it
    does not and they vouched for it (--assume-exchangeable); a record from before the draw was
    checked (None): the draw, as it then said (TWINS_BASIS)."""
    if draw is None:
        return TWINS_BASIS
    if draw.status != "shown":
        return (" Each pair is one passage's public version against a private twin, but nothing shows which "
                f"version is public was drawn at random ({draw.reason}); you vouched for it (--assume-exchangeable), "
                "so the verdict rests on your word, not on a draw." if vouched else "")
    pinned = (" the commitment is the one you pinned (--commitment)." if draw.pinned else
              " pin the commitment you saw published (--commitment) to rule out a folder rewritten since.")
    return (" Each pair is one passage's public version against a private twin, and which version is public "
            f"derives from the owner's committed secret and beacon round {draw.round}: the commitment opens and "
            "the draw re-derives, so under H0 (no version of these passages trained on) the two sides are "
            f"exchangeable by design. That rests on one fact no file shows: {draw.rests_on};" + pinned)


# Why a twins draw that is not shown random cannot carry "trained on" (benchmarks/bench_framing.py).
FRAMING = ("Public versions chosen by a model's preference (the target's own, or the target's over a "
           "reference's) make this test reject about a model that saw none of them, and the placebo check "
           "does not catch every such choice (benchmarks/results/framing.md).")


def _draw_guard(draw: DrawProof, alpha: float, e_model: str) -> str:
    if draw.status == "failed":
        return (f"Inconclusive: the twins folder's draw does not hold: {draw.reason}. The public versions may have "
                "been chosen rather than drawn, so the audit cannot rest on them, whatever the model shows. Check "
                "the folder against the commitment that was published (`trainspotter twins verify DIR "
                "--commitment HEX`).")
    return (f"Inconclusive: the model's test rejected (e-value{e_model} ≥ 1/α = {1 / alpha:g}), but nothing shows "
            f"that the public versions were drawn at random: {draw.reason}. {FRAMING} What to do: release twins "
            "with a beacon (`twins make --beacon-round N`, publish the commitment, then `twins release --beacon`) "
            "and audit those; if you know this draw was random, say so with --assume-exchangeable and the verdict "
            "rests on your word.")
TWINS_BROKEN = ("On twins this should not happen: the public versions were drawn at random, so the sets are "
                "exchangeable unless the twins were made or released wrongly: the public versions chosen by "
                "anything but the draw (their quality, a model's score), files edited after `twins make`, "
                "private versions published or mixed into the public set, or a rewriter whose variant indices "
                "differ systematically while the draw was not uniform. Check the folder and its commitment "
                "(`trainspotter twins verify DIR`) and how the public set was released.")
TWINS_LEAK = (" On twins, \"no evidence\" is also what a model trained on both versions of each passage gives "
              "(private versions that leaked, or were released too): it learned no difference between them, so "
              "the pairs show none. Keep private.jsonl and keys.json secret.")


# After "trained on": the evidence a copyright holder keeps and shows (trainspotter.record).
KEEP_THE_RECORD = (
    " Next: keep this audit's sealed record (record.json in its MLflow run; --record FILE writes a copy, "
    "--sign KEY.pem signs it with your Ed25519 key) and check it with `trainspotter verify FILE`: anyone "
    "can run that offline, without the model, and it recomputes the verdict from the record; "
    "`verify --requery N` also asks the model again whether it has changed.")


class Context(BaseModel):
    """What the user did, as far as the explanation's advice depends on it: pairs used of those
    available, pairs this run (0 for a recurring audit with nothing left to query), reference
    models given, whether the model was queried after the blind check fired (--shift-check
    continue), whether the full feature set was used. None: not known (advice as if not done)."""

    e_value: float | None = None  # the model's e-value (None: the model was not queried)
    pairs_used: int | None = None
    pairs_available: int | None = None
    pairs_this_run: int | None = None
    pairs_beyond: int = 0  # pairs the files hold beyond pairs_available (left out by --max-pairs)
    continued: bool = False  # a recurring audit continued from its ledger
    references: int | None = None
    full_features: bool | None = None
    twin_features: bool | None = None  # a twins audit's changed-position features (--features twins)


# When the data is not yet released, exchangeability can be made rather than assumed (DESIGN.md).
TWINS = ("if the suspect data is not yet released, publish it as twins (several rewrites of each passage, "
         "one drawn at random and the draw kept verifiable), which makes the two sets exchangeable by design")
SAME_SOURCE = ("draw the held-out passages from the same source and period as the suspect ones, with the "
               "same topics, lengths and formatting (ideally a random part of the same collection that was "
               "never published)")
THEN = f"; then audit again. Or, {TWINS}."


def _nothing_left(c: Context) -> str:
    if not (c.continued and c.pairs_this_run == 0):
        return ""
    return (f"Nothing left to query: every available pair was bet on in earlier runs of this recurring audit "
            f"({c.pairs_used} pairs), so this run added none and its verdict is the stored evidence's"
            + (f" (e-value {c.e_value:.3g})" if c.e_value is not None else "")
            + "; add new passages to the suspect and held-out files to continue it. ")


def _more_evidence(c: Context, black_box: bool, twins: bool) -> str:
    """After "no evidence": the steps that can still change it, leaving out those already taken
    (on twins, the twins feature set rather than the full one: benchmarks/results/twins)."""
    steps = []
    if c.pairs_used is None or c.pairs_available is None:
        steps.append("more pairs")
    elif c.pairs_used < c.pairs_available + c.pairs_beyond:
        steps.append(f"the {c.pairs_available + c.pairs_beyond - c.pairs_used} pairs not yet used (a larger "
                     f"--max-pairs or query budget)")
    if not c.references:
        steps.append("a reference model (--reference)")
    elif c.references == 1:
        steps.append("a second reference model (two or more add the *_refs_* features)")
    if twins and not c.twin_features:
        steps.append("the twins feature set (--features twins: the log-probs where each passage differs from "
                     "its twin)")
    elif not twins and not c.full_features:
        steps.append("the full feature set (--features full)")
    if black_box:
        steps.append("log-probabilities (--access gray)")
    used_all = (c.pairs_used is not None and c.pairs_available is not None and not c.pairs_beyond
                and c.pairs_used >= c.pairs_available)
    text = ""
    if used_all:
        text += (f" All {c.pairs_available} available pairs were used: only more suspect and held-out "
                 f"passages (then --name NAME --ledger continues this e-process) add evidence")
        text += (", as may " + _join(steps) + "." if steps else ".")
    elif steps:
        first = _join(steps)
        text += f" {first[0].upper()}{first[1:]} may still find it; the e-process can be continued " \
                "(--name NAME --ledger)."
    return text


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def explain(verdict: str, blind: BlindResult, alpha: float, black_box: bool = False, guard: str | None = None,
            placebo: PlaceboResult | None = None, unguarded_min_pairs: int = 0, twins: bool = False,
            context: Context | None = None, draw: DrawProof | None = None, vouched: bool = False) -> str:
    """One paragraph: what the verdict rests on and the next step that can change it, computed
    from what the user did (``context``: pairs left or not, references given, the model queried
    after the blind check fired, a recurring audit with nothing left to query);
    ``black_box``: every feature came from greedy tokens (how little "no evidence" says then);
    ``guard``: which guard made it inconclusive (``decide``); ``twins``: the pairs are twins
    (``trainspotter.twins``): exchangeable by the draw (``draw``: what the folder shows of it;
    ``vouched``: --assume-exchangeable), and a guard that fires says the twins were made or
    released wrongly."""
    placebo = placebo or PlaceboResult(ran=False)
    c = context or Context()
    e_model = f" ({c.e_value:.3g} after {c.pairs_used} pairs)" if c.e_value is not None else ""
    if twins and guard == "draw" and draw is not None:
        return _draw_guard(draw, alpha, e_model)
    if twins and verdict == "inconclusive":
        return _twins_inconclusive(blind, guard, placebo)
    if verdict == "trained on" and twins and not placebo.ran:
        return (f"The model's e-value reached 1/α = {1 / alpha:g}: evidence that the model was trained on the "
                f"public versions of these passages." + twins_basis(draw, vouched) + f" The blind check, which "
                f"sees only the texts, could not tell the versions apart (blind e-value {blind.e_value:.3g} after "
                f"{blind.pairs_used} pairs)." + KEEP_THE_RECORD)
    if verdict == "trained on":
        text = _trained_on(blind, alpha, placebo, unguarded_min_pairs, twins_basis(draw, vouched) if twins else "",
                           c, e_model)
    elif verdict == "no evidence":
        text = (f"The model's e-value{e_model} stayed below 1/α = {1 / alpha:g}: no evidence (yet) that "
                f"the suspect set was trained on." + _more_evidence(c, black_box, twins)
                + (BLACK_BOX_CAVEAT if black_box else "") + (TWINS_LEAK if twins else ""))
    elif guard == "placebo":
        text = _placebo_fired(blind, alpha, placebo, e_model)
    elif guard == "small":
        text = _too_small(blind, alpha, unguarded_min_pairs, c, e_model)
    else:
        text = _shifted(blind, alpha, c)
    return _nothing_left(c) + text


def _twins_inconclusive(blind: BlindResult, guard: str | None, placebo: PlaceboResult) -> str:
    what = (f"the same test on a model that never trained on them ({placebo.model}) tells the public "
            f"versions from the private ones too (placebo e-value {placebo.e_value:.3g})" if guard == "placebo"
            else f"a check that sees only the texts tells the public versions from the private ones "
                 f"(blind e-value {blind.e_value:.3g} ≥ 1/α = {1 / blind.alpha:g} after {blind.pairs_used} "
                 f"pairs; {'; '.join(blind.differences) or 'no single statistic stands out'})")
    return f"Inconclusive: {what}. {TWINS_BROKEN}"


def _trained_on(blind: BlindResult, alpha: float, placebo: PlaceboResult, unguarded_min_pairs: int, basis: str,
                c: Context, e_model: str) -> str:
    if placebo.ran:
        checked = (f" A model that never trained on either set ({placebo.model}, in the target's place) could "
                   f"not tell them apart either (placebo e-value {placebo.e_value:.3g} after "
                   f"{placebo.pairs_used} pairs), so the difference is the target's own.")
    else:
        checked = (" No reference model was given, so only the texts were checked" if not c.references else
                   " The placebo check was turned off (--placebo none), so only the texts were checked")
        checked += ((" and you vouched that the held-out passages are a random part of the suspect set's "
                     "collection (--assume-exchangeable)" if unguarded_min_pairs == 0 else "")
                    + ": a difference that any language model would see (easier text) and the words do not "
                    "show is not ruled out; " + ("--reference makes that check." if not c.references else
                                                 "the placebo check (without --placebo none) makes it."))
    return (f"The model's e-value{e_model} reached 1/α = {1 / alpha:g}: evidence that the suspect set was "
            f"used to train the model. The blind check, which sees only the texts, could not tell "
            f"the sets apart (blind e-value {blind.e_value:.3g} after {blind.pairs_used} pairs), so "
            f"the evidence is not about how the sets were drawn." + basis + checked + KEEP_THE_RECORD)


def _placebo_fired(blind: BlindResult, alpha: float, placebo: PlaceboResult, e_model: str) -> str:
    return (f"Inconclusive: the model's test rejected (e-value{e_model} ≥ 1/α = {1 / alpha:g}), but so does the "
            f"same test on a model that never trained on the suspect set ({placebo.model} in the target's place: "
            f"placebo e-value {placebo.e_value:.3g} after {placebo.pairs_used} of {placebo.pairs_available} "
            f"pairs). The suspect passages differ from the held-out ones in a way any language model sees "
            f"(most often: they are easier text), so the target's separation is not evidence of training, "
            f"although the words alone did not show it (blind e-value {blind.e_value:.3g}). What to do: "
            f"{SAME_SOURCE}{THEN}")


def _too_small(blind: BlindResult, alpha: float, unguarded_min_pairs: int, c: Context, e_model: str) -> str:
    check = ("give --reference (a model trained on similar data but not on the suspect set: the audit then "
             "checks that it does not tell the sets apart too)" if not c.references else
             "run the placebo check with your reference model (leave out --placebo none)")
    return (f"Inconclusive: the model's test rejected (e-value{e_model} ≥ 1/α = {1 / alpha:g}) on "
            f"{blind.pairs_available} available pairs, too few to rule out a shift between the sets: with "
            f"so few passages a language model sees that one set is easier text long before a check of the "
            f"words can, and no placebo model checked it. What to do: {check}, or audit at least "
            f"{unguarded_min_pairs} pairs; if the held-out passages are a random part of the suspect set's own "
            f"collection, say so with --assume-exchangeable.")


def _shifted(blind: BlindResult, alpha: float, c: Context) -> str:
    what = "; ".join(blind.differences) or "no single statistic stands out"
    model = (f" The model was queried anyway (--shift-check continue): its e-value was {c.e_value:.3g} after "
             f"{c.pairs_used} pairs ({'≥' if c.e_value >= 1 / alpha else '<'} 1/α = {1 / alpha:g}), which "
             f"cannot be read as evidence either way while the sets differ."
             if c.e_value is not None else
             " The model was not queried (--shift-check stop; continue records its e-value anyway).")
    return (f"Inconclusive: the held-out set differs from the suspect set. A check that sees only the "
            f"texts tells them apart (blind e-value {blind.e_value:.3g} ≥ 1/α = {1 / blind.alpha:g} after "
            f"{blind.pairs_used} pairs), so they are not exchangeable and a model's test would find a "
            f"difference whether or not the model was trained on the suspect set.{model} What to do: "
            f"{SAME_SOURCE}{THEN} A reference model and --features calibrated do not make such "
            f"sets comparable. What differs: {what}.")


# What the two numbers use and which one decides: the audit table's caption, the report.
BASELINE_CAPTION = (
    "The decision rests on the e-value: reject H0 once it reaches 1/α (anytime-valid p = 1/max W), "
    "valid wherever the audit stopped. The fixed-n DI p-value (Maini et al., BADI App. A.8) is a "
    "comparison only: it trains a classifier on half of the same pairs and t-tests the other half, "
    "and holds only for a number of pairs fixed in advance, not one the e-process chose; with few "
    "pairs the two can disagree.")


def explain_baseline(model_reject: bool, e_value: float, alpha: float, baseline: float | None,
                     pairs: int) -> str:
    """How to read this audit's fixed-n DI p-value beside its e-value, and, where they
    disagree at α, why; the decision rests on the e-value either way."""
    threshold = f"1/α = {1 / alpha:g}"
    if baseline is None:
        return (f"The decision rests on the e-value ({e_value:.3g}, against {threshold}); the fixed-n DI "
                f"p-value needs at least 4 pairs and {pairs} were tested.")
    head = (f"The decision rests on the e-value ({e_value:.3g} {'≥' if model_reject else '<'} {threshold}). "
            f"The fixed-n DI p-value ({baseline:.3g}) is a comparison only: it fits a classifier on half of "
            f"these {pairs} pairs and t-tests the other half, while the e-process bet on every pair with a "
            f"scorer fitted on the pairs before it and chose when to stop.")
    if model_reject and baseline > alpha:
        return head + (" They disagree: the audit stopped as soon as the evidence sufficed, and on so few "
                       "pairs the half-split test has little power; its p-value above α is not evidence "
                       "against training, and the e-value's guarantee holds at this stopping time.")
    if not model_reject and baseline <= alpha:
        return head + (" They disagree: a fixed-n p-value is valid only for a sample size fixed before "
                       "looking at the data, which this one was not, so it is no evidence on its own; "
                       "continue the audit on more pairs (--name NAME --ledger) or fix n in advance.")
    return head + " Here they agree."


# `trainspotter test` on a features table: the model's test without the audit's guards.
TEST_ALONE_CAPTION = (
    "This is the model's test alone, on the table's features: none of the audit's guards ran (the blind "
    "check on the texts, the placebo check with a reference model, the minimum of pairs without one), so a "
    "rejection says that these features tell the sets apart, not that the suspect set was trained on. "
    "`trainspotter audit` runs the guards.")


# What e-BH controls and how it decides: the multi-set table's caption, the report.
EBH_CAPTION = (
    "Decision by e-BH (Wang & Ramdas 2022) at false discovery rate α: among the sets called "
    "trained on, the expected share of sets that were not is at most α, whatever the dependence "
    "between the sets (they share the held-out set). It rejects the k* sets with the largest "
    "e-values, k* the largest k whose k-th largest e-value reaches K/(α k); each set stops querying "
    "once its e-value reaches K/α, where it is rejected whatever the others show. A set whose blind "
    "check fired counts with e-value 0: inconclusive.")
