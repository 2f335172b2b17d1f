"""The triton backend: headsim's Triton kernels (:mod:`headsim.stats.triton_kernels`), no ``T×T`` tensor in memory."""

from __future__ import annotations

import torch

from ...model.plain import attention_probs
from ..attention import add_reduced_attention, attention_batch, rank_columns, settle_columns
from ..pairs import add_pairs
from .base import Backend


def _tk():
    """:mod:`headsim.stats.triton_kernels`, imported on first use: importing Triton is slow, and its
    interpreter mode (``TRITON_INTERPRET=1``) is read when it is imported."""
    from .. import triton_kernels

    return triton_kernels


def triton_installed() -> bool:
    return _tk().triton is not None


class Triton(Backend):
    """:func:`~headsim.stats.triton_kernels.attention_pass` (softmax, the model's head outputs, summed
    and column-summed probabilities, ±1 diagonals), :func:`~headsim.stats.triton_kernels.attention_columns`
    (the few zeroed top columns, recomputed) and :func:`~headsim.stats.triton_kernels.similarity_pass`.
    Counts equal the eager path up to threshold flips from float summation order. Windows above the
    resolution: :mod:`headsim.stats.triton_long` (``tile_kernel``), where their bins allow it
    (:func:`headsim.stats.batch.kernel_tiles`).

    Settling near-tied top columns needs the host to read the device, so a step's top columns are only
    ranked and the rest is added at the next step (or :meth:`settle`): by then the device has moved on,
    and the host's bookkeeping overlaps the next layer's kernels instead of leaving the device idle.
    """

    name = "triton"
    tile_kernel = "triton"

    def __init__(self, settings) -> None:
        super().__init__(settings)
        #: a step's attention, to finish (:meth:`settle`)
        self.pending: tuple | None = None

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        if not triton_installed():
            return False, "Triton is not installed"
        if _tk().available(device):
            return True, ""
        return False, "the kernels need a CUDA device (or Triton's interpreter, TRITON_INTERPRET=1, on the CPU)"

    def step(self, index, bt, head_outputs, qk, attention, value, scale, pairs, attn) -> None:
        s, info, tk = self.settings, bt.info, _tk()
        try:
            ap = None
            if qk is not None:
                out = None if value is None else head_outputs[index]
                ap = tk.attention_pass(qk[0][index], qk[1][index], None if value is None else value[index], bt.valid,
                                       scale, out)
            red = tk.similarity_pass(head_outputs[index], bt.valid, info.input_ids, bt.sentences, s.threshold,
                                     float(s.bins.scale), float(s.bins.offset), s.bins.bins)
        except Exception as exc:  # noqa: BLE001 (the caller decides: error or recorded fallback)
            raise self.failure(exc) from exc
        if ap is not None:
            pending = (rank_columns(ap.column_sums, bt.valid, s.top_k_columns), ap, qk[0][index], qk[1][index], bt,
                       scale, attn)
            self.settle()
            self.pending = pending
        elif attention is not None:
            attention_batch(attention[index], bt, s.top_k_columns, attn)
        add_pairs(red, bt, pairs)

    def settle(self) -> None:
        """Add the attention step left pending, if any: near-tied top columns re-ranked from exact sums,
        the zeroed columns recomputed from Q, K and each row's max and exp-sum (a ``[B, H, T, k]`` product
        instead of the whole matrix)."""
        if self.pending is None:
            return
        ranking, ap, q, k, bt, scale, attn = self.pending
        self.pending = None

        def exact(bi: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
            probs = attention_probs(q[bi, hi][:, None], k[bi, hi][:, None], bt.valid[bi], True, scale)  # no sync
            return (probs[:, 0] * bt.valid[bi][:, :, None]).to(torch.float64).sum(dim=-2)

        top = settle_columns(ranking, bt.valid, exact)
        columns = _tk().attention_columns(q, k, top, ap, bt.valid, scale)
        add_reduced_attention(ap.column_sums, ap.diagonals, top, columns, bt, attn, plain_sum=ap.plain_sum)

    def discard(self) -> None:
        self.pending = None
