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
    from ..report.html import model_label

    return model_label(meta["model"])


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
    dark = img.norm(values)  # position on the colour map: light text on its dark ends
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            light = (dark[i, j] < 0.15 or dark[i, j] > 0.85) if center else dark[i, j] < 0.35
            ax.text(j, i, f"{v:+.3f}" if center else f"{v:.2g}", ha="center", va="center", fontsize=5,
                    color="white" if light else "black")


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


def _task_metrics(meta: dict, table: pd.DataFrame) -> list[str]:
    """The primary metric, then each other task's first metric that the table holds."""
    names = [metrics[0] for metrics in meta.get("task_metrics", [[meta["primary_metric"]]])]
    return [m for m in names if m in table.columns and table[m].notna().any()]


def groups_figure(meta: dict, groups: pd.DataFrame) -> Figure:
    summary, k = meta["summary"], meta["group_size"]
    metrics = _task_metrics(meta, groups)
    fig = Figure(figsize=(4.2 * len(metrics) + 2.5, 4.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(metrics), sharey=True))
    picked = groups[groups["kind"].isin(["layer", "role"])]
    labels = [f"{g.group} ({g.n_heads} heads)" if g.kind == "layer" else f"role: {g.group} ({g.n_heads})" for g in picked.itertuples()]
    colours = ["tab:blue" if kind == "layer" else "tab:red" for kind in picked["kind"]]
    at_k = pd.DataFrame(summary.get("at_group_size_all")
                        or {c: {meta["primary_metric"]: v} for c, v in summary["at_group_size"].items()}).T
    crit = [c for c in at_k.index if not c.startswith("role")]
    labels += [f"{c} ({k})" for c in crit]
    colours += ["tab:green"] * len(crit)
    y = np.arange(len(labels))
    for ax, metric in zip(axes, metrics):
        values = list(picked[metric]) + [at_k.loc[c, metric] if metric in at_k.columns else np.nan for c in crit]
        rand = groups.loc[(groups["kind"] == "random") & groups[metric].notna(), metric].to_numpy()
        if len(rand):
            lo, hi = np.percentile(rand, [2.5, 97.5])
            ax.axvspan(lo, hi, color="0.85", label=f"random groups of {k}: 95 % interval ({len(rand)} draws)")
            ax.scatter(rand, np.full(len(rand), -1.0), s=8, color="0.4", alpha=0.5, label="random draws")
        ax.axvline(summary["full"][metric], color="black", ls="--", lw=1, label="full model")
        ax.scatter(values, y, c=colours, zorder=3)
        ax.set_xlabel(metric, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(metric, fontsize=9)
    axes[0].set_yticks([-1, *y], ["random", *labels], fontsize=7)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="outside lower center", ncols=3)
    fig.suptitle(f"{_model(meta)}: scores with groups of heads removed ({meta['config']['mode']} ablation)", fontsize=10)
    return fig


def curves_figure(meta: dict, curves: pd.DataFrame) -> Figure:
    metric, n_total = meta["primary_metric"], meta["n_heads_total"]
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    rand = curves[(curves["criterion"] == "random") & curves[metric].notna()]
    if len(rand):
        band = rand.groupby("n_removed")[metric].agg(["min", "max", "median"])
        ax.fill_between(band.index, band["min"], band["max"], color="0.85", label=f"random orders ({rand['draw'].nunique()}): range")
        ax.plot(band.index, band["median"], color="0.5", lw=1, label="random orders: median")
    for name, curve in curves[curves["criterion"] != "random"].groupby("criterion", sort=False):
        ax.plot(curve["n_removed"], curve[metric], marker="o", ms=3, lw=1.2, label=name)
    ax.axhline(meta["summary"]["full"][metric], color="black", ls="--", lw=0.8, label="full model")
    ax.axvline(meta["group_size"], color="0.6", ls=":", lw=1)
    ax.set_xlabel(f"heads removed (of {n_total}); dotted: the group size {meta['group_size']}", fontsize=8)
    ax.set_ylabel(metric, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(f"{_model(meta)}: pruning curves — {metric} as each criterion removes heads in its order", fontsize=9)
    return fig


def draw_figures(out: Path, meta: dict, heads: pd.DataFrame, groups: pd.DataFrame, curves: pd.DataFrame) -> list[Path]:
    """Write the study's figures (PNG + SVG) into ``out``."""
    written = []
    written += save(heads_figure(meta, heads), out, "ablation_heads", dpi=150)
    written += save(groups_figure(meta, groups), out, "ablation_groups", dpi=150)
    written += save(curves_figure(meta, curves), out, "ablation_curves", dpi=150)
    return written
