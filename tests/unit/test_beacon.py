"""A draw nobody chose (trainspotter.proofs.beacon): the derivation by its definition, the beacon's
two spellings and their errors, and an index exactly uniform."""

import hashlib
import hmac
import json
from collections import Counter

import pytest
from scipy.stats import chisquare

from trainspotter.errors import InputError
from trainspotter.proofs.beacon import TEST_BEACON, Beacon, derive, parse_beacon, secret_digest, uniform_index

SECRET = bytes(range(32))
R = bytes.fromhex("ab" * 32)


def test_derive_is_hmac_sha256_of_the_label_round_and_randomness_keyed_by_the_secret():
    beacon = Beacon(4242, R)
    want = hmac.new(SECRET, b"trainspotter\0draw\0" + (4242).to_bytes(8, "big") + R, hashlib.sha256).digest()
    assert derive(SECRET, beacon, "draw") == want
    # each input changes it: another label, round, randomness or secret
    assert len({derive(SECRET, beacon, "draw"), derive(SECRET, beacon, "key"), derive(SECRET, Beacon(4243, R), "draw"),
                derive(SECRET, Beacon(4242, bytes(32)), "draw"), derive(bytes(32), beacon, "draw")}) == 5
    with pytest.raises(ValueError):
        derive(b"short", beacon, "draw")


def test_a_beacon_reads_as_round_colon_hex_or_a_drand_json_file(tmp_path):
    assert parse_beacon(f"4242:{R.hex()}") == Beacon(4242, R)
    path = tmp_path / "round.json"
    path.write_text(json.dumps({"round": 7, "randomness": R.hex()}))  # no signature: read, but unverified
    assert parse_beacon(str(path)) == Beacon(7, R) and parse_beacon(str(path)).proof()[0] == "unverified"
    path.write_text(json.dumps({"round": 7, "randomness": R.hex(), "signature": "00"}))  # one taken on trust before
    with pytest.raises(InputError, match="round 7 does not verify against drand quicknet's key"):
        parse_beacon(str(path))
    assert Beacon.from_dict(TEST_BEACON.to_dict()) == TEST_BEACON and parse_beacon(TEST_BEACON.text).round == 1


@pytest.mark.parametrize("value, says", [("4242", "is not ROUND:HEX"), (f"x:{R.hex()}", "is not ROUND:HEX"),
                                         ("5:abcd", "is not ROUND:HEX"), ("missing.json", "no such file")])
def test_a_bad_beacon_is_one_error_naming_the_option(value, says):
    with pytest.raises(InputError, match=says) as e:
        parse_beacon(value)
    assert str(e.value).startswith("option --beacon: ")


def test_a_json_file_that_is_not_a_round_names_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"round": 3}')
    with pytest.raises(InputError, match=f"{path}: not a beacon round"):
        parse_beacon(str(path))


def test_uniform_index_rejects_above_the_largest_multiple_of_k():
    """k = 3 does not divide 2^256: a seed at the top of the range is rejected and re-hashed."""
    top = ((1 << 256) - 1).to_bytes(32, "big")  # ≥ the limit for k = 3 (2^256 mod 3 = 1)
    again = hashlib.sha256(top).digest()
    assert uniform_index(top, 3) == int.from_bytes(again, "big") % 3
    assert uniform_index((5).to_bytes(32, "big"), 3) == 2
    assert uniform_index(top, 4) == 3  # 4 divides 2^256: nothing rejected


def test_uniform_index_is_uniform_over_derived_seeds():
    """6000 derivations with k = 3: a chi-square test of uniformity (false failure rate 0.001)."""
    counts = Counter(uniform_index(derive(SECRET, Beacon(r, R), "draw"), 3) for r in range(6000))
    assert chisquare([counts[j] for j in range(3)]).pvalue > 0.001


def test_secret_digest_is_domain_separated_sha256():
    assert secret_digest(SECRET) == hashlib.sha256(b"trainspotter-secret\0" + SECRET).hexdigest()
    assert secret_digest(SECRET) != hashlib.sha256(SECRET).hexdigest()
