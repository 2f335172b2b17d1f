"""Per-text views: separator columns, blocks, block averages, pair tables, and `inspect_text`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import torch

from conftest import INSPECT_FILES, SENTENCES, reference_attentions, reference_head_outputs, reference_similarity
from headsim.errors import HeadsimError
from headsim.inspection import inspect_text
from headsim.tokens import is_punctuation_token
from headsim.views import (PAIR_COLUMNS, block_average, block_ids, column_scores, cut_text, pair_table, separator_columns,
                           text_view, window_view)

# ---------------------------------------------------------------------------------------------
# Separator columns on a hand-made attention matrix
# ---------------------------------------------------------------------------------------------

#: Two heads, four positions, the last one padding. Its (padded) query row must not count.
ATTENTION = np.array([
    [[0.5, 0.5, 0.0, 0.0],
     [0.2, 0.8, 0.0, 0.0],
     [1.0, 0.0, 0.0, 0.0],
     [0.0, 0.0, 0.0, 1.0]],
    [[0.0, 0.0, 1.0, 0.0],
     [0.0, 0.0, 1.0, 0.0],
     [0.5, 0.0, 0.5, 0.0],
     [1.0, 0.0, 0.0, 0.0]],
])
VALID = np.array([True, True, True, False])
# column sums over both heads and the three valid queries: 2.2, 1.3, 2.5, (padding) → / 2.5


def test_column_scores_by_hand():
    np.testing.assert_allclose(column_scores(ATTENTION, VALID), [2.2 / 2.5, 1.3 / 2.5, 1.0, 0.0])
    np.testing.assert_allclose(column_scores(ATTENTION, VALID, exclude=np.array([True, False, False, False])),
                               [0.0, 1.3 / 2.5, 1.0, 0.0])
    np.testing.assert_allclose(column_scores(ATTENTION, VALID, exclude=np.array([False, False, True, False])),
                               [1.0, 1.3 / 2.2, 0.0, 0.0])
    np.testing.assert_allclose(column_scores(ATTENTION[1], VALID), [0.5 / 2.5, 0.0, 1.0, 0.0])  # one head, [T, T]
    np.testing.assert_array_equal(column_scores(np.zeros((2, 4, 4)), VALID), np.zeros(4))
    np.testing.assert_array_equal(column_scores(ATTENTION, np.zeros(4, dtype=bool)), np.zeros(4))


def test_separator_columns_by_hand():
    np.testing.assert_array_equal(separator_columns(ATTENTION, VALID, 0.5), [0, 1, 2])
    np.testing.assert_array_equal(separator_columns(ATTENTION, VALID, 0.9), [2])
    np.testing.assert_array_equal(separator_columns(ATTENTION, VALID, 1.0), [])
    np.testing.assert_array_equal(
        separator_columns(ATTENTION, VALID, 0.6, exclude=np.array([False, False, True, False])), [0])
    with pytest.raises(HeadsimError, match="separator threshold"):
        separator_columns(ATTENTION, VALID, 0.0)


# ---------------------------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("separators, valid, expected", [
    ([2, 5], [1] * 7 + [0], [0, 0, 0, 1, 1, 1, 2, -1]),
    ([5, 2], [1] * 7 + [0], [0, 0, 0, 1, 1, 1, 2, -1]),
    ([], [1] * 5 + [0] * 2, [0, 0, 0, 0, 0, -1, -1]),
    ([0], [1] * 4, [0, 1, 1, 1]),
    ([3], [1] * 4, [0, 0, 0, 0]),  # a separator at the end closes the only block
    ([1, 2], [1] * 4, [0, 0, 1, 2]),
    ([0, 1, 2], [1] * 3, [0, 1, 2]),
])
def test_block_ids_by_hand(separators, valid, expected):
    got = block_ids(np.asarray(separators, dtype=np.int64), np.asarray(valid, dtype=bool))
    np.testing.assert_array_equal(got, expected)


def _naive_block_average(m: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    t = len(blocks)
    out = np.zeros((t, t))
    for i in range(t):
        for j in range(t):
            if blocks[i] < 0 or blocks[j] < 0:
                continue
            vals = [m[a, b] for a in range(t) for b in range(t)
                    if a != b and blocks[a] == blocks[i] and blocks[b] == blocks[j]]
            out[i, j] = np.mean(vals) if vals else 0.0
    return out


@pytest.mark.parametrize("seed", range(4))
def test_block_average_against_double_loop(seed):
    rng = np.random.default_rng(seed)
    t = int(rng.integers(3, 12))
    n = int(rng.integers(1, t + 1))
    valid = np.arange(t) < n
    seps = np.unique(rng.integers(0, n, size=int(rng.integers(0, 4))))
    blocks = block_ids(seps, valid)
    m = rng.normal(size=(t, t))
    np.testing.assert_allclose(block_average(m, blocks), _naive_block_average(m, blocks), atol=1e-12)


def test_block_average_single_token_blocks_and_no_blocks():
    m = np.arange(16, dtype=float).reshape(4, 4)
    blocks = np.array([0, 1, 1, -1])
    got = block_average(m, blocks)
    np.testing.assert_allclose(got, _naive_block_average(m, blocks))
    assert got[0, 0] == 0.0  # a one-token block has no off-diagonal entries
    assert got[1, 1] == got[2, 2] == (m[1, 2] + m[2, 1]) / 2
    np.testing.assert_array_equal(block_average(m, np.full(4, -1)), np.zeros((4, 4)))


# ---------------------------------------------------------------------------------------------
# Pair table (Fig 9)
# ---------------------------------------------------------------------------------------------


def test_pair_table_is_the_upper_triangle(rng):
    t = 9
    z = rng.normal(size=(t, 4))
    _, norm, mask = reference_similarity(z, np.ones(t, dtype=bool), 0.2)
    tokens = [f"tok{i}" for i in range(t)]
    table = pair_table(norm, mask, tokens, layer=2, head=0)
    assert list(table.columns) == PAIR_COLUMNS
    expected = [(i, j) for i in range(t) for j in range(i + 1, t) if mask[i, j]]
    assert len(expected) > 0
    assert list(zip(table["index_i"], table["index_j"])) == expected
    assert (table["layer"] == 3).all() and (table["head"] == 1).all()
    assert list(table["token_i"]) == [tokens[i] for i, _ in expected]
    assert list(table["token_j"]) == [tokens[j] for _, j in expected]
    np.testing.assert_allclose(table["similarity"], [norm[i, j] for i, j in expected])
    assert table["index_i"].dtype == np.int64 and table["layer"].dtype == np.int64

    empty = pair_table(norm, np.zeros((t, t), dtype=bool), tokens, layer=0, head=0)
    assert len(empty) == 0 and list(empty.columns) == PAIR_COLUMNS
    with pytest.raises(HeadsimError):
        pair_table(norm, mask, tokens[:-1], layer=0, head=0)


# ---------------------------------------------------------------------------------------------
# inspect_text on the embedded model
# ---------------------------------------------------------------------------------------------

FILES = INSPECT_FILES


@pytest.fixture(scope="module")
def inspection(embedded):
    return inspect_text(SENTENCES, embedded, layer=5, head=3, threshold=0.3)


def test_inspect_matches_independent_similarity(inspection, embedded, embedded_eager):
    """Inspection on MiniLM against the model run directly: eager ``output_attentions`` and a float64
    Z = softmax(QKᵀ/√d)·V from the layer weights, then the definitions of S, the mask and Fig 9's pairs."""
    ins = inspection
    n = ins.valid_len
    ids = ins.view.ids[None]
    assert (ins.layer, ins.head, ins.sep_layer) == (4, 2, embedded.n_layers - 1)
    assert ins.tokens == ["[CLS]", *embedded.tokenizer.tokenize(SENTENCES), "[SEP]"] and len(ins.tokens) == n
    z = reference_head_outputs(embedded, ids, np.ones_like(ids))[0]  # [L, H, n, d] float64
    attention = reference_attentions(embedded_eager, ids, np.ones_like(ids))[0]
    np.testing.assert_allclose(ins.view.head_outputs, z, atol=1e-5)
    np.testing.assert_allclose(ins.attention, attention, atol=1e-5)
    assert ins.normalized.shape == ins.mask.shape == (6, 12, n, n)
    expected_rows = []
    for li in range(6):
        for hi in range(12):
            _, norm, high = reference_similarity(z[li, hi], np.ones(n, dtype=bool), 0.3)
            np.testing.assert_allclose(ins.normalized[li, hi], norm, atol=1e-5)
            expected_rows += [(li + 1, hi + 1, i, j) for i in range(n) for j in range(i + 1, n) if ins.mask[li, hi, i, j]]
            close = np.abs(norm - 0.3) < 1e-5
            np.testing.assert_array_equal(ins.mask[li, hi][~close], high[~close])
    every = ins.view.pairs(0.3, limit=None)  # all pairs only when asked, by position
    got = list(zip(every["layer"], every["head"], every["index_i"], every["index_j"]))
    assert got == expected_rows
    # by default (the one rule at every length) each head keeps its most similar pairs, totals exact
    capped = ins.pairs
    assert capped.attrs == {"total": len(expected_rows), "limit": 300}
    per_head = every.groupby(["layer", "head"]).size()
    assert (capped.groupby(["layer", "head"]).size() == per_head.clip(upper=300)).all()
    head = ins.head_pairs()
    assert (head["layer"] == 5).all() and (head["head"] == 3).all()
    assert len(head) == int(np.triu(ins.mask[4, 2], 1).sum())
    # separators: [CLS]/[SEP] excluded, scores computed over the separator layer's heads
    special = np.isin(ids[0], [embedded.tokenizer.cls_token_id, embedded.tokenizer.sep_token_id])
    np.testing.assert_array_equal(ins.view.special, special)
    cols = attention[embedded.n_layers - 1].sum(axis=(0, 1))
    cols[special] = 0
    np.testing.assert_allclose(ins.column_scores, cols / cols.max(), atol=1e-5)
    np.testing.assert_array_equal(ins.separators, np.flatnonzero(ins.column_scores > 0.5))
    np.testing.assert_array_equal(ins.blocks, block_ids(ins.separators, np.ones(n, dtype=bool)))


