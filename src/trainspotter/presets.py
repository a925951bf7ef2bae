"""Named settings of the sequential test (TestConfig field overrides) for an audit, and the
built-in testbeds (the one registry: each entry's one-line description and its recipe), each
with the one check of a name against it.

Kept apart from trainspotter.audit and trainspotter.testbeds.build (which import torch)
so the CLI can name them in ``--help`` cheaply: a testbed's recipe here is plain data (the
``TestbedConfig`` fields it sets), made into a ``TestbedConfig`` by ``testbeds.build.PRESETS``.
Explicit strategy/payoff/lambda_max win.
"""

from typing import NamedTuple

from trainspotter.errors import InputError

TEST_PRESETS: dict[str, dict] = {  # named test settings (--preset); testbeds are TESTBEDS below
    "badi": {"strategy": "ons", "payoff": "mmd", "lambda_max": 0.8},  # the paper (BADI Sec. 4, App. C)
    "default": {"strategy": "mixture", "payoff": "diff", "lambda_max": 0.8},
    # a twins audit's default (issue 35): the default's bet in the features' known directions
    # (trainspotter.stats.fixed_scorer; benchmarks/results/twins/twins.md)
    "twins": {"strategy": "mixture", "payoff": "diff", "lambda_max": 0.8, "scorer": "fixed"},
}
DEFAULT_PRESET = "default"  # the one place to change the default (after a benchmark)
TWINS_PRESET = "twins"  # the default of an audit of twins (``AuditConfig.twins``)
# Without a placebo model, the fewest pairs available to the blind check for "trained on"
# (trainspotter.audit; benchmarks/results/shift.md: below it, shifted audits without a
# reference said "trained on" in more than α of trials).
UNGUARDED_MIN_PAIRS = 200


def describe(name: str) -> str:
    """'badi (ons strategy, mmd payoff, λ_max 0.8)' for help texts."""
    p = TEST_PRESETS[name]
    scorer = f", {p['scorer']} scorer" if "scorer" in p else ""
    return f"{name} ({p['strategy']} strategy, {p['payoff']} payoff, λ_max {p['lambda_max']:g}{scorer})"


def check_test_preset(name: str) -> str:
    """``name`` if it names test settings, else ValueError naming the choices (the one check:
    AuditConfig, ShiftConfig and the CLI's --preset go through it)."""
    if name not in TEST_PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(TEST_PRESETS)}")
    return name


def check_testbed(name: str) -> str:
    """``name`` if it names a built-in testbed, else InputError naming the choices (the one
    check of a testbed name: configs' validators, the testbed and demo verbs)."""
    if name not in TESTBEDS:
        raise InputError(f"unknown testbed {name!r}; choose one of {', '.join(TESTBEDS)}")
    return name


class Testbed(NamedTuple):
    """One built-in testbed: what it models (``testbed build --help``) and its recipe (the
    ``testbeds.build.TestbedConfig`` fields it sets besides its name; the fingerprint of
    the made config keys the built files)."""

    description: str
    recipe: dict


_SMOLLM2 = {"base": "smollm2", "chunk_tokens": 64, "n_per_split": 200, "validation": 50, "target_epochs": 3,
            "target_lr": 1e-4, "target_batch_size": 8}
_PRETRAIN = {"mode": "pretrain", "n_per_split": 1000, "pretrain_epochs": 1}
_PRETRAIN_2K = _PRETRAIN | {"n_per_split": 2000}
_MINI_PRETRAIN = {"mode": "pretrain", "n_per_split": 40, "vocab_size": 512, "hidden_size": 32,
                  "corpus_passages": 400, "pretrain_epochs": 2}

