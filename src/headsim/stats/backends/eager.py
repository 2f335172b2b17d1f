"""The eager backend: the step's statistics as torch operations, on any device."""

from __future__ import annotations

import torch

from ...context_similarity import normalized_similarity
from ...model.plain import attention_probs
from ..attention import attention_batch
from ..pairs import pair_batch
from .base import Backend


class Eager(Backend):
    """Torch operations over each ``[B, H, T, T]`` tensor (:mod:`headsim.stats.attention`, :mod:`headsim.stats.pairs`)."""

    name = "eager"

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        return True, ""

    def step(self, index, bt, head_outputs, qk, attention, value, scale, pairs, attn) -> None:
        s = self.settings
        if qk is not None:
            probs = attention_probs(qk[0][index], qk[1][index], bt.valid, bt.padded, scale)
            if value is not None:  # the model's head outputs, before the statistics overwrite probs
                head_outputs[index] = torch.matmul(probs, value[index].float())
            attention_batch(probs, bt, s.top_k_columns, attn, owned=True)
            del probs
        elif attention is not None:
            attention_batch(attention[index], bt, s.top_k_columns, attn)
        normalized = normalized_similarity(head_outputs[index].float(), bt.valid, bt.padded)
        pair_batch(normalized, s.threshold, bt, s.geo, s.bins, pairs, masked=True)
