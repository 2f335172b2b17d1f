"""Segments (character spans) and the conversion from unit-gap boundaries to segments.

A text is cut into *units* (sentences); a segmentation is a set of *gap indices*: gap ``i`` lies
between unit ``i`` and unit ``i + 1`` (``0 <= i < n_units - 1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..display import HtmlDisplay
from ..errors import require


@dataclass(frozen=True)
class Segment:
    """A character span ``text[start:end]`` of a document, with its text."""

    start: int
    end: int
    text: str


Unit = Segment


class Segmentation(list, HtmlDisplay):
    """The segments of ``text`` (a list of :class:`Segment`, concatenating to ``text``) with what
    chose them: the sentence ``unit_spans``, the boundary ``scores`` of each gap between units (topic
    level; ``None`` where no score was computed) and the ``level``. Displays in a notebook as the text
    with its boundaries and the signal; :meth:`to_html` writes that page."""

    def __init__(self, segments: Iterable[Segment], text: str, *, unit_spans: Sequence[tuple[int, int]] = (),
                 scores=None, level: str | None = None) -> None:
        super().__init__(segments)
        self.text = text
        self.unit_spans = [(int(a), int(b)) for a, b in unit_spans]
        self.scores = scores
        self.level = level

    def _html_body(self) -> tuple[str, str]:
        from ..views.html.summaries import segmentation_html

        return segmentation_html(self)
"""A unit of segmentation (a sentence); the same type as :class:`Segment`."""


def check_gaps(n_units: int, boundaries: Iterable[int]) -> list[int]:
    """Sorted unique gap indices, each validated to lie in ``[0, n_units - 2]``."""
    gaps = sorted({int(b) for b in boundaries})
    bad = [g for g in gaps if not 0 <= g < n_units - 1]
    require(
        not bad,
        f"boundary indices {bad[:5]} are outside the {max(n_units - 1, 0)} gaps between {n_units} units",
        "give gap indices i with 0 <= i < n_units - 1 (a boundary after unit i)",
    )
    return gaps


def boundaries_to_segments(
    text: str, unit_spans: Sequence[tuple[int, int] | Segment], boundaries: Iterable[int]
) -> list[Segment]:
    """Contiguous segments of ``text`` cut at the given unit gaps.

    Args:
        text: the document.
        unit_spans: ``(start, end)`` pairs or :class:`Segment` objects, in order, not overlapping;
            they need not be contiguous (trimmed sentences are fine).
        boundaries: gap indices; gap ``i`` cuts between unit ``i`` and unit ``i + 1``.

    Returns:
        Segments whose concatenation is exactly ``text``: the first starts at 0, the last ends at
        ``len(text)``, and the characters between two units (whitespace) go to the preceding
        segment, so each cut falls at the start of unit ``i + 1``. Empty text gives ``[]``; a text
        without units gives one segment.
    """
    spans = [(u.start, u.end) if isinstance(u, Segment) else (int(u[0]), int(u[1])) for u in unit_spans]
    previous_end = 0
    for start, end in spans:
        require(
            previous_end <= start <= end <= len(text),
            f"unit span ({start}, {end}) is out of order or outside the text of length {len(text)}",
            "pass non-overlapping spans sorted by start, within the text",
        )
        previous_end = end
    if not text:
        return []
    cuts = [spans[g + 1][0] for g in check_gaps(len(spans), boundaries)]
    edges = [0, *(c for c in cuts if 0 < c < len(text)), len(text)]
    return [Segment(a, b, text[a:b]) for a, b in zip(edges, edges[1:]) if b > a]
