"""Numba kernel of the similarity tiles ``S = Z·Zᵀ`` (CPU): the pair statistics in one pass per tile.

:func:`reduce_tile` reads one tile of ``S`` once and adds everything the pair statistics need from
it, per window and head (:func:`headsim.stats.tiled.pair_reductions_tiled` builds the tiles and
takes the exact maximum first). :func:`reduce_upper` does the same for all the blocks of rows of a
one-tile window's upper triangle with a bin per position (every window within the resolution) in one
call, each window's and head's maximum found first from its blocks while they are in cache.
Its decisions are the torch code's, float32 operation for float32 operation: the value
``v = s / max · keep``, its histogram bin ``clamp(v · scale + offset, 0, bins − 1)`` truncated (NaN
in bin 0) and ``v > threshold`` with a float32 threshold, so every count equals the eager backend's
on the same ``S``. Where a query bin spans several rows, its rows are summed per key in float32 and
then added to the float64 bin pairs; a tile of a bin per position (every window within the
resolution) adds each value straight to its pair. Sums agree with eager's to float rounding. Every
per-pair update is a branch-free pass over the row (no branch per high-similarity pair). Heads run
in parallel (each head's outputs are its own), windows one after another.

:func:`anchor_counts` reduces a layer's partner counts to its anchor statistics (Fig 11) in one serial pass.

Numba is a dependency, imported with the first kernel: :data:`AVAILABLE` says whether it is installed
and :mod:`headsim.stats.backends` chooses; Numba caches the compiled kernel on disk.
"""

from __future__ import annotations

import importlib.util
import types

import numpy as np

numba = None  # imported with the first kernel (importing Numba costs about half a second)
#: whether the kernel can run (Numba is installed)
AVAILABLE = importlib.util.find_spec("numba") is not None
#: why not, where it cannot
MISSING = "" if AVAILABLE else "numba is not installed (pip install numba)"


def _segment_sum(v, lo, hi):  # pragma: no cover - compiled
    acc = np.float32(0.0)
    for j in range(lo, hi):
        acc += v[j]
    return acc


def _flush(rows_sum, query_bin, pos_bin, bin_end, c0, c, out):  # pragma: no cover - compiled
    """Add ``rows_sum`` (tile columns from key ``c0``) to ``out[query_bin]`` by key bin, and zero it."""
    if query_bin < 0:
        return
    if bin_end[pos_bin[c0]] == c0 + 1 and pos_bin[c0 + c - 1] - pos_bin[c0] == c - 1:  # a bin per key
        target = out[query_bin, pos_bin[c0]:]
        for j in range(c):
            target[j] += rows_sum[j]
            rows_sum[j] = 0
        return
    lo = 0
    while lo < c:
        q = pos_bin[c0 + lo]
        hi = min(bin_end[q] - c0, c)
        out[query_bin, q] += _segment_sum(rows_sum, lo, hi)
        lo = hi
    rows_sum[:] = 0


def _row_values(row, d, k, threshold, scale, offset, top, sums, above_at, index):  # pragma: no cover - compiled
    """One row's normalised values ``row / d · k`` added to ``sums``, whether each is above ``threshold``
    (1/0 into ``above_at``) and its histogram bin (into ``index``); returns how many are above."""
    zero = np.float32(0.0)
    above = np.int32(0)
    for j in range(row.shape[0]):  # one vectorised pass
        x = row[j] / d * k
        sums[j] += x
        m = x > threshold
        above_at[j] = m
        above = np.int32(above + np.int32(m))  # int32 (Numba widens a sum of int32 to int64: half the lanes)
        y = x * scale + offset
        y = y if y >= zero else zero  # below the range, or NaN: bin 0
        y = y if y <= top else top
        index[j] = np.int32(y)
    return above


