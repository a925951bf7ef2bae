"""Changed-position features of a twins audit (features.twin_positions): the mask and the
features by hand, the catalogue and directions, the plumbing from Twins.sides, and the cache
key that must tell two twins apart."""

from __future__ import annotations

import math
import random

import numpy as np

from trainspotter.features.catalog import catalog
from trainspotter.features.extract import feature_columns
from trainspotter.features.features import FEATURE_SETS
from trainspotter.features.orientation import direction
from trainspotter.features.twin_positions import changed_mask, twin_row
from trainspotter.tasks.extract import chunk_cache_key
from trainspotter.twins.make import make_twins
from trainspotter.rewriters.base import Rewriter


def test_twin_mask_marks_only_the_changed_token():
    a, b, c, d, x = 11, 12, 13, 14, 99
    assert changed_mask([a, b, c, d], [a, x, c, d]).tolist() == [False, True, False, False]
    assert changed_mask([a, x, c, d], [a, b, c, d]).tolist() == [False, True, False, False]
    assert changed_mask([a, b, c], [a, b, c]).tolist() == [False, False, False]
    # a word rewritten into two tokens: both of them are the twin's changed tokens
    assert changed_mask([a, x, x, d], [a, b, d]).tolist() == [False, True, True, False]


def test_twin_features_by_hand():
    lp, ref = np.array([-1.0, -2.0, -3.0, -4.0]), np.array([-1.5, -2.5, -3.5, -6.0])
    row = twin_row([1, 2, 3, 4], lp, [1, 9, 3, 8], [1, 2, 3, 4], ref)  # changed: positions 1 and 3
    assert row["gray_twin_lp"] == (-2.0 + -4.0) / 2
    assert row["gray_twin_ref_diff"] == (0.5 + 2.0) / 2
    row = twin_row([1, 2, 3, 4], lp, [1, 9, 3, 4], [1, 2, 3, 4], ref)  # tokens [a b c d] vs [a x c d]
    assert row == {"gray_twin_lp": -2.0, "gray_twin_ref_diff": 0.5}


def test_black_twin_features_by_hand():
    """Black: the same means of the estimated log-probs, and the greedy match rate at the changed tokens."""
    lp, ref = np.array([-1.0, -2.0, -3.0, -4.0]), np.array([-1.5, -2.5, -3.5, -6.0])
    argmax = [1, 2, 0, 0]  # greedy token right at positions 0 and 1 (1 is changed), wrong at 2 and 3 (3 is)
    row = twin_row([1, 2, 3, 4], lp, [1, 9, 3, 8], [1, 2, 3, 4], ref, access="black", argmax=argmax)
    assert row == {"black_twin_lp": -3.0, "black_twin_ref_diff": 1.25, "black_twin_match": 0.5}
    row = twin_row([1, 2, 3, 4], lp, [1, 2, 3, 8], access="black", argmax=argmax)  # only position 3 changed
    assert row == {"black_twin_lp": -4.0, "black_twin_match": 0.0}
    assert all(math.isnan(v) for v in twin_row([1], lp[:1], None, access="black").values())
    assert set(twin_row([1], lp[:1], None, access="black")) == {"black_twin_lp", "black_twin_ref_diff",
                                                                 "black_twin_match"}


def test_twin_features_edge_cases():
    lp, ref = np.array([-1.0, -3.0]), np.array([-2.0, -2.0])
    # the twin only adds a token: nothing of the passage's own changed, measured at all its tokens
    assert twin_row([1, 2], lp, [1, 7, 2], [1, 2], ref) == {"gray_twin_lp": -2.0, "gray_twin_ref_diff": 0.0}
    assert all(math.isnan(v) for v in twin_row([1, 2], lp, None).values())  # no twin
    row = twin_row([1, 2], lp, [1, 5], [1, 3, 2], ref)  # the reference tokenises differently
    assert row["gray_twin_lp"] == -3.0 and math.isnan(row["gray_twin_ref_diff"])
    assert twin_row([1, 2], lp, [1, 5]) == {"gray_twin_lp": -3.0}  # no reference


def test_twin_columns_are_catalogued_member_like_and_only_in_the_twins_set():
    assert direction("gray_twin_lp") == 1 and direction("gray_twin_ref_diff") == 1
    assert direction("gray_ref_diff") == -1  # the twin rule comes first, the RefL rule is unchanged
    names = [s.name for s in catalog(FEATURE_SETS["twins"], "gray")]
    assert {"gray_twin_lp", "gray_twin_ref_diff"} <= set(names)
    assert not any("twin" in s.name for s in catalog(FEATURE_SETS["lean"], "both"))
    assert "gray_twin_lp" in feature_columns(FEATURE_SETS["twins"], "gray", 0)
    assert "gray_twin_ref_diff" not in feature_columns(FEATURE_SETS["twins"], "gray", 0)  # needs a reference
    black = feature_columns(FEATURE_SETS["twins"], "black", 1)
    assert {"black_twin_lp", "black_twin_ref_diff", "black_twin_match"} <= set(black)
    assert not any(c.startswith("gray_") for c in black)
    assert all(direction(c) == 1 for c in ("black_twin_lp", "black_twin_ref_diff", "black_twin_match"))
    assert "black_twin_match" not in feature_columns(FEATURE_SETS["lean"], "black", 1)


def test_twin_sides_carry_each_others_text():
    class Tag(Rewriter):  # no WordNet: a variant is the text and its key's first byte
        def rewrite(self, text, key):
            return f"{text} {key[0]}"

    twins = make_twins([{"id": "p", "text": "a passage"}], rewriter=Tag(), keys=[bytes([1]) * 32, bytes([2]) * 32],
                       rng=random.Random(0))
    (public,), (private,) = twins.sides()
    assert public["twin"] == private["text"] and private["twin"] == public["text"]
    assert public["text"] != private["text"]


def _key(model, passages):
    return chunk_cache_key(None, {"model": f"hf:{model}", "reference": None, "access": "gray",
                                  "features": FEATURE_SETS["twins"], "passages": passages})


def test_twin_text_is_in_the_extract_cache_key(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights" * 100)
    _key = lambda passages: globals()["_key"](tmp_path, passages)  # noqa: E731
    plain = [{"id": "a", "text": "some text"}]
    one, other = [dict(plain[0], twin="some words")], [dict(plain[0], twin="other text")]
    assert len({_key(plain), _key(one), _key(other)}) == 3
    assert _key(one) == _key([dict(one[0], set="suspect")])  # the twin, not other fields
    assert _key(plain) == _key([dict(plain[0], twin=None)])
