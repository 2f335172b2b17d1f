"""One window of one text as every head of one model sees it, built once (``inspect`` and the explorer).

:func:`text_view` (a text) or :func:`window_view` (windows already cut) runs the model tap once on
the window's valid tokens and keeps what every per-text view reads: tokens, ids, character spans,
sentences, the framing positions, attention and head outputs, the normalised similarity
(:func:`headsim.context_similarity.normalized_similarity`, the corpus statistics' definition) and
each head's attention focus (:func:`headsim.stats.attention.attention_focus`, the function that
accumulates ``attn_focus`` over a corpus). What depends on a threshold or a layer (the
high-similarity mask, pair tables, separator columns, blocks) is a cheap method over those arrays,
so one view serves any threshold. Layers, heads and positions are 0-based here.

A window longer than the view resolution (:data:`VIEW_RESOLUTION`, the corpus statistics'
positional resolution) is kept as a binned overview: ``attention`` and ``normalized`` are
``[L, H, R, R]`` means over blocks of position bins (position ``p`` in bin ``p · R // n``), reduced
a block of query rows at a time as the model tap hands attention out (nothing ``[L, H, n, n]`` and
no whole layer's ``[H, n, n]`` is built; interface families). The head outputs (``[L, H, n, d]``,
linear in ``n``) and each head's exact maximum of ``Z·Zᵀ`` are kept, so :meth:`TextView.zoom` gives
exact attention and S of any region (attention by re-running the model up to that layer). Pair
tables follow one rule at every length: each head's most similar pairs, with the total count stated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..context_similarity import check_threshold, normalized_similarity
from ..display import HtmlDisplay
from ..errors import require
from ..model.masks import full_keys
from ..model.tap import TILE_BYTES, Tap, capture, tile_rows_for
from ..model.load import LoadedModel, as_loaded
from ..stats.attention import TARGETS, attention_focus, diagonal_sums
from ..stats.batch import batch_info, batch_tensors, position_bins
from ..stats.schema import DEFAULT_RESOLUTION
from ..windows import Windows, check_seq_len, check_texts, make_windows
from .arrays import (PAIR_COLUMNS, block_average, block_ids, column_scores, framing_positions, pair_rows, pair_table,
                     scores_from_columns, separator_lines, separators_from_scores)

#: windows of more valid tokens than this are viewed as a binned overview (the runs' positional resolution)
VIEW_RESOLUTION = DEFAULT_RESOLUTION
#: pairs kept per head in a pair table unless all are asked for (the most similar; the total is counted exactly)
PAIR_LIMIT = 300
#: largest side of a region :meth:`TextView.zoom` gives (tokens)
ZOOM_LIMIT = 512


@dataclass(frozen=True)
class Zoom:
    """Exact attention and normalised similarity of one head over a region: query rows
    ``rows`` × key columns ``cols`` (0-based token positions, ``range``s)."""

    layer: int
    head: int
    rows: range
    cols: range
    row_tokens: list[str]
    col_tokens: list[str]
    attention: np.ndarray  # [len(rows), len(cols)] float32
    normalized: np.ndarray  # [len(rows), len(cols)] float32


@dataclass(frozen=True, eq=False)
class TextView(HtmlDisplay):
    """One window's valid tokens (``n``) and every head's matrices over them (``L`` layers, ``H`` heads).

    Attributes:
        attention: ``[L, H, n, n]`` float32 probabilities as the model applies them (causal
            families: zero above the diagonal).
        head_outputs: ``[L, H, n, d]`` float32 each query head's output vectors Z.
        normalized: ``[L, H, n, n]`` float32 Z·Zᵀ with the diagonal zeroed, divided by its max.
        focus: ``attn_<target>`` → ``[L, H]`` float64 attention mass on each of
            :data:`headsim.stats.TARGETS` per query token (the corpus's ``attn_focus`` of this window
            divided by its query rows, as ``heads.parquet``'s ``attn_cls`` … ``attn_next``).
        special: ``[n]`` bool, the tokens the model's framing added ([CLS]/[SEP], BOS, EOS).
        offsets: ``[n, 2]`` character spans in ``text`` (-1 for framing tokens); ``sentences``
            ``[n]`` sentence number within the window (-1 for framing tokens).
        bins: ``None`` (an exact view), or for a long window ``[n]`` the position bin of every token;
            ``attention`` and ``normalized`` are then ``[L, H, R, R]`` means over bin blocks (the
            diagonal's zeros of S included), ``peaks`` ``[L, H]`` each head's exact max of Z·Zᵀ off
            the diagonal and ``column_sums`` ``[L, H, n]`` float64 attention summed over query rows.
        tile_rows: query rows per block when a long window's matrices are computed.
    """

    model: LoadedModel
    text: str
    seq_len: int
    window: int
    n_windows: int
    tokens: list[str]
    ids: np.ndarray
    offsets: np.ndarray
    sentences: np.ndarray
    special: np.ndarray
    attention: np.ndarray
    head_outputs: np.ndarray
    normalized: np.ndarray
    focus: dict[str, np.ndarray]
    bins: np.ndarray | None = None
    peaks: np.ndarray | None = None
    column_sums: np.ndarray | None = None
    tile_rows: int | None = None

    @property
    def binned(self) -> bool:
        """The matrices are a binned overview (a window above the view resolution)."""
        return self.bins is not None

    @property
    def bin_ranges(self) -> np.ndarray:
        """``[R, 2]`` first and one-past-last token position of each row/column of the matrices
        (``[i, i + 1]`` per token for an exact view)."""
        if self.bins is None:
            return np.stack([np.arange(self.n), np.arange(1, self.n + 1)], axis=1)
        r = int(self.attention.shape[-1])
        starts = np.searchsorted(self.bins, np.arange(r), side="left")
        return np.stack([starts, np.append(starts[1:], self.n)], axis=1)

    @property
    def labels(self) -> list[str]:
        """Names of the matrices' rows and columns: ``"i:token"``, or a bin's token positions ``"a–b"``."""
        if self.bins is None:
            return [f"{i}:{t}" for i, t in enumerate(self.tokens)]
        return [f"{a}–{b - 1}" for a, b in self.bin_ranges]

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return int(self.attention.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attention.shape[1])

    @property
    def causal(self) -> bool:
        """The model attends to earlier keys only (separator scores are then relative to chance)."""
        return bool(self.model.arch.causal)

    @property
    def valid(self) -> np.ndarray:
        return np.ones(self.n, dtype=bool)

    @property
    def nbytes(self) -> int:
        return int(self.attention.nbytes + self.head_outputs.nbytes + self.normalized.nbytes)

    def mask(self, threshold: float) -> np.ndarray:
        """``[L, H, n, n]`` bool: normalised similarity above ``threshold`` (compared in float32, as
        every statistic compares it). Exact views only (a long window: :meth:`mask_overview`)."""
        require(not self.binned, f"a window of {self.n} tokens is viewed on {self.attention.shape[-1]} position bins",
                "use mask_overview(threshold, layer, head), pair_counts or zoom for a long window")
        return self.normalized > np.float32(check_threshold(threshold))

    def column_scores(self, layer: int) -> np.ndarray:
        """``[n]`` normalised column attention of ``layer`` summed over its heads, framing tokens
        excluded (:func:`headsim.views.column_scores`)."""
        if self.binned:
            return scores_from_columns(self.column_sums[layer].sum(axis=0), self.valid, self.n_heads,
                                       exclude=self.special, causal=self.causal, dense=False)
        return column_scores(self.attention[layer], self.valid, exclude=self.special, causal=self.causal)

    def similarity_tiles(self, layer: int, heads: list[int] | None = None) -> Iterator[tuple[slice, np.ndarray]]:
        """Exact normalised similarity of ``layer``'s ``heads`` (default all) a block of query rows at
        a time: ``(rows, [len(heads), len(rows), n] float32)``."""
        heads = list(range(self.n_heads)) if heads is None else list(heads)
        if not self.binned:
            for_rows = self.normalized[layer][heads]
            yield slice(0, self.n), for_rows
            return
        z = torch.as_tensor(self.head_outputs[layer][heads])
        peak = torch.as_tensor(self.peaks[layer][heads], dtype=torch.float32)[:, None, None]
        scale = torch.where(peak > 0, 1.0 / torch.where(peak > 0, peak, torch.ones_like(peak)), torch.zeros_like(peak))
        step = self.tile_rows or self.n
        for start in range(0, self.n, step):
            rows = slice(start, min(start + step, self.n))
            s = torch.matmul(z[:, rows], z.transpose(-1, -2))
            s.diagonal(offset=start, dim1=-2, dim2=-1).zero_()
            yield rows, (s * scale).numpy()

    def mask_overview(self, threshold: float, layer: int, head: int) -> np.ndarray:
        """``[R, R]`` fraction of each bin block's pairs whose normalised similarity is above
        ``threshold`` (``[n, n]`` 0/1 for an exact view)."""
        thr = np.float32(check_threshold(threshold))
        if not self.binned:
            return (self.normalized[layer, head] > thr).astype(np.float64)
        r = int(self.attention.shape[-1])
        counts = torch.zeros(1, r, r, dtype=torch.float64)
        for rows, s in self.similarity_tiles(layer, [head]):
            counts += bin_pairs(torch.as_tensor(s > thr), rows, self.bins, r)
        size = np.bincount(self.bins, minlength=r).astype(np.float64)
        return counts[0].numpy() / np.outer(size, size)

    def separator_lines(self, separators: np.ndarray) -> np.ndarray:
        """Fig 5's separator rows and columns over the matrices' rows (a long window: the bins holding
        ``separators``)."""
        if not self.binned:
            return separator_lines(separators, self.n)
        return separator_lines(self.bins[np.asarray(separators, dtype=np.int64)], int(self.attention.shape[-1]))

    def block_average(self, layer: int, head: int, separators: np.ndarray) -> np.ndarray:
        """Fig 5's similarity of ``layer``'s ``head`` averaged over the blocks ``separators`` end (a long
        window: over blocks of bins, each bin in its first token's block)."""
        blocks = self.blocks(separators)
        return block_average(self.normalized[layer, head], blocks[self.bin_ranges[:, 0]] if self.binned else blocks)

    def threshold_counts(self, thresholds: np.ndarray) -> np.ndarray:
        """``[L, H, len(thresholds)]`` number of pairs ``i < j`` whose normalised similarity is above
        each threshold (increasing; compared in float32), exact, a block of query rows at a time."""
        edges = torch.as_tensor(np.asarray(thresholds, dtype=np.float32))
        k = len(edges)
        out = np.zeros((self.n_layers, self.n_heads, k), dtype=np.int64)
        for li in range(self.n_layers):
            for rows, s in self.similarity_tiles(li):
                upper = torch.arange(self.n)[None, :] > torch.arange(rows.start, rows.stop)[:, None]
                s = torch.as_tensor(s)
                for hi in range(self.n_heads):
                    below = torch.bucketize(s[hi][upper], edges)  # number of edges strictly below each value
                    per = torch.bincount(below, minlength=k + 1).numpy()
                    out[li, hi] += per[::-1].cumsum()[::-1][1:]  # values with more than m edges below: above edge m
        return out

    def pair_counts(self, threshold: float) -> np.ndarray:
        """``[L, H]`` int: number of pairs ``i < j`` above ``threshold`` per head (exact)."""
        thr = np.float32(check_threshold(threshold))
        out = np.zeros((self.n_layers, self.n_heads), dtype=np.int64)
        for li in range(self.n_layers):
            for rows, s in self.similarity_tiles(li):
                upper = np.arange(self.n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
                out[li] += ((s > thr) & upper[None]).sum(axis=(1, 2))
        return out

    def zoom(self, layer: int, head: int, rows: slice | range, cols: slice | range, *, limit: int = ZOOM_LIMIT) -> Zoom:
        """Exact attention and normalised similarity of ``layer``'s ``head`` over query rows ``rows`` ×
        key columns ``cols`` (token positions, at most ``limit`` each). S is divided by the head's maximum over the whole window; a long window's
        attention is recomputed by running the model up to ``layer``, a block of query rows at a time."""
        require(0 <= layer < self.n_layers and 0 <= head < self.n_heads, f"layer {layer}, head {head} (0-based) "
                "is out of range", f"this model has layers 0..{self.n_layers - 1} and heads 0..{self.n_heads - 1}")
        rows, cols = (_token_range(x, self.n, what) for x, what in ((rows, "rows"), (cols, "cols")))
        require(len(rows) <= limit and len(cols) <= limit, f"a zoom of {len(rows)} × {len(cols)} tokens is larger "
                f"than {limit} × {limit}", "zoom into a smaller region (the overview shows the whole window)")
        r, c = slice(rows.start, rows.stop), slice(cols.start, cols.stop)
        if not self.binned:
            attention, normalized = self.attention[layer, head, r, c], self.normalized[layer, head, r, c]
        else:
            z = torch.as_tensor(self.head_outputs[layer, head])
            s = torch.matmul(z[r], z[c].T)
            i = torch.arange(rows.start, rows.stop)[:, None]
            j = torch.arange(cols.start, cols.stop)[None, :]
            s = torch.where(i == j, torch.zeros((), dtype=s.dtype), s)
            peak = float(self.peaks[layer, head])
            normalized = (s / peak if peak > 0 else torch.zeros_like(s)).numpy()
            attention = attention_region(self.model, self.ids, layer, head, r, c, self.tile_rows)
        return Zoom(layer, head, rows, cols, self.tokens[r], self.tokens[c], np.asarray(attention, dtype=np.float32),
                    np.asarray(normalized, dtype=np.float32))

    def separators(self, layer: int, threshold: float) -> np.ndarray:
        """Positions whose column score in ``layer`` exceeds ``threshold`` (paper §2, Fig 5)."""
        return separators_from_scores(self.column_scores(layer), threshold)

    def blocks(self, separators: np.ndarray) -> np.ndarray:
        """``[n]`` block number of each token, a block ending at each of ``separators``."""
        return block_ids(separators, self.valid)

    def pairs(self, threshold: float, heads: list[tuple[int, int]] | None = None, *,
              limit: int | None = PAIR_LIMIT) -> pd.DataFrame:
        """Fig 9's table of high-similarity pairs ``i < j`` of ``heads`` ((layer, head) pairs; default
        every head, layer by layer), layers and heads written 1-based; one rule at every window length.

        Each head keeps its ``limit`` most similar pairs (:data:`PAIR_LIMIT` unless given), most similar
        first; ``limit=None`` lists every pair, sorted by position. ``attrs["total"]`` is the exact
        number of pairs above the threshold over ``heads`` either way, ``attrs["limit"]`` the cap."""
        heads = [(li, hi) for li in range(self.n_layers) for hi in range(self.n_heads)] if heads is None else heads
        if limit is None and not self.binned:
            mask = self.mask(threshold)
            table = pd.concat([pair_table(self.normalized[li, hi], mask[li, hi], self.tokens, layer=li, head=hi)
                               for li, hi in heads], ignore_index=True) if heads else pd.DataFrame(columns=PAIR_COLUMNS)
            table.attrs.update(total=len(table), limit=None)
            return table
        require(limit is None or int(limit) >= 1, f"pair limit {limit} must be 1 or more",
                "pass a positive number of pairs per head, or None for every pair")
        thr = np.float32(check_threshold(threshold))
        parts, total = [], 0
        by_layer: dict[int, list[int]] = {}
        for li, hi in heads:
            by_layer.setdefault(li, []).append(hi)
        found: dict[tuple[int, int], tuple] = {}
        for li, hs in by_layer.items():
            kept = {hi: [(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))] for hi in hs}
            for rows, s in self.similarity_tiles(li, hs):
                upper = np.arange(self.n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
                for k, hi in enumerate(hs):
                    i, j = np.nonzero((s[k] > thr) & upper)
                    total += len(i)
                    kept[hi].append((i + rows.start, j, s[k][i, j]))
                    if limit is not None:
                        ki, kj, kv = (np.concatenate(x) for x in zip(*kept[hi]))
                        top = np.lexsort((kj, ki, -kv))[:int(limit)]
                        kept[hi] = [(ki[top], kj[top], kv[top])]
            found.update({(li, hi): tuple(np.concatenate(x) for x in zip(*v)) for hi, v in kept.items()})
        for li, hi in heads:
            i, j, v = found[(li, hi)]
            parts.append(pair_rows(i, j, v, self.tokens, layer=li, head=hi))
        table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=PAIR_COLUMNS)
        table.attrs.update(total=int(total), limit=None if limit is None else int(limit))
        return table

    def _html_body(self) -> tuple[str, str]:
        """The interactive head explorer of this window (grid, attention, S, mask, tokens, pairs)."""
        from .html import text_view_html

        return f"headsim: {self.n} tokens", text_view_html(self)

    def window_text(self) -> tuple[str, int]:
        """The part of the text this window covers, and the character position it starts at."""
        real = self.offsets[:, 0] >= 0
        if not real.any():
            return "", 0
        start, end = int(self.offsets[real, 0].min()), int(self.offsets[real, 1].max())
        return self.text[start:end], start


def _token_range(x: slice | range, n: int, what: str) -> range:
    """Token positions ``x`` (a step-1 ``slice`` or ``range`` within ``0..n``) as a non-empty ``range``."""
    require(isinstance(x, (slice, range)) and x.step in (None, 1), f"zoom {what} {x!r} is not a range of positions",
            "pass slice(start, stop) or range(start, stop) of token positions")
    start, stop, _ = slice(x.start, x.stop).indices(n)
    require(stop > start, f"zoom {what} {x!r} selects no token of the window's {n}", f"pass positions within 0..{n - 1}")
    return range(start, stop)


def attention_region(loaded: LoadedModel, ids: np.ndarray, layer: int, head: int, rows: slice, cols: slice,
                     tile_rows: int | None = None) -> np.ndarray:
    """``[rows, cols]`` float32 attention of ``layer``'s ``head`` on one window of valid tokens
    ``ids``, the model run up to ``layer`` with attention handed out a block of query rows at a time
    (interface families; others hand the model's whole layer, then cut)."""
    out = np.zeros((rows.stop - rows.start, cols.stop - cols.start), dtype=np.float32)

    def on_tile(li: int, block: slice, probs: torch.Tensor, keys: slice) -> None:
        lo, hi = max(block.start, rows.start), min(block.stop, rows.stop)
        if li == layer and lo < hi:
            probs = full_keys(probs, keys, len(ids))
            out[lo - rows.start:hi - rows.start] = probs[0, head, lo - block.start:hi - block.start, cols].float().cpu().numpy()

    tap = Tap(loaded, layers=[layer], attention=True, head_outputs=False, stop_early=True, tile_rows=tile_rows)
    mask = np.ones((1, len(ids)), dtype=np.int64)
    if loaded.arch.interface:
        tap.run(ids[None], mask, on_tile=on_tile)
    else:
        got = tap.run(ids[None], mask).layers[layer].attention
        on_tile(layer, slice(0, len(ids)), got, slice(0, len(ids)))
    return out


def bin_pairs(block: torch.Tensor, rows: slice, bins: np.ndarray, r: int) -> torch.Tensor:
    """A block of query rows ``[H, rows, n]`` summed into bin pairs ``[H, R, R]`` float64 (``bins``
    ``[n]`` non-decreasing: each bin a run of positions, so keys are summed by running sums)."""
    index = torch.as_tensor(bins)
    n = block.shape[-1]
    if n % r == 0:  # equal bins of n / R positions
        per_key = block.reshape(*block.shape[:-1], r, n // r).sum(dim=-1, dtype=torch.float64)  # [H, rows, R]
    else:
        stops = torch.as_tensor(np.searchsorted(bins, np.arange(r), side="right") - 1)  # last position of each bin
        running = block.to(torch.float64).cumsum(dim=-1).index_select(-1, stops)
        per_key = torch.diff(running, dim=-1, prepend=torch.zeros_like(running[..., :1]))
    out = torch.zeros(block.shape[0], r, r, dtype=torch.float64)
    return out.index_add_(1, index[rows], per_key)


def _overview(loaded: LoadedModel, ids: np.ndarray, resolution: int, tile_rows: int | None, progress=None) -> dict:
    """One pass of the model over a long window: binned means of attention and normalised S
    ``[L, H, R, R]``, each head's exact max of S, column and near-diagonal sums of attention, and
    the head outputs (see the module docstring)."""
    n, L, H = len(ids), loaded.n_layers, loaded.n_heads
    bins = position_bins(n, resolution)
    size = torch.as_tensor(np.bincount(bins, minlength=resolution), dtype=torch.float64)
    blocks = size[:, None] * size[None, :]
    # one layer's sums in float64 at a time, kept as float32 means once the layer is complete (the
    # values a float64 [L, H, R, R] would give, at a quarter of its memory)
    attention = np.zeros((L, H, resolution, resolution), dtype=np.float32)
    layer_sum = torch.zeros(H, resolution, resolution, dtype=torch.float64)
    column_sums = torch.zeros(L, H, n, dtype=torch.float64)
    diagonals = torch.zeros(L, H, 2, dtype=torch.float64)
    outputs: dict[int, torch.Tensor] = {}

    def binned(block: torch.Tensor, rows: slice) -> torch.Tensor:
        return bin_pairs(block, rows, bins, resolution)

    def on_tile(layer: int, rows: slice, probs: torch.Tensor, keys: slice) -> None:
        p = full_keys(probs[0].float().cpu(), keys, n)  # [H, rows, n]
        layer_sum.add_(binned(p, rows))
        column_sums[layer] += p.sum(dim=1, dtype=torch.float64)
        for slot, offset in enumerate((-1, 1)):
            diagonals[layer, :, slot] += p.diagonal(offset=rows.start + offset, dim1=1, dim2=2).to(torch.float64).sum(dim=-1)

    def on_layer(cap) -> None:
        if cap.attention is not None:  # families outside the interface hand the whole layer
            for start in range(0, n, step):
                on_tile(cap.layer, slice(start, min(start + step, n)), cap.attention[:, :, start:start + step], slice(0, n))
        attention[cap.layer] = (layer_sum / blocks).float().numpy()
        layer_sum.zero_()
        outputs[cap.layer] = cap.head_outputs[0].float().cpu()
        if progress is not None:
            progress(cap.layer + 1, 2 * L)

    step = tile_rows
    tap = Tap(loaded, attention=True, head_outputs=True, stop_early=True, tile_rows=tile_rows)
    mask = np.ones((1, n), dtype=np.int64)
    tap.run(ids[None], mask, on_layer, on_tile=on_tile if loaded.arch.interface else None)
    del layer_sum
    z = torch.stack([outputs.pop(li) for li in range(L)])  # [L, H, n, d]
    normalized = np.zeros_like(attention)
    peaks = torch.zeros(L, H, dtype=torch.float32)
    for li in range(L):
        similarity = torch.zeros(H, resolution, resolution, dtype=torch.float64)
        for start in range(0, n, step):
            rows = slice(start, min(start + step, n))
            s = torch.matmul(z[li, :, rows], z[li].transpose(-1, -2))
            s.diagonal(offset=start, dim1=-2, dim2=-1).zero_()
            peaks[li] = torch.maximum(peaks[li], s.amax(dim=(-1, -2)))
            similarity += binned(s, rows)
        scale = torch.where(peaks[li] > 0, 1.0 / torch.where(peaks[li] > 0, peaks[li], torch.ones_like(peaks[li])),
                            torch.zeros_like(peaks[li]))
        normalized[li] = (similarity / blocks * scale.to(torch.float64)[:, None, None]).float().numpy()
        if progress is not None:
            progress(L + li + 1, 2 * L)
    return {"bins": bins, "attention": attention, "normalized": normalized,
            "peaks": peaks.numpy(), "column_sums": column_sums.numpy(), "diagonals": diagonals, "head_outputs": z.numpy()}


def check_window(window: int, n_windows: int) -> int:
    """0-based window index, with a clear error when the text has no such window."""
    require(isinstance(window, (int, np.integer)) and 0 <= window < n_windows, f"window {window} does not exist",
            f"this text has windows 0..{n_windows - 1}")
    return int(window)


def cut_text(text: str, loaded: LoadedModel, seq_len: int) -> Windows:
    """``text`` (validated) cut into the model's framed windows of ``seq_len`` (validated), as
    :func:`headsim.extraction.extract` cuts it."""
    check_texts(text)
    return make_windows(text, loaded.tokenizer, check_seq_len(seq_len, loaded.max_seq_len, loaded.extrapolates), framing=loaded.framing)


def window_focus(attention: np.ndarray, ids: np.ndarray, sentences: np.ndarray, loaded: LoadedModel) -> dict[str, np.ndarray]:
    """``attn_<target>`` → ``[L, H]``: the corpus statistic ``attn_focus`` of one window of valid tokens
    (``attention`` ``[L, H, n, n]``), per query token. The key targets are the corpus's
    (:func:`headsim.stats.batch_info` on the window's ids), the sums :func:`attention_focus`'s."""
    a = torch.as_tensor(attention, dtype=torch.float32)
    return focus_from_sums([a[li][None].sum(dim=-2) for li in range(a.shape[0])],
                           [diagonal_sums(a[li][None]) for li in range(a.shape[0])], ids, sentences, loaded)


def focus_from_sums(column_sums: list[torch.Tensor], diagonals: list[tuple[torch.Tensor, torch.Tensor]], ids: np.ndarray,
                    sentences: np.ndarray, loaded: LoadedModel) -> dict[str, np.ndarray]:
    """:func:`window_focus` from each layer's column sums ``[1, H, n]`` and near-diagonal sums
    (:func:`headsim.stats.attention.diagonal_sums`), so a long window needs no ``[n, n]`` matrix."""
    n = len(ids)
    bt = batch_tensors(batch_info(ids[None], np.ones((1, n), dtype=np.int64), sentences[None], loaded.tokenizer,
                                  framing=loaded.framing))
    sums = torch.stack([attention_focus(c, d, bt.key_targets) for c, d in zip(column_sums, diagonals)])  # [L, H, targets]
    per_query = (sums / n).numpy()
    return {f"attn_{t}": per_query[..., k] for k, t in enumerate(TARGETS)}


def window_view(loaded: LoadedModel, windows: Windows, window: int, text: str = "", *,
                resolution: int = VIEW_RESOLUTION, tile_rows: int | None = None, progress=None) -> TextView:
    """Run the model once on window ``window`` of ``windows`` (its valid tokens only: the numbers equal
    those of :func:`headsim.extraction.extract` up to float rounding) and build its :class:`TextView`.
    ``text`` is the text the windows were cut from (for :meth:`TextView.window_text`). A window of
    more than ``resolution`` valid tokens is viewed on ``resolution`` position bins, computed
    ``tile_rows`` query rows at a time (default: as many as the tap's block budget holds).
    ``progress(done, total)``, where given, is called as the layers are done."""
    w = check_window(window, len(windows))
    require(isinstance(resolution, (int, np.integer)) and resolution >= 2, f"view resolution {resolution!r} must be "
            "a whole number of at least 2", "pass the number of position bins a long window is viewed on (e.g. 512)")
    n = int(windows.attention_mask[w].sum())
    ids = np.asarray(windows.input_ids[w, :n], dtype=np.int64)
    sentences = np.asarray(windows.sentence_ids[w, :n], dtype=np.int64)
    common = dict(model=loaded, text=text, seq_len=windows.seq_len, window=w, n_windows=len(windows),
                  tokens=list(windows.tokens[w][:n]), ids=ids, offsets=windows.offsets[w, :n].copy(), sentences=sentences,
                  special=framing_positions(loaded.framing, n))
    if n > resolution:
        rows = tile_rows or tile_rows_for(TILE_BYTES, 1, loaded.n_heads, n)
        o = _overview(loaded, ids, int(resolution), rows, progress)
        d = o["diagonals"]
        focus = focus_from_sums([torch.as_tensor(c)[None] for c in o["column_sums"]],
                                [(d[li, :, 0], d[li, :, 1]) for li in range(loaded.n_layers)], ids, sentences, loaded)
        return TextView(**common, attention=o["attention"], head_outputs=o["head_outputs"], normalized=o["normalized"],
                        focus=focus, bins=o["bins"], peaks=o["peaks"], column_sums=o["column_sums"], tile_rows=rows)
    got = capture(loaded, ids[None], np.ones((1, n), dtype=np.int64))
    if progress is not None:
        progress(loaded.n_layers, loaded.n_layers)
    attention = got["attention"][0].float().cpu()  # [L, H, n, n]
    outputs = got["head_outputs"][0].float().cpu()  # [L, H, n, d]
    return TextView(
        **common, attention=attention.numpy(), head_outputs=outputs.numpy(),
        normalized=normalized_similarity(outputs).numpy(),
        focus=window_focus(attention.numpy(), ids, sentences, loaded),
    )


def text_view(text: str, model: LoadedModel | str | None = None, *, seq_len: int = 128, window: int = 0,
              device: str | None = None, resolution: int = VIEW_RESOLUTION, tile_rows: int | None = None,
              progress=None) -> TextView:
    """The :class:`TextView` of window ``window`` (0-based) of ``text`` cut into windows of ``seq_len``
    tokens (framing included) for ``model`` (a :class:`~headsim.model.load.LoadedModel` or a name);
    ``resolution``, ``tile_rows`` and ``progress`` as :func:`window_view`'s."""
    loaded = as_loaded(model, device=device)
    return window_view(loaded, cut_text(text, loaded, seq_len), window, text, resolution=resolution, tile_rows=tile_rows,
                       progress=progress)