# ---------------------------------------------------------------------------------------------
# TextView: one window built once, against independent computations
# ---------------------------------------------------------------------------------------------

LONG = SENTENCES + " The river rose after the rain; farmers moved cattle, sheep and goats to higher ground."


def focus_by_definition(attention: np.ndarray, tokens: list[str], first: bool, last: bool) -> dict[str, np.ndarray]:
    """Attention mass per query token on the opening/closing framing token, punctuation and the
    neighbouring keys, by the definition (docs/statistics.md ``attn_focus``), float64."""
    a = np.asarray(attention, dtype=np.float64)
    n = a.shape[-1]
    punct = np.array([is_punctuation_token(t) for t in tokens])
    punct[[0, n - 1]] &= ~np.array([first, last])
    zero = np.zeros(a.shape[:2])
    return {
        "attn_cls": a[..., 0].sum(-1) / n if first else zero,
        "attn_sep": a[..., n - 1].sum(-1) / n if last else zero,
        "attn_punct": a[..., punct].sum(axis=(-1, -2)) / n,
        "attn_prev": sum(a[..., i, i - 1] for i in range(1, n)) / n,
        "attn_next": sum(a[..., i, i + 1] for i in range(n - 1)) / n,
    }


def test_text_view_of_a_padded_window_equals_the_model_run_directly(tiny_bert, tiny_bert_eager):
    """The last window of a long text (padded when cut): the view runs its valid tokens only and equals
    the eager model on the padded window, Z from the weights in float64, S = Z·Zᵀ by the definition."""
    windows = cut_text(LONG, tiny_bert, 14)
    w = len(windows) - 1
    n = int(windows.attention_mask[w].sum())
    assert len(windows) >= 3 and 5 < n < 14  # a padded last window
    view = window_view(tiny_bert, windows, w, LONG)
    assert (view.window, view.n_windows, view.n, view.seq_len) == (w, len(windows), n, 14)
    ids, mask = windows.input_ids[w: w + 1], windows.attention_mask[w: w + 1]
    np.testing.assert_allclose(view.attention, reference_attentions(tiny_bert_eager, ids, mask)[0, :, :, :n, :n], atol=1e-5)
    z = reference_head_outputs(tiny_bert, ids, mask)[0, :, :, :n]
    np.testing.assert_allclose(view.head_outputs, z, atol=1e-5)
    for li in range(2):
        for hi in range(4):
            np.testing.assert_allclose(view.normalized[li, hi], reference_similarity(z[li, hi], view.valid, 0.3)[1], atol=1e-5)
    np.testing.assert_array_equal(view.special, np.arange(n) % (n - 1) == 0)  # [CLS] … [SEP]
    assert view.tokens[0] == "[CLS]" and view.tokens[-1] == "[SEP]"
    want = focus_by_definition(view.attention, view.tokens, first=True, last=True)
    assert set(view.focus) == set(want)
    for key in want:
        np.testing.assert_allclose(view.focus[key], want[key], atol=1e-6, err_msg=key)
    text, start = view.window_text()
    assert LONG.endswith(text) and start == len(LONG) - len(text) and text.endswith("higher ground.")
    np.testing.assert_array_equal(view.mask(0.3), view.normalized > np.float32(0.3))
    with pytest.raises(HeadsimError, match="window 9 does not exist"):
        window_view(tiny_bert, windows, 9)


