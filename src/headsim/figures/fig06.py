"""Fig 6: per head, the share of high-similarity pairs that are two equal tokens; claim 2 (heads differ)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..plots.style import COUNT_CMAP, figure, head_grid, layer_head_heatmap, layer_head_size
from .base import PaperFigure, ReportedRun, RunStatistics
from .claim import FAILS, HOLDS, NA, Claim, head_name

#: claim 2: the leading head's p_repeat must be this multiple of the median head's, and this far above it
REPEAT_FACTOR, REPEAT_MARGIN = 2.0, 0.05


def fig06_repeat_probability(heads: pd.DataFrame, *, model: str) -> Figure:
    """Fig 6: per head, (a) share of high-similarity pairs that are two equal tokens, (b) the same within one sentence."""
    pr, prs = head_grid(heads, "p_repeat"), head_grid(heads, "p_repeat_same_sentence")
    L, H = pr.shape
    w, h = layer_head_size(L, H)
    fig, axes = figure(2, 1, (w, 2 * h + 0.8), suptitle=f"Fig 6 — repeated tokens among high-similarity pairs ({model})")
    vmax = float(np.nanmax(np.concatenate([pr.ravel(), prs.ravel(), [1e-9]])))
    layer_head_heatmap(axes[0, 0], pr, title="(a) P(pair is two equal tokens)", cmap=COUNT_CMAP, vmin=0, vmax=vmax,
                       cbar_label="probability")
    layer_head_heatmap(axes[1, 0], prs, title="(b) P(equal tokens) for pairs within one sentence", cmap=COUNT_CMAP,
                       vmin=0, vmax=vmax, cbar_label="probability")
    return fig


def caption(r: ReportedRun) -> str:
    return (f"Per head (rows: layers, columns: heads), (a) the share of its high-similarity pairs (normalised "
            f"similarity above {r.threshold:g}) whose two tokens are the same token id, over all {r.n_windows:,} "
            "windows; (b) the same share among the pairs that lie inside one sentence. Values are printed in each "
            "cell, grey cells have no pairs. Heads that detect repeated tokens stand out as bright cells; the paper "
            "finds that heads differ strongly, and that restricting to one sentence changes little.")


def claim_repeat_spread(heads: pd.DataFrame) -> Claim:
    claim = Claim(
        "c2_repeat_spread",
        "§3, Fig 6a: heads differ in how strongly they detect repeated tokens; some specialise in "
        "token repetitions, others in connections between different tokens.",
        "p_repeat (share of a head's high-similarity pairs whose two tokens are equal, heads.parquet) over all "
        "heads that have pairs: min, median, max, interquartile range, and the three leading heads.",
        "", f"holds if the leading head's p_repeat is at least {REPEAT_FACTOR:g}× the median head's and at least "
        f"{REPEAT_MARGIN:g} above it", NA)
    h = heads[np.isfinite(heads["p_repeat"])]
    if len(h) < 2:
        claim.value = "fewer than two heads have high-similarity pairs"
        return claim
    p = h["p_repeat"].to_numpy(dtype=np.float64)
    q25, med, q75 = np.percentile(p, [25, 50, 75])
    top = h.sort_values("p_repeat", ascending=False).head(3)
    leaders = ", ".join(f"{head_name(r.layer, r.head)} {r.p_repeat:.2f}" for r in top.itertuples())
    mx, mn = float(p.max()), float(p.min())
    claim.value = f"min {mn:.3f}, median {med:.3f}, max {mx:.3f} (IQR {q75 - q25:.3f}); leading: {leaders}"
    claim.verdict = HOLDS if (mx >= REPEAT_FACTOR * med and mx - med >= REPEAT_MARGIN) else FAILS
    claim.numbers = {"min": mn, "median": float(med), "max": mx, "q25": float(q25), "q75": float(q75),
                     "iqr": float(q75 - q25), "heads": int(len(p)),
                     "leaders": [head_name(r.layer, r.head) for r in top.itertuples()]}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_repeat_spread(r.heads)]


FIGURE = PaperFigure("fig06_repeat_probability", "Fig 6", "repeated tokens among high-similarity pairs",
                     lambda r: fig06_repeat_probability(r.heads, model=r.label), caption, claims)
