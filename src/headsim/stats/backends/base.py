"""The statistics-backend interface: one layer step of a batch, from the step's tensors to the accumulators."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch

from ...memory import Scratch
from ..batch import BatchTensors
from ..pairs import Geometry, SimBins


def is_out_of_memory(exc: BaseException) -> bool:
    """An accelerator out-of-memory error (CUDA's, or the generic one other backends raise)."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


class BackendFailure(Exception):
    """A backend could not compute a step (a compiler or kernel failure); nothing was added.

    Out-of-memory errors are never wrapped: the driver's back-off handles them."""

    def __init__(self, backend: str, cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {str(cause)[:200]}")
        self.backend, self.cause = backend, cause


@dataclass(frozen=True)
class StepSettings:
    """What every step needs from the accumulator's settings."""

    threshold: float
    top_k_columns: int
    bins: SimBins
    geo: Geometry


class Backend(ABC):
    """How a layer step's statistics are computed (one instance per :class:`~headsim.stats.CorpusStats`).

    :meth:`step` adds one step of windows of one layer to the layer's accumulator slices ``pairs``
    (:func:`headsim.stats.pairs.add_pairs` keys) and ``attn`` (attention keys). It gets what the
    driver handed in: ``head_outputs`` ``[B, H, T, d]`` (an empty tensor to fill when ``value`` is
    given), and either ``qk`` (queries and keys ``[B, H, T, d]``; with ``value`` the head outputs are
    computed from the probabilities), or ``attention`` probabilities ``[B, H, T, T]``, or neither
    (no attention statistics); ``index`` selects the step's windows of those batch tensors and
    ``bt`` is that step's :class:`~headsim.stats.batch.BatchTensors`.

    A step either adds everything or, raising :class:`BackendFailure`, nothing.
    """

    name: ClassVar[str]
    #: :meth:`step` computes the model's head outputs from Q, K, V itself (``update_qkv``); where not,
    #: the driver lets the model compute them and hands in the captured Q and K (``update_captured``)
    computes_head_outputs: ClassVar[bool] = True
    #: what reduces the attention blocks and similarity tiles of windows above the resolution:
    #: ``"torch"`` (torch operations, :mod:`headsim.stats.tiled`), ``"numba"`` (the CPU kernel,
    #: :mod:`headsim.stats.cpu_kernels`) or ``"triton"`` (:mod:`headsim.stats.triton_long`)
    tile_kernel: ClassVar[str] = "torch"
    #: :meth:`layer_step` adds a layer's steps at once (else :meth:`step` adds them one by one)
    whole_layer: ClassVar[bool] = False

    def __init__(self, settings: StepSettings) -> None:
        self.settings = settings
        #: the large CPU temporaries of a step, reused by the next step and layer
        self.scratch = Scratch()

    @classmethod
    @abstractmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        """Whether the backend can run on ``device``, and why not."""

    @abstractmethod
    def step(self, index: slice, bt: BatchTensors, head_outputs: torch.Tensor,
             qk: tuple[torch.Tensor, torch.Tensor] | None, attention: torch.Tensor | None, value: torch.Tensor | None,
             scale: float | None, pairs: dict[str, torch.Tensor], attn: dict[str, torch.Tensor]) -> None:
        """Add one step (see the class)."""

    def layer_step(self, batch: BatchTensors, steps: list[tuple[slice, BatchTensors]], head_outputs: torch.Tensor,
                   qk: tuple[torch.Tensor, torch.Tensor] | None, attention: torch.Tensor | None,
                   value: torch.Tensor | None, scale: float | None, pairs: dict[str, torch.Tensor],
                   attn: dict[str, torch.Tensor]) -> None:
        """Add one layer's ``steps`` (``(index, bt)``, in window order) at once, ``batch`` the whole batch's
        tensors; the rest as :meth:`step`. Only where :attr:`whole_layer`; all or, raising
        :class:`BackendFailure`, nothing is added."""
        raise NotImplementedError(f"the {self.name} backend adds a layer step by step")

    def settle(self) -> None:
        """Finish any work a step left pending (before the accumulators are read)."""

    def discard(self) -> None:
        """Forget any pending work (the accumulators are being reset)."""

    def failure(self, exc: BaseException) -> BackendFailure:
        """``exc`` as this backend's :class:`BackendFailure`; out-of-memory and headsim errors pass unchanged."""
        from ...errors import HeadsimError

        if is_out_of_memory(exc) or isinstance(exc, HeadsimError):
            raise exc
        return BackendFailure(self.name, exc)
