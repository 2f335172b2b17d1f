"""The report's list of corpus figures, in page order. Adding a figure: its module in
:mod:`headsim.figures` plus one line here (docs/adding.md)."""

from __future__ import annotations

from ..figures import fig02, fig03, fig06, fig07, fig08, fig10, fig11, fig12, fig13, focus, similarity_values
from ..figures.base import PaperFigure

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
