"""The window-length figure: key statistics against window length, one line per layer."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .style import figure, layer_colours

#: (statistic, panel title, y label, reference statistic drawn dotted or None)
PANELS = [
    ("p_repeat", "P(pair is two equal tokens)", "probability", None),
    ("p_same_sentence", "P(pair inside one sentence); dotted: chance", "probability", "p_same_sentence_chance"),
    ("distance_vs_random", "mean distance of pairs / random pairs' (Figs 12–13)", "ratio", None),
    ("distance_change_from_layer_1", "mean distance relative to layer 1", "relative change", None),
    ("median_anchor_fraction", "median anchor fraction (Fig 11a)", "share of a head's pairs", None),
    ("mean_distinct_anchors", "distinct anchors across a layer's heads (Fig 11b)", "mean per window", None),
    ("attn_framing", "attention on [CLS] + [SEP]; dotted: their token share", "mean attention per query", "framing_share"),
    ("share_sim_gap", "share of S / max S in [0.1, 0.6) (§3)", "share of values", None),
]


def window_length_figure(statistics, *, model: str, windows: dict[int, int], corpus: str) -> Figure:
    """Eight panels of :data:`PANELS`: each statistic against the window length (log₂ axis), a line per
    layer and, black, all layers pooled; ``statistics`` is
    :attr:`headsim.report.window_lengths.WindowLengths.statistics`."""
    lengths = sorted(windows)
    counts = ", ".join(f"{windows[t]:,} windows of {t} tokens" for t in lengths)
    fig, axes = figure(2, 4, (17.0, 8.6), suptitle=f"{model}: key statistics against window length "
                       f"({counts}; corpus {corpus})")
    layers = sorted(int(x) for x in statistics["layer"].dropna().unique())
    colours = dict(zip(layers, layer_colours(len(layers))))
    for ax, (name, title, ylabel, reference) in zip(axes.ravel(), PANELS):
        rows = statistics[statistics["statistic"] == name]
        for layer in layers:
            r = rows[rows["layer"] == layer].sort_values("seq_len")
            ax.plot(r["seq_len"], r["value"], color=colours[layer], marker="o", ms=3, lw=1.2)
        pooled = rows[rows["layer"].isna()].sort_values("seq_len")
        if len(pooled):
            ax.plot(pooled["seq_len"], pooled["value"], color="black", marker="s", ms=4, lw=2.0)
        if reference is not None:
            ref = statistics[(statistics["statistic"] == reference) & statistics["layer"].isna()].sort_values("seq_len")
            ax.plot(ref["seq_len"], ref["value"], color="0.4", ls=":", lw=1.5)
        if name == "distance_vs_random":
            ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
        if name == "distance_change_from_layer_1":
            ax.axhline(0.0, color="0.6", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.minorticks_off()
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("window length (tokens)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        if np.isfinite(rows["value"].to_numpy(dtype=np.float64)).sum() == 0:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
    handles = [Line2D([], [], color=colours[layer], marker="o", ms=3, label=f"layer {layer}") for layer in layers]
    handles.append(Line2D([], [], color="black", marker="s", ms=4, lw=2.0, label="all layers pooled"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    return fig
