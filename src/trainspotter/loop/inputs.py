"""An audit's inputs: its two sides read once (a twins folder: the public versions and their
private twins), checked once before any model loads (``checked_sides``: the CLI checks, and its
flow's audit does not check again what ``Checked`` says was checked), and the default feature
extractor (the config's models, loaded once per process, no caching)."""

from __future__ import annotations

from collections.abc import Mapping

from trainspotter.auditing.config import AuditConfig, ExtractFn
from trainspotter.config import fingerprint
from trainspotter.data import Passage, check_disjoint, load_passages
from trainspotter.errors import InputError
from trainspotter.loop.ledger import as_stored, check_setup, load_ledger, setup_of, with_ledger
from trainspotter.stats.sequential import min_pairs_to_reject
from trainspotter.twins.draw import DrawProof

__all__ = ["Checked", "check_inputs", "checked_sides", "draw_of", "keep_checked", "model_extract", "read_passages",
           "read_sides", "sides_by_path"]


class Checked(dict):
    """Passages by path, read once, and the audits they were checked for (``checked``: fingerprints
    of the configs ``check_inputs`` passed): ``audit`` and ``audit_sets`` do not check those again."""

    def __init__(self, passages: Mapping[str, list[Passage]], checked=()):
        super().__init__(passages)
        self.checked = frozenset(checked)

    def has_checked(self, config: AuditConfig) -> bool:
        return fingerprint(config) in self.checked


def keep_checked(given: Mapping[str, list[Passage]] | None, passages: dict) -> dict:
    """``passages`` with what ``given`` says was checked (as they are when it says nothing)."""
    return Checked(passages, given.checked) if isinstance(given, Checked) else passages


def read_passages(path: str, passages: Mapping[str, list[Passage]] | None = None) -> list[Passage]:
    """The passages of ``path``: from ``passages`` (files the caller already read, by path)
    when there, else read from disk, so one audit reads each file once."""
    return passages[path] if passages and path in passages else load_passages(path)


def read_sides(config: AuditConfig, passages: Mapping[str, list[Passage]] | None = None
               ) -> tuple[list[Passage], list[Passage]]:
    """The audit's suspect and held-out passages: its two files (``read_passages``), or for a
    twins audit the checked folder's public versions and their private twins, all or one of each
    (``trainspotter.twins.folder.read_sides``; ``passages`` may hold them already, by the two paths)."""
    if config.twins is None or (passages and config.suspect in passages and config.heldout in passages):
        return read_passages(config.suspect, passages), read_passages(config.heldout, passages)
    from trainspotter.twins.folder import read_sides as twin_sides

    return twin_sides(config.twins, config.seed, with_ledger(config).twins_private)  # (a ledger's stored choice)


def sides_by_path(config: AuditConfig, passages: Mapping[str, list[Passage]] | None = None) -> dict:
    """``read_sides`` by the two paths, keeping what ``passages`` says was checked."""
    return keep_checked(passages, dict(zip((config.suspect, config.heldout), read_sides(config, passages))))


def checked_sides(config: AuditConfig, passages: Mapping[str, list[Passage]] | None = None) -> Checked:
    """The audit's two sides by path (``sides_by_path``), checked (``check_inputs``) and marked so."""
    sides = sides_by_path(config, passages)
    check_inputs(config, sides[config.suspect], sides[config.heldout])
    return Checked(sides, {fingerprint(config)} | getattr(sides, "checked", frozenset()))


def draw_of(config: AuditConfig) -> DrawProof | None:
    """What a twins audit's folder shows of its draw (``twins.folder.prove_folder``, against the
    pinned ``twins_commitment``); twins given in memory, without a folder: unproven. None: not twins."""
    from pathlib import Path

    from trainspotter.twins.folder import MANIFEST, prove_folder

    if config.twins is None:
        return None
    if not (Path(config.twins) / MANIFEST).is_file():
        return DrawProof(status="unproven", reason="the twins were given without their folder: nothing binds their "
                                                   "draw", pinned=config.twins_commitment)
    return prove_folder(config.twins, config.twins_commitment)


def model_extract(config: AuditConfig) -> ExtractFn:
    """The default ``extract_fn``: library feature extraction on the config's models
    (loaded once per process), no caching; the rows carry the model's answers (for the sealed record)."""
    from trainspotter.backends import load_backend
    from trainspotter.features.extract import extract

    def extract_fn(passages: list[dict], batch_no: int) -> list[dict]:
        references = [load_backend(r) for r in config.reference]
        return extract(passages, load_backend(config.model), references, config.access,
                       config.features, answers=True).to_dict("records")  # answers: for the record

    return extract_fn


def check_inputs(config: AuditConfig, suspect: list[Passage], heldout: list[Passage]) -> None:
    """InputError unless the sets are disjoint (``check_disjoint``), a continued audit keeps its
    ledger's settings (``check_setup``) and a fresh audit has enough pairs to be able to reject at
    all (otherwise every query would be spent on a foregone "no evidence"). ``audit`` runs it unless
    its passages say they were checked for its config (``Checked``: the CLI checks before any model
    loads, through ``checked_sides``)."""
    check_disjoint(config.suspect, suspect, config.heldout, heldout)
    if config.ledger:
        stored = load_ledger(config.name)
        if stored is not None:
            check_setup(stored, setup_of(as_stored(config, stored["setup"])))
        return  # a continued audit starts from the stored wealth, which may need fewer pairs
    need = min_pairs_to_reject(config.test)
    plural = lambda n, word: f"{n} {word}{'s' * (n != 1)}"  # noqa: E731
    pairs, path = min((len(suspect), config.suspect), (len(heldout), config.heldout))
    where = f"{path}: {plural(pairs, 'passage')}, so {plural(pairs, 'pair')} at most"
    if config.max_pairs is not None and config.max_pairs < pairs:
        pairs, where = config.max_pairs, f"option --max-pairs: {plural(config.max_pairs, 'pair')}"
    if pairs < need:
        raise InputError(f"{where}, but the test needs at least {need} to be able to reject at "
                         f"alpha={config.test.alpha:g} with lambda_max={config.test.lambda_max:g}; "
                         f"give more passages or a larger alpha")
