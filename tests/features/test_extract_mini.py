"""Feature extraction on the mini testbed: query budget, columns, black-box estimates vs
true log-probs, member/held-out separation, and the `extract` / `features list` verbs."""

import json
import os
import zlib

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from trainspotter.backends import HFBackend
from trainspotter.data import load_passages
from trainspotter.errors import InputError
from trainspotter.features.extract import CountingBackend, extract, feature_columns
from trainspotter.features.features import FeatureConfig
from trainspotter.features.perturb import KINDS
from trainspotter.features.probability import TokenEmbeddings, TokenStrings, sigmoid_logprob
from cli_process import run_cli



@pytest.fixture(scope="module")
def models(mini_testbed):
    return (HFBackend(mini_testbed / "target", batch_size=32),
            HFBackend(mini_testbed / "reference", batch_size=32))


@pytest.fixture(scope="module")
def passages(mini_testbed):
    return {s: [dict(p, set=s) for p in load_passages(mini_testbed / f"{s}.jsonl")]
            for s in ("member", "heldout")}


def test_full_set_uses_one_forward_pass_per_text_variant_per_model(models, passages):
    target, reference = CountingBackend(models[0]), CountingBackend(models[1])
    ps = passages["member"][:5] + passages["heldout"][:5]
    df = extract(ps, target, reference, "both", FeatureConfig(batch_size=4))
    n, variants, batches = len(ps), 1 + len(KINDS), 3
    assert target.scored_texts == variants * n and target.score_calls == batches
    assert reference.scored_texts == n and reference.score_calls == batches
    assert target.generated_prefixes == variants * n and target.generate_calls == batches  # one call per batch
    assert target.generated_tokens == variants * n * 16  # 64-token passages: 16-token suffixes
    # the reference continues the original prefixes only (black_ref_seq_diff)
    assert reference.generated_prefixes == n and reference.generate_calls == batches
    assert reference.generated_tokens == n * 16
    cols = feature_columns(FeatureConfig(), "both", references=1)
    assert list(df.columns) == ["id", "set"] + cols and len(cols) == 79  # 68 + TDDBench's 5 gray criteria + 6 pert match rates
    assert list(df["id"]) == [p["id"] for p in ps]
    assert np.isfinite(df[cols].to_numpy()).all()
    seq = df[[c for c in cols if "_seq_" in c]].to_numpy()
    assert ((seq >= -1) & (seq <= 1)).all()


def test_gray_only_queries_nothing_else_and_basic_columns_match_their_definitions(models, passages):
    target = CountingBackend(models[0])
    ps = passages["member"][:4]
    df = extract(ps, target, models[1], "gray", FeatureConfig(perturbations=False))
    assert target.scored_texts == 4 and target.generate_calls == 0
    texts = [p["text"] for p in ps]
    for i, (t, r) in enumerate(zip(models[0].score(texts), models[1].score(texts))):
        lp, n = t.logprobs, len(t.logprobs)  # definitions, in numpy (BADI App. A.2 items 1, 2, 5, 6)
        expected = {"gray_ppl": np.exp(-lp.mean()), "gray_min_k_20": np.sort(lp)[: int(np.ceil(0.2 * n))].mean(),
                    "gray_zlib_ratio": lp.mean() / len(zlib.compress(texts[i].encode())),
                    "gray_ref_ratio": lp.mean() / r.logprobs.mean(),
                    "gray_ref_diff": r.logprobs.mean() - lp.mean()}
        assert df.iloc[i][list(expected)].to_dict() == pytest.approx(expected, rel=1e-9)
    assert not any(c.startswith("black_") or "_pert_" in c for c in df.columns)
    no_ref = extract(ps, models[0], None, "gray", FeatureConfig(perturbations=False))
    assert "gray_ref_ratio" not in no_ref and "gray_ez" not in no_ref


