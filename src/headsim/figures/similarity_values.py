"""§3: the distribution of normalised similarity values (the threshold argument); claim 7 (few values
between 0.1 and 0.6)."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import PAGE_WIDTH, figure, layer_colours, legend_columns
from ..stats.tables import HIGH_CUT, LOW_CUT, histogram_share, sim_bin_edges
from .base import PaperFigure, ReportedRun, RunStatistics
from .claim import FAILS, HOLDS, NA, Claim, fmt_pct

#: claim 7: share below LOW_CUT must exceed LOW_SHARE, share in [LOW_CUT, HIGH_CUT) must stay below MID_SHARE
LOW_SHARE, MID_SHARE = 0.5, 0.10


def sim_value_histogram(ds: xr.Dataset, *, model: str) -> Figure:
    """Distribution of normalised similarity values per layer (pooled over heads), log scale: the threshold argument of §3."""
    edges = sim_bin_edges(ds)
    L = ds.sizes["layer"]
    thr = float(ds.attrs.get("threshold", math.nan))
    h = ds["sim_value_hist"].sum("head").values.astype(np.float64)
    width = 8.5 if L <= 6 else PAGE_WIDTH
    rows = math.ceil((L + 2) / legend_columns([f"layer {L}: 00.0% < 0.1, 00.0% in 0.1–0.6"], width))
    fig, axes = figure(1, 1, (width, 4.2 + 0.16 * rows), suptitle=f"Normalised similarity values S / max S, all heads pooled ({model})")
    ax = axes[0, 0]
    below = edges[1:] <= 0.1 + 1e-9
    mid = (edges[:-1] >= 0.1 - 1e-9) & (edges[1:] <= 0.6 + 1e-9)
    for li, colour in enumerate(layer_colours(L)):
        s = h[li].sum()
        share = h[li] / s if s else h[li]
        ax.stairs(share, edges, color=colour,
                  label=f"layer {li + 1}: {share[below].sum():.1%} < 0.1, {share[mid].sum():.1%} in 0.1–0.6")
    ax.set_yscale("log")
    ax.axvspan(0.1, 0.6, color="0.9", zorder=0, label="0.1–0.6 (the paper: few values)")
    if np.isfinite(thr):
        ax.axvline(thr, color="C3", ls="--", lw=1.0, label=f"threshold {thr:g}")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("normalised similarity S / max S of a valid off-diagonal pair", fontsize=8)
    ax.set_ylabel("share of pairs (log scale)", fontsize=8)
    ax.tick_params(labelsize=7)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=7, frameon=False, ncol=legend_columns(labels, width))
    return fig


def caption(r: ReportedRun) -> str:
    return (f"Distribution of the normalised similarity values S / max S of all valid pairs i < j, per layer with "
            f"all heads pooled, on a log scale. The legend gives each layer's share below 0.1 and between 0.1 and "
            f"0.6 (grey band); the dashed line is the threshold {r.threshold:g}. Values outside the histogram's "
            "range are counted in its end bins. The paper (§3): most values lie below 0.1 and few between 0.1 and "
            "0.6, so the threshold separates the high-similarity elements.")


def _share(hist: np.ndarray, edges: np.ndarray, low: float, high: float) -> float:
    return float(histogram_share(hist, edges, low, high))


def claim_similarity_gap(ds: xr.Dataset) -> Claim:
    claim = Claim(
        "c7_similarity_gap",
        f"§3: most normalised similarity values lie below {LOW_CUT:g}, and few lie between {LOW_CUT:g} and "
        f"{HIGH_CUT:g}, which is why a threshold of 0.3 separates the high-similarity elements.",
        "Histogram of the normalised similarity values S / max S of all valid pairs i < j, all layers and heads "
        f"pooled (stats.nc sim_value_hist): share below {LOW_CUT:g} and share in [{LOW_CUT:g}, {HIGH_CUT:g}).",
        "", f"holds if more than {LOW_SHARE:.0%} of the values lie below {LOW_CUT:g} and fewer than "
        f"{MID_SHARE:.0%} lie in [{LOW_CUT:g}, {HIGH_CUT:g})", NA)
    if "sim_value_hist" not in ds:
        claim.value = "this run has no similarity-value histogram"
        return claim
    hist = ds["sim_value_hist"].values.astype(np.float64)
    edges = sim_bin_edges(ds)
    pooled = hist.sum(axis=tuple(range(hist.ndim - 1)))
    if pooled.sum() <= 0:
        claim.value = "no similarity values were recorded"
        return claim
    below = _share(pooled, edges, -np.inf, LOW_CUT)
    mid = _share(pooled, edges, LOW_CUT, HIGH_CUT)
    above = _share(pooled, edges, HIGH_CUT, np.inf)
    per_layer = [(_share(h, edges, -np.inf, LOW_CUT), _share(h, edges, LOW_CUT, HIGH_CUT))
                 for h in hist.reshape(hist.shape[0], -1, hist.shape[-1]).sum(axis=1)]
    per = ", ".join(f"L{k + 1} {fmt_pct(b)}/{fmt_pct(m)}" for k, (b, m) in enumerate(per_layer))
    claim.value = (f"{fmt_pct(below)} below {LOW_CUT:g}, {fmt_pct(mid)} in {LOW_CUT:g}–{HIGH_CUT:g}, "
                   f"{fmt_pct(above)} at or above {HIGH_CUT:g}; per layer (below / between): {per}")
    claim.verdict = HOLDS if (below > LOW_SHARE and mid < MID_SHARE) else FAILS
    claim.numbers = {"below": below, "between": mid, "above": above,
                     "per_layer_below": [b for b, _ in per_layer], "per_layer_between": [m for _, m in per_layer]}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_similarity_gap(r.dataset)]


FIGURE = PaperFigure("sim_value_histogram", "§3", "distribution of normalised similarity values",
                     lambda r: sim_value_histogram(r.dataset, model=r.label), caption, claims)
