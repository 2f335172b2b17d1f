"""Sentence boundaries as character offsets (used for sentence ids of tokens and sentence units).

pySBD's rule-based English segmenter is the default (accurate on abbreviations, numbers,
quotations); NLTK's Punkt algorithm with untrained parameters is offered as a fast option for
very large corpora (about 20× faster, splits after most abbreviations). pySBD's time grows faster
than linearly with the length of what it is given, so paragraphs longer than :data:`MAX_BLOCK`
characters are first cut at the last sentence-final punctuation (else whitespace) before the
limit: time stays linear in the text. This module (with :mod:`headsim.pysbd_patterns`) is the one pySBD
wrapper of the package.

pySBD runs here exactly as ``Segmenter(language="en", clean=False).segment`` does, with changes
that leave every sentence as it was and only save time: its regular expressions are compiled once
each, its slowest kinds in faster equivalent forms, its abbreviation step makes each distinct
substitution once (:mod:`headsim.pysbd_patterns`), and its sentences are located in the text by
search rather than by one freshly compiled pattern each (:func:`_segment`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from .errors import require

SPLITTERS = ("pysbd", "punkt", "newline")
MAX_BLOCK = 2000
_PARAGRAPH = re.compile(r"\n+")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_TRAILING_SPACE = re.compile(r"\s*")


@lru_cache(maxsize=1)
def _pysbd():
    import pysbd

    from . import pysbd_patterns

    pysbd_patterns.install()
    return pysbd.Segmenter(language="en", clean=False, char_span=False)


def _segment(block: str) -> list[str]:
    """``_pysbd().segment(block)``: the same sentences (each with its trailing whitespace)."""
    return _locate(block, _pysbd().processor(block).process()) if block else []


def _locate(block: str, processed: list[str]) -> list[str]:
    """pySBD's processed sentences as they stand in ``block`` (``Segmenter.sentences_with_char_spans``).

    pySBD locates each processed sentence ``s`` as the first match of ``re.escape(s) + r"\\s*"`` in
    ``block`` (matches taken left to right without overlap) that ends after the previous sentence,
    and drops it if none does. Here the matches are found with ``str.find`` in the same order,
    instead of a new pattern compiled for every sentence.
    """
    found, prior = [], 0
    for sentence in processed:
        if not sentence:  # the empty pattern: pySBD's own search (never seen on real text)
            match = next((m for m in _TRAILING_SPACE.finditer(block) if m.end() > prior), None)
            if match is not None:
                found.append(match.group())
                prior = match.end()
            continue
        at = block.find(sentence)
        while at >= 0:
            end = _TRAILING_SPACE.match(block, at + len(sentence)).end()
            if end > prior:
                found.append(block[at:end])
                prior = end
                break
            at = block.find(sentence, end)
    return found


@lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer()


def import_punkt_alone() -> None:
    """Import NLTK's Punkt module without the rest of NLTK (which :func:`sentence_starts` then uses).

    ``import nltk`` runs NLTK's whole ``__init__`` (scipy and most of NLTK: about 2 s), which every
    windowing worker process would pay before its first window. Only for such processes: the bare
    ``nltk`` and ``nltk.tokenize`` packages it leaves would hide NLTK's top-level API from other code.
    If NLTK's layout ever makes this fail, it is undone and the normal import follows on first use.
    """
    import importlib
    import importlib.util
    import types

    if "nltk" in sys.modules:
        return
    try:
        for name in ("nltk", "nltk.tokenize"):
            spec = importlib.util.find_spec(name)
            pkg = types.ModuleType(name)
            pkg.__spec__, pkg.__path__ = spec, list(spec.submodule_search_locations)
            sys.modules[name] = pkg
        importlib.import_module("nltk.tokenize.punkt")
    except Exception:  # NLTK's layout changed: import it whole
        for name in [m for m in sys.modules if m == "nltk" or m.startswith("nltk.")]:
            del sys.modules[name]


def _paragraph_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _PARAGRAPH.finditer(text):
        if m.start() > start:
            spans.append((start, m.start()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def pieces(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Spans ``(a, b)``, each at most :data:`MAX_BLOCK` long, that cover ``text[start:end]`` in order."""
    while end - start > MAX_BLOCK:
        window = text[start: start + MAX_BLOCK]
        cut = max((m.end() for m in _SENTENCE_END.finditer(window)), default=0)
        if cut <= 0:
            cut = window.rfind(" ") + 1 or MAX_BLOCK
        yield start, start + cut
        start += cut
    yield start, end


@contextmanager
def pysbd_as_released() -> Iterator[None]:
    """Within it, pySBD runs exactly as released (its own ``Segmenter.segment``, its modules' own
    :mod:`re`, its own abbreviation step): the reference that tests and ``benchmarks/pysbd_speed.py``
    hold this module's path to. Not thread-safe (it swaps module and class attributes)."""
    from .pysbd_patterns import released

    global _segment
    fast_segment = _segment
    _pysbd()
    try:
        with released():
            _segment = _pysbd().segment
            yield
    finally:
        _segment = fast_segment


def pysbd_starts(block: str) -> Iterator[int]:
    """Start offsets of pySBD's sentences in ``block``, located by search so they are exact.

    pySBD never edits text with ``clean=False``; a sentence it returns that is not found (which
    would mean it did) is skipped and the search cursor kept.
    """
    cursor = 0
    for sentence in _segment(block):
        piece = sentence.strip()
        if not piece:
            continue
        found = block.find(piece, cursor)
        if found >= 0:
            yield found
            cursor = found + len(piece)


def _pysbd_starts(paragraph: str) -> list[int]:
    """Sentence starts in one paragraph: piece by piece (each piece start is one)."""
    starts = []
    for p, q in pieces(paragraph, 0, len(paragraph)):
        starts.append(p)
        starts.extend(p + s for s in pysbd_starts(paragraph[p:q]))
    return starts


def check_splitter(method: str) -> str:
    """A known sentence splitter name (:data:`SPLITTERS`), or a clear error."""
    require(method in SPLITTERS, f"unknown sentence splitter {method!r}", f"use one of {', '.join(SPLITTERS)}")
    return method


def sentence_starts(text: str, method: str = "pysbd") -> np.ndarray:
    """Sorted character offsets where sentences start; paragraphs (newlines) always break.

    Args:
        text: any text.
        method: ``"pysbd"`` (default), ``"punkt"`` (fast) or ``"newline"`` (one sentence per line).

    Returns:
        int64 array, first element 0 for non-empty text.
    """
    check_splitter(method)
    starts: list[int] = []
    for a, b in _paragraph_spans(text):
        para = text[a:b]
        if method == "pysbd":
            local = _pysbd_starts(para)
        elif method == "punkt":
            local = [s for s, _ in _punkt().span_tokenize(para)]
        else:
            local = [0]
        starts.extend(a + s for s in (local or [0]))
    if text and (not starts or starts[0] != 0):
        starts.insert(0, 0)
    return np.unique(np.asarray(starts, dtype=np.int64))


def sentence_index(offsets: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sentence index of each token given its character start offset."""
    return np.searchsorted(starts, np.asarray(offsets), side="right").astype(np.int64) - 1
