"""A stand-in for a real beacon round in tests (imported by name: tests/ is on sys.path through its
conftest.py). ``TEST_BEACON`` is a value anyone knew in advance, so a draw or key from it is never
taken as shown random; a test of what a shown draw allows uses this value instead, which the tool
treats as any round it is given (it fetches nothing, so a round's value is the auditor's to check)."""

from trainspotter.proofs.beacon import Beacon

STAND_IN = Beacon(1, bytes.fromhex("ab" * 32), "stand-in for a drand round (tests)")
