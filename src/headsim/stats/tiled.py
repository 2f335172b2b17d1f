"""Statistics of windows longer than the resolution, a block of query rows at a time, on position bins.

A window of ``T`` tokens with ``T > resolution`` keeps every position-pair statistic on
``R = resolution`` equal position bins (position ``p`` in bin ``p · R // T``; distances likewise), so
the accumulators do not grow with ``T``; per-window and per-head statistics stay exact. Nothing
``[heads, T, T]`` exists: attention arrives in blocks of query rows (the model tap's ``on_tile``, or
computed here from queries and keys for ``plain`` families) and is reduced as it comes
(:class:`AttentionTiles`); the similarity ``S = Z·Zᵀ`` is built block by block twice
(:func:`pair_reductions_tiled`): a first pass takes each window's and head's exact maximum over
valid off-diagonal entries, the second normalises by it, so every threshold decision is the one the
whole matrix gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.plain import attention_probs
from .attention import attention_focus, top_columns
from .batch import BatchTensors, position_bins
from .pairs import PairReductions, SimBins


@dataclass
class Bins:
    """Position bins of one window length on one device."""

    t: int
    r: int
    index: torch.Tensor  # [T] int64 bin of every position (and distance)

    @classmethod
    def build(cls, t: int, r: int, device) -> Bins:
        return cls(t, r, torch.as_tensor(position_bins(t, r), device=device))

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[..., T]`` summed into key bins ``[..., R]`` (same dtype)."""
        out = torch.zeros(*x.shape[:-1], self.r, dtype=x.dtype, device=x.device)
        return out.index_add_(x.ndim - 1, self.index, x)

    def pairs(self, x: torch.Tensor, rows: slice) -> torch.Tensor:
        """A block ``[B, H, rows, T]`` summed over windows into bin pairs ``[H, R, R]`` float64."""
        per_key = self.keys(x.sum(dim=0))  # [H, rows, R]
        out = torch.zeros(per_key.shape[0], self.r, self.r, dtype=torch.float64, device=x.device)
        return out.index_add_(1, self.index[rows], per_key.to(torch.float64))


