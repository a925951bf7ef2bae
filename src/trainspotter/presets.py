"""Named settings of the sequential test (TestConfig field overrides) for an audit, and the
built-in testbeds' one-line descriptions, each with the one check of a name against it.

Kept apart from trainspotter.audit and trainspotter.evaluation.testbed (which import torch)
so the CLI can name them in ``--help`` cheaply. Explicit strategy/payoff/lambda_max win.
"""

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


TESTBEDS = {  # testbed name -> what it models (its recipe: trainspotter.evaluation.testbed.PRESETS)
    "tiny": "small LM pre-trained on disjoint Wikipedia leads, then fine-tuned on 500 member "
            "passages (members memorised; strong signal)",
    "mini": "seconds-scale version of tiny, for tests",
    "smollm2": "SmolLM2-135M fully fine-tuned on 200 members for 3 epochs (EZ-MIA recipe; "
               "strong signal)",
    "smollm2-lora": "SmolLM2-135M with rank-16 LoRA fine-tuned on 200 members (EZ-MIA Sec. 5.3)",
    "tiny-pretrain": "small LM trained from scratch on a Wikipedia corpus with 1000 members "
                     "mixed in once, reference without them (pre-training contamination; "
                     "weak signal, DI needs hundreds of pairs); --references K adds K OUT and "
                     "K IN reference models (testbed:tiny-pretrain/out-N, /in-N)",
    "tiny-pretrain-2k": "tiny-pretrain's recipe with 2000 members, non-members and held-out "
                        "passages each (BADI's scale for black-box audits; --references K as well)",
    "tiny-pretrain-2k-x2": "tiny-pretrain-2k with every member block seen twice (as the Pile "
                           "repeats most of its subsets)",
    "tiny-pretrain-2k-x4": "tiny-pretrain-2k with every member block seen 4 times",
    "tiny-pretrain-twins": "tiny-pretrain with twins (k = 2) of every passage: members' public "
                           "versions seen once; twins folders in twins-member/, twins-nonmember/ "
                           "(audit --twins DIR)",
    "mini-pretrain": "seconds-scale version of tiny-pretrain, for tests",
    "mini-pretrain-twins": "seconds-scale version of tiny-pretrain-twins, for tests",
}