def _row_marks(above_at, marks, counts, near, same_sentence, si):  # pragma: no cover - compiled
    """A row's high-similarity pairs (``above_at``, 1/0) added to ``marks``, ``counts`` and ``near``, in one
    branch-free pass; returns how many share the sentence ``si`` (−1: none, never shared). ``near`` is int32:
    float32 to int32 conversions vectorise on every x86 vector unit, to int64 only with AVX-512."""
    si = si if si >= 0 else -2  # sentence ids are −1 where there is none
    here = np.int32(0)
    for j in range(counts.shape[0]):
        u = above_at[j]
        marks[j] += u
        counts[j] += u
        n = np.int32(u)
        near[j] += n
        here += n if same_sentence[j] == si else np.int32(0)
    return np.int64(here)


def _tile_rows(s, b, h, a, c0, diagonal, direct, d, k, threshold, scale, offset, top, pos_bin, bin_end, valid, sent,
               upper_sum, location, row_count, col_count, even, odd, above_at, index, rows_sum, rows_above, gaps,
               pending):  # pragma: no cover - compiled
    """Window ``b``'s and head ``h``'s rows of tile ``s`` (rows from ``a``, keys from ``c0``) added, with the
    head's thread-local buffers; returns the query bin still pending (rows summed, not yet flushed) and how
    many of the tile's high-similarity pairs share a sentence."""
    r, c = s.shape[2], s.shape[3]
    key_bin = pos_bin[c0]
    inside = 0
    keys_valid = True
    for j in range(c):
        keys_valid &= valid[b, c0 + j]
    for i in range(r):
        gi = a + i
        if not valid[b, gi]:
            continue
        j0 = i + 1 if diagonal else 0
        n = c - j0
        if n <= 0:
            continue
        first = c0 + j0  # the key of tile_row[0]
        tile_row = s[b, h, i, j0:]
        pi = pos_bin[gi]
        if direct:  # the row's sums straight to their position pairs
            above = _row_values(tile_row, d, k, threshold, scale, offset, top,
                                upper_sum[h, pi, key_bin + j0:key_bin + c], above_at, index)
        else:  # summed over the rows of a query bin first, then split by key bin
            if pi != pending:
                _flush(rows_sum, pending, pos_bin, bin_end, c0, c, upper_sum[h])
                _flush(rows_above, pending, pos_bin, bin_end, c0, c, location[h])
                pending = pi
            above = _row_values(tile_row, d, k, threshold, scale, offset, top, rows_sum[j0:], above_at, index)
        if keys_valid:
            mm = n - (n & 1)
            for j in range(0, mm, 2):
                even[index[j]] += 1
                odd[index[j + 1]] += 1
            if n & 1:
                even[index[n - 1]] += 1
        else:
            for j in range(n):
                if valid[b, first + j]:
                    even[index[j]] += 1
        if above == 0:
            continue
        row_count[b, h, gi] += above
        # the high-similarity pairs, branch-free (invalid keys hold 0: never above)
        counts = col_count[b, h, first:first + n]
        near = gaps[first - gi:first - gi + n]
        same_sentence = sent[b, first:first + n]
        si = sent[b, gi]
        if direct:
            inside += _row_marks(above_at, location[h, pi, key_bin + j0:key_bin + c], counts, near, same_sentence, si)
        else:
            inside += _row_marks(above_at, rows_above[j0:], counts, near, same_sentence, si)
    return pending, inside


def _head_buffers(c, nb, n_gaps):  # pragma: no cover - compiled
    """A head's thread-local buffers for tiles of at most ``c`` keys: two histograms (consecutive equal bins
    do not wait on each other), the row's marks (1 where v > threshold) and bins, a query bin's pending
    sums and marks per key, and the high-similarity pairs by distance (int32: a call's pairs at one distance
    number at most its windows times ``T``)."""
    return (np.zeros(nb, np.int64), np.zeros(nb, np.int64), np.empty(c, np.float32), np.empty(c, np.int32),
            np.zeros(c, np.float32), np.zeros(c, np.float32), np.zeros(n_gaps, np.int32))


