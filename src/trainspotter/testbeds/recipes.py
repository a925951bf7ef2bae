"""A testbed's recipe (``TestbedConfig``: sizes, training and twins settings; its fingerprint keys
the built testbed) and the built-in ones (``PRESETS``, from the light registry
``trainspotter.presets.TESTBEDS``). ``testbeds.build`` builds them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from trainspotter.presets import TESTBEDS

__all__ = ["PRESETS", "TestbedConfig"]


class TestbedConfig(BaseModel):
    """Sizes and hyperparameters of a testbed; its fingerprint keys the cache."""

    name: str = "tiny"
    base: Literal["scratch", "smollm2"] = "scratch"  # train a small LM, or start from SmolLM2
    # finetune: target = reference fine-tuned on the members alone (memorised);
    # pretrain: target and reference trained from scratch on a corpus with / without the
    # members mixed in once (scratch base only; the weak-signal regime)
    mode: Literal["finetune", "pretrain"] = "finetune"
    seed: int = 0
    chunk_tokens: int = 64  # every passage is cut to this many tokens
    n_per_split: int = 500  # member / non-member / held-out passages each
    vocab_size: int = 2048
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    batch_size: int = 32
    reference_steps: int = 600  # pre-training steps on the disjoint text (finetune mode)
    reference_lr: float = 3e-3  # peak LR of pre-training (both models in pretrain mode)
    pretrain_epochs: int = Field(1, ge=1)  # pretrain mode: passes over corpus (+ members)
    # pretrain mode: copies of every member block per epoch, as the Pile repeats its subsets
    # 1-3 times (Gao et al. 2020, Table 1); left out of the dump (and the fingerprint) at 1,
    # so the testbeds built before it existed stay valid
    member_repeats: int = Field(1, ge=1, exclude_if=lambda k: k == 1)
    corpus_passages: int | None = None  # pretrain mode: cap on corpus passages (None: all left)
    # twins (issue 35): every split passage is rewritten k times by the keyed lexical rewriter
    # (trainspotter.twins; keys and draw from ``seed``, for a reproducible testbed), the split
    # files hold the public versions, members are trained on theirs, and twins-SPLIT/ holds each
    # split's twins folder; 0: no twins (left out of the dump and the fingerprint)
    twins: int = Field(0, ge=0, exclude_if=lambda k: k == 0)
    # the twins' rewriter: KeyedLexicalRewriter's settings (``describe()``, its version included)
    # and how the keys are drawn; filled in when ``twins`` > 0, so the fingerprint changes with the
    # rewriter (a testbed made by another rewriter is rebuilt, never reused); None without twins
    # (left out of the dump and the fingerprint, which stay as they were)
    twins_rewriter: dict | None = Field(None, exclude_if=lambda r: r is None)
    # a keyed release (issue 53): the members are one release written under one key (the lexical
    # rewriter, or "smollm2": the committed SmolLM2 paraphrases under one of their watermark keys;
    # keys from the seed and TEST_BEACON), seen once in pre-training; release/ holds its folder.
    # ``keyed_members``: release only the first N of the member split (the dilution series).
    # Left out of the dump and the fingerprint when unset.
    keyed: Literal["lexical", "smollm2"] | None = Field(None, exclude_if=lambda k: k is None)
    keyed_members: int | None = Field(None, ge=1, exclude_if=lambda k: k is None)
    target_epochs: int = 3  # fine-tuning epochs over the members
    target_lr: float = 5e-4
    target_batch_size: int = 16
    # pretrained bases only:
    validation: int = Field(0, ge=0)  # passages for choosing the best epoch (EZ-MIA App. A)
    lora: bool = False  # LoRA fine-tuning instead of full (EZ-MIA Sec. 5.3)
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05


    @model_validator(mode="after")
    def _rewriter(self) -> TestbedConfig:
        if self.twins and self.twins_rewriter is None:
            from trainspotter.rewriters.lexical import KeyedLexicalRewriter

            # keys per split: the non-members' twins are another dataset's, as in an audit
            self.twins_rewriter = KeyedLexicalRewriter().describe() | {"keys": "per split"}
        return self


# The recipes, one per entry of the testbed registry (trainspotter.presets.TESTBEDS: the
# description and recipe of each, kept light for --help).
PRESETS = {name: TestbedConfig(name=name, **testbed.recipe) for name, testbed in TESTBEDS.items()}
