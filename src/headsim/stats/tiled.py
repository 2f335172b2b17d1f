"""Statistics of windows longer than the resolution, a block of query rows at a time, on position bins.

A window of ``T`` tokens with ``T > resolution`` keeps every position-pair statistic on
``R = resolution`` equal position bins (position ``p`` in bin ``p · R // T``; distances on ``R`` bins,
one per distance up to a few dozen tokens, then log-spaced: :func:`headsim.stats.batch.distance_bins`), so
the accumulators do not grow with ``T``; per-window and per-head statistics stay exact. Nothing
``[heads, T, T]`` exists: attention arrives in blocks of query rows (the model tap's ``on_tile``, or
computed here from queries and keys for ``plain`` families) and is reduced as it comes
(:class:`AttentionTiles`); the similarity ``S = Z·Zᵀ`` is built tile by tile twice, only its tiles
on and above the diagonal (:func:`pair_reductions_tiled`): a first pass takes each window's and
head's exact maximum over off-diagonal entries, the second normalises by it with the same float32
division as the whole matrix, so every threshold decision is the one the whole matrix gives.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from ..memory import Scratch
from ..model.plain import attention_probs, head_matmul
from .attention import attention_focus, top_columns
from .batch import BatchTensors, distance_bins, position_bins
from .pairs import PairReductions, SimBins
from .sums import WindowSum


@dataclass
class Bins:
    """Position bins of one window length on one device."""

    t: int
    r: int
    index: torch.Tensor  # [T] int64 bin of every position
    distance: torch.Tensor  # [T] int64 bin of every distance (exact short distances, then log-spaced)

    @classmethod
    def build(cls, t: int, r: int, device) -> Bins:
        return cls(t, r, torch.as_tensor(position_bins(t, r), device=device),
                   torch.as_tensor(distance_bins(t, r), device=device))

    def ends(self) -> np.ndarray:
        """``[R]`` int64: the first position after each bin."""
        return np.searchsorted(self.index.cpu().numpy(), np.arange(1, self.r + 1)).astype(np.int64)

    def keys(self, x: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``[..., T]`` summed into key bins ``[..., R]`` (same dtype); ``index``: the bins of
        ``x``'s last dimension where it is not every position."""
        if index is None and self.t % self.r == 0:  # bins of equal width: a reshaped sum
            return x.unflatten(-1, (self.r, self.t // self.r)).sum(dim=-1)
        out = torch.zeros(*x.shape[:-1], self.r, dtype=x.dtype, device=x.device)
        return out.index_add_(x.ndim - 1, self.index if index is None else index, x)


def block_rows(budget: int, windows: int, heads: int, t: int, copies: int = 6) -> int:
    """Query rows per block so that ``copies`` float32 ``[windows, heads, rows, T]`` fit ``budget`` bytes."""
    return max(1, min(t, int(budget) // max(1, copies * windows * heads * t * 4)))


class AttentionTiles:
    """One layer's attention of one batch, reduced block by block.

    Kept per window and head: float64 column sums ``[B, H, T]`` (the top columns are ranked from
    them), the attention summed over each query bin per key ``[B, H, R, T]`` float32 (the zeroed top
    columns are taken back out of it per bin) and the near-diagonal entries ``[B, H, T, 3]``
    (``key = query − 1, query, query + 1``). ``kernel``: each block is read once by the GPU kernel
    (:func:`headsim.stats.triton_long.attention_block`; bins as :func:`~headsim.stats.batch.kernel_tiles` allows), else by
    torch operations.
    """

    def __init__(self, bt: BatchTensors, n_heads: int, bins: Bins, kernel: bool = False) -> None:
        b, t = bt.valid.shape
        dev = bt.valid.device
        self.bt, self.bins = bt, bins
        self.column_sums = torch.zeros(b, n_heads, t, dtype=torch.float64, device=dev)
        self.per_query_bin = torch.zeros(b, n_heads, bins.r, t, dtype=torch.float32, device=dev)
        self.near = torch.zeros(b, n_heads, t, 3, dtype=torch.float32, device=dev)
        self.rows_done = 0
        self.kernel = kernel

    def add(self, rows: slice, probs: torch.Tensor, keys: slice | None = None) -> None:
        """Add the probabilities of query rows ``rows`` ``[B, H, rows, keys]`` (in order, each row once)
        over key columns ``keys`` (default all ``T``; every probability outside them is 0)."""
        from ..errors import require

        require(rows.start == self.rows_done, f"attention rows {rows.start}.. arrived after rows ..{self.rows_done}",
                "hand the blocks of one layer in order")
        bt, t = self.bt, self.bins.t
        keys = slice(0, t) if keys is None else keys
        if self.kernel:
            from . import triton_long

            triton_long.attention_block(probs, rows, keys, bt.valid, t // self.bins.r, self.column_sums,
                                        self.per_query_bin, self.near)
            self.rows_done = rows.stop
            return
        a = probs.to(torch.float32)
        if bt.padded:
            keep = bt.valid[:, None, rows, None] & bt.valid[:, None, None, keys]
            a = torch.where(keep, a, torch.zeros((), device=a.device))
        columns = a.sum(dim=-2)
        self.column_sums[..., keys] += columns  # float32 within a block, float64 across blocks
        index = self.bins.index[rows]
        if bool(index[0] == index[-1]):  # one query bin: its sum over the block's rows is the column sums
            self.per_query_bin[:, :, int(index[0]), keys] += columns
        else:
            self.per_query_bin[..., keys].index_add_(2, index, a)
        for slot, offset in enumerate((-1, 0, 1)):
            # key rows.start + i + offset of query row i sits on a diagonal of the block
            got = a.diagonal(offset=rows.start + offset - keys.start, dim1=2, dim2=3)  # [B, H, m]
            first = max(0, keys.start - rows.start - offset)  # the first row whose key is inside the block
            self.near[:, :, rows.start + first:rows.start + first + got.shape[-1], slot] = got
        self.rows_done = rows.stop

    def add_scores(self, scores, rows: int) -> torch.Tensor | None:
        """Add a whole layer's attention given as its scaled scores (:class:`headsim.model.scores.Scores`):
        recomputed by the GPU kernel (:func:`headsim.stats.triton_long.attention_scores`; returns ``None``),
        else a block of ``rows`` query rows at a time by torch over the keys each block may attend
        (:meth:`~headsim.model.scores.Scores.probabilities`), returning the layer's head outputs ``[B, H, T, d]``
        from the same probabilities where ``scores`` has the values (a view of ``[B, T, H, d]`` memory, the
        layout the model goes on with)."""
        from ..errors import require

        t = self.bins.t
        require(self.rows_done == 0, f"attention scores arrived after rows ..{self.rows_done}", "hand a layer's scores alone")
        if self.kernel:
            from . import triton_long

            triton_long.attention_scores(scores.query, scores.key, scores.scale, scores.causal, scores.window,
                                         self.bt.valid, t // self.bins.r, self.column_sums, self.per_query_bin, self.near)
            self.rows_done = t
            return None
        out = None
        if scores.value is not None:
            b, h = scores.query.shape[:2]
            out = torch.empty(b, t, h, scores.value.shape[-1], device=scores.value.device).transpose(1, 2)
        for start in range(0, t, rows):
            block = slice(start, min(start + rows, t))
            keys = scores.keys(block)
            probs = scores.probabilities(block, keys)
            if out is not None:
                out[:, :, block] = scores.outputs(probs, keys)
            self.add(block, probs, keys)
        return out

    def finish(self, top_k: int, into: dict[str, torch.Tensor]) -> None:
        """Add the layer's attention statistics to its accumulator slices ``into`` (binned)."""
        from ..errors import require

        bt, bins = self.bt, self.bins
        b, h, r, t = self.per_query_bin.shape
        require(self.rows_done == t, f"attention of {self.rows_done} of {t} query rows arrived", "hand every block of the layer")
        sums = self.column_sums
        top = top_columns(sums, bt.valid, top_k, lambda bi, hi: sums[bi, hi])  # [B, H, k]
        k = top.shape[-1]
        # every [H, R, R] step in place on one float64 sum: plain, less the top columns, less the near diagonals
        zeroed = bins.keys(self.per_query_bin).sum(dim=0, dtype=torch.float64)  # [H, R, R]
        into["attn_sum"] += zeroed
        taken = self.per_query_bin.gather(3, top[:, :, None, :].expand(b, h, r, k))  # [B, H, R, k]
        key_bins = bins.index[top].permute(1, 0, 2).reshape(h, 1, b * k).expand(h, r, b * k)
        zeroed.scatter_add_(2, key_bins, taken.permute(1, 2, 0, 3).reshape(h, r, b * k).to(torch.float64).neg_())
        into["attn_sum_top_zeroed"] += zeroed
        # near-diagonal entries of the top-zeroed attention, binned, taken out of it
        is_top = torch.zeros(b, h, t, dtype=torch.bool, device=top.device).scatter_(2, top, True)
        q = torch.arange(t, device=top.device)
        at, values = [], []
        for slot, offset in enumerate((-1, 0, 1)):
            key = q + offset
            inside = (key >= 0) & (key < t)
            qi, ki = q[inside], key[inside]
            at.append(bins.index[qi] * r + bins.index[ki])
            values.append((self.near[:, :, qi, slot] * ~is_top[:, :, ki]).sum(dim=0, dtype=torch.float64))
        zeroed.view(h, r * r).index_add_(1, torch.cat(at), torch.cat(values, dim=1).neg_())
        into["attn_sum_top_diag_zeroed"] += zeroed
        diagonals = tuple(self.near[..., s].to(torch.float64).sum(dim=(0, 2)) for s in (0, 2))
        into["attn_focus"] += attention_focus(sums, diagonals, bt.key_targets)


def attention_blocks(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor | None, bt: BatchTensors,
                     scale: float | None, rows: int, tiles: AttentionTiles, head_outputs: torch.Tensor) -> None:
    """A ``plain`` family's attention, a block of query rows at a time, into ``tiles``; with ``value``
    the head outputs of each block are written into ``head_outputs`` (as the eager backend computes them)."""
    t = query.shape[2]
    for start in range(0, t, rows):
        block = slice(start, min(start + rows, t))
        probs = attention_probs(query[:, :, block], key, bt.valid, bt.padded, scale)
        if value is not None:
            head_outputs[:, :, block] = head_matmul(probs, value.float())
        tiles.add(block, probs)
        del probs


def _tile_size(rows: int, t: int, width: int | None, largest: int = 1024) -> int:
    """Side of the square similarity tiles: about as many entries as a block of ``rows`` query rows,
    at most ``largest`` (matmul- and cache-friendly), a multiple of the bin width ``width`` where bins align."""
    side = min(t, largest, max(1, int((rows * t) ** 0.5)))
    if width:
        side = max(width, side // width * width)
    return side


def _binned_tile(x: torch.Tensor, bins: Bins, a: int, b: int, width: int | None, out: torch.Tensor) -> None:
    """Add a tile ``x`` ``[B, H, r, c]`` (rows ``a..``, key columns ``b..`` in reverse order) summed over
    windows into the bin pairs ``out`` ``[H, R, R]`` float64."""
    bsz, h, r, c = x.shape
    if width:  # every bin is ``width`` consecutive positions and the tile is cut on bin edges
        # rows first (whole rows added: vectorised), then the ``width`` keys of a bin in the smaller result
        rows = x.reshape(bsz * h, r // width, width, c).sum(dim=2)
        part = rows.view(bsz, h, r // width, c // width, width).sum(dim=(0, 4)).flip(-1)
        out[:, a // width:(a + r) // width, b // width:(b + c) // width] += part
        return
    per_key = bins.keys(x.sum(dim=0, dtype=torch.float32).flip(-1), bins.index[b:b + c])  # [H, r, R]
    out.index_add_(1, bins.index[a:a + r], per_key.to(torch.float64))



#: the largest tile side of the CPU kernel: a head's tile (1 MiB) stays in the core's cache between the
#: matrix product that writes it and the kernel that reads it
FUSED_SIDE = 512


def _tiles(t: int, side: int) -> list[tuple[int, int]]:
    """Starts ``(row, key)`` of the square tiles of side ``side`` on and above the diagonal."""
    starts = range(0, t, side)
    return [(i, j) for i in starts for j in starts if j >= i]


def _similarity_tile(zf: torch.Tensor, a: int, c0: int, r: int, c: int, out: torch.Tensor) -> torch.Tensor:
    """Rows ``a..a+r``, columns ``c0..c0+c`` of ``S = Z·Zᵀ`` into ``out`` ``[B, H, r, c]``, from contiguous
    ``zf`` ``[B, H, T, d]`` (its transpose read in place: no copy of either operand)."""
    return torch.matmul(zf[:, :, a:a + r], zf[:, :, c0:c0 + c].transpose(-1, -2), out=out)


def _peak(zf: torch.Tensor, tiles: list[tuple[int, int]], side: int) -> torch.Tensor:
    """Each window's and head's exact maximum of ``S = Z·Zᵀ`` off the diagonal ``[B, H]`` (0 where every
    entry is at most 0), from the tiles ``tiles`` of contiguous ``zf`` ``[B, H, T, d]``."""
    b, h, t, _ = zf.shape
    peak = torch.zeros(b, h, device=zf.device)
    out: dict[tuple[int, int], torch.Tensor] = {}
    for a, c0 in tiles:
        r, c = min(side, t - a), min(side, t - c0)
        if (r, c) not in out:
            out[r, c] = torch.empty(b, h, r, c, device=zf.device)
        torch.maximum(peak, _tile_peak(_similarity_tile(zf, a, c0, r, c, out[r, c]), a == c0), out=peak)
    return peak


def _tile_peak(s: torch.Tensor, diagonal: bool) -> torch.Tensor:
    """The maximum ``[B, H]`` of each window's and head's tile ``s`` ``[B, H, r, c]`` (NaN where it holds one),
    the diagonal zeroed first where the tile sits on it (``S``'s diagonal never counts)."""
    if diagonal:
        s.diagonal(dim1=-2, dim2=-1).zero_()
    return s.amax(dim=(-1, -2))


#: rows of each block of the upper triangle of a one-tile window's ``S`` (:func:`_upper_blocks`): blocks this
#: tall skip the lower triangle and still multiply at the whole square's rate (docs/performance.md)
UPPER_ROWS = 64


def _similarity_input(z: torch.Tensor, bt: BatchTensors, out=None) -> torch.Tensor:
    """Head outputs ``[B, H, T, d]`` as the similarity reads them: contiguous float32, zero at padding;
    ``z`` itself where it is so already, else new or into ``out()`` (a contiguous tensor of that shape)."""
    zf = z.detach().float()
    if not bt.padded and zf.is_contiguous():
        return zf
    into = torch.empty(zf.shape, device=zf.device) if out is None else out()
    if bt.padded:
        return torch.where(bt.valid[:, None, :, None], zf, torch.zeros((), device=zf.device), out=into)
    return into.copy_(zf)


def _upper_blocks(zf: torch.Tensor, buffer) -> list[tuple[int, torch.Tensor]]:
    """The upper triangle of ``S = Z·Zᵀ`` of contiguous ``zf`` ``[B, H, T, d]`` as blocks of
    :data:`UPPER_ROWS` query rows ``a..`` against the keys from ``a`` on: ``(a, block)``, each block
    ``[B, H, r, T − a]`` in ``buffer(r, c)`` (a contiguous tensor of that shape; its leading diagonal is
    ``S``'s). The blocks hold every pair ``i < j`` once. Each entry is the dot product the whole matrix's
    GEMM computes, to float32 rounding (bit for bit with MKL, where ``S`` is also exactly symmetric and
    the largest of the blocks' maxima off the diagonal is the whole matrix's)."""
    t = zf.shape[2]
    return [(a, torch.matmul(zf[:, :, a:a + r], zf[:, :, a:].transpose(-1, -2), out=buffer(r, t - a)))
            for a, r in _upper_rows(t)]


def _upper_rows(t: int) -> list[tuple[int, int]]:
    """The first query row and the rows of each block of :func:`_upper_blocks` for ``T = t``: ``(a, r)``,
    the block ``[.., r, t − a]``."""
    return [(a, min(UPPER_ROWS, t - a)) for a in range(0, t, UPPER_ROWS)]


def _normaliser(peak: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The divisor of each window's and head's ``S`` (its peak, 1 where that is not positive) and
    whether the peak is positive (``S`` is kept only then)."""
    positive = peak > 0
    return torch.where(positive, peak, torch.ones_like(peak)), positive


def _with_repeats(red: tuple, rep: torch.Tensor, bt: BatchTensors) -> PairReductions:
    """:class:`PairReductions` from the tiles' reductions and the high-similarity flag of every pair of
    equal token ids ``rep`` ``[N, H]`` (``bt.repeat_index`` order)."""
    b, h, t = red[3].shape
    rb, ri, _ = bt.repeat_index
    inner = torch.zeros(b, t, h, dtype=rep.dtype, device=rep.device).index_put_((rb, ri), rep, accumulate=True)
    sim_sum, hist, location, row_count, col_count, same = red
    return PairReductions(sim_sum, hist, location, row_count, col_count, inner.transpose(1, 2), same, rep.sum(dim=0),
                          (rep * bt.repeat_same_sentence[:, None]).sum(dim=0))


def pair_reductions_tiled(z: torch.Tensor, bt: BatchTensors, threshold: float, sim_bins: SimBins, bins: Bins,
                          rows: int, *, kernel: str = "torch") -> tuple[PairReductions, torch.Tensor, torch.Tensor]:
    """:class:`PairReductions` of one layer (``sim_sum`` and ``location`` on bin pairs ``[H, R, R]``),
    the distance histogram ``[H, R]`` of its high-similarity pairs (on distance bins) and the exact sum
    of their distances ``[H]``, from head outputs ``z`` ``[B, H, T, d]`` (see the module docstring).

    ``S`` is symmetric, so only its tiles on and above the diagonal are built (square tiles of about
    ``rows · T`` entries); the lower triangle's share of ``sim_sum`` is the transpose of the upper's.
    ``kernel``: ``"numba"``, each tile is reduced in one pass by the CPU kernel (:class:`FusedPairs`);
    ``"triton"``, the tiles live in the registers of the GPU kernels
    (:func:`headsim.stats.triton_long.binned_pairs`; bins as :func:`~headsim.stats.batch.kernel_tiles` allows); ``"torch"``,
    by torch operations (any device)."""
    b, h, t, _ = z.shape
    if kernel == "triton":
        from . import triton_long

        return triton_long.binned_pairs(z, bt.valid, bt.info.input_ids, bt.sentences, threshold, sim_bins, bins.distance,
                                        bins.r)
    if kernel == "numba":
        pairs = FusedPairs(b, h, t, threshold, sim_bins, bins, rows)
        pairs.add(z, bt, 0)
        return pairs.result(bt)
    zf = _similarity_input(z, bt)
    width = t // bins.r if t % bins.r == 0 else None
    side = _tile_size(rows, t, width, 1024)
    tiles = _tiles(t, side)
    divisor, positive = _normaliser(_peak(zf, tiles, side))
    red, distance, distance_sum, rep = _torch_tiles(zf, bt, threshold, sim_bins, bins, tiles, side, width, divisor, positive)
    return _with_repeats(red, rep, bt), distance, distance_sum


def _repeat_tiles(bt: BatchTensors, side: int, n_starts: int) -> torch.Tensor:
    """The tile (numbered row-major over ``n_starts`` tile starts) of every pair of equal token ids."""
    _, ri, rj = bt.repeat_index
    return torch.div(ri, side, rounding_mode="floor") * n_starts + torch.div(rj, side, rounding_mode="floor")


class FusedPairs:
    """The pair reductions of one layer of a batch by the CPU kernels
    (:func:`headsim.stats.cpu_kernels.reduce_upper` for a window of one tile with a bin per position,
    else :func:`~headsim.stats.cpu_kernels.reduce_tile` per tile), a step of windows at a time (:meth:`add`, steps in
    window order) into one set of sums, read once (:meth:`result`): a layer's bookkeeping is done once,
    however many cache-sized steps its windows take. ``windows`` in all; the rest as
    :func:`pair_reductions_tiled`."""

    def __init__(self, windows: int, heads: int, t: int, threshold: float, sim_bins: SimBins, bins: Bins,
                 rows: int, scratch: Scratch | None = None) -> None:
        from . import cpu_kernels

        cpu_kernels.set_threads(torch.get_num_threads())
        self.threshold, self.sim_bins, self.bins, self.t, self.heads = threshold, sim_bins, bins, t, heads
        self.side = _tile_size(rows, t, t // bins.r if t % bins.r == 0 else None, FUSED_SIDE)
        self.tiles = _tiles(t, self.side)
        # the tiles and sums the layer's steps share, reused by the next layer where ``scratch`` is the
        # caller's: read by the caller (result) before the next layer starts
        self.scratch = Scratch() if scratch is None else scratch
        r_bins, nb, h = bins.r, sim_bins.bins, heads
        # a bin per position: every pair adds to its own sum, in float32 for a few windows (WindowSum);
        # counts in float32 are exact
        per_position = r_bins == t
        dtype = torch.float32 if per_position else torch.float64
        zeros = self.scratch.zeros
        self._upper = WindowSum(zeros("pairs: upper sum", (h, r_bins, r_bins), dtype).numpy())
        self.out = {"hist": np.zeros((h, nb), np.int64),  # "upper_sum": self._upper's, per step (add)
                    "location": zeros("pairs: location", (h, r_bins, r_bins), dtype).numpy(),
                    "distance": np.zeros((h, r_bins)), "distance_sum": np.zeros(h, np.int64),
                    "row_count": zeros("pairs: row count", (windows, h, t)).numpy(),
                    "col_count": zeros("pairs: column count", (windows, h, t)).numpy(), "same": np.zeros(h, np.int64)}
        self._bins = (bins.index.numpy(), bins.ends(), bins.distance.numpy())
        self._rep: list[torch.Tensor] = []

    def add(self, z: torch.Tensor, bt: BatchTensors, start: int) -> None:
        """Add the head outputs ``z`` ``[b, H, T, d]`` of windows ``start..start+b`` (``bt`` theirs)."""
        from . import cpu_kernels

        side, tiles = self.side, self.tiles
        b, h, t, _ = z.shape
        zf = _similarity_input(z, bt, lambda: self.scratch.empty("pairs: head outputs", tuple(z.shape)))
        out = dict(self.out, upper_sum=self._upper.adding(b), row_count=self.out["row_count"][start:start + b],
                   col_count=self.out["col_count"][start:start + b])
        threshold = np.float32(self.threshold)
        constants = (threshold, np.float32(self.sim_bins.scale), np.float32(self.sim_bins.offset), *self._bins,
                     bt.valid.numpy(), bt.sentences.numpy())
        parallel = b * h * side ** 2 >= cpu_kernels.PARALLEL_ENTRIES  # a step's blocks share one choice
        fused = len(tiles) == 1 and self.bins.r == t
        if len(tiles) == 1:  # a window of one tile: its upper triangle built once
            blocks = [(a, a, block) for a, block in _upper_blocks(zf, lambda r, c: self._buffer(b, h, r, c))]
        if fused:  # a bin per position: each window's and head's maximum found by the kernel, from the blocks
            divisor, keep = np.empty((b, h), np.float32), np.empty((b, h), np.float32)
            cpu_kernels.reduce_upper([block.numpy() for _, _, block in blocks], [a for a, _, _ in blocks], divisor, keep,
                                     *constants, out, parallel=parallel)
        else:
            if len(tiles) == 1:  # its maximum read from the blocks
                peak = functools.reduce(torch.maximum, (_tile_peak(block, True) for _, _, block in blocks))
            else:  # built twice: for the maximum, then each tile as it is reduced
                peak = _peak(zf, tiles, side)

                def tile(a: int, c0: int) -> tuple[int, int, torch.Tensor]:
                    r, c = min(side, t - a), min(side, t - c0)
                    return a, c0, _similarity_tile(zf, a, c0, r, c, self._buffer(b, h, r, c))

                blocks = (tile(a, c0) for a, c0 in tiles)
            divisor, positive = _normaliser(peak)
            divisor, keep = divisor.numpy(), positive.float().numpy()
        rep = torch.zeros(bt.repeat_index[0].numel(), h, dtype=torch.float32)  # [N, H]: each pair set by its tile
        repeats = tuple(x.numpy() for x in bt.repeat_index)
        for a, c0, s in blocks:
            if not fused:
                cpu_kernels.reduce_tile(s.numpy(), a, c0, a == c0, divisor, keep, *constants, out, parallel=parallel)
            cpu_kernels.repeat_pairs_above(s.numpy(), a, c0, repeats, divisor, keep, threshold, rep.numpy())
        self._rep.append(rep)

    def window_bytes(self) -> int:
        """Bytes of similarity blocks that :meth:`add` holds at once per window: the upper triangle's blocks
        of a window of one tile, one tile of a longer one."""
        t, side, h = self.t, self.side, self.heads
        if len(self.tiles) == 1:
            return h * 4 * sum(r * (t - a) for a, r in _upper_rows(t))
        return h * 4 * side * side

    def _buffer(self, b: int, h: int, r: int, c: int) -> torch.Tensor:
        """A tile ``[b, H, r, c]`` of the one buffer per tile shape that steps share (a fresh large tensor
        per step costs page faults)."""
        return self.scratch.empty(f"pairs: S tile {r}x{c}", (b, h, r, c))

    def result(self, bt: BatchTensors) -> tuple[PairReductions, torch.Tensor, torch.Tensor]:
        """What :func:`pair_reductions_tiled` returns, for every window added (``bt``: all of them)."""
        out = self.out
        upper = self._upper.total()
        sim_sum = torch.add(upper, upper.transpose(1, 2), out=self.scratch.empty("pairs: similarity sum", tuple(upper.shape),
                                                                                  torch.float64))
        red = (sim_sum, torch.from_numpy(out["hist"]), torch.from_numpy(out["location"]),
               torch.from_numpy(out["row_count"]), torch.from_numpy(out["col_count"]),
               torch.from_numpy(out["same"]).float())
        rep = self._rep[0] if len(self._rep) == 1 else torch.cat(self._rep)
        return (_with_repeats(red, rep, bt), torch.from_numpy(out["distance"]),
                torch.from_numpy(out["distance_sum"]).double())


def _torch_tiles(zf, bt, threshold, sim_bins, bins, tiles, side, width, divisor, positive):
    """The tiles reduced by torch operations (any device): each tile's key columns in reverse order, so
    that its diagonals — the pairs of one distance — are columns of a skewed view of the thresholded tile."""
    b, h, t, _ = zf.shape
    dev = zf.device
    valid = bt.valid
    finite = bool(torch.isfinite(zf.square().sum(dim=-1)).all())
    zt_rev = zf.flip(2).transpose(-1, -2).contiguous()  # [B, H, d, T], keys last to first
    starts = list(range(0, t, side))
    divisor = divisor[..., None, None]
    positive = positive[..., None, None]
    all_positive = bool(positive.all())

    out: dict[tuple[int, int], torch.Tensor] = {}

    def tile(a: int, c0: int) -> torch.Tensor:
        """``S`` rows ``a..a+r``, key columns ``c0+c−1`` down to ``c0`` ``[B, H, r, c]`` (one buffer per shape)."""
        r, c = min(side, t - a), min(side, t - c0)
        if (r, c) not in out:
            out[r, c] = torch.empty(b, h, r, c, device=dev)
        s = torch.matmul(zf[:, :, a:a + r], zt_rev[:, :, :, t - c0 - c:t - c0], out=out[r, c])
        if a == c0:  # the diagonal: key a + i sits in column c − 1 − i
            s.view(b, h, r * c)[:, :, torch.arange(r, device=dev) * (c - 1) + (c - 1)] = 0
        return s

    nb, r_bins = sim_bins.bins, bins.r
    sim_sum = torch.zeros(h, r_bins, r_bins, dtype=torch.float64, device=dev)
    mirrored = torch.zeros_like(sim_sum)  # the tiles above the diagonal, added again transposed
    location = torch.zeros_like(sim_sum)
    distance = torch.zeros(h, r_bins, dtype=torch.float64, device=dev)
    hist = torch.zeros(h, nb, dtype=torch.int64, device=dev)
    row_count = torch.zeros(b, h, t, dtype=torch.float32, device=dev)
    col_count = torch.zeros_like(row_count)
    same = torch.zeros(h, dtype=torch.float64, device=dev)
    rb, ri, rj = bt.repeat_index
    rep = torch.zeros(rb.numel(), h, dtype=torch.float32, device=dev)
    rep_tile = _repeat_tiles(bt, side, len(starts))
    sent = bt.sentences
    sent_lo = torch.where(sent >= 0, sent, torch.full_like(sent, t + 1))
    dist_bins = bins.distance
    distance_sum = torch.zeros(h, dtype=torch.float64, device=dev)
    head_offset = torch.arange(0, h * (nb + 1), nb + 1, device=dev, dtype=torch.int32)[None, :, None, None]
    buffers: dict[tuple[int, int], tuple[torch.Tensor, ...]] = {}
    for a, c0 in tiles:
        s = tile(a, c0).div_(divisor)
        if not all_positive:
            s.mul_(positive)
        r, c = s.shape[-2:]
        diagonal = a == c0
        if (r, c) not in buffers:  # reused: fresh large tensors cost page faults on every tile
            k = torch.arange(c, device=dev)
            lower = (c - 1 - k)[None, :] <= torch.arange(r, device=dev)[:, None]  # key a + c − 1 − k ≤ query a + i
            buffers[r, c] = (torch.empty_like(s), torch.empty(s.shape, dtype=torch.int32, device=dev),
                             torch.zeros(b, h, r, c + r, dtype=torch.float32, device=dev), lower)
        scaled, index, skew, lower = buffers[r, c]
        # the histogram over valid pairs i < j (bins as SimBins.index computes them)
        torch.mul(s, float(sim_bins.scale), out=scaled).add_(float(sim_bins.offset)).clamp_(0, nb - 1)
        if not finite:
            scaled.nan_to_num_(nan=0.0)
        index.copy_(scaled)
        drop = lower if diagonal else None
        if bt.padded:
            off = ~(valid[:, a:a + r, None] & valid[:, c0:c0 + c].flip(-1)[:, None, :])  # [B, r, c]
            drop = off[:, None] if drop is None else (off[:, None] | drop)
        if drop is not None:
            index.masked_fill_(drop, nb)
        hist += torch.bincount(index.add_(head_offset).view(-1), minlength=h * (nb + 1)).view(h, nb + 1)[:, :nb]
        # similarity sums (the tile and, off the diagonal, its mirror image)
        _binned_tile(s, bins, a, c0, width, sim_sum if diagonal else mirrored)
        # the high-similarity pairs i < j (0/1 float32: exact counts, fast sums), written into a skewed
        # buffer whose column sums are the tile's diagonals
        u = skew[..., :c]
        torch.gt(s, threshold, out=u)
        del s
        if diagonal:
            u.masked_fill_(lower, 0.0)
        _binned_tile(u, bins, a, c0, width, location)
        diag = skew.view(b, h, -1)[:, :, :r * (c + r - 1)].view(b, h, r, c + r - 1).sum(dim=(0, 2))  # [H, c + r − 1]
        dist = (c0 - a + c - 1 - torch.arange(c + r - 1, device=dev)).clamp(0, t - 1)
        distance.index_add_(1, dist_bins[dist], diag.to(torch.float64))
        distance_sum += diag.to(torch.float64) @ dist.to(torch.float64)
        row_count[:, :, a:a + r] += u.sum(dim=-1)
        col_count[:, :, c0:c0 + c] += u.sum(dim=-2).flip(-1)
        here = (rep_tile == (a // side) * len(starts) + c0 // side).nonzero()[:, 0]
        if here.numel():
            rep[here] = u[rb[here], :, ri[here] - a, c0 + c - 1 - rj[here]]
        rs, cs = sent_lo[:, a:a + r], sent[:, c0:c0 + c]
        if bool((cs.amax(dim=1) >= rs.amin(dim=1)).any()):  # some sentence may hold pairs of this tile
            apart = (sent[:, a:a + r, None] != cs.flip(-1)[:, None, :]) | (sent[:, a:a + r, None] < 0)
            same += u.masked_fill_(apart[:, None], 0.0).sum(dim=(0, 2, 3))  # u is not read after this
        del u
    sim_sum += mirrored
    sim_sum += mirrored.transpose(1, 2)
    return (sim_sum, hist, location, row_count, col_count, same.float()), distance, distance_sum, rep
