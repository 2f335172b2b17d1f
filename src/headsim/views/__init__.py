"""Per-text views of one window (paper Figs 4, 5 and 9): pure array functions (:mod:`.arrays`) and
:class:`TextView`, one window's tensors built once for ``inspect`` and the explorer (:mod:`.text_view`)."""

from __future__ import annotations

from .arrays import (
    PAIR_COLUMNS,
    block_average,
    block_ids,
    causal_chance,
    column_scores,
    framing_positions,
    pair_table,
    separator_columns,
    separator_lines,
    separators_from_scores,
)
from .text_view import TextView, check_window, cut_text, text_view, window_focus, window_view

__all__ = [
    "PAIR_COLUMNS",
    "TextView",
    "block_average",
    "block_ids",
    "causal_chance",
    "check_window",
    "column_scores",
    "cut_text",
    "framing_positions",
    "pair_table",
    "separator_columns",
    "separator_lines",
    "separators_from_scores",
    "text_view",
    "window_focus",
    "window_view",
]
