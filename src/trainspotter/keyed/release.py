"""A keyed release (issue 53; docs/architecture.md, "Keyed releases"): every public passage written
under one secret key, which nobody chose.

1. ``commit_release`` (before the release): the owner draws a 256-bit secret s and writes, in a
   new folder, originals.jsonl and secret.json (keep) and commitment.json (publish now): sha256 of
   the originals, the secret's digest (``proofs.beacon.secret_digest``), the rewriter and how the
   release will be scored (the unit; for a watermark, γ, the scheme and the tokenizer that defines
   it, name and sha256 of its files, saved in tokenizer/).
2. ``release`` (after a public random value R appeared, e.g. a drand round later than the
   commitment's publication): the key K = ``derive(s, R, "keyed-release")`` (HMAC-SHA256, 256
   bits) rewrites every original: lexically (``KeyedLexicalRewriter``: each unit's form by
   HMAC(K, unit), the same everywhere) or generatively (``KeyedHFRewriter``: a local model's
   paraphrase sampled with a bias on ``KeyedGreenList(K)``'s green lists). public.jsonl is the
   release; with k ≥ 2, private.jsonl keeps versions under keys derived for "keyed-release/private-j".
   manifest.json (publish) binds the commitment's sha256, the beacon and the files.

Neither the owner nor anybody else could know K before R existed, and after it the committed s
leaves no choice: so a model's preference for K's choices is evidence about training, not about
how the key was picked. R is checked, not taken on trust: a drand round's signature against the
network's key (``Beacon.proof``). That commitment.json existed before round R is proven by an RFC
3161 stamp of it (commitment.tsq, written here; the reply checked at release, ``order_proof``);
without one, the verdict says it rests on that order. ``verify_release`` re-derives everything it can.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.proofs import timestamp
from trainspotter.proofs.beacon import Beacon, derive, secret_digest
from trainspotter.rewriters.generative import HFRewriter
from trainspotter.rewriters.lexical import KeyedLexicalRewriter
from trainspotter.rewriters.base import Rewriter
from trainspotter.keyed.watermark import GreenBias, KeyedGreenList, tokenizer_files

__all__ = ["FORMAT", "KeyedHFRewriter", "KeyedRelease", "commit_release", "commitment_sha256", "load_release",
           "release", "verify_release"]

FORMAT, VERSION = "trainspotter-keyed-release", 1
COMMITMENT, MANIFEST, SECRET = "commitment.json", "manifest.json", "secret.json"
ORIGINALS, PUBLIC, PRIVATE, TOKENIZER = "originals.jsonl", "public.jsonl", "private.jsonl", "tokenizer"
LABEL = "keyed-release"


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


class KeyedHFRewriter(HFRewriter):
    """``HFRewriter`` sampling under one release key's green lists (``KeyedGreenList(K)`` over the
    tokenizer's entries, ``bias`` added to their logits) instead of transformers' hashing key."""

    name = "keyed-generative"

    def __init__(self, spec, *, gamma: float = 0.25, **kw):
        super().__init__(spec, greenlist_ratio=gamma, **kw)

    def watermark_kwargs(self, key: bytes) -> dict:
        from transformers import LogitsProcessorList

        tok, _ = self.load()
        return {"logits_processor": LogitsProcessorList([GreenBias(KeyedGreenList(key, len(tok), self.greenlist_ratio),
                                                                   self.bias)])}

    def settings(self) -> dict:
        tok, _ = self.load()
        green = KeyedGreenList(bytes(8), len(tok), self.greenlist_ratio).describe()
        return super().settings() | {"watermark": green | {"bias": self.bias, "key": "the release key (secret)"}}


def scoring(rewriter: Rewriter, tokenizer: dict | None = None) -> dict:
    """How a release by ``rewriter`` is scored (what commitment.json and manifest.json record)."""
    if isinstance(rewriter, KeyedLexicalRewriter):
        return {"unit": "word type: a rewritable unit of the originals, scored once at the first form a model "
                        "writes", "null": "1/(m+1) for a unit with m alternatives"}
    green = rewriter.settings()["watermark"]
    return {"unit": "window (previous token, next token), width 2, each distinct window once",
            "null": "gamma", "gamma": green["gamma"], "scheme": green["scheme"], "bias": green["bias"],
            "vocab_size": green["vocab_size"], "tokenizer": tokenizer}


def commitment_sha256(commitment: dict) -> str:
    """What manifest.json binds of commitment.json (and what an owner publishes first): the
    sha256 of its canonical JSON."""
    return _sha(_canonical(commitment))


def commit_release(passages: list[dict], out: str | Path, rewriter: Rewriter, *, beacon_round: int, k: int = 1,
                   secret: bytes | None = None) -> dict:
    """Step 1 (module docstring): writes originals, secret and the commitment, which names the beacon
    round that will derive the key (so that nobody can try later rounds until one suits a model);
    returns the commitment."""
    out = Path(out)
    if beacon_round < 0:
        raise InputError(f"beacon round {beacon_round} < 0")
    if any((out / f).exists() for f in (COMMITMENT, SECRET, MANIFEST)):
        raise InputError(f"{out}: already holds a keyed release; choose a new --out (a second commitment over the "
                         f"same passages would let one choose between keys)")
    if not isinstance(rewriter, (KeyedLexicalRewriter, KeyedHFRewriter)) or getattr(rewriter, "rate", None):
        raise InputError("a keyed release needs the keyed lexical rewriter (uniform) or a local model (hf:, testbed:) "
                         "whose watermark the tool computes")
    ids = [str(p["id"]) for p in passages]
    if len(set(ids)) != len(ids) or not ids:
        raise InputError("a keyed release needs passages with distinct ids")
    secret = secret or secrets.token_bytes(32)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"id": str(p["id"]), "text": p["text"]} for p in passages]
    originals = _jsonl(rows)
    (out / ORIGINALS).write_text(originals, encoding="utf-8")
    tokenizer = None
    if isinstance(rewriter, KeyedHFRewriter):
        tok, _ = rewriter.load()
        tok.save_pretrained(out / TOKENIZER)
        tokenizer = {"name": rewriter.spec.base, "files": tokenizer_files(out / TOKENIZER)}
    commitment = {"format": FORMAT, "version": VERSION, "stage": "commitment", "passages": len(ids), "k": k,
                  "beacon_round": beacon_round, "originals_sha256": _sha(originals.encode("utf-8")), "secret_sha256": secret_digest(secret),
                  "rewriter": rewriter.describe(), "scoring": scoring(rewriter, tokenizer),
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "publish": f"now, before beacon round {beacon_round}, whose randomness will derive the key"}
    (out / SECRET).write_text(json.dumps({"secret": secret.hex(), "note": "never publish before an audit"}) + "\n")
    (out / SECRET).chmod(0o600)
    (out / ORIGINALS).chmod(0o600)
    (out / COMMITMENT).write_text(json.dumps(commitment, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if isinstance(rewriter, KeyedLexicalRewriter):  # what the publisher reads before publishing (it quotes originals)
        from trainspotter.keyed.review import write_review
        from trainspotter.keyed.units import LexicalForms

        write_review(LexicalForms(rewriter, [r["text"] for r in rows]), rows, out).chmod(0o600)
    (out / timestamp.REQUEST).write_bytes(timestamp.request((out / COMMITMENT).read_bytes()))  # for an authority
    return commitment


@dataclass
class KeyedRelease:
    """A keyed release folder read back: the manifest (and its commitment), the public passages
    and, where the owner's files are present, the originals and the key."""

    folder: Path
    commitment: dict
    manifest: dict | None
    public: list[dict]
    originals: list[dict] | None = None
    secret: bytes | None = None

    @property
    def beacon(self) -> Beacon | None:
        return Beacon.from_dict(self.manifest["beacon"]) if self.manifest else None

    @property
    def key(self) -> bytes:
        if self.secret is None or self.manifest is None:
            raise InputError(f"{self.folder}: the key needs the owner's {SECRET} and a released {MANIFEST}")
        return derive(self.secret, self.beacon, LABEL)

    @property
    def lexical(self) -> bool:
        return self.commitment["rewriter"]["name"] == KeyedLexicalRewriter.name


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            row = json.loads(line)
            rows.append({"id": str(row["id"]), "text": str(row["text"])})
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{path}, line {n}: not a passage ({type(e).__name__})") from None
    return rows


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise InputError(f"{path}: missing (a keyed release folder holds {COMMITMENT} and, once released, {MANIFEST})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not JSON ({type(e).__name__})") from None


