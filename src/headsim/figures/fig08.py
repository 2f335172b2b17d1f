"""Fig 8: per head, the probability that a high-similarity pair lies within one sentence, against chance;
claim 3 (heads prefer pairs within one sentence)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import COUNT_CMAP, DIVERGING_CMAP, head_grid, layer_head_heatmap, layer_head_size, titled
from ..stats.tables import same_sentence_chance
from .base import PaperFigure, ReportedRun, RunStatistics
from .claim import FAILS, HOLDS, NA, Claim


def fig08_same_sentence(ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame, *, model: str) -> Figure:
    """Fig 8: per head, probability that a high-similarity pair lies within one sentence, against chance."""
    p = head_grid(heads, "p_same_sentence")
    chance_h = head_grid(heads, "p_same_sentence_chance")
    chance = same_sentence_chance(ds)
    L, H = p.shape
    w, h = layer_head_size(L, H)
    fig = titled((w, 2 * h + 3.6), f"Fig 8 — high-similarity pairs within one sentence ({model})")
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


def caption(r: ReportedRun) -> str:
    spw = r.sentences_per_window()
    spw_text = f" (windows hold {spw:.1f} sentences on average)" if math.isfinite(spw) else ""
    chance = same_sentence_chance(r.dataset)
    return (f"(a) Per head, the probability that a high-similarity pair lies inside one sentence. (b) Its "
            f"difference from chance, red above and blue below; chance = {chance:.3f} is the share of all valid "
            f"pairs that lie inside one sentence{spw_text}. (c) Per layer, all heads pooled (line) and single heads "
            "(dots) against chance (dashed). [CLS] and [SEP] belong to no sentence. The paper: heads prefer pairs "
            "within one sentence, well above the chance that 3–4 sentences per window give.")


def claim_same_sentence(heads: pd.DataFrame) -> Claim:
    claim = Claim(
        "c3_same_sentence",
        "§3, Fig 8: heads prefer high-similarity pairs within one sentence, more than the 3–4 sentences of a "
        "window would give by chance.",
        "Per head: p_same_sentence (share of high-similarity pairs inside one sentence, heads.parquet) against "
        "the chance level p_same_sentence_chance (share of all valid pairs inside one sentence); heads above "
        "chance, overall and per layer.",
        "", "holds if more than half of the heads with pairs lie above chance", NA)
    h = heads[np.isfinite(heads["p_same_sentence"]) & np.isfinite(heads["p_same_sentence_chance"])]
    if not len(h):
        claim.value = "no head has high-similarity pairs, or no sentence information"
        return claim
    above = h["p_same_sentence"] > h["p_same_sentence_chance"]
    per_layer = {int(layer): (int(above[g.index].sum()), int(len(g))) for layer, g in h.groupby("layer")}
    chance = float(h["p_same_sentence_chance"].median())
    by_layer = ", ".join(f"L{k} {a}/{n}" for k, (a, n) in per_layer.items())
    claim.value = (f"{int(above.sum())} of {len(h)} heads above chance {chance:.3f} "
                   f"(median head {h['p_same_sentence'].median():.3f}); per layer: {by_layer}")
    claim.verdict = HOLDS if above.sum() > len(h) / 2 else FAILS
    claim.numbers = {"above": int(above.sum()), "heads": int(len(h)), "chance": chance,
                     "median_p_same_sentence": float(h["p_same_sentence"].median()),
                     "per_layer": {str(k): list(v) for k, v in per_layer.items()}}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_same_sentence(r.heads)]


FIGURE = PaperFigure("fig08_same_sentence", "Fig 8", "high-similarity pairs within one sentence",
                     lambda r: fig08_same_sentence(r.dataset, r.heads, r.layers, model=r.label), caption, claims)