def test_text_view_of_a_causal_model(tiny_llama_pair):
    """A tiny Llama (BOS framing): attention equals the eager model's, nothing above the diagonal, only
    BOS is a framing token, separator scores are relative to causal chance, and the focus has no
    [SEP] (the window has no closing token) and no next-token mass."""
    from headsim.model.verify import eager_attentions

    llama, eager = tiny_llama_pair
    view = text_view(LONG, llama, seq_len=24, window=1)
    n = view.n
    ids = torch.as_tensor(view.ids)[None]
    want = torch.stack(eager_attentions(llama, eager, ids, torch.ones_like(ids)), dim=1)[0].numpy()
    np.testing.assert_allclose(view.attention, want, atol=1e-5)
    assert np.abs(np.triu(view.attention, 1)).max() == 0
    assert view.causal and view.tokens[0] == "[CLS]" and view.tokens[-1] != "[SEP]"
    np.testing.assert_array_equal(view.special, np.arange(n) == 0)
    np.testing.assert_allclose(view.column_scores(1), column_scores(view.attention[1], view.valid, exclude=view.special,
                                                                    causal=True))
    focus = focus_by_definition(view.attention, view.tokens, first=True, last=False)
    for key in focus:
        np.testing.assert_allclose(view.focus[key], focus[key], atol=1e-6, err_msg=key)
    assert (view.focus["attn_sep"] == 0).all() and (view.focus["attn_next"] == 0).all()
    assert (view.focus["attn_cls"] > 0).all()


