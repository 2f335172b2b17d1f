"""The ``T×T`` work of one layer step as pure functions for ``torch.compile`` (opt-in: ``fused=True``).

The eager statistics (:mod:`.attention`, :mod:`.pairs`) make about twenty elementwise and reduction
passes over each ``[B, H, T, T]`` tensor; on a GPU those passes, not the arithmetic, set the cost.
Here each step is written as one function of the captured tensors whose outputs are the small
reductions the accumulators need, so the compiler (Inductor: C++ on CPU, Triton on GPU) can fuse
them into a few kernels. The float32 arithmetic is the eager one (masked ``Z·Zᵀ``, the same division,
the same ``> threshold``), so every threshold decision and count equals the eager path; sums agree
to float rounding (tests/test_stats.py compares the two).
"""

from __future__ import annotations

import torch

_COMPILED: dict = {}


def similarity_step(z: torch.Tensor, valid: torch.Tensor, padded: bool, offdiag: torch.Tensor, upper: torch.Tensor,
                    same_sentence: torch.Tensor, repeat_upper: torch.Tensor, repeat_same_upper: torch.Tensor,
                    upper_flat: torch.Tensor, threshold: float, scale: float, offset: float, bins: int):
    """Head outputs ``z`` ``[B, H, T, d]`` → the fields of :class:`~headsim.stats.pairs.PairReductions`.

    ``offdiag``/``upper`` ``[T, T]`` float 0/1; ``same_sentence`` ``[B, 1, T*T]``; ``repeat_upper`` and
    ``repeat_same_upper`` ``[B, T, T]``; ``upper_flat`` the flat indices of ``i < j``.
    """
    b, h, t, _ = z.shape
    z = z.float()
    if padded:
        z = torch.where(valid[:, None, :, None], z, torch.zeros((), dtype=z.dtype, device=z.device))
    s = torch.matmul(z, z.transpose(-1, -2)) * offdiag
    peak = s.amax(dim=(-1, -2), keepdim=True)
    positive = peak > 0
    norm = s / torch.where(positive, peak, torch.ones_like(peak)) * positive
    u = (norm > threshold).to(torch.float32) * upper
    inner = (u * repeat_upper[:, None]).sum(dim=-1)
    binned = (norm.reshape(b, h, t * t)[..., upper_flat] * scale + offset).clamp(0, bins - 1)
    return (norm.sum(dim=0), torch.nan_to_num(binned, nan=0.0).to(torch.int32), u.sum(dim=0), u.sum(dim=-1),
            u.sum(dim=-2), inner, (u * same_sentence.view(b, 1, t, t)).sum(dim=(0, 2, 3)), inner.sum(dim=(0, 2)),
            (u * repeat_same_upper[:, None]).sum(dim=(0, 2, 3)))


def attention_step(query: torch.Tensor, key: torch.Tensor, valid: torch.Tensor, padded: bool):
    """Queries and keys ``[B, H, T, d]`` → (masked probabilities, column sums ``[B, H, T]``, their sum
    over windows ``[H, T, T]``, sums of the −1 and +1 diagonals ``[H]``), as
    :func:`headsim.capture.attention_probs` and :func:`~headsim.stats.attention.attention_batch` compute them."""
    q = query.float() * query.shape[-1] ** -0.5
    scores = torch.matmul(q, key.float().transpose(-1, -2))
    if padded:
        bias = torch.where(valid, 0.0, torch.finfo(torch.float32).min)
        scores = scores + bias[:, None, None, :]
    a = torch.softmax(scores, dim=-1)
    if padded:  # exact zeros at padding (a selection: no inf·0 = NaN)
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