def test_label_only_reference_features_match_their_definitions(models, passages):
    """black_match_rate, black_ref_match_diff and black_ref_seq_diff from the models' own
    greedy tokens, continuations and BERTScore (computed here without extract)."""
    from trainspotter.features.features import suffix_length
    from trainspotter.features.probability import bertscore_f1

    target, reference = models
    ps = passages["member"][:3] + passages["heldout"][:3]
    config = FeatureConfig(perturbations=False)
    df = extract(ps, target, reference, "black", config)
    texts = [p["text"] for p in ps]
    for i, (t, r) in enumerate(zip(target.score(texts), reference.score(texts))):
        rate = (t.argmax == t.token_ids).mean()
        assert df["black_match_rate"][i] == pytest.approx(rate, abs=1e-12)
        assert df["black_ref_match_diff"][i] == pytest.approx(rate - (r.argmax == r.token_ids).mean(), abs=1e-12)
        s = suffix_length(len(t.token_ids), config)
        prefix, suffix = (target.tokenizer.decode(t.token_ids[:-s].tolist()),
                          target.tokenizer.decode(t.token_ids[-s:].tolist()))
        f1 = bertscore_f1([target.tokenizer.decode(target.generate([prefix], s)[0]),
                           reference.tokenizer.decode(reference.generate([prefix], s)[0])], [suffix] * 2)
        assert df["black_seq_bertscore"][i] == pytest.approx(f1[0], abs=1e-4)
        assert df["black_ref_seq_diff"][i] == pytest.approx(f1[0] - f1[1], abs=1e-4)
    assert df["black_match_rate"].between(0, 1).all() and df["black_ref_seq_diff"].abs().gt(0).any()


def test_black_box_estimates_correlate_with_true_logprobs(models, passages):
    target = models[0]
    scores = target.score([p["text"] for p in passages["member"][:20] + passages["heldout"][:20]])
    strings, emb = TokenStrings(target.tokenizer), TokenEmbeddings()
    est = np.concatenate([sigmoid_logprob(emb.similarity(strings(s.token_ids), strings(s.argmax)))
                          for s in scores])
    true = np.concatenate([s.logprobs for s in scores])
    rho, p = spearmanr(est, true)
    assert rho > 0.3 and p < 1e-10, (rho, p)
    assert emb.encoded <= len(set(strings(np.concatenate([s.token_ids for s in scores])))) \
        + len(set(strings(np.concatenate([s.argmax for s in scores]))))


def test_library_and_flow_read_the_same_default_token_table(models, passages, mini_testbed, tmp_path,
                                                           monkeypatch):
    """The MiniLM token table is the library's default (FeatureConfig.embedding_cache None:
    ``default_token_table_path()`` under the artifacts root), so library ``extract`` and the
    flow's cached chunks compute black-box features from the same embeddings. A default
    table with every string's vector swapped for its neighbour's shows who reads it."""
    import trainspotter.features.probability as P
    from trainspotter.tasks.extract import extract_chunk

    root = tmp_path / "artifacts"
    (root / "testbeds").mkdir(parents=True)
    (root / "testbeds" / "mini").symlink_to(mini_testbed, target_is_directory=True)
    monkeypatch.setenv("TRAINSPOTTER_ARTIFACTS", str(root))
    monkeypatch.setattr(P, "_TABLES", {})  # as in a new process: no table loaded yet
    ps = [{"id": p["id"], "text": p["text"]} for p in passages["member"][:4]]
    config = FeatureConfig(perturbations=False, sequence=False)
    own = tmp_path / "own.npz"
    minilm = extract(ps, models[0], None, "black", config.model_copy(update={"embedding_cache": str(own)}))
    P.default_token_table_path().parent.mkdir(parents=True)
    with np.load(own) as table:  # every string these passages need, embedded by MiniLM
        np.savez(P.default_token_table_path(), strings=table["strings"], vectors=np.roll(table["vectors"], 1, axis=0))
    library = extract(ps, models[0], None, "black", config)
    flow = pd.DataFrame(extract_chunk.fn(ps, "testbed:mini", None, "black", config))
    cols = [c for c in minilm.columns if c.startswith("black_")]
    pd.testing.assert_frame_equal(library[cols], flow[cols])
    assert P.token_table(P.default_token_table_path()).encoded == 0  # nothing embedded anew
    assert not np.allclose(library[cols], minilm[cols])  # both read the swapped table


