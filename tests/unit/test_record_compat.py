"""A record sealed before the package moved by concept (issue 51) still verifies: every check but the
code's, which says the replay code differs. Made at commit 684c45b by a library audit of a 2-layer
Llama with random weights (tests/tiny_lm.py) as target and reference, 24 passages a side of words
drawn at random, gray-box lean features with the model's answers recorded, seed 1, batches of 8.

Its replays are bit-for-bit on a machine whose arithmetic is the sealer's (OpenBLAS's SkylakeX
kernels) and within 1e-9 elsewhere (OPENBLAS_CORETYPE=Haswell reproduces another); it keeps only
the sha256 of its end state, so where the replay is not bit-for-bit that state is not compared."""

import json
from pathlib import Path

from trainspotter.record.verify import verify_records

RECORD = Path(__file__).resolve().parents[1] / "data" / "record-before-issue-51.json"


def test_a_record_sealed_before_the_move_verifies_with_the_moved_code():
    record = json.loads(RECORD.read_text())
    assert record["code"]["git_commit"].startswith("684c45b")
    checks = {c.name: c for c in verify_records([(str(RECORD), record)]).checks}
    assert all(c.ok for c in checks.values()), [c.detail for c in checks.values() if not c.ok]
    assert "24 pairs are the ones seed 1 draws" in checks["pair order"].detail
    assert "matches bit-for-bit" in checks["features"].detail  # recomputed from the recorded answers
    assert "the replay code here is different" in checks["code"].detail
    exact = "bit-for-bit" in checks["model test"].detail
    assert exact or "within 1e-09" in checks["model test"].detail
    assert checks["end state"].done is exact, checks["end state"].detail  # compared only where it can be


def test_an_edited_pre_move_record_still_fails_naming_the_change():
    record = json.loads(RECORD.read_text())
    record["batches"][1]["pairs"][0]["suspect"]["features"]["gray_ppl"] += 1e-3
    failed = [c for c in verify_records([(str(RECORD), record)]).checks if not c.ok]
    assert failed and failed[0].name == "features", [c.detail for c in failed]
