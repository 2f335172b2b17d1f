"""The figure of several runs (``headsim compare``): per-layer statistics on shared axes. The figures of
one run live in :mod:`headsim.figures`, one module each."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .style import figure


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
