"""The compiled backend: each step's ``T×T`` work through ``torch.compile`` (:mod:`headsim.stats.fused`)."""

from __future__ import annotations

import os
import shutil

import torch

from .. import fused
from ..attention import add_attention, attention_batch
from ..batch import dense_repeats
from ..pairs import PairReductions, add_pairs, value_hist
from .base import Backend
from .eager import Eager


class Compiled(Backend):
    """One compiled function from Q and K to the attention reductions, one from the head outputs to the
    pair reductions (Inductor: C++ on CPU, Triton on GPU). Counts equal the eager path's; sums agree to
    float rounding. The compiled functions do not give the model's head outputs: ``update_qkv`` steps
    run eagerly (the driver uses ``update_captured`` with this backend)."""

    name = "compiled"
    computes_head_outputs = False

    def __init__(self, settings) -> None:
        super().__init__(settings)
        self._eager = Eager(settings)

    @classmethod
    def available(cls, device: torch.device) -> tuple[bool, str]:
        if device.type == "cpu":
            compiler = os.environ.get("CXX") or "g++"
            ok = shutil.which(compiler) is not None or shutil.which("clang++") is not None
            return ok, "" if ok else f"torch.compile needs a C++ compiler on the CPU ({compiler} not found)"
        if device.type == "cuda":
            from .kernels import triton_installed

            return triton_installed(), "" if triton_installed() else "torch.compile needs Triton on CUDA"
        return False, f"torch.compile is not set up for {device.type} devices here"

    def step(self, index, bt, head_outputs, qk, attention, value, scale, pairs, attn) -> None:
        if value is not None:
            return self._eager.step(index, bt, head_outputs, qk, attention, value, scale, pairs, attn)
        s = self.settings
        z = head_outputs[index]
        try:
            att = None
            if qk is not None:
                q, k = qk[0][index], qk[1][index]
                fused.batch_dynamic(q, k, bt.valid)
                att = fused.compiled(fused.attention_step)(q, k, bt.valid, bt.padded)
            repeats, repeats_same = dense_repeats(bt)
            fused.batch_dynamic(z, bt.valid, bt.same_sentence, repeats, repeats_same)
            red = fused.compiled(fused.similarity_step)(
                z, bt.valid, bt.padded, s.geo.upper_float, bt.same_sentence, repeats, repeats_same, s.geo.upper_flat,
                s.threshold, float(s.bins.scale), float(s.bins.offset), s.bins.bins)
        except Exception as exc:  # noqa: BLE001 (the caller decides: error or recorded fallback)
            raise self.failure(exc) from exc
        if att is not None:
            a, col, plain, prev, nxt = att
            add_attention(a, col, bt, s.top_k_columns, attn, plain_sum=plain, diagonals=(prev, nxt))
            del a, att
        elif attention is not None:
            attention_batch(attention[index], bt, s.top_k_columns, attn)
        add_pairs(PairReductions(red[0], value_hist(red[1], bt, s.bins), *red[2:]), bt, pairs)
        return None