def _head_done(h, c0, c, pending, inside, pos_bin, bin_end, dist_bin, even, odd, rows_sum, rows_above, gaps, hist, upper_sum,
               location, distance, distance_sum, same):  # pragma: no cover - compiled
    """A head's pending rows flushed and its thread-local counts added to the outputs."""
    _flush(rows_sum, pending, pos_bin, bin_end, c0, c, upper_sum[h])
    _flush(rows_above, pending, pos_bin, bin_end, c0, c, location[h])
    for m in range(hist.shape[1]):
        hist[h, m] += even[m] + odd[m]
    far = 0
    for g in range(gaps.shape[0]):
        distance[h, dist_bin[g]] += gaps[g]
        far += g * np.int64(gaps[g])
    distance_sum[h] += far
    same[h] += inside


def _reduce_tile(s, a, c0, diagonal, divisor, keep, threshold, scale, offset, pos_bin, bin_end, dist_bin, valid, sent,
                 hist, upper_sum, location, distance, distance_sum, row_count, col_count, same):  # pragma: no cover - compiled
    n_windows, n_heads, r, c = s.shape
    top = np.float32(hist.shape[1] - 1)
    # a tile of a bin per position (every window within the resolution): rows go straight to their bins
    direct = pos_bin[a + r - 1] - pos_bin[a] == r - 1 and pos_bin[c0 + c - 1] - pos_bin[c0] == c - 1
    for h in numba.prange(n_heads):
        even, odd, above_at, index, rows_sum, rows_above, gaps = _head_buffers(c, hist.shape[1], dist_bin.shape[0])
        pending = -1
        inside = 0
        for b in range(n_windows):
            pending, here = _tile_rows(s, b, h, a, c0, diagonal, direct, divisor[b, h], keep[b, h], threshold, scale, offset,
                                       top, pos_bin, bin_end, valid, sent, upper_sum, location, row_count, col_count,
                                       even, odd, above_at, index, rows_sum, rows_above, gaps, pending)
            inside += here
        _head_done(h, c0, c, pending, inside, pos_bin, bin_end, dist_bin, even, odd, rows_sum, rows_above, gaps, hist,
                   upper_sum, location, distance, distance_sum, same)


def _bits_peak(row, top, widest):  # pragma: no cover - compiled
    """``top`` and ``widest`` (int32) raised by the float32 bits ``row`` (int32): their largest value, and
    their largest value less the sign bit."""
    sign_off = np.int32(0x7FFFFFFF)
    for j in range(row.shape[0]):  # one vectorised pass of int32 maxima
        x = row[j]
        top = max(top, x)
        widest = max(widest, np.int32(x & sign_off))  # int32: Numba widens ``&`` of int32 to int64
    return top, widest


def _upper_peak(blocks, b, h, cell):  # pragma: no cover - compiled
    """The maximum of window ``b``'s and head ``h``'s upper-triangle blocks off the diagonal, at least 0 (the
    zeroed diagonal counts), NaN where any entry is NaN: the amax of :func:`headsim.stats.tiled._tile_peak`.
    Found on the entries' bits (int32 maxima vectorise; a float32 of at least 0 orders as its bits do, a
    negative one has the sign bit); ``cell`` an int32 array of one entry (the peak's bits, read back as float32)."""
    top = np.int32(0)  # the largest bits of an entry >= 0
    widest = np.int32(0)  # the largest bits less the sign: above +inf's only for a NaN
    for m in range(len(blocks)):
        bits = blocks[m][b, h].view(np.int32)
        for i in range(bits.shape[0]):
            row = bits[i]
            top, widest = _bits_peak(row[:i], top, widest)  # the diagonal entry, read as 0, changes neither
            top, widest = _bits_peak(row[i + 1:], top, widest)
    if widest > np.int32(0x7F800000):
        return np.float32(np.nan)
    cell[0] = top
    return cell.view(np.float32)[0]


