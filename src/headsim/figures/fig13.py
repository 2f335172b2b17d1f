"""Fig 13: distances of high-similarity pairs per layer, all heads pooled; claim 4 (distances shrink
from the first to the middle layers)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import figure
from ..stats.tables import chance_distances, distance_summary, random_pair_distance
from .base import PaperFigure, ReportedRun, RunStatistics, first_middle_last, layer_arg, layers_text, middle_layer
from .claim import FAILS, HOLDS, NA, Claim, column, finite, signed_pct
from .fig07 import distance_bars, distance_label, share_label

#: claim 4: relative drop of the mean distance from the first to the middle layer
DISTANCE_DROP = 0.10
#: claim 4, reported beside: the first→last drop that a summary of the paper quotes
SUMMARY_DROP = 0.30


def fig13_layer_distances(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 13: distance distribution of high-similarity pairs pooled over heads, first / middle / last layer."""
    layers = first_middle_last(ds.sizes["layer"]) if layers is None else [layer_arg(ds, x) for x in layers]
    chance = chance_distances(ds)
    fig, axes = figure(len(layers), 1, (8.0, 2.6 * len(layers) + 0.8),
                       suptitle=f"Fig 13 — distance of high-similarity pairs by layer, all heads pooled ({model})",
                       sharex=True)
    for row, layer in enumerate(layers):
        ax = axes[row, 0]
        counts = ds["distance_hist"].sel(layer=layer).sum("head").values.astype(np.float64)
        mean, median = (float(x) for x in distance_summary(ds.sel(layer=layer), ("head",)))
        n = int(counts.sum())
        share = counts / n if n else counts
        distance_bars(ax, ds, share, chance)
        if n:
            ax.axvline(mean, color="C3", ls="--", lw=1.0, label=f"mean {mean:.1f}")
            ax.axvline(median, color="C1", ls=":", lw=1.2, label=f"median {median:.0f}")
        ax.set_title(f"layer {layer}: {n:,} pairs", fontsize=9)
        ax.set_ylabel(share_label(ds), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes[-1, 0].set_xlabel(distance_label(ds), fontsize=8)
    return fig


def caption(r: ReportedRun) -> str:
    ls = first_middle_last(r.dataset.sizes["layer"])
    return (f"Distance |i − j| of high-similarity pairs with all heads of the layer pooled, for layers "
            f"{layers_text(ls)} (share of the layer's pairs per distance), with the distribution of all valid "
            "pairs (grey: chance), the mean (red dashed) and the median (orange dotted). The paper: spread out in "
            "the first layer, extremely short in the middle layers, slightly longer again in the last.")


def claim_distances(ds: xr.Dataset, layers: pd.DataFrame) -> Claim:
    L = int(len(layers))
    mid = middle_layer(L)
    claim = Claim(
        "c4_distances",
        "§4, Figs 12–13: high-similarity pairs span long distances in the first layers and short ones in the "
        "middle layers; the last layers are slightly longer again (a summary of the paper puts the drop from "
        f"the first to the last layer near {SUMMARY_DROP:.0%}).",
        f"Mean distance |i − j| of high-similarity pairs per layer (layers.parquet mean_distance); relative drop "
        f"from layer 1 to the middle layer {mid} and to the last layer {L}.",
        "", f"holds if the middle layer's mean distance is at least {DISTANCE_DROP:.0%} below layer 1's "
        "(the first→last drop is reported beside)", NA)
    d = column(layers, "mean_distance").to_numpy(dtype=np.float64)
    if L < 3:
        claim.value = f"the model has {L} layer(s); first, middle and last need at least 3"
        return claim
    first, middle, last = d[0], d[mid - 1], d[L - 1]
    if not (finite(first) and finite(middle) and first > 0):
        claim.value = "no high-similarity pairs in the first or the middle layer"
        return claim
    drop_mid = 1.0 - middle / first
    drop_last = 1.0 - last / first if finite(last) else math.nan
    random_mean = random_pair_distance(ds)
    per = ", ".join(f"L{k + 1} {x:.1f}" for k, x in enumerate(d))
    claim.value = (f"layer 1 {first:.1f} → layer {mid} {middle:.1f} ({signed_pct(-drop_mid)}) → layer {L} {last:.1f} "
                   f"({signed_pct(-drop_last)} vs layer 1); random pairs {random_mean:.1f}; per layer: {per}")
    claim.verdict = HOLDS if drop_mid >= DISTANCE_DROP else FAILS
    claim.numbers = {"first": first, "middle": middle, "last": last, "middle_layer": mid, "drop_middle": drop_mid,
                     "drop_last": drop_last, "random_pairs_mean": random_mean, "per_layer": d.tolist()}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_distances(r.dataset, r.layers)]


FIGURE = PaperFigure("fig13_layer_distances", "Fig 13", "distances by layer",
                     lambda r: fig13_layer_distances(r.dataset, model=r.label), caption, claims)
