"""Per-batch attention statistics (Figs 2 and 3, and where the attention mass goes).

Attention enters only at valid (query, key) positions; padded rows and columns are replaced by
zeros before anything is summed, so whatever the model computed there never counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .batch import BatchTensors

TARGETS = ("cls", "sep", "punct", "prev", "next")


@dataclass
class ColumnRanking:
    """The top columns as float32 sums rank them (:func:`rank_columns`), before near-ties are settled.

    ``order`` ``[B, H, k]``; ``close`` ``[B, H]`` bool, windows and heads whose k-th and (k+1)-th sums
    are within float32 summation error, on the host (from an accelerator copied without waiting;
    ``ready``, a CUDA event, marks when the copy has landed).
    """

    order: torch.Tensor
    close: torch.Tensor | None = None
    ready: torch.cuda.Event | None = None


def rank_columns(column_sums: torch.Tensor, valid: torch.Tensor, k: int) -> ColumnRanking:
    """The first step of :func:`top_columns`, which never waits for the device."""
    b, h, t = column_sums.shape
    k = min(int(k), t)
    if k <= 0:
        return ColumnRanking(torch.zeros(b, h, 0, dtype=torch.int64, device=column_sums.device))
    if k == t:
        return ColumnRanking(torch.arange(t, device=column_sums.device).expand(b, h, t))
    rank = column_sums.masked_fill(~valid[:, None, :], -torch.inf)
    values, order = rank.topk(k + 1, dim=-1, sorted=True)
    kth, nxt = values[..., k - 1], values[..., k]
    # float32 sums of n ≥ 0 terms err by at most (n−1)·2⁻²⁴·sum each; 4·T·2⁻²⁴ is a safe margin.
    # Outside that margin the k-th and (k+1)-th sums are apart and the top-k set is settled.
    close = (kth - nxt) <= (t * 2.0 ** -22) * torch.maximum(kth.abs(), nxt.abs())
    ready = None
    if close.is_cuda:
        close, ready = torch.empty(close.shape, dtype=torch.bool, pin_memory=True).copy_(close, non_blocking=True), torch.cuda.Event()
        ready.record()
    return ColumnRanking(order[..., :k], close, ready)


def settle_columns(ranking: ColumnRanking, valid: torch.Tensor,
                   exact: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The second step of :func:`top_columns`: re-rank the near-ties from ``exact`` sums. The host waits
    for the device only until :func:`rank_columns` is done, and queues the rest without waiting."""
    if ranking.close is None:
        return ranking.order
    if ranking.ready is not None:
        ranking.ready.synchronize()
    order, k = ranking.order, ranking.order.shape[-1]
    if bool(ranking.close.any()):
        where = ranking.close.nonzero().T  # [2, n] on the host
        if order.is_cuda:  # from pinned memory the copy waits for nothing queued before it
            where = where.pin_memory().to(order.device, non_blocking=True)
        bi, hi = where
        sums = exact(bi, hi).masked_fill(~valid[bi], -torch.inf)
        order[bi, hi] = sums.sort(dim=-1, descending=True, stable=True).indices[:, :k]
    return order


