"""Aggregate (corpus) figures of a finished statistics run: Figs 2, 3, 6, 7, 8, 10, 11, 12, 13.

Every function takes the run's statistics Dataset (``stats.nc``) and, where a per-head summary is
plotted, its ``heads`` / ``layers`` tables; it returns a matplotlib ``Figure`` (save it with
:func:`headsim.plots.save`). Layer and head arguments are 1-based, as in every table and label.
Colour maps come from :mod:`headsim.plots.style`: attention in ``ATTENTION_CMAP``, similarity in
``SIMILARITY_CMAP``, counts and probabilities in ``COUNT_CMAP``, differences from chance in
``DIVERGING_CMAP``.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib import colors
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..errors import require
from .style import ATTENTION_CMAP, COUNT_CMAP, DIVERGING_CMAP, ONE_BASED, SIMILARITY_CMAP, heatmap
from .text import fig12_summed_similarity as _text_fig12

TARGET_LABELS = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation", "prev": "previous token (i−1)",
                 "next": "next token (i+1)"}


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _suptitle(fig: Figure, text: str, width_in: float) -> None:
    """Title + numbering note, wrapped to the figure's width (about 11 characters per inch at 11 pt)."""
    lines = textwrap.wrap(text, width=max(30, int(width_in * 11)))
    fig.suptitle("\n".join(lines + [f"({ONE_BASED})"]), fontsize=11)


def figure(nrows: int, ncols: int, size: tuple[float, float], *, suptitle: str, **kwargs) -> tuple[Figure, np.ndarray]:
    """A constrained-layout grid whose title states the model and the 1-based numbering."""
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False, layout="constrained", **kwargs)
    _suptitle(fig, suptitle, size[0])
    return fig, axes


def _titled(size: tuple[float, float], suptitle: str) -> Figure:
    fig = plt.figure(figsize=size, layout="constrained")
    _suptitle(fig, suptitle, size[0])
    return fig


def ratio(num, den) -> np.ndarray:
    """``num / den`` elementwise, NaN where ``den`` is not positive."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    shape = np.broadcast_shapes(num.shape, den.shape)
    return np.divide(num, den, out=np.full(shape, np.nan), where=np.broadcast_to(den > 0, shape))


def hist_stats(counts: np.ndarray, values: np.ndarray) -> tuple[float, float, int]:
    """Mean, median and total of a histogram ``counts`` over bin ``values`` (NaN when empty)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        return math.nan, math.nan, 0
    mean = float((counts * values).sum() / total)
    median = float(values[int(np.searchsorted(np.cumsum(counts), total / 2.0))])
    return mean, median, int(round(total))


def chance_distances(ds: xr.Dataset) -> np.ndarray:
    """Distribution of |i − j| over all valid pairs i ≠ j (what random pairs would give), per ``distance``."""
    pcv = ds["pair_count_valid"].values.astype(np.float64)
    t = pcv.shape[0]
    out = np.zeros(ds.sizes["distance"])
    for d in range(1, min(t, len(out))):
        out[d] = 2 * np.trace(pcv, offset=d)
    s = out.sum()
    return out / s if s > 0 else out


def random_pair_distance(ds: xr.Dataset) -> float:
    """Mean |i − j| of all valid pairs i ≠ j (what random pairs would give); NaN without pairs."""
    chance = chance_distances(ds)
    return float((chance * ds["distance"].values).sum()) if chance.sum() > 0 else math.nan


def same_sentence_chance(ds: xr.Dataset) -> float:
    """Share of valid pairs whose two tokens lie in one sentence (Fig 8's chance level)."""
    return float(ratio(ds["valid_pairs_same_sentence"].values, ds["valid_pairs"].values))


