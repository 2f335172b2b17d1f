"""Tests for headsim.report: figures, claims, index.html and compare, on synthetic run directories.

Two fake runs (tests/fake_run.py) are built once: run A, where every claim holds by construction,
reported with a stand-in for the per-text example; and run B, whose data contradict the claims,
reported without an example. Claim values are recomputed here straight from the files.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from PIL import Image

from fake_run import (
    COMMA,
    CLS,
    PERIOD,
    SEP,
    build_dataset,
    make_fake_run,
    run_meta,
    summary_tables,
    write_run,
    _windows,
)
from headsim.errors import HeadsimError
from headsim.plots.style import save
from headsim.report.build import build_report
from headsim.report.reading import load_report_run
from headsim.report.claims import FAILS, HOLDS, NA, VERDICTS, compute_claims
from headsim.report.compare import compare_runs
from headsim.report.contents import FIGURES

DPI = 40  # small PNGs keep the tests fast; the layout does not depend on it
CONTRACT_VARS = [
    "attn_sum", "attn_sum_top_zeroed", "attn_sum_top_diag_zeroed", "pair_count_valid", "attn_focus", "attn_queries",
    "n_pairs", "n_repeat", "n_same_sentence", "n_repeat_same_sentence", "distance_hist", "valid_pairs",
    "valid_pairs_same_sentence", "location_counts", "sim_sum", "sim_value_hist", "anchor_fraction_hist",
    "anchor_fraction_sum", "anchor_windows", "anchor_distinct_hist", "windows", "tokens",
]
HEAD_COLUMNS = ["layer", "head", "n_pairs", "p_repeat", "p_repeat_same_sentence", "p_same_sentence",
                "p_same_sentence_chance", "mean_distance", "median_distance", "anchor_fraction_mean", "attn_cls",
                "attn_sep", "attn_punct", "attn_prev", "attn_next"]


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------


class StubInspection:
    """Stands in for headsim.inspection.Inspection: writes the files Inspection.write writes."""

    meta = {"layer": 3, "head": 2, "threshold": 0.3, "figure_layers": [1, 2, 3], "separator_layer": 3,
            "valid_tokens": 16, "window": 0, "windows": 1}

    def write(self, out_dir) -> list[Path]:
        out = Path(out_dir)
        written = []
        for stem in ("fig04_attention", "fig05_blocks", "similarity", "fig12_summed_similarity"):
            fig, ax = plt.subplots(figsize=(2, 2))
            ax.imshow(np.eye(4))
            written += save(fig, out, stem, dpi=DPI)
        self.pairs = pd.DataFrame({"layer": [3, 3, 1], "head": [2, 2, 1], "token_i": ["the", "fox", "a"],
                                   "token_j": ["the", "<b>dog</b>", "b"], "index_i": [1, 2, 3], "index_j": [5, 9, 4],
                                   "similarity": [0.9, 0.4, 0.5]})
        self.pairs.to_csv(out / "fig09_pairs.csv", index=False)
        pd.DataFrame({"index": [0], "token": ["[CLS]"]}).to_csv(out / "tokens.csv", index=False)
        (out / "inspect.json").write_text(json.dumps(self.meta))
        return written + [out / "fig09_pairs.csv", out / "tokens.csv", out / "inspect.json"]

    def head_pairs(self) -> pd.DataFrame:
        p = self.pairs
        return p[(p["layer"] == 3) & (p["head"] == 2)].reset_index(drop=True)


def contradicting_dataset(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` changed so that claims 3, 4, 5, 6, 7 and 8 fail (claim 1 fails through the tables)."""
    ds = ds.copy(deep=True)
    L = ds.sizes["layer"]
    ds["n_same_sentence"][:] = 0  # no pair within one sentence: below chance
    ds["n_repeat_same_sentence"][:] = 0
    ds["n_repeat"][:] = (ds["n_pairs"] * 0.2).astype(np.int64)  # every head alike
    dh = np.zeros_like(ds["distance_hist"].values)  # distances grow with the layer
    for li in range(L):
        dh[li, :, min(2 + 4 * li, dh.shape[-1] - 1)] = ds["n_pairs"].values[li]
    ds["distance_hist"][:] = dh
    ds["distance_sum"][:] = dh @ ds["distance"].values
    fh = np.zeros_like(ds["anchor_fraction_hist"].values)
    fh[..., 2] = ds["anchor_windows"].values  # anchor fraction ~0.12
    ds["anchor_fraction_hist"][:] = fh
    ds["anchor_fraction_sum"][:] = ds["anchor_windows"] * 0.125
    ah = np.zeros_like(ds["anchor_distinct_hist"].values)
    ah[:, 1] = ds["windows"].values  # every head of a layer shares one anchor
    ds["anchor_distinct_hist"][:] = ah
    sh = np.zeros_like(ds["sim_value_hist"].values)
    centres = ds["sim_bin"].values
    sh[..., int(np.argmin(np.abs(centres - 0.35)))] = 100  # everything between 0.1 and 0.6
    ds["sim_value_hist"][:] = sh
    t = ds.sizes["query"]
    band = np.zeros((t, t))
    band[np.arange(t - 4), np.arange(4, t)] = 1.0  # attention peaks four tokens ahead
    ds["attn_sum_top_zeroed"][:] = band * 5 + 0.01
    ds["attn_focus"].loc[dict(layer=L, target=["sep", "punct"])] = 0.0  # nothing on separators
    return ds


