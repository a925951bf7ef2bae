"""Reading passages from the user's files and pairing suspect with held-out passages;
reading and checking features tables (``read_features``, ``split_features``).

Accepted inputs (docs/architecture.md, "Conventions"): JSONL with a ``text`` field, Parquet or CSV
with a ``text`` column, a ``.txt`` file (one passage per non-empty line), a folder of
``.txt`` files (one passage each), a Hugging Face dataset saved with ``save_to_disk``, or one on the
hub named ``hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION]`` (``trainspotter.hub_data``; the commit read is
kept, ``hub_source``).
Every problem raises :class:`InputError` naming the file, the line/row and the problem;
nothing is dropped silently.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

from trainspotter.errors import InputError

Passage = dict  # {"id": str, "text": str} and, where the file says, "set": "suspect" | "heldout"
SET_LABELS = ("suspect", "heldout")  # the `set` of a passage, of a features-table row


def _check_text(path: Path, where: str, value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"{path}:{where}: `text` must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"{path}:{where}: `text` is empty")
    return value


def _set_field(path: Path, where: str, value: object) -> dict:
    """``{"set": label}`` for a passage's `set` value; ``{}`` where it has none (no field,
    null, an empty or NaN cell)."""
    if value is None or value == "" or value != value:
        return {}
    if value not in SET_LABELS:
        raise InputError(f"{path}:{where}: `set` is {value!r}; expected 'suspect' or 'heldout'")
    return {"set": value}


def _decode(path: Path, raw: bytes, line: int | None = None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if line is None:  # whole file: report the line of the bad byte
            line = raw[: e.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[e.start]:02x})") from None


def _read_jsonl(path: Path) -> list[Passage]:
    rows = []
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        line = _decode(path, raw, n).strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict) or "text" not in obj:
            raise InputError(f"{path}:{n}: no `text` field")
        rows.append({"id": str(obj.get("id", f"{path.name}:{n}")),
                     "text": _check_text(path, str(n), obj["text"])}
                    | _set_field(path, str(n), obj.get("set")))
    return rows


def _read_table(path: Path) -> list[Passage]:
    import pandas as pd

    try:
        if path.suffix == ".csv":  # decoded first, for the line of a bad byte
            df = pd.read_csv(io.StringIO(_decode(path, path.read_bytes())), dtype={"text": object, "id": object},
                             keep_default_na=False)
        else:
            df = pd.read_parquet(path)
    except InputError:
        raise
    except Exception as e:  # pandas/pyarrow parse errors carry their own detail
        raise InputError(f"{path}: cannot read as {path.suffix[1:]}: {e}") from None
    if "text" not in df.columns:
        raise InputError(f"{path}: no `text` column (columns: {', '.join(map(str, df.columns))})")
    ids = df["id"].astype(str) if "id" in df.columns else [f"{path.name}:{i}" for i in range(len(df))]
    # CSV rows are numbered like a spreadsheet: the header is row 1.
    offset = 2 if path.suffix == ".csv" else 0
    sets = df["set"] if "set" in df.columns else [None] * len(df)
    return [{"id": i, "text": _check_text(path, f"row {r + offset}", t)}
            | _set_field(path, f"row {r + offset}", label)
            for r, (i, t, label) in enumerate(zip(ids, df["text"], sets))]


def _read_txt(path: Path) -> list[Passage]:
    text = _decode(path, path.read_bytes())
    return [{"id": f"{path.name}:{n}", "text": line.strip()}
            for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _read_json(path: Path) -> object:
    try:
        return json.loads(_decode(path, path.read_bytes()))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None


def _read_saved_dataset(path: Path) -> list[Passage]:
    """A ``datasets.Dataset.save_to_disk`` folder, read with pyarrow alone (``datasets`` is
    not a dependency): ``state.json`` lists the shards in order under ``_data_files``; each
    shard is an Arrow IPC *stream* file. Rows are numbered from 0 across shards, as
    ``ds[n]`` numbers them."""
    import pyarrow as pa

    state_path = path / "state.json"
    if not state_path.is_file():
        raise InputError(f"{state_path}: missing; not a complete `save_to_disk` folder")
    state = _read_json(state_path)
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files or not all(
            isinstance(f, dict) and isinstance(f.get("filename"), str) for f in files):
        raise InputError(f"{state_path}: no `_data_files` list of {{\"filename\": ...}} entries")
    rows: list[Passage] = []
    for entry in files:
        shard = path / entry["filename"]
        if not shard.is_file():
            raise InputError(f"{shard}: data file listed in {state_path.name} is missing")
        try:
            with pa.memory_map(str(shard)) as source:
                table = pa.ipc.open_stream(source).read_all()
        except (pa.ArrowException, OSError) as e:
            raise InputError(f"{shard}: cannot read as an Arrow stream: {e}") from None
        if "text" not in table.column_names:
            raise InputError(f"{shard}: no `text` column (columns: {', '.join(table.column_names)})")
        column = lambda name: (table.column(name).to_pylist() if name in table.column_names  # noqa: E731
                               else [None] * table.num_rows)
        for i, t, label in zip(column("id"), column("text"), column("set")):
            n = len(rows)
            rows.append({"id": f"{path.name}:{n}" if i is None else str(i),
                         "text": _check_text(path, f"row {n}", t)}
                        | _set_field(path, f"row {n}", label))
    return rows


def _read_folder(path: Path) -> list[Passage]:
    if (path / "dataset_dict.json").is_file():  # DatasetDict.save_to_disk: one folder per split
        info = _read_json(path / "dataset_dict.json")
        splits = info.get("splits") if isinstance(info, dict) else None
        names = ", ".join(str(path / str(s)) for s in splits) if isinstance(splits, list) and splits else (
            ", ".join(str(p) for p in sorted(path.iterdir()) if (p / "state.json").is_file()) or "none found")
        raise InputError(f"{path}: a saved Hugging Face DatasetDict holds several splits; "
                         f"give one split's folder instead: {names}")
    if (path / "dataset_info.json").is_file() or (path / "state.json").is_file():
        return _read_saved_dataset(path)
    files = sorted(path.glob("*.txt"))
    if not files:
        raise InputError(f"{path}: folder has no .txt files")
    rows = []
    for f in files:
        rows.append({"id": f.name, "text": _check_text(f, "1", _decode(f, f.read_bytes()).strip())})
    return rows


READERS = {".jsonl": _read_jsonl, ".json": _read_jsonl, ".csv": _read_table,
           ".parquet": _read_table, ".txt": _read_txt}


_HUB_READS: dict[tuple[str, str], dict] = {}  # (spec, cache) → what the last read of it read (``hub_source``)


def _read_hub(spec: str, text_column: str | None = None) -> list[Passage]:
    """The passages of a hub dataset's split: its ``text_column`` (default: the first of
    ``hub_data.TEXT_COLUMNS`` it has), ids from an ``id`` column or ``SPLIT:ROW``, ``set`` where
    a column says."""
    from trainspotter.hub import cache_dir
    from trainspotter.hub_data import TEXT_COLUMNS, read_hub_table

    table = read_hub_table(spec)
    name = text_column or next((c for c in TEXT_COLUMNS if c in table.columns), TEXT_COLUMNS[0])
    texts = table.column(name, "option --text-column: " if text_column else "")
    ids, sets = table.columns.get("id") or [None] * len(texts), table.columns.get("set") or [None] * len(texts)
    rows = []
    for n, (i, t, label) in enumerate(zip(ids, texts, sets)):
        file, r = table.origins[n]
        where = f"{table.name} ({file})"
        rows.append({"id": f"{table.split}:{n}" if i is None else str(i), "text": _check_text(where, f"row {r}", t)}
                    | _set_field(where, f"row {r}", label))
    _HUB_READS[(spec, str(cache_dir()))] = {"id": table.spec.repo_id, "config": table.spec.config,
                                             "split": table.split, "revision": table.spec.revision,
                                             "commit": table.snapshot.commit, "files": table.files,
                                             "snapshot": str(table.snapshot.path)}
    return rows


def hub_source(spec: str) -> dict | None:
    """What ``spec`` (a hub dataset) was read from: id, config, split, revision asked, the commit
    and the files (the last read of it in this process; read again where there was none), or None
    for a local path."""
    from trainspotter.hub import cache_dir
    from trainspotter.hub_data import is_hub_dataset

    if not is_hub_dataset(spec):
        return None
    if (spec, str(cache_dir())) not in _HUB_READS:
        _read_hub(spec)
    return {k: v for k, v in _HUB_READS[(spec, str(cache_dir()))].items() if k != "snapshot"}


def hub_files(spec: str) -> list[Path] | None:
    """The files of the snapshot a hub dataset's passages were read from (``hub_source``), or None
    for a local path."""
    source = hub_source(spec)
    if source is None:
        return None
    from trainspotter.hub import cache_dir

    root = Path(_HUB_READS[(spec, str(cache_dir()))]["snapshot"])
    return [root / f for f in source["files"]]


def load_passages(path: str | Path, text_column: str | None = None) -> list[Passage]:
    """All passages of a file or folder, in file order, or of a hub dataset's split (``text_column``:
    where its text is, for a hub dataset only)."""
    from trainspotter.hub_data import is_hub_dataset

    if is_hub_dataset(path):
        rows = _read_hub(str(path), text_column)
        if not rows:
            raise InputError(f"{path}: no passages (the split is empty)")
        return rows
    if text_column is not None:
        raise InputError(f"option --text-column: applies to a hub dataset (hf:ORG/NAME…) only; {path} is a "
                         f"local file, whose text is its `text` field")
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_dir():
        rows = _read_folder(path)
    else:
        reader = READERS.get(path.suffix.lower())
        if reader is None:
            raise InputError(f"{path}: unsupported format {path.suffix!r} "
                             f"(use .jsonl, .csv, .parquet, .txt or a folder)")
        rows = reader(path)
    if not rows:
        raise InputError(f"{path}: no passages (the file is empty)")
    return rows


def check_disjoint(suspect_path: str | Path, suspect: list[Passage], heldout_path: str | Path,
                   heldout: list[Passage]) -> None:
    """Raise InputError if a passage (whitespace-normalised text) is in both sets: a pair
    whose two sides are the same text has u_t = 0 and, worse, held-out passages that were
    trained on break the exchangeability under H0 that the test relies on."""
    norm = lambda text: " ".join(text.split())  # noqa: E731
    held = {}
    for p in heldout:
        held.setdefault(norm(p["text"]), p["id"])
    shared = [(p["id"], held[key]) for p in suspect if (key := norm(p["text"])) in held]
    if shared:
        (sid, hid), n = shared[0], len(shared)
        raise InputError(f"{suspect_path} and {heldout_path}: {n} passage{'s' * (n > 1)} in both sets "
                         f"(e.g. suspect id {sid!r} = held-out id {hid!r}); the sets must be disjoint, "
                         f"or the test's exchangeability under H0 does not hold")


def load_labeled(data: str | Path | None = None, suspect: str | Path | None = None,
                 heldout: str | Path | None = None) -> list[Passage]:
    """Passages for a features table that ``trainspotter test``/``simulate`` can use: the
    passages of ``suspect`` (labelled "suspect") then those of ``heldout`` (disjoint sets,
    see ``check_disjoint``), or those of ``data`` with the `set` its rows carry (all rows
    or none: a table half labelled would silently leave passages out of the test)."""
    if data is not None and (suspect is not None or heldout is not None):
        raise InputError("give the passages either as --data or as --suspect and --heldout, not both")
    if data is not None:
        passages = load_passages(data)
        unlabelled = [p for p in passages if "set" not in p]
        if unlabelled and len(unlabelled) < len(passages):
            raise InputError(f"{data}: passage {unlabelled[0]['id']!r} has no `set` while others have one; "
                             f"label every passage 'suspect' or 'heldout', or none")
        return passages
    if suspect is None or heldout is None:
        raise InputError("give the passages as --data FILE, or as --suspect FILE and --heldout FILE")
    sides = {"suspect": load_passages(suspect), "heldout": load_passages(heldout)}
    check_disjoint(suspect, sides["suspect"], heldout, sides["heldout"])
    return [p | {"set": side} for side, passages in sides.items() for p in passages]


def query_fields(p: Passage) -> Passage:
    """What a passage's feature row depends on: its id and text and, in a twins audit, its twin's
    text (the changed-position features). Only these reach extraction and its cache key (a `set`
    label read from a user's file must not be served to the next run of the same texts)."""
    return {"id": p["id"], "text": p["text"]} | ({"twin": p["twin"]} if p.get("twin") is not None else {})


def make_pairs(suspect: list[Passage], heldout: list[Passage], seed: int = 0,
               max_pairs: int | None = None, paired: bool = False) -> list[tuple[Passage, Passage]]:
    """Pairs Z_t = (X_t, Y_t) (BADI Sec. 4): each side shuffled with its own seeded
    generator, then zipped; the pair count is the smaller side (capped by max_pairs).
    Random order makes the pairs exchangeable under H0, which the e-process needs.
    ``paired``: the sides are aligned (``suspect[i]`` and ``heldout[i]`` are two versions of one
    passage: twins, ``trainspotter.twins``), and each pair keeps them together, in an order
    shuffled once for both; exchangeable under H0 because which version is public was drawn at
    random, per passage."""
    return [(suspect[i], heldout[j])
            for i, j in pair_indices(len(suspect), len(heldout), seed, max_pairs, paired)]


def pair_indices(n_suspect: int, n_heldout: int, seed: int = 0,
                 max_pairs: int | None = None, paired: bool = False) -> list[tuple[int, int]]:
    """The audit's pairs as row numbers of each side (``make_pairs`` on rows 0..n-1): a
    features table whose suspect and held-out rows are in the order of their files (as
    ``trainspotter extract`` writes them) is paired by ``trainspotter test`` exactly as the
    audit paired the passages, so the same seed gives the same e-value."""
    if paired:
        if n_suspect != n_heldout:
            raise InputError(f"paired sides differ in length ({n_suspect} suspect, {n_heldout} held-out): "
                             f"each passage needs exactly one version on each side")
        order = list(range(n_suspect))
        random.Random(f"{seed}:paired").shuffle(order)
        return [(i, i) for i in order[:max_pairs or n_suspect]]
    xs, ys = list(range(n_suspect)), list(range(n_heldout))
    random.Random(f"{seed}:suspect").shuffle(xs)
    random.Random(f"{seed}:heldout").shuffle(ys)
    n = min(len(xs), len(ys), max_pairs or len(xs))
    return list(zip(xs[:n], ys[:n]))


def read_features(path: str | Path):
    """Read a Parquet or CSV features table (``trainspotter test``/``simulate``), or raise
    InputError naming the file."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".tsv"):
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
    except Exception as e:  # pyarrow / pandas parse errors come in many types
        raise InputError(f"{path}: cannot read the features table ({type(e).__name__}: {e})") from None
    raise InputError(f"{path}: unsupported file type {suffix or '(none)'!r}; use .parquet or .csv")


def split_features(df, feature_cols: list[str] | None = None):
    """Check a features table; return (suspect rows, held-out rows, columns) as float arrays.

    The table has a ``set`` column in {"suspect", "heldout"} and one numeric column per
    feature; non-numeric columns (id, text, …) are ignored. Raises InputError naming the
    column/row and the problem.
    """
    import numpy as np
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise InputError("features table must be a pandas DataFrame")
    if "set" not in df.columns:
        raise InputError(f"features table has no 'set' column saying which rows are 'suspect' and "
                         f"which 'heldout' (columns: {', '.join(map(str, df.columns))}); `trainspotter extract "
                         f"--suspect A --heldout B` writes it, as does a `set` field in the passages it reads")
    labels = df["set"].astype(str)
    bad = ~labels.isin(SET_LABELS)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise InputError(f"row {i}: column 'set' has unknown label {df['set'].iloc[i]!r} "
                         f"(expected 'suspect' or 'heldout')")
    if feature_cols is None:
        feature_cols = [c for c in df.columns if c != "set" and pd.api.types.is_numeric_dtype(df[c])
                        and not pd.api.types.is_bool_dtype(df[c]) and str(c).lower() not in ("id", "index")]
    else:
        missing = [c for c in feature_cols if c not in df.columns]
        if missing:
            raise InputError(f"feature column(s) not in the table: {', '.join(map(str, missing))}")
        nonnum = [c for c in feature_cols if not pd.api.types.is_numeric_dtype(df[c])]
        if nonnum:
            raise InputError(f"feature column {nonnum[0]!r} is not numeric")
    if not feature_cols:
        raise InputError("features table has no numeric feature column")
    values = df[feature_cols].to_numpy(dtype=float)
    nonfinite = ~np.isfinite(values)
    if nonfinite.any():
        i, j = np.argwhere(nonfinite)[0]
        raise InputError(f"row {int(i)}: column {feature_cols[j]!r} is {values[i, j]} (NaN/inf values are not allowed)")
    for name in SET_LABELS:
        if not (labels == name).any():
            raise InputError(f"features table has no {name!r} rows in column 'set'")
    is_s = (labels == "suspect").to_numpy()
    return values[is_s], values[~is_s], list(feature_cols)
