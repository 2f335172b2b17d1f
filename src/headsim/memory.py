"""The memory budget of a run (``--max-memory``): batch size and block size from it, peak memory after.

:func:`plan_memory` estimates what a run holds (the weights, the accumulators, per window the
activations and a binned window's reductions) and chooses the windows per batch and the working
memory of one block of attention rows so that the whole stays within the budget; a budget that
cannot hold one window with one row per block is refused at once, naming the setting.
:func:`peak_memory` is what run.json records.
"""

from __future__ import annotations

import functools
import math
import re
import resource
from dataclasses import dataclass

import torch

from .errors import require

#: the most bytes of float32 probabilities one block of attention rows holds on a CPU whatever the budget:
#: a block that stays in the processor's cache runs several times faster than a larger one (an accelerator
#: takes its whole budget: fewer, larger blocks launch fewer kernels)
BLOCK_CACHE_BYTES = 8 << 20

#: the share of the free memory a run takes when no budget is named
DEFAULT_SHARE = 0.5
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30,
          "T": 1 << 40, "TB": 1 << 40}


def parse_memory(value: str | int | float) -> int:
    """Bytes of ``value``: a number of bytes, or a string such as ``"3GB"``, ``"512MB"``, ``"1.5G"``
    (units of 1024)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number, unit = float(value), ""
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
        require(m is not None and m.group(2).upper().replace("IB", "B") in _UNITS,
                f"--max-memory {value!r} is not an amount of memory", "pass e.g. 3GB, 512MB or 1.5G")
        number, unit = float(m.group(1)), m.group(2).upper().replace("IB", "B")
    out = int(number * _UNITS[unit])
    require(out > 0, f"--max-memory {value!r} is not positive", "pass e.g. 3GB")
    return out


def default_max_memory(device: torch.device) -> int:
    """:data:`DEFAULT_SHARE` of the memory free now: the GPU's on CUDA; elsewhere of the machine's
    available RAM, on top of what this process holds already (a budget caps the whole process, and
    :func:`plan_memory` counts what it holds)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * DEFAULT_SHARE)
    import psutil

    return int(_resident() + psutil.virtual_memory().available * DEFAULT_SHARE)


def _resident() -> int:
    """Bytes this process holds in RAM now (its resident set)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


@dataclass(frozen=True)
class MemoryPlan:
    """What :func:`plan_memory` chose: windows per batch and the bytes of one block of query rows."""

    max_memory: int
    batch_size: int
    tile_bytes: int
    fixed: int  # weights and accumulators
    per_window: int

    def record(self) -> dict:
        """run.json's ``memory`` entry (before the run: the budget and the estimate)."""
        return {"max_memory": self.max_memory, "batch_size": self.batch_size, "tile_bytes": self.tile_bytes,
                "estimated_fixed": self.fixed, "estimated_per_window": self.per_window}


def accumulator_bytes(n_layers: int, n_heads: int, seq_len: int, resolution: int, sim_bins: int = 120,
                      fraction_bins: int = 20) -> int:
    """Bytes of a run's accumulators (:func:`headsim.stats.schema.allocate`, counted without allocating)."""
    from .stats import schema

    layout = schema.Layout(n_layers, n_heads, seq_len, sim_bins, (-0.2, 1.0), fraction_bins, resolution)
    sizes = layout.sizes()
    total = 0
    for v in schema.accumulators(binned=layout.binned).values():
        n = 1
        for d in v.dims:
            n *= sizes[d]
        total += 8 * n
    return total


#: the resolutions :func:`choose_resolution` tries, largest first (the default, then halvings)
RESOLUTIONS = (512, 256, 128, 64, 32, 16)


def choose_resolution(n_layers: int, n_heads: int, seq_len: int, room: int) -> int:
    """The position resolution of a run that names none: the largest of :data:`RESOLUTIONS` whose
    accumulators (:func:`accumulator_bytes`) take at most half of ``room`` (the budget less what the
    process holds: the other half is left to the batches), else the smallest. A window within the
    resolution keeps per-position statistics, so ``seq_len`` at or below the first that fits is not binned."""
    for r in RESOLUTIONS:
        if 2 * accumulator_bytes(n_layers, n_heads, seq_len, r) <= room:
            return r
    return RESOLUTIONS[-1]


def held_bytes(loaded) -> int:
    """Bytes held before any window: the weights, and on a CPU what the process holds already."""
    held = sum(p.numel() * p.element_size() for p in loaded.model.parameters())
    return max(held, _resident()) if loaded.device.type == "cpu" else held


