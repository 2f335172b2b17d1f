"""Tests for headsim.stats: the accumulators against the naive reference, merge, checkpoints, padding."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_windows import accumulate, assert_matches_reference, random_batch, to_info
from reference_stats import reference_stats

from headsim.errors import HeadsimError
from headsim.stats import (
    HEADS_COLUMNS,
    LAYERS_COLUMNS,
    CorpusStats,
    batch_info,
    heads_table,
    layers_table,
)

# ---------------------------------------------------------------------------------------------
# (1) random windows against the reference
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def random_run():
    rng = np.random.default_rng(7)
    n_layers, n_heads, t = 2, 4, 20
    batches = [random_batch(rng, 8, n_layers, n_heads, t) for _ in range(7)]  # 56 windows
    batches[3]["attention"] = None  # attention skipped for one batch
    kwargs = {"threshold": 0.3, "top_k_columns": 3, "sim_bins": 40, "sim_range": (-0.2, 1.0), "fraction_bins": 10}
    stats = accumulate(batches, n_layers, n_heads, t, chunk_windows=3, **kwargs)  # batches of 8 in steps of 3
    ref = reference_stats(batches, n_layers, n_heads, t, **kwargs)
    return stats, ref, batches


def test_random_windows_match_reference(random_run):
    stats, ref, _ = random_run
    ds = stats.to_dataset()
    assert int(ds["windows"]) == 56
    assert_matches_reference(ds, ref)
    # the data exercised the interesting cases
    assert ref["_anchor_ties"] > 0 and ref["_column_ties"] > 0
    assert (ds["n_repeat"] > 0).any() and (ds["n_same_sentence"] < ds["n_pairs"]).any()
    assert int(ds["attn_windows"][0]) == 48 and int(ds["layer_windows"][0]) == 56


def test_top_zeroed_attention_is_never_below_zero(random_run):
    """The top-zeroed sum adds attention with the columns zeroed, so it is a sum of non-negative
    numbers: never below 0 (taking the columns off a plain sum leaves rounding residues below 0)."""
    stats, _, _ = random_run
    ds = stats.to_dataset()
    zeroed = ds["attn_sum_top_zeroed"].values
    assert (zeroed >= 0).all() and (zeroed <= ds["attn_sum"].values).all()


def test_top_zeroed_attention_from_a_plain_sum_is_never_below_zero():
    """The compiled and Triton backends take the top columns off a plain sum (``plain_sum``): the rounding
    residues that leaves below 0 are set to 0, and the sum agrees with zeroing the columns first."""
    from types import SimpleNamespace

    from headsim.stats.attention import add_reduced_attention, reduce_attention

    torch.manual_seed(0)
    b, h, t = 64, 3, 16
    logits = torch.randn(b, h, t, t)
    logits[..., 0] += 4  # columns 0 and 5 are every window's top columns
    logits[..., 5] += 3
    a = torch.softmax(logits, dim=-1)
    bt = SimpleNamespace(padded=False, valid=torch.ones(b, t, dtype=torch.bool), key_targets=torch.zeros(b, t, 3))

    def added(**sums):
        into = {"attn_focus": torch.zeros(h, 5, dtype=torch.float64),
                "attn_sum": torch.zeros(h, t, t, dtype=torch.float64),
                "attn_sum_top_zeroed": torch.zeros(h, t, t, dtype=torch.float64)}
        red = reduce_attention(a.clone(), bt, 2)
        add_reduced_attention(red.column_sums, red.diagonals, red.top, red.columns, bt, into, **sums)
        return into["attn_sum_top_zeroed"], red

    from_plain, red = added(plain_sum=a.sum(dim=0))
    zeroed, _ = added(zeroed=red.zeroed_sum)
    assert (red.top.sort(dim=-1).values == torch.tensor([0, 5])).all()
    assert (from_plain >= 0).all()
    torch.testing.assert_close(from_plain, zeroed, rtol=0, atol=1e-4)


def test_dataset_schema(random_run, tmp_path):
    stats, _, _ = random_run
    ds = stats.to_dataset()
    L, H, T = 2, 4, 20
    assert ds["layer"].values.tolist() == [1, 2] and ds["head"].values.tolist() == [1, 2, 3, 4]
    assert ds["target"].values.tolist() == ["cls", "sep", "punct", "prev", "next"]
    assert ds["attn_sum"].dims == ("layer", "head", "query", "key") and ds["attn_sum"].dtype == np.float64
    assert ds["distance_hist"].dims == ("layer", "head", "distance") and ds.sizes["distance"] == T
    assert ds["sim_value_hist"].dims == ("layer", "head", "sim_bin") and len(ds.attrs["sim_bin_edges"]) == 41
    assert ds["anchor_distinct_hist"].dims == ("layer", "n_anchors") and ds.sizes["n_anchors"] == H + 1
    for name in ("attn_queries", "valid_pairs", "valid_pairs_same_sentence", "windows", "tokens"):
        assert ds[name].dims == () and ds[name].dtype == np.int64
    assert ds.attrs["threshold"] == 0.3 and ds.attrs["top_k_columns"] == 3 and ds.attrs["seq_len"] == T
    # internal consistency
    np.testing.assert_array_equal(ds["distance_hist"].sum("distance"), ds["n_pairs"])
    np.testing.assert_array_equal(ds["location_counts"].sum(("query", "key")), 2 * ds["n_pairs"])
    np.testing.assert_array_equal(ds["distance_hist"].sel(distance=0), 0)
    np.testing.assert_array_equal(ds["anchor_distinct_hist"].sum("n_anchors"), ds["layer_windows"])
    assert (ds["sim_value_hist"].sum("sim_bin") == ds["valid_pairs"]).all()
    assert ds["location_counts"].shape == (L, H, T, T)
    # netCDF (the run directory's stats.nc) round trip, with whichever netCDF engine is installed
    engine = next((e for e, mod in (("h5netcdf", "h5py"), ("netcdf4", "netCDF4")) if _importable(mod)), None)
    if engine is not None:
        ds.to_netcdf(tmp_path / "stats.nc", engine=engine)
        with xr.open_dataset(tmp_path / "stats.nc", engine=engine) as back:
            xr.testing.assert_identical(back.load(), ds)


def _importable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def test_tables(random_run):
    stats, ref, _ = random_run
    ds = stats.to_dataset()
    heads, layers = heads_table(ds), layers_table(ds)
    assert list(heads.columns) == HEADS_COLUMNS and list(layers.columns) == LAYERS_COLUMNS
    assert heads[["layer", "head"]].values.tolist() == [[l, h] for l in (1, 2) for h in (1, 2, 3, 4)]
    row = heads.iloc[5]  # layer 2, head 2
    n = ref["n_pairs"][1, 1]
    assert row["n_pairs"] == n
    assert row["p_repeat"] == pytest.approx(ref["n_repeat"][1, 1] / n)
    assert row["p_same_sentence"] == pytest.approx(ref["n_same_sentence"][1, 1] / n)
    assert row["p_repeat_same_sentence"] == pytest.approx(ref["n_repeat_same_sentence"][1, 1] / ref["n_same_sentence"][1, 1])
    assert row["p_same_sentence_chance"] == pytest.approx(ref["valid_pairs_same_sentence"] / ref["valid_pairs"])
    dist = np.repeat(np.arange(20), ref["distance_hist"][1, 1])
    assert row["mean_distance"] == pytest.approx(dist.mean())
    assert row["median_distance"] == np.sort(dist)[(len(dist) - 1) // 2]
    assert row["anchor_fraction_mean"] == pytest.approx(ref["anchor_fraction_sum"][1, 1] / ref["anchor_windows"][1, 1])
    assert row["attn_cls"] == pytest.approx(ref["attn_focus"][1, 1, 0] / ref["attn_queries_layer"][1])
    assert row["attn_next"] == pytest.approx(ref["attn_focus"][1, 1, 4] / ref["attn_queries_layer"][1])
    distinct = ref["anchor_distinct_hist"][0]
    assert layers.loc[0, "mean_distinct_anchors"] == pytest.approx((distinct * np.arange(5)).sum() / distinct.sum())
    assert 0 <= layers.loc[0, "median_anchor_fraction"] <= 1
    below = ref["sim_value_hist"][1].sum(0)[:10].sum() / ref["sim_value_hist"][1].sum()  # 40 bins of 0.03: 0.1 = edge 10
    assert layers.loc[1, "share_sim_below_0_1"] == pytest.approx(below)
    assert layers.loc[1, "n_pairs"] == ref["n_pairs"][1].sum()
    empty = heads_table(CorpusStats(1, 2, 8).to_dataset())
    assert empty["p_repeat"].isna().all() and empty["mean_distance"].isna().all()


def test_histogram_helpers():
    from headsim.stats.tables import distance_summary, histogram_median, histogram_share

    edges = np.linspace(0.0, 1.0, 5)
    assert histogram_median(np.array([0, 2, 2, 0]), edges) == pytest.approx(0.5)
    assert histogram_median(np.array([1, 0, 0, 3]), edges) == pytest.approx(0.75 + 1 / 3 * 0.25)
    assert np.isnan(histogram_median(np.zeros(4), edges))
    assert histogram_share(np.array([1, 1, 1, 1]), edges, -np.inf, 0.5) == pytest.approx(0.5)
    assert histogram_share(np.array([1, 1, 1, 1]), edges, 0.25, 0.375) == pytest.approx(0.125)
    hist = lambda coords, **more: xr.Dataset({"distance_hist": ("distance", [0, 1, 1, 2]), **more},  # noqa: E731
                                             coords={"distance": coords})
    mean, median = distance_summary(hist([0, 1, 2, 3]))
    assert mean == pytest.approx(2.25) and median == 2
    # a binned run: the median's bin counts at its first distance (the distance coordinate), not its index;
    # the mean is the exact distance_sum / n_pairs where the Dataset has it (else the histogram's)
    mean, median = distance_summary(hist([0, 4, 8, 12]))
    assert mean == pytest.approx(9.0) and median == 8
    mean, median = distance_summary(hist([0, 4, 8, 12], distance_sum=((), 41)))
    assert mean == pytest.approx(41 / 4) and median == 8


def test_ratio_is_nan_only_where_the_denominator_is_zero():
    from headsim.stats.tables import ratio

    out = ratio([1, 2, 3, 0], [2, 0, -3, 0])
    assert out[0] == 0.5 and out[2] == -1.0 and np.isnan(out[1]) and np.isnan(out[3])


# ---------------------------------------------------------------------------------------------
# (2) a tiny random-weight BERT on real windows
# ---------------------------------------------------------------------------------------------


def test_tiny_bert_matches_reference():
    from transformers import BertConfig, BertModel

    import headsim
    from headsim.model.plain import attention_probs
    from headsim.model.tap import capture
    from headsim.inspection import example_text
    from headsim.model.load import from_pretrained_objects
    from headsim.windows import make_windows

    tokenizer = headsim.load_model().tokenizer
    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        vocab_size=len(tokenizer), max_position_embeddings=64)
    loaded = from_pretrained_objects(BertModel(config), tokenizer, "tiny")
    windows = make_windows([example_text("gerstenslager"), example_text("airport_policing")], tokenizer, seq_len=24)
    assert (windows.attention_mask == 0).any()
    batches = []
    for start in range(0, len(windows), 4):
        ids = windows.input_ids[start:start + 4]
        mask = windows.attention_mask[start:start + 4]
        got = capture(loaded, ids, mask, attention=False, qkv=True)
        m = torch.as_tensor(mask)
        att = torch.stack([attention_probs(got["query"][:, l], got["key"][:, l], m) for l in range(2)], dim=1)
        info = batch_info(ids, mask, windows.sentence_ids[start:start + 4], tokenizer)
        batches.append({"input_ids": info.input_ids.numpy(), "valid": info.valid.numpy(),
                        "sentence_ids": info.sentence_ids.numpy(), "is_cls": info.is_cls.numpy(),
                        "is_sep": info.is_sep.numpy(), "is_punct": info.is_punct.numpy(),
                        "head_outputs": got["head_outputs"].numpy(), "attention": att.numpy(), "info": info,
                        "query": got["query"], "key": got["key"]})
    assert any(b["is_punct"].any() for b in batches)
    for batch in batches:  # categories agree with the token strings
        tokens = np.asarray(tokenizer.convert_ids_to_tokens(batch["input_ids"].reshape(-1).tolist())).reshape(-1, 24)
        assert set(tokens[batch["is_cls"]]) == {"[CLS]"} and set(tokens[batch["is_sep"]]) == {"[SEP]"}
        assert set(tokens[batch["is_punct"]]) <= set(".,;:!?'\"()-%$&/[]")
        assert not (batch["is_punct"] & ~batch["valid"]).any()
    stats = CorpusStats(2, 4, 24)
    for batch in batches:
        stats.begin_batch(batch["info"])
        for layer in range(2):
            stats.update_layer(layer, torch.as_tensor(batch["attention"][:, layer]),
                               torch.as_tensor(batch["head_outputs"][:, layer]), batch["info"])
    ds = stats.to_dataset()
    assert int(ds["windows"]) == len(windows)
    ref = reference_stats(batches, 2, 4, 24)
    assert_matches_reference(ds, ref)
    assert int(ds["n_pairs"].sum()) > 0
    # the driver's path: attention computed from the captured Q and K step by step inside the accumulator
    captured = CorpusStats(2, 4, 24, chunk_windows=3)
    for batch in batches:
        captured.begin_batch(batch["info"])
        for layer in range(2):
            captured.update_captured(layer, batch["query"][:, layer], batch["key"][:, layer],
                                     torch.as_tensor(batch["head_outputs"][:, layer]), batch["info"])
    assert_matches_reference(captured.to_dataset(), ref)
    with pytest.raises(HeadsimError, match="query has shape"):
        captured.begin_batch(batches[0]["info"])
        captured.update_captured(0, batches[0]["query"][:, 0, :, :5], batches[0]["key"][:, 0],
                                 torch.as_tensor(batches[0]["head_outputs"][:, 0]), batches[0]["info"])


# ---------------------------------------------------------------------------------------------
# (3) properties: merge, checkpoints, pair statistics on arbitrary masks
# ---------------------------------------------------------------------------------------------


def assert_same_state(a: CorpusStats, b: CorpusStats, rtol: float = 0.0) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        if sa[key].dtype.kind == "f" and rtol:
            np.testing.assert_allclose(sa[key], sb[key], rtol=rtol, atol=rtol, err_msg=key)
        else:
            np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
            assert sa[key].dtype == sb[key].dtype, key


HYP = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HYP
@given(seed=st.integers(0, 2**31 - 1), sizes=st.lists(st.integers(1, 4), min_size=3, max_size=5),
       t=st.integers(4, 12))
def test_merge_is_exact_and_associative(seed, sizes, t):
    rng = np.random.default_rng(seed)
    batches = [random_batch(rng, b, 2, 3, t, attention=bool(rng.random() < 0.8)) for b in sizes]
    cut1, cut2 = 1, 2 + (len(batches) > 3)
    parts = [batches[:cut1], batches[cut1:cut2], batches[cut2:]]
    whole = accumulate(batches, 2, 3, t)
    make = lambda i: accumulate(parts[i], 2, 3, t)
    left = make(0).merge(make(1)).merge(make(2))
    right = make(0).merge(make(1).merge(make(2)))
    assert_same_state(left, whole, rtol=1e-9)
    assert_same_state(left, right, rtol=1e-9)
    assert left.windows == sum(sizes)
    with pytest.raises(HeadsimError):
        left.merge(CorpusStats(2, 3, t, threshold=0.5))


@HYP
@given(seed=st.integers(0, 2**31 - 1), t=st.integers(4, 12))
def test_state_dict_round_trip_is_exact(seed, t):
    rng = np.random.default_rng(seed)
    stats = accumulate([random_batch(rng, 3, 2, 2, t) for _ in range(2)], 2, 2, t, top_k_columns=2,
                       sim_bins=17, sim_range=(-0.5, 1.5), fraction_bins=7, threshold=0.45)
    buf = io.BytesIO()
    np.savez(buf, **stats.state_dict())
    buf.seek(0)
    with np.load(buf) as archive:
        back = CorpusStats.from_state_dict(archive)
    assert back.config == stats.config
    assert_same_state(back, stats)
    xr.testing.assert_identical(back.to_dataset(), stats.to_dataset())
    # resuming continues exactly as if never interrupted
    more = random_batch(rng, 2, 2, 2, t)
    for s in (stats, back):
        info = to_info(more)
        s.begin_batch(info)
        for layer in range(2):
            s.update_layer(layer, torch.as_tensor(more["attention"][:, layer]),
                           torch.as_tensor(more["head_outputs"][:, layer]), info)
    assert_same_state(back, stats)


@HYP
@given(seed=st.integers(0, 2**31 - 1), b=st.integers(1, 5), h=st.integers(1, 4), t=st.integers(2, 16),
       density=st.floats(0.0, 1.0))
def test_pair_statistics_on_random_masks(seed, b, h, t, density):
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, b, 1, h, t, attention=False)
    raw = rng.random((b, h, t, t)) < density
    sym = np.triu(raw, 1) | np.triu(raw, 1).transpose(0, 1, 3, 2)
    norm = rng.random((b, h, t, t)).astype(np.float32)
    info = to_info(batch)
    stats = CorpusStats(1, h, t, fraction_bins=5)
    stats.begin_batch(info)
    stats.update_similarity(0, torch.as_tensor(norm), torch.as_tensor(sym), info)
    ds = stats.to_dataset()
    valid = batch["valid"]
    upper = np.triu(sym & valid[:, None, :, None] & valid[:, None, None, :], 1)
    per_window = upper.sum(axis=(2, 3))  # [b, h]
    np.testing.assert_array_equal(ds["n_pairs"].values[0], per_window.sum(0))
    np.testing.assert_array_equal(ds["distance_hist"].values[0].sum(-1), per_window.sum(0))
    i, j = np.nonzero(upper.any(axis=(0, 1)))
    assert (ds["distance_hist"].values[0][:, : (j - i).min() if len(i) else 0] == 0).all()
    loc = ds["location_counts"].values[0]
    np.testing.assert_array_equal(loc, loc.transpose(0, 2, 1))
    np.testing.assert_array_equal(loc, (upper | upper.transpose(0, 1, 3, 2)).sum(0))
    assert (ds["n_repeat"] <= ds["n_pairs"]).all() and (ds["n_same_sentence"] <= ds["n_pairs"]).all()
    assert (ds["n_repeat_same_sentence"] <= np.minimum(ds["n_repeat"], ds["n_same_sentence"])).all()
    np.testing.assert_array_equal(ds["anchor_windows"].values[0], (per_window > 0).sum(0))
    np.testing.assert_array_equal(ds["anchor_fraction_hist"].sum("fraction_bin").values[0], (per_window > 0).sum(0))
    mean = ds["anchor_fraction_sum"] / ds["anchor_windows"].where(ds["anchor_windows"] > 0)
    assert ((mean > 0) & (mean <= 1)).where(ds["anchor_windows"] > 0, True).all()
    assert int(ds["anchor_distinct_hist"].sum()) == b
    assert int(ds["sim_value_hist"].sum()) == int(ds["valid_pairs"]) * h
    np.testing.assert_allclose(ds["sim_sum"].values[0],
                               np.where(valid[:, None, :, None] & valid[:, None, None, :] & ~np.eye(t, dtype=bool),
                                        norm, 0).sum(0), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# (4) padding never counts; misuse is a clear error
# ---------------------------------------------------------------------------------------------


def test_padding_changes_nothing():
    rng = np.random.default_rng(3)
    batches = [random_batch(rng, 6, 2, 3, 16, min_len=3) for _ in range(3)]
    assert any((~b["valid"]).any() for b in batches)
    changed = []
    for batch in batches:
        other = dict(batch)
        pad = ~batch["valid"]
        z = batch["head_outputs"].copy()
        zt = z.transpose(0, 3, 1, 2, 4)  # view [B, T, L, H, d]
        noise = rng.normal(scale=1e3, size=zt[pad].shape)
        noise[..., 0] = np.nan
        zt[pad] = noise
        a = batch["attention"].copy()
        cross = pad[:, None, None, :, None] | pad[:, None, None, None, :]
        a = np.where(cross, np.where(rng.random(a.shape) < 0.5, np.nan, 7.0), a).astype(np.float32)
        other["head_outputs"], other["attention"] = z, a
        changed.append(other)
    assert_same_state(accumulate(batches, 2, 3, 16), accumulate(changed, 2, 3, 16))


@pytest.mark.parametrize("positions", [None, 4])
def test_a_step_of_a_batch_selects_the_tensors_its_windows_would_build(positions):
    """A step's tensors (``BatchTensors.select``) equal those built from its windows alone, binned or not;
    equal-token pairs renumbered to the step's windows, the counts a step has its own."""
    from headsim.stats.batch import batch_tensors

    rng = np.random.default_rng(5)
    info = to_info(random_batch(rng, 7, 1, 2, 12, min_len=3))
    whole = batch_tensors(info, positions)
    for index in (slice(0, 3), slice(3, 7), slice(2, 5)):
        got, want = whole.select(index), batch_tensors(info.select(index), positions)
        assert got.padded == want.padded and got.counts.keys() <= want.counts.keys()
        for name in ("valid", "pair_valid", "pair_invalid", "same_sentence", "repeat_same_sentence", "first",
                     "key_targets", "categories", "sentences"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None and b is None) or torch.equal(a, b), name
        assert all(torch.equal(a, b) for a, b in zip(got.repeat_index, want.repeat_index))
        assert all(torch.equal(got.counts[k], want.counts[k]) for k in got.counts)
    assert whole.select(slice(0, 7)) is whole