def first_middle_last(n_layers: int) -> list[int]:
    """1-based first, middle and last layer (the paper's layers 1, 6, 11 of its 12)."""
    return sorted({1, (n_layers - 1) // 2 + 1, n_layers})


def _layer_arg(ds: xr.Dataset, layer: int | None) -> int:
    n = ds.sizes["layer"]
    layer = n if layer is None else int(layer)
    require(1 <= layer <= n, f"layer {layer} is out of range", f"this run has layers 1..{n} (numbered from 1)")
    return layer


def _grid(heads: pd.DataFrame, column: str) -> np.ndarray:
    """``[L, H]`` array of a ``heads`` table column (rows placed by their 1-based layer and head)."""
    L, H = int(heads["layer"].max()), int(heads["head"].max())
    out = np.full((L, H), np.nan)
    out[heads["layer"].to_numpy() - 1, heads["head"].to_numpy() - 1] = heads[column].to_numpy(dtype=np.float64)
    return out


def _text_colour(cmap, norm, value: float) -> str:
    r, g, b, _ = plt.get_cmap(cmap)(norm(value))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _format(fmt: str, x: float) -> str:
    """``fmt.format(x)`` without "-0.00" / "+0.00" for values that round to zero."""
    text = fmt.format(x)
    try:
        return fmt.format(0.0).replace("+", "") if float(text) == 0 else text
    except ValueError:
        return text


def layer_head_heatmap(ax: Axes, values: np.ndarray, *, title: str, cmap: str, cbar_label: str,
                       vmin: float | None = None, vmax: float | None = None, fmt: str = "{:.2f}",
                       annotate: bool = True, center: float | None = None) -> None:
    """Heatmap of an ``[L, H]`` per-head value: rows = layers, columns = heads (both from 1).

    NaN cells (heads without pairs) are grey and marked "–". ``center`` makes a diverging map
    symmetric around that value.
    """
    v = np.asarray(values, dtype=np.float64)
    L, H = v.shape
    finite = v[np.isfinite(v)]
    lo = vmin if vmin is not None else (float(finite.min()) if finite.size else 0.0)
    hi = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    if center is not None:
        span = max(abs(lo - center), abs(hi - center), 1e-12)
        norm = colors.TwoSlopeNorm(vcenter=center, vmin=center - span, vmax=center + span)
    else:
        norm = colors.Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1e-12)
    cm = plt.get_cmap(cmap).with_extremes(bad="#d9d9d9")
    img = ax.imshow(np.ma.masked_invalid(v), cmap=cm, norm=norm, aspect="auto", interpolation="nearest")
    bar = ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.02)
    bar.set_label(cbar_label, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    ax.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=7)
    ax.set_yticks(range(L), [str(layer + 1) for layer in range(L)], fontsize=7)
    ax.set_xlabel("head", fontsize=8)
    ax.set_ylabel("layer", fontsize=8)
    ax.set_title(title + ("  (grey –: no pairs, undefined)" if np.isnan(v).any() else ""), fontsize=9)
    if annotate:
        size = max(4.0, min(8.0, 90.0 / max(H, L)))
        for li in range(L):
            for hi in range(H):
                x = v[li, hi]
                text = "–" if not np.isfinite(x) else _format(fmt, x)
                colour = "black" if not np.isfinite(x) else _text_colour(cm, norm, x)
                ax.text(hi, li, text, ha="center", va="center", fontsize=size, color=colour)


def _hl_rows(ax: Axes, rows: list[int], width: int, colour: str = "black") -> None:
    """Outline 0-based ``rows`` of a layer × head heatmap."""
    for r in rows:
        ax.add_patch(Rectangle((-0.5, r - 0.5), width, 1, fill=False, edgecolor=colour, linewidth=1.5))


def _model(model: str | None, ds: xr.Dataset) -> str:
    return model or str(ds.attrs.get("model", "model"))


def _windows(ds: xr.Dataset) -> int:
    return int(ds["windows"].values) if "windows" in ds else 0


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


def _square_panels(nrows: int, ncols: int, side: float = 3.6) -> tuple[float, float]:
    """Figure size for a grid of square heatmaps with colour bars, labels and a two-line title."""
    return ncols * (side + 1.9), nrows * (side + 1.0) + 0.8