def load_release(folder: str | Path) -> KeyedRelease:
    """The folder as written (its commitment always; the manifest and public passages once
    released; the owner's originals and secret where present), checked against its own digests:
    a file that differs from what the manifest or commitment binds is one InputError naming it."""
    folder = Path(folder)
    commitment = _read_json(folder / COMMITMENT)
    if commitment.get("format") != FORMAT:
        raise InputError(f"{folder / COMMITMENT}: not a keyed release commitment")
    manifest = _read_json(folder / MANIFEST) if (folder / MANIFEST).exists() else None
    if manifest and manifest["commitment_sha256"] != commitment_sha256(commitment):
        raise InputError(f"{folder / COMMITMENT}: differs from the commitment {MANIFEST} binds")
    if manifest and manifest["beacon"]["round"] != commitment.get("beacon_round"):
        raise InputError(f"{folder / MANIFEST}: the key comes from beacon round {manifest['beacon']['round']}, but "
                         f"the commitment names round {commitment.get('beacon_round')}: a key from a round chosen "
                         f"after the commitment could have been chosen")
    public = []
    if manifest:
        for name, digest in manifest["files"].items():
            if not (folder / name).is_file() or _sha((folder / name).read_bytes()) != digest:
                raise InputError(f"{folder / name}: missing or changed since the release (sha256 differs from {MANIFEST})")
        public = _read_jsonl(folder / PUBLIC)
    originals = secret = None
    if (folder / ORIGINALS).exists():
        raw = (folder / ORIGINALS).read_bytes()
        if _sha(raw) != commitment["originals_sha256"]:
            raise InputError(f"{folder / ORIGINALS}: changed since the commitment (sha256 differs)")
        originals = _read_jsonl(folder / ORIGINALS)
    if (folder / SECRET).exists():
        secret = bytes.fromhex(_read_json(folder / SECRET)["secret"])
        if secret_digest(secret) != commitment["secret_sha256"]:
            raise InputError(f"{folder / SECRET}: not the secret the commitment binds")
    return KeyedRelease(folder, commitment, manifest, public, originals, secret)


