"""Fig 10: where each head's high-similarity pairs lie, summed over windows."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import COUNT_CMAP, PAGE_WIDTH, SIMILARITY_CMAP, layer_head_heatmap, layer_head_size, tag_cells, titled
from .base import PaperFigure, ReportedRun, bin_width, layer_arg, n_windows

#: smallest panel side (inches) of the layer × head grid of maps; below it the figure shows one layer's
#: maps and a layer × head heatmap instead (Fig 10 of a 32 × 32 model would be 1,024 maps of 0.3 in)
MIN_PANEL = 0.75
#: most layers drawn as rows of maps
MAX_ROWS = 12


def busiest_share(counts: np.ndarray) -> np.ndarray:
    """``[..., T, T]`` symmetric pair counts (each pair i < j counted at (i, j) and (j, i)) → the share of a
    head's pairs that contain its busiest position (1: every pair shares one token; NaN: no pairs)."""
    c = np.asarray(counts, dtype=np.float64)
    pairs = c.sum(axis=(-2, -1)) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, c.sum(axis=-1).max(axis=-1) / pairs, np.nan)


def _map(ax, m: np.ndarray):
    peak = m.max()
    img = ax.imshow(m / peak if peak > 0 else m, cmap=SIMILARITY_CMAP, vmin=0, vmax=1, interpolation="nearest",
                    aspect="equal")
    ax.set_xticks([])
    ax.set_yticks([])
    return img


def fig10_locations(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 10: where each head's high-similarity pairs lie, summed over windows: a layer × head grid of
    maps while its panels fit the page (:data:`MIN_PANEL`), else the maps of the last layer (or of
    ``layers``' first) with, below, a layer × head heatmap of the share of each head's pairs that contain
    its busiest position (bright lines in its map).

    Each map is scaled to its own maximum so its pattern is visible whatever its pair count.
    """
    L, H = ds.sizes["layer"], ds.sizes["head"]
    grid = layers is not None or (L <= MAX_ROWS and (PAGE_WIDTH - 1.2) / H >= MIN_PANEL)
    layers = (list(range(1, L + 1)) if grid else [L]) if layers is None else [layer_arg(ds, x) for x in layers]
    counts = ds["location_counts"]
    t = ds.sizes["query"]
    title = f"Fig 10 — locations (i, j) of high-similarity pairs over {n_windows(ds)} windows ({model})"
    if grid:
        panel = min(1.8 if H <= 6 else 1.35, (PAGE_WIDTH - 1.2) / H)
        ncols, nrows, per_row = H, len(layers), 1
        w, h_maps, h_map = max(panel * H + 1.2, 6.0), panel * len(layers) + 1.6, 0.0
    else:
        ncols = min(8, H)
        per_row = math.ceil(H / ncols)
        panel = (PAGE_WIDTH - 1.2) / ncols
        w, h_maps = PAGE_WIDTH, panel * per_row + 1.0
        h_map = layer_head_size(L, H)[1]
        nrows = per_row
    fig = titled((w, h_maps + h_map), title)
    top, bottom = (fig, None) if grid else fig.subfigures(2, 1, height_ratios=[h_maps, h_map])
    gs = top.add_gridspec(nrows, ncols)
    maps, img = [], None
    for row, layer in enumerate(layers):
        for hi in range(H):
            r, c = (row, hi) if grid else (hi // ncols, hi % ncols)
            ax = top.add_subplot(gs[r, c])
            tag_cells(ax, 1, 1)
            img = _map(ax, counts.sel(layer=layer, head=hi + 1).values.astype(np.float64))
            maps.append(ax)
            if grid:
                if row == 0:
                    ax.set_title(f"head {hi + 1}", fontsize=8)
                if hi == 0:
                    ax.set_ylabel(f"layer {layer}", fontsize=8)
            else:
                ax.set_title(f"L{layer} H{hi + 1}", fontsize=7, pad=2)
    bar = top.colorbar(img, ax=maps, fraction=0.02, pad=0.01)
    bar.set_label("pair count ÷ that map's maximum", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    wb = bin_width(ds)
    span = f"0..{t - 1}" if wb is None else f"0..{int(ds.attrs['seq_len']) - 1} in {t} bins of {wb:g} tokens"
    top.supxlabel(f"each map: key position j across,\nquery position i down, {span}" if w < 7 else
                  f"each map: key position j across, query position i down, {span}", fontsize=8)
    if bottom is not None:
        ax = bottom.add_subplot()
        layer_head_heatmap(ax, busiest_share(counts.values), cmap=COUNT_CMAP, vmin=0, vmax=1,
                           title="share of each head's pairs that contain its busiest position (every layer and head)",
                           cbar_label="share of pairs")
    return fig


def caption(r: ReportedRun) -> str:
    L, H = r.dataset.sizes["layer"], r.dataset.sizes["head"]
    text = (f"How often each position pair (i, j) is a high-similarity pair, summed over all {r.n_windows:,} windows "
            "(the map is symmetric). Each map is scaled to its own maximum, so compare patterns, not brightness, "
            "between maps: a bright diagonal means pairs of neighbouring tokens, bright lines one position paired "
            "with many, an even map pairs anywhere. The paper shows two heads of the last layer, each with its own "
            "typical locations.")
    if L <= MAX_ROWS and (PAGE_WIDTH - 1.2) / H >= MIN_PANEL:
        return "For every layer (rows) and head (columns): " + text[0].lower() + text[1:]
    return (f"The maps of the {H} heads of layer {L} (the last; {L * H:,} maps would not read on a page): " + text[0].lower()
            + text[1:] + " Below, for every layer and head, the share of its pairs that contain its busiest position "
            "(1: all its pairs share one token, a bright line in its map); location_counts in stats.nc holds every "
            "head's map.")


FIGURE = PaperFigure("fig10_locations", "Fig 10", "locations of high-similarity pairs",
                     lambda r: fig10_locations(r.dataset, model=r.label), caption)
