"""The attention of ``plain`` families (:mod:`headsim.model.arch`), as headsim computes it itself.

For those families the model's attention is exactly softmax(Q·Kᵀ·scale) over the window's valid
keys, so the statistics may compute it once, in cache-sized steps, and hand the model its outputs
(:meth:`headsim.model.tap.Tap.run_computing`); ``tests/test_architectures.py`` checks the equality
against each family's eager ``output_attentions``.
"""

from __future__ import annotations

import torch


def attention_probs(query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor,
                    padded: bool | None = None, scale: float | None = None) -> torch.Tensor:
    """softmax(QKᵀ·scale) over valid keys, in float32: ``[batch, head, seq, seq]``.

    Rows of padded queries are computed like the model does (they attend to the valid keys).
    The scale is applied to the queries (a ``[seq, d]`` pass instead of a ``[seq, seq]`` one) and
    the additive key mask only where a window has padding (``padded``, when the caller knows it,
    spares a device synchronisation). ``scale`` defaults to 1/√d.
    """
    q = query.float() * (query.shape[-1] ** -0.5 if scale is None else scale)
    scores = torch.matmul(q, key.float().transpose(-1, -2))
    valid = attention_mask.bool()
    if (not bool(valid.all())) if padded is None else padded:
        bias = torch.zeros(valid.shape, dtype=scores.dtype, device=scores.device)
        bias.masked_fill_(~valid, torch.finfo(scores.dtype).min)
        scores.add_(bias[:, None, None, :])  # additive mask, as the model's own kernels apply it
    # in place on a CPU (each row is read whole before it is written): a second [B, H, T, T] block costs
    # more to allocate and fault in than the softmax itself
    return torch.softmax(scores, dim=-1, out=scores) if scores.device.type == "cpu" else torch.softmax(scores, dim=-1)
