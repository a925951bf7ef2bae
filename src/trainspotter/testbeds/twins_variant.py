"""Twins testbeds (issue 35): every split passage rewritten ``config.twins`` times by the keyed
lexical rewriter its config describes, one version drawn public; ``testbeds.build`` trains
the members on their public versions and calls ``build_twins`` for the split files and folders.

The draw is the testbed's seeded one (``twins.draw.seeded_draw``), as when the committed
benchmark results were measured: a beacon-derived draw would publish other versions, train
other targets and leave those results without a testbed that reproduces them. Each folder's
manifest says so ("draw": "seeded"), and an audit of it through the CLI rests on no shown draw:
its "trained on" needs --assume-exchangeable (the benchmark suites bet on the features
directly, ``evaluation.twins_suite``, and are unchanged)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from trainspotter.errors import InputError

if TYPE_CHECKING:
    from trainspotter.testbeds.recipes import TestbedConfig

__all__ = ["build_twins", "rewriter_of", "split_keys"]


def split_keys(config: TestbedConfig, split: str) -> list[bytes]:
    """A split's variant keys when each split has its own (``rewriter_of``): from the seed and the split."""
    return [random.Random(f"{config.seed}:twins:{split}:{j}").randbytes(32) for j in range(config.twins)]


def build_twins(config: TestbedConfig, records: list[dict], encoded: list[list[int]], tokenizer,
                chosen: dict[str, list[int]], out: Path) -> tuple[dict[str, list[int]], dict]:
    """Twins of every split passage (``config.twins`` variants of ``rewriter_of``), made
    from the whole passage with keys and a draw from the testbed's seed. ``encoded[i]`` becomes
    the public version's tokens (what a member is trained on); each split's twins folder holds
    every version's first ``chunk_tokens`` tokens, as the split files do. Passages with a
    version shorter than that, or whose versions agree on those tokens, are dropped from their
    split. The rewriter and the keys (shared, or per split) are ``config.twins_rewriter``'s; a
    paraphrase table (``TableRewriter``) gets a generative rewriter's gate (MiniLM similarity ≥ 0.7,
    ``twins.GATES``) with one redraw. Returns the splits and, per split, the passages kept and
    the rewriter's mean edit rate."""
    from trainspotter.twins.draw import commit, seeded_draw
    from trainspotter.twins.folder import Twins, write_twins
    from trainspotter.twins.make import GATES, edit_rate, make_twins

    L, rng = config.chunk_tokens, random.Random(f"{config.seed}:twins")
    rewriter, per_split = rewriter_of(config)
    gate = GATES["generative"] | {"retries": 1} if rewriter.name == "table" else {}
    keys = [rng.randbytes(32) for _ in range(config.twins)]
    kept, made = {}, {}
    for split, ids in chosen.items():
        if per_split:  # each split its own keys (another dataset's), from the seed and the split
            keys = split_keys(config, split)
        twins = make_twins([{"id": records[i]["id"], "text": records[i]["text"]} for i in ids], config.twins,
                           rewriter, keys=keys, similarity=True, **gate)
        drawn = {i: rng.randrange(config.twins) for i in twins.ids}  # as ever: the seed's draw, after every variant
        tokens = {i: {j: tokenizer(t, add_special_tokens=False)["input_ids"] for j, t in v.items()}
                  for i, v in twins.variants.items()}
        by_id = {records[i]["id"]: i for i in ids}
        # every version long enough, and the versions still different within the audited tokens
        ok = [r for r in twins.ids if all(len(t) >= L for t in tokens[r].values())
              and len({tuple(t[:L]) for t in tokens[r].values()}) == config.twins]
        for r in ok:
            encoded[by_id[r]] = tokens[r][drawn[r]]
        cut = Twins(ok, {r: {j: tokenizer.decode(t[:L]) for j, t in tokens[r].items()} for r in ok},
                    {}, twins.k, twins.manifest | {"passages": len(ok)}, twins.quality, twins.keys)
        cut.manifest["commitment"] = commit(cut, twins.manifest["rewriter"], None)  # of the audited tokens
        seeded_draw(cut, {r: drawn[r] for r in ok}, f"testbed {config.name!r}: random.Random('{config.seed}:twins') "
                                                    f"at its build, before its target trained on the public versions")
        shutil.rmtree(out / f"twins-{split}", ignore_errors=True)  # a rebuild draws again
        write_twins(cut, out / f"twins-{split}")
        kept[split] = [by_id[r] for r in ok]
        made[split] = {"passages": len(ok), "dropped": len(ids) - len(ok),
                       "edit_rate": twins.manifest["quality"]["0"].get("edit_rate"),
                       "similarity": twins.manifest["quality"]["0"].get("similarity"),
                       # where an audit looks: the public against the private version, audited tokens
                       "twin_edit_rate": round(sum(edit_rate(cut.variants[r][0], cut.variants[r][1])
                                                   for r in ok) / max(len(ok), 1), 4)}
    return kept, made


class PerPassageKeys:
    """A rewriter whose variant key is re-derived for every passage, HMAC(key, "passage" ‖ text):
    the same variant index then makes unrelated choices in two passages ("unkeyed": no
    dataset-wide preference of a key), the control for the keyed rewriter (issue 35)."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def rewrite(self, text: str, key: bytes) -> str:
        from trainspotter.rewriters.base import mac

        return self.inner.rewrite(text, mac(key, f"passage\0{text}"))

    def redraw(self, text: str, key: bytes, attempt: int, passage: str) -> str:
        from trainspotter.rewriters.base import mac

        return self.inner.redraw(text, mac(key, f"passage\0{text}"), attempt, passage)

    def __getattr__(self, name):  # settings(), describe(), ... of the wrapped rewriter
        return getattr(self.inner, name)


def rewriter_of(config: TestbedConfig):
    """The rewriter that ``config.twins_rewriter`` describes, and whether each split has its own
    keys (``keys``: "shared", "per split", or "per passage": per split and re-derived per passage,
    ``PerPassageKeys``): the keyed lexical rewriter, or ``{"name": "table", "path", "sha256"}``, a
    paraphrase table in the repository (``rewriters.generative.TableRewriter``; ``path`` relative to
    the repository's root). A description this code cannot reproduce (another version, another
    table) is refused."""
    from trainspotter.rewriters.lexical import KeyedLexicalRewriter

    spec = dict(config.twins_rewriter or {})
    keys = spec.pop("keys", "shared")
    if spec.get("name") == "table":
        from trainspotter.rewriters.generative import TableRewriter

        path = Path(__file__).resolve().parents[3] / spec["path"]
        if not path.is_file():
            raise InputError(f"testbed {config.name!r}: its paraphrase table {spec['path']} is not in this checkout")
        return TableRewriter(path, spec["sha256"], spec.get("made")), keys != "shared"
    rewriter = KeyedLexicalRewriter(
        rate=None if spec.get("rate", "uniform") == "uniform" else float(spec["rate"]),
        **{k: spec[k] for k in ("min_length", "senses", "min_count", "phrases") if k in spec})
    if rewriter.describe() != spec or keys not in ("shared", "per split", "per passage"):
        raise InputError(f"testbed {config.name!r}: twins_rewriter {spec | {'keys': keys}} is not one this version's "
                         f"keyed lexical rewriter reproduces ({rewriter.describe()})")
    return (PerPassageKeys(rewriter) if keys == "per passage" else rewriter), keys != "shared"