@pytest.fixture(scope="module")
def run_a(tmp_path_factory) -> Path:
    return make_fake_run(tmp_path_factory.mktemp("runs") / "run_a", name="fake-a")


@pytest.fixture(scope="module")
def run_b(tmp_path_factory) -> Path:
    rng = np.random.default_rng(1)
    windows = _windows(rng, 8, 16)
    ds = contradicting_dataset(build_dataset(windows, 3, 4, seed=1))
    return write_run(tmp_path_factory.mktemp("runs") / "run_b", ds, windows,
                     run_meta(3, 4, 8, 16, 0.3, 2, name="fake-b"))


@pytest.fixture(scope="module")
def report_a(run_a: Path, tmp_path_factory) -> Path:
    return build_report(run_a, tmp_path_factory.mktemp("report_a"), StubInspection(), dpi=DPI)


@pytest.fixture(scope="module")
def report_b(run_b: Path) -> Path:
    return build_report(run_b, None, None, dpi=DPI)  # into the run directory itself, as `headsim report` does


@pytest.fixture(scope="module")
def comparison(run_a: Path, run_b: Path, tmp_path_factory) -> Path:
    return compare_runs([run_a, run_b], tmp_path_factory.mktemp("compare"), dpi=DPI)


def claims_of(index: Path) -> dict[str, dict]:
    data = json.loads((index.parent / "claims.json").read_text())
    return {c["id"]: c for c in data["claims"]}


# ---------------------------------------------------------------------------------------------
# The fake run follows the contract
# ---------------------------------------------------------------------------------------------


def test_fake_run_is_schema_exact(run_a: Path) -> None:
    ds = xr.open_dataset(run_a / "stats.nc")
    for name in CONTRACT_VARS:
        assert name in ds, name
    assert list(ds["layer"].values) == [1, 2, 3] and list(ds["head"].values) == [1, 2, 3, 4]
    assert list(ds["target"].values) == ["cls", "sep", "punct", "prev", "next"]
    assert ds.sizes["query"] == ds.sizes["distance"] == ds.attrs["seq_len"] == 16
    assert list(ds["n_anchors"].values) == list(range(5))
    heads = pd.read_parquet(run_a / "heads.parquet")
    assert set(HEAD_COLUMNS) <= set(heads.columns) and len(heads) == 12
    layers = pd.read_parquet(run_a / "layers.parquet")
    assert {"layer", "n_pairs", "mean_distance", "median_distance", "p_same_sentence", "p_same_sentence_chance",
            "mean_distinct_anchors", "median_anchor_fraction"} <= set(layers.columns)
    meta = json.loads((run_a / "run.json").read_text())
    assert {"model", "corpus", "windows", "seq_len", "threshold", "top_k_columns", "versions", "git_commit",
            "created"} <= set(meta)
    windows = pd.read_parquet(run_a / "windows.parquet")
    assert {"input_ids", "attention_mask", "sentence_ids"} <= set(windows.columns)
    # distance histograms count exactly the pairs
    np.testing.assert_array_equal(ds["distance_hist"].sum("distance").values, ds["n_pairs"].values)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def test_every_figure_is_a_valid_png_and_svg(report_a: Path) -> None:
    out = report_a.parent
    stems = [f.stem for f in FIGURES]
    for number in ("02", "03", "06", "07", "08", "10", "11", "12", "13"):
        assert any(s.startswith(f"fig{number}_") for s in stems), number
    for stem in stems:
        png, svg = out / f"{stem}.png", out / f"{stem}.svg"
        assert png.is_file() and svg.is_file(), stem
        with Image.open(png) as im:
            im.verify()
        with Image.open(png) as im:
            assert im.format == "PNG" and im.size[0] > 100 and im.size[1] > 100
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg")
        assert "layers and heads numbered from 1" in svg.read_text()
        assert "fake-a" in svg.read_text()  # the model name is in every title


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


