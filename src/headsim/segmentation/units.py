"""Sentence units with exact character spans (pySBD, paragraph by paragraph).

Every newline run ends a sentence. Long paragraphs are cut into pieces of at most
:data:`headsim.sentences.MAX_BLOCK` characters before pySBD sees them (:func:`headsim.sentences.pieces`),
which keeps a 10 MB text linear in time and bounded in working memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from ..sentences import pieces, pysbd_starts
from .types import Segment

_NEWLINES = re.compile(r"\n\s*")
_NON_SPACE = re.compile(r"\S")


def _blocks(text: str, breaks: Iterable[int]) -> Iterator[tuple[int, int]]:
    """Trimmed ``(start, end)`` blocks between newline runs and forced breaks."""
    edges = sorted({0, len(text), *(b for b in breaks if 0 < b < len(text))})
    for a, b in zip(edges, edges[1:]):
        cursor = a
        for m in _NEWLINES.finditer(text, a, b):
            yield cursor, m.start()
            cursor = m.end()
        yield cursor, b


def _sentence_starts(text: str, breaks: Iterable[int]) -> Iterator[int]:
    for a, b in _blocks(text, breaks):
        first = _NON_SPACE.search(text, a, b)
        if first is None:
            continue
        a = first.start()
        b = len(text[a:b].rstrip()) + a
        for p, q in pieces(text, a, b):
            block = text[p:q]
            lead = len(block) - len(block.lstrip())
            yield p + lead
            for s in pysbd_starts(block.strip()):
                if s > 0:
                    yield p + lead + s


def iter_sentence_units(text: str, breaks: Iterable[int] = ()) -> Iterator[Segment]:
    """Stream the units of :func:`sentence_units` (same arguments, same result)."""
    previous: int | None = None
    for s in _sentence_starts(text, breaks):
        if previous is None:
            previous = 0
        elif s > previous:
            yield Segment(previous, s, text[previous:s])
            previous = s
    if previous is not None:
        yield Segment(previous, len(text), text[previous:])


def sentence_units(text: str, breaks: Iterable[int] = ()) -> list[Segment]:
    """Sentences of ``text`` as contiguous character spans that cover it exactly.

    Args:
        text: any text; newline runs always end a sentence.
        breaks: character offsets where a unit must start (for example section starts); each is
            moved forward past whitespace.

    Returns:
        Units in order: the first starts at 0, each ends where the next starts, the last ends at
        ``len(text)``; the whitespace after a sentence belongs to it (so does leading whitespace
        of the text to the first unit). A text with no non-space character has no units.
    """
    return list(iter_sentence_units(text, breaks))
