"""A beacon round is checked, not taken on the user's word (issue 63): real drand rounds verify
against the network keys the package ships, and every change an owner could make to one is refused."""

import hashlib
import json
from datetime import datetime, timezone

import pytest
from beacons import DEFAULT_3311596, QUICKNET_657413

from trainspotter.errors import InputError
from trainspotter.proofs.beacon import TEST_BEACON, Beacon, parse_beacon, verify_round
from trainspotter.proofs.drand import CHAINS, published_at


def test_a_real_quicknet_round_verifies_and_its_randomness_is_sha256_of_its_signature():
    beacon = verify_round(QUICKNET_657413, "r.json")
    assert beacon.randomness == hashlib.sha256(bytes.fromhex(QUICKNET_657413["signature"])).digest()
    assert beacon.randomness.hex() == QUICKNET_657413["randomness"] and beacon.chain == "quicknet"
    # published at genesis + (round - 1) * period: 1692803367 + 657412 * 3
    assert published_at(CHAINS["quicknet"], 657413) == 1694775603
    assert datetime.fromtimestamp(1694775603, timezone.utc).isoformat() == "2023-09-15T11:00:03+00:00"
    assert beacon.proof()[0] == "verified" and "2023-09-15 11:00:03 UTC" in beacon.proof()[1]


def test_a_real_round_of_the_chained_default_network_verifies():
    beacon = verify_round(DEFAULT_3311596, "r.json")
    assert (beacon.chain, beacon.randomness.hex()) == ("default", DEFAULT_3311596["randomness"])
    assert published_at(CHAINS["default"], 3311596) == 1595431050 + 3311595 * 30
    assert beacon.proof()[0] == "verified"


@pytest.mark.parametrize("change, says", [
    ({"round": 657414}, "round 657414 does not verify against drand quicknet's key"),  # a round moved
    ({"randomness": "00" * 32}, "its randomness is not sha256 of its signature"),  # a value made up
    ({"signature": DEFAULT_3311596["signature"][:96]}, "does not verify"),  # another network's signature
    ({"signature": "ab" * 48}, "does not verify"),
    ({"chain": "some-other-network"}, "is not one whose key this trainspotter ships"),
    ({"signature": None}, "not a drand round"),
])
def test_a_forged_or_moved_round_is_one_error(change, says):
    data = {k: v for k, v in (QUICKNET_657413 | change).items() if v is not None}
    with pytest.raises(InputError, match=says):
        verify_round(data, "r.json")


def test_the_chained_network_needs_the_previous_signature_it_signed():
    data = {k: v for k, v in DEFAULT_3311596.items() if k != "previous_signature"} | {"chain": "default"}
    with pytest.raises(InputError, match="does not verify"):
        verify_round(data, "r.json")
    wrong = DEFAULT_3311596 | {"previous_signature": "ab" * 96}
    with pytest.raises(InputError, match="round 3311596 does not verify against drand default's key"):
        verify_round(wrong, "r.json")


def test_parse_beacon_reads_the_round_as_drand_publishes_it(tmp_path):
    path = tmp_path / "round.json"
    path.write_text(json.dumps(QUICKNET_657413))
    beacon = parse_beacon(str(path))
    assert beacon.proof()[0] == "verified" and beacon.round == 657413
    path.write_text(json.dumps(QUICKNET_657413 | {"round": 657412}))
    with pytest.raises(InputError, match=f"option --beacon: {path}: round 657412 does not verify"):
        parse_beacon(str(path))
    assert parse_beacon(f"657413:{QUICKNET_657413['randomness']}").proof()[0] == "unverified"  # ROUND:HEX


def test_a_stored_beacon_is_checked_again_where_it_is_read():
    """The manifest and the record keep the signature: a value edited there after the round was read
    fails, a ROUND:HEX one says unverified, the fixed test value says so."""
    beacon = verify_round(QUICKNET_657413, "r.json")
    stored = beacon.to_dict()
    assert Beacon.from_dict(stored) == beacon and Beacon.from_dict(stored).proof()[0] == "verified"
    edited = Beacon.from_dict(stored | {"randomness": "11" * 32})
    assert edited.proof()[0] == "failed" and "not sha256 of its signature" in edited.proof()[1]
    moved = Beacon.from_dict(stored | {"round": 657414})
    assert moved.proof()[0] == "failed"
    assert Beacon(657413, beacon.randomness).proof()[0] == "unverified"
    assert TEST_BEACON.proof()[0] == "test"
    assert set(Beacon(5, bytes(32)).to_dict()) == {"round", "randomness", "source"}  # as folders wrote them before