@pytest.mark.parametrize("rows", [1024, 5])
def test_batch_tensors_relations_equal_a_dense_pair_by_pair_count(rows):
    """First positions, equal-id pairs (in window-major order, whatever the rows per block), valid pairs per
    position pair and same-sentence pairs equal counts taken pair by pair; padding (anywhere) relates to nothing."""
    from headsim.stats.batch import batch_tensors

    rng = np.random.default_rng(11)
    b, t = 5, 13
    batch = random_batch(rng, b, 1, 2, t, min_len=4)
    batch["input_ids"] = rng.integers(5, 9, size=(b, t))  # few ids: many repeats
    batch["valid"][1, 2] = False  # padding inside a window too
    info = to_info(batch)
    bt = batch_tensors(info, rows=rows)
    ids, valid, sent = (np.asarray(x) for x in (info.input_ids, info.valid.bool(), bt.sentences))
    pairs, first = [], np.full((b, t), t - 1)
    count, same_sentence = np.zeros((t, t), np.int64), 0
    for w in range(b):
        for i in range(t):
            if valid[w, i]:
                first[w, i] = min(j for j in range(t) if valid[w, j] and ids[w, j] == ids[w, i])
            for j in range(t):
                count[i, j] += valid[w, i] and valid[w, j]
                if i < j and valid[w, i] and valid[w, j]:
                    same_sentence += sent[w, i] == sent[w, j] and sent[w, i] >= 0
                    if ids[w, i] == ids[w, j]:
                        pairs.append((w, i, j))
    assert np.array_equal(bt.first.numpy(), first)
    assert [tuple(map(int, x)) for x in zip(*bt.repeat_index)] == pairs
    assert np.array_equal(bt.counts["pair_count_valid"].numpy(), count)
    assert int(bt.counts["valid_pairs_same_sentence"]) == same_sentence
    assert torch.equal(bt.pair_valid[:, 0], torch.as_tensor(valid[:, :, None] & valid[:, None, :]))