def rewriter_of(commitment: dict, folder: Path | None = None) -> Rewriter:
    """The rewriter the commitment describes (the keyed lexical rewriter's settings, or a local
    model's spec); a description this version cannot reproduce is refused."""
    described = dict(commitment["rewriter"])
    if described["name"] == KeyedLexicalRewriter.name:
        settings = ("phrases",) if described.get("version") == 3 else ("min_length", "senses", "min_count", "phrases")
        rewriter = KeyedLexicalRewriter(version=described.get("version", 2), exclude=tuple(described.get("exclude", ())),
                                        **{k: described[k] for k in settings})
        if rewriter.describe() != described:
            raise InputError(f"{folder}: the committed lexical rewriter {described} is not this version's")
        return rewriter
    from trainspotter.backends.spec import parse_spec

    green = commitment["scoring"]
    return KeyedHFRewriter(parse_spec(described["model"]), gamma=green["gamma"], bias=green["bias"],
                           unit=described["unit"], temperature=described["temperature"], top_p=described["top_p"])


def release(folder: str | Path, beacon: Beacon, progress=None, stamp: tuple[bytes, bytes] | None = None) -> dict:
    """Step 2 (module docstring): the key from the committed secret and ``beacon``, every original
    rewritten under it (and k − 1 private versions), manifest.json last; returns the manifest.
    ``stamp``: an authority's RFC 3161 reply over commitment.json and its certificates (PEM), checked
    and held against the round (``proofs.timestamp``) before anything is written, then kept in the
    folder: the order is proven."""
    kr = load_release(folder)
    if kr.manifest is not None:
        raise InputError(f"{kr.folder}: already released (with beacon round {kr.manifest['beacon']['round']}); "
                         "a second release would let one choose between keys")
    if kr.secret is None or kr.originals is None:
        raise InputError(f"{kr.folder}: releasing needs the owner's {SECRET} and {ORIGINALS}")
    if beacon.round != kr.commitment.get("beacon_round"):
        raise InputError(f"option --beacon: round {beacon.round}, but the commitment names round "
                         f"{kr.commitment.get('beacon_round')}: the key must come from the round fixed before the "
                         f"commitment was published")
    order = _stamped(kr.folder, beacon, *stamp) if stamp is not None else None
    rewriter, k = rewriter_of(kr.commitment, kr.folder), int(kr.commitment["k"])
    keys = [derive(kr.secret, beacon, LABEL)] + [derive(kr.secret, beacon, f"{LABEL}/private-{j}") for j in range(1, k)]
    public, private = [], []
    for n, p in enumerate(kr.originals, start=1):
        public.append({"id": p["id"], "text": rewriter.rewrite(p["text"], keys[0])})
        private += [{"id": p["id"], "variant": j, "text": rewriter.rewrite(p["text"], keys[j])} for j in range(1, k)]
        if progress:
            progress(n, len(kr.originals))
    out = kr.folder
    (out / PUBLIC).write_text(_jsonl(public), encoding="utf-8")
    files = [PUBLIC]
    if k > 1:
        (out / PRIVATE).write_text(_jsonl(private), encoding="utf-8")
        (out / PRIVATE).chmod(0o600)
        files.append(PRIVATE)
    if order is not None:
        (out / timestamp.REPLY).write_bytes(stamp[0])
        (out / timestamp.AUTHORITY).write_bytes(stamp[1])
        files += [timestamp.REPLY, timestamp.AUTHORITY]
    manifest = {"format": FORMAT, "version": VERSION, "stage": "release", "passages": len(public),
                "commitment_sha256": commitment_sha256(kr.commitment), "commitment": kr.commitment,
                "beacon": beacon.to_dict(), "key": f"HMAC-SHA256(secret, 'trainspotter' || 0 || '{LABEL}' || 0 || "
                                                  "round (8 bytes) || randomness): 256 bits",
                "scoring": kr.commitment["scoring"],
                "files": {f: _sha((out / f).read_bytes()) for f in files}} | ({"order": order} if order else {})
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def _stamped(folder: Path, beacon: Beacon, reply: bytes, authority: bytes) -> dict:
    """The order the authority's stamp proves, checked (one InputError when it does not hold or comes
    after the round)."""
    stamp = timestamp.check(reply, (folder / COMMITMENT).read_bytes(), authority, "option --timestamp")
    proven, detail = timestamp.order(stamp, beacon)
    if not proven:
        raise InputError(f"option --timestamp: {detail}")
    return {"stamped": stamp.time.isoformat(), "authority": stamp.authority, "proof": detail}