def plan_memory(loaded, seq_len: int, resolution: int, max_memory: int, *, batch_size: int | None = None,
                largest_batch: int = 32) -> MemoryPlan:
    """Windows per batch (``batch_size`` where given, else at most ``largest_batch``) and block bytes
    within ``max_memory``, or a :class:`~headsim.errors.HeadsimError` naming ``--max-memory``.

    Held before any window: the accumulators, and on a CPU what the process holds already (its
    resident memory: libraries, the weights), elsewhere the weights. Estimate per window of ``T``
    tokens: the forward's activations (``T × hidden × 4`` bytes, 16 times), the head outputs and
    queries, keys and values (``4 × T × heads × d``, float32), the batch's pair tables, and for a window above the resolution its reductions (``heads × R × T`` float32 of
    per-bin column sums, ``heads × T`` float64 column sums and near-diagonal entries). A window within
    the resolution holds its whole ``[heads, T, T]`` matrices, about 12 of them, as today's statistics
    do. One block of query rows takes what remains, split between the tap's and the statistics'.
    """
    t, h = int(seq_len), int(loaded.n_heads)
    hidden = int(getattr(loaded.stack_config, "hidden_size", 0) or getattr(loaded.stack_config, "d_model", 0) or 768)
    fixed = held_bytes(loaded) + accumulator_bytes(loaded.n_layers, h, t, resolution)
    per_window = 16 * t * hidden * 4 + 4 * t * hidden * 4
    if t > resolution:
        per_window += h * resolution * t * 4 + h * t * (8 + 12 + 12) + 6 * t * 8
        row_bytes = 6 * h * t * 4  # one query row of one window: the block's copies (tap and statistics)
    else:
        per_window += 12 * h * t * t * 4
        row_bytes = 0
    left = max_memory - fixed
    need = per_window + row_bytes
    require(left >= need, f"--max-memory {format_bytes(max_memory)} cannot hold one window of {t} tokens with this model "
            f"(about {format_bytes(fixed + need)} needed)", "raise --max-memory, or use a smaller --seq-len")
    if batch_size is None:
        batch_size = int(max(1, min(largest_batch, left // (2 * need))))
    tile_bytes = int(max(row_bytes * batch_size, left - batch_size * per_window) // 2) if row_bytes else left
    require(left >= batch_size * need, f"--max-memory {format_bytes(max_memory)} cannot hold a batch of {batch_size} windows "
            f"of {t} tokens (about {format_bytes(fixed + batch_size * need)} needed)", "raise --max-memory or lower --batch-size")
    return MemoryPlan(int(max_memory), int(batch_size), max(1, tile_bytes), int(fixed), int(per_window))


class Scratch:
    """Large CPU temporaries kept from step to step and layer to layer, one tensor per role.

    A fresh tensor of several MB costs page faults on its first write every time it is allocated (the C
    library hands large blocks back to the system when they are freed); one reused costs nothing. A
    role's tensor is overwritten when the role is asked for again: a caller uses it before that.
    """

    def __init__(self) -> None:
        self._held: dict[str, torch.Tensor] = {}

    def empty(self, role: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A contiguous CPU tensor of ``shape`` and ``dtype``, uninitialised: the role's, grown as needed."""
        n = math.prod(shape)
        have = self._held.get(role)
        if have is None or have.dtype != dtype or have.numel() < n:
            self._held.pop(role, None)  # the old one is freed before the new one is allocated
            have = self._held[role] = torch.empty(n, dtype=dtype)
        return have[:n].view(shape)

    def zeros(self, role: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """As :meth:`empty`, filled with zeros."""
        return self.empty(role, shape, dtype).zero_()


def release_free_memory() -> bool:
    """Hand the memory the C library holds free back to the system, in every thread's arena
    (``malloc_trim(0)``); ``False`` where the C library is not glibc.

    The small blocks a long window's layer allocates from several threads (torch's, Numba's) stay
    in those threads' arenas once freed; called after each layer of windows above the resolution
    (:class:`headsim.runs.engine.Engine`), it keeps them from adding up across layers."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


@functools.cache
def _glibc():
    """glibc, loaded once; ``None`` elsewhere."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def peak_memory(device: torch.device) -> dict:
    """Peak memory of this process so far: resident set (bytes) and, on CUDA, the GPU's allocations."""
    out = {"peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if device.type == "cuda":
        out["peak_gpu_allocated"] = int(torch.cuda.max_memory_allocated(device))
    return out


def format_bytes(n: int) -> str:
    """``n`` bytes for a message: GiB, MiB, KiB or bytes, whichever reads without rounding to 0."""
    for unit, size, digits in (("GiB", 1 << 30, 2), ("MiB", 1 << 20, 0), ("KiB", 1 << 10, 0)):
        if n >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{n} bytes"
