"""Figures of an ablation study: per-head maps, groups against random, pruning curves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..plots.style import save

FIGURES = {"ablation_heads": "per-head importance", "ablation_groups": "groups against random groups",
           "ablation_curves": "pruning curves"}


def _model(meta: dict) -> str:
    return str(meta["model"].get("name", "model"))


def _grid(ax, values: np.ndarray, title: str, cmap: str, center: bool, cbar: str) -> None:
    L, H = values.shape
    lim = np.nanmax(np.abs(values)) if center else None
    img = ax.imshow(values, cmap=cmap, vmin=-lim if center else None, vmax=lim, aspect="auto")
    ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.02).set_label(cbar, fontsize=8)
    ax.set_xticks(range(H), [str(h + 1) for h in range(H)], fontsize=7)
    ax.set_yticks(range(L), [str(layer + 1) for layer in range(L)], fontsize=7)
    ax.set_xlabel("head", fontsize=8)
    ax.set_ylabel("layer", fontsize=8)
    ax.set_title(title, fontsize=9)
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.3f}" if abs(v) < 1 else f"{v:.1f}", ha="center", va="center", fontsize=5)


def heads_figure(meta: dict, heads: pd.DataFrame) -> Figure:
    L, H, metric = meta["model"]["n_layers"], meta["model"]["n_heads"], meta["primary_metric"]
    fig = Figure(figsize=(12, 0.45 * L + 2.2), layout="constrained")
    axes = fig.subplots(1, 2)
    delta = heads[f"delta_{metric}"].to_numpy().reshape(L, H)
    _grid(axes[0], delta, f"{metric} change when the head alone is removed (full: "
          f"{meta['summary']['full'][metric]:.3f})", "RdBu", True, "Δ score")
    _grid(axes[1], heads["gradient_importance"].to_numpy().reshape(L, H),
          f"gradient importance E|∂L/∂ξ| ({meta['gradient_task']} loss)", "viridis", False, "importance")
    fig.suptitle(f"{_model(meta)}: which heads matter ({meta['config']['mode']} ablation; layers and heads from 1)", fontsize=10)
    return fig


def groups_figure(meta: dict, groups: pd.DataFrame) -> Figure:
    metric, summary, k = meta["primary_metric"], meta["summary"], meta["group_size"]
    fig = Figure(figsize=(9, 4.5), layout="constrained")
    ax = fig.subplots()
    rand = groups.loc[groups["kind"] == "random", metric].to_numpy()
    rows = [(f"{g.group} ({g.n_heads} heads)", getattr(g, metric), "tab:blue")
            for g in groups[groups["kind"] == "layer"].itertuples()]
    rows += [(f"role: {g.group} ({g.n_heads})", getattr(g, metric), "tab:red") for g in groups[groups["kind"] == "role"].itertuples()]
    rows += [(f"{c} ({k})", v, "tab:green") for c, v in summary["at_group_size"].items() if not c.startswith("role")]
    y = np.arange(len(rows))
    ax.axvspan(summary["random"]["p2.5"], summary["random"]["p97.5"], color="0.85",
               label=f"random groups of {k}: 95 % interval ({len(rand)} draws)")
    ax.scatter(rand, np.full(len(rand), -1.0), s=8, color="0.4", alpha=0.5, label="random draws (bottom row)")
    ax.axvline(summary["full"][metric], color="black", ls="--", lw=1, label="full model")
    ax.scatter([r[1] for r in rows], y, c=[r[2] for r in rows], zorder=3)
    ax.set_yticks([-1, *y], ["random", *[r[0] for r in rows]], fontsize=7)
    ax.set_xlabel(metric, fontsize=8)
    ax.legend(fontsize=7, loc="best")
    ax.set_title(f"{_model(meta)}: {metric} with groups of heads removed", fontsize=10)
    return fig


def curves_figure(meta: dict, curves: pd.DataFrame) -> Figure:
    metrics = [m for m in meta["metrics"] if m in curves.columns and curves[m].notna().any()]
    primaries = [m for m in metrics if m.endswith(("spearman", "accuracy", "cosine"))] or metrics
    fig = Figure(figsize=(5 * len(primaries), 4.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(primaries)))
    n_total = meta["n_heads_total"]
    for ax, metric in zip(axes, primaries):
        rand = curves[(curves["criterion"] == "random") & curves[metric].notna()]
        if len(rand):
            band = rand.groupby("n_removed")[metric].agg(["min", "max", "median"])
            ax.fill_between(band.index, band["min"], band["max"], color="0.85", label=f"random orders ({rand['draw'].nunique()}): range")
            ax.plot(band.index, band["median"], color="0.5", lw=1, label="random: median")
        for name, curve in curves[curves["criterion"] != "random"].groupby("criterion", sort=False):
            ax.plot(curve["n_removed"], curve[metric], marker="o", ms=3, lw=1.2, label=name)
        ax.axvline(meta["group_size"], color="0.6", ls=":", lw=1)
        ax.set_xlabel(f"heads removed (of {n_total})", fontsize=8)
        ax.set_ylabel(metric, fontsize=8)
        ax.set_title(metric, fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=6, loc="lower left")
    fig.suptitle(f"{_model(meta)}: pruning curves (each criterion removes heads in its own order)", fontsize=10)
    return fig


def draw_figures(out: Path, meta: dict, heads: pd.DataFrame, groups: pd.DataFrame, curves: pd.DataFrame) -> list[Path]:
    """Write the study's figures (PNG + SVG) into ``out``."""
    written = []
    written += save(heads_figure(meta, heads), out, "ablation_heads", dpi=150)
    written += save(groups_figure(meta, groups), out, "ablation_groups", dpi=150)
    written += save(curves_figure(meta, curves), out, "ablation_curves", dpi=150)
    return written
