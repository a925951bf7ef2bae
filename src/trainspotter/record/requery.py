"""Has the model changed since an audit? ``requery`` loads a sealed record's models and
extracts the features of a few random passages bet on again, and compares them with the
recorded ones within REQUERY_RTOL/REQUERY_ATOL: the floating point of another BLAS, device or
batch padding, not a changed model."""

from __future__ import annotations

import math
import random

from trainspotter.record.checks import Check
from trainspotter.record.verify import SIDES, _pairs

__all__ = ["REQUERY_ATOL", "REQUERY_RTOL", "requery"]

REQUERY_RTOL, REQUERY_ATOL = 1e-4, 1e-6


def requery(record: dict, n: int, seed: int = 0) -> Check:
    """Load the record's models and extract the features of ``n`` random passages bet on
    again: do they match the recorded ones within REQUERY_RTOL/REQUERY_ATOL? An API model
    is asked afresh (a temporary answer cache), never from the answers cached before; a model
    named by hub id is loaded at the commit the record names."""
    import tempfile

    from trainspotter.auditing.config import AuditConfig
    from trainspotter.backends import load_backend, parse_spec
    from trainspotter.features.extract import extract
    from trainspotter.record.format import model_identity

    config = AuditConfig(**record["config"])
    recorded = record["reference"] or []
    model = _recorded(config.model, record["model"])
    references = [_recorded(r, recorded[i] if i < len(recorded) else None) for i, r in enumerate(config.reference)]
    rows = [(s, p[s]) for p in _pairs(record) for s in SIDES]
    if not rows:
        return Check("requery", False, "requery: the record has no pairs bet on")
    picked = random.Random(seed).sample(rows, min(n, len(rows)))
    texts = {(s, p["id"]): p["text"] for s in SIDES for p in record["passages"][s]}
    with tempfile.TemporaryDirectory() as tmp:
        def fresh(spec):
            if not spec.remote:  # a remote scheme's answers come from a fresh cache, not the audit's
                return spec
            return parse_spec(spec.text + ("&" if "?" in spec.text else "?") + f"cache={tmp}/requery.sqlite")

        target = load_backend(fresh(model))
        df = extract([{"id": r["id"], "text": texts[(s, r["id"])]} for s, r in picked],
                     target, [load_backend(fresh(r)) for r in references], config.access, config.features)
    if config.model.remote:
        weights = _server_builds(record, getattr(target, "system_fingerprints", set()))
    elif _same(model_identity(model), record["model"]):
        weights = "; the weight files' sha256 are unchanged" + (f" (commit {model.commit}, as recorded)"
                                                                if model.commit else "")
    else:
        weights = "; the weight files differ from the recorded ones"
    worst, where = _largest_difference(picked, df.to_dict("records"))
    tol = f"rtol {REQUERY_RTOL:g}, atol {REQUERY_ATOL:g}"
    if worst <= 1.0:
        return Check("requery", True, f"{len(picked)} passages re-extracted: every feature matches within "
                                      f"{tol}{weights}")
    return Check("requery", False, f"{len(picked)} passages re-extracted: the model's answers changed; largest "
                                   f"difference {where} (beyond {tol}){weights}")


def _recorded(spec, identity: dict | None):
    """A model named by hub id at the commit its record names, ``hf:ORG/NAME@COMMIT`` with the
    same options: a branch that moved since is not the model that answered. Any other spec as it is."""
    from trainspotter.backends import parse_spec
    from trainspotter.hub import split_revision

    commit = ((identity or {}).get("hub") or {}).get("commit")  # (only an hf: spec of a hub id has one)
    if not commit:
        return spec
    return parse_spec(f"hf:{split_revision(spec.where)[0]}@{commit}{spec.text[len(spec.base):]}")


def _same(now: dict, then: dict) -> bool:
    """The same model as recorded; of a hub model, the spec and revision as written aside (the
    requery names the recorded commit instead)."""
    def asked_aside(identity: dict) -> dict:
        if "hub" not in identity:
            return identity
        return {k: v for k, v in identity.items() if k != "spec"} | {"hub": identity["hub"] | {"revision": None}}

    return asked_aside(now) == asked_aside(then)


def _server_builds(record: dict, now: set[str]) -> str:
    """What the server's ``system_fingerprint`` says: the same build as in the record, or not."""
    then = {fp for server in record["model"].get("server", {}).values() for fp in server.get("system_fingerprints", [])}
    if not then or not now:
        return "; the server reports no system_fingerprint" if not now else ""
    if now <= then:
        return f"; the server's system_fingerprint is unchanged ({', '.join(sorted(now))})"
    return f"; the server's system_fingerprint changed: {', '.join(sorted(then))} then, {', '.join(sorted(now))} now"


def _largest_difference(picked: list, rows: list[dict]) -> tuple[float, str | None]:
    """The largest |old − new| / (atol + rtol·|old|) over the picked rows' features, and where."""
    worst, where = 0.0, None
    for (s, r), new in zip(picked, rows):
        for col, old in r["features"].items():
            value = new.get(col, float("nan"))
            if (math.isnan(old) and math.isnan(value)) or old == value:
                continue
            excess = math.inf if math.isnan(old + value) else \
                abs(old - value) / (REQUERY_ATOL + REQUERY_RTOL * abs(old))
            if excess > worst:
                worst, where = excess, f"{s} {r['id']!r} {col}: recorded {old!r}, now {value!r}"
    return worst, where
