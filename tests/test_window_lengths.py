"""Window length as a variable (headsim.report.window_lengths), on synthetic runs at 16 and 32 tokens.

Every value of the table is recomputed here from the run's own files; a claim made to fail at one
length must be flagged; runs that differ in anything but the window length are refused in one line.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from fake_run import _windows, build_dataset, make_fake_run, run_meta, write_run
from headsim.errors import HeadsimError
from headsim.report.build import build_report, load_report_run
from headsim.report.claims import FAILS, HOLDS, compute_claims
from headsim.report.window_lengths import STATISTICS, compare_window_lengths
from headsim.reproduction import matched_windows, parse_lengths
from headsim.windows import Framing

DPI = 40


def _run_with(path: Path, seq_len: int, *, seed: int = 1, gap: bool = False, meta_edit=None) -> Path:
    """A fake run at ``seq_len``; ``gap``: every similarity value in [0.1, 0.6), so claim 7 fails."""
    windows = _windows(np.random.default_rng(seed), 8, seq_len)
    ds = build_dataset(windows, 3, 4, seed=seed)
    if gap:
        sh = np.zeros_like(ds["sim_value_hist"].values)
        sh[..., int(np.argmin(np.abs(ds["sim_bin"].values - 0.35)))] = 100
        ds["sim_value_hist"][:] = sh
    meta = run_meta(3, 4, 8, seq_len, 0.3, 2)
    if meta_edit is not None:
        meta_edit(meta)
    return write_run(path, ds, windows, meta)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lengths")
    return {"16": make_fake_run(root / "r16", seq_len=16), "32": _run_with(root / "r32", 32),
            "32gap": _run_with(root / "r32gap", 32, gap=True)}


@pytest.fixture(scope="module")
def loaded(runs) -> dict[str, object]:
    return {k: load_report_run(p) for k, p in runs.items()}


def test_table_values_are_each_runs_own_statistics(loaded) -> None:
    cmp = compare_window_lengths([loaded["32"], loaded["16"]])  # any order: sorted by length
    assert cmp.lengths == [16, 32] and cmp.windows == {16: 8, 32: 8} and cmp.model == "fake-minilm"
    s = cmp.statistics
    assert list(s.columns) == ["statistic", "layer", "seq_len", "value"]
    assert set(s["statistic"]) == set(STATISTICS)
    for length, run in ((16, loaded["16"]), (32, loaded["32"])):
        ds, heads, layers = run.dataset, run.heads, run.layers
        per = {(r.statistic, int(r.layer)): r.value for r in s[(s.seq_len == length) & s.layer.notna()].itertuples()}
        pooled = {r.statistic: r.value for r in s[(s.seq_len == length) & s.layer.isna()].itertuples()}
        for k, row in layers.iterrows():
            layer = int(row["layer"])
            for name, column in (("p_repeat", "p_repeat"), ("p_same_sentence", "p_same_sentence"),
                                 ("mean_distance", "mean_distance"), ("median_anchor_fraction", "median_anchor_fraction"),
                                 ("mean_distinct_anchors", "mean_distinct_anchors"), ("share_sim_gap", "share_sim_0_1_to_0_6")):
                assert per[(name, layer)] == pytest.approx(row[column], nan_ok=True), (name, layer)
            assert per[("distance_change_from_layer_1", layer)] == pytest.approx(row["mean_distance"] / layers["mean_distance"][0] - 1)
            h = heads[heads["layer"] == layer]
            assert per[("attn_framing", layer)] == pytest.approx(float((h["attn_cls"] + h["attn_sep"]).mean()))
            assert per[("heads_above_chance", layer)] == pytest.approx(float((h["p_same_sentence"] > h["p_same_sentence_chance"]).mean()))
        # pooled over layers and heads, straight from stats.nc
        n = ds["n_pairs"].values.sum()
        assert pooled["p_repeat"] == pytest.approx(ds["n_repeat"].values.sum() / n)
        assert pooled["p_same_sentence"] == pytest.approx(ds["n_same_sentence"].values.sum() / n)
        assert pooled["p_same_sentence_chance"] == pytest.approx(int(ds["valid_pairs_same_sentence"]) / int(ds["valid_pairs"]))
        dh = ds["distance_hist"].values.sum(axis=(0, 1))
        assert pooled["mean_distance"] == pytest.approx((dh * np.arange(len(dh))).sum() / dh.sum())
        # random pairs, from the windows themselves: every valid pair i < j of every window
        dists = np.concatenate([np.triu_indices(int(np.sum(m)), 1)[1] - np.triu_indices(int(np.sum(m)), 1)[0]
                                for m in run.windows["attention_mask"]])
        assert pooled["random_pair_distance"] == pytest.approx(dists.mean())
        assert pooled["distance_vs_random"] == pytest.approx(pooled["mean_distance"] / dists.mean())
        mask = np.concatenate([np.asarray(m, dtype=bool) for m in run.windows["attention_mask"]])
        ids = np.concatenate([np.asarray(x) for x in run.windows["input_ids"]])[mask]
        assert pooled["framing_share"] == pytest.approx(float(np.isin(ids, [101, 102]).mean()))
        sh = ds["sim_value_hist"].values.sum(axis=(0, 1))
        centres = ds["sim_bin"].values
        assert pooled["share_sim_gap"] == pytest.approx(sh[(centres > 0.1) & (centres < 0.6)].sum() / sh.sum())
        assert pooled["attn_framing"] == pytest.approx(float((heads["attn_cls"] + heads["attn_sep"]).mean()))
        assert cmp.table().loc["p_repeat", length] == pooled["p_repeat"]
        assert cmp.table(2).loc["mean_distance", length] == per[("mean_distance", 2)]


def test_claims_at_each_length_are_the_runs_own(loaded) -> None:
    cmp = compare_window_lengths([loaded["16"], loaded["32"]])
    for length, run in ((16, loaded["16"]), (32, loaded["32"])):
        own = {c.id: c for c in compute_claims(run.dataset, run.heads, run.layers, run.meta, shares=run.shares)}
        got = cmp.claims[cmp.claims["seq_len"] == length].set_index("id")
        assert set(got.index) == set(own)
        for cid, c in own.items():
            assert got.loc[cid, "verdict"] == c.verdict and got.loc[cid, "value"] == str(c.value)
    assert not cmp.verdicts()["changes"].any() and cmp.changed == []


def test_a_claim_whose_verdict_changes_is_flagged(loaded) -> None:
    cmp = compare_window_lengths([loaded["16"], loaded["32gap"]])
    v = cmp.verdicts()
    assert cmp.changed == ["c7_similarity_gap"]
    assert v.loc["c7_similarity_gap", 16] == HOLDS and v.loc["c7_similarity_gap", 32] == FAILS
    assert v.loc["c7_similarity_gap", "changes"] and not v.drop("c7_similarity_gap")["changes"].any()


def _other_corpus(meta: dict) -> None:
    meta["spec"]["corpus_sha256"] = meta["corpus"]["sha256"] = "1" * 64


def _other_model(meta: dict) -> None:
    meta["spec"]["model_source"] = meta["model"]["source"] = "/models/another"


@pytest.mark.parametrize("flag, edit", [("--model", _other_model), ("--corpus", _other_corpus), ("--threshold", None)])
def test_runs_that_differ_in_more_than_length_are_refused(loaded, tmp_path, flag, edit) -> None:
    path = (make_fake_run(tmp_path / "other", seq_len=32, threshold=0.4) if edit is None
            else _run_with(tmp_path / "other", 32, meta_edit=edit))
    with pytest.raises(HeadsimError) as err:
        compare_window_lengths([loaded["16"], load_report_run(path)])
    text = str(err.value)
    assert "\n" not in text and flag in text and "differ in more than the window length" in text and "--seq-len" in text


def test_one_run_per_length_and_at_least_two(loaded, runs) -> None:
    with pytest.raises(HeadsimError, match="both have windows of 32 tokens"):
        compare_window_lengths([loaded["32"], loaded["32gap"]])
    with pytest.raises(HeadsimError, match="at least two runs"):
        compare_window_lengths([loaded["16"]])


def test_report_section_names_the_model_and_writes_its_files(runs, tmp_path) -> None:
    index = build_report(runs["16"], tmp_path / "rep", None, window_runs=[runs["32gap"]], dpi=DPI)
    page = index.read_text()
    assert 'id="window-length"' in page and "fake-minilm at 16, 32 tokens" in page
    assert "8 windows of 16 tokens, 8 windows of 32 tokens" in page
    assert "c7_similarity_gap (16: holds, 32: does not hold)" in page
    out = index.parent
    with Image.open(out / "window_lengths.png") as img:
        assert img.format == "PNG" and img.size[0] > 300
    assert "fake-minilm" in (out / "window_lengths.svg").read_text()
    table = pd.read_csv(out / "window_lengths.csv")
    assert set(table["seq_len"]) == {16, 32} and table["layer"].isna().any()
    claims = pd.read_csv(out / "window_lengths_claims.csv")
    assert set(claims["model"]) == {"fake-minilm"}
    changed = claims[claims["verdict_changes_with_length"]]
    assert set(changed["id"]) == {"c7_similarity_gap"} and len(changed) == 2


def test_refused_runs_leave_no_report(runs, tmp_path) -> None:
    bad = make_fake_run(tmp_path / "bad", seq_len=32, threshold=0.4)
    with pytest.raises(HeadsimError):
        build_report(runs["16"], tmp_path / "rep", None, window_runs=[bad], dpi=DPI)
    assert not (tmp_path / "rep").exists() or not any((tmp_path / "rep").iterdir())


def test_cli_report_of_mismatched_runs_is_a_one_line_error(runs, tmp_path) -> None:
    bad = make_fake_run(tmp_path / "bad", seq_len=32, threshold=0.4)
    res = subprocess.run([sys.executable, "-m", "headsim.cli", "report", str(runs["16"]), str(bad), "--out",
                          str(tmp_path / "rep")], capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "--threshold" in res.stderr
    assert not (tmp_path / "rep" / "index.html").exists()


def test_window_lengths_option() -> None:
    assert parse_lengths("512, 128,256,128") == [128, 256, 512]
    for bad in ("", "128,abc", "128;256", "4,128"):
        with pytest.raises(HeadsimError) as err:
            parse_lengths(bad)
        assert "--window-lengths" in str(err.value) and "\n" not in str(err.value)
    bert = Framing(101, 102, 0)  # 2 framing tokens: 126 text tokens in 128, 510 in 512
    assert matched_windows(1000, 128, 512, bert) == math.ceil(1000 * 126 / 510) == 248
    assert matched_windows(1000, 128, 128, bert) == 1000 and matched_windows(None, 128, 512, bert) is None
    assert matched_windows(1000, 128, 256, Framing(1, None, 0)) == math.ceil(1000 * 127 / 255)
