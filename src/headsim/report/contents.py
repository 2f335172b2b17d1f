"""The report's lists of figures, in page order: the corpus figures of a run and the per-text figures
of its example. Adding a figure: its module in :mod:`headsim.figures` plus one line here
(docs/adding.md)."""

from __future__ import annotations

from ..figures import (fig01, fig02, fig03, fig04, fig05, fig06, fig07, fig08, fig09, fig10, fig11, fig12, fig13, focus,
                       similarity_values)
from ..figures.base import ExampleFigure, PaperFigure

FIGURES: list[PaperFigure] = [
    fig02.FIGURE,
    fig03.FIGURE,
    fig06.FIGURE,
    fig07.FIGURE,
    fig08.FIGURE,
    fig10.FIGURE,
    fig11.FIGURE,
    fig12.FIGURE,
    fig13.FIGURE,
    similarity_values.FIGURE,
    focus.FIGURE,
]

EXAMPLE_FIGURES: list[ExampleFigure] = [
    fig04.EXAMPLE,
    fig05.EXAMPLE,
    fig09.EXAMPLE,
    fig01.EXAMPLE,
    fig12.EXAMPLE,
]
