"""headsim's faster pySBD path (headsim.sentences, headsim.pysbd_patterns) gives pySBD's own sentences:
the same starts as pySBD as released on real text, and every rewritten pattern call the same result as
``re``'s own."""

from __future__ import annotations

import inspect
import re
import sys
from collections import Counter

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import lee_texts
from headsim import pysbd_patterns, sentences
from headsim.pysbd_patterns import CachedRe, compile_pattern

#: edge cases of the rewritten patterns and of locating sentences: an abbreviation first in the text
#: and after every kind of whitespace, repeated sentences, braces, regex characters in sentences
TRICKY = (
    "Mr. Smith left early.",
    "Mr. Smith met Dr. Jones. Mr. Smith left. Mr. Smith left. Mr. Smith left.",
    "No. 5 was late.\tNo. 6 was not. St. Kilda is far; St.\rKilda? Art. 3 applies (a) here.",
    "a.m. is early. A.M. too. U.S. troops left. They said {art} here. {u.s} Yes. Jan. 3 a.m.",
    "(a+b)*c? Yes! Yes! [1] Cf. x.  Fig. 2 shows it...  Vol. IV, p. 3. e.g. this. i.e. that.",
    "\u212a. Smith and \u017ft. Paul and \u0130nc. were there. Mr.\u00a0Brown came. Prof.\x1cGreen too.",
)

#: one abbreviation again and again in one line, in several cases, next to others of the three kinds
REPEATED = (
    "Dr. Smith met dr. Jones and DR. Brown. Dr. Smith left, dr. x. Dr.: no. Dr. (a) Dr.? Dr.- Dr., Dr. 5 Dr. I'm",
    "No. 5 and no. 6 and No. (7) and NO. 8: No. 5 again. Mr. A and mr. b and Mr. c. St. St. st. ST. St.:3",
    "a.m. A.M. a.m. x a.m. 5 p.m. P.M. p.m. e.g. E.G. e.g. i.e. I.E. i.e. Jan. jan. JAN. Jan. 3 Art. art. 2",
)


def _starts(texts: list[str]) -> list[list[int]]:
    return [sentences.sentence_starts(t).tolist() for t in texts]


def test_sentence_starts_are_those_of_pysbd_as_released_on_real_text():
    """Lee news stories: every start the same as with pySBD's own segment and its own ``re``."""
    texts = lee_texts(80) + list(TRICKY)
    fast = _starts(texts)
    processor = sys.modules["pysbd.processor"]
    assert isinstance(processor.re, CachedRe)
    with sentences.pysbd_as_released():
        assert processor.re is re  # pySBD's own
        released = _starts(texts)
    assert fast == released
    assert sum(map(len, fast)) > 500  # many boundaries compared, not a few
    assert isinstance(processor.re, CachedRe) and _starts(texts) == fast  # the fast path is back


def _comparable(result):
    if isinstance(result, re.Match):
        return result.span(), result.groups()
    if result is None or isinstance(result, (str, list, tuple)):
        return result
    return [_comparable(m) for m in result]  # finditer


def test_every_rewritten_pattern_call_is_res_own_on_real_text(monkeypatch):
    """Each call pySBD makes to a pattern :func:`compile_pattern` rewrote returns what ``re`` returns,
    for every kind, on real text."""
    seen, wrong = Counter(), []

    def checked(name):
        method = getattr(CachedRe, name)
        signature = inspect.signature(method)

        def call(self, pattern, *args, **kwargs):
            got = method(self, pattern, *args, **kwargs)
            flags = signature.bind(self, pattern, *args, **kwargs).arguments.get("flags", 0)
            compiled = self._compiled(pattern, flags)
            if isinstance(compiled, re.Pattern) and compiled.pattern == pattern:
                return got
            if name == "finditer":
                got = list(got)
            seen["list" if pattern in pysbd_patterns._EQUIVALENT else type(compiled).__name__] += 1
            if _comparable(got) != _comparable(getattr(re, name)(pattern, *args, **kwargs)):
                wrong.append((name, pattern))
            return iter(got) if name == "finditer" else got

        return call

    for name in ("sub", "subn", "search", "match", "fullmatch", "findall", "finditer", "split"):
        monkeypatch.setattr(CachedRe, name, checked(name))
    _starts(lee_texts(40) + list(TRICKY))
    assert not wrong
    # _Gated: the numbered-list pattern (the braces one runs only on lines with "{": search_for_abbreviations)
    assert min(seen["_Occurrences"], seen["Pattern"]) > 500 and seen["_Gated"] > 25 and seen["list"] > 50, seen