def test_the_cpu_kernel_finds_each_windows_maximum_as_the_whole_matrix_does():
    """Windows of one similarity tile: the maximum read from the one tile (the diagonal skipped; no positive
    entry, or a NaN, and the window's S is not kept) gives the torch reduction's numbers exactly."""
    pytest.importorskip("numba")
    from headsim.stats.batch import batch_tensors
    from headsim.stats.pairs import SimBins
    from headsim.stats.tiled import Bins, pair_reductions_tiled

    rng = np.random.default_rng(9)
    batch = random_batch(rng, 4, 1, 3, 12, min_len=4)
    z = torch.as_tensor(batch["head_outputs"][:, 0]).clone()  # [B, H, T, d]
    z[:, 1] = 0.0  # no positive similarity anywhere
    z[1, 2, 0, 0] = float("nan")  # a NaN in a valid position
    z[2, 0, 3] = z[2, 0, 3] * 50  # one row dominates: every other pair far below the threshold
    bt = batch_tensors(to_info(batch))
    bins, sim = Bins.build(12, 12, "cpu"), SimBins(40, -0.2, 1.0)
    (got, *got_d), (want, *want_d) = (pair_reductions_tiled(z, bt, 0.3, sim, bins, 12, kernel=k) for k in ("numba", "torch"))
    for name in ("hist", "location", "rows", "cols", "inner", "same_sentence", "repeat"):
        assert torch.equal(getattr(got, name).double(), getattr(want, name).double()), name
    assert torch.allclose(got.sim_sum, want.sim_sum.double(), rtol=1e-5, atol=1e-6, equal_nan=True)
    assert torch.isnan(got.sim_sum[2]).any() and int(got.location[1].sum()) == 0
    assert all(torch.equal(a.double(), b.double()) for a, b in zip(got_d, want_d))


