"""Per-text views: separator columns, blocks, block averages, pair tables, and `inspect_text`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import INSPECT_FILES, SENTENCES, reference_similarity
from headsim.errors import HeadsimError
from headsim.inspection import inspect_text
from headsim.views import PAIR_COLUMNS, block_average, block_ids, column_scores, pair_table, separator_columns

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


def test_inspect_matches_independent_similarity(inspection, embedded):
    ins = inspection
    n = ins.valid_len
    ex = ins.extraction
    assert n == int(ex.attention_mask[0].sum())
    assert (ins.layer, ins.head, ins.sep_layer) == (4, 2, embedded.n_layers - 1)
    assert ins.tokens[0] == "[CLS]" and ins.tokens[-1] == "[SEP]" and len(ins.tokens) == n
    assert ins.normalized.shape == ins.mask.shape == (6, 12, n, n)
    expected_rows = []
    for li in range(6):
        for hi in range(12):
            _, norm, high = reference_similarity(ex.head_outputs[0, li, hi, :n], np.ones(n, dtype=bool), 0.3)
            np.testing.assert_allclose(ins.normalized[li, hi], norm, atol=1e-5)
            expected_rows += [(li + 1, hi + 1, i, j) for i in range(n) for j in range(i + 1, n) if ins.mask[li, hi, i, j]]
            close = np.abs(norm - 0.3) < 1e-5
            np.testing.assert_array_equal(ins.mask[li, hi][~close], high[~close])
    got = list(zip(ins.pairs["layer"], ins.pairs["head"], ins.pairs["index_i"], ins.pairs["index_j"]))
    assert got == expected_rows
    head = ins.head_pairs()
    assert (head["layer"] == 5).all() and (head["head"] == 3).all()
    assert len(head) == int(np.triu(ins.mask[4, 2], 1).sum())
    # separators: [CLS]/[SEP] excluded, scores computed over the separator layer's heads
    special = np.isin(ex.input_ids[0, :n], [embedded.tokenizer.cls_token_id, embedded.tokenizer.sep_token_id])
    cols = ex.attention[0, embedded.n_layers - 1, :, :n, :n].sum(axis=(0, 1))
    cols[special] = 0
    np.testing.assert_allclose(ins.column_scores, cols / cols.max(), atol=1e-5)
    np.testing.assert_array_equal(ins.separators, np.flatnonzero(ins.column_scores > 0.5))
    np.testing.assert_array_equal(ins.blocks, block_ids(ins.separators, np.ones(n, dtype=bool)))


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
