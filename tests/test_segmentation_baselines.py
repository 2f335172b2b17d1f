"""Baselines return valid gap indices; datasets and splits are deterministic and in range."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from headsim.errors import HeadsimError
from headsim.segmentation.baselines import (
    EmbeddingBreakpointBaseline,
    EvenSplitBaseline,
    RandomSplitBaseline,
    TextTilingBaseline,
    _texttiling_class,
    even_gaps,
    top_gaps,
)
from headsim.segmentation.datasets import SegDoc, choi_lee_docs, dev_test_split, segdoc

TOPICS = [
    "orbit planet rocket launch satellite telescope astronaut galaxy comet nebula".split(),
    "recipe butter flour oven baking sugar dough pastry whisk cream".split(),
    "goalkeeper striker referee stadium penalty league midfield tackle match cup".split(),
]


def topic_units(lengths: list[int], seed: int = 0) -> tuple[list[str], list[int]]:
    """Sentences drawn from one topic's vocabulary per segment, and the gold gaps."""
    rng = np.random.default_rng(seed)
    units, gold = [], []
    for t, n in enumerate(lengths):
        words = TOPICS[t % len(TOPICS)]
        units += [" ".join(rng.choice(words, 12)).capitalize() + "." for _ in range(n)]
        gold.append(len(units) - 1)
    return units, gold[:-1]


def topic_doc(lengths: list[int], seed: int = 0) -> SegDoc:
    units, gold = topic_units(lengths, seed)
    text = " ".join(units)
    starts = np.cumsum([0, *(len(u) + 1 for u in units)])
    return segdoc(f"synthetic/{seed}", text, [int(starts[g + 1]) for g in gold])


class BagOfWordsEncoder:
    """A stand-in for the sentence encoder: hashed bag of words (fast, deterministic)."""

    def encode(self, texts, **kwargs):
        out = np.zeros((len(texts), 64))
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", "").split():
                out[i, zlib.crc32(word.encode()) % 64] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def assert_valid(gaps: list[int], n_units: int, count: int | None = None) -> None:
    assert gaps == sorted(set(gaps)) and all(isinstance(g, int) for g in gaps)
    assert all(0 <= g < n_units - 1 for g in gaps)
    if count is not None:
        assert len(gaps) == count


def test_even_gaps_equal_lengths():
    for n_units in range(1, 30):
        for n in range(n_units):
            gaps = even_gaps(n_units, n)
            assert_valid(gaps, n_units, n)
            lengths = np.diff([-1, *gaps, n_units - 1])
            assert lengths.max() - lengths.min() <= 1
    assert even_gaps(10, 1) == [4]
    with pytest.raises(HeadsimError, match="cannot place"):
        even_gaps(3, 3)


def test_top_gaps_fills_from_even_split():
    assert top_gaps([0.1, 0.9, 0.5, 0.0], 2) == [1, 2]
    assert top_gaps([0, 0, 0, 0, 0], 1) == [2]  # nothing scored: the even split
    assert top_gaps([0, 0, 0.3, 0, 0], 2) == [1, 2]  # the scored gap, then the even split's first
    assert top_gaps([], 0) == []


def test_even_and_random_need_count_or_fit():
    units = [f"s{i}." for i in range(20)]
    with pytest.raises(HeadsimError, match="fit"):
        EvenSplitBaseline().predict(units)
    dev = [topic_doc([5, 5, 5, 5])]  # mean segment length 5 units
    assert EvenSplitBaseline().fit(dev).predict(units) == [4, 9, 14]
    assert len(RandomSplitBaseline(1).fit(dev).predict(units)) == 3


def test_random_split_properties():
    units = [f"Sentence {i}." for i in range(40)]
    a = RandomSplitBaseline(seed=3).predict(units, 7)
    assert_valid(a, 40, 7)
    assert a == RandomSplitBaseline(seed=3).predict(units, 7)
    assert any(RandomSplitBaseline(seed=s).predict(units, 7) != a for s in range(4, 8))
    assert RandomSplitBaseline().predict(units, 39) == list(range(39))
    assert RandomSplitBaseline().predict(units[:1], 0) == []


@pytest.mark.parametrize(
    "method",
    [
        EvenSplitBaseline(),
        RandomSplitBaseline(0),
        TextTilingBaseline(),
        EmbeddingBreakpointBaseline(encoder=BagOfWordsEncoder()),
    ],
)
def test_baselines_return_requested_count(method):
    units, gold = topic_units([9, 12, 8])
    for n in (0, 1, len(gold), 5, len(units) - 1):
        assert_valid(method.predict(units, n), len(units), n)
    with pytest.raises(HeadsimError):
        method.predict(units, len(units))
    assert method.predict(units[:1], 0) == []


