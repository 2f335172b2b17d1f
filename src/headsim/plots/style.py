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
#: widest figure (inches) the report shows at its natural size: its column is 1,152 CSS px, 12 in at 96 px an inch
PAGE_WIDTH = 11.5
#: smallest annotation (points) drawn in a heatmap cell; where the cells are smaller the values are left out
MIN_ANNOTATION_PT = 6.0
#: a layer × head heatmap's axes are tagged with this gid (``cells:LxH``), read by :func:`smallest_cell`
CELLS_GID = "cells"


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
    """Width and height of one layer × head heatmap panel: cells of 0.62 in, narrower as far as the
    heads need to fit :data:`PAGE_WIDTH` (0.145 in at 64 heads), rows
    (three quarters as tall as wide, 0.16 to 0.42 in)."""
    cell = min(0.62, (PAGE_WIDTH - 2.2) / max(H, 1))
    return max(6.5, 2.2 + cell * H), 1.2 + min(0.42, max(0.16, 0.75 * cell)) * L


def page_columns(width: float, n: int) -> int:
    """How many panels of ``width`` inches fit side by side in :data:`PAGE_WIDTH` (1 to ``n``)."""
    return max(1, min(n, int(PAGE_WIDTH // max(width, 1e-9))))


def thinned_ticks(n: int, cell_in: float, across: bool = True, fontsize: float = 7.0) -> list[int]:
    """0-based positions to label on an axis of ``n`` cells of ``cell_in`` inches: every one where the
    1-based numbers fit (``across``: side by side, as on an x axis; else stacked), else every 2nd, 4th,
    5th, 10th … (the first always)."""
    label_in = ((len(str(n)) * 0.62 if across else 1.3) * fontsize + 3.0) / 72
    for step in (1, 2, 4, 5, 10, 20, 25, 50, 100):
        if step * cell_in >= label_in:
            break
    return list(range(0, n, step))


def legend_columns(labels: list[str], width_in: float, fontsize: float = 7.0) -> int:
    """Columns of a legend of ``labels`` that fit ``width_in`` inches (a line handle and padding each)."""
    entry = max((len(t) for t in labels), default=1) * 0.56 * fontsize / 72 + 0.5
    return max(1, int(width_in // entry))


def legend_below(ax: Axes, width_in: float, fontsize: float = 7.0) -> None:
    """``ax``'s legend under it, outside its data, in as many columns as fit ``width_in`` inches."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=fontsize, frameon=False,
              ncol=legend_columns(labels, width_in, fontsize), borderaxespad=0.0)


def tag_cells(ax: Axes, rows: int, cols: int) -> None:
    """Mark ``ax`` as a grid of ``rows`` × ``cols`` cells for :func:`smallest_cell`."""
    ax.set_gid(f"{CELLS_GID}:{rows}x{cols}")


def smallest_cell(fig: Figure) -> float | None:
    """The smallest side (inches) of a cell of the tagged grids (:func:`tag_cells`) of a laid-out ``fig``;
    ``None`` when it has none."""
    sides = []
    for ax in fig.axes:
        gid = ax.get_gid() or ""
        if gid.startswith(CELLS_GID + ":"):
            rows, cols = (int(x) for x in gid.split(":")[1].split("x"))
            box = ax.get_window_extent()  # display pixels
            sides += [box.width / fig.dpi / cols, box.height / fig.dpi / rows]
    return min(sides) if sides else None


def _axes_inches(ax: Axes) -> tuple[float, float]:
    """Width and height (inches) of the data area ``ax`` will get, estimated from its grid position before
    the layout runs (colour bar, tick labels and title taken off)."""
    spec = ax.get_subplotspec()
    gs = spec.get_gridspec()
    owner = ax.get_figure(root=False)  # a subfigure's own size
    fw, fh = owner.bbox.width / owner.dpi, owner.bbox.height / owner.dpi
    wr = gs.get_width_ratios() or [1] * gs.ncols
    hr = gs.get_height_ratios() or [1] * gs.nrows
    w = fw * sum(wr[c] for c in range(spec.colspan.start, spec.colspan.stop)) / sum(wr)
    h = (fh - 0.8) * sum(hr[r] for r in range(spec.rowspan.start, spec.rowspan.stop)) / sum(hr)
    return max(w - 2.0, 0.1), max(h - 0.9, 0.1)


def annotation_size(texts: list[str], cell_w: float, cell_h: float) -> float | None:
    """Font size (points) at which the longest of ``texts`` fits a cell of ``cell_w`` × ``cell_h``
    inches (at most 8); ``None`` below :data:`MIN_ANNOTATION_PT` (left out: not legible)."""
    chars = max((len(t) for t in texts), default=1)
    size = min(8.0, 0.85 * cell_w * 72 / (0.62 * chars), 0.6 * cell_h * 72)
    return size if size >= MIN_ANNOTATION_PT else None


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
    symmetric around that value. Values are printed only where they are legible
    (:func:`annotation_size`), head and layer numbers thinned where they would run together.
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
    cell_w, cell_h = (a / b for a, b in zip(_axes_inches(ax), (H, L)))
    xs, ys = thinned_ticks(H, cell_w), thinned_ticks(L, cell_h, across=False)
    ax.set_xticks(xs, [str(h + 1) for h in xs], fontsize=7)
    ax.set_yticks(ys, [str(layer + 1) for layer in ys], fontsize=7)
    if len(xs) < H or len(ys) < L:
        ax.set_xticks(range(H), minor=True)
        ax.set_yticks(range(L), minor=True)
        ax.tick_params(which="minor", length=1.5)
    ax.set_xlabel("head", fontsize=8)
    ax.set_ylabel("layer", fontsize=8)
    tag_cells(ax, L, H)
    texts = [["–" if not np.isfinite(x) else _format(fmt, x) for x in row] for row in v]
    size = annotation_size([t for row in texts for t in row], cell_w, cell_h) if annotate else None
    note = "  (grey –: no pairs, undefined)" if np.isnan(v).any() else ""
    ax.set_title(title + (note if size is not None else note.replace(" –", "")), fontsize=9)
    if size is not None:
        for li in range(L):
            for hi in range(H):
                x = v[li, hi]
                colour = "black" if not np.isfinite(x) else _text_colour(cm, norm, x)
                ax.text(hi, li, texts[li][hi], ha="center", va="center", fontsize=size, color=colour)


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


def fix_layout(fig: Figure) -> Figure:
    """Run ``fig``'s layout once and keep it (saving it twice then costs one layout); nothing is
    rasterised for it (the saved files are the same, pixel for pixel, as after a full draw)."""
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    return fig


def save_once(fig: Figure, out: str | os.PathLike, stem: str, *, dpi: int = 200) -> list[Path]:
    """:func:`save` with the layout computed once for both PNG and SVG."""
    return save(fix_layout(fig), out, stem, dpi=dpi)
