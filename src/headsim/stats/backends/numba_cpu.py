"""The numba backend: windows above the resolution with each similarity tile reduced in one pass by
headsim's Numba kernel (:mod:`headsim.stats.cpu_kernels`); everything else as eager."""

from __future__ import annotations

import torch

from .. import cpu_kernels
from .eager import Eager


class Numba(Eager):
    """Eager steps, and the CPU kernel for the similarity tiles of binned windows (``fused_tiles``).
    Counts equal the eager tiles' (the same float32 decisions); sums agree to float rounding."""

    name = "numba"
    fused_tiles = True

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        if device.type != "cpu":
            return False, "the Numba kernel runs on the CPU"
        return cpu_kernels.AVAILABLE, cpu_kernels.MISSING