def test_texttiling_finds_topic_shifts_and_falls_back_on_short_text():
    units, gold = topic_units([15, 15, 15])
    assert_valid(TextTilingBaseline(w=10, k=4).predict(units, None), len(units))
    found = TextTilingBaseline(w=10, k=4).predict(units, 2)
    assert all(min(abs(f - g) for g in gold) <= 1 for f in found)
    short = ["One short sentence.", "Another one."]
    assert TextTilingBaseline().predict(short, None) == []
    assert TextTilingBaseline().predict(short, 1) == [0]


def test_vectorised_block_comparison_matches_nltk():
    from nltk.tokenize.texttiling import TextTilingTokenizer
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    units, _ = topic_units([10, 10, 10])
    text = "\n\n".join(units)
    ours = _texttiling_class()(w=10, k=4, stopwords=ENGLISH_STOP_WORDS, demo_mode=True).tokenize(text)
    nltk = TextTilingTokenizer(w=10, k=4, stopwords=ENGLISH_STOP_WORDS, demo_mode=True).tokenize(text)
    np.testing.assert_allclose(ours[0], nltk[0], atol=1e-12)
    assert list(ours[3]) == list(nltk[3])


def test_embedding_breakpoint_with_stand_in_encoder():
    method = EmbeddingBreakpointBaseline(encoder=BagOfWordsEncoder())
    units, gold = topic_units([10, 10, 10])
    assert method.predict(units, 2) == gold
    dev = [topic_doc([8, 10, 6], seed=s) for s in range(3)]
    method.fit(dev)
    assert method.buffer_size in method.BUFFER_GRID and method.percentile in method.PERCENTILE_GRID
    assert_valid(method.predict(units, None), len(units))


def test_texttiling_fit_picks_from_grid():
    dev = [topic_doc([12, 14, 10], seed=s) for s in range(2)]
    method = TextTilingBaseline().fit(dev)
    assert method.w in method.W_GRID and method.k in method.K_GRID and method.cutoff in method.CUTOFFS


def test_segdoc_gold_and_units():
    doc = topic_doc([3, 4, 2])
    assert doc.gold == [2, 6] and len(doc.units) == 9
    assert "".join(u.text for u in doc.units) == doc.text
    doc = segdoc("x", "First part. Still first.\n\nSecond part.", [0, 24, 26, 99])
    assert doc.gold == [1]  # 0 and out-of-range starts give none; 24 moves past the blank line to 26
    assert segdoc("x", "One two three.", [4]).gold == [0]  # a start inside a sentence splits it


def test_choi_lee_docs_deterministic_and_in_range():
    docs = choi_lee_docs(6, seed=5)
    assert [d.text for d in docs] == [d.text for d in choi_lee_docs(6, seed=5)]
    assert [d.text for d in docs] != [d.text for d in choi_lee_docs(6, seed=6)]
    for d in docs:
        assert 2 <= len(d.gold) <= 9
        assert all(0 <= g < len(d.units) - 1 for g in d.gold) and d.gold == sorted(set(d.gold))
        assert "".join(u.text for u in d.units) == d.text
        assert len(d.text.split("\n\n")) == len(d.gold) + 1
        for g in d.gold:  # every gold boundary sits on a story break
            assert d.units[g].text.endswith("\n\n")


def test_dev_test_split_deterministic_partition():
    docs = [topic_doc([2, 3], seed=s) for s in range(10)]
    dev, test = dev_test_split(docs, 0.3, seed=0)
    assert len(dev) == 3 and len(test) == 7
    assert {d.doc_id for d in dev} | {d.doc_id for d in test} == {d.doc_id for d in docs}
    assert not {d.doc_id for d in dev} & {d.doc_id for d in test}
    again = dev_test_split(docs, 0.3, seed=0)
    assert [d.doc_id for d in again[0]] == [d.doc_id for d in dev]
    assert len(dev_test_split(docs[:2], 0.01)[0]) == 1
    with pytest.raises(HeadsimError):
        dev_test_split(docs, 1.0)


@pytest.mark.slow
def test_wikipedia_topic_docs_gold_on_section_starts():
    from headsim.corpus import wikipedia_documents
    from headsim.segmentation.datasets import wikipedia_topic_docs

    docs = wikipedia_topic_docs()
    sections = {d.doc_id: d.sections for d in wikipedia_documents()}
    assert docs
    for d in docs:
        starts = {s.start for s in sections[d.doc_id][1:]}
        assert all(0 <= g < len(d.units) - 1 for g in d.gold)
        assert all(d.units[g + 1].start in starts for g in d.gold)
        assert "".join(u.text for u in d.units) == d.text


@pytest.mark.slow
def test_real_model_baselines():
    from headsim.segmentation.baselines import ChonkieSemanticBaseline

    units, gold = topic_units([8, 8, 8])
    assert_valid(EmbeddingBreakpointBaseline().predict(units, 2), len(units), 2)
    pytest.importorskip("chonkie")
    assert_valid(ChonkieSemanticBaseline().predict(units), len(units))
