"""Running sums of per-window arrays that stay float32 for a few windows, then move to float64.

A sum that every window adds to in full (a bin per position: ``[H, T, T]``) costs its memory traffic
once per window; float32 halves it. :class:`WindowSum` keeps at most :data:`SPILL_WINDOWS` windows in
float32 (as a step of the eager backend sums its windows) before adding them to a float64 total, so
the rounding stays that of a step however large the batch.
"""

from __future__ import annotations

import numpy as np
import torch

#: windows a float32 sum holds before it is added to the float64 total
SPILL_WINDOWS = 32


class WindowSum:
    """A sum of per-window arrays: kernels add to :attr:`narrow` the windows announced by :meth:`adding`;
    :meth:`total` is the sum."""

    def __init__(self, narrow: np.ndarray) -> None:
        """``narrow``: the zeroed array to sum in (a buffer reused from sum to sum:
        :class:`headsim.memory.Scratch`), float32 (moved to float64 every :data:`SPILL_WINDOWS` windows) or
        float64 (summed there throughout)."""
        self.narrow = narrow
        self._wide: np.ndarray | None = None
        self._held = 0

    def adding(self, windows: int) -> np.ndarray:
        """:attr:`narrow`, to which ``windows`` more windows are about to be added: if that would take it
        past :data:`SPILL_WINDOWS` windows, those it holds move to float64 first."""
        if self.narrow.dtype == np.float32:
            if self._held and self._held + windows > SPILL_WINDOWS:
                if self._wide is None:
                    self._wide = np.zeros(self.narrow.shape)
                self._wide += self.narrow
                self.narrow.fill(0)
                self._held = 0
            self._held += windows
        return self.narrow

    def total(self) -> torch.Tensor:
        """The sum of every window added (float64 once any moved there; float32 while none did)."""
        return torch.from_numpy(self.narrow if self._wide is None else self._wide + self.narrow)
