"""Fig 2: attention summed over the corpus, one head and the whole layer, for a few layers."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..errors import require
from ..plots.style import ATTENTION_CMAP, figure, heatmap, square_panels
from .base import PaperFigure, ReportedRun, label_positions, layer_arg, layers_text, middle_layer, n_windows


def default_layers(n_layers: int) -> list[int]:
    """1-based first, middle, second to last and last layers (the paper: 1, 6, 10, 11)."""
    return sorted({1, middle_layer(n_layers), max(n_layers - 1, 1), n_layers})


def clip_max(m: np.ndarray, clip: float | None) -> float | None:
    """The ``clip`` percentile of the positive entries of ``m`` (``None`` for the full range)."""
    if clip is None:
        return None
    pos = m[m > 0]
    return float(np.percentile(pos, clip)) if pos.size else None


def fig02_summed_attention(ds: xr.Dataset, *, model: str | None = None, layers: list[int] | None = None,
                           head: int = 1, clip: float | None = 99.0) -> Figure:
    """Fig 2: summed attention map of one head (left) and of all heads of the layer (right), per layer.

    ``layers`` are 1-based (default: first, middle, second to last, last); ``head`` is 1-based.
    ``clip``: colours saturate at this percentile of each panel (``None``: full range), so that the
    diagonal stays visible beside the few columns ([CLS], [SEP]) that take most of the attention.
    """
    L, H = ds.sizes["layer"], ds.sizes["head"]
    require(1 <= head <= H, f"head {head} is out of range", f"this run has heads 1..{H} (numbered from 1)")
    layers = default_layers(L) if layers is None else [layer_arg(ds, x) for x in layers]
    w = n_windows(ds)
    model = model or str(ds.attrs.get("model", "model"))
    fig, axes = figure(len(layers), 2, square_panels(len(layers), 2),
                       suptitle=f"Fig 2 — attention summed over {w} windows ({model})")
    a = ds["attn_sum"]
    note = "" if clip is None else f"\n(colours clipped at the {clip:g}th percentile)"
    for row, layer in enumerate(layers):
        for col, (m, title, what) in enumerate((
                (a.sel(layer=layer, head=head).values, f"layer {layer}, head {head}", f"{w} windows"),
                (a.sel(layer=layer).sum("head").values, f"layer {layer}, sum over {H} heads", f"{H} heads, {w} windows"))):
            vmax = clip_max(m, clip)
            heatmap(axes[row, col], m, title=title, cmap=ATTENTION_CMAP, vmin=0, vmax=vmax,
                    cbar_label=f"attention summed over {what}{note}")
    label_positions(fig, ds)
    return fig


def caption(r: ReportedRun) -> str:
    ls = default_layers(r.dataset.sizes["layer"])
    return (f"Attention probabilities summed over all {r.n_windows:,} windows for layers {layers_text(ls)} (rows): "
            f"left head 1 alone, right the sum over the layer's {r.dataset.sizes['head']} heads. Row i is the query "
            "position, column j the key position (0 is [CLS]). A bright main diagonal is attention to the token "
            "itself, a band just below or above it attention to the previous or next token, and bright vertical "
            "lines are positions that many queries attend to ([CLS], [SEP], separators). Colours are clipped at "
            "each panel's 99th percentile so the diagonal stays visible beside those columns (the colour bar shows "
            "the clipped range). The paper: each head's summed map is centred on the diagonal, some one step off it.")


FIGURE = PaperFigure("fig02_summed_attention", "Fig 2", "summed attention maps",
                     lambda r: fig02_summed_attention(r.dataset, model=r.label), caption)
