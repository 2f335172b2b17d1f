"""pySBD's regular expressions compiled once each, three of its kinds in faster forms that match the same.

pySBD calls ``re.sub(pattern, …)``, ``re.findall(pattern, …)``, … with pattern strings, some built per
abbreviation it meets; Python's ``re`` keeps 512 compiled patterns (3.11 drops the oldest first), fewer
than pySBD cycles through on real text, so it compiled the same patterns again and again.
:func:`install` gives pySBD's modules a stand-in for ``re`` (:class:`CachedRe`) with the same functions,
each compiling its pattern once through one LRU cache. ``re.sub(p, r, s, count, flags)`` is
``re.compile(p, flags).sub(r, s, count)`` by its definition, and so for the others: every result is
``re``'s own, except for three pattern kinds that :func:`compile_pattern` writes in an equivalent form
(each argued there, and checked against ``re`` on real text by the tests):

* an abbreviation's occurrences ``(?:^|\\s|\\r|\\n)ABBR`` (ignoring case): no literal start for the
  regex engine to skip ahead with, so it tried every position of the text;
* a period after an abbreviation ``(?<=\\sABBR)\\.(?=…)``: a lookbehind first, tried at every position;
  the equivalent ``\\.(?<=\\sABBR\\.)(?=…)`` starts with the period, found by a fast scan;
* the character after ``{ABBR} `` (``(?<={ABBR} ).{1}``: pySBD means the abbreviation, but the braces
  are literal), tried at every position of a text that mostly has no ``{`` at all.
"""

from __future__ import annotations

import re
import sys
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


class _AfterBraces:
    """``re.compile("(?<={ABBR} ).{1}")`` (ABBR as :data:`_AFTER_BRACES` allows) whose ``findall`` gives
    ``[]`` at once for a string without ``{``: every match needs the lookbehind's literal ``{`` in it.
    Every other method is the pattern's own."""

    def __init__(self, pattern: str) -> None:
        self._full = re.compile(pattern)

    def findall(self, string: str) -> list[str]:
        return self._full.findall(string) if "{" in string else []

    def __getattr__(self, name: str):
        return getattr(self._full, name)


def compile_pattern(pattern, flags=0):
    """``re.compile(pattern, flags)``, or an object whose methods give the same results faster
    (:class:`_Occurrences`, :class:`_AfterBraces`, or the rewritten pattern below).

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
        if _AFTER_BRACES.fullmatch(pattern):
            return _AfterBraces(pattern)
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


def install() -> None:
    """Give every imported pySBD module that uses :mod:`re` one shared :class:`CachedRe` instead
    (once; import pySBD's segmenter first, which imports its modules)."""
    shim = CachedRe()
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "pysbd" and getattr(module, "re", None) is re:
            module.re = shim