def test_inspect_write(embedded, tmp_path):
    # a short text: the figures cost seconds per panel set whatever the length, and more with it
    inspection = inspect_text("The red fox jumps. A small bird sings.", embedded, layer=5, head=3, threshold=0.3,
                              figure_layers=[1, 6])
    out = tmp_path / "nested" / "out"
    written = inspection.write(out)
    assert sorted(p.name for p in written) == FILES
    assert sorted(p.name for p in out.iterdir()) == FILES
    assert [p.name for p in tmp_path.iterdir()] == ["nested"]  # no temporary directory left behind
    for stem in ("fig04_attention", "fig05_blocks", "fig09_pairs", "similarity", "fig12_summed_similarity"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (out / f"{stem}.svg").read_text()[:2000]
    for stem in ("fig09_pairs", "tokens"):
        csv, parquet = pd.read_csv(out / f"{stem}.csv", keep_default_na=False), pd.read_parquet(out / f"{stem}.parquet")
        assert len(csv) == len(parquet)
        assert list(csv.columns) == list(parquet.columns)
    pairs = pd.read_parquet(out / "fig09_pairs.parquet")
    assert list(pairs.columns) == PAIR_COLUMNS and len(pairs) == len(inspection.pairs)
    tokens = pd.read_csv(out / "tokens.csv", keep_default_na=False)
    assert len(tokens) == inspection.valid_len and list(tokens["token"]) == inspection.tokens
    meta = json.loads((out / "inspect.json").read_text())
    assert (meta["layer"], meta["head"], meta["threshold"]) == (5, 3, 0.3)
    assert meta["model"]["n_layers"] == 6 and meta["valid_tokens"] == inspection.valid_len
    assert meta["figure_layers"] == [1, 6]



def test_inspect_write_refuses_a_file(inspection, tmp_path):
    target = tmp_path / "a-file"
    target.write_text("keep me")
    with pytest.raises(HeadsimError, match="is a file"):
        inspection.write(target)
    assert target.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


@pytest.mark.parametrize("text, kwargs", [
    ("", {}), ("   \n\t", {}),
    (SENTENCES, {"layer": 0}), (SENTENCES, {"layer": 7}), (SENTENCES, {"head": 0}), (SENTENCES, {"head": 13}),
    (SENTENCES, {"sep_layer": 9}), (SENTENCES, {"figure_layers": [1, 8]}),
    (SENTENCES, {"threshold": 0}), (SENTENCES, {"threshold": 1.5}), (SENTENCES, {"sep_threshold": 2.0}),
    (SENTENCES, {"seq_len": 4}), (SENTENCES, {"seq_len": 10000}), (SENTENCES, {"window": 3}),
])
def test_inspect_bad_input_writes_nothing(embedded, tmp_path, text, kwargs):
    out = tmp_path / "out"
    with pytest.raises(HeadsimError) as info:
        inspect_text(text, embedded, **kwargs).write(out)
    assert info.value.problem and info.value.fix
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_causal_column_scores_are_relative_to_chance():
    """Uniform causal attention (each row spread evenly over its prefix) singles out no column, while
    raw column sums would crown the first; a column attended above chance is found. Bidirectional
    scores are the plain normalised column sums."""
    from headsim.views import column_scores

    t = 12
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    valid = np.ones(t, dtype=bool)
    np.testing.assert_allclose(column_scores(uniform, valid, causal=True), 1.0)
    assert column_scores(uniform, valid).argmax() == 0  # raw sums: the first column wins by position
    peaked = uniform.copy()
    peaked[6:, 5] += 1.0
    peaked /= peaked.sum(axis=1, keepdims=True)
    scores = column_scores(peaked, valid, causal=True)
    assert scores.argmax() == 5 and scores[5] == 1.0 and scores[0] < 0.5
    full = np.random.default_rng(0).dirichlet(np.ones(t), size=t)
    np.testing.assert_allclose(column_scores(full, valid), full.sum(0) / full.sum(0).max())
