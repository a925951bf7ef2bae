"""A twins audit of every private variant (``--twins-private all``, trainspotter.twins.rounds): what
the sequential test is fed, round by round, on a hand-made k = 4 folder in memory."""

import pytest

from trainspotter.auditing.config import AuditConfig
from trainspotter.data import make_pairs
from trainspotter.errors import InputError
from trainspotter.features.features import FEATURE_SETS
from trainspotter.loop.run import audit
from trainspotter.record.verify import verify_one
from trainspotter.stats.sequential import SequentialTest
from trainspotter.twins.folder import Twins
from trainspotter.twins.rounds import batch_queries, every_round, guard_pairs

# passages, each with variants 0..3 (passage n's variant j: the text "pn vj ..."); the test at α = 1e-12
# could reject only with u_t ≈ 1 in 48 of its 50 rounds, so every round is fed
N = 50


def _twins(public=lambda n: n % 4) -> Twins:
    ids = [f"p{n}" for n in range(N)]
    variants = {i: {j: f"{i} v{j} " + "word " * (n + j + 1) for j in range(4)} for n, i in enumerate(ids)}
    return Twins(ids=ids, variants=variants, public={i: public(n) for n, i in enumerate(ids)}, k=4)


def _code(text: str) -> float:
    """A text's number: 10 × passage + variant (``"p3 v2 ..."`` → 32)."""
    passage, variant = text.split()[:2]
    return 10.0 * int(passage[1:]) + int(variant[1:])


def _extract(passages, batch_no):
    """A fake model whose feature row is (the text's code, its twin's code): f(version | its twin)."""
    return [{"gray_ppl": _code(p["text"]), "gray_twin_lp": _code(p["twin"])} for p in passages]


def test_each_round_is_the_public_version_against_every_private_one_in_file_order(monkeypatch):
    """Round t of ``all`` is one passage: the test gets (m = 3, p) rows, row j being
    (public | private_j) against (private_j | public) for the private variants j in file order;
    the passages in the order the seed gives the pairs of ``one``; the model asked each text once
    per round except the public version, asked once per twin (its row depends on the twin)."""
    twins, seed = _twins(), 3
    fed, sent = [], []
    update = SequentialTest.update

    def recording(self, x, y):  # the model's test (2 features; the blind check's reads the texts)
        if self.n_features == 2:
            fed.append((x, y))
        return update(self, x, y)

    monkeypatch.setattr(SequentialTest, "update", recording)
    config = AuditConfig(twins="unused", model="hf:/never-loaded", seed=seed, batch_pairs=3, placebo_check=False,
                         features=FEATURE_SETS["twins"], test={"alpha": 1e-12})  # twin-dependent rows
    suspect, heldout = twins.sides(seed, "all")
    result = audit(config, extract_fn=lambda p, b: sent.append(p) or _extract(p, b),
                   passages={config.suspect: suspect, config.heldout: heldout})
    order = [x["id"] for x, _ in make_pairs(*twins.sides(seed), seed=seed, paired=True)]  # the rounds of "one"
    assert len(fed) == N and result.pairs_used == N and result.pairs_queried == N
    for (x, y), i in zip(fed, order):
        n, public = int(i[1:]), twins.public[i]
        private = [j for j in range(4) if j != public]  # file order
        pub, priv = 10.0 * n + public, [10.0 * n + j for j in private]
        assert x.shape == y.shape == (3, 2)
        assert x.tolist() == [[pub, p] for p in priv]  # f(public | private_j)
        assert y.tolist() == [[p, pub] for p in priv]  # f(private_j | public)
    assert [len(b) for b in sent] == [3 * 6] * 16 + [2 * 6] and result.texts_queried == 6 * N
    assert result.record["result"]["rounds"] == {"twins_private": "all", "sub_pairs": [3] * N,
                                                 "texts_queried": 6 * N}
    pairs = [p for b in result.record["batches"] for p in b["pairs"]]
    assert [p["t"] for p in pairs] == [t for t in range(1, N + 1) for _ in range(3)]  # a round's sub-pairs share t
    assert [len(b["pairs"]) for b in result.record["batches"]] == [9] * 16 + [6]  # batch_pairs rounds a batch
    checks = {c.name: c for c in verify_one(result.record)}  # (no folder here: its "twins" check fails)
    for name in ("pair order", "features", "blind check", "model test", "placebo check", "result", "chain",
                 "end state"):
        assert checks[name].ok, checks[name]
    assert "bit-for-bit" in checks["model test"].detail


def test_without_twin_features_the_public_version_is_asked_once_a_round():
    rounds = every_round(*_twins().sides(0, "all"))
    passages, where, sizes = batch_queries(rounds[:2], every=True, twin_features=False)
    assert len(passages) == 2 * 4 and sizes == [3, 3] and len(where) == 2 * 6
    assert [passages[n]["id"] for n in where[:6]] == [rounds[0][0][0]["id"]] * 3 + [rounds[1][0][0]["id"]] * 3
    one = batch_queries([[pair] for r in rounds[:2] for pair in r[:1]])
    assert one[2] is None and one[1] == list(range(4))  # "one": as the audit always asked


def test_with_two_variants_all_and_one_are_the_same_audit():
    twins = _twins(public=lambda n: n % 2)
    for i in twins.ids:
        twins.variants[i] = {j: t for j, t in twins.variants[i].items() if j < 2}
    twins.k = 2
    results = []
    for private in ("one", "all"):
        config = AuditConfig(twins="unused", model="hf:/never-loaded", seed=1, twins_private=private,
                             batch_pairs=3, placebo_check=False)
        suspect, heldout = twins.sides(1, private)
        results.append(audit(config, extract_fn=_extract, passages={config.suspect: suspect,
                                                                       config.heldout: heldout}))
    one, every = results
    assert every.e_value == one.e_value and every.history == one.history and every.blind == one.blind
    assert one.texts_queried is None and every.texts_queried == 2 * N


def test_the_guards_see_the_private_variant_the_seed_draws():
    """The blind and placebo checks' pairs of ``all`` are exactly the pairs of ``one``."""
    twins = _twins()
    for seed in range(3):
        drawn = guard_pairs(*twins.sides(seed, "all"), seed, every=True)
        assert drawn == make_pairs(*twins.sides(seed), seed=seed, paired=True)


def test_a_private_variant_of_no_public_passage_is_an_input_error():
    suspect, heldout = _twins().sides(0, "all")
    with pytest.raises(InputError, match="no public version of passage 'px'"):
        every_round(suspect, heldout + [{"id": "px#1", "text": "x"}])
    with pytest.raises(InputError, match="no private variant"):
        every_round(suspect, [p for p in heldout if not p["id"].startswith("p0#")])
    assert [len(r) for r in every_round(suspect, heldout)] == [3] * N
