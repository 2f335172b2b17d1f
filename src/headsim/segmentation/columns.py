"""Sentence level: tokens whose attention column stands out end a sentence (paper, Fig 5)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import require
from .features import TokenBlock

__all__ = ["CANDIDATES", "newline_cuts", "sentence_cuts"]

_NEWLINE_RUN = re.compile(r"\n\s*")
_CLOSERS = set("\"'”’)]}»")
_NON_SPACE = re.compile(r"\S")
_PUNCT_CACHE: dict[tuple[int, str], tuple[Any, np.ndarray]] = {}


CANDIDATES = ("terminal", "punctuation", "any")
_TERMINAL = set(".!?…。！？")


def _candidates(tokenizer, kind: str) -> np.ndarray:
    """Boolean lookup over the vocabulary: tokens that may end a sentence.

    ``"punctuation"``: punctuation-only tokens; ``"terminal"``: tokens made only of sentence-final
    marks (. ! ? … and their CJK forms); ``"any"`` is handled by the caller (every token).
    """
    require(kind in CANDIDATES, f"unknown separator candidates {kind!r}", f"use one of {', '.join(CANDIDATES)}")
    key = (id(tokenizer), kind)
    hit = _PUNCT_CACHE.get(key)
    if hit is None or hit[0] is not tokenizer:
        from ..tokens import punctuation_lookup, token_body

        lookup = punctuation_lookup(tokenizer)
        if kind == "terminal":
            terminal = np.zeros_like(lookup)
            for token, i in tokenizer.get_vocab().items():
                bare = token_body(token)
                if i < len(terminal) and bare and set(bare) <= _TERMINAL:
                    terminal[i] = True
            lookup = terminal & lookup
        hit = (tokenizer, lookup)
        _PUNCT_CACHE[key] = hit
    return hit[1]


def _cut_after(text: str, end: int) -> int | None:
    """Where the next sentence starts if a sentence ends with the token ending at ``end``.

    Closing quotes and brackets (and further . ! ?) after the token stay with the sentence; a cut
    needs whitespace next (never inside "U.S." or "3.5"), and text after it.
    """
    n = len(text)
    while end < n and (text[end] in _CLOSERS or text[end] in ".!?…"):
        end += 1
    if end >= n or not text[end].isspace():
        return None
    m = _NON_SPACE.search(text, end)
    return m.start() if m else None


def newline_cuts(text: str) -> Iterator[int]:
    """Sentence starts forced by newline runs (after the first non-space character), streamed."""
    first = _NON_SPACE.search(text)
    if first is None:
        return
    for m in _NEWLINE_RUN.finditer(text, first.start()):
        if first.start() < m.end() < len(text):
            yield m.end()


def sentence_cuts(text: str, block: TokenBlock, col: int, threshold: float, candidates: str, tokenizer) -> list[int]:
    """Character offsets where a sentence starts after a separator column in ``block``.

    A token is a separator when its normalised column attention in column layer ``col`` exceeds
    ``threshold`` and it is one of the ``candidates`` (:func:`_candidates`; ``"any"``: every token,
    the paper's rule). Newline runs are
    :func:`newline_cuts`.
    """
    hit = block.col[:, col] > threshold
    if candidates != "any":
        lookup = _candidates(tokenizer, candidates)
        ids = np.minimum(block.ids, len(lookup) - 1)
        hit &= lookup[ids]
    cuts = []
    for i in np.flatnonzero(hit):
        c = _cut_after(text, int(block.end[i]))
        if c is not None:
            cuts.append(c)
    return cuts

