"""Per-text views of one window (paper Figs 4, 5 and 9), as pure array functions.

Fig 4: attention of a head and summed over a layer's heads. Fig 5: high-attention separator
columns of the last layer delineate blocks on the similarity matrix; the block-averaged matrix
shows where similarity concentrates. Fig 9: the table of high-similarity token pairs of a head.
All positions are 0-based here; tables and figures show layers and heads 1-based.
"""

from __future__ import annotations

import numpy as np
import torch
import pandas as pd

from ..errors import require
from ..context_similarity import check_threshold

PAIR_COLUMNS = ["layer", "head", "token_i", "token_j", "index_i", "index_j", "similarity"]


def framing_positions(framing, n: int) -> np.ndarray:
    """``[n]`` boolean: the positions of a window's ``n`` valid tokens that its framing added (the
    opening token first, the closing token last; :class:`headsim.windows.Framing`). Separator
    columns never include them."""
    special = np.zeros(int(n), dtype=bool)
    if n > 0 and framing.open is not None:
        special[0] = True
    if n > 0 and framing.close is not None:
        special[n - 1] = True
    return special


def causal_chance(valid: torch.Tensor) -> torch.Tensor:
    """``[B, T]``: the attention each key column would receive, summed over valid query rows, if
    every row of a causal map spread its mass evenly over the valid keys it sees (``valid`` ``[B, T]``)."""
    v = valid.bool()
    t = v.shape[-1]
    sees = v[:, :, None] & v[:, None, :] & torch.ones(t, t, dtype=torch.bool, device=v.device).tril()
    visible = sees.sum(-1, keepdim=True).clamp_min(1)
    return (sees / visible).sum(-2).to(torch.float64)


def column_scores(attention: np.ndarray, valid: np.ndarray, *, exclude: np.ndarray | None = None,
                  causal: bool = False) -> np.ndarray:
    """Attention each key column receives, summed over heads and valid queries, divided by its max.

    In a causal model column ``j`` is seen only by queries ``i >= j``, and early columns collect mass
    from every later row whatever they hold; there each column's sum is divided by what uniform
    attention over every row's visible keys would give it, so a column scores by how much more than
    chance it is attended to. For bidirectional attention that chance level is the same for every
    column, and the scores are the paper's plain column sums divided by their max.

    Args:
        attention: ``[H, T, T]`` (or ``[T, T]``) attention of one window.
        valid: ``[T]`` boolean, non-padding positions.
        exclude: ``[T]`` boolean, columns left out of the max and scored 0 (e.g. [CLS]/[SEP]/BOS).
        causal: the model attends to earlier keys only.

    Returns:
        ``[T]`` scores in [0, 1]; 0 for padding and excluded columns.
    """
    a = np.asarray(attention, dtype=np.float64)
    a = a[None] if a.ndim == 2 else a
    valid = np.asarray(valid, dtype=bool)
    cols = (a * valid[None, :, None]).sum(axis=(0, 1))
    return scores_from_columns(cols, valid, a.shape[0], exclude=exclude, causal=causal)


def scores_from_columns(cols: np.ndarray, valid: np.ndarray, n_heads: int, *, exclude: np.ndarray | None = None,
                        causal: bool = False, dense: bool = True) -> np.ndarray:
    """:func:`column_scores` from the column sums ``cols`` ``[T]`` (attention summed over ``n_heads``
    heads and the valid query rows), so a long window's scores need no ``[T, T]`` matrix.
    ``dense=False`` computes a causal model's chance level of an all-valid window in closed form
    (``O(T)`` memory; equal to :func:`causal_chance` up to float rounding)."""
    cols = np.asarray(cols, dtype=np.float64)
    valid = np.asarray(valid, dtype=bool)
    if causal:
        if not dense and valid.all():  # every row sees the keys up to itself: chance of column j is Σ_{i ≥ j} 1/(i+1)
            chance = np.cumsum((1.0 / np.arange(1, len(valid) + 1))[::-1])[::-1] * n_heads
        else:
            chance = causal_chance(torch.as_tensor(valid)[None]).numpy()[0] * n_heads
        cols = np.divide(cols, chance, out=np.zeros_like(cols), where=chance > 0)
    keep = valid & ~(np.zeros_like(valid) if exclude is None else np.asarray(exclude, dtype=bool))
    cols = np.where(keep, cols, 0.0)
    peak = cols.max() if keep.any() else 0.0
    return cols / peak if peak > 0 else np.zeros_like(cols)


