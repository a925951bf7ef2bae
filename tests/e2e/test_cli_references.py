"""Several reference models from the command line: `audit` and `extract` with --reference
given twice, gray and black, against the library call on the same models."""

import json
import os

import mlflow
import numpy as np
import pandas as pd
import pytest

from trainspotter.backends import load_backend
from trainspotter.data import load_passages
from trainspotter.features.extract import extract
from trainspotter.features.features import FEATURE_SETS
from cli_process import run_cli

REFS = ("gray_refs_diff", "gray_refs_lira", "gray_refs_token_lira", "gray_refs_rmia")


def run(*args):
    return run_cli(list(args), env=os.environ.copy(), timeout=600)


@pytest.fixture(scope="module")
def references(mini_testbed):
    # a second, different model as the second reference: the mini target loaded by path
    return ["testbed:mini/reference", f"hf:{mini_testbed / 'target'}"]


@pytest.mark.parametrize("access", ["gray", "black"])
def test_audit_with_two_references_bets_on_their_features(mini_testbed, references, access):
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
              str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--reference", references[0],
              "--reference", references[1], "--access", access, "--max-pairs", "16",
              "--name", f"two-refs-{access}", "--json")
    assert out.returncode in (0, 1), out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert {c.replace("gray_", f"{access}_") for c in REFS} <= set(result["features"])
    from trainspotter.flows.tracking import tracking_uri

    params = mlflow.MlflowClient(tracking_uri()).get_run(result["run_id"]).data.params
    assert json.loads(params["reference"]) == references


def test_extract_with_two_references_writes_what_the_library_computes(mini_testbed, references, tmp_path):
    data = tmp_path / "few.jsonl"
    data.write_text("".join((mini_testbed / "member.jsonl").read_text().splitlines(keepends=True)[:6]))
    out = run("extract", "--data", str(data), "--model", "testbed:mini", "--reference", references[0],
              "--reference", references[1], "--features", "lean", "--out", str(tmp_path / "f.parquet"))
    assert out.returncode == 0, out.stderr[-2000:]
    cli = pd.read_parquet(tmp_path / "f.parquet")
    lib = extract(load_passages(data), load_backend("testbed:mini"), [load_backend(r) for r in references],
                  "gray", FEATURE_SETS["lean"])
    assert list(cli.columns) == list(lib.columns) and set(REFS) <= set(cli.columns)
    np.testing.assert_allclose(cli[list(REFS)].to_numpy(), lib[list(REFS)].to_numpy(), rtol=1e-9)


def test_the_same_reference_twice_is_one_clear_error(mini_testbed):
    out = run("audit", "--suspect", str(mini_testbed / "member.jsonl"), "--heldout",
              str(mini_testbed / "heldout.jsonl"), "--model", "testbed:mini", "--reference",
              "testbed:mini/reference", "--reference", "testbed:mini/reference?dtype=float32")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "'testbed:mini/reference' is given twice" in out.stderr
