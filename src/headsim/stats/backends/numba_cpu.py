"""The numba backend: the pair statistics reduced in one pass per similarity tile by headsim's Numba
kernel (:mod:`headsim.stats.cpu_kernels`); the attention statistics as eager."""

from __future__ import annotations

import torch

from .. import cpu_kernels
from ..pairs import PairReductions
from .eager import Eager


class Numba(Eager):
    """Eager attention steps; pair statistics by the CPU kernel, over the one tile ``S = Z·Zᵀ`` of a
    window within the resolution (:func:`headsim.stats.tiled.pair_reductions_tiled` with a bin per
    position) or the tiles of a longer one (``fused_tiles``). Counts equal the eager steps' (the same
    float32 decisions on the same ``S``); sums agree to float rounding."""

    name = "numba"
    fused_tiles = True
    pairs_first = True

    def __init__(self, settings) -> None:
        super().__init__(settings)
        self._positions = None  # the per-position bins of the run's window length

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        if device.type != "cpu":
            return False, "the Numba kernel runs on the CPU"
        return cpu_kernels.AVAILABLE, cpu_kernels.MISSING

    def pair_reductions(self, z, bt) -> PairReductions:
        from ..tiled import Bins, pair_reductions_tiled

        t = z.shape[2]
        if self._positions is None or self._positions.t != t:
            self._positions = Bins.build(t, t, z.device)
        s = self.settings
        try:
            return pair_reductions_tiled(z, bt, s.threshold, s.bins, self._positions, t, fused=True)[0]
        except Exception as exc:  # noqa: BLE001 (the caller decides: error or recorded fallback)
            raise self.failure(exc) from exc