def separator_columns(attention: np.ndarray, valid: np.ndarray, threshold: float = 0.5, *,
                      exclude: np.ndarray | None = None, causal: bool = False) -> np.ndarray:
    """Positions whose normalised column attention exceeds ``threshold`` (paper §2, Fig 5)."""
    return separators_from_scores(column_scores(attention, valid, exclude=exclude, causal=causal), threshold)


def separators_from_scores(scores: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Positions whose normalised column score (from :func:`column_scores`) exceeds ``threshold``."""
    threshold = check_threshold(threshold, "separator threshold")
    return np.flatnonzero(np.asarray(scores) > threshold)


def block_ids(separators: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Block number of each position: a block ends at (and includes) each separator position.

    Padding gets -1. With no separators every valid position is block 0.
    """
    valid = np.asarray(valid, dtype=bool)
    t = valid.shape[0]
    ends = np.zeros(t, dtype=np.int64)
    seps = np.asarray(separators, dtype=np.int64)
    seps = seps[(seps >= 0) & (seps < t - 1)]
    ends[seps + 1] = 1
    ids = np.cumsum(ends)
    return np.where(valid, ids, -1)


def separator_lines(separators: np.ndarray, t: int) -> np.ndarray:
    """``[T, T]`` boolean: the rows and columns of separator positions (Fig 5 bottom-left mask)."""
    line = np.zeros(t, dtype=bool)
    line[np.asarray(separators, dtype=np.int64)] = True
    return line[:, None] | line[None, :]


def block_average(matrix: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Replace each (block a, block b) region of ``matrix`` ``[T, T]`` by its mean (padding → 0).

    The mean runs over the region's entries off the diagonal, so the zeroed diagonal of a
    normalised similarity matrix does not dilute small blocks.
    """
    m = np.asarray(matrix, dtype=np.float64)
    blocks = np.asarray(blocks)
    n = int(blocks.max()) + 1 if (blocks >= 0).any() else 0
    out = np.zeros_like(m)
    if n == 0:
        return out
    onehot = (blocks[:, None] == np.arange(n)[None, :]).astype(np.float64)  # [T, n]
    off = 1.0 - np.eye(m.shape[0])
    sums = onehot.T @ (m * off) @ onehot
    counts = onehot.T @ off @ onehot
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    valid = blocks >= 0
    idx = np.where(valid, blocks, 0)
    out = means[idx[:, None], idx[None, :]]
    return np.where(valid[:, None] & valid[None, :], out, 0.0)


def pair_table(normalized: np.ndarray, mask: np.ndarray, tokens: list[str], *, layer: int, head: int) -> pd.DataFrame:
    """High-similarity pairs ``i < j`` of one head (Fig 9), sorted by position.

    ``layer`` and ``head`` are 0-based arguments and written 1-based in the table.
    """
    mask = np.asarray(mask, dtype=bool)
    require(mask.ndim == 2 and mask.shape[0] == mask.shape[1] == len(tokens),
            f"mask shape {mask.shape} does not match {len(tokens)} tokens", "pass one head's [T, T] mask")
    i, j = np.nonzero(np.triu(mask, k=1))
    return pair_rows(i, j, np.asarray(normalized, dtype=np.float64)[i, j], tokens, layer=layer, head=head)


def pair_rows(i: np.ndarray, j: np.ndarray, similarity: np.ndarray, tokens: list[str], *, layer: int,
              head: int) -> pd.DataFrame:
    """Fig 9's table rows of the pairs ``(i[k], j[k])`` of one head with their ``similarity``, in the
    order given (``layer`` and ``head`` 0-based, written 1-based)."""
    return pd.DataFrame({
        "layer": np.full(i.shape, layer + 1, dtype=np.int64),
        "head": np.full(i.shape, head + 1, dtype=np.int64),
        "token_i": [tokens[k] for k in i],
        "token_j": [tokens[k] for k in j],
        "index_i": i.astype(np.int64),
        "index_j": j.astype(np.int64),
        "similarity": np.asarray(similarity, dtype=np.float64),
    }, columns=PAIR_COLUMNS)