def test_head_products_read_the_models_layout_in_place_and_scale_inside():
    """``head_matmul`` of heads laid out side by side (``[B, T, H, d]`` seen as ``[B, H, T, d]``) equals a
    float64 product, scaled, and returns a new contiguous tensor."""
    from headsim.model.plain import head_matmul

    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(3, 10, 4, 8, generator=g).transpose(1, 2) for _ in range(2))
    got = head_matmul(q, k.transpose(-1, -2), 0.25)
    want = (q.double() @ k.double().transpose(-1, -2)) * 0.25
    assert got.is_contiguous() and got.shape == (3, 4, 10, 10) and got.dtype == torch.float32
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-6)


def test_batch_info_token_categories_cover_the_vocabulary():
    """Every vocabulary id (and ids outside it) gets the category its token string has."""
    import headsim
    from headsim.tokens import punctuation_ids

    tokenizer = headsim.load_model().tokenizer
    n = len(tokenizer)
    ids = np.concatenate([np.arange(n), [n, n + 7, 10**6]])
    ids = np.pad(ids, (0, -len(ids) % 64)).reshape(-1, 64)
    ids[-1, -3:] = punctuation_ids(tokenizer)[0]
    mask = np.ones_like(ids)
    mask[-1, -3:] = 0  # padding is never punctuation
    info = batch_info(ids, mask, np.zeros_like(ids), tokenizer)
    expected = np.isin(ids, punctuation_ids(tokenizer)) & (mask == 1)
    assert expected.sum() > 20 and np.array_equal(info.is_punct.numpy(), expected)
    assert np.array_equal(info.is_cls.numpy(), ids == tokenizer.cls_token_id)
    assert np.array_equal(info.is_sep.numpy(), ids == tokenizer.sep_token_id)


