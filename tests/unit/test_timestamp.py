"""An RFC 3161 timestamp proves the order (issue 63): a real authority (`openssl ts`, with a root CA
and a TSA certificate made here) stamps a commitment; the token verifies over that commitment only,
under that authority only, and proves the order only when it precedes the round's publication."""

import datetime as dt

import pytest
from beacons import STAND_IN
from timestamps import Authority

from trainspotter.errors import InputError
from trainspotter.proofs.beacon import Beacon
from trainspotter.proofs.timestamp import check, order, request

DATA = b'{"format": "commitment", "secret_sha256": "00"}\n'


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return Authority(tmp_path_factory.mktemp("tsa"))


def test_a_token_verifies_over_the_commitment_under_its_authority(authority):
    stamp = check(authority.stamp(request(DATA)), DATA, authority.root_pem, "r.tsr")
    assert stamp.authority == "Test TSA"
    assert abs((dt.datetime.now(dt.timezone.utc) - stamp.time).total_seconds()) < 120  # the authority's clock


@pytest.mark.parametrize("case, says", [
    ("another file", "the timestamp token does not hold: it stamps another file"),
    ("another authority", "do not verify up to the authority's root certificate"),
    ("not a reply", "not an RFC 3161 timestamp reply"),
    ("no root", "hold no root"),
])
def test_a_token_for_another_file_or_from_another_authority_is_refused(authority, tmp_path, case, says):
    reply, data, roots = authority.stamp(request(DATA)), DATA, authority.root_pem
    if case == "another file":
        data = DATA.replace(b"00", b"01")
    elif case == "another authority":  # a token signed by another key, whose root is not the one named
        other = Authority(tmp_path / "other", "Other TSA")
        reply = other.stamp(request(DATA))
    elif case == "not a reply":
        reply = b"\x30\x03\x02\x01\x00"
    else:
        roots = (authority.folder / "tsa.crt").read_bytes()  # the stamping certificate alone, not its root
    with pytest.raises(InputError, match=says):
        check(reply, data, roots, "r.tsr")


def test_the_order_is_proven_only_by_a_stamp_before_the_rounds_publication(authority):
    """Quicknet round 657413 was published 2023-09-15 11:00:03 UTC: a stamp of today is after it, one
    of 2023-09-01 (the authority's word for its time) before it; an unverified round has no time."""
    now = check(authority.stamp(request(DATA)), DATA, authority.root_pem, "r.tsr")
    proven, said = order(now, STAND_IN)
    assert not proven and said.endswith("after round 657413 was published (2023-09-15 11:00:03 UTC): the stamp "
                                        "shows nothing about the order")
    before = check(authority.stamp_at(request(DATA), dt.datetime(2023, 9, 1, tzinfo=dt.timezone.utc)), DATA,
                   authority.root_pem, "r.tsr")
    assert order(before, STAND_IN) == (True, "order proven: commitment stamped 2023-09-01 00:00:00 UTC by Test TSA, "
                                             "round 657413 published 2023-09-15 11:00:03 UTC")
    just_after = check(authority.stamp_at(request(DATA), dt.datetime(2023, 9, 15, 11, 0, 4, tzinfo=dt.timezone.utc)),
                       DATA, authority.root_pem, "r.tsr")
    assert not order(just_after, STAND_IN)[0]  # one second after the round: no proof
    unsigned = Beacon(STAND_IN.round, STAND_IN.randomness)
    assert order(before, unsigned) == (False, "the beacon round is unverified, so its time is unknown and nothing "
                                              "orders the stamp before it")