def test_claims_files_parse(report_a: Path) -> None:
    data = json.loads((report_a.parent / "claims.json").read_text())
    claims = data["claims"]
    assert len(claims) == 8 and len({c["id"] for c in claims}) == 8
    for c in claims:
        assert set(c) >= {"id", "claim", "measure", "value", "criterion", "verdict"}
        assert c["verdict"] in VERDICTS
        assert c["claim"] and c["measure"] and c["criterion"] and c["value"] != ""
    table = pd.read_csv(report_a.parent / "claims.csv")
    assert list(table.columns) == ["id", "claim", "measure", "value", "criterion", "verdict"]
    assert list(table["id"]) == [c["id"] for c in claims]
    # the fake data are built so that every claim holds
    assert all(c["verdict"] == HOLDS for c in claims), [(c["id"], c["verdict"]) for c in claims]


def test_claim_values_match_the_run_files(run_a: Path, report_a: Path) -> None:
    claims = claims_of(report_a)
    ds = xr.open_dataset(run_a / "stats.nc")
    heads = pd.read_parquet(run_a / "heads.parquet")
    layers = pd.read_parquet(run_a / "layers.parquet")
    windows = pd.read_parquet(run_a / "windows.parquet")

    # 1: last-layer attention on [SEP] + punctuation vs their share of tokens, from the raw files
    L = ds.sizes["layer"]
    focus = ds["attn_focus"].sel(layer=L) / float(ds["attn_queries"])
    mass = float((focus.sel(target="sep") + focus.sel(target="punct")).mean())
    ids = np.concatenate([np.asarray(i)[np.asarray(m) == 1] for i, m in zip(windows["input_ids"], windows["attention_mask"])])
    share = float(np.isin(ids, [SEP, PERIOD, COMMA]).mean())
    c1 = claims["c1_separators"]["numbers"]
    assert c1["mass"] == pytest.approx(mass) and c1["share"] == pytest.approx(share)
    assert c1["share_cls"] == pytest.approx(float((ids == CLS).mean()))
    assert c1["ratio"] == pytest.approx(mass / share)

    # 2: spread of p_repeat, from the Dataset counts
    p = (ds["n_repeat"] / ds["n_pairs"]).values.ravel()
    c2 = claims["c2_repeat_spread"]["numbers"]
    assert c2["max"] == pytest.approx(p.max()) and c2["median"] == pytest.approx(np.median(p))
    assert c2["max"] == pytest.approx(heads["p_repeat"].max())
    top = heads.loc[heads["p_repeat"].idxmax()]
    assert c2["leaders"][0] == f"L{int(top['layer'])}H{int(top['head'])}"

    # 3: heads above the chance level, from the Dataset counts
    chance = float(ds["valid_pairs_same_sentence"]) / float(ds["valid_pairs"])
    above = int(((ds["n_same_sentence"] / ds["n_pairs"]) > chance).sum())
    c3 = claims["c3_same_sentence"]["numbers"]
    assert c3["above"] == above and c3["heads"] == 12 and c3["chance"] == pytest.approx(chance)
    assert c3["above"] == int((heads["p_same_sentence"] > heads["p_same_sentence_chance"]).sum())

    # 4: mean distance per layer from the distance histograms
    d = ds["distance"].values
    hist = ds["distance_hist"].sum("head").values
    means = (hist * d).sum(axis=1) / hist.sum(axis=1)
    c4 = claims["c4_distances"]["numbers"]
    assert c4["per_layer"] == pytest.approx(list(means))
    assert c4["per_layer"] == pytest.approx(list(layers["mean_distance"]))
    assert c4["drop_middle"] == pytest.approx(1 - means[1] / means[0])
    assert c4["drop_last"] == pytest.approx(1 - means[2] / means[0])

    # 6: distinct anchors per layer
    ah = ds["anchor_distinct_hist"].values
    mean_distinct = (ah * np.arange(ah.shape[1])).sum(axis=1) / ah.sum(axis=1)
    assert claims["c6_distinct_anchors"]["numbers"]["per_layer"] == pytest.approx(list(mean_distinct))

    # 7: shares of the similarity histogram (0.1 and 0.6 are bin edges here)
    edges = np.asarray(ds.attrs["sim_bin_edges"])
    pooled = ds["sim_value_hist"].sum(("layer", "head")).values
    below = pooled[edges[1:] <= 0.1 + 1e-9].sum() / pooled.sum()
    between = pooled[(edges[:-1] >= 0.1 - 1e-9) & (edges[1:] <= 0.6 + 1e-9)].sum() / pooled.sum()
    c7 = claims["c7_similarity_gap"]["numbers"]
    assert c7["below"] == pytest.approx(below) and c7["between"] == pytest.approx(between)