def block_rows(budget: int, windows: int, heads: int, t: int, copies: int = 6) -> int:
    """Query rows per block so that ``copies`` float32 ``[windows, heads, rows, T]`` fit ``budget`` bytes."""
    return max(1, min(t, int(budget) // max(1, copies * windows * heads * t * 4)))


class AttentionTiles:
    """One layer's attention of one batch, reduced block by block.

    Kept per window and head: float64 column sums ``[B, H, T]`` (the top columns are ranked from
    them), the attention summed over each query bin per key ``[B, H, R, T]`` float32 (the zeroed top
    columns are taken back out of it per bin) and the near-diagonal entries ``[B, H, T, 3]``
    (``key = query − 1, query, query + 1``).
    """

    def __init__(self, bt: BatchTensors, n_heads: int, bins: Bins) -> None:
        b, t = bt.valid.shape
        dev = bt.valid.device
        self.bt, self.bins = bt, bins
        self.column_sums = torch.zeros(b, n_heads, t, dtype=torch.float64, device=dev)
        self.per_query_bin = torch.zeros(b, n_heads, bins.r, t, dtype=torch.float32, device=dev)
        self.near = torch.zeros(b, n_heads, t, 3, dtype=torch.float32, device=dev)
        self.rows_done = 0

    def add(self, rows: slice, probs: torch.Tensor) -> None:
        """Add the probabilities of query rows ``rows`` ``[B, H, rows, T]`` (in order, each row once)."""
        from ..errors import require

        require(rows.start == self.rows_done, f"attention rows {rows.start}.. arrived after rows ..{self.rows_done}",
                "hand the blocks of one layer in order")
        bt, t = self.bt, self.bins.t
        a = probs.to(torch.float32)
        if bt.padded:
            keep = bt.valid[:, None, rows, None] & bt.valid[:, None, None, :]
            a = torch.where(keep, a, torch.zeros((), device=a.device))
        self.column_sums += a.sum(dim=-2, dtype=torch.float64)
        self.per_query_bin.index_add_(2, self.bins.index[rows], a)
        q = torch.arange(rows.start, rows.stop, device=a.device)
        for slot, offset in enumerate((-1, 0, 1)):
            k = q + offset
            inside = (k >= 0) & (k < t)
            got = a[:, :, inside.nonzero()[:, 0], k[inside]]  # [B, H, n]
            self.near[:, :, q[inside], slot] = got
        self.rows_done = rows.stop

    def finish(self, top_k: int, into: dict[str, torch.Tensor]) -> None:
        """Add the layer's attention statistics to its accumulator slices ``into`` (binned)."""
        from ..errors import require

        bt, bins = self.bt, self.bins
        b, h, r, t = self.per_query_bin.shape
        require(self.rows_done == t, f"attention of {self.rows_done} of {t} query rows arrived", "hand every block of the layer")
        sums = self.column_sums
        top = top_columns(sums, bt.valid, top_k, lambda bi, hi: sums[bi, hi])  # [B, H, k]
        binned = bins.keys(self.per_query_bin)  # [B, H, R, R]
        k = top.shape[-1]
        removed = torch.zeros_like(binned).scatter_add_(
            3, bins.index[top][:, :, None, :].expand(b, h, r, k), self.per_query_bin.gather(3, top[:, :, None, :].expand(b, h, r, k)))
        plain = binned.to(torch.float64).sum(dim=0)
        zeroed = plain - removed.to(torch.float64).sum(dim=0)
        into["attn_sum"] += plain
        into["attn_sum_top_zeroed"] += zeroed
        # near-diagonal entries of the top-zeroed attention, binned, taken out of it
        is_top = torch.zeros(b, h, t, dtype=torch.bool, device=top.device).scatter_(2, top, True)
        q = torch.arange(t, device=top.device)
        near = torch.zeros(h, r * r, dtype=torch.float64, device=top.device)
        for slot, offset in enumerate((-1, 0, 1)):
            key = q + offset
            inside = (key >= 0) & (key < t)
            qi, ki = q[inside], key[inside]
            values = self.near[:, :, qi, slot] * ~is_top[:, :, ki]
            near.index_add_(1, bins.index[qi] * r + bins.index[ki], values.to(torch.float64).sum(dim=0))
        into["attn_sum_top_diag_zeroed"] += zeroed - near.view(h, r, r)
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
            head_outputs[:, :, block] = torch.matmul(probs, value.float())
        tiles.add(block, probs)
        del probs


def pair_reductions_tiled(z: torch.Tensor, bt: BatchTensors, threshold: float, sim_bins: SimBins, bins: Bins,
                          rows: int) -> tuple[PairReductions, torch.Tensor]:
    """:class:`PairReductions` of one layer (``sim_sum`` and ``location`` on bin pairs ``[H, R, R]``)
    and the distance histogram ``[H, R]`` of its high-similarity pairs, from head outputs ``z``
    ``[B, H, T, d]``, a block of ``rows`` query rows at a time (see the module docstring)."""
    b, h, t, _ = z.shape
    dev = z.device
    valid = bt.valid
    zf = z.float()
    if bt.padded:
        zf = torch.where(valid[:, None, :, None], zf, torch.zeros((), device=dev))
    zt = zf.transpose(-1, -2)
    blocks = [slice(s, min(s + rows, t)) for s in range(0, t, rows)]

    def block(rows_: slice) -> torch.Tensor:
        s = torch.matmul(zf[:, :, rows_], zt)
        s.diagonal(offset=rows_.start, dim1=-2, dim2=-1).zero_()
        return s

    peak = torch.stack([block(r).amax(dim=(-1, -2)) for r in blocks]).amax(dim=0)[..., None, None]  # [B, H, 1, 1]
    positive = peak > 0
    divisor = torch.where(positive, peak, torch.ones_like(peak))
    nb = sim_bins.bins
    r = bins.r
    sim_sum = torch.zeros(h, r, r, dtype=torch.float64, device=dev)
    location = torch.zeros_like(sim_sum)
    distance = torch.zeros(h, r, dtype=torch.float64, device=dev)
    hist = torch.zeros(h * nb, dtype=torch.int64, device=dev)
    row_count = torch.zeros(b, h, t, dtype=torch.float32, device=dev)
    col_count = torch.zeros_like(row_count)
    same = torch.zeros(h, dtype=torch.float32, device=dev)
    rb, ri, rj = bt.repeat_index
    rep = torch.zeros(rb.numel(), h, dtype=torch.float32, device=dev)
    head_offset = torch.arange(0, h * nb, nb, device=dev, dtype=torch.int32)[None, :, None, None]
    sent = bt.sentences
    keys = torch.arange(t, device=dev)
    for rows_ in blocks:
        s = block(rows_).div_(divisor).mul_(positive)
        q = keys[rows_]
        upper = (keys[None, :] > q[:, None])  # [rows, T]
        pair = upper[None] & valid[:, rows_, None] & valid[:, None, :]  # [B, rows, T] valid pairs i < j
        binned = sim_bins.index(s).add_(head_offset)
        hist += torch.bincount(binned[pair[:, None].expand_as(binned)], minlength=h * nb)
        del binned
        sim_sum += bins.pairs(s, rows_)
        u = torch.gt(s, threshold, out=torch.empty_like(s)).mul_(upper)
        del s
        location += bins.pairs(u, rows_)
        d = (keys[None, :] - q[:, None]).clamp_min(0)  # [rows, T] distance j − i (0 where j ≤ i, u is 0 there)
        distance.index_add_(1, bins.index[d.reshape(-1)], u.sum(dim=0).reshape(h, -1).to(torch.float64))
        row_count[:, :, rows_] = u.sum(dim=-1)
        col_count += u.sum(dim=-2)
        together = (sent[:, rows_, None] == sent[:, None, :]) & (sent[:, rows_, None] >= 0)
        same += (u * together[:, None]).sum(dim=(0, 2, 3))
        here = ((ri >= rows_.start) & (ri < rows_.stop)).nonzero()[:, 0]
        rep[here] = u[rb[here], :, ri[here] - rows_.start, rj[here]]
        del u
    inner = torch.zeros(b, t, h, dtype=rep.dtype, device=dev).index_put_((rb, ri), rep, accumulate=True)
    red = PairReductions(sim_sum, hist.view(h, nb), location, row_count, col_count, inner.transpose(1, 2), same,
                         rep.sum(dim=0), (rep * bt.repeat_same_sentence[:, None]).sum(dim=0))
    return red, distance