def _reduce_upper(blocks, starts, divisor, keep, threshold, scale, offset, pos_bin, bin_end, dist_bin, valid, sent,
                  hist, upper_sum, location, distance, distance_sum, row_count, col_count, same):  # pragma: no cover - compiled
    n_windows, n_heads = blocks[0].shape[0], blocks[0].shape[1]
    c = blocks[0].shape[3]
    top = np.float32(hist.shape[1] - 1)
    for h in numba.prange(n_heads):
        even, odd, above_at, index, rows_sum, rows_above, gaps = _head_buffers(c, hist.shape[1], dist_bin.shape[0])
        cell = np.zeros(1, np.int32)
        inside = 0
        for b in range(n_windows):
            peak = _upper_peak(blocks, b, h, cell)  # the blocks read again while they are in cache
            positive = peak > 0
            d = peak if positive else np.float32(1.0)
            k = np.float32(1.0) if positive else np.float32(0.0)
            divisor[b, h] = d
            keep[b, h] = k
            for m in range(len(blocks)):
                a = starts[m]
                _, here = _tile_rows(blocks[m], b, h, a, a, True, True, d, k, threshold, scale, offset, top, pos_bin,
                                     bin_end, valid, sent, upper_sum, location, row_count, col_count, even, odd, above_at,
                                     index, rows_sum, rows_above, gaps, -1)
                inside += here
        _head_done(h, 0, c, -1, inside, pos_bin, bin_end, dist_bin, even, odd, rows_sum, rows_above, gaps, hist,
                   upper_sum, location, distance, distance_sum, same)


def _top_keys(sums, valid_row, k, order):  # pragma: no cover - compiled
    """The ``k + 1`` valid keys of largest ``sums`` (invalid ones rank as −inf), largest first, ties to the
    smaller key, into ``order``; returns the k-th and (k+1)-th values (``k + 1 <= T``)."""
    t = sums.shape[0]
    best = np.full(k + 1, -np.inf, sums.dtype)
    for m in range(k + 1):
        order[m] = -1
    for j in range(t):
        x = sums[j] if valid_row[j] else -np.inf
        if order[k] >= 0 and not x > best[k]:
            continue
        m = k  # insertion: past every kept value at least as large (ties stay in key order)
        while m > 0 and (order[m - 1] < 0 or x > best[m - 1]):
            best[m] = best[m - 1]
            order[m] = order[m - 1]
            m -= 1
        best[m] = x
        order[m] = j
    return best[k - 1], best[k]


def _reduce_attention(a, valid, margin, zeroed, removed, column_sums, top, below, above):  # pragma: no cover - compiled
    n_windows, n_heads, t, _ = a.shape
    k = top.shape[2]
    for h in numba.prange(n_heads):
        z = zeroed[h]
        back = removed[h]
        lo = 0.0
        hi = 0.0
        sums = np.zeros(t, np.float32)
        exact = np.zeros(t, np.float64)
        order = np.empty(k + 1, np.int64)
        for b in range(n_windows):
            block = a[b, h]  # read twice while it is in cache: its column sums, then its top columns zeroed
            sums[:] = 0
            for i in range(t):
                row = block[i]
                if i > 0:
                    lo += row[i - 1]
                if i + 1 < t:
                    hi += row[i + 1]
                for j in range(t):
                    sums[j] += row[j]
            column_sums[b, h] = sums
            if k == 0:
                pass
            elif k >= t:
                for m in range(k):
                    top[b, h, m] = m
            else:
                kth, nxt = _top_keys(sums, valid[b], k, order)
                # as headsim.stats.attention.rank_columns: apart by more than float32 summation error, the
                # set is settled; else ranked again from float64 sums (ties to the smaller key)
                if kth - nxt <= margin * max(abs(kth), abs(nxt)):
                    exact[:] = 0
                    for i in range(t):
                        row = block[i]
                        for j in range(t):
                            exact[j] += row[j]
                    _top_keys(exact, valid[b], k, order)
                for m in range(k):
                    top[b, h, m] = order[m]
            cols = top[b, h]
            for i in range(t):
                row = block[i]
                taken = back[i]
                for m in range(k):
                    c = cols[m]
                    taken[c] += row[c]
                    row[c] = 0
                zi = z[i]
                for j in range(t):
                    zi[j] += row[j]
        below[h] += lo
        above[h] += hi


def _repeat_above(s, a, c0, rb, ri, rj, divisor, keep, threshold, out):  # pragma: no cover - compiled
    r, c = s.shape[2], s.shape[3]
    for n in range(rb.shape[0]):
        i = ri[n] - a
        j = rj[n] - c0
        if 0 <= i < r and 0 <= j < c:
            w = rb[n]
            for h in range(s.shape[1]):
                x = s[w, h, i, j] / divisor[w, h] * keep[w, h]
                out[n, h] = np.float32(1.0) if x > threshold else np.float32(0.0)


