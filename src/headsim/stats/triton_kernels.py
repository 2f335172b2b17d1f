"""Triton kernels for one layer step on a GPU: every ``T×T`` statistic without a ``T×T`` tensor in memory.

The eager statistics make about twenty passes over each ``[B, H, T, T]`` tensor, and on a GPU those
passes (memory traffic), not the arithmetic, set the cost. Here each ``T×T`` matrix lives only in
registers, one block of query rows at a time, and leaves the kernel as the small reductions the
accumulators need:

* :func:`attention_pass` (paper Figs 2–4): softmax(QKᵀ·scale) over valid keys, the head outputs
  ``P·V`` that the model goes on with (so the model's attention is computed once), the sum of the
  masked probabilities over windows (whose ``−1``/``+1`` diagonals give the diagonal mass), their
  column sums per window (for the top columns of Fig 3), and each row's max and exp-sum (to
  recompute the few zeroed top columns afterwards).
* :func:`similarity_pass` (Figs 6–13): the per-matrix maximum of ``Z·Zᵀ`` (a first small kernel),
  then the normalised similarity, its sum over windows, its value histogram, the high-similarity
  pairs ``i < j`` summed at their locations, per position (``rows``, ``cols``, ``inner``) and as
  same-sentence / repeated-token counts.

A program owns one head and one block of query rows (or, for the pairs, optionally one square tile
of the upper triangle: :class:`Launch`) for a run of windows and keeps its sums in registers across
them, writing one partial per program; partials are added in torch afterwards
(deterministic: no atomics). The run's length is a runtime argument and its loop has no branch, so
one compiled kernel serves every batch size and the next window's loads can be issued while the
current one is reduced (``num_stages=2``). The arithmetic follows the eager definitions
(:func:`headsim.model.plain.attention_probs`, :func:`headsim.context_similarity.normalized_similarity`,
:class:`headsim.stats.pairs.SimBins`); bf16/fp16 products are exact in fp32 and accumulate in fp32,
fp32 inputs use IEEE fp32 products, so results equal the eager path up to summation order
(tests/test_kernels.py runs both, on a GPU or in Triton's interpreter).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

from .pairs import PairReductions

try:  # Triton ships with CUDA builds of torch; CPU machines run the kernels only in its interpreter
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def available(device: torch.device) -> bool:
    """Whether the kernels can run on ``device`` (a CUDA GPU with Triton, or Triton's CPU interpreter)."""
    return triton is not None and (device.type == "cuda" or (INTERPRET and device.type == "cpu"))


def _pow2(n: int, low: int = 16) -> int:
    return max(low, 1 << (max(int(n), 1) - 1).bit_length())


def _runs(n_windows: int, per_run_programs: int, device: torch.device) -> tuple[int, int]:
    """(runs, windows per run): each (head, row block) program takes one run of windows; enough runs to
    fill the GPU about four times over, none of them empty."""
    if device.type != "cuda":
        runs = min(n_windows, 2)  # the interpreter: two runs exercise the partial sums
    else:
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        runs = max(1, min(n_windows, -(-4 * sms // per_run_programs)))
    per = -(-n_windows // runs)
    return -(-n_windows // per), per


if triton is not None:

    @triton.jit
    def _tile(T, D, BM: tl.constexpr, TP: tl.constexpr, DP: tl.constexpr):
        """The program's head, row block and run of windows, its query rows, all key columns and the
        head dimension, with their in-range masks."""
        rows = tl.program_id(1) * BM + tl.arange(0, BM)
        cols = tl.arange(0, TP)
        dd = tl.arange(0, DP)
        return (tl.program_id(0), tl.program_id(1), tl.program_id(2), tl.num_programs(1), rows, cols, dd,
                rows < T, cols < T, dd < D)

    @triton.jit
    def _dot_nt(a, b, F32: tl.constexpr):
        """``a·bᵀ`` in float32: IEEE products for float32 inputs, exact bf16/fp16 products otherwise."""
        if F32:
            return tl.dot(a.to(tl.float32), tl.trans(b.to(tl.float32)), input_precision="ieee")
        else:
            return tl.dot(a, tl.trans(b))

    @triton.jit(do_not_specialize=["B", "per"])  # one compiled kernel for every batch size
    def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, valid_ptr, attn_ptr, col_ptr, rmax_ptr, rsum_ptr,
                          sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sob, soh, sot,
                          B, H, T, D, scale, per,
                          BM: tl.constexpr, TP: tl.constexpr, DP: tl.constexpr,
                          STORE_O: tl.constexpr, F32: tl.constexpr):
        h, rb, c, n_rb, rows, cols, dd, row_in, col_in, d_in = _tile(T, D, BM, TP, DP)
        acc = tl.zeros((BM, TP), dtype=tl.float32)
        for w in tl.range(c * per, tl.minimum(c * per + per, B)):
            wl = tl.cast(w, tl.int64)  # window offsets of large batches exceed int32
            vq = tl.load(valid_ptr + w * T + rows, mask=row_in, other=0) != 0
            vk = tl.load(valid_ptr + w * T + cols, mask=col_in, other=0) != 0
            q = tl.load(q_ptr + wl * sqb + h * sqh + rows[:, None] * sqt + dd[None, :],
                        mask=row_in[:, None] & d_in[None, :], other=0.0)
            k = tl.load(k_ptr + wl * skb + h * skh + cols[:, None] * skt + dd[None, :],
                        mask=col_in[:, None] & d_in[None, :], other=0.0)
            s = _dot_nt(q, k, F32)
            s = tl.where(vk[None, :], s * scale, float("-inf"))
            m = tl.max(s, axis=1)
            p = tl.exp(s - m[:, None])
            ssum = tl.sum(p, axis=1)
            p = p / ssum[:, None]
            if STORE_O:
                v = tl.load(v_ptr + wl * svb + h * svh + cols[:, None] * svt + dd[None, :],
                            mask=col_in[:, None] & d_in[None, :], other=0.0)
                if F32:
                    o = tl.dot(p, v.to(tl.float32), input_precision="ieee")
                else:
                    o = tl.dot(p.to(v.dtype), v)
                tl.store(o_ptr + wl * sob + h * soh + rows[:, None] * sot + dd[None, :], o.to(o_ptr.dtype.element_ty),
                         mask=row_in[:, None] & d_in[None, :])
            a = tl.where(vq[:, None] & vk[None, :], p, 0.0)  # (a window without valid keys has NaN rows)
            acc += a
            tl.store(col_ptr + ((rb * B + wl) * H + h) * T + cols, tl.sum(a, axis=0), mask=col_in)
            tl.store(rmax_ptr + (wl * H + h) * T + rows, m, mask=row_in)
            tl.store(rsum_ptr + (wl * H + h) * T + rows, ssum, mask=row_in)
        tl.store(attn_ptr + (c * H + h) * T * T + rows[:, None] * T + cols[None, :], acc,
                 mask=row_in[:, None] & col_in[None, :])

    @triton.jit
    def _peak_kernel(z_ptr, valid_ptr, peak_ptr, szb, szh, szt, H, T, D,
                     TP: tl.constexpr, DP: tl.constexpr, F32: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)  # window offsets of large batches exceed int32
        w = pid // H
        h = pid % H
        r = tl.arange(0, TP)
        dd = tl.arange(0, DP)
        v = tl.load(valid_ptr + w * T + r, mask=r < T, other=0) != 0
        z = tl.load(z_ptr + w * szb + h * szh + r[:, None] * szt + dd[None, :], mask=v[:, None] & (dd < D)[None, :],
                    other=0.0)
        s = _dot_nt(z, z, F32)
        s = tl.where(r[:, None] == r[None, :], 0.0, s)
        tl.store(peak_ptr + pid, tl.max(tl.max(s, axis=1), axis=0))

    @triton.jit
    def _value_bins(n, up, bscale, boffset, nbins, NB: tl.constexpr):
        """The value-histogram bin of each normalised similarity ``n`` (as :meth:`SimBins.index`: ``n·scale``
        and ``+ offset`` rounded apart, clamped, NaN in bin 0), ``NB − 1`` (an overflow bin) outside ``up``."""
        t = n * bscale
        t = t + boffset
        t = tl.minimum(tl.maximum(t, 0.0), nbins - 1.0)
        t = tl.where(t == t, t, 0.0)
        return tl.where(up, t.to(tl.int32), NB - 1)

    @triton.jit
    def _pair_sums(BM: tl.constexpr, BN: tl.constexpr, NB: tl.constexpr):
        """A pairs program's running sums: similarity and high-pair location ``[BM, BN]``, value
        histogram ``[NB]``, same-sentence and repeated same-sentence high pairs per row ``[BM]``."""
        return (tl.zeros((BM, BN), dtype=tl.float32), tl.zeros((BM, BN), dtype=tl.int32), tl.zeros((NB,), dtype=tl.int32),
                tl.zeros((BM,), dtype=tl.int32), tl.zeros((BM,), dtype=tl.int32))

    @triton.jit
    def _pair_step(z_ptr, valid_ptr, ids_ptr, sent_ptr, peak_ptr, rows_ptr, cols_ptr, inner_ptr, row_part, col_part, w, B,
                   h, H, T, szb, szh, szt, rows, cols, dd, row_in, col_in, d_in, threshold, bscale, boffset, nbins,
                   acc_sim, acc_loc, hist, c_same, c_rs, NB: tl.constexpr, F32: tl.constexpr):
        """Add one window's ``rows × cols`` tile of one head to the running sums (:func:`_pair_sums`):
        the normalised similarity, the value histogram of its valid pairs ``i < j`` and which of those
        are high; store the window's high pairs per row, per column and among repeated tokens per row
        (as partials ``row_part`` and ``col_part`` of ``[parts, B, H, T]`` buffers)."""
        wl = tl.cast(w, tl.int64)  # window offsets of large batches exceed int32
        vr = tl.load(valid_ptr + w * T + rows, mask=row_in, other=0) != 0
        vc = tl.load(valid_ptr + w * T + cols, mask=col_in, other=0) != 0
        zr = tl.load(z_ptr + wl * szb + h * szh + rows[:, None] * szt + dd[None, :], mask=vr[:, None] & d_in[None, :],
                     other=0.0)
        zc = tl.load(z_ptr + wl * szb + h * szh + cols[:, None] * szt + dd[None, :], mask=vc[:, None] & d_in[None, :],
                     other=0.0)
        s = _dot_nt(zr, zc, F32)
        s = tl.where(cols[None, :] == rows[:, None], 0.0, s)
        peak = tl.load(peak_ptr + wl * H + h)
        n = s / tl.where(peak > 0, peak, 1.0)
        n = tl.where(peak > 0, n, 0.0)
        acc_sim += n
        up = (cols[None, :] > rows[:, None]) & vr[:, None] & vc[None, :]
        bins = _value_bins(n, up, bscale, boffset, nbins, NB)
        hist += tl.histogram(tl.reshape(bins, [bins.shape[0] * bins.shape[1]]), NB)
        hi = ((n > threshold) & up).to(tl.int32)
        acc_loc += hi
        idr = tl.load(ids_ptr + w * T + rows, mask=row_in, other=-1)
        idc = tl.load(ids_ptr + w * T + cols, mask=col_in, other=-2)
        rep = tl.where(idr[:, None] == idc[None, :], hi, 0)
        sr = tl.load(sent_ptr + w * T + rows, mask=row_in, other=-1)
        sc = tl.load(sent_ptr + w * T + cols, mask=col_in, other=-1)
        same = (sr[:, None] == sc[None, :]) & (sr[:, None] >= 0)
        c_same += tl.sum(tl.where(same, hi, 0), axis=1)
        c_rs += tl.sum(tl.where(same, rep, 0), axis=1)
        tl.store(rows_ptr + ((row_part * B + wl) * H + h) * T + rows, tl.sum(hi, axis=1), mask=row_in)
        tl.store(cols_ptr + ((col_part * B + wl) * H + h) * T + cols, tl.sum(hi, axis=0), mask=col_in)
        tl.store(inner_ptr + ((row_part * B + wl) * H + h) * T + rows, tl.sum(rep, axis=1), mask=row_in)  # Σ: the repeats
        return acc_sim, acc_loc, hist, c_same, c_rs

    @triton.jit
    def _pair_partials(hist_ptr, cnt_ptr, part, hist, c_same, c_rs, NB: tl.constexpr):
        """A pairs program's histogram and same-sentence counts, as partial ``part``."""
        tl.store(hist_ptr + part * NB + tl.arange(0, NB), hist)
        tl.store(cnt_ptr + part * 2, tl.sum(c_same, axis=0))
        tl.store(cnt_ptr + part * 2 + 1, tl.sum(c_rs, axis=0))

    @triton.jit(do_not_specialize=["B", "per"])  # one compiled kernel for every batch size
    def _pairs_kernel(z_ptr, valid_ptr, ids_ptr, sent_ptr, peak_ptr, sim_ptr, loc_ptr, hist_ptr, rows_ptr, cols_ptr,
                      inner_ptr, cnt_ptr, szb, szh, szt, B, H, T, D, threshold, bscale, boffset, nbins, per,
                      BM: tl.constexpr, TP: tl.constexpr, DP: tl.constexpr, NB: tl.constexpr, F32: tl.constexpr):
        """Row tiles: a program owns ``BM`` query rows and all key columns."""
        h, rb, c, n_rb, rows, cols, dd, row_in, col_in, d_in = _tile(T, D, BM, TP, DP)
        acc_sim, acc_loc, hist, c_same, c_rs = _pair_sums(BM, TP, NB)
        for w in tl.range(c * per, tl.minimum(c * per + per, B)):  # rows and inner: one part; cols: per row block
            acc_sim, acc_loc, hist, c_same, c_rs = _pair_step(
                z_ptr, valid_ptr, ids_ptr, sent_ptr, peak_ptr, rows_ptr, cols_ptr, inner_ptr, 0, rb, w, B, h, H, T, szb, szh,
                szt, rows, cols, dd, row_in, col_in, d_in, threshold, bscale, boffset, nbins, acc_sim, acc_loc, hist,
                c_same, c_rs, NB, F32)
        tile = (c * H + h) * T * T + rows[:, None] * T + cols[None, :]
        tl.store(sim_ptr + tile, acc_sim, mask=row_in[:, None] & col_in[None, :])
        tl.store(loc_ptr + tile, acc_loc, mask=row_in[:, None] & col_in[None, :])
        _pair_partials(hist_ptr, cnt_ptr, (c * n_rb + rb) * H + h, hist, c_same, c_rs, NB)

    @triton.jit(do_not_specialize=["B", "per"])  # one compiled kernel for every batch size
    def _pairs_triangle_kernel(z_ptr, valid_ptr, ids_ptr, sent_ptr, peak_ptr, tiles_ptr, sim_ptr, loc_ptr, hist_ptr,
                               rows_ptr, cols_ptr, inner_ptr, cnt_ptr, szb, szh, szt, B, H, T, D, threshold, bscale,
                               boffset, nbins, per, BM: tl.constexpr, DP: tl.constexpr, NB: tl.constexpr,
                               F32: tl.constexpr):
        """Upper-triangle tiles: a program owns the ``BM × BM`` tile (row block ``rb`` ≤ column block
        ``cb``) and mirrors it into the lower triangle, which no pair statistic reads (the similarity
        sum is symmetric, the pair counts zero there). Per-row and per-column counts are partial per
        column and row block, in zero-filled buffers summed afterwards."""
        h, k, c = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        rb = tl.load(tiles_ptr + 2 * k)
        cb = tl.load(tiles_ptr + 2 * k + 1)
        rows = rb * BM + tl.arange(0, BM)
        cols = cb * BM + tl.arange(0, BM)
        dd = tl.arange(0, DP)
        row_in, col_in, d_in = rows < T, cols < T, dd < D
        acc_sim, acc_loc, hist, c_same, c_rs = _pair_sums(BM, BM, NB)
        for w in tl.range(c * per, tl.minimum(c * per + per, B)):  # rows and inner: per column block; cols: per row block
            acc_sim, acc_loc, hist, c_same, c_rs = _pair_step(
                z_ptr, valid_ptr, ids_ptr, sent_ptr, peak_ptr, rows_ptr, cols_ptr, inner_ptr, cb, rb, w, B, h, H, T, szb,
                szh, szt, rows, cols, dd, row_in, col_in, d_in, threshold, bscale, boffset, nbins, acc_sim, acc_loc, hist,
                c_same, c_rs, NB, F32)
        inside = row_in[:, None] & col_in[None, :]
        base = (c * H + h) * T * T
        tl.store(sim_ptr + base + rows[:, None] * T + cols[None, :], acc_sim, mask=inside)
        tl.store(loc_ptr + base + rows[:, None] * T + cols[None, :], acc_loc, mask=inside)
        if rb != cb:
            tl.store(sim_ptr + base + cols[None, :] * T + rows[:, None], acc_sim, mask=inside)
            tl.store(loc_ptr + base + cols[None, :] * T + rows[:, None], tl.zeros((BM, BM), dtype=tl.int32), mask=inside)
        _pair_partials(hist_ptr, cnt_ptr, (c * tl.num_programs(1) + k) * H + h, hist, c_same, c_rs, NB)

    @triton.jit
    def _columns_kernel(q_ptr, k_ptr, top_ptr, rmax_ptr, rsum_ptr, valid_ptr, out_ptr, sqb, sqh, sqt, skb, skh, skt,
                        H, T, D, K, scale, TP: tl.constexpr, DP: tl.constexpr, KP: tl.constexpr, F32: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)  # window offsets of large batches exceed int32
        w = pid // H
        h = pid % H
        r = tl.arange(0, TP)
        dd = tl.arange(0, DP)
        c = tl.arange(0, KP)
        r_in = r < T
        c_in = c < K
        d_in = dd < D
        tops = tl.load(top_ptr + pid * K + c, mask=c_in, other=0)
        q = tl.load(q_ptr + w * sqb + h * sqh + r[:, None] * sqt + dd[None, :], mask=r_in[:, None] & d_in[None, :],
                    other=0.0)
        kk = tl.load(k_ptr + w * skb + h * skh + tops[:, None] * skt + dd[None, :], mask=c_in[:, None] & d_in[None, :],
                     other=0.0)
        s = _dot_nt(q, kk, F32) * scale  # [TP, KP]: the attention kernel's products, on tensor cores
        m = tl.load(rmax_ptr + pid * T + r, mask=r_in, other=0.0)
        ssum = tl.load(rsum_ptr + pid * T + r, mask=r_in, other=1.0)
        p = tl.exp(s - m[:, None]) / ssum[:, None]
        vq = tl.load(valid_ptr + w * T + r, mask=r_in, other=0) != 0
        vk = tl.load(valid_ptr + w * T + tops, mask=c_in, other=0) != 0
        p = tl.where(vq[:, None] & vk[None, :], p, 0.0)
        tl.store(out_ptr + (pid * T + r[:, None]) * K + c[None, :], p, mask=r_in[:, None] & c_in[None, :])


@dataclass
class AttentionPass:
    """What :func:`attention_pass` leaves of one step's attention (float32)."""

    plain_sum: torch.Tensor  # [H, T, T] masked probabilities summed over the windows
    column_sums: torch.Tensor  # [B, H, T]
    diagonals: tuple[torch.Tensor, torch.Tensor]  # [H] mass on key = query − 1 and key = query + 1
    row_max: torch.Tensor  # [B, H, T] max of the scaled scores per query row
    row_sum: torch.Tensor  # [B, H, T] Σ exp(score − max) per query row


@dataclass(frozen=True)
class Launch:
    """How a looping pass is launched: query rows per program (a power of two, 16 or more; capped at
    the padded sequence length), warps per program and software-pipeline stages of the window loop;
    for the pairs pass also its ``tiles``: ``"rows"`` (a program takes its rows against every column)
    or ``"triangle"`` (square tiles of the upper triangle only, mirrored: 10 instead of 16 tiles' work
    at 128 positions and 32 rows, with smaller accumulators, for per-block partial counts).

    The defaults are :data:`ATTENTION_LAUNCH` and :data:`PAIRS_LAUNCH`; ``benchmarks/kernel_sweep.py``
    times others on a GPU and ``benchmarks/kernel_resources.py`` shows their registers and spills.
    """

    block_rows: int = 32
    num_warps: int = 4
    num_stages: int = 2
    tiles: str = "rows"

    def __post_init__(self):
        if self.block_rows < 16 or self.block_rows & (self.block_rows - 1):
            raise ValueError(f"Launch.block_rows {self.block_rows} must be a power of two of at least 16")
        if self.num_warps not in (1, 2, 4, 8, 16) or self.num_stages < 1:
            raise ValueError(f"Launch num_warps {self.num_warps} must be 1, 2, 4, 8 or 16 and num_stages "
                             f"{self.num_stages} at least 1")
        if self.tiles not in TILES:
            raise ValueError(f"Launch.tiles {self.tiles!r} must be one of {', '.join(TILES)}")

    @classmethod
    def parse(cls, text: str) -> Launch:
        """``"ROWS,WARPS,STAGES"`` or ``"ROWS,WARPS,STAGES,TILES"`` (e.g. ``"32,4,2,triangle"``)."""
        parts = text.split(",")
        if len(parts) not in (3, 4) or not all(p.strip().isdigit() for p in parts[:3]):
            raise ValueError(f"launch {text!r} is not ROWS,WARPS,STAGES[,TILES] (e.g. 16,8,2 or 32,4,2,triangle)")
        return cls(*(int(p) for p in parts[:3]), *(p.strip() for p in parts[3:]))


TILES = ("rows", "triangle")  # pairs pass: row blocks × all columns, or the upper triangle's square tiles


ATTENTION_LAUNCH = Launch()
PAIRS_LAUNCH = Launch()


def _geometry(x: torch.Tensor, launch: Launch) -> tuple[int, int, int, int, int, int, bool]:
    b, h, t, d = x.shape
    bm = min(launch.block_rows, _pow2(t))
    return b, h, t, d, bm, -(-t // bm), x.dtype == torch.float32 or INTERPRET


_ONE_STAGE: set = set()  # launches whose pipelined build needed more shared memory than the GPU has


def _launch(kernel, grid: tuple, launch: Launch, args: tuple, constexprs: dict, dtype: torch.dtype) -> None:
    """Run a looping kernel under ``launch``. A pipelined build needs a second copy of its inputs in
    shared memory, which long sequences (512 positions: keys and values of 64 KiB each in bf16) can
    exceed on some GPUs; that build is retried with one stage, and the fallback remembered."""
    key = (id(kernel), launch, tuple(sorted(constexprs.items())), dtype)  # kernels are module-level objects
    stages = 1 if key in _ONE_STAGE else launch.num_stages
    try:
        kernel[grid](*args, **constexprs, num_warps=launch.num_warps, num_stages=stages)
    except triton.runtime.errors.OutOfResources as exc:
        if stages == 1 or "shared memory" not in str(exc):
            raise
        _ONE_STAGE.add(key)
        kernel[grid](*args, **constexprs, num_warps=launch.num_warps, num_stages=1)


def _last_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def attention_pass(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor | None, valid: torch.Tensor,
                   scale: float | None = None, out: torch.Tensor | None = None,
                   launch: Launch | None = None) -> AttentionPass:
    """Attention statistics of queries and keys ``[B, H, T, d]``; with ``value`` and ``out`` (same shape,
    any strides) also the head outputs softmax(QKᵀ·scale)·V written into ``out``.

    ``valid`` ``[B, T]`` bool; ``scale`` defaults to 1/√d; ``launch`` to :data:`ATTENTION_LAUNCH`
    (read at call time). Padded query rows get outputs (as the model computes them) but enter no statistic.
    """
    q, k = _last_contiguous(query), _last_contiguous(key)
    launch = launch or ATTENTION_LAUNCH
    if launch.tiles != "rows":
        raise ValueError(f"attention_pass: Launch.tiles {launch.tiles!r} — the attention pass has row tiles only")
    b, h, t, d, bm, n_rb, f32 = _geometry(q, launch)
    scale = d ** -0.5 if scale is None else float(scale)
    chunks, per = _runs(b, h * n_rb, q.device)
    dev = q.device
    attn = torch.empty(chunks, h, t, t, dtype=torch.float32, device=dev)
    cols = torch.empty(n_rb, b, h, t, dtype=torch.float32, device=dev)
    rmax = torch.empty(b, h, t, dtype=torch.float32, device=dev)
    rsum = torch.empty(b, h, t, dtype=torch.float32, device=dev)
    store = value is not None and out is not None
    if store and out.stride(-1) != 1:
        raise ValueError("attention_pass: `out` must be contiguous in its last dimension")
    v, o = (_last_contiguous(value), out) if store else (k, k)  # without outputs: unused pointers
    _launch(_attention_kernel, (h, n_rb, chunks), launch, (
        q, k, v, o, valid.to(torch.int8).contiguous(), attn, cols, rmax, rsum,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], b, h, t, d, scale, per),
        dict(BM=bm, TP=_pow2(t), DP=_pow2(d), STORE_O=store, F32=f32), q.dtype)
    plain = attn.sum(dim=0)  # the diagonals of this sum are the windows' diagonal sums
    diagonals = tuple(plain.diagonal(offset=o, dim1=-2, dim2=-1).sum(dim=-1) for o in (-1, 1))
    return AttentionPass(plain, cols.sum(dim=0), diagonals, rmax, rsum)


def similarity_pass(z: torch.Tensor, valid: torch.Tensor, input_ids: torch.Tensor, sentence_ids: torch.Tensor,
                    threshold: float, bin_scale: float, bin_offset: float, bins: int,
                    launch: Launch | None = None) -> PairReductions:
    """Pair statistics of head outputs ``z`` ``[B, H, T, d]`` (any float dtype, any strides) as the
    :class:`~headsim.stats.pairs.PairReductions` the accumulators add.

    ``sentence_ids`` ``[B, T]`` must be ``-1`` wherever a position is invalid or in no sentence;
    ``launch`` defaults to :data:`PAIRS_LAUNCH` (read at call time).
    """
    z = _last_contiguous(z)
    launch = launch or PAIRS_LAUNCH
    b, h, t, d, bm, n_rb, f32 = _geometry(z, launch)
    dev = z.device
    vi = valid.to(torch.int8).contiguous()
    tp, dp = _pow2(t), _pow2(d)
    peak = torch.empty(b, h, dtype=torch.float32, device=dev)
    _peak_kernel[(b * h,)](z, vi, peak, *z.stride()[:3], h, t, d, TP=tp, DP=dp, F32=f32, num_warps=8)
    triangle = launch.tiles == "triangle"
    tiles = _upper_tiles(n_rb, dev) if triangle else None
    programs = len(tiles) if triangle else n_rb
    chunks, per = _runs(b, h * programs, dev)
    nb = _pow2(bins + 1, 2)
    sim = torch.empty(chunks, h, t, t, dtype=torch.float32, device=dev)
    loc = torch.empty(chunks, h, t, t, dtype=torch.int32, device=dev)
    hist = torch.empty(chunks, programs, h, nb, dtype=torch.int32, device=dev)
    new = torch.zeros if triangle else torch.empty  # triangle tiles leave partials of the lower blocks unwritten
    rows = new(*((n_rb,) if triangle else ()), b, h, t, dtype=torch.int32, device=dev)
    cols = new(n_rb, b, h, t, dtype=torch.int32, device=dev)
    inner = new(*((n_rb,) if triangle else ()), b, h, t, dtype=torch.int32, device=dev)
    cnt = torch.empty(chunks, programs, h, 2, dtype=torch.int32, device=dev)
    extra = {} if INTERPRET else {"enable_fp_fusion": False}  # n·scale + offset rounded twice, as in SimBins.index
    common = (z, vi, input_ids.to(torch.int32).contiguous(), sentence_ids.to(torch.int32).contiguous(), peak)
    outputs = (sim, loc, hist, rows, cols, inner, cnt, *z.stride()[:3], b, h, t, d, float(threshold),
               float(bin_scale), float(bin_offset), bins, per)
    if triangle:
        _launch(_pairs_triangle_kernel, (h, programs, chunks), launch, (*common, tiles, *outputs),
                dict(BM=bm, DP=dp, NB=nb, F32=f32, **extra), z.dtype)
        rows, inner = rows.sum(dim=0), inner.sum(dim=0)
    else:
        _launch(_pairs_kernel, (h, n_rb, chunks), launch, (*common, *outputs),
                dict(BM=bm, TP=tp, DP=dp, NB=nb, F32=f32, **extra), z.dtype)
    counts = cnt.sum(dim=(0, 1)).to(torch.float32)
    return PairReductions(sim.sum(dim=0), hist.sum(dim=(0, 1))[:, :bins].to(torch.int64),
                          loc.sum(dim=0).to(torch.float32), rows.to(torch.float32),
                          cols.sum(dim=0).to(torch.float32), inner.to(torch.float32),
                          counts[:, 0], inner.sum(dim=(0, 2)).to(torch.float32), counts[:, 1])


@functools.lru_cache(maxsize=16)
def _upper_tiles(n: int, device: torch.device) -> torch.Tensor:
    """``[n(n+1)/2, 2]`` int32 (row block, column block) of the tiles on and above the diagonal (made
    once per device: a copy to the GPU per call would make the host wait)."""
    return torch.tensor([(i, j) for i in range(n) for j in range(i, n)], dtype=torch.int32, device=device)


def attention_columns(query: torch.Tensor, key: torch.Tensor, columns: torch.Tensor, ap: AttentionPass,
                      valid: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """``[B, H, T, k]`` float32: the masked attention probabilities at key ``columns`` ``[B, H, k]``,
    recomputed from the queries, those keys and :func:`attention_pass`'s row max and exp-sum."""
    q, k = _last_contiguous(query), _last_contiguous(key)
    b, h, t, d = q.shape
    n = columns.shape[-1]
    out = torch.empty(b, h, t, n, dtype=torch.float32, device=q.device)
    if n == 0:
        return out
    _columns_kernel[(b * h,)](q, k, columns.contiguous(), ap.row_max, ap.row_sum, valid.to(torch.int8).contiguous(), out,
                              *q.stride()[:3], *k.stride()[:3], h, t, d, n, d ** -0.5 if scale is None else float(scale),
                              TP=_pow2(t), DP=_pow2(d), KP=_pow2(n), F32=q.dtype == torch.float32 or INTERPRET,
                              num_warps=4)
    return out