def order_proof(kr: KeyedRelease) -> tuple[str, str]:
    """What shows the commitment came before the key's round: ("proven", …) when the folder's stamp
    checks again against its authority's certificates and precedes the round; ("none", …) without a
    stamp; ("failed", …) when a kept stamp no longer holds."""
    if kr.manifest is None or "order" not in kr.manifest:
        return "none", "no timestamp of the commitment: the order rests on where it was published"
    try:
        stamp = timestamp.check((kr.folder / timestamp.REPLY).read_bytes(), (kr.folder / COMMITMENT).read_bytes(),
                                (kr.folder / timestamp.AUTHORITY).read_bytes(), str(kr.folder / timestamp.REPLY))
    except (InputError, OSError) as e:
        return "failed", str(e)
    proven, detail = timestamp.order(stamp, kr.beacon)
    return ("proven" if proven else "failed"), detail


def verify_release(folder: str | Path) -> list[tuple[str, bool, str]]:
    """Every check a folder allows, as (check, passed, detail): the files against the manifest and
    the commitment (``load_release``), and with the owner's secret, the key re-derived and (lexical)
    every public passage rewritten again from its original under it."""
    kr = load_release(folder)
    out = [("files", True, "every file matches the sha256 the manifest and the commitment bind")]
    if kr.manifest is None:
        return out + [("released", False, "no manifest.json: not released yet")]
    b = kr.beacon
    status, detail = b.proof()  # None: nothing failed, and nothing shows the round is the network's
    out.append(("beacon", {"verified": True, "failed": False}.get(status), f"key derived from the commitment's secret "
                f"and beacon round {b.round}; {detail}"))
    ordered, said = order_proof(kr)
    out.append(("order", {"proven": True, "failed": False}.get(ordered), said))
    if kr.secret is None:
        return out + [("key", False, f"without the owner's {SECRET} the key cannot be re-derived here")]
    out.append(("secret", True, "the secret matches the commitment's digest"))
    if kr.lexical and kr.originals is not None:
        rewriter, key = rewriter_of(kr.commitment, kr.folder), kr.key
        wrong = [p["id"] for p, o in zip(kr.public, kr.originals) if p["text"] != rewriter.rewrite(o["text"], key)]
        out.append(("public", not wrong, "every public passage is its original under the derived key" if not wrong
                    else f"{len(wrong)} public passages are not their original under the key (first: {wrong[0]})"))
    return out