def _anchor_counts(rows, cols, inner, valid, first, ids, categories, key_shift, fraction_hist, fraction_sum, windows, kind,
                   distinct):  # pragma: no cover - compiled
    n_windows, n_heads, t = rows.shape
    bins = fraction_hist.shape[1]
    per_class = np.zeros(t, np.float32)
    anchors = np.empty(n_heads, np.int64)
    for b in range(n_windows):
        held = 0
        for h in range(n_heads):
            per_class[:] = 0
            pairs = np.float32(0.0)
            for p in range(t):
                pairs += rows[b, h, p]
                if valid[b, p]:
                    per_class[first[b, p]] += rows[b, h, p] + cols[b, h, p] - inner[b, h, p]
            n = np.int64(pairs)
            if n <= 0:
                continue
            best = 0
            best_key = np.int64(per_class[0]) * key_shift - ids[b, 0]
            for p in range(1, t):
                key = np.int64(per_class[p]) * key_shift - ids[b, p]
                if key > best_key:
                    best, best_key = p, key
            count = np.int64(per_class[best])
            fraction_hist[h, min(count * bins // n, bins - 1)] += 1
            fraction_sum[h] += count / n
            windows[h] += 1
            kind[h, categories[b, best]] += 1
            # distinct anchor ids over the heads that have one
            anchor = ids[b, best]
            fresh = True
            for m in range(held):
                if anchors[m] == anchor:
                    fresh = False
            if fresh:
                anchors[held] = anchor
                held += 1
        distinct[held] += 1


_kernel = None
_upper_kernels = None
_attention_kernels = None
_repeat_kernel = None
_anchor_kernel = None
#: tiles of fewer entries run on one thread: starting the thread pool costs more than it saves (and,
#: on a busy machine, waits for descheduled threads)
PARALLEL_ENTRIES = 1 << 20


def _compiled():
    """The compiled pair kernel, parallel over heads and serial; compiles the attention pass's pair
    (:func:`reduce_attention`) and the repeat and anchor passes (:func:`repeat_pairs_above`,
    :func:`anchor_counts`) too. Compiled once per machine: Numba caches them on disk where it can write."""
    global numba, _kernel, _upper_kernels, _attention_kernels, _repeat_kernel, _anchor_kernel, _segment_sum, _flush, _top_keys
    global _row_values, _row_marks, _tile_rows, _head_buffers, _head_done, _bits_peak, _upper_peak
    if _kernel is None:
        import numba as nb

        numba = nb

        def jit(fn, cache=True, **options):
            try:
                return nb.njit(cache=cache, **options)(fn)
            except RuntimeError:  # no writable cache directory: compiled in every process instead
                return nb.njit(**options)(fn)

        def serial(fn):
            """``fn``'s serial version, cached on disk apart from its parallel one: Numba names a function's
            cache by its qualified name and keys its versions by signature alone, which both share."""
            twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
            twin.__qualname__ = f"{fn.__qualname__}_serial"
            return jit(twin, nogil=True)

        _segment_sum = jit(_segment_sum, inline="always", fastmath={"reassoc"})
        _flush = jit(_flush)
        _row_values = jit(_row_values, inline="always")
        _row_marks = jit(_row_marks, inline="always")
        _tile_rows = jit(_tile_rows, inline="always")
        _head_buffers = jit(_head_buffers, inline="always")
        _head_done = jit(_head_done, inline="always")
        _bits_peak = jit(_bits_peak, inline="always")
        _upper_peak = jit(_upper_peak, inline="always")
        _top_keys = jit(_top_keys)
        _attention_kernels = (jit(_reduce_attention, parallel=True, nogil=True), serial(_reduce_attention))
        _repeat_kernel = jit(_repeat_above, nogil=True)
        _anchor_kernel = jit(_anchor_counts, nogil=True)
        _upper_kernels = (jit(_reduce_upper, parallel=True, nogil=True), serial(_reduce_upper))
        _kernel = (jit(_reduce_tile, parallel=True, nogil=True), serial(_reduce_tile))
    return _kernel


def reduce_tile(s: np.ndarray, a: int, c0: int, diagonal: bool, divisor: np.ndarray, keep: np.ndarray,
                threshold: np.float32, scale: np.float32, offset: np.float32, pos_bin: np.ndarray,
                bin_end: np.ndarray, dist_bin: np.ndarray, valid: np.ndarray, sent: np.ndarray, out: dict[str, np.ndarray],
                parallel: bool | None = None) -> None:
    """Add one tile to the outputs ``out`` (numpy views of the accumulators, in place).

    ``s`` ``[B, H, r, c]`` float32: raw ``Z·Zᵀ`` of query rows ``a..a+r`` and key columns ``c0..c0+c``
    (keys in order); ``diagonal``: the tile sits on the diagonal (``a == c0``; only keys after the
    query are read). ``divisor`` / ``keep`` ``[B, H]`` float32: each window's and head's maximum (1
    where it is not positive) and 1/0 whether it is positive. ``pos_bin`` / ``dist_bin`` ``[T]``
    int64 position and distance bins, ``bin_end`` ``[R]`` the first position after each position
    bin; ``valid`` ``[B, T]`` bool; ``sent`` ``[B, T]`` int64 sentence ids (−1: none). Pairs ``i < j`` between valid positions are read. ``out``: ``hist`` ``[H, bins]``
    int64, ``upper_sum`` / ``location`` ``[H, R, R]`` float64 (pairs ``i < j`` only), ``distance``
    ``[H, R]`` float64, ``distance_sum`` / ``same`` ``[H]`` int64, ``row_count`` / ``col_count``
    ``[B, H, T]`` float32. ``parallel``: heads on the thread pool (default: where the tile holds at least
    :data:`PARALLEL_ENTRIES` entries).
    """
    kernels = _compiled()
    parallel = s.size >= PARALLEL_ENTRIES if parallel is None else parallel
    kernel = kernels[0] if parallel else kernels[1]
    kernel(s, a, c0, diagonal, divisor, keep, threshold, scale, offset, pos_bin, bin_end, dist_bin, valid, sent,
            out["hist"], out["upper_sum"], out["location"], out["distance"], out["distance_sum"],
            out["row_count"], out["col_count"], out["same"])


def reduce_upper(blocks: list[np.ndarray], starts: list[int], divisor: np.ndarray, keep: np.ndarray,
                 threshold: np.float32, scale: np.float32, offset: np.float32, pos_bin: np.ndarray, bin_end: np.ndarray,
                 dist_bin: np.ndarray, valid: np.ndarray, sent: np.ndarray, out: dict[str, np.ndarray],
                 parallel: bool | None = None) -> None:
    """:func:`reduce_tile` of every block of a window's upper triangle at once, each window's and head's
    maximum found first from its blocks (read again while they are in cache) instead of handed in.

    ``blocks``: the raw ``S`` blocks ``[B, H, r, T − a]`` float32 (C-contiguous) of query rows ``a..a+r``
    against the keys from ``a`` on, ``a`` from ``starts`` (their leading diagonal is ``S``'s, never read),
    together every pair ``i < j`` once; positions are their own bins (``pos_bin`` the identity). Writes each
    window's and head's divisor and keep (``[B, H]`` float32: the maximum, 1 and 0 where it is not positive)
    as :func:`headsim.stats.tiled._normaliser` gives them from :func:`headsim.stats.tiled._tile_peak`'s maxima;
    the rest as :func:`reduce_tile`, whose numbers it gives bit for bit (each output entry is added to in
    the same order)."""
    _compiled()
    kernels = _upper_kernels
    entries = sum(x.size for x in blocks)
    parallel = entries >= PARALLEL_ENTRIES if parallel is None else parallel
    kernel = kernels[0] if parallel else kernels[1]
    kernel(tuple(blocks), np.asarray(starts, np.int64), divisor, keep, threshold, scale, offset, pos_bin, bin_end, dist_bin,
           valid, sent, out["hist"], out["upper_sum"], out["location"], out["distance"], out["distance_sum"],
           out["row_count"], out["col_count"], out["same"])


def repeat_pairs_above(s: np.ndarray, a: int, c0: int, repeat_index: tuple[np.ndarray, np.ndarray, np.ndarray],
                       divisor: np.ndarray, keep: np.ndarray, threshold: np.float32, out: np.ndarray) -> None:
    """For each pair ``(window, i, j)`` of ``repeat_index`` (int64 ``[N]`` each) inside the tile ``s``
    (as :func:`reduce_tile`'s, rows from ``a``, keys from ``c0``): ``out[n, h]`` (float32 ``[N, H]``) is 1
    where its normalised value ``s / divisor · keep`` is above ``threshold``, else 0, the float32
    operations of :func:`reduce_tile`; pairs outside the tile are left as they are."""
    _compiled()
    _repeat_kernel(s, a, c0, *repeat_index, divisor, keep, threshold, out)


def anchor_counts(rows: "torch.Tensor", cols: "torch.Tensor", inner: "torch.Tensor", bt, fraction_bins: int):
    """:func:`headsim.stats.pairs.anchor_counts` in one serial pass over the windows and heads (CPU tensors):
    the same counts, the fractions' sum added window by window in float64."""
    from .pairs import _KEY_SHIFT, AnchorCounts

    _compiled()
    out = AnchorCounts.zeros(rows.shape[1], fraction_bins)
    arrays = (x.contiguous().numpy() for x in (rows, cols, inner, bt.valid, bt.first, bt.info.input_ids.long(), bt.categories))
    _anchor_kernel(*arrays, _KEY_SHIFT, out.fraction_hist.numpy(), out.fraction_sum.numpy(), out.windows.numpy(),
                   out.kind.numpy(), out.distinct.numpy())
    return out


def reduce_attention(a: "torch.Tensor", valid: "torch.Tensor", k: int, zeroed: np.ndarray,
                     removed: np.ndarray) -> tuple["torch.Tensor", "torch.Tensor", tuple["torch.Tensor", "torch.Tensor"]]:
    """:func:`headsim.stats.attention.reduce_attention` of masked float32 attention ``a`` ``[B, H, T, T]``
    (CPU, contiguous; overwritten) in one kernel, each window's and head's block read while it is in
    cache: its column sums (float32), diagonal sums, top ``k`` valid columns (as
    :func:`~headsim.stats.attention.top_columns` chooses them: ranked in float32, near-ties from float64
    sums, ties to the smaller key), then ``a`` with those columns zeroed added to ``zeroed`` and the
    columns' attention to ``removed`` (``[H, T, T]`` float arrays, windows added in order). ``valid``
    ``[B, T]`` bool. Returns the column sums ``[B, H, T]``, the top columns ``[B, H, k]`` int64 (in no
    particular order) and the diagonal sums (float64 ``[H]`` each, as
    :func:`headsim.stats.attention.diagonal_sums`)."""
    import torch

    _compiled()
    b, h, t, _ = a.shape
    k = max(0, int(k))
    a = a.contiguous()
    column_sums = torch.empty(b, h, t)
    top = torch.empty(b, h, min(k, t), dtype=torch.int64)
    below, above = torch.zeros(h, dtype=torch.float64), torch.zeros(h, dtype=torch.float64)
    parallel, serial = _attention_kernels
    kernel = parallel if a.numel() >= PARALLEL_ENTRIES else serial
    kernel(a.numpy(), valid.contiguous().numpy(), np.float32(t * 2.0 ** -22), zeroed, removed, column_sums.numpy(),
           top.numpy(), below.numpy(), above.numpy())
    return column_sums, top, (below, above)


def set_threads(n: int) -> None:
    """Run the kernel on at most ``n`` threads (torch's count, so both libraries share the cores alike).

    Numba's OpenMP pool starts on the first call and sets the process's OpenMP thread count, which
    torch shares, to all cores: torch's own count is put back."""
    import torch

    _compiled()
    before = torch.get_num_threads()
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)
