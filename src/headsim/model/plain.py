"""The attention of ``plain`` families (:mod:`headsim.model.arch`), as headsim computes it itself.

For those families the model's attention is exactly softmax(Q·Kᵀ·scale) over the window's valid
keys, so the statistics may compute it once, in cache-sized steps, and hand the model its outputs
(:meth:`headsim.model.tap.Tap.run_computing`); ``tests/test_architectures.py`` checks the equality
against each family's eager ``output_attentions``.
"""

from __future__ import annotations

import torch


def head_matmul(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0, out: torch.Tensor | None = None) -> torch.Tensor:
    """``alpha · (a @ b)`` of ``[B, H, m, k]`` and ``[B, H, k, n]``: a contiguous ``[B, H, m, n]``, new or
    ``out`` where given (contiguous, of that shape and the operands' dtype; used on a CPU, ignored elsewhere).

    On a CPU the product runs one window at a time: a window's heads as the model lays them out side by
    side (its ``[B, T, H, d]`` memory seen as ``[B, H, T, d]``, and the transpose of that) are read in
    place, where one product over ``[B, H]`` would copy each operand first; ``alpha`` is applied inside
    the product, as a GEMM's scale (the BLAS may scale an operand rather than the sum: equal to
    ``(a @ b) · alpha`` bit for bit where ``alpha`` is a power of two, else to float32 rounding). Elsewhere
    (and under ``torch.compile``) one batched product, then the scale.
    """
    if a.device.type != "cpu" or torch.compiler.is_compiling():
        out = torch.matmul(a, b)
        return out if alpha == 1.0 else out.mul_(alpha)
    if out is None:
        out = torch.empty(*a.shape[:-1], b.shape[-1], dtype=torch.result_type(a, b), device=a.device)
    for i in range(a.shape[0]):
        torch.baddbmm(out[i], a[i], b[i], beta=0, alpha=alpha, out=out[i])
    return out


def attention_probs(query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor,
                    padded: bool | None = None, scale: float | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(QKᵀ·scale) over valid keys, in float32: ``[batch, head, seq, seq]`` (into ``out`` where given,
    as :func:`head_matmul`).

    Rows of padded queries are computed like the model does (they attend to the valid keys). The
    scale is applied in the product (:func:`head_matmul`); the families' eager attention multiplies the
    product by it afterwards, which gives the same scores bit for bit where the scale is a power of two
    (head sizes 16, 64, 256) and to float32 rounding otherwise (MKL, head size 32: a unit or two in the last place). The
    additive key mask is added only where a window has padding (``padded``, when the caller
    knows it, spares a device synchronisation). ``scale`` defaults to 1/√d.
    """
    scale = query.shape[-1] ** -0.5 if scale is None else float(scale)
    scores = head_matmul(query.float(), key.float().transpose(-1, -2), scale, out)
    valid = attention_mask.bool()
    if (not bool(valid.all())) if padded is None else padded:
        bias = torch.zeros(valid.shape, dtype=scores.dtype, device=scores.device)
        bias.masked_fill_(~valid, torch.finfo(scores.dtype).min)
        scores.add_(bias[:, None, None, :])  # additive mask, as the model's own kernels apply it
    # in place on a CPU (each row is read whole before it is written): a second [B, H, T, T] block costs
    # more to allocate and fault in than the softmax itself
    return torch.softmax(scores, dim=-1, out=scores) if scores.device.type == "cpu" else torch.softmax(scores, dim=-1)
