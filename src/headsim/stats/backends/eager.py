"""The eager backend: the step's statistics as torch operations, on any device."""

from __future__ import annotations

import torch

from ...context_similarity import normalized_similarity
from ...model.plain import attention_probs, head_matmul
from ..attention import attention_batch
from ..pairs import PairReductions, add_pairs, pair_reductions
from .base import Backend


class Eager(Backend):
    """Torch operations over each ``[B, H, T, T]`` tensor (:mod:`headsim.stats.attention`, :mod:`headsim.stats.pairs`).

    A step runs in three parts that subclasses reuse: :meth:`probabilities` (from Q and K; with V the
    model's head outputs too), :meth:`pair_reductions` (from the head outputs), and adding both."""

    name = "eager"

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        return True, ""

    def step(self, index, bt, head_outputs, qk, attention, value, scale, pairs, attn) -> None:
        probs, z = self.probabilities(index, bt, head_outputs, qk, value, scale)
        s = self.settings
        if probs is not None:
            attention_batch(probs, bt, s.top_k_columns, attn, owned=True)
            del probs
        elif attention is not None:
            attention_batch(attention[index], bt, s.top_k_columns, attn)
        add_pairs(self.pair_reductions(z, bt), bt, pairs)

    def probabilities(self, index, bt, head_outputs, qk, value, scale) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The step's attention probabilities from Q and K (``None`` without them; on a CPU, valid until the
        next step's) and its head outputs.
        With ``value`` the model's head outputs are computed from the probabilities and written into
        ``head_outputs``; the step's own float32 copy (contiguous; on a CPU valid until the next layer's)
        is returned where it has their dtype."""
        z = head_outputs[index]
        if qk is None:
            return None, z
        q = qk[0][index]
        cpu = q.device.type == "cpu"
        out = self.scratch.empty("probabilities", (*q.shape[:-1], q.shape[2])) if cpu else None
        probs = attention_probs(q, qk[1][index], bt.valid, bt.padded, scale, out)
        if value is not None:
            # on a CPU into the layer's contiguous float32 buffer (each step its own windows), then copied
            # into the model's [B, T, H, d] memory: faster on two threads than a GEMM writing there
            layer = self.scratch.empty("head outputs", (value.shape[0], *z.shape[1:]))[index] if cpu else None
            computed = head_matmul(probs, value[index].float(), out=layer)
            z.copy_(computed)
            z = computed if computed.dtype == z.dtype else z
        return probs, z

    def pair_reductions(self, z: torch.Tensor, bt) -> PairReductions:
        """The pair reductions of a step from its head outputs ``z`` ``[B, H, T, d]``."""
        s = self.settings
        normalized = normalized_similarity(z.float(), bt.valid, bt.padded)
        return pair_reductions(normalized, s.threshold, bt, s.geo, s.bins, masked=True)