def _tables(run: Path):
    ds = xr.open_dataset(run / "stats.nc").load()
    return ds, pd.read_parquet(run / "heads.parquet"), pd.read_parquet(run / "layers.parquet"), \
        json.loads((run / "run.json").read_text())


def _verdicts(ds, heads, layers, meta, shares=None) -> dict[str, str]:
    return {c.id: c.verdict for c in compute_claims(ds, heads, layers, meta, shares=shares)}


def test_each_verdict_flips_when_the_table_contradicts_it(run_a: Path) -> None:
    ds, heads, layers, meta = _tables(run_a)
    shares = load_report_run(run_a).shares
    assert set(_verdicts(ds, heads, layers, meta, shares).values()) == {HOLDS}
    L = ds.sizes["layer"]

    h = heads.copy()
    h.loc[h["layer"] == L, ["attn_sep", "attn_punct"]] = 0.01
    assert _verdicts(ds, h, layers, meta, shares)["c1_separators"] == FAILS

    h = heads.copy()
    h["p_repeat"] = 0.2
    assert _verdicts(ds, h, layers, meta, shares)["c2_repeat_spread"] == FAILS

    h = heads.copy()
    h["p_same_sentence"] = h["p_same_sentence_chance"] * 0.5
    assert _verdicts(ds, h, layers, meta, shares)["c3_same_sentence"] == FAILS

    ly = layers.copy()
    ly["mean_distance"] = [2.0, 4.0, 6.0]
    assert _verdicts(ds, heads, ly, meta, shares)["c4_distances"] == FAILS

    ly = layers.copy()
    ly["median_anchor_fraction"] = 0.2
    assert _verdicts(ds, heads, ly, meta, shares)["c5_anchor_fraction"] == FAILS

    ly = layers.copy()
    ly["mean_distinct_anchors"] = 1.0
    assert _verdicts(ds, heads, ly, meta, shares)["c6_distinct_anchors"] == FAILS

    d = ds.copy(deep=True)
    sh = np.zeros_like(d["sim_value_hist"].values)
    sh[..., int(np.argmin(np.abs(d["sim_bin"].values - 0.35)))] = 1
    d["sim_value_hist"][:] = sh
    assert _verdicts(d, heads, layers, meta, shares)["c7_similarity_gap"] == FAILS

    d = ds.copy(deep=True)
    t = d.sizes["query"]
    band = np.zeros((t, t))
    band[np.arange(t - 3), np.arange(3, t)] = 1.0
    d["attn_sum_top_zeroed"][:] = band
    assert _verdicts(d, heads, layers, meta, shares)["c8_diagonal"] == FAILS


def test_verdicts_flip_end_to_end(report_b: Path, run_b: Path) -> None:
    """Run B's Dataset contradicts the claims; its tables come from that Dataset (as in a real run)."""
    claims = claims_of(report_b)
    assert report_b.parent == run_b
    for cid in ("c1_separators", "c2_repeat_spread", "c3_same_sentence", "c4_distances", "c5_anchor_fraction",
                "c6_distinct_anchors", "c7_similarity_gap", "c8_diagonal"):
        assert claims[cid]["verdict"] == FAILS, (cid, claims[cid]["value"])


