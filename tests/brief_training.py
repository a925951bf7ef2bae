"""Builds that train briefly, for tests of what a build trains on (imported by name: tests/ is on
sys.path through its conftest.py)."""

import pytest


def brief_training(mp: pytest.MonkeyPatch, batches: int = 3) -> None:
    """Pre-training that visits only the first ``batches`` batches of its order (and at most that
    many sampled steps): for tests that check *what* a build trains on (the blocks and their order,
    recorded before the call) and what it records, not how well it learns. Only for builds in a
    test's own root: a testbed in the session's shared root must be the recipe's real one."""
    from trainspotter.testbeds import build as testbed

    real = testbed.train_causal_lm

    def brief(model, blocks, **kw):
        if kw.get("order") is not None:
            kw["order"] = kw["order"][: batches * kw["batch_size"]]
        elif not kw.get("epochs"):
            kw["steps"] = min(kw.get("steps", 0), batches)
        return real(model, blocks, **kw)

    mp.setattr(testbed, "train_causal_lm", brief)


def built_briefly(name: str, root):
    """The preset testbed ``name`` built under ``root`` (a test's own artifacts root) with
    :func:`brief_training`: for tests that read its rows and files, not its power."""
    from trainspotter.testbeds.build import PRESETS, build_testbed

    with pytest.MonkeyPatch.context() as mp:
        brief_training(mp)
        return build_testbed(PRESETS[name], root=root)
