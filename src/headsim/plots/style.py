"""Shared figure style, the one place for it: colour maps, titled grids, token-labelled and layer × head
heatmaps, layer colours, 1-based labels, saving as PNG + SVG."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in SVG: smaller, searchable
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import colors  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

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


def _suptitle(fig: Figure, text: str, width_in: float) -> None:
    """Title + numbering note, wrapped to the figure's width (about 11 characters per inch at 11 pt)."""
    lines = textwrap.wrap(text, width=max(30, int(width_in * 11)))
    fig.suptitle("\n".join(lines + [f"({ONE_BASED})"]), fontsize=11)


def figure(nrows: int, ncols: int, size: tuple[float, float], *, suptitle: str, **kwargs) -> tuple[Figure, np.ndarray]:
    """A constrained-layout grid whose title states the model and the 1-based numbering."""
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False, layout="constrained", **kwargs)
    _suptitle(fig, suptitle, size[0])
    return fig, axes


def titled(size: tuple[float, float], suptitle: str) -> Figure:
    """An empty constrained-layout figure (for a gridspec) titled as :func:`figure` titles its grid."""
    fig = plt.figure(figsize=size, layout="constrained")
    _suptitle(fig, suptitle, size[0])
    return fig


def square_panels(nrows: int, ncols: int, side: float = 3.6) -> tuple[float, float]:
    """Figure size for a grid of square heatmaps with colour bars, labels and a two-line title."""
    return ncols * (side + 1.9), nrows * (side + 1.0) + 0.8


def layer_head_size(L: int, H: int) -> tuple[float, float]:
    """Width and height of one layer × head heatmap panel."""
    return max(6.5, 2.2 + 0.62 * H), 1.2 + 0.42 * L


def layer_colours(n: int) -> list:
    """One colour per layer, first to last (the count colour map, its brightest end left out)."""
    cmap = plt.get_cmap(COUNT_CMAP)
    return [cmap(x) for x in np.linspace(0.0, 0.85, n)]


def head_grid(heads: pd.DataFrame, column: str) -> np.ndarray:
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


def outline_rows(ax: Axes, rows: list[int], width: int, colour: str = "black") -> None:
    """Outline 0-based ``rows`` of a layer × head heatmap."""
    for r in rows:
        ax.add_patch(Rectangle((-0.5, r - 0.5), width, 1, fill=False, edgecolor=colour, linewidth=1.5))


def save(fig: Figure, out_dir: str | os.PathLike, stem: str, *, dpi: int = 200) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` into ``out_dir`` and close the figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=dpi)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


def save_once(fig: Figure, out: str | os.PathLike, stem: str, *, dpi: int = 200) -> list[Path]:
    """:func:`save` with the layout computed once for both PNG and SVG."""
    fig.canvas.draw()
    fig.set_layout_engine("none")
    return save(fig, out, stem, dpi=dpi)