def test_not_applicable_without_pairs(run_a: Path) -> None:
    ds = xr.open_dataset(run_a / "stats.nc").load()
    for name in ("n_pairs", "n_repeat", "n_same_sentence", "n_repeat_same_sentence", "distance_hist",
                 "anchor_fraction_hist", "anchor_fraction_sum", "anchor_windows", "anchor_distinct_hist",
                 "sim_value_hist", "location_counts"):
        ds[name][:] = 0
    heads, layers = summary_tables(ds)
    verdicts = _verdicts(ds, heads, layers, {})
    for cid in ("c2_repeat_spread", "c3_same_sentence", "c4_distances", "c5_anchor_fraction", "c7_similarity_gap"):
        assert verdicts[cid] == NA, cid
    # a two-layer model has no separate middle layer
    two = ds.isel(layer=[0, 1])
    h2, l2 = summary_tables(two)
    assert _verdicts(two, h2, l2, {})["c4_distances"] == NA


def test_shares_without_tokenizer_fall_back_to_one_cls_and_sep_per_window(run_a: Path) -> None:
    run = load_report_run(run_a, use_tokenizer=False)
    assert run.shares["punct"] is None
    assert run.shares["sep"] == pytest.approx(8 / run.shares["tokens"])
    c1 = next(c for c in compute_claims(run.dataset, run.heads, run.layers, run.meta, shares=run.shares)
              if c.id == "c1_separators")
    assert c1.verdict in VERDICTS and "[SEP]" in c1.measure and not c1.numbers["punctuation_counted"]


# ---------------------------------------------------------------------------------------------
# index.html
# ---------------------------------------------------------------------------------------------


def _links(html: str) -> list[str]:
    return re.findall(r'(?:href|src)="([^"]+)"', html)


def _assert_links_exist(index: Path) -> None:
    html = index.read_text()
    assert "<script" not in html.lower()
    for link in _links(html):
        if link.startswith("#"):
            continue
        assert not re.match(r"^[a-z]+:", link) and not link.startswith("//"), link  # relative only
        assert (index.parent / link).exists(), link


def test_report_page(report_a: Path) -> None:
    html = report_a.read_text()
    _assert_links_exist(report_a)
    for spec in FIGURES:
        assert f'src="{spec.stem}.svg"' in html and f'href="{spec.stem}.png"' in html
    assert html.count("<figcaption>") == len(FIGURES) + 4  # + the example's four figures
    assert "fake-a" in html and "BERT-base" in html and "not expected to carry over" in html
    assert "6 layers \u00d7 12 heads" in html  # the embedded MiniLM named plainly
    assert "synthetic" in html and "0.3" in html  # corpus and threshold
    for cid in claims_of(report_a):
        assert f'id="{cid}"' in html
    # the example: figures under example/, the pair table escaped
    assert 'src="example/fig04_attention.png"' in html and "example/fig09_pairs.csv" in html
    assert "&lt;b&gt;dog&lt;/b&gt;" in html and "<b>dog</b>" not in html


def test_report_without_example_says_how_to_get_it(report_b: Path) -> None:
    html = report_b.read_text()
    _assert_links_exist(report_b)
    assert "headsim inspect" in html and "example/" not in html
    assert 'href="stats.nc"' in html  # written into the run directory: run files linked side by side


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------


def test_compare_two_runs(comparison: Path) -> None:
    out = comparison.parent
    _assert_links_exist(comparison)
    with Image.open(out / "compare_layers.png") as im:
        im.verify()
    assert ET.parse(out / "compare_layers.svg").getroot().tag.endswith("svg")
    table = pd.read_csv(out / "claims_compare.csv")
    assert len(table) == 8
    assert {"run_a: verdict", "run_b: verdict", "run_a: value", "run_b: value"} <= set(table.columns)
    assert (table["run_a: verdict"] == HOLDS).all() and (table["run_b: verdict"] == FAILS).all()
    data = json.loads((out / "claims_compare.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["run_a", "run_b"]
    html = comparison.read_text()
    assert "fake-a" in html and "fake-b" in html and "BERT-base" in html


def test_compare_needs_two_runs(run_a: Path, tmp_path: Path) -> None:
    with pytest.raises(HeadsimError):
        compare_runs([run_a], tmp_path)


def test_report_of_a_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HeadsimError) as info:
        build_report(tmp_path / "nope", tmp_path / "out")
    assert info.value.fix
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "run.json").write_text("{}")
    with pytest.raises(HeadsimError) as info:
        build_report(tmp_path / "half", tmp_path / "out")
    assert "written by another version of headsim" in info.value.problem


def test_labels_do_not_collide(tmp_path: Path) -> None:
    from headsim.report.compare import _labels
    from headsim.runs.run import Run

    runs = [Run(tmp_path / "a" / "run", {}, pd.DataFrame(), pd.DataFrame()),
            Run(tmp_path / "b" / "run", {}, pd.DataFrame(), pd.DataFrame())]
    labels = _labels(runs)
    assert labels == ["a/run", "b/run"]


# ---------------------------------------------------------------------------------------------
# The figures package: one module per figure, the report only lists them
# ---------------------------------------------------------------------------------------------


def test_each_claim_comes_from_one_figure_in_id_order(run_a: Path) -> None:
    from headsim.figures import Statistics
    from headsim.report.claims import token_shares

    ds = xr.open_dataset(run_a / "stats.nc").load()
    heads, layers = summary_tables(ds)
    stats = Statistics(ds, heads, layers, token_shares(None, None, ds))
    owners = {c.id: f.stem for f in FIGURES for c in f.claims(stats)}
    assert len({f.stem for f in FIGURES}) == len(FIGURES)
    assert len(owners) == sum(len(f.claims(stats)) for f in FIGURES) == 8  # no claim in two figures
    assert owners["c3_same_sentence"] == "fig08_same_sentence" and owners["c8_diagonal"] == "fig03_zeroed_attention"
    ids = [c.id for c in compute_claims(ds, heads, layers, {})]
    assert ids == sorted(owners) and ids[0].startswith("c1_") and ids[-1].startswith("c8_")


def test_figures_of_a_binned_run_speak_in_token_positions(run_a: Path) -> None:
    """On a run binned above its resolution (query/key/distance = each bin's first position), the matrix
    figures label their axes with positions, the distance bars span their bins and the tables' mean
    distance is in tokens, as the histogram's."""
    from matplotlib.patches import Rectangle

    from headsim.figures import fig02_summed_attention, fig07_distance_histograms, fig10_locations
    from headsim.stats.tables import distance_summary

    ds = xr.open_dataset(run_a / "stats.nc").load()
    t = ds.sizes["query"]
    binned = ds.assign_coords(query=3 * np.arange(t), key=3 * np.arange(t), distance=3 * np.arange(t))
    binned.attrs.update(position_binned=1, seq_len=3 * t)
    heads, _ = summary_tables(binned)
    exact = binned["distance_sum"].values / binned["n_pairs"].values  # the mean distance is exact at any binning
    assert np.allclose(heads["mean_distance"].to_numpy(), exact.ravel(), equal_nan=True)
    mean, _ = distance_summary(binned.drop_vars("distance_sum"))  # without it: each bin at its first distance
    plain, _ = distance_summary(ds.drop_vars("distance_sum"))
    assert np.allclose(mean, 3 * plain, equal_nan=True)
    fig = fig02_summed_attention(binned, model="m")
    ax = fig.axes[0]
    labels = [x.get_text() for x in ax.get_xticklabels()]
    assert labels[0] == "0" and labels[-1] == str(3 * (t - 1)) and "bins of 3)" in fig._suptitle.get_text()
    plt.close(fig)
    fig = fig07_distance_histograms(binned, heads, model="m")
    widths = {round(p.get_width(), 6) for p in fig.axes[0].patches if isinstance(p, Rectangle)}
    assert widths == {3.0}
    plt.close(fig)
    fig = fig10_locations(binned, model="m")
    assert f"0..{3 * t - 1} in {t} bins of 3 tokens" in fig._supxlabel.get_text()
    plt.close(fig)
    unbinned = fig02_summed_attention(ds, model="m")  # a run kept per position: matrix indices are positions
    assert "bins" not in unbinned._suptitle.get_text() and unbinned.axes[0].get_xticklabels()[-1].get_text() != str(3 * (t - 1))
    plt.close(unbinned)
