"""Named settings of the sequential test (TestConfig field overrides) for an audit.

Kept apart from trainspotter.audit (which imports torch through the feature config) so
the CLI can name them in ``--help`` cheaply. Explicit strategy/payoff/lambda_max win.
"""

PRESETS: dict[str, dict] = {
    "badi": {"strategy": "ons", "payoff": "mmd-paper", "lambda_max": 0.8},  # the paper (BADI Sec. 4, App. C)
    "default": {"strategy": "mixture", "payoff": "diff", "lambda_max": 0.8},
}
DEFAULT_PRESET = "default"  # the one place to change the default (after a benchmark)


def describe(name: str) -> str:
    """'badi (ons strategy, mmd payoff, λ_max 0.8)' for help texts."""
    p = PRESETS[name]
    return f"{name} ({p['strategy']} strategy, {p['payoff']} payoff, λ_max {p['lambda_max']:g})"
