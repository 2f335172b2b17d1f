"""The ``T×T`` work of one layer step as pure functions for ``torch.compile`` (the ``compiled`` backend).

The eager statistics (:mod:`.attention`, :mod:`.pairs`) make about twenty elementwise and reduction
passes over each ``[B, H, T, T]`` tensor; on a GPU those passes, not the arithmetic, set the cost.
Here each step is written as one function of the captured tensors whose outputs are the small
reductions the accumulators need, so the compiler (Inductor: C++ on CPU, Triton on GPU) can fuse
them into a few kernels. The probabilities and the normalised similarity are the eager functions
themselves (:func:`headsim.model.plain.attention_probs`, :func:`headsim.context_similarity.normalized_similarity`),
so every threshold decision and count equals the eager path; sums agree to float rounding
(tests/test_stats.py compares the two).
"""

from __future__ import annotations

import torch

from ..model.plain import attention_probs
from ..context_similarity import normalized_similarity

_COMPILED: dict = {}


def similarity_step(z: torch.Tensor, valid: torch.Tensor, padded: bool, upper: torch.Tensor,
                    same_sentence: torch.Tensor, repeat_upper: torch.Tensor, repeat_same_upper: torch.Tensor,
                    upper_flat: torch.Tensor, threshold: float, scale: float, offset: float, bins: int):
    """Head outputs ``z`` ``[B, H, T, d]`` → the fields of :class:`~headsim.stats.pairs.PairReductions`.

    The normalised similarity is :func:`headsim.context_similarity.normalized_similarity` itself.
    ``upper`` ``[T, T]`` float 0/1; ``same_sentence`` ``[B, 1, T*T]``; ``repeat_upper`` and
    ``repeat_same_upper`` ``[B, T, T]``; ``upper_flat`` the flat indices of ``i < j``.
    """
    b, h, t, _ = z.shape
    norm = normalized_similarity(z.float(), valid, padded)
    u = (norm > threshold).to(torch.float32) * upper
    inner = (u * repeat_upper[:, None]).sum(dim=-1)
    binned = (norm.reshape(b, h, t * t)[..., upper_flat] * scale + offset).clamp(0, bins - 1)
    return (norm.sum(dim=0), torch.nan_to_num(binned, nan=0.0).to(torch.int32), u.sum(dim=0), u.sum(dim=-1),
            u.sum(dim=-2), inner, (u * same_sentence.view(b, 1, t, t)).sum(dim=(0, 2, 3)), inner.sum(dim=(0, 2)),
            (u * repeat_same_upper[:, None]).sum(dim=(0, 2, 3)))


def attention_step(query: torch.Tensor, key: torch.Tensor, valid: torch.Tensor, padded: bool):
    """Queries and keys ``[B, H, T, d]`` → (masked probabilities, column sums ``[B, H, T]``, their sum
    over windows ``[H, T, T]``, sums of the −1 and +1 diagonals ``[H]``).

    The probabilities are :func:`headsim.model.plain.attention_probs` itself; padding is then zeroed by
    selection (no inf·0 = NaN), as :func:`~headsim.stats.attention.attention_batch` does.
    """
    a = attention_probs(query, key, valid, padded)
    if padded:
        a = torch.where(valid[:, None, :, None] & valid[:, None, None, :], a, torch.zeros((), device=a.device))
    return (a, a.sum(dim=-2), a.sum(dim=0), a.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, 2)),
            a.diagonal(offset=1, dim1=-2, dim2=-1).sum(dim=(0, 2)))


def compiled(fn):
    """``torch.compile(fn)``, built once per process."""
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn)
    return _COMPILED[fn]


def batch_dynamic(*tensors: torch.Tensor) -> None:
    """Mark the window axis of ``tensors`` dynamic: one compilation serves every batch size (the
    last, smaller batch of a run included) while head, position and vector sizes stay static."""
    for x in tensors:
        if x.shape[0] >= 2:
            torch._dynamo.mark_dynamic(x, 0)
