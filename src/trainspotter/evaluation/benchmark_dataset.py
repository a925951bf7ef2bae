"""A membership benchmark's members and non-members from a dataset named by hub id
(``benchmark --dataset hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION]``, ``trainspotter.hub_data``), as the
field's benchmarks publish them:

- **a label column** (WikiMIA, Shi et al. 2024: columns ``input`` and ``label``, 1 = member, i.e.
  seen in pre-training (Wikipedia events before 2017), 0 = non-member (events after 2023); splits
  ``WikiMIA_length32/64/128/256`` by passage length in words): the text column (``--text-column``;
  without it ``text``, else ``input``) and the label column (``--label-column``; without it
  ``label``): 1 or true member, 0 or false non-member;
- **member and non-member columns** (MIMIR, Duan et al. 2024: config = the Pile subset, e.g.
  ``arxiv``, ``wikipedia_(en)``, ``github``, ``pile_cc``, ``pubmed_central``, ``dm_mathematics``,
  ``hackernews``; split = the n-gram overlap filter, e.g. ``ngram_13_0.8``: non-members share at
  most 80% of their 13-grams with the training data; ``ngram_7_0.2`` is the strict one): each
  row's ``member`` text is from the Pile's training split, its ``nonmember`` text from its test
  split. Both columns are read in full; a row missing one side gives only the other.

Every passage is checked (a string, not empty) and every label read; a bad one is one
``InputError`` naming the dataset, its file and row."""

from __future__ import annotations

from trainspotter.errors import InputError

__all__ = ["MEMBER_VALUES", "NONMEMBER_VALUES", "dataset_splits"]

MEMBER_VALUES = (1, True, "1", "true", "member")
NONMEMBER_VALUES = (0, False, "0", "false", "nonmember", "non-member")


def dataset_splits(spec: str, text_column: str | None = None, label_column: str | None = None
                   ) -> tuple[dict[str, list[dict]], dict]:
    """``({"member": passages, "nonmember": passages}, source)`` of the dataset ``spec`` names;
    ``source``: the id, config, split, revision asked, the commit read, the files and the sha256
    of the rows read (each passage's id, text and split, in order)."""
    from trainspotter.hub_data import TEXT_COLUMNS, is_hub_dataset, read_hub_table
    from trainspotter.record.format import sha256

    where = "option --dataset: "
    if not is_hub_dataset(spec):
        raise InputError(f"{where}{spec}: not a dataset named by hub id; write hf:ORG/NAME[:CONFIG][/SPLIT]"
                         f"[@REVISION] (e.g. hf:swj0419/WikiMIA/WikiMIA_length64), with a copy in the Hugging "
                         f"Face cache")
    table = read_hub_table(spec, where)
    paired = text_column is None and label_column is None and {"member", "nonmember"} <= table.columns.keys()
    if paired:
        splits = {side: _passages(table, side, table.columns[side], side, skip_missing=True)
                  for side in ("member", "nonmember")}
    else:
        text = text_column or next((c for c in TEXT_COLUMNS if c in table.columns), TEXT_COLUMNS[0])
        texts = table.column(text, "option --text-column: " if text_column else where)
        labels = table.column(label_column or "label", "option --label-column: " if label_column else where)
        sides = [_side(table, n, v) for n, v in enumerate(labels)]
        splits = {side: _passages(table, text, texts, side, only=[s == side for s in sides])
                  for side in ("member", "nonmember")}
    for side, ps in splits.items():
        if not ps:
            raise InputError(f"{where}{table.name}: no {side}s; a membership benchmark needs both")
    rows = [[p["id"], p["text"], side] for side, ps in splits.items() for p in ps]
    source = {"spec": spec, "id": table.spec.repo_id, "config": table.spec.config, "split": table.split,
              "revision": table.spec.revision, "commit": table.snapshot.commit, "files": table.files,
              "rows_sha256": sha256(rows)}
    return splits, source


def _side(table, row: int, value) -> str:
    """A label's side: member or nonmember; InputError naming the row otherwise."""
    key = value.strip().lower() if isinstance(value, str) else value
    if key in MEMBER_VALUES:
        return "member"
    if key in NONMEMBER_VALUES:
        return "nonmember"
    raise InputError(f"option --dataset: {table.where(row)}: label {value!r}; expected 1 or true (a member), "
                     f"0 or false (a non-member)")


def _passages(table, column: str, texts: list, side: str, skip_missing: bool = False,
              only: list[bool] | None = None) -> list[dict]:
    """{id, text} of each row's text in ``texts`` (rows ``only`` leaves out, and missing texts of a
    paired table, skipped); ids ``SPLIT/SIDE:ROW``, or the dataset's ``id`` column."""
    ids = table.columns.get("id") if not {"member", "nonmember"} <= table.columns.keys() else None
    out = []
    for n, t in enumerate(texts):
        if (only is not None and not only[n]) or (t is None and skip_missing and only is None):
            continue
        if not isinstance(t, str) or not t.strip():
            raise InputError(f"option --dataset: {table.where(n)}: `{column}` is "
                             f"{'empty' if isinstance(t, str) else type(t).__name__}; expected the passage's text")
        out.append({"id": f"{table.split}/{side}:{n}" if not ids or ids[n] is None else str(ids[n]), "text": t})
    return out