def test_black_box_features_separate_members_from_heldout(models, passages):
    """Cross-fitted (5-fold) logistic regression on the black-box token-level features."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    ps = passages["member"][:50] + passages["heldout"][:50]
    df = extract(ps, *models, "black", FeatureConfig(sequence=False, batch_size=100))
    cols = [c for c in df.columns if c.startswith("black_")]
    assert len(cols) == 34  # 28 + Query-augment's 6 perturbed-variant match rates
    y = (df["set"] == "member").to_numpy()
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    prob = cross_val_predict(model, df[cols].to_numpy(), y, method="predict_proba",
                             cv=StratifiedKFold(5, shuffle=True, random_state=0))[:, 1]
    auc = roc_auc_score(y, prob)
    assert auc > 0.85, auc  # measured 0.96 on all 80 + 80 passages
    # members: larger estimated probability -> lower black-box perplexity on average
    assert df.loc[y, "black_ppl"].mean() < df.loc[~y, "black_ppl"].mean()


def test_label_only_target_cannot_give_gray_features(models, passages):
    class LabelOnly(CountingBackend):
        def score(self, texts, distribution=False):
            out = super().score(texts, distribution)
            for s in out:
                s.logprobs = np.full_like(s.logprobs, np.nan)
            return out

    ps = passages["member"][:2]
    with pytest.raises(InputError, match="label-only"):
        extract(ps, LabelOnly(models[0]), None, "gray", FeatureConfig(perturbations=False))
    df = extract(ps, LabelOnly(models[0]), None, "black", FeatureConfig(perturbations=False, sequence=False))
    assert np.isfinite(df["black_ppl"]).all()

    class Holes(CountingBackend):  # one position without a log-prob (an API answer that lacked it)
        def score(self, texts, distribution=False):
            out = super().score(texts, distribution)
            out[0].logprobs[3] = np.nan
            return out

    with pytest.raises(InputError, match=r"no log-probability at 1 of \d+ positions"):
        extract(ps, Holes(models[0]), None, "gray", FeatureConfig(perturbations=False))


def run(*args):
    return run_cli(list(args), env=os.environ.copy(), timeout=600)


def test_extract_verb_writes_the_models_features_and_bad_input_is_one_line(models, mini_testbed, tmp_path):
    data = tmp_path / "few.jsonl"
    data.write_text("".join(line + "\n" for line in (mini_testbed / "member.jsonl").read_text().splitlines()[:3]))
    out = tmp_path / "f.parquet"
    res = run("extract", "--data", str(data), "--model", "testbed:mini", "--reference", "testbed:mini/reference",
              "--access", "both", "--no-sequence", "--no-perturbations", "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    df = pd.read_parquet(out)
    assert len(df) == 3 and info["features"] == list(df.columns[1:])
    assert list(df["id"]) == [p["id"] for p in load_passages(data)]
    # the values, from the models' own outputs in this process: gray from the log-probs
    # (BADI App. A.2 items 1, 5), black from the greedy tokens alone (label-only: Eq. 1 on the
    # MiniLM similarity of true and greedy token, sim = 1 where the greedy token is right)
    texts = [p["text"] for p in load_passages(data)]
    strings, emb = TokenStrings(models[0].tokenizer), TokenEmbeddings()
    for i, (t, r) in enumerate(zip(models[0].score(texts), models[1].score(texts))):
        sim = emb.similarity(strings(t.token_ids), strings(t.argmax))
        black = -np.log1p(np.exp(-2 * sim))  # log σ(2·sim)
        expected = {"gray_ppl": np.exp(-t.logprobs.mean()), "gray_ref_diff": r.logprobs.mean() - t.logprobs.mean(),
                    "black_ppl": np.exp(-black.mean())}
        assert df.iloc[i][list(expected)].to_dict() == pytest.approx(expected, rel=1e-5)
    same = ["extract", "--data", str(data), "--model", "testbed:mini", "--reference", "testbed:mini/reference",
            "--access", "both", "--no-sequence", "--no-perturbations", "--out", str(out), "--json"]
    assert json.loads(run(*same).stdout)["chunks_cached"] == 1  # the one chunk, from the cache
    assert json.loads(run(*same, "--refresh").stdout)["chunks_cached"] == 0  # recomputed
    bad = run("extract", "--data", str(tmp_path / "missing.jsonl"), "--model", "testbed:mini", "--out", str(out))
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [f"error: {tmp_path / 'missing.jsonl'}: no such file or folder"]
    bad = run("extract", "--data", str(data), "--model", "testbed:mini", "--access", "white", "--out", str(out))
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: option --access 'white': expected one of gray, black, both"]


def test_features_list_json():
    res = run("features", "list", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert sum(r["access"] == "black" for r in rows) >= 31
    assert {"gray_ppl", "gray_min_k_20", "gray_ez", "black_seq_bertscore_synonym"} <= {r["name"] for r in rows}


def test_two_references_cost_one_pass_each_and_combine_as_defined(models, passages):
    """K = 2 references: each scores every original once per batch; the first reference's
    features are the one-reference ones; the *_refs_* columns are the published formulas,
    written out here on the models' own log-probs (not the product's functions)."""
    from scipy.stats import norm

    target = models[0]
    refs = [CountingBackend(models[1]), CountingBackend(models[0])]  # the target itself as a 2nd reference
    ps = passages["member"][:3] + passages["heldout"][:3]
    config = FeatureConfig(perturbations=False, sequence=False, batch_size=4)
    both = extract(ps, target, refs, "both", config)
    assert [(r.score_calls, r.scored_texts) for r in refs] == [(2, 6), (2, 6)]
    one = extract(ps, target, models[1], "both", config)
    assert [c for c in both.columns if c not in one.columns] == [
        f"{a}_refs_{n}" for a in ("gray", "black") for n in ("diff", "lira", "token_lira", "rmia")]
    pd.testing.assert_frame_equal(both[one.columns], one)
    texts = [p["text"] for p in ps]
    t_lp = [np.asarray(s.logprobs, float) for s in target.score(texts)]
    r_lp = [[np.asarray(s.logprobs, float) for s in m.score(texts)] for m in (models[1], models[0])]
    for i in range(len(ps)):
        l_t, l_k = t_lp[i].mean(), np.array([r_lp[0][i].mean(), r_lp[1][i].mean()])
        # Watson et al. 2022: log PPL_t − mean log PPL_k (lower = member)
        assert both.loc[i, "gray_refs_diff"] == pytest.approx(l_k.mean() - l_t, rel=1e-9)
        # Carlini et al. 2022 Eq. 4, offline, this passage's own σ (ddof 1); σ = 0 -> the limit
        sd = l_k.std(ddof=1)
        lira = norm.cdf((l_t - l_k.mean()) / sd) if sd > 0 else 0.5 * (1 + np.sign(l_t - l_k.mean()))
        assert both.loc[i, "gray_refs_lira"] == pytest.approx(lira, abs=1e-9)
        tok = np.vstack([r_lp[0][i], r_lp[1][i]])
        tsd = tok.std(axis=0, ddof=1)
        tails = np.where(tsd > 0, norm.cdf((t_lp[i] - tok.mean(axis=0)) / np.where(tsd > 0, tsd, 1)),
                         0.5 * (1 + np.sign(t_lp[i] - tok.mean(axis=0))))
        assert both.loc[i, "gray_refs_token_lira"] == pytest.approx(tails.mean(), abs=1e-9)
        # Zarifzadeh et al. 2024 Eq. 3, offline a = 1: ℓ_t − log mean_k exp(ℓ_k)
        assert both.loc[i, "gray_refs_rmia"] == pytest.approx(l_t - np.log(np.exp(l_k).mean()), rel=1e-9)
    # the target as its own reference: the gap to the mean reference is half the RefL gap
    np.testing.assert_allclose(both["gray_refs_diff"], both["gray_ref_diff"] / 2, rtol=1e-9)
    np.testing.assert_allclose(both["black_refs_diff"], both["black_ref_diff"] / 2, rtol=1e-9)
