"""One audit's settings (``AuditConfig``): which texts, which models, how to test and which guards
run; the shape of a feature extractor (``ExtractFn``) that the audit loop and the placebo check call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from trainspotter.backends.spec import References, Spec
from trainspotter.errors import FieldError
from trainspotter.features.features import FEATURE_SETS, FeatureConfig, check_references
from trainspotter.presets import (  # named TestConfig overrides
    DEFAULT_PRESET,
    TEST_PRESETS,
    TWINS_PRESET,
    UNGUARDED_MIN_PAIRS,
    check_test_preset,
)
from trainspotter.stats.sequential import TestConfig

__all__ = ["AuditConfig", "ExtractFn", "placebo_features"]

# extract_fn(passages, batch_no): one feature row per passage (the audit passes a batch's suspect
# passages, then its held-out ones)
ExtractFn = Callable[[list[dict], int], list[dict]]


def placebo_features(features: FeatureConfig, has_references: bool) -> FeatureConfig:
    """The feature set of the placebo audit: the audit's own; for a reference-relative set
    whose placebo has no reference of its own to be relative to, the lean set's single-model
    features of the same pass (what makes text easier for that model)."""
    if features.relative_only and not has_references:
        return features.model_copy(update={"relative_only": False, "metric_criteria": False})
    return features


class AuditConfig(BaseModel):
    """One audit: which texts, which models, how to test."""

    name: str = "audit"
    suspect: str
    heldout: str
    model: Spec  # a spec string, parsed once here (backends.spec)
    reference: References = ()  # K ≥ 0 reference models, each a spec string (the first: RefL, EZ)
    access: Literal["gray", "black", "both"] = "gray"  # black: greedy tokens only (label-only APIs)
    features: FeatureConfig = FEATURE_SETS["lean"]
    max_pairs: int | None = Field(None, ge=1)
    batch_pairs: int = Field(16, ge=1)  # pairs queried per batch; the test stops between pairs
    seed: int = 0
    ledger: bool = False  # continue the stored e-process of audit `name` (recurring audits)
    preset: str = DEFAULT_PRESET  # named test settings, see TEST_PRESETS
    test: TestConfig = Field(default_factory=TestConfig)
    # The blind check (trainspotter.stats.blind) runs on every available pair before any
    # query. When it fires the verdict is "inconclusive" whatever the model says, so
    # "stop" queries nothing; "continue" runs the model's test anyway, for the record;
    # "match" first pairs each suspect passage with a held-out passage of the same text-only
    # propensity (trainspotter.auditing.matching), drops the rest, and checks and tests only those pairs.
    shift_check: Literal["stop", "continue", "match"] = "stop"
    # what the blind check and matching's propensity read of a text (features.text.TEXT_FEATURES)
    text_features: Literal["ngrams", "ngrams+minilm"] = "ngrams"  # = features.text.DEFAULT_TEXT_FEATURES
    # The blind check's level (default: the test's α). An audit of several suspect sets
    # (trainspotter.loop.sets) stops each model test at K/α but keeps the guard at α.
    blind_alpha: float | None = Field(None, gt=0.0, lt=1.0)
    # The placebo check (trainspotter.auditing.placebo): the same test with a model that saw neither set
    # in the target's place; "trained on" only if it does not reject too. The model: ``placebo``,
    # else the first reference. Without one, small audits cannot rule out a shift that a
    # language model sees and the words do not: "trained on" then needs UNGUARDED_MIN_PAIRS
    # pairs for the blind check, unless the auditor vouches that the held-out set is a random
    # part of the suspect set's collection (``assume_exchangeable``; said in the explanation).
    placebo: Spec | None = None
    placebo_check: bool = True
    assume_exchangeable: bool = False
    # A twins folder (trainspotter.twins): each round is one passage's public version (suspect)
    # against its private twins (held-out): every one of them as sub-pairs of the round (``all``), or
    # one drawn with ``seed`` (``one``; trainspotter.twins.rounds). ``suspect`` and ``heldout`` then
    # name the folder's public.jsonl and private.jsonl. Exchangeable under H0 by the random draw of
    # the public versions, so no small-audit rule applies: "trained on" rests on the draw where the
    # folder shows it random (trainspotter.twins.draw), else on nothing but --assume-exchangeable.
    twins: str | None = None
    twins_private: Literal["all", "one"] = "all"
    # the commitment digest the auditor saw published (--commitment): a folder with another one fails
    twins_commitment: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="before")
    @classmethod
    def _twins_files(cls, data):
        """With ``twins``, ``suspect``/``heldout`` are the folder's files (given otherwise: an error)."""
        if isinstance(data, dict) and data.get("twins") is not None:
            from pathlib import Path

            files = {"suspect": str(Path(data["twins"]) / "public.jsonl"),
                     "heldout": str(Path(data["twins"]) / "private.jsonl")}
            for side, path in files.items():
                if data.get(side) not in (None, path):
                    raise FieldError("twins", "twins replaces suspect and heldout (the public and private versions "
                                              "of the folder's passages); give either twins or suspect and heldout")
            data = {**data, **files}
        return data

    @model_validator(mode="after")
    def _features_need(self) -> "AuditConfig":
        check_references(self.features, len(self.reference))
        if self.twins_commitment is not None and self.twins is None:
            raise FieldError("twins_commitment", "pins a twins folder's commitment: it needs twins (--twins DIR)")
        if self.features.twin_positions and self.twins is None:
            raise FieldError("features", "the twins feature set reads where a passage differs from its twin: it "
                                         "needs twins (--twins DIR)")
        return self

    @model_validator(mode="after")
    def _apply_preset(self) -> "AuditConfig":
        """Fill the test fields the caller did not set from the preset (idempotent: the
        filled fields count as set, so a dumped and reloaded config stays the same). An audit
        of twins without a preset named takes TWINS_PRESET."""
        if self.twins is not None and "preset" not in self.model_fields_set:
            self.preset = TWINS_PRESET
        try:
            check_test_preset(self.preset)
        except ValueError as e:
            raise FieldError("preset", str(e)) from None
        unset = {k: v for k, v in TEST_PRESETS[self.preset].items() if k not in self.test.model_fields_set}
        if unset:
            self.test = self.test.model_copy(update=unset)
        return self

    @property
    def placebo_config(self) -> "AuditConfig | None":
        """The same audit with the placebo model in the target's place (its references: the
        audit's others), or None without a placebo model or with the check off."""
        model = self.placebo or (self.reference[0] if self.reference else None)
        if not self.placebo_check or model is None:
            return None
        others = tuple(r for r in self.reference if r != model)
        return self.model_copy(update={"name": f"{self.name}-placebo", "model": model, "reference": others,
                                       "features": placebo_features(self.features, bool(others)),
                                       "ledger": False, "placebo": None, "placebo_check": False})

    @property
    def paired(self) -> bool:
        """Pairs keep the sides' rows together (``make_pairs``): two versions of one passage
        (twins), or the pairs that matching made."""
        return self.twins is not None or self.shift_check == "match"

    @property
    def every_private(self) -> bool:
        """A twins audit whose rounds hold every private variant (``twins_private`` "all")."""
        return self.twins is not None and self.twins_private == "all"

    @model_validator(mode="after")
    def _match_alone(self) -> "AuditConfig":
        if self.shift_check != "match":
            return self
        if self.twins is not None:
            raise FieldError("shift_check", "shift_check 'match' pairs two different sets; it does not apply "
                                            "to twins (already paired)")
        # matching sees only the words: what they hide, only the placebo check can catch (measured,
        # benchmarks/results/shift-matched: without it, easier text was "trained on" in 6 of 10 trials)
        if self.placebo_config is None or self.access != "gray":
            raise FieldError("shift_check", "shift_check 'match' needs a reference model and gray access: matching "
                             "sees only the words, and a shift they hide is caught only by the placebo check (on "
                             "the shift suite, matched audits without a reference said 'trained on' about easier "
                             "text in 6 of 10 trials, black-box ones about lead openings in 3 of 10)")
        return self

    @property
    def unguarded_min_pairs(self) -> int:
        """Pairs the blind check needs before "trained on" without a placebo model: none when the
        auditor vouches for the split or the split was made by a random draw (twins: where the draw
        is not shown random, the draw guard stands in the way instead, ``auditing.verdict.decide``)."""
        return 0 if self.assume_exchangeable or self.twins is not None else UNGUARDED_MIN_PAIRS

    @property
    def blind_test(self) -> TestConfig:
        """The blind check's betting settings: the test's, at ``blind_alpha`` when set."""
        return self.test if self.blind_alpha is None else self.test.model_copy(update={"alpha": self.blind_alpha})