def top_columns(column_sums: torch.Tensor, valid: torch.Tensor, k: int,
                exact: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``[B, H, k]`` int64: the ``k`` valid key columns with the largest column sums per window and head.

    Ties go to the smaller key position. Column sums are ranked in float32; wherever the gap
    between the k-th and (k+1)-th sum is within float32 summation error, that window and head is
    re-ranked from float64 sums, so the chosen set is the one exact sums give. (In two steps,
    :func:`rank_columns` and :func:`settle_columns`, for a caller with work to do in between.)

    Args:
        column_sums: ``[B, H, T]`` float32 column sums of attention that is zero at padded rows and columns.
        valid: ``[B, T]`` bool.
        exact: ``(windows, heads)`` index tensors → those matrices' float64 column sums ``[n, T]``.
    """
    return settle_columns(rank_columns(column_sums, valid, k), valid, exact)


def diagonal_sums(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 ``[H]`` sums over windows and query rows of masked attention ``a`` ``[B, H, T, T]`` on
    the key before (``key = query − 1``) and after (``key = query + 1``) each query."""
    return tuple(a.diagonal(offset=o, dim1=-2, dim2=-1).to(torch.float64).sum(dim=(0, 2)) for o in (-1, 1))


def attention_focus(column_sums: torch.Tensor, diagonals: tuple[torch.Tensor, torch.Tensor],
                    key_targets: torch.Tensor) -> torch.Tensor:
    """``[H, 5]`` float64: the attention mass on each of :data:`TARGETS`, summed over windows and
    valid query rows (``attn_focus``; divided by the query rows it is each head's mean per query).

    ``column_sums`` ``[B, H, T]`` attention summed over query rows (zero at padding);
    ``diagonals`` from :func:`diagonal_sums`; ``key_targets`` ``[B, T, 3]`` the [CLS], [SEP] and
    punctuation key columns (:attr:`headsim.stats.batch.BatchTensors.key_targets`).
    """
    by_kind = torch.bmm(column_sums.to(torch.float64), key_targets.to(torch.float64)).sum(dim=0)  # [H, 3]
    return torch.cat([by_kind, diagonals[0].to(torch.float64)[:, None], diagonals[1].to(torch.float64)[:, None]], dim=1)


def _masked(attention: torch.Tensor, bt: BatchTensors, owned: bool) -> torch.Tensor:
    """Float32 ``attention`` with exact zeros at padding, whatever the model left there (inf and NaN
    included): ``attention`` itself where ``owned`` (and float32), else a copy."""
    a = attention if owned and attention.dtype == torch.float32 else attention.to(torch.float32, copy=True)
    if bt.padded:
        a.masked_fill_(bt.pair_invalid, 0.0)
    return a


def _top_of(a: torch.Tensor, column_sums: torch.Tensor, bt: BatchTensors, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The top columns ``[B, H, k]`` of masked attention ``a`` (:func:`top_columns`) and their attention
    ``[B, H, T(query), k]``."""
    top = _top(a, column_sums, bt, top_k)
    return top, a.gather(-1, _column_index(a, top))


def _column_index(a: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """The columns ``top`` ``[B, H, k]`` as an index of ``a`` ``[B, H, T, T]``'s last dimension, every row."""
    return top[:, :, None, :].expand(*a.shape[:3], top.shape[-1])


def _top(a: torch.Tensor, column_sums: torch.Tensor, bt: BatchTensors, top_k: int) -> torch.Tensor:
    """The top columns ``[B, H, k]`` of masked attention ``a`` (:func:`top_columns`, near-ties settled from ``a``)."""
    return top_columns(column_sums, bt.valid, top_k, lambda bi, hi: a[bi, hi].to(torch.float64).sum(dim=-2))


def attention_batch(attention: torch.Tensor, bt: BatchTensors, top_k: int, into: dict[str, torch.Tensor], *,
                    owned: bool = False) -> None:
    """Add one layer's attention ``[B, H, T, T]`` (softmax probabilities) to ``into`` (in place).

    ``into`` holds one layer's accumulators: ``attn_sum``, ``attn_sum_top_zeroed`` ``[H, T, T]`` and
    ``attn_focus [H, 5]`` (float64, targets :data:`TARGETS`). ``owned=True`` lets a float32
    ``attention`` be overwritten (the driver's freshly computed probabilities), saving a copy.
    """
    reduce_attention(attention, bt, top_k, owned=owned).add_to(bt, into)


@dataclass
class ReducedAttention:
    """One or more steps' attention as :func:`add_reduced_attention` adds it (:func:`reduce_attention`).

    ``column_sums`` ``[B, H, T]`` float32; ``diagonals`` the ``−1``/``+1`` diagonal mass ``[H]`` float64;
    ``top`` ``[B, H, k]`` the columns the top-zeroed sum leaves out and ``columns`` ``[B, H, T, k]`` their
    attention; ``zeroed_sum`` ``[H, T, T]`` the masked attention with each window's top columns zeroed,
    summed over the windows (float32 for one step, float64 once joined): exact zeros where every
    window's column was zeroed, never below 0. A kernel that sums the windows itself leaves ``columns``
    and ``zeroed_sum`` ``None`` per step and hands the joined sums (:meth:`join`), the removed columns'
    attention as ``removed`` ``[H, T(query), T(key)]``.
    """

    column_sums: torch.Tensor
    diagonals: tuple[torch.Tensor, torch.Tensor]
    top: torch.Tensor
    columns: torch.Tensor | None
    zeroed_sum: torch.Tensor | None
    removed: torch.Tensor | None = None

    @classmethod
    def join(cls, parts: list[ReducedAttention], zeroed: torch.Tensor | None = None,
             removed: torch.Tensor | None = None) -> ReducedAttention:
        """Consecutive steps' reductions as one (windows in order), the zeroed sum in float64; ``zeroed`` and
        ``removed``: the steps' sums where a kernel summed them (the steps hold none)."""
        if zeroed is None:
            zeroed = parts[0].zeroed_sum.to(torch.float64, copy=True)
            for p in parts[1:]:
                zeroed += p.zeroed_sum
        if len(parts) == 1:
            return cls(parts[0].column_sums, parts[0].diagonals, parts[0].top, parts[0].columns, zeroed, removed)
        columns = None if removed is not None else torch.cat([p.columns for p in parts])
        return cls(torch.cat([p.column_sums for p in parts]),
                   tuple(sum(p.diagonals[i] for p in parts) for i in (0, 1)),
                   torch.cat([p.top for p in parts]), columns, zeroed, removed)

    def add_to(self, bt: BatchTensors, into: dict[str, torch.Tensor]) -> None:
        """Add to one layer's accumulators ``into``; ``bt`` the windows' tensors, in the same order."""
        add_reduced_attention(self.column_sums, self.diagonals, self.top, self.columns, bt, into, zeroed=self.zeroed_sum,
                              removed=self.removed)


def zero_top_columns(a: torch.Tensor, top: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The second half of :func:`reduce_attention`, in torch: the attention of the ``top`` columns
    ``[B, H, k]`` of masked float32 attention ``a`` ``[B, H, T, T]`` (``[B, H, T, k]``), ``a`` with them
    zeroed summed over windows (``[H, T, T]`` float32; ``a`` is overwritten) and the diagonal sums of ``a``
    as it was (:func:`diagonal_sums`)."""
    diagonals = diagonal_sums(a)
    index = _column_index(a, top)
    columns = a.gather(-1, index)
    return columns, a.scatter_(-1, index, 0.0).sum(dim=0), diagonals


def reduce_attention(attention: torch.Tensor, bt: BatchTensors, top_k: int, *, owned: bool = False,
                     kernel: Callable | None = None) -> ReducedAttention:
    """One step's attention ``[B, H, T, T]`` reduced to what the accumulators need (nothing ``[B, H, T, T]``
    kept), so that steps can also be added at once (:meth:`ReducedAttention.join`). ``owned`` as
    :func:`attention_batch`. ``kernel(a, valid, top_k)``: the whole reduction of the masked attention by
    a kernel that adds the zeroed and removed attention to sums of its own and returns the column sums,
    top columns and diagonal sums (:func:`headsim.stats.cpu_kernels.reduce_attention`); the caller joins
    with those sums."""
    a = _masked(attention, bt, owned)
    if kernel is not None:
        column_sums, top, diagonals = kernel(a, bt.valid, top_k)
        return ReducedAttention(column_sums, diagonals, top, None, None)
    column_sums = a.sum(dim=-2)
    top = _top(a, column_sums, bt, top_k)
    columns, zeroed, diagonals = zero_top_columns(a, top)
    return ReducedAttention(column_sums, diagonals, top, columns, zeroed)


def add_attention(a: torch.Tensor, column_sums: torch.Tensor, bt: BatchTensors, top_k: int,
                  into: dict[str, torch.Tensor], *, plain_sum: torch.Tensor,
                  diagonals: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Add masked float32 attention ``a`` ``[B, H, T, T]`` to ``into``, given its column sums, its sum over
    windows and its diagonal sums (a fused step computed them while ``a`` was in registers): only the
    top columns are read from ``a``."""
    top, columns = _top_of(a, column_sums, bt, top_k)
    add_reduced_attention(column_sums, diagonals, top, columns, bt, into, plain_sum=plain_sum)


def add_reduced_attention(column_sums: torch.Tensor, diagonals: tuple[torch.Tensor, torch.Tensor], top: torch.Tensor,
                          columns: torch.Tensor | None, bt: BatchTensors, into: dict[str, torch.Tensor], *,
                          plain_sum: torch.Tensor | None = None, zeroed: torch.Tensor | None = None,
                          removed: torch.Tensor | None = None) -> None:
    """Add one step's attention, given as reductions, to ``into``.

    ``column_sums`` ``[B, H, T]``; ``diagonals`` the ``−1``/``+1`` diagonal mass per head; ``top``
    ``[B, H, k]`` the zeroed key columns and ``columns`` ``[B, H, T(query), k]`` their attention;
    either ``plain_sum`` (the masked attention summed over windows; the top-zeroed sum is it less the
    zeroed columns, up to float rounding, with the residues below 0 that rounding leaves set to 0) or ``zeroed`` (the same with each window's top columns zeroed:
    exact zeros where every window's column was) ``[H, T, T]``. ``removed``: the zeroed columns' attention
    summed over the windows ``[H, T(query), T(key)]``, where the caller has it (``columns`` is then unused).
    """
    b, h, t = column_sums.shape
    into["attn_focus"] += attention_focus(column_sums, diagonals, bt.key_targets)
    if removed is None:  # the removed columns summed at (head, key) in a [H·T(key), T(query)] view
        back = torch.zeros(h * t, t, dtype=columns.dtype, device=columns.device)
        slot = (torch.arange(h, device=columns.device)[None, :, None] * t + top).reshape(-1)
        back.index_add_(0, slot, columns.permute(0, 1, 3, 2).reshape(-1, t))
        removed = back.view(h, t, t).transpose(-1, -2)
    if zeroed is not None:
        into["attn_sum_top_zeroed"] += zeroed
        into["attn_sum"] += zeroed
        into["attn_sum"] += removed
    else:
        into["attn_sum_top_zeroed"] += (plain_sum - removed).clamp_(min=0)  # a sum of attention: never below 0
        into["attn_sum"] += plain_sum
