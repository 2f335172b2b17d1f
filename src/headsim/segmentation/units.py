"""Sentence units with exact character spans (pySBD, paragraph by paragraph).

Every newline run ends a sentence. Paragraphs longer than :data:`MAX_BLOCK` characters are cut
first at the last sentence-final punctuation (else whitespace) before the limit, because pySBD's
time grows faster than linearly with the length of what it is given; this keeps a 10 MB text
linear in time and bounded in working memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from .types import Segment

MAX_BLOCK = 2000
_NEWLINES = re.compile(r"\n\s*")
_NON_SPACE = re.compile(r"\S")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")


@lru_cache(maxsize=1)
def _pysbd():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False, char_span=False)


def _pieces(text: str, start: int, end: int) -> Iterator[int]:
    """Start offsets of the pieces (at most MAX_BLOCK long) of the block ``text[start:end]``."""
    while end - start > MAX_BLOCK:
        window = text[start : start + MAX_BLOCK]
        cut = max((m.end() for m in _SENTENCE_END.finditer(window)), default=0)
        if cut <= 0:
            cut = window.rfind(" ") + 1 or MAX_BLOCK
        yield start
        start += cut
    yield start


def _block_starts(block: str) -> Iterator[int]:
    """Sentence start offsets inside one whitespace-trimmed block, located by search."""
    cursor = 0
    for sentence in _pysbd().segment(block):
        piece = sentence.strip()
        if not piece:
            continue
        found = block.find(piece, cursor)
        if found >= 0:  # pySBD never edits text with clean=False; a miss keeps the cursor
            yield found
            cursor = found + len(piece)


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
        piece_starts = list(_pieces(text, a, b))
        for p, q in zip(piece_starts, [*piece_starts[1:], b]):
            block = text[p:q]
            lead = len(block) - len(block.lstrip())
            yield p + lead
            for s in _block_starts(block.strip()):
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
