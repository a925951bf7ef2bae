"""Real drand rounds for the tests (imported by name: tests/ is on sys.path through its conftest.py),
each as drand publishes it, so the tool checks them as it checks a user's: ``STAND_IN`` is quicknet's
round 657413 (published 2023-09-15) read from its JSON, and ``STAND_IN_FILE`` that JSON on disk, what a
user passes to ``--beacon``. ``TEST_BEACON`` is a value anyone knew in advance, so a draw or key from
it is never taken as shown random; a round given as ``ROUND:HEX`` is unverified, so no verdict rests
on it either."""

import json
import tempfile
from pathlib import Path

from trainspotter.proofs.beacon import verify_round

QUICKNET_657413 = {
    "round": 657413, "randomness": "fc1873a13f3545aeade8401532ef5519920652eee6b0d2b19ca12643b87b3587",
    "signature": "b713718a38ae728dfd477991af2822e08d2f305e47718cef9f7848ce4050e7be41076862b98fad56e91a6b85b89cd97b"}
# the default (chained) network's round 3311596: it signs sha256(previous signature ‖ round)
DEFAULT_3311596 = {
    "round": 3311596, "randomness": "647c07b2abbf7ff2afb4d670214f565e5cd9f9c91bfdcecb59a21f3c78d73920",
    "signature": "a696b9409ababce45749c3a4ec369074453dd4a79967734e1390d969c8ad8d98897d217b9121e92c8ddebbddda8d92f900e3b"
                 "d6bf9deb166863b1a19390d743f82774001487594c5c09e581db7365f02b70a2c8cc41ce32446ef08e4890c4754",
    "previous_signature": "8ed588f2a7716fb1349e2d9803da5db0005e98a83783c353d4a08f183236a9ad91d70ddb01266f4b7c576983db464"
                          "b430e65680b9e0098552758afd6c1e6afcb77e3f62fe1b93d42d1cb63abbb2205512fe12fbf74ea9c5ac3b8f5c1e283"
                          "a1d8"}
STAND_IN = verify_round(QUICKNET_657413, "tests/beacons.py")
STAND_IN_FILE = str(Path(tempfile.mkdtemp(prefix="drand-")) / "round-657413.json")
Path(STAND_IN_FILE).write_text(json.dumps(QUICKNET_657413))
