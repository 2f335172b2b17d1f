"""Shared figure style: colour maps, token-labelled heatmaps, 1-based labels, saving as PNG + SVG."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in SVG: smaller, searchable
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

ATTENTION_CMAP = "Blues"
SIMILARITY_CMAP = "magma"
COUNT_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"
ONE_BASED = "layers and heads numbered from 1"


def token_labels(tokens: list[str], valid: np.ndarray | None = None) -> list[str]:
    """``"i:token"`` labels for the valid positions (padding omitted)."""
    n = len(tokens) if valid is None else int(np.asarray(valid).sum())
    return [f"{i}:{tok}" for i, tok in enumerate(tokens[:n])]


def heatmap(ax: Axes, matrix: np.ndarray, *, title: str, cmap: str, labels: list[str] | None = None,
            cbar_label: str = "", vmin: float | None = None, vmax: float | None = None,
            xlabel: str = "key position j", ylabel: str = "query position i",
            xticks: bool = True, yticks: bool = True, max_ticks: int | None = None) -> None:
    """Draw a square matrix with a colour bar and (optionally) token tick labels.

    ``xticks``/``yticks`` False leave the token labels of that axis to a neighbouring panel
    with the same tokens (labels are the slow part of drawing, and repeating them adds nothing).
    ``max_ticks``: label at most that many evenly spaced rows/columns (a binned overview of a long
    window), in a readable size.
    """
    img = ax.imshow(matrix, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="equal")
    bar = ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.02)
    bar.set_label(cbar_label, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    ax.set_title(title, fontsize=9)
    if labels:
        n = len(labels)
        size = max(2.2, min(7.0, 300.0 / max(n, 1)))
        at = list(range(n))
        if max_ticks is not None and n > max_ticks:
            at = sorted({int(round(x)) for x in np.linspace(0, n - 1, max_ticks)})
            size = 7.0
        shown = [labels[k] for k in at]
        if xticks:
            ax.set_xticks(at, shown, rotation=90, fontsize=size)
        else:
            ax.set_xticks([])
        if yticks:
            ax.set_yticks(at, shown, fontsize=size)
        else:
            ax.set_yticks([])
        ax.tick_params(length=1.5, pad=1)
    else:
        ax.tick_params(labelsize=7)
    ax.set_xlabel(xlabel if xticks or not labels else "", fontsize=8)
    ax.set_ylabel(ylabel if yticks or not labels else "", fontsize=8)


def new_figure(nrows: int, ncols: int, *, panel: float = 4.5, suptitle: str = "") -> tuple[Figure, np.ndarray]:
    """A grid of panels; the suptitle states the numbering convention."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel * ncols, panel * nrows), squeeze=False,
                             layout="constrained")
    if suptitle:
        fig.suptitle(f"{suptitle}\n({ONE_BASED})", fontsize=11)
    return fig, axes


def save(fig: Figure, out_dir: str | os.PathLike, stem: str, *, dpi: int = 200) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` into ``out_dir`` and close the figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=dpi)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths
