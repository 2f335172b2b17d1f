"""Triton kernels of windows longer than the resolution (statistics on position bins), for GPUs.

The torch tiles of :mod:`headsim.stats.tiled` build each ``1024 × 1024`` tile of ``S = Z·Zᵀ`` in
memory and pass over it some twenty times; here a tile lives in registers only and leaves the kernel
as the small binned sums the accumulators keep:

* :func:`binned_pairs`: what :func:`headsim.stats.tiled.pair_reductions_tiled` gives, in two
  launches over the ``BM × BM`` tiles on and above the diagonal: each window's and head's exact
  maximum of ``S`` off the diagonal (a float ``atomic_max``), then the normalised tile, its value
  histogram, its sums and high-similarity pairs per bin pair, the pairs' distances, per-position
  counts, same-sentence and repeated-token counts. A tile's bin pairs belong to it alone (bins are
  ``W`` consecutive positions, ``W`` divides ``BM``), so the binned sums are plain stores of float32
  partials summed over the windows in registers, mirrored into the lower triangle; integer counts are
  added with integer atomics (exact in any order).
* :func:`attention_block`: one block of attention probabilities (the model tap's ``on_tile``, in the
  dtype the model computed them) read once into :class:`headsim.stats.tiled.AttentionTiles`' column
  sums, per-query-bin sums and near-diagonal entries.

Both follow the torch tiles' float32 arithmetic (bf16/fp16 products exact in float32, float32
inputs with IEEE products), so counts equal theirs up to threshold flips from summation order and
sums agree to float rounding (tests/test_triton_long.py runs both in Triton's interpreter). They
apply where the bin width ``W = T / R`` is a power of two from 2 to
:data:`~headsim.stats.batch.KERNEL_MAX_WIDTH` (:func:`headsim.stats.batch.kernel_tiles`); other
geometries stay on the torch tiles.
"""

from __future__ import annotations

import functools

import torch

from .batch import bin_width, kernel_tiles
from .triton_kernels import INTERPRET, Launch, _pow2, available, triton

if triton is not None:
    import triton.language as tl

    from .triton_kernels import _dot_nt, _value_bins

__all__ = ["attention_block", "attention_scores", "available", "binned_pairs"]


#: how :func:`binned_pairs` is launched (its ``block_rows`` is the tiles' side, at least a bin's width;
#: ``num_warps``); ``benchmarks/long_kernel_sweep.py`` times others on a GPU
PAIRS_LAUNCH = Launch(block_rows=64, num_warps=8)


def _block(w: int, launch: Launch) -> int:
    """The square tile's side for bins of ``w`` positions (a multiple of ``w``)."""
    return max(16 if INTERPRET else launch.block_rows, w)


@functools.lru_cache(maxsize=32)
def _upper(n: int, device: torch.device) -> torch.Tensor:
    """``[n(n+1)/2, 2]`` int32 (row block, column block) of the tiles on and above the diagonal."""
    return torch.triu_indices(n, n).T.to(torch.int32).contiguous().to(device)


