"""What a report figure is: :class:`PaperFigure` (one per module of :mod:`headsim.figures`), the run it
reads and the layer choices several figures share.

A figure module ``figNN.py`` holds one figure of the paper whole: the data it selects from a run, its
plot (a function of arrays and tables returning a matplotlib ``Figure``), its caption and the claims
of the paper it checks; at its end a ``FIGURE = PaperFigure(...)`` ties them together. The report
(:mod:`headsim.report.contents`) only lists the ``FIGURE`` objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from ..errors import require
from ..plots.style import ONE_BASED, fix_layout, save, smallest_cell
from .claim import Claim


class RunStatistics(Protocol):
    """What claims read: a finished run's statistics, its tables and the token shares
    (:func:`headsim.report.claims.token_shares`)."""

    dataset: xr.Dataset
    heads: pd.DataFrame
    layers: pd.DataFrame
    shares: dict


class ReportedRun(RunStatistics, Protocol):
    """What plots and captions read besides: :class:`headsim.report.reading.ReportRun`."""

    meta: dict
    label: str

    @property
    def n_windows(self) -> int: ...

    @property
    def threshold(self) -> float: ...

    def sentences_per_window(self) -> float: ...


@dataclass(frozen=True)
class Statistics:
    """The four things claims read, without a run directory (:func:`headsim.report.compute_claims`)."""

    dataset: xr.Dataset
    heads: pd.DataFrame
    layers: pd.DataFrame
    shares: dict


def no_claims(run: RunStatistics) -> list[Claim]:
    return []


@dataclass(frozen=True)
class PaperFigure:
    """One figure of the report.

    Attributes:
        stem: file name without suffix (``fig02_summed_attention`` → ``.png`` and ``.svg``).
        label: how the page names it ("Fig 2", "§3").
        title: a few words under the label.
        plot: the run → a matplotlib ``Figure`` (closed by :meth:`draw`).
        caption: the run → the caption: what is drawn, from which statistic, and what the paper found.
        claims: the run's statistics → the paper's claims this figure shows, checked
            (:class:`~headsim.figures.claim.Claim`; most figures check none).
    """

    stem: str
    label: str
    title: str
    plot: Callable[[ReportedRun], Figure]
    caption: Callable[[ReportedRun], str]
    claims: Callable[[RunStatistics], list[Claim]] = no_claims

    def draw(self, run: ReportedRun, out: str | os.PathLike, *, dpi: int = 200) -> Drawn:
        """Plot the run and write ``out/stem.png`` and ``out/stem.svg`` (layout computed once for both)."""
        fig = fix_layout(self.plot(run))
        width, cell = float(fig.get_size_inches()[0]), smallest_cell(fig)
        return Drawn(save(fig, out, self.stem, dpi=dpi), width, cell)


@dataclass(frozen=True)
class Drawn:
    """A drawn figure: its files (PNG, SVG), its width and the smallest side of a cell of its layer × head
    grids (inches; ``None`` without one), for the page to show it at a size where the cells read."""

    paths: list[Path]
    width_in: float
    cell_in: float | None


@dataclass(frozen=True)
class ExampleFigure:
    """A per-text figure of the report's example section (drawn by
    :meth:`headsim.inspection.Inspection.write` into ``stem.png``/``.svg``).

    ``caption`` reads the inspection's settings (its ``inspect.json``: ``layer``, ``head``,
    ``threshold``, ``figure_layers``, ``separator_layer``, ``valid_tokens`` …).
    """

    stem: str
    label: str
    title: str
    caption: Callable[[dict], str]


# ---------------------------------------------------------------------------------------------
# Data selection shared by several figures
# ---------------------------------------------------------------------------------------------


def middle_layer(n_layers: int) -> int:
    """1-based middle layer: 6 of 12 (the paper's Fig 12/13 middle panel), 3 of 6."""
    return (n_layers - 1) // 2 + 1


def first_middle_last(n_layers: int) -> list[int]:
    """1-based first, middle and last layer (the paper's layers 1, 6, 11 of its 12)."""
    return sorted({1, middle_layer(n_layers), n_layers})


def layer_arg(ds: xr.Dataset, layer: int | None) -> int:
    """A 1-based layer argument checked against the run (default: the last layer)."""
    n = ds.sizes["layer"]
    layer = n if layer is None else int(layer)
    require(1 <= layer <= n, f"layer {layer} is out of range", f"this run has layers 1..{n} (numbered from 1)")
    return layer


def n_windows(ds: xr.Dataset) -> int:
    """Windows the statistics were summed over (0 when the Dataset does not say)."""
    return int(ds["windows"].values) if "windows" in ds else 0


def bin_width(ds: xr.Dataset) -> float | None:
    """Tokens per position bin of a binned run (windows longer than the resolution, where ``query``,
    ``key`` and ``distance`` are bins of positions); ``None`` for a run kept per position."""
    if not int(ds.attrs.get("position_binned", 0)):
        return None
    return float(ds.attrs["seq_len"]) / ds.sizes["query"]


def label_positions(fig: Figure, ds: xr.Dataset, ticks: int = 6) -> None:
    """On a binned run, relabel the position axes of ``fig``'s matrix panels with token positions (each
    bin's first position) and say the bin width in the title; nothing otherwise."""
    w = bin_width(ds)
    if w is None:
        return
    starts = ds["query"].values
    at = np.unique(np.linspace(0, len(starts) - 1, ticks).round().astype(int))
    for ax in fig.axes:
        if not ax.images:
            continue
        ax.set_xticks(at, [str(int(starts[k])) for k in at], fontsize=7)
        ax.set_yticks(at, [str(int(starts[k])) for k in at], fontsize=7)
    if fig._suptitle is not None:
        fig._suptitle.set_text(fig._suptitle.get_text().replace(f"({ONE_BASED})", f"({ONE_BASED}; token positions in "
                                                                 f"bins of {w:g})"))


def layers_text(layers: list[int]) -> str:
    return ", ".join(str(x) for x in layers)
