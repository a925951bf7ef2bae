"""Datasets named by Hugging Face hub id: ``hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION]``, resolved to one
snapshot of the local hub cache (``trainspotter.hub``: the commit is what an audit keeps), whose data
files are read with pyarrow alone (``datasets`` is not a dependency).

Which files make a config's split follows the hub's conventions, as ``datasets`` reads them: the
README.md YAML ``configs:`` (``data_files`` per split, ``data_dir``) when present; else, within the
CONFIG's folder when one is named, the default patterns of ``datasets.data_files`` (first
``data/{split}-NNNNN-of-NNNNN*.*``, as ``push_to_hub`` writes; then ``train``/``validation``/``test``
named by a folder, then by a file name; else every file is ``train``), and, for a split those do not
name, a folder or file named after it (``members/…``, ``members-0.parquet``, ``data/members.jsonl``).
MIMIR's script layout (``cache_*/train/CONFIG_SPLIT.jsonl`` members and ``cache_*/test/…``
non-members, one JSON string a line, as its ``mimir.py`` reads them) gives ``member`` and
``nonmember`` columns. Every problem is one ``InputError`` naming the id and what exists instead."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from trainspotter.errors import InputError
from trainspotter.hub import HUB_ID, Snapshot, resolve_snapshot, split_revision

__all__ = ["PREFIX", "TEXT_COLUMNS", "DatasetSpec", "HubTable", "is_hub_dataset", "parse_spec", "read_hub_table"]

PREFIX = "hf:"
TEXT_COLUMNS = ("text", "input")  # where a passage's text is, unless --text-column names it (WikiMIA: input)
DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
IGNORED = {"README.md", "config.json", "dataset_info.json", "dataset_infos.json", "dataset_dict.json"}
SEP = "-._ 0-9"  # datasets' NON_WORDS_CHARS: what may sit beside a split's name in a file name
KEYWORDS = {"train": ("train", "training"), "validation": ("validation", "valid", "dev", "val"),
            "test": ("test", "testing", "eval", "evaluation")}
SHARDED = re.compile(r"data/(?P<split>\w+)-\d{5}-of-\d{5}[^/]*\.[^/]+")


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset as named: the repository, its config and split (None: the only or default one)
    and the revision (None: the default branch)."""

    repo_id: str
    config: str | None = None
    split: str | None = None
    revision: str | None = None

    @property
    def spec(self) -> str:
        """The spec as written: ``hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION]``."""
        return (f"{PREFIX}{self.repo_id}" + (f":{self.config}" if self.config else "")
                + (f"/{self.split}" if self.split else "") + (f"@{self.revision}" if self.revision else ""))


def is_hub_dataset(value: str | Path) -> bool:
    """Whether ``value`` names a hub dataset: ``hf:…`` that is no local path (``hf:PATH`` of an
    existing file or folder is that file or folder, as a model's ``hf:PATH`` is)."""
    text = str(value)
    return text.startswith(PREFIX) and not Path(text).exists() and not Path(text[len(PREFIX):]).exists()


def parse_spec(value: str, where: str = "") -> DatasetSpec:
    """``hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION]`` → DatasetSpec, or InputError saying the form."""
    name, revision = split_revision(str(value).removeprefix(PREFIX))
    parts = name.split("/")
    repo, _, config = "/".join(parts[:2]).partition(":")
    if len(parts) not in (2, 3) or not HUB_ID.fullmatch(repo) \
            or (len(parts) == 3 and not parts[2]) or (":" in name and not config):
        raise InputError(f"{where}{value}: not a hub dataset; write hf:ORG/NAME[:CONFIG][/SPLIT][@REVISION], "
                         f"e.g. hf:swj0419/WikiMIA/WikiMIA_length64")
    return DatasetSpec(repo, config or None, parts[2] if len(parts) == 3 else None, revision)