def _abbreviation():
    from pysbd.lang.english import English

    return st.sampled_from([a.strip() for a in English.Abbreviation.ABBREVIATIONS])


_PIECES = st.one_of(
    _abbreviation(), _abbreviation().map(str.upper), _abbreviation().map(str.title),
    st.sampled_from([".", ". ", " ", "  ", "\t", "\r", "\n", "\x0b", "\x1c", "\u00a0", "{", "} ", "(", ")", ":",
                     ",", "-", "?", "5", "12", "I", "I'm", "Smith", "the", "\u212a", "\u017f", "\u0130", "\u0131"]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_PIECES, min_size=1, max_size=30).map("".join))
@example(REPEATED[0])
@example("Dr.{x} dr. Dr. {Dr} Dr. a")  # braces: pySBD's own step
def test_abbreviation_handling_is_pysbds_own_on_any_mix(text):
    """pySBD's abbreviation step (where all three rewritten kinds are built and used) and its whole
    segmentation give the same text and sentences as pySBD as released, on texts of abbreviations in
    any case, whitespace of every kind, braces and the characters that ignore case specially."""
    from pysbd.lang.english import English

    sentences._pysbd()

    def run():
        replacer = English.AbbreviationReplacer(text, English)
        return replacer.search_for_abbreviations_in_string(text), sentences._segment(text)

    fast = run()
    with sentences.pysbd_as_released():
        assert run() == fast




def test_abbreviation_step_makes_each_substitution_once_with_pysbds_result(monkeypatch):
    """Repeated abbreviations: the same text as pySBD's own step, with one substitution call per
    distinct (abbreviation, occurrence) where pySBD makes one per occurrence."""
    from pysbd.lang.english import English

    sentences._pysbd()
    calls = []
    scan = English.AbbreviationReplacer.scan_for_replacements
    monkeypatch.setattr(English.AbbreviationReplacer, "scan_for_replacements",
                        lambda self, txt, am, *rest: calls.append(am.strip()) or scan(self, txt, am, *rest))

    def run(text):
        calls.clear()
        return English.AbbreviationReplacer(text, English).search_for_abbreviations_in_string(text), list(calls)

    for text in REPEATED:
        fast, made = run(text)
        with sentences.pysbd_as_released():
            released, pysbds = run(text)
        assert fast == released and "∯" in fast
        assert set(made) == set(pysbds) and len(made) < len(pysbds), (made, pysbds)  # the same ones, fewer times
        assert _starts([text]) == _starts_released(text)


def _starts_released(text):
    with sentences.pysbd_as_released():
        return _starts([text])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(st.sampled_from("ab. \t\n\u00a0"), max_size=14),
       st.lists(st.sampled_from(["", "a", "ab", "a a", "b a", "b.", "a  ", " b", "ab ab", "a\ta"]), max_size=6))
@example("a a a", ["a a", "a a"])  # the second "a a" overlaps the first's match: pySBD drops it
def test_sentences_are_located_as_pysbd_locates_them(block, processed):
    """Repeated and overlapping sentences, whitespace of every kind, sentences not in the block or
    empty: located where pySBD's own ``sentences_with_char_spans`` locates them."""
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=False)
    segmenter.original_text = block
    with sentences.pysbd_as_released():
        expected = [span.sent for span in segmenter.sentences_with_char_spans(processed)]
    assert sentences._locate(block, processed) == expected


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["a", "b", "ab", "Z", "1", "12", "123", ".", ")", "(", " ", "\t", "\n", "-", "\u2043",
                                 "s", "\u0661", "{", "}", "\u00a0", "\u212a", "i.v", "I "]), max_size=24).map("".join))
@example("12.) x (ab) c (d)e f) g.h a. z.")  # a number list marker closed by ")", letters in parentheses
def test_rewritten_fixed_patterns_find_what_re_finds(text):
    """pySBD's list-item patterns and the braces pattern, as rewritten, on texts of list markers,
    digits of other scripts, dashes, parentheses and whitespace of every kind."""
    patterns = [pysbd_patterns._LETTER_PERIOD, pysbd_patterns._LETTERS_PAREN, pysbd_patterns._NUMBERED,
                r"(?<={i\.v} ).{1}", r"(?<={ab} ).{1}"]
    for pattern in patterns:
        fast = compile_pattern(pattern)
        assert not (isinstance(fast, re.Pattern) and fast.pattern == pattern)  # rewritten
        assert fast.findall(text) == re.findall(pattern, text), pattern
