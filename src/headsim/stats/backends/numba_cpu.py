"""The numba backend: the pair statistics reduced in one pass per similarity tile by headsim's Numba
kernel (:mod:`headsim.stats.cpu_kernels`); the attention statistics by a kernel that reads each window's
and head's probabilities twice while they are in cache (column sums and top columns, then the sums with
those columns zeroed). A layer's steps are added at once: each step's ``T×T`` attention is reduced
while it is in cache, the pairs of steps of few windows together (a kernel call over several windows),
the bookkeeping of the reductions once per layer."""

from __future__ import annotations

import torch

from .. import cpu_kernels
from ..attention import ReducedAttention, reduce_attention
from ..pairs import AnchorCounts, PairReductions, add_pairs
from ..sums import WindowSum
from .eager import Eager

#: windows that the pair kernel reads per call at least, where the steps are shorter (steps of windows
#: whose attention fills a step alone): consecutive steps are reduced together (:meth:`Numba._pair_reductions`)
PAIR_GROUP_WINDOWS = 8
#: and the similarity blocks such a group builds at most (at 512 tokens and 12 heads, 7 MB a window)
PAIR_GROUP_BYTES = 64 << 20


def _groups(steps: list, windows: int) -> list[list]:
    """``steps`` (``(index, ...)``, consecutive windows) in runs of consecutive steps of about equal size,
    each at most ``windows`` windows (a longer step alone)."""
    total = steps[-1][0].stop - steps[0][0].start
    size = -(-total // -(-total // windows))  # equal groups: as few as ``windows`` allows
    groups: list[list] = []
    for step in steps:
        n = step[0].stop - step[0].start
        if groups and sum(x[0].stop - x[0].start for x in groups[-1]) + n <= size:
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def joined(parts: list[torch.Tensor]) -> torch.Tensor:
    """Tensors of equal trailing shape as one, concatenated along their first dimension: a view where
    they lie contiguous one after another in one storage (the layer's head outputs, step by step), else a copy."""
    first = parts[0]
    n = sum(p.shape[0] for p in parts)
    adjacent = all(p.is_contiguous() and p.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
                   for p in parts) and all(
        b.data_ptr() == a.data_ptr() + a.numel() * a.element_size() for a, b in zip(parts, parts[1:]))
    if adjacent:
        return first.as_strided((n, *first.shape[1:]), (first[0].numel(), *first.stride()[1:]))
    return torch.cat(parts)


class Numba(Eager):
    """Eager probabilities; attention reductions by the CPU kernel (:func:`headsim.stats.cpu_kernels.reduce_attention`);
    pair statistics by the CPU kernel (:class:`headsim.stats.tiled.FusedPairs`), over the upper triangle
    of ``S = Z·Zᵀ`` of a window within the resolution (blocks of rows, each built once; a bin per
    position) or the tiles of a longer one (``tile_kernel``). Counts equal the eager steps' (the same float32
    decisions on the same ``S``: its blocks' entries are the whole GEMM's with MKL; elsewhere a pair within
    float32 rounding of the threshold may fall either way); sums agree to float rounding."""

    name = "numba"
    tile_kernel = "numba"
    whole_layer = True

    def __init__(self, settings) -> None:
        super().__init__(settings)
        self._positions = None  # the per-position bins of the run's window length

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        if device.type != "cpu":
            return False, "the Numba kernel runs on the CPU"
        return cpu_kernels.AVAILABLE, cpu_kernels.MISSING

    def step(self, index, bt, head_outputs, qk, attention, value, scale, pairs, attn) -> None:
        """One step, as a layer of one step (:meth:`layer_step`)."""
        self.layer_step(bt, [(index, bt)], head_outputs, qk, attention, value, scale, pairs, attn)

    def _pair_reductions(self, steps: list, batch, fraction_bins: int) -> tuple[PairReductions, AnchorCounts]:
        """The pair reductions of ``steps`` (``(index, bt, z)``, consecutive windows) as one, and their anchor
        counts (``fraction_bins`` bins, :func:`headsim.stats.cpu_kernels.anchor_counts`); ``batch`` the
        tensors of all their windows. Steps of fewer than :data:`PAIR_GROUP_WINDOWS` windows are
        reduced together (at most :data:`PAIR_GROUP_BYTES` of similarity blocks a group): a kernel call
        over several windows finds the rows of the layer's sums in cache from window to window."""
        from ..tiled import Bins, FusedPairs

        _, _, z = steps[0]
        t = z.shape[2]
        if self._positions is None or self._positions.t != t:
            self._positions = Bins.build(t, t, z.device)
        s = self.settings
        try:
            pairs = FusedPairs(batch.info.n_windows, z.shape[1], t, s.threshold, s.bins, self._positions, t, self.scratch)
            start = steps[0][0].start
            for group in _groups(steps, max(1, min(PAIR_GROUP_WINDOWS, PAIR_GROUP_BYTES // pairs.window_bytes()))):
                (first, bt, z), last = group[0], group[-1][0]
                if len(group) > 1:
                    bt, z = batch.select(slice(first.start - start, last.stop - start)), joined([z for _, _, z in group])
                pairs.add(z, bt, first.start - start)
            red = pairs.result(batch)[0]
            return red, cpu_kernels.anchor_counts(red.rows, red.cols, red.inner, batch, fraction_bins)
        except Exception as exc:  # noqa: BLE001 (the caller decides: error or recorded fallback)
            raise self.failure(exc) from exc

    def layer_step(self, batch, steps, head_outputs, qk, attention, value, scale, pairs, attn) -> None:
        s = self.settings
        computed, reduced = [], []
        sums: list[WindowSum] = []  # the layer's top-zeroed and removed attention, each step's windows added by the kernel

        def kernel(a, valid, top_k):
            n, h, t = a.shape[0], a.shape[1], a.shape[-1]
            if not sums:
                sums.extend(WindowSum(self.scratch.zeros(f"attention: {role}", (h, t, t)).numpy())
                            for role in ("zeroed sum", "removed sum"))
            return cpu_kernels.reduce_attention(a, valid, top_k, *(w.adding(n) for w in sums))

        for index, bt in steps:
            probs, z = self.probabilities(index, bt, head_outputs, qk, value, scale)
            computed.append((index, bt, z))
            if probs is None and attention is not None:
                probs = attention[index]
            if probs is not None:
                try:
                    reduced.append(reduce_attention(probs, bt, s.top_k_columns, owned=qk is not None, kernel=kernel))
                except Exception as exc:  # noqa: BLE001 (nothing is added before the pair step either)
                    raise self.failure(exc) from exc
            del probs
        # the step that may fail: nothing is added before it
        red, anchors = self._pair_reductions(computed, batch, pairs["anchor_fraction_hist"].shape[-1])
        if reduced:
            ReducedAttention.join(reduced, *(w.total() for w in sums)).add_to(batch, attn)
        add_pairs(red, batch, pairs, anchors)
