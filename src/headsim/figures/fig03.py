"""Fig 3: the last layer's summed attention, plain, with the dominant columns zeroed, and with the
diagonals zeroed too; claim 8 (attention centred on the diagonal)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import ATTENTION_CMAP, figure, heatmap, square_panels
from .base import PaperFigure, ReportedRun, RunStatistics, bin_width, label_positions, layer_arg, n_windows
from .claim import FAILS, HOLDS, NA, Claim


def zeroed_band(ds: xr.Dataset) -> str:
    """Which diagonals ``attn_sum_top_diag_zeroed`` zeroes beyond the top columns, read off the data."""
    if "attn_sum_top_diag_zeroed" not in ds or "attn_sum_top_zeroed" not in ds:
        return "the diagonals"
    a, b = ds["attn_sum_top_zeroed"].values, ds["attn_sum_top_diag_zeroed"].values
    t = a.shape[-1]
    band = [d for d in range(-3, 4) if abs(d) < t and not np.diagonal(b, d, -2, -1).any()
            and np.diagonal(a, d, -2, -1).any()]
    if not band:
        return "the diagonals"
    k = max(abs(d) for d in band)
    return "the main diagonal" if k == 0 else f"the diagonals |i − j| ≤ {k}"


def _select_layer(da: xr.DataArray, layer: int) -> xr.DataArray:
    """The given 1-based layer of an attention sum, whatever extra dims it has."""
    if "layer" in da.dims:
        da = da.sel(layer=layer) if layer in da["layer"].values else da.isel(layer=-1)
    return da


def fig03_zeroed_attention(ds: xr.Dataset, *, model: str | None = None, layer: int | None = None) -> Figure:
    """Fig 3: last layer's attention summed over heads and windows: plain, top columns zeroed, columns + diagonals zeroed."""
    layer = layer_arg(ds, layer)
    w, k = n_windows(ds), ds.attrs.get("top_k_columns", "top-k")
    panels = [("attn_sum", "plain sum"),
              ("attn_sum_top_zeroed", f"the {k} most attended columns zeroed per window"),
              ("attn_sum_top_diag_zeroed", f"columns and {zeroed_band(ds)} zeroed")]
    panels = [(name, title) for name, title in panels if name in ds]
    model = model or str(ds.attrs.get("model", "model"))
    fig, axes = figure(1, len(panels), square_panels(1, len(panels)),
                       suptitle=f"Fig 3 — layer {layer}: attention summed over heads and {w} windows ({model})")
    for col, (name, title) in enumerate(panels):
        da = _select_layer(ds[name], layer)
        if "head" in da.dims:
            da = da.sum("head")
        heatmap(axes[0, col], da.values, title=title, cmap=ATTENTION_CMAP, vmin=0, cbar_label="summed attention")
    label_positions(fig, ds)
    return fig


def caption(r: ReportedRun) -> str:
    k = r.dataset.attrs.get("top_k_columns", r.meta.get("top_k_columns", "k"))
    L = r.dataset.sizes["layer"]
    return (f"Layer {L} (the last), attention summed over its {r.dataset.sizes['head']} heads and all {r.n_windows:,} windows. "
            f"Left: the plain sum, dominated by a few columns that almost every query attends to. Middle: the same "
            f"sum after zeroing, in every window and head, the {k} key columns that receive the most attention. "
            f"Right: {zeroed_band(r.dataset)} zeroed as well. What remains shows the structure the dominant columns "
            "hide (the paper: a diagonal).")


def diagonal_profile(attn: np.ndarray, pairs: np.ndarray, max_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean attention per valid cell on each diagonal offset ``j − i`` in ``[-max_offset, max_offset]``.

    ``attn`` is ``[..., T, T]`` summed over windows; ``pairs`` ``[T, T]`` counts windows with both
    positions valid. Returns ``(offsets, means [..., offsets])``.
    """
    offsets = np.arange(-max_offset, max_offset + 1)
    means = []
    for d in offsets:
        num = np.diagonal(attn, offset=int(d), axis1=-2, axis2=-1).sum(axis=-1)
        den = np.diagonal(pairs, offset=int(d)).sum()
        means.append(num / den if den > 0 else np.full(num.shape, np.nan))
    return offsets, np.stack(means, axis=-1)


def claim_diagonal(ds: xr.Dataset) -> Claim:
    name = "attn_sum_top_zeroed"
    claim = Claim(
        "c8_diagonal",
        "§2, Figs 2–3: summed over many inputs, each head's attention is centred on the diagonal; some heads "
        "peak one step off it (the previous or the next token). The most attended columns hide this until they "
        "are zeroed (Fig 3).",
        f"Per head of every layer: attention summed over windows with each window's {ds.attrs.get('top_k_columns', 'top-k')} "
        "most attended columns zeroed (stats.nc attn_sum_top_zeroed), averaged per valid cell along each "
        "diagonal offset j − i with |j − i| ≤ T/4; the offset with the highest mean.",
        "", "holds if more than half of the heads peak at offset −1, 0 or +1", NA)
    if name not in ds or "pair_count_valid" not in ds:
        claim.value = f"this run has no {name}"
        return claim
    a = ds[name]
    if "head" not in a.dims:
        a = a.expand_dims("head")
    if "layer" not in a.dims:
        a = a.expand_dims("layer")
    arr = a.transpose("layer", "head", "query", "key").values.astype(np.float64)
    t = arr.shape[-1]
    offsets, means = diagonal_profile(arr, ds["pair_count_valid"].values.astype(np.float64), max(1, t // 4))
    valid = np.isfinite(means).any(axis=-1) & (np.nan_to_num(means).max(axis=-1) > 0)
    if not valid.any():
        claim.value = "no attention was recorded"
        return claim
    peak = offsets[np.nanargmax(np.where(np.isfinite(means), means, -np.inf), axis=-1)]
    peak_valid = peak[valid]
    near = np.isin(peak_valid, [-1, 0, 1])
    counts = {int(d): int((peak_valid == d).sum()) for d in (-1, 0, 1)}
    others = sorted(set(peak_valid.tolist()) - {-1, 0, 1})
    other_text = ", ".join(f"{int(d):+d} ({int((peak_valid == d).sum())})".replace("-", "\u2212") for d in others)
    w = bin_width(ds)
    if w is not None:
        claim.measure += f" This run is binned: offsets are in position bins of {w:g} tokens."
    claim.value = (f"{int(near.sum())} of {int(valid.sum())} heads peak within ±1 "
                   f"(offset −1: {counts[-1]}, 0: {counts[0]}, +1: {counts[1]}); other peaks, offset (heads): "
                   + (other_text or "none"))
    claim.verdict = HOLDS if near.sum() > valid.sum() / 2 else FAILS
    claim.numbers = {"near": int(near.sum()), "heads": int(valid.sum()), "offset_counts": counts,
                     "peaks": np.where(valid, peak, 0).tolist()}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_diagonal(r.dataset)]


FIGURE = PaperFigure("fig03_zeroed_attention", "Fig 3", "last layer, dominant columns zeroed",
                     lambda r: fig03_zeroed_attention(r.dataset, model=r.label), caption, claims)
