"""Text → windows: [CLS] … [SEP] framing, padding, offsets, coverage, packing, sentence ids, errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SENTENCES
from headsim.errors import HeadsimError
from headsim.extraction import extract
from headsim.windows import make_windows

WORDS = ("the", "red", "fox", "jumps", "over", "fence", "small", "bird", "sings", "garden", "people",
         "walked", "home", "after", "long", "game", "quiet", "town", "rain", "unbelievably", "river")


def _sentences(n: int, rng: np.random.Generator) -> str:
    """``n`` simple sentences, each a capitalised run of plain words ending in a full stop."""
    out = []
    for _ in range(n):
        words = list(rng.choice(WORDS, size=int(rng.integers(3, 9))))
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def _content(w, r: int) -> slice:
    n = int(w.attention_mask[r].sum())
    return slice(1, n - 1)


def _check_frame(w, tokenizer) -> None:
    """[CLS] first, [SEP] last valid, padding after it (pad id, mask 0, -1 metadata)."""
    for r in range(len(w)):
        n = int(w.attention_mask[r].sum())
        assert n >= 3
        assert w.attention_mask[r, :n].all() and not w.attention_mask[r, n:].any()
        assert w.input_ids[r, 0] == tokenizer.cls_token_id
        assert w.input_ids[r, n - 1] == tokenizer.sep_token_id
        assert (w.input_ids[r, n:] == tokenizer.pad_token_id).all()
        assert tokenizer.cls_token_id not in w.input_ids[r, 1:n - 1]
        assert tokenizer.sep_token_id not in w.input_ids[r, 1:n - 1]
        for arr in (w.sentence_ids[r], w.text_index[r], w.offsets[r, :, 0], w.offsets[r, :, 1]):
            assert arr[0] == -1 and (arr[n - 1:] == -1).all()
            assert (arr[1:n - 1] >= 0).all()
        assert w.tokens[r][0] == tokenizer.cls_token and w.tokens[r][n - 1] == tokenizer.sep_token
        assert len(w.tokens[r]) == w.seq_len


def test_short_text_one_padded_window(tokenizer):
    w = make_windows("The red fox jumps.", tokenizer, 16)
    assert len(w) == 1 and w.seq_len == 16
    assert w.tokens[0][:7] == ["[CLS]", "the", "red", "fox", "jumps", ".", "[SEP]"]
    assert w.tokens[0][7:] == ["[PAD]"] * 9
    assert w.attention_mask[0].tolist() == [1] * 7 + [0] * 9
    _check_frame(w, tokenizer)


def test_long_text_consecutive_windows(tokenizer, rng):
    text = _sentences(30, rng)
    expected = tokenizer(text, add_special_tokens=False)["input_ids"]
    w = make_windows(text, tokenizer, 24)
    _check_frame(w, tokenizer)
    assert len(w) == -(-len(expected) // 22)
    # every window but the last is full; only the last is padded
    assert w.attention_mask[:-1].all()
    assert w.attention_mask[-1].sum() == len(expected) - 22 * (len(w) - 1) + 2
    got = np.concatenate([w.input_ids[r, _content(w, r)] for r in range(len(w))])
    np.testing.assert_array_equal(got, expected)
    starts = np.concatenate([w.offsets[r, _content(w, r), 0] for r in range(len(w))])
    assert (np.diff(starts) > 0).all()
    assert (w.text_index[w.attention_mask.astype(bool) & (w.sentence_ids >= 0)] == 0).all()


def test_offsets_point_back_to_characters(tokenizer):
    text = "Gerstenslager built unbelievably sturdy carriages for travelling marshals in Wooster Ohio"
    w = make_windows(text, tokenizer, 12)
    checked = 0
    for r in range(len(w)):
        for k in range(*_content(w, r).indices(w.seq_len)):
            start, end = w.offsets[r, k]
            assert 0 <= start < end <= len(text)
            token = w.tokens[r][k]
            assert text[start:end].lower() == token.removeprefix("##")
            assert token.startswith("##") == (start > 0 and text[start - 1] != " ")
            checked += 1
    assert checked == len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert checked > 12  # several windows, several word pieces


def test_padding_only_in_the_last_window_of_each_text(tokenizer, rng):
    texts = [_sentences(6, rng), "Short one.", _sentences(9, rng)]
    w = make_windows(texts, tokenizer, 16)
    _check_frame(w, tokenizer)
    text_of = np.array([w.text_index[r, 1] for r in range(len(w))])
    assert sorted(set(text_of.tolist())) == [0, 1, 2] and (np.diff(text_of) >= 0).all()
    for t in range(3):
        rows = np.flatnonzero(text_of == t)
        assert w.attention_mask[rows[:-1]].all()
        valid = w.text_index[rows] >= 0
        assert (w.text_index[rows][valid] == t).all()  # a window never mixes texts unless packed
        ids = np.concatenate([w.input_ids[r, _content(w, r)] for r in rows])
        np.testing.assert_array_equal(ids, tokenizer(texts[t], add_special_tokens=False)["input_ids"])


def test_packed_windows_are_full_except_the_last(tokenizer, rng):
    texts = [_sentences(2, rng), "Short one.", _sentences(3, rng), "Another short text here."]
    w = make_windows(texts, tokenizer, 16, pack=True)
    _check_frame(w, tokenizer)
    assert w.attention_mask[:-1].all()
    assert not w.attention_mask[-1].all() or w.attention_mask.all()
    expected = np.concatenate([tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts])
    got = np.concatenate([w.input_ids[r, _content(w, r)] for r in range(len(w))])
    np.testing.assert_array_equal(got, expected)
    idx = np.concatenate([w.text_index[r, _content(w, r)] for r in range(len(w))])
    assert (np.diff(idx) >= 0).all() and idx[0] == 0 and idx[-1] == 3
    mixed = [r for r in range(len(w)) if len(set(w.text_index[r, _content(w, r)].tolist())) > 1]
    assert mixed, "packing should put two texts into one window"
    for r in mixed:  # a new text starts a new sentence id
        tix, sid = w.text_index[r, _content(w, r)], w.sentence_ids[r, _content(w, r)]
        change = np.flatnonzero(np.diff(tix))
        assert (sid[change + 1] == sid[change] + 1).all()
    assert len(w) == -(-len(expected) // 14)


def _expected_sentence_ids(tokens: list[str]) -> list[int]:
    """Within a window: 0 for the first sentence present, +1 after each full stop."""
    out, current = [], 0
    for tok in tokens:
        out.append(current)
        if tok == ".":
            current += 1
    return out


def test_sentence_ids(tokenizer, rng):
    w = make_windows(SENTENCES, tokenizer, 64)
    row = w.sentence_ids[0, _content(w, 0)].tolist()
    toks = w.tokens[0][_content(w, 0)]
    assert row == _expected_sentence_ids(toks)
    assert row[toks.index("bird")] > row[toks.index("fox")]
    assert row[toks.index("game")] > row[toks.index("bird")]
    assert w.sentence_ids[0, 0] == -1 and (w.sentence_ids[0, len(toks) + 1:] == -1).all()

    # a long text cut into windows: ids restart from 0 in every window
    text = _sentences(25, rng)
    w = make_windows(text, tokenizer, 20)
    assert len(w) > 3
    for r in range(len(w)):
        sl = _content(w, r)
        ids = w.sentence_ids[r, sl].tolist()
        assert ids[0] == 0
        assert ids == _expected_sentence_ids(w.tokens[r][sl])


def test_newlines_break_sentences(tokenizer):
    w = make_windows("first line without stop\nsecond line here", tokenizer, 32)
    toks = w.tokens[0][_content(w, 0)]
    ids = w.sentence_ids[0, _content(w, 0)].tolist()
    assert ids[toks.index("second")] == ids[toks.index("first")] + 1


@pytest.mark.parametrize("seq_len", [0, 2, 4, 7])
def test_seq_len_below_minimum(tokenizer, tiny_bert, seq_len):
    with pytest.raises(HeadsimError, match=f"seq_len {seq_len}"):
        make_windows("Some text here.", tokenizer, seq_len)
    with pytest.raises(HeadsimError, match=f"seq_len {seq_len}"):
        extract("Some text here.", tiny_bert, seq_len=seq_len)


def test_seq_len_minimum_works(tokenizer):
    w = make_windows(SENTENCES, tokenizer, 8)
    _check_frame(w, tokenizer)
    assert w.seq_len == 8 and w.attention_mask[:-1].all()


def test_seq_len_above_model_maximum(tiny_bert, embedded):
    with pytest.raises(HeadsimError, match="seq_len 129 is longer than this model's position limit of 128 tokens"):
        extract("Some text here.", tiny_bert, seq_len=129)
    with pytest.raises(HeadsimError, match="512"):
        extract("Some text here.", embedded, seq_len=10000)


@pytest.mark.parametrize("texts", ["", "   ", "\n\t \n", [], ["fine", "  "], [""], ["ok", 3]])
def test_empty_or_bad_text(tokenizer, texts):
    with pytest.raises(HeadsimError):
        make_windows(texts, tokenizer, 16)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(n_words=st.lists(st.integers(1, 40), min_size=1, max_size=4), seq_len=st.integers(8, 40),
       pack=st.booleans(), seed=st.integers(0, 2**16))
def test_windows_cover_every_token_once(tokenizer, n_words, seq_len, pack, seed):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=n)) for n in n_words]
    w = make_windows(texts, tokenizer, seq_len, pack=pack)
    _check_frame(w, tokenizer)
    content = seq_len - 2
    pieces = [w.input_ids[r, _content(w, r)] for r in range(len(w))]
    expected = [np.asarray(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    np.testing.assert_array_equal(np.concatenate(pieces), np.concatenate(expected))
    if pack:
        total = sum(len(e) for e in expected)
        assert len(w) == -(-total // content) and w.attention_mask[:-1].all()
    else:
        assert len(w) == sum(-(-len(e) // content) for e in expected)
    for r in range(len(w)):
        assert re.fullmatch(r"\[CLS\]", w.tokens[r][0])
        ids = w.sentence_ids[r, _content(w, r)]
        assert ids[0] == 0 and set(np.diff(ids).tolist()) <= {0, 1}


def test_worker_processes_give_the_same_windows(tokenizer):
    """Tokenisation and sentence splitting in worker processes change nothing, in any order of arrival."""
    from headsim.corpus import lee_documents
    from headsim.windows import Windows, iter_windows

    texts = [d.text for d in lee_documents()[:12]]
    one = Windows.concat(list(iter_windows(texts, tokenizer, 64, pack=True, batch_windows=16, tokenize_batch=2)))
    two = Windows.concat(list(iter_windows(texts, tokenizer, 64, pack=True, batch_windows=16, tokenize_batch=2,
                                           workers=2, token_strings=False)))
    for name in ("input_ids", "attention_mask", "offsets", "sentence_ids", "text_index"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
    assert two.tokens == [] and len(one.tokens) == len(one) and two.select(slice(0, 2)).tokens == []


def test_long_texts_are_never_truncated_by_the_tokenizer(tokenizer):
    """A tokenizer saved with truncation on (MiniLM's is, at 128) must still see whole texts."""
    from headsim.windows import tokenize

    text = "word " * 600
    tokenizer.backend_tokenizer.enable_truncation(128)
    assert len(tokenize([text], tokenizer)[0].ids) == 600


def test_long_paragraphs_split_in_linear_time_and_keep_exact_offsets():
    """A paragraph far longer than MAX_BLOCK is cut into pieces before pySBD; starts stay exact."""
    from headsim.sentences import MAX_BLOCK, sentence_starts

    sentence = "The committee met on Tuesday and approved the budget. "
    short, long = sentence * 40, sentence * 800  # one paragraph each, no newline
    starts = sentence_starts(long)
    assert len(starts) == 800 and len(long) > 10 * MAX_BLOCK
    assert all(long[s:].startswith("The committee") for s in starts)
    assert list(sentence_starts(short)) == [i * len(sentence) for i in range(40)]


_PUNKT_CHECK = """
import sys, json
from headsim import sentences
{setup}
sentences.import_punkt_alone()
text = {text!r}
starts = sentences.sentence_starts(text, "punkt").tolist()
print(json.dumps({{"starts": starts, "scipy": "scipy" in sys.modules, "full": hasattr(sys.modules["nltk"], "word_tokenize")}}))
"""


@pytest.mark.parametrize("broken", [False, True])
def test_punkt_alone_in_a_worker_splits_as_the_whole_of_nltk(broken):
    """Workers import Punkt without NLTK's heavy __init__; the splits are NLTK's own, and if that
    import ever fails (NLTK's layout changed) the whole NLTK is imported instead."""
    import json
    import subprocess
    import sys

    from headsim.sentences import sentence_starts

    text = "Dr. Smith arrived at 5 p.m. on Monday. He left early!\nA new paragraph starts here. Is it short?"
    setup = ("import importlib; real = importlib.import_module\n"
             "importlib.import_module = lambda n, *a: (_ for _ in ()).throw(ImportError(n)) "
             "if n == 'nltk.tokenize.punkt' else real(n, *a)") if broken else ""
    code = _PUNKT_CHECK.format(setup=setup, text=text)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["starts"] == sentence_starts(text, "punkt").tolist()
    assert {0, text.index("He left"), text.index("A new")} <= set(got["starts"])
    assert got["full"] is broken and got["scipy"] is broken  # alone: neither NLTK's API nor scipy loaded


def test_a_limit_reads_no_text_beyond_the_windows_it_needs(tokenizer):
    """``limit`` windows: the first windows of the whole stream, in batches of at most ``limit``, and the
    same texts read (tokenised, sentence-split) whether the corpus behind them is short or long."""
    from headsim.corpus import lee_documents
    from headsim.windows import Windows, iter_windows

    texts = [d.text for d in lee_documents()[:24]]
    whole = Windows.concat(list(iter_windows(texts, tokenizer, 64, pack=True, batch_windows=16, tokenize_batch=1)))
    read = {}
    for n_texts in (6, 24):
        seen: list[int] = []

        def counted(n=n_texts, seen=seen):
            for i, text in enumerate(texts[:n]):
                seen.append(i)
                yield text

        batches = list(iter_windows(counted(), tokenizer, 64, pack=True, batch_windows=16, tokenize_batch=1, limit=3))
        assert [len(b) for b in batches] == [3]
        np.testing.assert_array_equal(Windows.concat(batches).input_ids, whole.input_ids[:3])
        read[n_texts] = len(seen)
    assert read[6] == read[24] < 6
