"""Fig 11: anchor tokens of high-similarity pairs; claims 5 (pairs centre on an anchor) and 6 (anchors differ)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import (COUNT_CMAP, head_grid, layer_colours, layer_head_heatmap, layer_head_size, legend_below,
                           legend_columns, thinned_ticks, titled)
from .base import PaperFigure, ReportedRun, RunStatistics
from .claim import FAILS, HOLDS, NA, Claim, column

#: claim 5: a layer counts when its median anchor fraction exceeds this
ANCHOR_FRACTION = 0.5


def fig11_anchors(ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame, *, model: str) -> Figure:
    """Fig 11: (a) share of a head's high-similarity pairs that contain its most common token (anchor);
    (b) its distribution per layer; (c) number of distinct anchors across a layer's heads."""
    L, H = ds.sizes["layer"], ds.sizes["head"]
    w, h = layer_head_size(L, H)
    fig_w = max(w, 11.0)
    key = 0.13 * math.ceil((L + 1) / legend_columns([f"layer {L} (median 0.00)"], fig_w / 2 - 0.6, 6.5))  # legends below (b), (c)
    fig = titled((fig_w, h + 4.4 + key), f"Fig 11 — anchor tokens of high-similarity pairs ({model})")
    gs = fig.add_gridspec(2, 2, height_ratios=[h, 3.6 + key])
    ax_a = fig.add_subplot(gs[0, :])
    layer_head_heatmap(ax_a, head_grid(heads, "anchor_fraction_mean"), cmap=COUNT_CMAP, vmin=0, vmax=1,
                       title="(a) mean share of a window's high-similarity pairs that contain the head's most common token",
                       cbar_label="mean anchor fraction")
    ax_b, ax_c = fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])
    fb = ds["fraction_bin"].values
    fedges = np.asarray(ds.attrs.get("fraction_bin_edges", np.linspace(0.0, 1.0, len(fb) + 1)), dtype=np.float64)
    width = float(np.diff(fedges).mean())
    fh = ds["anchor_fraction_hist"].sum("head").values.astype(np.float64)
    na = ds["n_anchors"].values
    dh = ds["anchor_distinct_hist"].values.astype(np.float64)
    for li, colour in enumerate(layer_colours(L)):
        s = fh[li].sum()
        med = layers["median_anchor_fraction"].iloc[li] if "median_anchor_fraction" in layers else math.nan
        ax_b.stairs(fh[li] / s if s else fh[li], fedges, color=colour, lw=1.3,
                    label=f"layer {li + 1} (median {med:.2f})")
        s2 = dh[li].sum()
        mean = float((dh[li] * na).sum() / s2) if s2 else math.nan
        ax_c.plot(na, dh[li] / s2 if s2 else dh[li], "o-", ms=3, color=colour, label=f"layer {li + 1} (mean {mean:.1f})")
    ax_b.set_xlim(0, 1)
    ax_b.set_xlabel(f"anchor fraction of a (window, head) (bins of {width:.2f})", fontsize=8)
    ax_b.set_ylabel("share of (window, head)", fontsize=8)
    ax_b.set_title("(b) distribution of the anchor fraction, all heads of a layer", fontsize=9)
    ax_c.axvline(H, color="0.4", ls="--", lw=1.0, label=f"all {H} heads distinct")
    ax_c.set_xticks(na[thinned_ticks(len(na), (fig_w / 2 - 1.2) / len(na))])
    ax_c.set_xlabel("distinct anchor tokens across the layer's heads in one window", fontsize=8)
    ax_c.set_ylabel("share of windows", fontsize=8)
    ax_c.set_title("(c) distinct anchors per layer and window", fontsize=9)
    for ax in (ax_b, ax_c):
        ax.tick_params(labelsize=7)
        legend_below(ax, fig_w / 2 - 0.6, fontsize=6.5)
    return fig


def caption(r: ReportedRun) -> str:
    H = r.dataset.sizes["head"]
    return (f"(a) Per head, the mean over windows of the share of its high-similarity pairs that contain its most "
            f"common token (its anchor). (b) The distribution of that share, per layer with all heads pooled. (c) "
            f"Per layer, the number of distinct anchor tokens among the layer's {H} heads in one window (0 when no "
            f"head has pairs, {H} when every head centres on a different token). The paper: most of a head's pairs "
            "contain its anchor, and the heads of a layer pick different anchors.")


def claim_anchor_fraction(layers: pd.DataFrame) -> Claim:
    claim = Claim(
        "c5_anchor_fraction",
        "§3, Fig 11a: each head builds its high-similarity pairs around one token: most of a head's pairs "
        "contain its most common (anchor) token.",
        "Per window and head, the share of high-similarity pairs that contain the most common token; the "
        "median of that share over windows and heads, per layer (layers.parquet median_anchor_fraction).",
        "", f"holds if the median anchor fraction exceeds {ANCHOR_FRACTION:g} in more than half of the layers", NA)
    m = column(layers, "median_anchor_fraction").to_numpy(dtype=np.float64)
    ok = np.isfinite(m)
    if not ok.any():
        claim.value = "no window has high-similarity pairs"
        return claim
    n_above = int((m[ok] > ANCHOR_FRACTION).sum())
    per = ", ".join(f"L{k + 1} {x:.2f}" for k, x in enumerate(m) if np.isfinite(x))
    claim.value = f"{n_above} of {int(ok.sum())} layers above {ANCHOR_FRACTION:g}; per layer: {per}"
    claim.verdict = HOLDS if n_above > ok.sum() / 2 else FAILS
    claim.numbers = {"layers_above": n_above, "layers": int(ok.sum()), "per_layer": m.tolist()}
    return claim


def claim_distinct_anchors(ds: xr.Dataset, layers: pd.DataFrame) -> Claim:
    H = int(ds.sizes["head"])
    claim = Claim(
        "c6_distinct_anchors",
        "§3, Fig 11b: the anchors are unique: the heads of a layer centre on different tokens rather than "
        "all on one common token.",
        f"Per window, the number of distinct anchor tokens across the layer's {H} heads, averaged over windows "
        "(layers.parquet mean_distinct_anchors); 1 would mean all heads share one anchor.",
        "", f"holds if the mean number of distinct anchors is at least half the heads ({H / 2:g} of {H}) in more "
        "than half of the layers", NA)
    m = column(layers, "mean_distinct_anchors").to_numpy(dtype=np.float64)
    ok = np.isfinite(m)
    if not ok.any():
        claim.value = "no window has high-similarity pairs"
        return claim
    n_ok = int((m[ok] >= H / 2).sum())
    per = ", ".join(f"L{k + 1} {x:.1f}" for k, x in enumerate(m) if np.isfinite(x))
    claim.value = f"{n_ok} of {int(ok.sum())} layers with ≥ {H / 2:g} of {H}; per layer: {per}"
    claim.verdict = HOLDS if n_ok > ok.sum() / 2 else FAILS
    claim.numbers = {"layers_ok": n_ok, "layers": int(ok.sum()), "n_heads": H, "per_layer": m.tolist()}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_anchor_fraction(r.layers), claim_distinct_anchors(r.dataset, r.layers)]


FIGURE = PaperFigure("fig11_anchors", "Fig 11", "anchor tokens",
                     lambda r: fig11_anchors(r.dataset, r.heads, r.layers, model=r.label), caption, claims)
