"""pySBD's regular expressions compiled once each, its slowest kinds in faster forms that match the same.

pySBD calls ``re.sub(pattern, …)``, ``re.findall(pattern, …)``, … with pattern strings, some built per
abbreviation it meets; Python's ``re`` keeps 512 compiled patterns (3.11 drops the oldest first), fewer
than pySBD cycles through on real text, so it compiled the same patterns again and again.
:func:`install` gives pySBD's modules a stand-in for ``re`` (:class:`CachedRe`) with the same functions,
each compiling its pattern once through one LRU cache. ``re.sub(p, r, s, count, flags)`` is
``re.compile(p, flags).sub(r, s, count)`` by its definition, and so for the others: every result is
``re``'s own, except that :func:`compile_pattern` gives these kinds in an equivalent form (each argued
where it is written, and checked against ``re`` on real and generated text by the tests), as each was
tried at every position of the text:

* an abbreviation's occurrences ``(?:^|\\s|\\r|\\n)ABBR`` (ignoring case): the engine scans for whitespace;
* a period after an abbreviation ``(?<=\\sABBR)\\.(?=…)``: written ``\\.(?<=\\sABBR\\.)(?=…)``, it starts
  with the period;
* the character after ``{ABBR} `` (``(?<={ABBR} ).{1}``: pySBD means the abbreviation, but the braces
  are literal): no match in a text without ``{``;
* three list-item patterns, their lookbehinds tried one by one: one lookbehind instead, or no match
  in a text without a digit, a period and whitespace or ``)`` in a row.

:func:`install` also gives English's abbreviation replacer :func:`search_for_abbreviations`, pySBD's
abbreviation step with each substitution made once (the same text out).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

PATTERN_CACHE = 4096  # compiled patterns kept (the embedded corpus makes pySBD use about 730)

_LEAD = "(?:^|\\s|\\r|\\n)"
# one-character atoms only: letters, digits, "." (any character but a newline) and an escaped period
_ATOMS = re.compile(r"(?:[A-Za-z0-9.]|\\\.)+")
_PERIOD_AFTER = re.compile(r"\(\?<=\\s((?:[A-Za-z0-9.]|\\\.)+)\)\\\.(\(\?=.*)", re.DOTALL)
# "{" then a letter or an escaped period is no repetition: Python's parser reads a literal "{"
_AFTER_BRACES = re.compile(r"\(\?<=\{(?:[A-Za-z]|\\\.)(?:[A-Za-z0-9]|\\\.)*\} \)\.\{1\}")


class _Occurrences:
    """``re.compile("(?:^|\\s|\\r|\\n)" + atoms, re.IGNORECASE)`` with a faster ``findall``.

    ``atoms`` matches exactly one character per atom, so wherever it matches it has one length L ≥ 1
    and there is nothing to backtrack into. The full pattern tries, at each start p, ``^`` (p == 0 only:
    no MULTILINE) and then a whitespace character (``\\r`` and ``\\n`` are whitespace: their branches
    retry the same case and add nothing), each followed by ``atoms``. So its matches are: ``atoms`` at 0
    if it matches there, then, from where the last match ended (never 0 again), the matches of
    ``\\s`` + ``atoms``, which the engine finds by a scan for whitespace. No group: findall gives whole
    matches in both. Every other method is the full pattern's own.
    """

    def __init__(self, atoms: str) -> None:
        self._full = re.compile(_LEAD + atoms, re.IGNORECASE)
        self._first = re.compile(atoms, re.IGNORECASE)
        self._after_space = re.compile("\\s" + atoms, re.IGNORECASE)

    def findall(self, string: str) -> list[str]:
        first = self._first.match(string)
        if first is None:
            return self._after_space.findall(string)
        return [first.group()] + self._after_space.findall(string, first.end())

    def __getattr__(self, name: str):
        return getattr(self._full, name)


class _Gated:
    """``re.compile(pattern)`` whose ``findall`` gives ``[]`` at once where ``needed(string)`` is false,
    ``needed`` being true of every string the pattern matches anywhere in. Every other method is the
    pattern's own."""

    def __init__(self, pattern: str, needed) -> None:
        self._full = re.compile(pattern)
        self._needed = needed

    def findall(self, string: str) -> list[str]:
        return self._full.findall(string) if self._needed(string) else []

    def __getattr__(self, name: str):
        return getattr(self._full, name)