TESTBEDS: dict[str, Testbed] = {
    "tiny": Testbed("small LM pre-trained on disjoint Wikipedia leads, then fine-tuned on 500 member "
                    "passages (members memorised; strong signal)", {}),
    # A seconds-scale variant for tests; same recipe, smaller everything.
    "mini": Testbed("seconds-scale version of tiny, for tests",
                    {"n_per_split": 80, "vocab_size": 1024, "hidden_size": 64, "reference_steps": 120,
                     "target_epochs": 12, "target_lr": 2e-3}),
    # SmolLM2-135M fully fine-tuned on 200 members (EZ-MIA's recipe, scaled to ~1 h on 2 CPU
    # cores: one 8x64-token AdamW step takes ~8 s there; minutes on a GPU).
    "smollm2": Testbed("SmolLM2-135M fully fine-tuned on 200 members for 3 epochs (EZ-MIA recipe; "
                       "strong signal)", _SMOLLM2),
    "smollm2-lora": Testbed("SmolLM2-135M with rank-16 LoRA fine-tuned on 200 members (EZ-MIA Sec. 5.3)",
                            _SMOLLM2 | {"lora": True}),
    # Pre-training contamination: 1000 member passages (2008 blocks, 13% of the training tokens;
    # the corpus is the other 7033 leads, 13268 blocks) seen once, in one epoch from scratch.
    # Recipes tried (per-sample AUROC, 1000 members vs 1000 non-members, first 64-token chunk;
    # RefL = target/reference loss ratio, Min-K%++ at k = 20%; ~6 CPU-min each, 1 thread):
    #   hidden 128, 1 epoch (chosen): RefL 0.618, Min-K%++ 0.559, LOSS 0.513 (final loss 4.93)
    #   hidden 64, 2 epochs:          RefL 0.730, Min-K%++ 0.591, LOSS 0.545 (final loss 4.23)
    # The chosen one keeps "seen once" literal and sits in the 0.5-0.65 range reported for
    # pre-training data, where dataset inference needs hundreds of pairs.
    "tiny-pretrain": Testbed("small LM trained from scratch on a Wikipedia corpus with 1000 members "
                             "mixed in once, reference without them (pre-training contamination; "
                             "weak signal, DI needs hundreds of pairs); --references K adds K OUT and "
                             "K IN reference models (testbed:tiny-pretrain/out-N, /in-N)", _PRETRAIN),
    # BADI's scale for black-box audits (2000 pairs per split; issue 20): the same recipe with
    # 2000 whole passages per split. The corpus is what is left (4033 leads), so members are a
    # larger share of the training tokens than in tiny-pretrain (the manifest records it); still
    # seen once, in one epoch from scratch.
    "tiny-pretrain-2k": Testbed("tiny-pretrain's recipe with 2000 members, non-members and held-out "
                                "passages each (BADI's scale for black-box audits; --references K as well)",
                                _PRETRAIN_2K),
    # The same with every member block repeated k times per epoch (the Pile repeats its subsets
    # 1-3 times): how a black-box audit's power grows with exposures (benchmarks/bench_exposures.py).
    "tiny-pretrain-2k-x2": Testbed("tiny-pretrain-2k with every member block seen twice (as the Pile "
                                   "repeats most of its subsets)", _PRETRAIN_2K | {"member_repeats": 2}),
    "tiny-pretrain-2k-x4": Testbed("tiny-pretrain-2k with every member block seen 4 times",
                                   _PRETRAIN_2K | {"member_repeats": 4}),
    # Twins of every passage (k = 2), the members' public versions seen once in pre-training: the
    # twins audit's ground truth (issue 35); the same corpus and recipe as tiny-pretrain.
    "tiny-pretrain-twins": Testbed("tiny-pretrain with twins (k = 2) of every passage: members' public "
                                   "versions seen once; twins folders in twins-member/, twins-nonmember/ "
                                   "(audit --twins DIR)", _PRETRAIN | {"twins": 2}),
    # k = 4 variants per passage (issue 35): whether an audit gains by betting on the mean of the
    # public version's pairwise payoffs against all three private ones (benchmarks/bench_twins.py).
    "tiny-pretrain-twins-k4": Testbed("tiny-pretrain with k = 4 variants of every passage: members' "
                                      "public versions seen once; three private variants each (twins-member/, "
                                      "twins-nonmember/)", _PRETRAIN | {"twins": 4}),
    # Generative twins (issue 35): k = 4 paraphrases of every passage by SmolLM2-135M-Instruct, sentence
    # by sentence, each variant under its own transformers watermark, made on a GPU
    # (benchmarks/twins_paraphrases.py, paraphrase_device.py) and replayed from the table in the
    # repository; variants below MiniLM similarity 0.7 drop their passage. Same recipe as tiny-pretrain.
    "tiny-pretrain-twins-smollm2": Testbed(
        "tiny-pretrain with k = 4 generative twins of every passage (SmolLM2-135M-Instruct's watermarked "
        "paraphrases, from benchmarks/data/twins-smollm2/): members' public versions seen once",
        _PRETRAIN | {"twins": 4, "twins_rewriter": {
            "name": "table", "path": "benchmarks/data/twins-smollm2/paraphrases.jsonl.gz",
            "sha256": "ab65097f10bbe7825d64a94fa4dca6e6bcdfec6f8c1e847aa351ac5c846f2315", "keys": "per split",
            "made": {"model": "SmolLM2-135M-Instruct (packaged Q4_1 gguf, bf16)", "device": "one H100",
                     "unit": "sentence (first sentences to 180 words)", "script": "benchmarks/paraphrase_device.py",
                     "sampling": "temperature 0.7, top-p 0.95", "watermark": "lefthash, bias 2.0, green share 0.25"}}}),
    # The black-box twins testbed (issue 35): BADI's 2000 passages per split, the members' public
    # versions seen twice, the exposure at which the unpaired black audit first has power
    # (benchmarks/results/exposures: seen once it has none, seen twice 554 pairs on average).
    "tiny-pretrain-2k-twins-x2": Testbed("tiny-pretrain-2k with twins (k = 2) of every passage: members' "
                                         "public versions seen twice (the black-box twins testbed)",
                                         _PRETRAIN_2K | {"twins": 2, "member_repeats": 2}),
    # Keyed releases (issue 53): the 1000 members written under one secret key by the keyed lexical
    # rewriter (derived from a secret and TEST_BEACON), seen once: 13% of the training tokens; then
    # the dilution series with the first N members only (the same corpus and reference).
    "tiny-pretrain-keyed": Testbed("tiny-pretrain whose 1000 members are one keyed lexical release (one key for "
                                   "every passage), seen once (13% of the tokens); release/ holds its folder",
                                   _PRETRAIN | {"keyed": "lexical"}),
    **{f"tiny-pretrain-keyed-{share}": Testbed(f"tiny-pretrain-keyed with only {n} members released (~{share} of "
                                                "the training tokens)", _PRETRAIN | {"keyed": "lexical",
                                                                                    "keyed_members": n})
       for share, n in (("3pct", 204), ("1pct", 66), ("0.3pct", 20))},
    # The generative keyed release: every member's public version its SmolLM2 paraphrase under one
    # watermark key of the committed table (tiny-pretrain-twins-smollm2's; the beacon picks the key).
    "tiny-pretrain-keyed-smollm2": Testbed("tiny-pretrain whose members are one generative keyed release: "
                                           "SmolLM2-135M-Instruct's paraphrases under one watermark key "
                                           "(benchmarks/data/twins-smollm2/), seen once",
                                           _PRETRAIN | {"keyed": "smollm2"}),
    # A seconds-scale variant of the pre-training recipe for tests.
    "mini-pretrain": Testbed("seconds-scale version of tiny-pretrain, for tests", _MINI_PRETRAIN),
    "mini-pretrain-twins": Testbed("seconds-scale version of tiny-pretrain-twins, for tests",
                                   _MINI_PRETRAIN | {"twins": 2}),
    "mini-pretrain-keyed": Testbed("seconds-scale version of tiny-pretrain-keyed, for tests",
                                   _MINI_PRETRAIN | {"keyed": "lexical"}),
}
