"""Per-text figures: Fig 4 (attention maps), Fig 5 (separator blocks), similarity and Fig 12 for one window."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .style import ATTENTION_CMAP, SIMILARITY_CMAP, heatmap, new_figure


def mark_lines(ax, lines: np.ndarray, *, rug: bool = False) -> None:
    """Outline separator rows and columns (``lines`` is the ``[T, T]`` mask of :func:`headsim.views.separator_lines`);
    ``rug``: short red ticks along the top and left edges instead (a long window's hundreds of separators)."""
    positions = np.flatnonzero(lines.all(axis=0)) if lines.size else []
    if rug:
        n = lines.shape[0]
        ax.plot(positions, np.full(len(positions), -0.5 - 0.012 * n), "|", color="red", ms=5, mew=0.6, clip_on=False)
        ax.plot(np.full(len(positions), -0.5 - 0.012 * n), positions, "_", color="red", ms=5, mew=0.6, clip_on=False)
        return
    for p in positions:
        ax.axvline(p, color="red", lw=0.8, alpha=0.8)
        ax.axhline(p, color="red", lw=0.8, alpha=0.8)


def fig04_attention(attention: np.ndarray, labels: list[str], layers: list[int], head: int, *, model: str,
                    max_ticks: int | None = None, note: str = "") -> Figure:
    """Fig 4: per chosen layer, one head's attention map (left) and the sum over the layer's heads (right).

    ``attention`` is ``[L, H, T, T]`` of one window cut to its valid tokens (or a binned overview
    over ``labels`` bins, with ``max_ticks`` and a ``note`` under the title); ``layers`` and
    ``head`` are 0-based.
    """
    fig, axes = new_figure(len(layers), 2, panel=6.0,
                           suptitle=f"Fig 4 — attention maps of one input ({model}){note}")
    for row, layer in enumerate(layers):
        bottom = row == len(layers) - 1
        heatmap(axes[row, 0], attention[layer, head], labels=labels, cmap=ATTENTION_CMAP, vmin=0, xticks=bottom,
                title=f"layer {layer + 1}, head {head + 1}", cbar_label="attention probability", max_ticks=max_ticks)
        heatmap(axes[row, 1], attention[layer].sum(axis=0), labels=labels, cmap=ATTENTION_CMAP, vmin=0,
                xticks=bottom, yticks=False, max_ticks=max_ticks,
                title=f"layer {layer + 1}, sum over {attention.shape[1]} heads", cbar_label="summed attention")
    return fig


def fig05_blocks(attention: np.ndarray, normalized: np.ndarray, lines: np.ndarray, averaged: np.ndarray,
                 labels: list[str], *, layer: int, head: int, sep_layer: int, model: str, max_ticks: int | None = None,
                 note: str = "") -> Figure:
    """Fig 5: attention map, similarity matrix, separator lines over the map, block-averaged similarity
    (over a binned overview: separators mark their bins, blocks are of bins)."""
    fig, axes = new_figure(2, 2, panel=6.5, suptitle=f"Fig 5 — separator blocks of one input ({model}){note}")
    where = f"layer {layer + 1}, head {head + 1}"
    heatmap(axes[0, 0], attention, labels=labels, cmap=ATTENTION_CMAP, vmin=0, xticks=False,
            title=f"attention map, {where}", cbar_label="attention probability", max_ticks=max_ticks)
    heatmap(axes[0, 1], normalized, labels=labels, cmap=SIMILARITY_CMAP, xticks=False, yticks=False,
            title=f"context similarity (normalised, diagonal zeroed), {where}", cbar_label="S / max S", max_ticks=max_ticks)
    heatmap(axes[1, 0], attention, labels=labels, cmap=ATTENTION_CMAP, vmin=0,
            title=f"separator columns of layer {sep_layer + 1} marked (red" + (" ticks at the edges)" if note else ")"),
            cbar_label="attention probability", max_ticks=max_ticks)
    mark_lines(axes[1, 0], lines, rug=bool(note))
    heatmap(axes[1, 1], averaged, labels=labels, cmap=SIMILARITY_CMAP, yticks=False, max_ticks=max_ticks,
            title="similarity averaged over separator blocks" + (" of bins" if note else ""),
            cbar_label="mean S / max S in block")
    mark_lines(axes[1, 1], lines, rug=bool(note))
    return fig


def similarity_panels(normalized: np.ndarray, mask: np.ndarray, labels: list[str], *, layer: int, head: int,
                      threshold: float, model: str, n_pairs: int | None = None, max_ticks: int | None = None,
                      note: str = "") -> Figure:
    """One head's normalised similarity matrix and its high-similarity mask (paper Fig 1b, §3). Over a
    binned overview ``mask`` is each bin block's fraction of high-similarity elements and ``n_pairs``
    the exact number of pairs."""
    fig, axes = new_figure(1, 2, panel=6.5,
                           suptitle=f"Context similarity, layer {layer + 1}, head {head + 1} ({model}){note}")
    heatmap(axes[0, 0], normalized, labels=labels, cmap=SIMILARITY_CMAP, max_ticks=max_ticks,
            title="S = Z·Zᵀ, diagonal zeroed, divided by max", cbar_label="S / max S")
    n_pairs = int(np.triu(mask, 1).sum()) if n_pairs is None else int(n_pairs)
    top = 1 if not note else max(float(mask.max()), 1e-12)  # an overview: fractions, scaled to the largest
    heatmap(axes[0, 1], mask.astype(float), labels=labels, cmap="Greys", vmin=0, vmax=top, yticks=False,
            title=f"high-similarity elements (> {threshold:g}): {n_pairs} pairs", max_ticks=max_ticks,
            cbar_label="fraction of the block's elements" if note else "1 = high similarity")
    return fig


def fig12_summed_similarity(normalized: np.ndarray, labels: list[str] | None, layers: list[int], *, title: str,
                            model: str, max_ticks: int | None = None) -> Figure:
    """Fig 12: normalised similarity summed over all heads, one panel per chosen layer.

    ``normalized`` is ``[L, H, T, T]`` (one text) or already summed ``[L, H, T, T]`` over windows.
    """
    fig, axes = new_figure(1, len(layers), panel=6.0, suptitle=f"Fig 12 — {title} ({model})")
    for col, layer in enumerate(layers):
        heatmap(axes[0, col], normalized[layer].sum(axis=0), labels=labels, cmap=SIMILARITY_CMAP, yticks=col == 0,
                max_ticks=max_ticks,
                title=f"layer {layer + 1}, sum over {normalized.shape[1]} heads", cbar_label="summed S / max S")
    return fig


def fig09_pair_table(pairs, tokens: list[str], *, layer: int, head: int, threshold: float, model: str,
                     max_rows: int = 32, total: int | None = None, max_tokens: int = 512) -> Figure:
    """Fig 9: one head's high-similarity pairs as a table, and the input's tokens with paired tokens coloured.

    ``pairs`` is the head's :func:`headsim.views.pair_table` (or its most similar pairs, ``total``
    the number of all); tokens sharing a value share a colour. Of more than ``max_tokens`` tokens
    only those of the pairs shown are listed.
    """
    total = len(pairs) if total is None else int(total)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(15, 9), layout="constrained")
    fig.suptitle(f"Fig 9 — high-similarity token pairs, layer {layer + 1}, head {head + 1} "
                 f"(threshold {threshold:g}; {total} pairs; {model})\n(layers and heads numbered from 1; "
                 "token positions from 0)", fontsize=11)
    grid = fig.add_gridspec(1, 2, width_ratios=[1, 2.2])
    shown = pairs.sort_values(["similarity"], ascending=False).head(max_rows).sort_values(["index_i", "index_j"])
    values = sorted({*shown["token_i"], *shown["token_j"]})
    palette = plt.get_cmap("tab20")
    colour = {v: palette(i % 20) for i, v in enumerate(values)}
    ax = fig.add_subplot(grid[0, 0])
    ax.axis("off")
    rows = [[r.token_i, r.token_j, r.index_i, r.index_j, f"{r.similarity:.2f}"] for r in shown.itertuples()]
    if rows:
        table = ax.table(cellText=rows, colLabels=["Token_i", "Token_j", "Index_i", "Index_j", "S/max"],
                         loc="upper center", cellLoc="center")
        table.auto_set_font_size(False)
        table.set_fontsize(8)
        table.scale(1, 1.15)
        for k, r in enumerate(rows, start=1):
            for c in (0, 1):
                table[k, c].set_facecolor((*colour[r[c]][:3], 0.45))
    title = f"top {len(rows)} pairs by similarity" if total > max_rows else "all pairs"
    ax.set_title(title if rows else "no pair above the threshold", fontsize=9)
    ax = fig.add_subplot(grid[0, 1])
    ax.axis("off")
    n_cols = 8
    paired = {*shown["index_i"], *shown["index_j"]}
    listed = list(enumerate(tokens)) if len(tokens) <= max_tokens else [(i, tokens[i]) for i in sorted(paired)]
    n_rows = -(-len(listed) // n_cols)
    full = len(listed) == len(tokens)
    for k, (i, tok) in enumerate(listed):
        col, row = divmod(k, n_rows)
        face = (*colour[tok][:3], 0.45) if i in paired and tok in colour else "none"
        ax.text(col / n_cols, 1 - (row / max(n_rows, 1) if full else row * min(1 / max(n_rows, 1), 0.03)), f"{i}: {tok}", fontsize=7, va="top", ha="left",
                bbox=dict(boxstyle="square,pad=0.15", fc=face, ec="none"))
    ax.set_title("input tokens (coloured: tokens in the pairs shown; one colour per token value)" if len(listed) == len(tokens)
                 else f"the tokens of the pairs shown (of {len(tokens)} input tokens; one colour per token value)", fontsize=9)
    return fig
