"""Long windows in the per-text views: a binned overview above the view resolution, exact zoom, capped
pair tables, and no [L, H, n, n] (nor a layer's [H, n, n]) built on the way. A window of ~96 tokens viewed
on 32 bins with blocks of 7 query rows stands in for 8,192 tokens on 512 bins."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import SENTENCES
from headsim.context_similarity import normalized_similarity
from headsim.errors import HeadsimError
from headsim.model.tap import capture
from headsim.views import text_view

TEXT = " ".join([SENTENCES] * 4)
SEQ, R, ROWS = 96, 32, 7


@pytest.fixture(scope="module")
def views(tiny_bert):
    """(exact view, binned view) of the same 96-token window."""
    return text_view(TEXT, tiny_bert, seq_len=SEQ), text_view(TEXT, tiny_bert, seq_len=SEQ, resolution=R, tile_rows=ROWS)


def block_means(m: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """Mean of every (bin a, bin b) block of ``m`` ``[..., n, n]``, by loops (independent of the view)."""
    r = int(bins.max()) + 1
    out = np.zeros(m.shape[:-2] + (r, r))
    for a in range(r):
        for b in range(r):
            out[..., a, b] = m[..., bins == a, :][..., bins == b].mean(axis=(-1, -2))
    return out


@pytest.mark.parametrize("n, r", [(96, 32), (97, 32), (50, 7)])
def test_bin_pairs_sum_each_block(n, r):
    """Equal bins (n a multiple of R) and unequal ones give the block sums of a block of query rows."""
    from headsim.stats.batch import position_bins
    from headsim.views.text_view import bin_pairs

    block = torch.rand(3, 11, n, generator=torch.Generator().manual_seed(n))
    bins = position_bins(n, r)
    rows = slice(20, 31)
    got = bin_pairs(block, rows, bins, r).numpy()
    want = np.zeros((3, r, r))
    for a in range(r):
        for b in range(r):
            want[:, a, b] = block.numpy()[:, bins[rows] == a][:, :, bins == b].sum(axis=(-1, -2))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_overview_bins_are_the_means_of_the_exact_blocks(views):
    exact, long = views
    n = exact.n
    assert n == SEQ and not exact.binned and long.binned and long.n == n
    assert long.attention.shape == long.normalized.shape == (2, 4, R, R)
    np.testing.assert_array_equal(long.bins, np.arange(n) * R // n)
    ranges = long.bin_ranges
    assert ranges[0, 0] == 0 and ranges[-1, 1] == n and (ranges[1:, 0] == ranges[:-1, 1]).all()
    assert long.labels[0] == f"0–{ranges[0, 1] - 1}"
    np.testing.assert_allclose(long.attention, block_means(exact.attention, long.bins), atol=1e-6)
    np.testing.assert_allclose(long.normalized, block_means(exact.normalized, long.bins), atol=1e-6)
    np.testing.assert_allclose(long.mask_overview(0.3, 1, 2),
                               block_means((exact.normalized[1, 2] > np.float32(0.3)).astype(float), long.bins))
    # what does not depend on the matrices is the same as the exact view's
    for key in exact.focus:
        np.testing.assert_allclose(long.focus[key], exact.focus[key], atol=1e-6, err_msg=key)
    np.testing.assert_allclose(long.column_scores(1), exact.column_scores(1), atol=1e-6)
    np.testing.assert_allclose(long.head_outputs, exact.head_outputs, atol=1e-6)
    with pytest.raises(HeadsimError, match="position bins"):
        long.mask(0.3)


@pytest.mark.parametrize("rows, cols", [(slice(10, 50), slice(30, 96)), (range(0, 7), range(90, 96))])
def test_zoom_equals_the_exact_region(views, rows, cols):
    exact, long = views
    for view in views:
        z = view.zoom(1, 2, rows, cols)
        r, c = slice(z.rows.start, z.rows.stop), slice(z.cols.start, z.cols.stop)
        assert z.attention.shape == z.normalized.shape == (len(z.rows), len(z.cols))
        assert z.row_tokens == exact.tokens[r] and z.col_tokens == exact.tokens[c]
        np.testing.assert_allclose(z.attention, exact.attention[1, 2, r, c], atol=1e-6)
        np.testing.assert_allclose(z.normalized, exact.normalized[1, 2, r, c], atol=1e-6)


def test_zoom_of_a_causal_decoder(tiny_llama_pair):
    llama, _ = tiny_llama_pair
    exact = text_view(TEXT, llama, seq_len=64)
    long = text_view(TEXT, llama, seq_len=64, resolution=16, tile_rows=5)
    z = long.zoom(1, 3, slice(20, 60), slice(0, 64))
    np.testing.assert_allclose(z.attention, exact.attention[1, 3, 20:60], atol=1e-6)
    np.testing.assert_allclose(z.normalized, exact.normalized[1, 3, 20:60], atol=1e-6)
    np.testing.assert_allclose(long.column_scores(0), exact.column_scores(0), atol=1e-6)


def test_zoom_errors(views):
    _, long = views
    with pytest.raises(HeadsimError, match="larger than"):
        long.zoom(0, 0, slice(0, 96), slice(0, 8), limit=64)
    with pytest.raises(HeadsimError, match="selects no token"):
        long.zoom(0, 0, slice(96, 100), slice(0, 8))
    with pytest.raises(HeadsimError, match="out of range"):
        long.zoom(2, 0, slice(0, 8), slice(0, 8))


def test_short_windows_are_unchanged(tiny_bert, views):
    """At or below the resolution the view is the exact one, bit for bit: the tap's whole matrices."""
    exact, _ = views
    same = text_view(TEXT, tiny_bert, seq_len=SEQ, resolution=SEQ)
    got = capture(tiny_bert, exact.ids[None], np.ones((1, exact.n), dtype=np.int64))
    for view in (exact, same):
        assert view.bins is None and view.peaks is None
        np.testing.assert_array_equal(view.attention, got["attention"][0].float().numpy())
        np.testing.assert_array_equal(view.normalized, normalized_similarity(got["head_outputs"][0].float()).numpy())
    table = exact.pairs(0.3, limit=None)
    assert table.attrs == {"total": len(table), "limit": None}
    assert table.equals(table.sort_values(["layer", "head", "index_i", "index_j"]).reset_index(drop=True))


