"""Fig 10: where each head's high-similarity pairs lie, summed over windows."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import SIMILARITY_CMAP, figure
from .base import PaperFigure, ReportedRun, bin_width, layer_arg, n_windows


def fig10_locations(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 10: where each head's high-similarity pairs lie, summed over windows; a layer × head grid.

    Each panel is scaled to its own maximum so its pattern is visible whatever its pair count.
    """
    L, H = ds.sizes["layer"], ds.sizes["head"]
    layers = list(range(1, L + 1)) if layers is None else [layer_arg(ds, x) for x in layers]
    t = ds.sizes["query"]
    panel = 1.35 if H > 6 else 1.8
    fig, axes = figure(len(layers), H, (max(panel * H + 1.2, 6.0), panel * len(layers) + 1.6),
                       suptitle=f"Fig 10 — locations (i, j) of high-similarity pairs over {n_windows(ds)} windows ({model})")
    img = None
    for row, layer in enumerate(layers):
        for hi in range(H):
            ax = axes[row, hi]
            m = ds["location_counts"].sel(layer=layer, head=hi + 1).values.astype(np.float64)
            peak = m.max()
            img = ax.imshow(m / peak if peak > 0 else m, cmap=SIMILARITY_CMAP, vmin=0, vmax=1,
                            interpolation="nearest", aspect="equal")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f"head {hi + 1}", fontsize=8)
            if hi == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=8)
    bar = fig.colorbar(img, ax=axes, fraction=0.02, pad=0.01)
    bar.set_label("pair count ÷ that panel's maximum", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    w = bin_width(ds)
    span = f"0..{t - 1}" if w is None else f"0..{int(ds.attrs['seq_len']) - 1} in {t} bins of {w:g} tokens"
    fig.supxlabel(f"each panel: key position j across,\nquery position i down, {span}" if H < 4 else
                  f"each panel: key position j across, query position i down, {span}", fontsize=8)
    return fig


def caption(r: ReportedRun) -> str:
    return (f"For every layer (rows) and head (columns): how often each position pair (i, j) is a high-similarity "
            f"pair, summed over all {r.n_windows:,} windows (the map is symmetric). Each panel is scaled to its own "
            "maximum, so compare patterns, not brightness, between panels: a bright diagonal means pairs of "
            "neighbouring tokens, bright lines one position paired with many, an even panel pairs anywhere. The "
            "paper shows two heads of the last layer, each with its own typical locations.")


FIGURE = PaperFigure("fig10_locations", "Fig 10", "locations of high-similarity pairs",
                     lambda r: fig10_locations(r.dataset, model=r.label), caption)