def test_misuse_raises():
    rng = np.random.default_rng(0)
    batch = random_batch(rng, 2, 1, 2, 8)
    stats = CorpusStats(1, 2, 8)
    info = to_info(batch)
    z = torch.as_tensor(batch["head_outputs"][:, 0])
    with pytest.raises(HeadsimError, match="begin_batch"):
        stats.update_layer(0, None, z, info)
    stats.begin_batch(info)
    with pytest.raises(HeadsimError, match="layer"):
        stats.update_layer(1, None, z, info)
    with pytest.raises(HeadsimError, match="head_outputs"):
        stats.update_layer(0, None, z[:, :1], info)
    stats.update_layer(0, None, z, info)  # the only layer: the batch is complete and released
    assert stats._chunks == []
    with pytest.raises(HeadsimError, match="begin_batch"):
        stats.update_layer(0, None, z, info)
    stats.begin_batch(info)
    with pytest.raises(HeadsimError, match="seq_len"):
        stats.begin_batch(to_info(random_batch(rng, 2, 1, 2, 9)))
    with pytest.raises(HeadsimError):
        CorpusStats(1, 2, 8, threshold=1.5)
    with pytest.raises(HeadsimError):
        CorpusStats.from_state_dict({"windows": np.zeros(())})


def test_focus_targets_follow_the_windows_framing(tokenizer):
    """The ``cls`` / ``sep`` attention targets are the window's own opening and closing tokens: a
    BOS-framed decoder (an opener, no closer; GPT-2's ``<|endoftext|>`` is its BOS and EOS at once) has no
    ``sep`` target even where the tokenizer names an EOS id, and the report's token shares classify the
    same way."""
    import pandas as pd

    from headsim.report.claims import token_shares
    from headsim.stats.batch import batch_info
    from headsim.windows import Framing

    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids = np.array([[cls, 2000, sep, 2001, 2002, sep], [cls, 2003, 2004, 0, 0, 0]])
    mask = (np.arange(6)[None] < np.array([[6], [3]])).astype(np.int64)
    sentences = np.where(mask == 1, 0, -1)
    by_tokenizer = batch_info(ids, mask, sentences, tokenizer)
    assert by_tokenizer.is_sep.tolist() == ((ids == sep) & (mask == 1)).tolist()
    opener_only = batch_info(ids, mask, sentences, tokenizer, framing=Framing(cls, None, 0))
    assert opener_only.is_cls.tolist() == ((ids == cls) & (mask == 1)).tolist() and not opener_only.is_sep.any()
    windows = pd.DataFrame({"input_ids": list(ids), "attention_mask": list(mask)})
    shares = token_shares(windows, tokenizer, framing={"open": cls, "close": None})
    assert shares["cls"] == pytest.approx(2 / 9) and shares["sep"] == 0.0
    assert token_shares(windows, tokenizer)["sep"] == pytest.approx(2 / 9)  # runs without a recorded framing
    assert token_shares(windows, None, framing={"open": cls, "close": None})["sep"] == 0.0