# pySBD's list-item patterns (pysbd.lists_item_replacer.ListItemReplacer) as pySBD 0.3.4 writes them
_LETTER_PERIOD = r"(?<=^)[a-z](?=\.)|(?<=\A)[a-z](?=\.)|(?<=\s)[a-z](?=\.)"
_LETTERS_PAREN = r"(?<=\()[a-z]+(?=\))|(?<=^)[a-z]+(?=\))|(?<=\A)[a-z]+(?=\))|(?<=\s)[a-z]+(?=\))"
_NUMBERED = (r"\s\d{1,2}(?=\.\s)|^\d{1,2}(?=\.\s)|\s\d{1,2}(?=\.\))|^\d{1,2}(?=\.\))|(?<=\s\-)\d{1,2}(?=\.\s)|"
             r"(?<=^\-)\d{1,2}(?=\.\s)|(?<=\s\⁃)\d{1,2}(?=\.\s)|(?<=^\⁃)\d{1,2}(?=\.\s)|(?<=s\-)\d{1,2}(?=\.\))|"
             r"(?<=^\-)\d{1,2}(?=\.\))|(?<=\s\⁃)\d{1,2}(?=\.\))|(?<=^\⁃)\d{1,2}(?=\.\))")
#: each alternative of these matches the same span when the text before it passes its lookbehind (the
#: one letter before a period; the whole run of letters before a ")": a shorter run is followed by a
#: letter); the lookbehinds together say "at the start, or after whitespace" (and "or after (" for
#: the second), which one negative lookbehind says without trying each at every position
_EQUIVALENT = {_LETTER_PERIOD: r"(?<!\S)[a-z](?=\.)", _LETTERS_PAREN: r"(?<![^\s(])[a-z]+(?=\))"}
#: every alternative of _NUMBERED ends with digits followed by a period and whitespace or ")"
_DIGIT_PERIOD = re.compile(r"\d\.[\s)]")


def compile_pattern(pattern, flags=0):
    """``re.compile(pattern, flags)``, or an object whose methods give the same results faster
    (:class:`_Occurrences`, :class:`_Gated`, :data:`_EQUIVALENT`, or the rewritten pattern below).

    ``(?<=\\sATOMS)\\.REST`` (``REST`` starting with a lookahead ``(?=``) becomes
    ``\\.(?<=\\sATOMS\\.)REST``: the first matches a period at p when ``\\sATOMS`` ends at p; the second
    when ``\\sATOMS\\.`` ends at p + 1, the same condition as the character at p is the period (ATOMS
    are one character each: a fixed width, so the lookbehind is the same test). Both then apply REST
    from p + 1, consume the same one character, and number the same groups (ATOMS has none), so every
    match, substitution and split is the same.
    """
    if isinstance(pattern, str) and flags == re.IGNORECASE and pattern.startswith(_LEAD) \
            and _ATOMS.fullmatch(pattern, len(_LEAD)):
        return _Occurrences(pattern[len(_LEAD):])
    if isinstance(pattern, str) and flags == 0:
        if pattern in _EQUIVALENT:
            return re.compile(_EQUIVALENT[pattern])
        if pattern == _NUMBERED:
            return _Gated(pattern, lambda string: _DIGIT_PERIOD.search(string) is not None)
        if _AFTER_BRACES.fullmatch(pattern):  # every match needs the lookbehind's literal "{"
            return _Gated(pattern, lambda string: "{" in string)
        period = _PERIOD_AFTER.fullmatch(pattern)
        if period is not None:
            return re.compile("\\.(?<=\\s" + period.group(1) + "\\.)" + period.group(2))
    return re.compile(pattern, flags)