if triton is not None:

    @triton.jit
    def _similarity(z_ptr, valid_ptr, rows, cols, h, wl, szb, szh, szt, T, D, DP: tl.constexpr, F32: tl.constexpr):
        """Window ``wl``'s and head ``h``'s ``S`` at ``rows × cols`` (diagonal and padding 0) and the
        rows' and columns' validity."""
        dd = tl.arange(0, DP)
        d_in = dd < D
        vr = tl.load(valid_ptr + wl * T + rows, mask=rows < T, other=0) != 0
        vc = tl.load(valid_ptr + wl * T + cols, mask=cols < T, other=0) != 0
        base = z_ptr + wl * szb + h * szh
        zr = tl.load(base + rows.to(tl.int64)[:, None] * szt + dd[None, :], mask=vr[:, None] & d_in[None, :], other=0.0)
        zc = tl.load(base + cols.to(tl.int64)[:, None] * szt + dd[None, :], mask=vc[:, None] & d_in[None, :], other=0.0)
        s = _dot_nt(zr, zc, F32)
        return tl.where(rows[:, None] == cols[None, :], 0.0, s), vr, vc

    @triton.jit
    def _tile(tiles_ptr, k, BM: tl.constexpr):
        """Tile ``k``'s row and column block and its rows and columns."""
        rb = tl.load(tiles_ptr + 2 * k)
        cb = tl.load(tiles_ptr + 2 * k + 1)
        return rb, cb, rb * BM + tl.arange(0, BM), cb * BM + tl.arange(0, BM)

    @triton.jit
    def _peak_kernel(z_ptr, valid_ptr, tiles_ptr, peak_ptr, szb, szh, szt, H, T, D,
                     BM: tl.constexpr, DP: tl.constexpr, F32: tl.constexpr):
        k, h, w = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        rb, cb, rows, cols = _tile(tiles_ptr, k, BM)
        s, vr, vc = _similarity(z_ptr, valid_ptr, rows, cols, h, tl.cast(w, tl.int64), szb, szh, szt, T, D, DP, F32)
        tl.atomic_max(peak_ptr + tl.cast(w, tl.int64) * H + h, tl.max(tl.max(s, axis=1), axis=0))

    @triton.jit
    def _bin_sums(x, G: tl.constexpr, W: tl.constexpr):
        """``[BM, BM]`` summed over ``W × W`` blocks: ``[G, G]``."""
        return tl.sum(tl.sum(tl.reshape(x, (G, W, G, W)), axis=3), axis=1)

    @triton.jit
    def _pairs_kernel(z_ptr, valid_ptr, ids_ptr, sent_ptr, peak_ptr, tiles_ptr, dbin_ptr,
                      sim_ptr, loc_ptr, hist_ptr, dist_ptr, dsum_ptr, rows_ptr, cols_ptr, inner_ptr, cnt_ptr,
                      szb, szh, szt, B, H, T, D, R, threshold, bscale, boffset, nbins,
                      BM: tl.constexpr, W: tl.constexpr, DP: tl.constexpr, NB: tl.constexpr, F32: tl.constexpr):
        k, h = tl.program_id(0), tl.program_id(1)
        rb, cb, rows, cols = _tile(tiles_ptr, k, BM)
        G: tl.constexpr = BM // W
        acc_sim = tl.zeros((G, G), dtype=tl.float32)
        acc_loc = tl.zeros((G, G), dtype=tl.int32)
        hist = tl.zeros((NB,), dtype=tl.int32)
        dhist = tl.zeros((2 * BM,), dtype=tl.int32)
        c_same = tl.zeros((BM,), dtype=tl.int32)
        c_rs = tl.zeros((BM,), dtype=tl.int32)
        for w in range(0, B):
            wl = tl.cast(w, tl.int64)
            s, vr, vc = _similarity(z_ptr, valid_ptr, rows, cols, h, wl, szb, szh, szt, T, D, DP, F32)
            peak = tl.load(peak_ptr + wl * H + h)
            n = s / tl.where(peak > 0, peak, 1.0)
            n = tl.where(peak > 0, n, 0.0)
            acc_sim += _bin_sums(n, G, W)
            up = (cols[None, :] > rows[:, None]) & vr[:, None] & vc[None, :]
            hist += tl.histogram(tl.reshape(_value_bins(n, up, bscale, boffset, nbins, NB), [BM * BM]), NB)
            hi = ((n > threshold) & up).to(tl.int32)
            acc_loc += _bin_sums(hi, G, W)
            off = tl.where(hi != 0, cols[None, :] - rows[:, None] - (cb - rb) * BM + (BM - 1), 2 * BM - 1)
            dhist += tl.histogram(tl.reshape(off, [BM * BM]), 2 * BM)
            idr = tl.load(ids_ptr + wl * T + rows, mask=rows < T, other=-1)
            idc = tl.load(ids_ptr + wl * T + cols, mask=cols < T, other=-2)
            rep = tl.where(idr[:, None] == idc[None, :], hi, 0)
            sr = tl.load(sent_ptr + wl * T + rows, mask=rows < T, other=-1)
            sc = tl.load(sent_ptr + wl * T + cols, mask=cols < T, other=-1)
            same = (sr[:, None] == sc[None, :]) & (sr[:, None] >= 0)
            c_same += tl.sum(tl.where(same, hi, 0), axis=1)
            c_rs += tl.sum(tl.where(same, rep, 0), axis=1)
            per_row = tl.sum(hi, axis=1)
            per_col = tl.sum(hi, axis=0)
            per_rep = tl.sum(rep, axis=1)
            at = (wl * H + h) * T
            tl.atomic_add(rows_ptr + at + rows, per_row, mask=(rows < T) & (per_row > 0))
            tl.atomic_add(cols_ptr + at + cols, per_col, mask=(cols < T) & (per_col > 0))
            tl.atomic_add(inner_ptr + at + rows, per_rep, mask=(rows < T) & (per_rep > 0))
        # binned sums: this tile's bin pairs and, off the diagonal, their mirror image (its own too)
        g = tl.arange(0, G)
        rbin = rb * G + g
        cbin = cb * G + g
        inside = (rbin[:, None] < R) & (cbin[None, :] < R)
        base = tl.cast(h, tl.int64) * R * R
        tl.store(sim_ptr + base + rbin[:, None] * R + cbin[None, :], acc_sim, mask=inside)
        tl.store(loc_ptr + base + rbin[:, None] * R + cbin[None, :], acc_loc, mask=inside)
        if rb != cb:
            tl.store(sim_ptr + base + cbin[None, :] * R + rbin[:, None], acc_sim, mask=inside)
            tl.store(loc_ptr + base + cbin[None, :] * R + rbin[:, None], tl.zeros((G, G), dtype=tl.int32), mask=inside)
        nb = tl.arange(0, NB)
        tl.atomic_add(hist_ptr + h * NB + nb, hist.to(tl.int64), mask=hist > 0)
        # distances of the high pairs: offset o of this tile is distance (cb − rb)·BM − (BM − 1) + o
        o = tl.arange(0, 2 * BM)
        dist = (cb - rb) * BM - (BM - 1) + o
        live = (dhist > 0) & (o < 2 * BM - 1)
        dbin = tl.load(dbin_ptr + dist, mask=live, other=0)
        tl.atomic_add(dist_ptr + h * R + dbin, dhist.to(tl.int64), mask=live)
        tl.atomic_add(dsum_ptr + h, tl.sum(tl.where(live, dhist.to(tl.int64) * dist.to(tl.int64), 0), axis=0))
        tl.atomic_add(cnt_ptr + 2 * h, tl.sum(c_same, axis=0).to(tl.int64))
        tl.atomic_add(cnt_ptr + 2 * h + 1, tl.sum(c_rs, axis=0).to(tl.int64))

    @triton.jit
    def _reduce_rows(p, c, keys, r_lo, r_hi, k_lo, k_hi, at, pqb_ptr, near_ptr, T, R,
                     W: tl.constexpr, RC: tl.constexpr, BN: tl.constexpr):
        """Add a chunk of probabilities ``p`` ``[RC, BN]`` (query rows ``c..c+RC``, ``c`` a multiple of ``RC``; ``keys``;
        zero wherever not kept) to the per-query-bin sums of the bins holding rows ``r_lo..r_hi`` and store
        its near-diagonal entries of keys ``k_lo..k_hi`` (this program's); returns its column sums."""
        G: tl.constexpr = RC // W
        per_bin = tl.sum(tl.reshape(p, (G, W, BN)), axis=1)  # [G, BN]
        rows = c + tl.arange(0, RC)
        qb = c // W + tl.arange(0, G)
        k_in = (keys >= k_lo) & (keys < k_hi)
        live = ((qb * W < r_hi) & ((qb + 1) * W > r_lo) & (qb < R))[:, None] & k_in[None, :]
        at_bin = pqb_ptr + (at * R + qb.to(tl.int64))[:, None] * T + keys[None, :]
        tl.store(at_bin, tl.load(at_bin, mask=live, other=0.0) + per_bin, mask=live)
        r_in = (rows >= r_lo) & (rows < r_hi)
        for slot in tl.static_range(3):
            key = rows + (slot - 1)
            got = tl.sum(tl.where(keys[None, :] == key[:, None], p, 0.0), axis=1)  # [RC]
            tl.store(near_ptr + (at * T + rows) * 3 + slot, got, mask=r_in & (key >= k_lo) & (key < k_hi) & (key >= 0))
        return tl.sum(p, axis=0)

    @triton.jit
    def _attention_kernel(p_ptr, valid_ptr, col_ptr, pqb_ptr, near_ptr, spb, sph, spr, spk,
                          H, T, R, r0, nrows, k0, nkeys,
                          W: tl.constexpr, RC: tl.constexpr, BN: tl.constexpr):
        kb, h, w = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        wl = tl.cast(w, tl.int64)
        j = tl.arange(0, BN)
        keys = k0 + kb * BN + j  # absolute key positions
        k_in = (kb * BN + j) < nkeys
        vk = tl.load(valid_ptr + wl * T + keys, mask=k_in, other=0) != 0
        base = p_ptr + wl * spb + h * sph
        colsum = tl.zeros((BN,), dtype=tl.float32)
        at = (wl * H + h)
        for c in range((r0 // RC) * RC, r0 + nrows, RC):
            rows = c + tl.arange(0, RC)  # absolute query positions
            r_in = (rows >= r0) & (rows < r0 + nrows)
            vq = tl.load(valid_ptr + wl * T + rows, mask=r_in, other=0) != 0
            keep = r_in[:, None] & k_in[None, :] & vq[:, None] & vk[None, :]
            p = tl.load(base + (rows - r0).to(tl.int64)[:, None] * spr + (kb * BN + j)[None, :] * spk, mask=keep,
                        other=0.0).to(tl.float32)
            colsum += _reduce_rows(p, c, keys, r0, r0 + nrows, k0 + kb * BN, tl.minimum(k0 + kb * BN + BN, k0 + nkeys),
                                   at, pqb_ptr, near_ptr, T, R, W, RC, BN)
        cs = col_ptr + at * T + keys
        tl.store(cs, tl.load(cs, mask=k_in, other=0.0) + colsum.to(tl.float64), mask=k_in)

    @triton.jit
    def _allowed(rows, cols, vk, T, window, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr):
        """Which keys each query row attends: valid keys; earlier ones if causal; fewer than ``window`` back."""
        ok = (vk & (cols < T))[None, :] & (rows < T)[:, None]
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None])
        if WINDOWED:
            ok = ok & (rows[:, None] - cols[None, :] < window)
        return ok

    @triton.jit
    def _head_rows(ptr, wl, head, rows, sb, sh, st, T, D, DP: tl.constexpr):
        """``[rows, DP]`` of one window's head (zero past ``T`` and ``D``)."""
        dd = tl.arange(0, DP)
        return tl.load(ptr + wl * sb + head * sh + rows.to(tl.int64)[:, None] * st + dd[None, :],
                       mask=(rows < T)[:, None] & (dd < D)[None, :], other=0.0)

    @triton.jit
    def _lse_kernel(q_ptr, k_ptr, valid_ptr, lse_ptr, sqb, sqh, sqt, skb, skh, skt, H, T, D, group, scale, window,
                    CAUSAL: tl.constexpr, WINDOWED: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                    DP: tl.constexpr, F32: tl.constexpr):
        """Each query row's log-sum-exp of its scaled scores over the keys it attends."""
        qb, h, w = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        wl = tl.cast(w, tl.int64)
        rows = qb * BM + tl.arange(0, BM)
        lo = 0
        hi = T
        if CAUSAL:
            hi = tl.minimum(T, qb * BM + BM)
        if WINDOWED:
            lo = tl.maximum(0, qb * BM - window + 1) // BN * BN
        m = tl.full((BM,), float("-inf"), dtype=tl.float32)
        total = tl.zeros((BM,), dtype=tl.float32)
        q = _head_rows(q_ptr, wl, h, rows, sqb, sqh, sqt, T, D, DP)
        for start in range(lo, hi, BN):
            cols = start + tl.arange(0, BN)
            s = _dot_nt(q, _head_rows(k_ptr, wl, h // group, cols, skb, skh, skt, T, D, DP), F32) * scale
            vk = tl.load(valid_ptr + wl * T + cols, mask=cols < T, other=0) != 0
            s = tl.where(_allowed(rows, cols, vk, T, window, CAUSAL, WINDOWED), s, float("-inf"))
            new = tl.maximum(m, tl.max(s, axis=1))
            safe = tl.where(new == float("-inf"), 0.0, new)
            total = total * tl.exp(m - safe) + tl.sum(tl.exp(s - safe[:, None]), axis=1)
            m = new
        tl.store(lse_ptr + (wl * H + h) * T + rows, m + tl.log(tl.maximum(total, 1.0)), mask=rows < T)  # no key: −inf

    @triton.jit
    def _probs_kernel(q_ptr, k_ptr, valid_ptr, lse_ptr, col_ptr, pqb_ptr, near_ptr, sqb, sqh, sqt, skb, skh, skt,
                      H, T, D, R, group, scale, window, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr,
                      W: tl.constexpr, RC: tl.constexpr, BN: tl.constexpr, DP: tl.constexpr, F32: tl.constexpr):
        """A block of keys' probabilities ``exp(score − lse)``, every query row that attends them, reduced."""
        kb, h, w = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        wl = tl.cast(w, tl.int64)
        cols = kb * BN + tl.arange(0, BN)
        vk = tl.load(valid_ptr + wl * T + cols, mask=cols < T, other=0) != 0
        lo = 0
        hi = T
        if CAUSAL:
            lo = kb * BN
        if WINDOWED:
            hi = tl.minimum(T, kb * BN + BN + window - 1)
        at = wl * H + h
        colsum = tl.zeros((BN,), dtype=tl.float32)
        k = _head_rows(k_ptr, wl, h // group, cols, skb, skh, skt, T, D, DP)
        for c in range(lo // RC * RC, hi, RC):
            rows = c + tl.arange(0, RC)
            s = _dot_nt(_head_rows(q_ptr, wl, h, rows, sqb, sqh, sqt, T, D, DP), k, F32) * scale
            lse = tl.load(lse_ptr + at * T + rows, mask=rows < T, other=0.0)
            vq = tl.load(valid_ptr + wl * T + rows, mask=rows < T, other=0) != 0
            keep = _allowed(rows, cols, vk, T, window, CAUSAL, WINDOWED) & vq[:, None]
            p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
            colsum += _reduce_rows(p, c, cols, 0, T, kb * BN, tl.minimum(kb * BN + BN, T), at, pqb_ptr, near_ptr,
                                   T, R, W, RC, BN)
        tl.store(col_ptr + at * T + cols, colsum.to(tl.float64), mask=cols < T)


def binned_pairs(z: torch.Tensor, valid: torch.Tensor, input_ids: torch.Tensor, sentences: torch.Tensor,
                 threshold: float, sim_bins, distance_bins: torch.Tensor, r: int, launch: Launch | None = None):
    """The pair reductions of one layer on ``r`` position bins from head outputs ``z`` ``[B, H, T, d]`` (any
    float dtype and strides; padding positions are ignored): :class:`~headsim.stats.pairs.PairReductions`
    (``sim_sum`` and ``location`` ``[H, R, R]``), the distance histogram ``[H, R]`` of the high pairs on
    ``distance_bins`` and the exact sum of their distances ``[H]`` (float64), as
    :func:`headsim.stats.tiled.pair_reductions_tiled`, for ``T`` positions on ``r`` bins that
    :func:`~headsim.stats.batch.kernel_tiles` accepts. ``sentences``: ``[B, T]``, ``-1`` at padding;
    ``distance_bins`` ``[T]``: the bin of every distance; ``launch`` defaults to :data:`PAIRS_LAUNCH` (read
    at call time)."""
    from .pairs import PairReductions

    b, h, t, d = z.shape
    if not kernel_tiles(t, r):
        raise ValueError(f"binned_pairs: {t} positions on {r} bins: the kernels take bins of a power of two positions")
    w = bin_width(t, r)
    if z.stride(-1) != 1:
        z = z.contiguous()
    launch = launch or PAIRS_LAUNCH
    bm = _block(w, launch)
    dev = z.device
    f32 = z.dtype == torch.float32 or INTERPRET
    tiles = _upper(-(-t // bm), dev)
    vi = valid.to(torch.int8).contiguous()
    dp = _pow2(d)
    peak = torch.zeros(b, h, dtype=torch.float32, device=dev)
    strides = z.stride()[:3]
    _peak_kernel[(tiles.shape[0], h, b)](z, vi, tiles, peak, *strides, h, t, d, BM=bm, DP=dp, F32=f32, num_warps=4)
    nb = _pow2(sim_bins.bins + 1, 2)
    sim = torch.empty(h, r, r, dtype=torch.float32, device=dev)
    loc = torch.empty(h, r, r, dtype=torch.int32, device=dev)
    hist = torch.zeros(h, nb, dtype=torch.int64, device=dev)
    dist = torch.zeros(h, r, dtype=torch.int64, device=dev)
    dsum = torch.zeros(h, dtype=torch.int64, device=dev)
    rows = torch.zeros(b, h, t, dtype=torch.int32, device=dev)
    cols = torch.zeros_like(rows)
    inner = torch.zeros_like(rows)
    cnt = torch.zeros(h, 2, dtype=torch.int64, device=dev)
    extra = {} if INTERPRET else {"enable_fp_fusion": False}  # n·scale + offset rounded twice, as in SimBins.index
    _pairs_kernel[(tiles.shape[0], h)](
        z, vi, input_ids.to(torch.int32).contiguous(), sentences.to(torch.int32).contiguous(), peak, tiles,
        distance_bins.to(torch.int32).contiguous(), sim, loc, hist, dist, dsum, rows, cols, inner, cnt, *strides,
        b, h, t, d, r, float(threshold), float(sim_bins.scale), float(sim_bins.offset), sim_bins.bins,
        BM=bm, W=w, DP=dp, NB=nb, F32=f32, num_warps=launch.num_warps, **extra)
    inner_f = inner.to(torch.float32)
    red = PairReductions(sim.to(torch.float64), hist[:, :sim_bins.bins], loc.to(torch.float32), rows.to(torch.float32),
                         cols.to(torch.float32), inner_f, cnt[:, 0].to(torch.float32), inner_f.sum(dim=(0, 2)),
                         cnt[:, 1].to(torch.float32))
    return red, dist.to(torch.float64), dsum.to(torch.float64)


def attention_block(probs: torch.Tensor, rows: slice, keys: slice, valid: torch.Tensor, width: int,
                    column_sums: torch.Tensor, per_query_bin: torch.Tensor, near: torch.Tensor) -> None:
    """Add a block of attention probabilities ``probs`` ``[B, H, rows, keys]`` (query rows ``rows``, key
    columns ``keys`` of ``T``; any float dtype and strides; padding pairs ignored) to ``column_sums``
    ``[B, H, T]`` float64, ``per_query_bin`` ``[B, H, R, T]`` float32 (query bins of ``width`` positions)
    and ``near`` ``[B, H, T, 3]`` float32 (``key = query − 1, query, query + 1``; written, not added)."""
    b, h, n_rows, n_keys = probs.shape
    t, r = column_sums.shape[-1], per_query_bin.shape[2]
    bn = 64 if INTERPRET else 128
    rc = max(width, 16)
    _attention_kernel[(-(-n_keys // bn), h, b)](
        probs, valid.to(torch.int8).contiguous(), column_sums, per_query_bin, near, *probs.stride(),
        h, t, r, rows.start, n_rows, keys.start, n_keys, W=width, RC=rc, BN=bn, num_warps=4)


def attention_scores(query: torch.Tensor, key: torch.Tensor, scale: float, causal: bool, window: int | None,
                     valid: torch.Tensor, width: int, column_sums: torch.Tensor, per_query_bin: torch.Tensor,
                     near: torch.Tensor) -> None:
    """One layer's attention ``softmax(Q·Kᵀ·scale + mask)`` (mask: valid keys; earlier ones where
    ``causal``; fewer than ``window`` positions back where given) from queries ``[B, H, T, d]`` and keys
    ``[B, H_kv, T, d]`` (query head ``h`` reads key head ``h // (H / H_kv)``), reduced as
    :func:`attention_block` reduces a whole layer's probabilities (written, not added): each row's
    log-sum-exp first, then each block of keys' probabilities recomputed from it. Nothing ``T×T`` is
    stored."""
    b, h, t, d = query.shape
    q, k = (x if x.stride(-1) == 1 else x.contiguous() for x in (query, key))
    r = per_query_bin.shape[2]
    f32 = q.dtype == torch.float32 or INTERPRET
    dev = q.device
    vi = valid.to(torch.int8).contiguous()
    lse = torch.empty(b, h, t, dtype=torch.float32, device=dev)
    bm = bn = 16 if INTERPRET else 64
    rc = max(bm, width)
    group = h // k.shape[1]
    win = int(window) if window else 0
    common = (*q.stride()[:3], *k.stride()[:3])
    flags = dict(CAUSAL=bool(causal), WINDOWED=bool(window), DP=_pow2(d), F32=f32)
    _lse_kernel[(-(-t // bm), h, b)](q, k, vi, lse, *common, h, t, d, group, float(scale), win, BM=bm, BN=bn,
                                     num_warps=4, **flags)
    _probs_kernel[(-(-t // bn), h, b)](q, k, vi, lse, column_sums, per_query_bin, near, *common, h, t, d, r, group,
                                       float(scale), win, W=width, RC=rc, BN=bn, num_warps=8, **flags)
