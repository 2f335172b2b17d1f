"""§2 (Fig 4 over the corpus): where attention goes — [CLS], [SEP], punctuation, the previous and the
next token; claim 1 (the last layers attend to sentence separators)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from ..plots.style import ATTENTION_CMAP, head_grid, layer_head_heatmap, layer_head_size, page_columns, thinned_ticks, titled
from .base import PaperFigure, ReportedRun, RunStatistics
from .claim import FAILS, HOLDS, NA, Claim, column, finite

TARGET_LABELS = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation", "prev": "previous token (i−1)",
                 "next": "next token (i+1)"}
#: claim 1: attention on separators must exceed this multiple of their share of tokens
SEPARATOR_FACTOR = 2.0


def attention_focus(heads: pd.DataFrame, *, model: str, targets: tuple[str, ...] = ("cls", "sep", "punct", "prev", "next"),
                    shares: dict | None = None) -> Figure:
    """Mean attention each query gives to [CLS], [SEP], punctuation, the previous and the next token, per head.

    ``shares`` (``{"cls": …, "sep": …, "punct": …}``, from :func:`headsim.report.claims.token_shares`)
    draws each kind's share of the tokens, i.e. what uniform attention would give, as dotted lines.
    """
    grids = {t: head_grid(heads, f"attn_{t}") for t in targets if f"attn_{t}" in heads}
    L, H = next(iter(grids.values())).shape
    w, h = layer_head_size(L, H)
    ncols = page_columns(w, 2)  # one column where two heatmaps do not fit the page
    nrows = math.ceil((len(grids) + 1) / ncols)
    rows = [h + 0.3] * nrows
    if ncols == 1:
        rows[-1] = 3.6  # the per-layer lines alone in the last row
    fig = titled((ncols * w, sum(rows)), f"Attention focus: mean attention per query on special tokens and neighbours ({model})")
    gs = fig.add_gridspec(nrows, ncols, height_ratios=rows)
    flat = [fig.add_subplot(gs[k // ncols, k % ncols]) for k in range(nrows * ncols)]
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
    ax.set_xticks(x[thinned_ticks(L, 0.8 * ncols * w / max(L, 1))])
    ax.set_xlabel("layer", fontsize=8)
    ax.set_ylabel("mean over the layer's heads", fontsize=8)
    ax.set_title("per layer, mean over heads", fontsize=9)
    ax.tick_params(labelsize=7)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=7, frameon=False)
    for extra in flat[len(grids) + 1:]:
        extra.axis("off")
    return fig


def caption(r: ReportedRun) -> str:
    return ("Mean attention a query gives to [CLS], [SEP], punctuation tokens, the previous token and the next "
            "token, per head (heatmaps) and per layer averaged over heads (bottom right, where dotted lines give "
            "the share of [CLS], [SEP] and punctuation among the tokens, i.e. what uniform attention would give; "
            f"{r.shares.get('method', '')}). The paper: attention goes to [CLS] in the first layers and to sentence "
            "separators in the last.")


def claim_separators(ds: xr.Dataset, heads: pd.DataFrame, shares: dict) -> Claim:
    L = int(ds.sizes["layer"])
    last = heads[heads["layer"] == L]

    def mean_of(target: str) -> float:
        values = column(last, f"attn_{target}").to_numpy(dtype=np.float64) if len(last) else np.array([])
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    sep, punct, cls = mean_of("sep"), mean_of("punct"), mean_of("cls")
    with_punct = shares.get("punct") is not None and finite(shares.get("punct"))
    mass = sep + punct if with_punct else sep
    share = (shares["sep"] + shares["punct"]) if with_punct else shares.get("sep", math.nan)
    targets = "[SEP] + punctuation" if with_punct else "[SEP]"
    claim = Claim(
        "c1_separators",
        "§2, Fig 4 and abstract: in the last layers, attention concentrates on sentence separators "
        "([SEP] and punctuation such as '.' and ',').",
        f"Layer {L} (last): attention mass each query gives to {targets}, averaged over queries and heads "
        "(heads.parquet attn_sep + attn_punct = attn_focus / queries), against those tokens' share of the valid "
        f"tokens ({shares.get('method', '')}), i.e. what uniform attention would give. [CLS] reported beside.",
        "", f"holds if the attention mass on {targets} is at least {SEPARATOR_FACTOR:g}× their share of tokens",
        NA,
    )
    if not (finite(mass) and finite(share) and share > 0):
        claim.value = "no attention statistics or no token counts in this run"
        return claim
    r = mass / share
    cls_share = shares.get("cls", math.nan)
    claim.value = (f"{mass:.3f} of the attention vs {share:.3f} of the tokens ({r:.1f}×); "
                   f"[CLS]: {cls:.3f} vs {cls_share:.3f}")
    claim.verdict = HOLDS if r >= SEPARATOR_FACTOR else FAILS
    claim.numbers = {"layer": L, "mass": mass, "share": share, "ratio": r, "attn_sep": sep, "attn_punct": punct,
                     "attn_cls": cls, "share_sep": shares.get("sep"), "share_punct": shares.get("punct"),
                     "share_cls": cls_share, "punctuation_counted": with_punct}
    return claim


def claims(r: RunStatistics) -> list[Claim]:
    return [claim_separators(r.dataset, r.heads, r.shares)]


FIGURE = PaperFigure("attention_focus", "§2, Fig 4", "where attention goes",
                     lambda r: attention_focus(r.heads, model=r.label, shares=r.shares), caption, claims)