def test_pair_tables_are_capped_sorted_and_counted(views):
    exact, long = views
    full = exact.pairs(0.3, limit=None)
    counts = long.pair_counts(0.3)
    assert counts.sum() == len(full) > 0
    heads = [(0, 1), (1, 2)]
    for view in views:
        capped = view.pairs(0.3, heads, limit=5)
        want_total = sum(int(counts[li, hi]) for li, hi in heads)
        assert capped.attrs == {"total": want_total, "limit": 5}
        for li, hi in heads:
            got = capped[(capped.layer == li + 1) & (capped.head == hi + 1)]
            every = full[(full.layer == li + 1) & (full.head == hi + 1)]
            assert len(got) == min(5, len(every))
            assert (np.diff(got.similarity.to_numpy()) <= 0).all()  # most similar first
            np.testing.assert_allclose(got.similarity.to_numpy(), np.sort(every.similarity.to_numpy())[::-1][:5], atol=1e-6)
            assert (got.index_i < got.index_j).all()
    for view in views:  # one rule at every length: capped by default, every pair only when asked
        assert view.pairs(0.3).attrs == {"total": len(full), "limit": 300}
        every = view.pairs(0.3, limit=None)
        assert every.attrs == {"total": len(full), "limit": None}
        assert every[["layer", "head", "index_i", "index_j"]].equals(full[["layer", "head", "index_i", "index_j"]])
        np.testing.assert_allclose(every.similarity.to_numpy(), full.similarity.to_numpy(), atol=1e-6)


class LargestTensor(TorchDispatchMode):
    """The largest number of elements of any tensor an operation returns."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_no_window_sized_attention_is_built_above_the_resolution(tiny_bert):
    """Every tensor computed for the binned view, its zoom and its pairs stays below one layer's
    ``[H, n, n]``: blocks of query rows ``[H, 7, n]`` and the ``[L, H, R, R]`` overview are the largest."""
    n, heads = SEQ, tiny_bert.n_heads
    with LargestTensor() as seen:
        long = text_view(TEXT, tiny_bert, seq_len=SEQ, resolution=R, tile_rows=ROWS)
        long.zoom(1, 0, slice(0, 32), slice(0, 32))
        long.pairs(0.3)
    assert seen.largest < heads * n * n // 2
    with LargestTensor() as whole:  # the check sees an exact view's whole matrices
        text_view(TEXT, tiny_bert, seq_len=SEQ)
    assert whole.largest >= tiny_bert.n_layers * heads * n * n


def test_notebook_display_of_a_long_window_is_the_overview(views):
    from headsim.views.html.heads import explorer_payload

    exact, long = views
    html = long._repr_html_()
    assert "position bins" in html
    payload = explorer_payload(long.labels, long.attention, long.normalized, title="t", unit="bins")
    assert payload["n"] == R and payload["unit"] == "bins" and payload["labels"][0].startswith("0–")
    assert len(html) < len(exact._repr_html_())


def test_explorer_overview_and_zoom_endpoint(tiny_bert, views):
    from fastapi.testclient import TestClient

    from headsim.explorer import api
    from headsim.explorer.app import create_app

    exact, long = views
    prepared = api.prepare(TEXT, tiny_bert, SEQ)
    payload = api.analyze_payload(prepared, long, tiny_bert, 0.3)
    assert payload["view"]["unit"] == "bins" and len(payload["view"]["bins"]) == R
    want = api.high_counts(exact.normalized)
    np.testing.assert_array_equal(np.asarray(payload["heads"]["high_counts"]), want)
    np.testing.assert_array_equal(np.asarray(payload["heads"]["n_high"]), want[..., 30])
    head = api.head_payload(prepared, long, tiny_bert, 2, 3)
    assert np.asarray(head["attention"]).shape == (R, R) and head["view"]["unit"] == "bins"
    assert api.analyze_payload(prepared, exact, tiny_bert, 0.3)["view"] == {"unit": "tokens", "n": SEQ}
    client = TestClient(create_app(tiny_bert, resolution=R))
    analyzed = client.post("/api/analyze", json={"text": TEXT, "seq_len": SEQ}).json()
    assert analyzed["view"]["unit"] == "bins"
    r = client.post("/api/zoom", json={"text": TEXT, "seq_len": SEQ, "layer": 2, "head": 3, "rows": [5, 40],
                                       "cols": [60, 96]})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["rows"] == [5, 40] and got["col_tokens"] == exact.tokens[60:96]
    np.testing.assert_allclose(got["attention"], exact.attention[1, 2, 5:40, 60:96], atol=1e-4)
    np.testing.assert_allclose(got["similarity"], exact.normalized[1, 2, 5:40, 60:96], atol=1e-4)
    bad = client.post("/api/zoom", json={"text": TEXT, "seq_len": SEQ, "layer": 2, "head": 3, "rows": [5, 4],
                                         "cols": [0, 8]})
    assert bad.status_code == 422 and "selects no token" in bad.text