@dataclass
class HubTable:
    """The rows of one config's split: ``columns`` by name (values in file order), ``files`` read
    (paths in the snapshot) and ``origins`` (per row, its file and row number there)."""

    spec: DatasetSpec
    snapshot: Snapshot
    split: str
    files: list[str]
    columns: dict[str, list]
    origins: list[tuple[str, int]]

    @property
    def name(self) -> str:
        """What the rows are: ``hf:ORG/NAME[:CONFIG]/SPLIT@COMMIT``."""
        return DatasetSpec(self.spec.repo_id, self.spec.config, self.split, self.snapshot.commit).spec

    def where(self, row: int) -> str:
        """Row ``row`` as a message names it: the dataset, its file and row there."""
        file, n = self.origins[row]
        return f"{self.name} ({file} row {n})"

    def column(self, name: str, option: str = "") -> list:
        """The values of column ``name``, or InputError naming the columns there are."""
        if name not in self.columns:
            raise InputError(f"{option}{self.name}: no column {name!r} (columns: {', '.join(self.columns)})")
        return self.columns[name]


def read_hub_table(value: str, where: str = "") -> HubTable:
    """The rows ``value`` (a hub dataset spec) names, read from its cached snapshot (fetched first
    where downloads are allowed). ``where`` prefixes every message (e.g. "option --suspect: ")."""
    spec = parse_spec(value, where)
    snapshot = resolve_snapshot(spec.repo_id, spec.revision, repo_type="dataset", where=where)
    files = _data_files(snapshot.path)
    split, chosen = _select(spec, snapshot.path, files, where)
    if chosen and isinstance(chosen, tuple):  # MIMIR's layout: member and non-member files
        return _mimir_table(spec, snapshot, split, *chosen)
    columns, origins = _read_files(snapshot.path, chosen, f"{where}{spec.spec}")
    return HubTable(spec, snapshot, split, chosen, columns, origins)


def _data_files(root: Path) -> list[str]:
    """The snapshot's data files (relative posix paths, sorted), hidden ones and metadata left out."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not any(s.startswith((".", "__")) for s in rel.parts) and rel.as_posix() not in IGNORED \
                and p.name.lower().endswith(DATA_SUFFIXES):
            out.append(rel.as_posix())
    return out


def glob_regex(pattern: str) -> re.Pattern:
    """An fsspec glob as ``datasets`` resolves it: ``**/`` any folders (none too), ``**`` anything,
    ``*`` and ``?`` within one path part, ``[...]`` a character class."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1:]:
            end = pattern.index("]", i + 1)
            out, i = out + "[" + re.escape(pattern[i + 1:end]).replace("\\-", "-") + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _matching(files: list[str], patterns: list[str], base: str = "") -> list[str]:
    regexes = [glob_regex(f"{base}{p}".lstrip("/")) for p in patterns]
    return [f for f in files if any(r.fullmatch(f) for r in regexes)]


def _select(spec: DatasetSpec, root: Path, files: list[str], where: str) -> tuple[str, list[str] | tuple]:
    """The split's name and its files: from the YAML configs, else the default conventions."""
    label = f"{where}{spec.spec}"
    configs = yaml_configs(root / "README.md", label)
    if configs:
        name = choose(spec.config, configs, label, "config", default=_default_config(configs))
        c = configs[name]
        splits = default_splits(files, c["data_dir"], spec.split) if c["data_files"] is None else \
            {s: _matching(files, pats, c["data_dir"]) for s, pats in c["data_files"].items()}
    else:
        base = ""
        if spec.config:
            if mimir := mimir_files(files, spec.config):
                split = choose(spec.split, mimir, label, "split")
                return split, mimir[split]
            folders = sorted({f.split("/")[0] for f in files if "/" in f})
            if spec.config not in folders:
                raise InputError(f"{label}: no config {spec.config!r} (configs: {', '.join(folders) or 'none'})")
            base = spec.config + "/"
        splits = default_splits(files, base, spec.split)
        if spec.split is not None and spec.split not in splits:
            split = choose(spec.split, splits, label, "split", more=_names([f[len(base):] for f in files
                                                                            if f.startswith(base)]))
    split = choose(spec.split, splits, label, "split")
    if not splits[split]:
        raise InputError(f"{label}: split {split!r} has no data file (.parquet, .jsonl, .json or .csv)")
    return split, splits[split]


