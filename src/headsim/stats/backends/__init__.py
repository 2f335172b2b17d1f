"""Statistics backends: how one layer step's ``T×T`` work is computed, chosen once per run.

Three implementations of one interface (:class:`~.base.Backend`) give the same statistics (counts
equal up to threshold flips from float summation order, sums to float rounding; tests/test_backends.py
checks each against the naive reference):

* ``eager`` (:mod:`.eager`): torch operations, any device.
* ``compiled`` (:mod:`.compiled`): the step's ``T×T`` work through ``torch.compile``
  (:mod:`headsim.stats.fused`); the first batch pays the compilation.
* ``numba`` (:mod:`.numba_cpu`): the pair statistics reduced in one pass per similarity tile by
  headsim's Numba kernel (:mod:`headsim.stats.cpu_kernels`), the attention statistics as eager; CPU.
* ``triton`` (:mod:`.kernels`): headsim's Triton kernels (:mod:`headsim.stats.triton_kernels`), no
  ``T×T`` tensor in memory; CUDA, or Triton's CPU interpreter (``TRITON_INTERPRET=1``, for tests).

:func:`choose_backend` is the only place that picks one; :class:`~headsim.stats.CorpusStats` calls it
once, when it is built, and never switches silently: a chosen backend that fails mid-run is an error
when it was named, and under ``auto`` an explicit, recorded fallback to eager.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import HeadsimError
from .base import Backend, BackendFailure, StepSettings, is_out_of_memory
from .compiled import Compiled
from .eager import Eager
from .kernels import Triton
from .numba_cpu import Numba

#: every backend by name
BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (Eager, Numba, Compiled, Triton)}
#: what ``--backend`` accepts
NAMES = ("auto", *BACKENDS)


def check_name(name: object) -> str:
    """``name`` if it is one of :data:`NAMES`, else a :class:`~headsim.errors.HeadsimError`."""
    if name not in NAMES:
        raise HeadsimError(f"unknown statistics backend {name!r}", f"use one of {', '.join(NAMES)}")
    return str(name)


@dataclass(frozen=True)
class Choice:
    """A backend chosen for a device: what was asked for and what runs."""

    requested: str
    chosen: str

    @property
    def explicit(self) -> bool:
        """The backend was named (``--backend eager|compiled|triton``): a failure is then an error."""
        return self.requested != "auto"

    def record(self) -> dict:
        return {"requested": self.requested, "chosen": self.chosen}


def choose_backend(name: str | Choice, device: str | torch.device, binned: bool = False,
                   kernel_tiles: bool = False) -> Choice:
    """The statistics backend for ``device``: the only place one is chosen.

    ``auto``: ``triton`` on a CUDA device where Triton runs, ``numba`` on a CPU where Numba is
    installed, ``eager`` everywhere else. The model
    family does not change the choice: for ``plain`` families every backend computes the attention
    from Q, K and V, for the others it adds the model's own probabilities, and the similarity work
    is the backend's either way. ``compiled`` is never chosen automatically (on the H100 it was
    slower than eager: opt-in). A named backend that cannot run on ``device`` is refused here, before
    anything runs. A :class:`Choice` is passed through unchanged. Windows above the resolution
    (``binned``) are computed in blocks and tiles (:mod:`headsim.stats.tiled`) by ``numba`` or
    ``eager``, or on CUDA by ``triton`` where their position bins allow it (``kernel_tiles``:
    :func:`headsim.stats.batch.kernel_tiles`; ``auto`` picks it there, eager on CUDA elsewhere);
    ``compiled`` is refused, and so is ``triton`` where the bins do not allow it.
    """
    if isinstance(name, Choice):
        return name
    name = check_name(name)
    device = torch.device(device)
    if binned and name not in ("auto", "eager", "numba") and not (name == "triton" and kernel_tiles):
        raise HeadsimError(f"statistics backend {name!r} does not compute windows longer than the resolution "
                           "(position-binned statistics)" + (" on these bins" if name == "triton" else ""),
                           "pass --backend auto (or eager), or a --resolution of at least --seq-len"
                           + (" or one that divides it into bins of 2, 4, ... 128 positions" if name == "triton" else ""))
    if name == "auto":
        if device.type == "cuda" and (not binned or kernel_tiles) and Triton.available(device)[0]:
            return Choice(name, "triton")
        return Choice(name, "numba" if Numba.available(device)[0] else "eager")
    ok, reason = BACKENDS[name].available(device)
    if not ok:
        raise HeadsimError(f"statistics backend {name!r} cannot run on {device}: {reason}",
                           "pass --backend auto (or eager)")
    return Choice(name, name)


__all__ = ["BACKENDS", "NAMES", "Backend", "BackendFailure", "Choice", "StepSettings", "check_name", "choose_backend",
           "is_out_of_memory"]
