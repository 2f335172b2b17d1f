"""Fig 7: per head of the last layer, the distances |i − j| of its high-similarity pairs against chance."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import COUNT_CMAP, PAGE_WIDTH, head_grid, layer_head_heatmap, layer_head_size, outline_rows, titled
from ..stats.tables import chance_distances, distance_summary
from .base import PaperFigure, ReportedRun, bin_width, layer_arg, n_windows


def distance_bars(ax, ds: xr.Dataset, share: np.ndarray, chance: np.ndarray) -> None:
    """Bars of a distance histogram's ``share`` per distance (from 1) with the ``chance`` distribution as
    a line. On a binned run each bar spans its bin of distances (one per distance up to a few dozen
    tokens, then log-spaced) and shows the share per token of distance, on a log axis."""
    dist = ds["distance"].values.astype(np.float64)
    if bin_width(ds) is None:
        ax.bar(dist[1:], share[1:], width=1.0, color="#8fb8de", label="high-similarity pairs")
        ax.step(dist[1:], chance[1:], where="mid", color="0.15", lw=1.1, label="all valid pairs (chance)")
        return
    edges = np.append(dist, float(ds.attrs["seq_len"]))
    width = np.diff(edges)
    ax.bar(dist[1:], share[1:] / width[1:], width=width[1:], align="edge", color="#8fb8de", label="high-similarity pairs")
    ax.stairs(chance[1:] / width[1:], edges[1:], baseline=None, color="0.15", lw=1.1, label="all valid pairs (chance)")
    ax.set_xscale("log")


def distance_label(ds: xr.Dataset, short: bool = False) -> str:
    """The distance axis' label (``short``: without how distances are binned on a binned run)."""
    if bin_width(ds) is None:
        return "distance |i − j| (tokens)"
    return "distance |i − j| (tokens, log scale)" if short else f"distance |i − j| (tokens, log scale; {binning(ds)})"


def binning(ds: xr.Dataset) -> str:
    """How a binned run's distances are binned, in words."""
    width = np.diff(np.append(ds["distance"].values, int(ds.attrs["seq_len"])))
    exact = int(np.argmax(width > 1)) if (width > 1).any() else len(width)
    return f"one bin per distance below {exact}, then log-spaced bins"


def share_label(ds: xr.Dataset) -> str:
    """The share axis' label: per distance, or per token of distance on a binned run."""
    return "share of pairs" if bin_width(ds) is None else "share of pairs per token of distance"


def fig07_distance_histograms(ds: xr.Dataset, heads: pd.DataFrame, *, model: str, layer: int | None = None) -> Figure:
    """Fig 7: per head of one layer (default the last), histogram of |i − j| of high-similarity pairs; below, mean distance of every head."""
    layer = layer_arg(ds, layer)
    L, H = ds.sizes["layer"], ds.sizes["head"]
    chance = chance_distances(ds)
    many = H > 16  # eight narrower panels a row, so that a layer of 64 heads stays on a page or two
    ncols = min(8 if many else 4, H)
    nrows = math.ceil(H / ncols)
    w_map, h_map = layer_head_size(L, H)
    panel_h = 1.7 if many else 2.5
    fig = titled((min(PAGE_WIDTH, max(2.85 * ncols, w_map)), panel_h * nrows + h_map + 0.5),
                 f"Fig 7 — distance |i − j| of high-similarity pairs, layer {layer}, {n_windows(ds)} windows ({model})")
    gs = fig.add_gridspec(nrows + 1, ncols, height_ratios=[panel_h] * nrows + [h_map])
    hist = ds["distance_hist"].sel(layer=layer).values
    means, _ = distance_summary(ds.sel(layer=layer))
    first = None
    for hi in range(H):
        ax = fig.add_subplot(gs[hi // ncols, hi % ncols], sharex=first)
        first = first or ax
        counts = hist[hi].astype(np.float64)
        n, mean = int(counts.sum()), float(means[hi])
        share = counts / n if n else counts
        distance_bars(ax, ds, share, chance)
        if n:
            ax.axvline(mean, color="C3", lw=1.0, ls="--", label="mean")
        if many:
            ax.set_title(f"H{hi + 1} · n {n:,} · mean {mean:.1f}" if n else f"H{hi + 1} · no pairs", fontsize=6.5)
        else:
            ax.set_title(f"head {hi + 1}: n = {n:,}, mean {mean:.1f}" if n else f"head {hi + 1}: no pairs", fontsize=8)
        ax.tick_params(labelsize=6 if many else 7)
        if hi % ncols == 0:
            ax.set_ylabel(share_label(ds), fontsize=8)
        if hi // ncols == nrows - 1 or hi + ncols >= H:
            ax.set_xlabel(distance_label(ds, short=True), fontsize=8)
        if hi == 0:
            fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    ax_m = fig.add_subplot(gs[nrows, :])
    layer_head_heatmap(ax_m, head_grid(heads, "mean_distance"), title=f"mean distance of every head (layer {layer} outlined)",
                       cmap=COUNT_CMAP, vmin=0, fmt="{:.1f}", cbar_label="mean |i − j| (tokens)")
    outline_rows(ax_m, [layer - 1], H)
    return fig


def caption(r: ReportedRun) -> str:
    L = r.dataset.sizes["layer"]
    return (f"Layer {L} (the last): for each head, the distance |i − j| between the two tokens of its "
            "high-similarity pairs (bars: share of the head's pairs per distance), the distance distribution of "
            "all valid pairs (grey line: what randomly chosen pairs would give) and the head's mean distance (red "
            "dashed). Bars above the grey line at short distances mean the head prefers near neighbours. Below: the "
            "mean distance of every head of every layer, the shown layer outlined. The paper (BERT-base, last "
            "layer): every head but one averages below 50 tokens; the exception pairs identical tokens across the "
            "whole input." + ("" if bin_width(r.dataset) is None else
                              f" Windows of {int(r.dataset.attrs['seq_len']):,} tokens: distances on a log axis, "
                              f"{binning(r.dataset)}, bars as the share of pairs per token of distance."))


FIGURE = PaperFigure("fig07_distance_histograms", "Fig 7", "distances of high-similarity pairs per head",
                     lambda r: fig07_distance_histograms(r.dataset, r.heads, model=r.label), caption)