def yaml_configs(readme: Path, label: str) -> dict[str, dict]:
    """The README.md YAML ``configs:`` that name data files: config name → ``{"data_files": {split:
    [patterns]}, "data_dir": "…/", "default": bool}`` ({} without any; a loading script's configs,
    which name no files, are not read)."""
    import yaml

    text = readme.read_text(encoding="utf-8", errors="replace") if readme.is_file() else ""
    if not text.startswith("---"):
        return {}
    try:
        meta = yaml.safe_load(text[3:].split("\n---", 1)[0]) or {}
    except yaml.YAMLError as e:
        raise InputError(f"{label}: README.md front matter is not YAML ({str(e).splitlines()[0]})") from None
    out = {}
    for c in meta.get("configs") or [] if isinstance(meta, dict) else []:
        if isinstance(c, dict) and (c.get("data_files") or c.get("data_dir")):
            data_dir = str(c.get("data_dir") or "").strip("/")
            files = _patterns(c["data_files"]) if c.get("data_files") else None  # None: the defaults in data_dir
            out[str(c.get("config_name", "default"))] = {"data_files": files, "default": bool(c.get("default")),
                                                         "data_dir": data_dir + "/" if data_dir else ""}
    return out


def _patterns(data_files) -> dict[str, list[str]]:
    """A config's ``data_files`` as ``datasets`` reads it: a pattern or list of them (split train),
    a list of ``{split, path}`` entries, or a mapping split → pattern(s)."""
    if isinstance(data_files, str):
        return {"train": [data_files]}
    if isinstance(data_files, dict):
        return {str(k): v if isinstance(v, list) else [v] for k, v in data_files.items()}
    if all(isinstance(d, dict) for d in data_files):
        return {str(d.get("split", "train")): d["path"] if isinstance(d.get("path"), list) else [d.get("path")]
                for d in data_files}
    return {"train": [str(d) for d in data_files]}


def default_splits(files: list[str], base: str, wanted: str | None) -> dict[str, list[str]]:
    """The splits ``datasets`` finds without YAML configs (under ``base``): ``data/{split}-NNNNN-of-
    NNNNN*.*``, else train/validation/test by folder, else by file name, else all files as train;
    and ``wanted``, where those do not name it, by a folder or file named after it."""
    inside = [f[len(base):] for f in files if f.startswith(base)]
    splits: dict[str, list[str]] = {}
    for f in inside:
        if m := SHARDED.fullmatch(f):
            splits.setdefault(m["split"], []).append(f)
    for patterns in (("**/{k}/**", "**/{k}[{s}]*/**", "**/*[{s}]{k}/**", "**/*[{s}]{k}[{s}]*/**"),
                     ("**/{k}[{s}]*", "**/*[{s}]{k}[{s}]*")):
        if splits:
            break
        for split, keys in KEYWORDS.items():
            if found := _matching(inside, [p.format(k=k, s=SEP) for k in keys for p in patterns]):
                splits[split] = found
    splits = splits or ({"train": inside} if inside else {})
    if wanted and wanted not in splits:
        named = _matching(inside, [p.format(k=wanted, s=SEP) for p in
                                   ("**/{k}/**", "**/{k}[{s}]*", "**/*[{s}]{k}[{s}]*")])
        if named:
            splits[wanted] = named
    return {s: [base + f for f in fs] for s, fs in splits.items()}


def _names(files: list[str]) -> list[str]:
    """What a split could be named after in a folder without conventions: its folders and file stems."""
    return sorted({re.split(f"[{SEP}]", f.split("/")[0])[0] if "/" not in f else f.split("/")[0] for f in files}
                  - {""})