class CachedRe:
    """Stands in for :mod:`re` in pySBD's modules: its functions, each through :func:`compile_pattern`
    with one LRU cache of ``size`` patterns; every other name is ``re``'s own."""

    def __init__(self, size: int = PATTERN_CACHE) -> None:
        self._compiled = lru_cache(maxsize=size)(compile_pattern)

    def __getattr__(self, name: str):
        return getattr(re, name)

    def sub(self, pattern, repl, string, count=0, flags=0):
        return self._compiled(pattern, flags).sub(repl, string, count)

    def subn(self, pattern, repl, string, count=0, flags=0):
        return self._compiled(pattern, flags).subn(repl, string, count)

    def search(self, pattern, string, flags=0):
        return self._compiled(pattern, flags).search(string)

    def match(self, pattern, string, flags=0):
        return self._compiled(pattern, flags).match(string)

    def fullmatch(self, pattern, string, flags=0):
        return self._compiled(pattern, flags).fullmatch(string)

    def findall(self, pattern, string, flags=0):
        return self._compiled(pattern, flags).findall(string)

    def finditer(self, pattern, string, flags=0):
        return self._compiled(pattern, flags).finditer(string)

    def split(self, pattern, string, maxsplit=0, flags=0):
        return self._compiled(pattern, flags).split(string, maxsplit)


def search_for_abbreviations(replacer, text: str) -> str:
    """pySBD's ``AbbreviationReplacer.search_for_abbreviations_in_string(text)``: the same text, with each
    distinct substitution made once.

    For each abbreviation found in the line, pySBD finds its occurrences (``(?:^|\\s|\\r|\\n)ABBR``,
    ignoring case) and the character after each (``(?<={ABBR} ).{1}``: no match in a text without ``{``,
    and its substitutions only write ``∯``, so none appears), then calls ``scan_for_replacements`` per
    occurrence. Without those characters every call goes on as if the next word were not capitalised:
    one substitution of ``.`` by ``∯`` whose pattern is made from the occurrence alone (its text, stripped).
    Such a substitution does nothing a second time, whatever others of the step ran in between: every one
    only turns ``.`` into ``∯``, a match needs ``.`` where it replaces, and its lookbehind and lookahead read
    letters, digits, whitespace, punctuation other than ``∯``, or any character (an unescaped ``.`` in an
    abbreviation), each of which was there, the same, when the first substitution ran and replaced every
    match. So an occurrence whose stripped text came before in the same abbreviation's list is skipped.
    A line with ``{`` goes through pySBD's own method.
    """
    from pysbd import abbreviation_replacer as module

    if "{" in text:
        return module.AbbreviationReplacer.search_for_abbreviations_in_string(replacer, text)
    lowered = text.lower()
    for stripped in [a for a in map(str.strip, replacer.lang.Abbreviation.ABBREVIATIONS) if a in lowered]:
        done = set()
        for occurrence in module.re.findall(_LEAD + stripped, text, flags=re.IGNORECASE):
            key = occurrence.strip()
            if key not in done:
                done.add(key)
                text = replacer.scan_for_replacements(text, occurrence, 0, ())
    return text


def _pysbd_modules() -> list:
    """pySBD's imported modules."""
    return [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "pysbd"]


def _english_replacer():
    from pysbd.lang.english import English

    return English.AbbreviationReplacer


def install() -> None:
    """Give every imported pySBD module that uses :mod:`re` one shared :class:`CachedRe` instead, and
    English's abbreviation replacer :func:`search_for_abbreviations` (once; import pySBD's segmenter
    first, which imports its modules)."""
    shim = CachedRe()
    for module in _pysbd_modules():
        if getattr(module, "re", None) is re:
            module.re = shim
    _english_replacer().search_for_abbreviations_in_string = search_for_abbreviations  # pySBD's own: the base class's


@contextmanager
def released() -> Iterator[None]:
    """Within it, pySBD's modules use their own :mod:`re` and its own abbreviation step (what
    :func:`install` replaced); not thread-safe (it swaps module and class attributes)."""
    swapped = [m for m in _pysbd_modules() if isinstance(getattr(m, "re", None), CachedRe)]
    shims = [m.re for m in swapped]
    replacer = _english_replacer()
    method = replacer.__dict__.get("search_for_abbreviations_in_string")
    try:
        for m in swapped:
            m.re = re
        if method is not None:
            del replacer.search_for_abbreviations_in_string
        yield
    finally:
        for m, shim in zip(swapped, shims):
            m.re = shim
        if method is not None:
            replacer.search_for_abbreviations_in_string = method
