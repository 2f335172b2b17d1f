"""Fig 12 (corpus): normalised similarity summed over heads and windows, first / middle / last layer."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..plots.text import fig12_summed_similarity as _one_text
from .base import ExampleFigure, PaperFigure, ReportedRun, first_middle_last, label_positions, layer_arg, layers_text, n_windows


def fig12_summed_similarity(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 12 (corpus): normalised similarity summed over all heads and windows, first / middle / last layer."""
    layers = first_middle_last(ds.sizes["layer"]) if layers is None else [layer_arg(ds, x) for x in layers]
    idx = [int(np.flatnonzero(ds["layer"].values == x)[0]) for x in layers]
    fig = _one_text(ds["sim_sum"].values, None, idx, model=model,
                    title=f"normalised similarity summed over heads and {n_windows(ds)} windows")
    label_positions(fig, ds)
    return fig


def caption(r: ReportedRun) -> str:
    ls = first_middle_last(r.dataset.sizes["layer"])
    return (f"Normalised similarity matrices S / max S summed over all heads and all {r.n_windows:,} windows, for "
            f"layers {layers_text(ls)}. Row i and column j are token positions; the diagonal is zero by "
            "construction. The paper shows one input: evenly spread in the first layer, concentrated on the "
            "diagonal in the middle, spread within sentences in the last. Summed over many windows, sentence "
            "boundaries fall at different positions, so mainly the dependence on distance survives (a band along "
            "the diagonal); the per-text version is in the example section.")


FIGURE = PaperFigure("fig12_summed_similarity", "Fig 12", "summed similarity, first / middle / last layer",
                     lambda r: fig12_summed_similarity(r.dataset, model=r.label), caption)


def example_caption(meta: dict) -> str:
    return (f"The same input: normalised similarity summed over all heads, for layers "
            f"{layers_text(meta.get('figure_layers', []))}.")


EXAMPLE = ExampleFigure("fig12_summed_similarity", "Fig 12 (one input)", "similarity summed over heads for one input",
                        example_caption)