def mimir_files(files: list[str], config: str) -> dict[str, tuple[str, str]]:
    """MIMIR's script layout (its ``mimir.py``): split → (member file, non-member file), the members
    ``cache_*/train/CONFIG_SPLIT.jsonl``, the non-members the same name under ``test/`` (split
    ``none``: ``CONFIG.jsonl``)."""
    pattern = re.compile(rf"(?P<dir>[^/]+/)?train/{re.escape(config)}(?:_(?P<split>[^/]+))?\.jsonl")
    out = {}
    for f in files:
        m = pattern.fullmatch(f)
        test = f"{m['dir'] or ''}test/{f.rsplit('/', 1)[1]}" if m else None
        if m and test in files:
            out.setdefault(m["split"] or "none", (f, test))
    return out


def choose(wanted: str | None, options: dict, label: str, what: str, default: str | None = None,
           more: list[str] = ()) -> str:
    """The ``what`` (config, split) ``wanted`` names, else the default or only one; InputError
    naming those there are."""
    names = ", ".join(dict.fromkeys([*options, *more])) or "none"
    if wanted is not None:
        if wanted not in options:
            raise InputError(f"{label}: no {what} {wanted!r} ({what}s: {names})")
        return wanted
    if default in options:
        return default
    if len(options) == 1:
        return next(iter(options))
    form = "hf:ORG/NAME:CONFIG" if what == "config" else "hf:ORG/NAME[:CONFIG]/SPLIT"
    raise InputError(f"{label}: {len(options)} {what}s ({names}); name one: {form}")


def _default_config(configs: dict) -> str | None:
    marked = [n for n, c in configs.items() if c.get("default")]
    return marked[0] if marked else ("default" if "default" in configs else None)


def _read_files(root: Path, files: list[str], label: str) -> tuple[dict[str, list], list[tuple[str, int]]]:
    """Every file's rows, concatenated in order; columns absent from a file are None there."""
    columns: dict[str, list] = {}
    origins: list[tuple[str, int]] = []
    for f in files:
        table = _read_file(root / f, f"{label} ({f})")
        for name in columns.keys() - table.keys():
            table[name] = [None] * len(next(iter(table.values()), []))
        n = len(next(iter(table.values()), []))
        for name, values in table.items():
            columns.setdefault(name, [None] * len(origins)).extend(values)
        origins += [(f, i) for i in range(n)]
    return columns, origins


def _read_file(path: Path, label: str) -> dict[str, list]:
    """One data file's columns (pyarrow): Parquet, JSON Lines (or a JSON list of objects), CSV."""
    import pyarrow as pa

    try:
        suffix = path.name.lower().rsplit(".", 1)[-1]
        if suffix == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pydict()
        if suffix == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path).to_pydict()
        if path.read_bytes().lstrip()[:1] == b"[":  # a .json file holding one list of objects
            return pa.Table.from_pylist(json.loads(path.read_bytes())).to_pydict()
        import pyarrow.json as pjson

        return pjson.read_json(path).to_pydict()
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        raise InputError(f"{label}: cannot read ({type(e).__name__}: {str(e).splitlines()[0]})") from None


def _mimir_table(spec: DatasetSpec, snapshot: Snapshot, split: str, member: str, nonmember: str) -> HubTable:
    """MIMIR's script layout: line i of the member file and of the non-member file, each a JSON
    string, are row i's ``member`` and ``nonmember`` (a file longer than the other: None there)."""
    label = f"{spec.spec}"
    sides = []
    for f in (member, nonmember):
        lines = [ln for ln in (snapshot.path / f).read_bytes().splitlines() if ln.strip()]
        try:
            sides.append([json.loads(ln) for ln in lines])
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"{label} ({f}): not one JSON string a line ({e})") from None
    n = max(map(len, sides))
    cols = {name: values + [None] * (n - len(values)) for name, values in zip(("member", "nonmember"), sides)}
    return HubTable(spec, snapshot, split, [member, nonmember], cols, [(f"{member}|{nonmember}", i) for i in range(n)])