def _select_last(da: xr.DataArray, layer: int) -> xr.DataArray:
    """The given 1-based layer of an attention sum, whatever extra dims it has."""
    if "layer" in da.dims:
        da = da.sel(layer=layer) if layer in da["layer"].values else da.isel(layer=-1)
    return da


# ---------------------------------------------------------------------------------------------
# Fig 2 and Fig 3: summed attention
# ---------------------------------------------------------------------------------------------


def default_fig02_layers(n_layers: int) -> list[int]:
    """1-based first, middle, second to last and last layers (the paper: 1, 6, 10, 11)."""
    return sorted({1, (n_layers - 1) // 2 + 1, max(n_layers - 1, 1), n_layers})


def fig02_summed_attention(ds: xr.Dataset, *, model: str | None = None, layers: list[int] | None = None,
                           head: int = 1, clip: float | None = 99.0) -> Figure:
    """Fig 2: summed attention map of one head (left) and of all heads of the layer (right), per layer.

    ``layers`` are 1-based (default: first, middle, second to last, last); ``head`` is 1-based.
    ``clip``: colours saturate at this percentile of each panel (``None``: full range), so that the
    diagonal stays visible beside the few columns ([CLS], [SEP]) that take most of the attention.
    """
    L, H = ds.sizes["layer"], ds.sizes["head"]
    require(1 <= head <= H, f"head {head} is out of range", f"this run has heads 1..{H} (numbered from 1)")
    layers = default_fig02_layers(L) if layers is None else [_layer_arg(ds, x) for x in layers]
    w = _windows(ds)
    fig, axes = figure(len(layers), 2, _square_panels(len(layers), 2),
                       suptitle=f"Fig 2 — attention summed over {w} windows ({_model(model, ds)})")
    a = ds["attn_sum"]
    note = "" if clip is None else f"\n(colours clipped at the {clip:g}th percentile)"
    for row, layer in enumerate(layers):
        for col, (m, title, what) in enumerate((
                (a.sel(layer=layer, head=head).values, f"layer {layer}, head {head}", f"{w} windows"),
                (a.sel(layer=layer).sum("head").values, f"layer {layer}, sum over {H} heads", f"{H} heads, {w} windows"))):
            vmax = _clip_max(m, clip)
            heatmap(axes[row, col], m, title=title, cmap=ATTENTION_CMAP, vmin=0, vmax=vmax,
                    cbar_label=f"attention summed over {what}{note}")
    return fig


def _clip_max(m: np.ndarray, clip: float | None) -> float | None:
    """The ``clip`` percentile of the positive entries of ``m`` (``None`` for the full range)."""
    if clip is None:
        return None
    pos = m[m > 0]
    return float(np.percentile(pos, clip)) if pos.size else None


def fig03_zeroed_attention(ds: xr.Dataset, *, model: str | None = None, layer: int | None = None) -> Figure:
    """Fig 3: last layer's attention summed over heads and windows: plain, top columns zeroed, columns + diagonals zeroed."""
    layer = _layer_arg(ds, layer)
    w, k = _windows(ds), ds.attrs.get("top_k_columns", "top-k")
    panels = [("attn_sum", "plain sum"),
              ("attn_sum_top_zeroed", f"the {k} most attended columns zeroed per window"),
              ("attn_sum_top_diag_zeroed", f"columns and {zeroed_band(ds)} zeroed")]
    panels = [(name, title) for name, title in panels if name in ds]
    fig, axes = figure(1, len(panels), _square_panels(1, len(panels)),
                       suptitle=f"Fig 3 — layer {layer}: attention summed over heads and {w} windows ({_model(model, ds)})")
    for col, (name, title) in enumerate(panels):
        da = _select_last(ds[name], layer)
        if "head" in da.dims:
            da = da.sum("head")
        heatmap(axes[0, col], da.values, title=title, cmap=ATTENTION_CMAP, vmin=0, cbar_label="summed attention")
    return fig


# ---------------------------------------------------------------------------------------------
# Figs 6 and 8: per-head probabilities
# ---------------------------------------------------------------------------------------------


def _heatmap_size(L: int, H: int) -> tuple[float, float]:
    return max(6.5, 2.2 + 0.62 * H), 1.2 + 0.42 * L


def fig06_repeat_probability(heads: pd.DataFrame, *, model: str) -> Figure:
    """Fig 6: per head, (a) share of high-similarity pairs that are two equal tokens, (b) the same within one sentence."""
    pr, prs = _grid(heads, "p_repeat"), _grid(heads, "p_repeat_same_sentence")
    L, H = pr.shape
    w, h = _heatmap_size(L, H)
    fig, axes = figure(2, 1, (w, 2 * h + 0.8), suptitle=f"Fig 6 — repeated tokens among high-similarity pairs ({model})")
    vmax = float(np.nanmax(np.concatenate([pr.ravel(), prs.ravel(), [1e-9]])))
    layer_head_heatmap(axes[0, 0], pr, title="(a) P(pair is two equal tokens)", cmap=COUNT_CMAP, vmin=0, vmax=vmax,
                       cbar_label="probability")
    layer_head_heatmap(axes[1, 0], prs, title="(b) P(equal tokens) for pairs within one sentence", cmap=COUNT_CMAP,
                       vmin=0, vmax=vmax, cbar_label="probability")
    return fig


def fig08_same_sentence(ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame, *, model: str) -> Figure:
    """Fig 8: per head, probability that a high-similarity pair lies within one sentence, against chance."""
    p = _grid(heads, "p_same_sentence")
    chance_h = _grid(heads, "p_same_sentence_chance")
    chance = same_sentence_chance(ds)
    L, H = p.shape
    w, h = _heatmap_size(L, H)
    fig = _titled((w, 2 * h + 3.6), f"Fig 8 — high-similarity pairs within one sentence ({model})")
    gs = fig.add_gridspec(3, 1, height_ratios=[h, h, 3.0])
    ax_a, ax_b, ax_c = (fig.add_subplot(gs[k, 0]) for k in range(3))
    layer_head_heatmap(ax_a, p, title=f"(a) P(same sentence); chance = {chance:.2f}", cmap=COUNT_CMAP, vmin=0,
                       vmax=1, cbar_label="probability")
    layer_head_heatmap(ax_b, p - chance_h, title="(b) P(same sentence) − chance (red: above chance)",
                       cmap=DIVERGING_CMAP, center=0.0, fmt="{:+.2f}", cbar_label="difference in probability")
    x = layers["layer"].to_numpy()
    ax_c.plot(x, layers["p_same_sentence"], "o-", color="C0", label="all heads of the layer pooled")
    ax_c.plot(x, layers["p_same_sentence_chance"], "--", color="0.4", label="chance: random valid pair")
    for li in range(L):
        ax_c.scatter(np.full(H, li + 1), p[li], s=10, color="C0", alpha=0.35,
                     label="single heads" if li == 0 else None)
    ax_c.set_xticks(x)
    ax_c.set_xlabel("layer", fontsize=8)
    ax_c.set_ylabel("P(same sentence)", fontsize=8)
    ax_c.set_ylim(0, 1.02)
    ax_c.set_title("(c) per layer", fontsize=9)
    fig.legend(*ax_c.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    ax_c.tick_params(labelsize=7)
    return fig


# ---------------------------------------------------------------------------------------------
# Figs 7 and 13: distances
# ---------------------------------------------------------------------------------------------


def _distance_axis(ds: xr.Dataset) -> np.ndarray:
    return ds["distance"].values.astype(np.float64)


def fig07_distance_histograms(ds: xr.Dataset, heads: pd.DataFrame, *, model: str, layer: int | None = None) -> Figure:
    """Fig 7: per head of one layer (default the last), histogram of |i − j| of high-similarity pairs; below, mean distance of every head."""
    layer = _layer_arg(ds, layer)
    L, H = ds.sizes["layer"], ds.sizes["head"]
    dist = _distance_axis(ds)
    chance = chance_distances(ds)
    ncols = min(4, H)
    nrows = math.ceil(H / ncols)
    w_map, h_map = _heatmap_size(L, H)
    fig = _titled((max(3.3 * ncols, w_map), 2.5 * nrows + h_map + 0.5),
                  f"Fig 7 — distance |i − j| of high-similarity pairs, layer {layer}, {_windows(ds)} windows ({model})")
    gs = fig.add_gridspec(nrows + 1, ncols, height_ratios=[2.5] * nrows + [h_map])
    hist = ds["distance_hist"].sel(layer=layer).values
    first = None
    for hi in range(H):
        ax = fig.add_subplot(gs[hi // ncols, hi % ncols], sharex=first)
        first = first or ax
        counts = hist[hi].astype(np.float64)
        mean, median, n = hist_stats(counts, dist)
        share = counts / n if n else counts
        ax.bar(dist[1:], share[1:], width=1.0, color="#8fb8de", label="high-similarity pairs")
        ax.step(dist[1:], chance[1:], where="mid", color="0.15", lw=1.1, label="all valid pairs (chance)")
        if n:
            ax.axvline(mean, color="C3", lw=1.0, ls="--", label="mean")
        ax.set_title(f"head {hi + 1}: n = {n:,}, mean {mean:.1f}" if n else f"head {hi + 1}: no pairs", fontsize=8)
        ax.tick_params(labelsize=7)
        if hi % ncols == 0:
            ax.set_ylabel("share of pairs", fontsize=8)
        if hi // ncols == nrows - 1 or hi + ncols >= H:
            ax.set_xlabel("distance |i − j| (tokens)", fontsize=8)
        if hi == 0:
            fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    ax_m = fig.add_subplot(gs[nrows, :])
    layer_head_heatmap(ax_m, _grid(heads, "mean_distance"), title=f"mean distance of every head (layer {layer} outlined)",
                       cmap=COUNT_CMAP, vmin=0, fmt="{:.1f}", cbar_label="mean |i − j| (tokens)")
    _hl_rows(ax_m, [layer - 1], H)
    return fig


def fig13_layer_distances(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 13: distance distribution of high-similarity pairs pooled over heads, first / middle / last layer."""
    layers = first_middle_last(ds.sizes["layer"]) if layers is None else [_layer_arg(ds, x) for x in layers]
    dist = _distance_axis(ds)
    chance = chance_distances(ds)
    fig, axes = figure(len(layers), 1, (8.0, 2.6 * len(layers) + 0.8),
                       suptitle=f"Fig 13 — distance of high-similarity pairs by layer, all heads pooled ({model})",
                       sharex=True)
    for row, layer in enumerate(layers):
        ax = axes[row, 0]
        counts = ds["distance_hist"].sel(layer=layer).sum("head").values.astype(np.float64)
        mean, median, n = hist_stats(counts, dist)
        share = counts / n if n else counts
        ax.bar(dist[1:], share[1:], width=1.0, color="#8fb8de", label="high-similarity pairs")
        ax.step(dist[1:], chance[1:], where="mid", color="0.15", lw=1.1, label="all valid pairs (chance)")
        if n:
            ax.axvline(mean, color="C3", ls="--", lw=1.0, label=f"mean {mean:.1f}")
            ax.axvline(median, color="C1", ls=":", lw=1.2, label=f"median {median:.0f}")
        ax.set_title(f"layer {layer}: {n:,} pairs", fontsize=9)
        ax.set_ylabel("share of pairs", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("distance |i − j| (tokens)", fontsize=8)
    return fig


# ---------------------------------------------------------------------------------------------
# Fig 10: locations, Fig 12: summed similarity
# ---------------------------------------------------------------------------------------------


def fig10_locations(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 10: where each head's high-similarity pairs lie, summed over windows; a layer × head grid.

    Each panel is scaled to its own maximum so its pattern is visible whatever its pair count.
    """
    L, H = ds.sizes["layer"], ds.sizes["head"]
    layers = list(range(1, L + 1)) if layers is None else [_layer_arg(ds, x) for x in layers]
    t = ds.sizes["query"]
    panel = 1.35 if H > 6 else 1.8
    fig, axes = figure(len(layers), H, (max(panel * H + 1.2, 6.0), panel * len(layers) + 1.6),
                       suptitle=f"Fig 10 — locations (i, j) of high-similarity pairs over {_windows(ds)} windows ({model})")
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
    fig.supxlabel(f"each panel: key position j across,\nquery position i down, 0..{t - 1}" if H < 4 else
                  f"each panel: key position j across, query position i down, 0..{t - 1}", fontsize=8)
    return fig


def fig12_summed_similarity(ds: xr.Dataset, *, model: str, layers: list[int] | None = None) -> Figure:
    """Fig 12 (corpus): normalised similarity summed over all heads and windows, first / middle / last layer."""
    layers = first_middle_last(ds.sizes["layer"]) if layers is None else [_layer_arg(ds, x) for x in layers]
    idx = [int(np.flatnonzero(ds["layer"].values == x)[0]) for x in layers]
    return _text_fig12(ds["sim_sum"].values, None, idx, model=model,
                       title=f"normalised similarity summed over heads and {_windows(ds)} windows")


# ---------------------------------------------------------------------------------------------
# Fig 11: anchors
# ---------------------------------------------------------------------------------------------


def _layer_colours(n: int) -> list:
    cmap = plt.get_cmap(COUNT_CMAP)
    return [cmap(x) for x in np.linspace(0.0, 0.85, n)]


def fig11_anchors(ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame, *, model: str) -> Figure:
    """Fig 11: (a) share of a head's high-similarity pairs that contain its most common token (anchor);
    (b) its distribution per layer; (c) number of distinct anchors across a layer's heads."""
    L, H = ds.sizes["layer"], ds.sizes["head"]
    w, h = _heatmap_size(L, H)
    fig = _titled((max(w, 11.0), h + 4.2), f"Fig 11 — anchor tokens of high-similarity pairs ({model})")
    gs = fig.add_gridspec(2, 2, height_ratios=[h, 3.6])
    ax_a = fig.add_subplot(gs[0, :])
    layer_head_heatmap(ax_a, _grid(heads, "anchor_fraction_mean"), cmap=COUNT_CMAP, vmin=0, vmax=1,
                       title="(a) mean share of a window's high-similarity pairs that contain the head's most common token",
                       cbar_label="mean anchor fraction")
    ax_b, ax_c = fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])
    fb = ds["fraction_bin"].values
    fedges = np.asarray(ds.attrs.get("fraction_bin_edges", np.linspace(0.0, 1.0, len(fb) + 1)), dtype=np.float64)
    width = float(np.diff(fedges).mean())
    fh = ds["anchor_fraction_hist"].sum("head").values.astype(np.float64)
    na = ds["n_anchors"].values
    dh = ds["anchor_distinct_hist"].values.astype(np.float64)
    for li, colour in enumerate(_layer_colours(L)):
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
    ax_c.set_xticks(na)
    ax_c.set_xlabel("distinct anchor tokens across the layer's heads in one window", fontsize=8)
    ax_c.set_ylabel("share of windows", fontsize=8)
    ax_c.set_title("(c) distinct anchors per layer and window", fontsize=9)
    for ax in (ax_b, ax_c):
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="best", ncol=2 if L > 6 else 1)
    return fig


# ---------------------------------------------------------------------------------------------
# Threshold argument and attention focus
# ---------------------------------------------------------------------------------------------


def sim_bin_edges(ds: xr.Dataset) -> np.ndarray:
    """Edges of the ``sim_bin`` histogram (attribute ``sim_bin_edges``; else rebuilt from the centres)."""
    edges = ds["sim_bin"].attrs.get("sim_bin_edges", ds.attrs.get("sim_bin_edges"))
    if edges is not None:
        return np.asarray(edges, dtype=np.float64)
    c = ds["sim_bin"].values.astype(np.float64)
    half = np.diff(c).mean() / 2 if len(c) > 1 else 0.5
    return np.concatenate([[c[0] - half], (c[:-1] + c[1:]) / 2, [c[-1] + half]])


def sim_value_histogram(ds: xr.Dataset, *, model: str) -> Figure:
    """Distribution of normalised similarity values per layer (pooled over heads), log scale: the threshold argument of §3."""
    edges = sim_bin_edges(ds)
    L = ds.sizes["layer"]
    thr = float(ds.attrs.get("threshold", math.nan))
    h = ds["sim_value_hist"].sum("head").values.astype(np.float64)
    fig, axes = figure(1, 1, (8.5, 5.0), suptitle=f"Normalised similarity values S / max S, all heads pooled ({model})")
    ax = axes[0, 0]
    below = edges[1:] <= 0.1 + 1e-9
    mid = (edges[:-1] >= 0.1 - 1e-9) & (edges[1:] <= 0.6 + 1e-9)
    for li, colour in enumerate(_layer_colours(L)):
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
    ax.legend(fontsize=7, loc="upper right")
    return fig


def attention_focus(heads: pd.DataFrame, *, model: str, targets: tuple[str, ...] = ("cls", "sep", "punct", "prev", "next"),
                    shares: dict | None = None) -> Figure:
    """Mean attention each query gives to [CLS], [SEP], punctuation, the previous and the next token, per head.

    ``shares`` (``{"cls": …, "sep": …, "punct": …}``, from :func:`headsim.report.claims.token_shares`)
    draws each kind's share of the tokens, i.e. what uniform attention would give, as dotted lines.
    """
    grids = {t: _grid(heads, f"attn_{t}") for t in targets if f"attn_{t}" in heads}
    L, H = next(iter(grids.values())).shape
    w, h = _heatmap_size(L, H)
    ncols = 2
    nrows = math.ceil((len(grids) + 1) / ncols)
    fig, axes = figure(nrows, ncols, (2 * w, nrows * (h + 0.3)),
                       suptitle=f"Attention focus: mean attention per query on special tokens and neighbours ({model})")
    flat = axes.ravel()
    for ax, (t, g) in zip(flat, grids.items()):
        layer_head_heatmap(ax, g, title=f"attention on {TARGET_LABELS.get(t, t)}", cmap=ATTENTION_CMAP, vmin=0,
                           vmax=max(float(np.nanmax(g)) if np.isfinite(g).any() else 1.0, 1e-9),
                           cbar_label="mean attention per query")
    ax = flat[len(grids)]
    x = np.arange(1, L + 1)
    for k, (t, g) in enumerate(grids.items()):
        ax.plot(x, np.nanmean(g, axis=1) if np.isfinite(g).any() else np.full(L, np.nan), "o-", ms=3,
                color=f"C{k}", label=TARGET_LABELS.get(t, t))
        share = (shares or {}).get(t)
        if share is not None and np.isfinite(share):
            ax.axhline(share, color=f"C{k}", ls=":", lw=1.0, label=f"share of {TARGET_LABELS.get(t, t)} tokens")
    ax.set_xticks(x)
    ax.set_xlabel("layer", fontsize=8)
    ax.set_ylabel("mean over the layer's heads", fontsize=8)
    ax.set_title("per layer, mean over heads", fontsize=9)
    ax.tick_params(labelsize=7)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=7, frameon=False)
    for extra in flat[len(grids) + 1:]:
        extra.axis("off")
    return fig


# ---------------------------------------------------------------------------------------------
# Several runs: per-layer curves on shared axes
# ---------------------------------------------------------------------------------------------


def layer_comparison(runs: list[dict]) -> Figure:
    """Per-layer curves of several runs on shared axes (``headsim compare``).

    Each run is a dict with ``label``, ``heads`` and ``layers`` (the run's tables), ``n_heads`` and
    optionally ``shares`` (token shares of [CLS] / [SEP] / punctuation) and ``random_distance``
    (mean distance of random valid pairs).
    """
    from matplotlib.lines import Line2D

    fig, axes = figure(2, 4, (17.0, 8.4), suptitle="Per-layer statistics of " + "; ".join(r.get("legend", r["label"]) for r in runs))
    ax = {k: axes.ravel()[i] for i, k in enumerate("abcdefgh")}
    colour = {r["label"]: f"C{i % 10}" for i, r in enumerate(runs)}

    def focus(r: dict, *targets: str) -> np.ndarray:
        h = r["heads"]
        cols = [f"attn_{t}" for t in targets if f"attn_{t}" in h]
        if not cols:
            return np.full(int(h["layer"].max()), np.nan)
        return h.assign(_v=h[cols].sum(axis=1, min_count=len(cols))).groupby("layer")["_v"].mean().to_numpy()

    for r in runs:
        c, lay, heads = colour[r["label"]], r["layers"], r["heads"]
        x = lay["layer"].to_numpy()
        kw = dict(color=c, marker="o", ms=3)
        ax["a"].plot(x, lay["mean_distance"], **kw)
        if np.isfinite(r.get("random_distance", np.nan)):
            ax["a"].axhline(r["random_distance"], color=c, ls=":", lw=1.0)
        ax["b"].plot(x, lay["p_same_sentence"], **kw)
        ax["b"].plot(x, lay["p_same_sentence_chance"], color=c, ls="--", lw=1.0)
        g = heads.groupby("layer")["p_repeat"]
        ax["c"].plot(g.median().index, g.median().to_numpy(), **kw)
        ax["c"].fill_between(g.min().index, g.min().to_numpy(), g.max().to_numpy(), color=c, alpha=0.15, lw=0)
        ax["d"].plot(x, lay["mean_distinct_anchors"], **kw)
        ax["d"].axhline(r["n_heads"], color=c, ls="--", lw=1.0)
        hx = np.arange(1, int(heads["layer"].max()) + 1)
        shares = r.get("shares") or {}
        ax["e"].plot(hx, focus(r, "sep", "punct"), **kw)
        sp = (shares.get("sep") or np.nan) + (shares.get("punct") if shares.get("punct") is not None else np.nan)
        if np.isfinite(sp):
            ax["e"].axhline(sp, color=c, ls=":", lw=1.0)
        ax["f"].plot(hx, focus(r, "cls"), **kw)
        if shares.get("cls") is not None and np.isfinite(shares["cls"]):
            ax["f"].axhline(shares["cls"], color=c, ls=":", lw=1.0)
        ax["g"].plot(hx, focus(r, "prev", "next"), **kw)
    titles = {
        "a": ("mean distance of high-similarity pairs", "mean |i − j| (tokens)"),
        "b": ("P(pair within one sentence)", "probability"),
        "c": ("P(pair is two equal tokens): median head, min–max band", "probability"),
        "d": ("distinct anchor tokens across a layer's heads", "mean per window"),
        "e": ("attention on [SEP] + punctuation (mean over heads)", "mean attention per query"),
        "f": ("attention on [CLS] (mean over heads)", "mean attention per query"),
        "g": ("attention on previous + next token (mean over heads)", "mean attention per query"),
    }
    for k, (title, ylabel) in titles.items():
        a = ax[k]
        a.set_title(title, fontsize=9)
        a.set_xlabel("layer", fontsize=8)
        a.set_ylabel(ylabel, fontsize=8)
        a.tick_params(labelsize=7)
        a.xaxis.get_major_locator().set_params(integer=True)
    ax["h"].axis("off")
    handles = [Line2D([], [], color=colour[r["label"]], marker="o", ms=3, label=r.get("legend", r["label"])) for r in runs]
    handles += [Line2D([], [], color="0.3", ls="--", lw=1.0, label="dashed: chance (b), number of heads (d)"),
                Line2D([], [], color="0.3", ls=":", lw=1.0, label="dotted: random pairs (a), token share (e, f)"),
                Line2D([], [], color="0.3", lw=6, alpha=0.15, label="band: min–max over heads (c)")]
    ax["h"].legend(handles=handles, loc="center", fontsize=8, frameon=False, title="runs", title_fontsize=9)
    return fig
