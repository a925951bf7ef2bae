"""A battery of bad inputs through the CLI verbs, each run as a user runs it (a process of its own).

Every case must end with exit status 2, exactly one stderr line ``error: …`` that names the
file (and line/row where there is one) and the problem, no traceback, and nothing new or
changed under the artifacts folder or the --out folder (bad input is caught before any
flow starts or model loads).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from isolated_env import env_for
from cli_process import run_cli



def run(*args, artifacts: Path | None = None):
    env = env_for(artifacts) if artifacts else os.environ
    return run_cli([str(a) for a in args], env=env, timeout=300)


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def f(tmp_path_factory, mini_testbed) -> Path:
    """The bad (and a few good) input files, written once."""
    d = tmp_path_factory.mktemp("bad-inputs")
    (d / "out").mkdir()
    held = [json.loads(line) for line in (mini_testbed / "heldout.jsonl").read_text().splitlines()]
    good = [{"id": f"s{i}", "text": f"A suspect passage number {i} about something."} for i in range(20)]
    jl = lambda rows: "".join(json.dumps(r) + "\n" for r in rows)  # noqa: E731
    (d / "good.jsonl").write_text(jl(good))
    (d / "empty.jsonl").write_bytes(b"")
    with open(d / "deep.jsonl", "w") as out:  # line 40000 of 40010 is cut short
        for i in range(1, 40011):
            out.write('{"text": "cut' + "\n" if i == 40000 else json.dumps({"text": f"passage {i}"}) + "\n")
    (d / "no_text.jsonl").write_text(jl(good[:2]) + json.dumps({"body": "x"}) + "\n")
    (d / "int_text.jsonl").write_text(jl(good[:1]) + json.dumps({"text": 42}) + "\n")
    (d / "null_text.jsonl").write_text(jl(good[:3]) + json.dumps({"text": None}) + "\n")
    (d / "blank_text.jsonl").write_text(jl(good[:4]) + json.dumps({"text": "  \t "}) + "\n")
    (d / "latin1.jsonl").write_bytes(jl(good[:1]).encode() + '{"text": "café"}\n'.encode("latin-1"))
    (d / "latin1.txt").write_bytes(b"first passage\nsecond passage\ncaf\xe9 au lait\n")
    (d / "no_text.csv").write_text("id,body\n1,hello\n2,world\n")
    pd.DataFrame(good).to_parquet(d / "whole.parquet")
    data = (d / "whole.parquet").read_bytes()
    (d / "truncated.parquet").write_bytes(data[: len(data) // 2])
    (d / "no_txt_folder").mkdir()
    (d / "no_txt_folder" / "notes.md").write_text("not a passage file")
    (d / "passages.xlsx").write_bytes(b"PK\x03\x04")
    # 19 own passages + one held-out passage with its whitespace changed
    (d / "overlap.jsonl").write_text(jl(good[:19] + [{"id": "copy", "text": "  " + held[7]["text"].replace(" ", "  ")}]))
    (d / "one.jsonl").write_text(jl(good[:1]))
    # features tables for `test` / `simulate`
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"id": [f"p{i}" for i in range(40)], "set": ["suspect", "heldout"] * 20,
                          "f1": rng.normal(size=40), "f2": rng.normal(size=40)})
    table.to_parquet(d / "features.parquet")
    table.assign(f1=table.f1.where(table.index != 5, np.nan)).to_csv(d / "nan.csv", index=False)
    table.assign(f2=table.f2.where(table.index != 7, np.inf)).to_parquet(d / "inf.parquet")
    table.drop(columns="set").to_parquet(d / "no_set.parquet")
    table.assign(set=table.set.where(table.index != 3, "member")).to_csv(d / "bad_label.csv", index=False)
    table.assign(set="suspect").to_parquet(d / "no_heldout.parquet")
    table[["id", "set"]].to_csv(d / "no_features.csv", index=False)
    data = (d / "features.parquet").read_bytes()
    (d / "features_truncated.parquet").write_bytes(data[: len(data) // 2])
    (d / "features_latin1.csv").write_bytes(b"set,f1,note\nsuspect,1.0,caf\xe9\nheldout,2.0,ok\n")
    return d


def audit(f, suspect="good.jsonl", heldout=None, model="testbed:mini", *extra):
    held = heldout or str(Path(os.environ["TRAINSPOTTER_ARTIFACTS"]) / "testbeds" / "mini" / "heldout.jsonl")
    return ["audit", "--suspect", f / suspect, "--heldout", held, "--model", model, *extra]


API = "openai:m@http://127.0.0.1:9/v1"
# id -> (args given the inputs folder, substrings the one error line must contain, in order)
CASES = {
    # --- passages (audit reads them before anything else) ---
    "missing-file": (lambda f: audit(f, "missing.jsonl"), ["{f}/missing.jsonl: no such file"]),
    "empty-file": (lambda f: audit(f, "empty.jsonl"), ["{f}/empty.jsonl: no passages"]),
    "malformed-json-line-40000": (lambda f: audit(f, "deep.jsonl"), ["{f}/deep.jsonl:40000: invalid JSON"]),
    "missing-text-field": (lambda f: audit(f, "no_text.jsonl"), ["{f}/no_text.jsonl:3: no `text` field"]),
    "non-string-text": (lambda f: audit(f, "int_text.jsonl"),
                        ["{f}/int_text.jsonl:2: `text` must be a string, got int"]),
    "null-text": (lambda f: audit(f, "null_text.jsonl"),
                  ["{f}/null_text.jsonl:4: `text` must be a string, got NoneType"]),
    "blank-text": (lambda f: audit(f, "blank_text.jsonl"), ["{f}/blank_text.jsonl:5: `text` is empty"]),
    "non-utf8-jsonl": (lambda f: audit(f, "latin1.jsonl"), ["{f}/latin1.jsonl:2: not valid UTF-8 (byte 0xe9)"]),
    "non-utf8-txt": (lambda f: audit(f, "latin1.txt"), ["{f}/latin1.txt:3: not valid UTF-8 (byte 0xe9)"]),
    "csv-without-text-column": (lambda f: audit(f, "no_text.csv"),
                                ["{f}/no_text.csv: no `text` column (columns: id, body)"]),
    "truncated-parquet": (lambda f: audit(f, "truncated.parquet"),
                          ["{f}/truncated.parquet: cannot read as parquet"]),
    "folder-without-txt": (lambda f: audit(f, "no_txt_folder"), ["{f}/no_txt_folder: folder has no .txt files"]),
    "unsupported-format": (lambda f: audit(f, "passages.xlsx"), ["{f}/passages.xlsx: unsupported format '.xlsx'"]),
    "bad-heldout-file": (lambda f: audit(f, "good.jsonl", f / "latin1.txt"), ["{f}/latin1.txt:3: not valid UTF-8"]),
    "suspect-heldout-overlap": (lambda f: audit(f, "overlap.jsonl"),
                                ["{f}/overlap.jsonl and ", "heldout.jsonl: 1 passage in both sets",
                                 "suspect id 'copy' = held-out id", "must be disjoint"]),
    "one-passage-suspect-set": (lambda f: audit(f, "one.jsonl"),
                                ["{f}/one.jsonl: 1 passage, so 1 pair at most", "needs at least 6",
                                 "alpha=0.05"]),
    # --- options ---
    "alpha-zero": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--alpha", "0"),
                   ["option --alpha: ", "greater than 0"]),
    "alpha-one": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--alpha", "1"),
                  ["option --alpha: ", "less than 1"]),
    "max-pairs-zero": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--max-pairs", "0"),
                       ["Invalid value for '--max-pairs'", "greater than or equal to 1"]),
    "max-pairs-too-few-to-reject": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--max-pairs", "3"),
                                    ["option --max-pairs: 3 pairs, but the test needs at least 6"]),
    "max-pairs-not-an-int": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--max-pairs", "ten"),
                             ["Invalid value for '--max-pairs'", "valid integer"]),
    "missing-required-option": (lambda f: ["audit", "--suspect", f / "good.jsonl", "--model", "testbed:mini"],
                                ["option --heldout: missing", "--twins DIR"]),
    "unknown-option": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--alhpa", "0.1"),
                       ["No such option: --alhpa"]),
    # --- model specs, every scheme ---
    "spec-no-scheme": (lambda f: audit(f, model="mini"), ["model spec 'mini': expected hf:PATH or testbed:NAME"]),
    "spec-unknown-scheme": (lambda f: audit(f, model="gguf:/models/m.gguf"), ["unknown backend 'gguf'"]),
    "spec-hf-empty-path": (lambda f: audit(f, model="hf:"), ["model spec 'hf:': expected hf:PATH"]),
    "spec-hf-missing-path": (lambda f: audit(f, model="hf:/no/such/model"), ["/no/such/model does not exist"]),
    "spec-hf-bad-dtype": (lambda f: audit(f, model="hf:/no/such/model?dtype=float8"),
                          ["option dtype='float8' is not one of float32"]),
    "spec-testbed-not-built": (lambda f: audit(f, model="testbed:nope"), ["testbed 'nope' is not built"]),
    "spec-testbed-bad-role": (lambda f: audit(f, model="testbed:mini/teacher"), ["role must be target or reference"]),
    "spec-testbed-unknown-option": (lambda f: audit(f, model="testbed:mini?colour=red"),
                                    ["unknown option 'colour'"]),
    "spec-testbed-bad-batch-size": (lambda f: audit(f, model="testbed:mini?batch_size=many"),
                                    ["option batch_size='many' is not an int"]),
    "spec-testbed-bad-device": (lambda f: audit(f, model="testbed:mini?device=tpu"), ["option device='tpu'"]),
    "spec-reference-bad": (lambda f: audit(f, "good.jsonl", None, "testbed:mini", "--reference", "testbed:mini/x"),
                           ["model spec 'testbed:mini/x': role must be target or reference"]),
    "spec-openai-no-url": (lambda f: audit(f, model="openai:gpt-4"), ["expected openai:MODEL@http(s)://"]),
    "spec-openai-not-http": (lambda f: audit(f, model="openai:m@ftp://host/v1?tokenizer=testbed:mini"),
                             ["expected openai:MODEL@http(s)://"]),
    "spec-openai-no-tokenizer": (lambda f: audit(f, model=API), ["name the local tokenizer"]),
    "spec-openai-missing-tokenizer": (lambda f: audit(f, model=API + "?tokenizer=/no/such/tok"),
                                      ["tokenizer /no/such/tok does not exist"]),
    "spec-openai-bad-mode": (lambda f: audit(f, model=API + "?tokenizer=testbed:mini&mode=psychic"),
                             ["mode must be one of"]),
    "spec-openai-bad-number": (lambda f: audit(f, model=API + "?tokenizer=testbed:mini&max_cost=lots"),
                               ["option max_cost='lots' is not a float"]),
    # --- extract ---
    "extract-bad-data": (lambda f: ["extract", "--data", f / "null_text.jsonl", "--model", "testbed:mini",
                                    "--out", f / "out" / "x.parquet"], ["{f}/null_text.jsonl:4: `text` must be"]),
    "extract-bad-spec": (lambda f: ["extract", "--data", f / "good.jsonl", "--model", "hf:",
                                    "--out", f / "out" / "x.parquet"], ["expected hf:PATH"]),
    "extract-out-not-parquet": (lambda f: ["extract", "--data", f / "good.jsonl", "--model", "testbed:mini",
                                           "--out", f / "out" / "x.csv"], ["--out {f}/out/x.csv: expected a .parquet"]),
    "extract-chunk-size-zero": (lambda f: ["extract", "--data", f / "good.jsonl", "--model", "testbed:mini",
                                           "--out", f / "out" / "x.parquet", "--chunk-size", "0"],
                                ["--chunk-size 0: must be at least 1"]),
    # --- features tables: test / simulate ---
    "features-missing-file": (lambda f: ["test", f / "absent.parquet"], ["{f}/absent.parquet: no such file"]),
    "features-nan": (lambda f: ["test", f / "nan.csv"], ["{f}/nan.csv: row 5: column 'f1' is nan"]),
    "features-inf": (lambda f: ["simulate", f / "inf.parquet", "--trials", "5"],
                     ["{f}/inf.parquet: row 7: column 'f2' is inf"]),
    "features-no-set-column": (lambda f: ["test", f / "no_set.parquet"], ["{f}/no_set.parquet: ", "no 'set' column"]),
    "features-unknown-set-label": (lambda f: ["test", f / "bad_label.csv"],
                                   ["{f}/bad_label.csv: row 3: column 'set' has unknown label 'member'"]),
    "features-no-heldout-rows": (lambda f: ["simulate", f / "no_heldout.parquet", "--trials", "5"],
                                 ["{f}/no_heldout.parquet: ", "no 'heldout' rows"]),
    "features-no-numeric-column": (lambda f: ["test", f / "no_features.csv"],
                                   ["{f}/no_features.csv: ", "no numeric feature column"]),
    "features-truncated-parquet": (lambda f: ["simulate", f / "features_truncated.parquet"],
                                   ["{f}/features_truncated.parquet: cannot read the features table"]),
    "features-non-utf8-csv": (lambda f: ["test", f / "features_latin1.csv"],
                              ["{f}/features_latin1.csv: cannot read the features table"]),
    "features-unsupported-type": (lambda f: ["test", f / "passages.xlsx"], ["{f}/passages.xlsx: unsupported file type"]),
    "test-alpha-zero": (lambda f: ["test", f / "features.parquet", "--alpha", "0"], ["option --alpha: "]),
    "simulate-alpha-negative": (lambda f: ["simulate", f / "features.parquet", "--alpha", "-0.1"],
                                ["option --alpha: "]),
    "simulate-zero-trials": (lambda f: ["simulate", f / "features.parquet", "--trials", "0"],
                             ["Invalid value for '--trials'"]),
    # --- report ---
    "report-unknown-run": (lambda f: ["report", "0123456789abcdef", "--out", f / "out" / "r.html"],
                           ["run 0123456789abcdef: ", "not found"]),
    "report-out-folder-missing": (lambda f: ["report", "0123456789abcdef", "--out", f / "nowhere" / "r.html"],
                                  ["--out {f}/nowhere/r.html: folder {f}/nowhere does not exist"]),
}


@pytest.fixture(scope="module")
def own_artifacts(tmp_path_factory, artifacts, mini_testbed) -> Path:
    """An artifacts folder only this battery writes to (a Prefect server left by an earlier
    test may still touch the shared one's database), seeing the shared testbeds."""
    root = tmp_path_factory.mktemp("bad-input-artifacts")
    (root / "testbeds").symlink_to(artifacts / "testbeds", target_is_directory=True)
    return root


def rejected(args, expected, f, artifacts):
    """Exit 2, one `error: …` line holding the ``expected`` pieces in order, no traceback,
    nothing written under the artifacts or the --out folder."""
    before = snapshot(artifacts)
    out = run(*args, artifacts=artifacts)
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    assert "Traceback" not in out.stdout + out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    pos = 0
    for piece in expected:
        piece = piece.replace("{f}", str(f))
        at = lines[0].find(piece, pos)
        assert at >= 0, f"{piece!r} not in {lines[0]!r}"
        pos = at + len(piece)
    assert snapshot(artifacts) == before, "bad input left files under the artifacts folder"
    assert not any((f / "out").iterdir()), "bad input left a half-written output file"


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_clear_line(case, f, own_artifacts):
    make_args, expected = CASES[case]
    rejected(make_args(f), expected, f, own_artifacts)


def _extract(f, *files):
    return ["extract", *files, "--model", "testbed:mini", "--out", f / "out" / "x.parquet"]


# Every option of every verb that reads a user's file, given one that is bad on a known line:
# whichever verb and option read it, the error names that file and line (a verb that read the
# file some other way, or lost the name on the way, fails here).
PASSAGE_OPTIONS = {
    "audit --suspect": lambda f, bad: audit(f, bad),
    "audit --heldout": lambda f, bad: audit(f, "good.jsonl", bad),
    "extract --data": lambda f, bad: _extract(f, "--data", bad),
    "extract --suspect": lambda f, bad: _extract(f, "--suspect", bad, "--heldout", f / "good.jsonl"),
    "extract --heldout": lambda f, bad: _extract(f, "--suspect", f / "good.jsonl", "--heldout", bad),
}
TABLE_OPTIONS = {
    "test": lambda f, bad: ["test", bad],
    "simulate": lambda f, bad: ["simulate", bad, "--trials", "5"],
    "simulate --pollution": lambda f, bad: ["simulate", bad, "--trials", "5", "--pollution", "0,0.5"],
}


@pytest.mark.parametrize("option", list(PASSAGE_OPTIONS) + list(TABLE_OPTIONS))
def test_every_option_that_reads_a_file_names_it_and_the_row(option, f, own_artifacts):
    if option in PASSAGE_OPTIONS:
        make, bad, where = PASSAGE_OPTIONS[option], "null_text.jsonl", "4: `text` must be a string"
    else:
        make, bad, where = TABLE_OPTIONS[option], "nan.csv", " row 5: column 'f1' is nan"
    rejected(make(f, f / bad), [f"error: {f / bad}:{where}"], f, own_artifacts)


def test_a_200k_character_passage_is_scored_on_its_first_512_tokens(tmp_path, mini_testbed):
    """Accepted, not rejected: a long document is a legitimate passage, and the backends score
    every passage on its first max_length (512) tokens (the membership signal of a document
    is in any long enough stretch of it). So its model features equal those of a 20k-character
    prefix (far more than 512 tokens), and the run ends normally."""
    held = [json.loads(line)["text"] for line in (mini_testbed / "heldout.jsonl").read_text().splitlines()]
    long = " ".join(held * (200_000 // len(" ".join(held)) + 1))[:200_000]
    data = tmp_path / "long.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                            for i, t in (("long", long), ("prefix", long[:20_000]), ("short", held[0]))))
    out = tmp_path / "features.parquet"
    res = run("extract", "--data", data, "--model", "testbed:mini", "--no-perturbations", "--no-sequence",
              "--out", out, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    df = pd.read_parquet(out).set_index("id")
    assert len(long) == 200_000 and list(df.index) == ["long", "prefix", "short"]
    model_cols = [c for c in df.columns if c.startswith("gray_") and "zlib" not in c]  # zlib: whole text
    assert "gray_ppl" in model_cols and np.isfinite(df.loc["long", model_cols].astype(float)).all()
    np.testing.assert_allclose(df.loc["long", model_cols].astype(float), df.loc["prefix", model_cols].astype(float),
                               rtol=1e-5)
    assert not np.allclose(df.loc["short", model_cols].astype(float), df.loc["prefix", model_cols].astype(float))
