"""Context similarity matrices (paper §2–3, Fig 1b): S = Z·Zᵀ of each head's output vectors.

Pure tensor functions: torch in, torch out (numpy in, numpy out). Every leading axis is a batch
axis, so one call handles ``[T, d]``, ``[H, T, d]`` or ``[W, L, H, T, d]`` alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .errors import require

KINDS = ("dot", "cosine")


@dataclass
class Similarity:
    """Raw, normalised and thresholded similarity, each ``[..., T, T]``.

    ``normalized`` is ``raw`` with the diagonal and padded rows/columns zeroed, divided by its
    maximum over the valid off-diagonal block (all zero where that maximum is not positive);
    ``mask`` marks ``normalized > threshold`` (the paper's high-similarity elements).
    """

    raw: torch.Tensor | np.ndarray
    normalized: torch.Tensor | np.ndarray
    mask: torch.Tensor | np.ndarray
    threshold: float
    kind: str = "dot"


def check_threshold(threshold: float, name: str = "threshold") -> float:
    """Thresholds live in (0, 1]."""
    ok = isinstance(threshold, (int, float, np.floating)) and 0.0 < float(threshold) <= 1.0
    usual = {"threshold": " (the paper uses 0.3)", "separator threshold": " (the default is 0.5)"}.get(name, "")
    require(ok, f"{name} {threshold!r} is outside (0, 1]", f"pass a {name} above 0 and at most 1{usual}")
    return float(threshold)


def expand_mask(attention_mask: torch.Tensor, ndim: int) -> torch.Tensor:
    """Window mask ``[W, T]`` (or ``[T]``) → boolean ``[W, 1, …, 1, T]`` with ``ndim`` dims."""
    m = attention_mask.bool()
    lead = tuple(m.shape[:-1]) if m.ndim > 1 else ()
    return m.reshape(lead + (1,) * (ndim - 1 - len(lead)) + (m.shape[-1],))


def valid_pairs(attention_mask: torch.Tensor, ndim: int) -> torch.Tensor:
    """Boolean ``[..., T, T]``: both positions valid and distinct."""
    v = expand_mask(attention_mask, ndim - 1)
    t = v.shape[-1]
    eye = torch.eye(t, dtype=torch.bool, device=v.device)
    return v.unsqueeze(-1) & v.unsqueeze(-2) & ~eye


def normalized_similarity(z: torch.Tensor, valid: torch.Tensor | None = None, padded: bool | None = None) -> torch.Tensor:
    """The normalised context similarity of float32 head outputs ``z`` ``[..., T, d]`` (one definition).

    Padded vectors are replaced by zeros before ``Z·Zᵀ`` (so padded rows and columns are exactly
    0, whatever the model left there, NaN included), the diagonal is zeroed, and each matrix is
    divided by its maximum; matrices whose maximum is not positive become all zero. The maximum of
    the zeroed matrix equals the maximum over valid off-diagonal pairs whenever that is positive
    (the zeroed diagonal is always there), so one ``amax`` pass decides both cases. Every
    statistic and every view calls this, so a threshold decision is the same everywhere.

    Args:
        z: float32 head outputs; leading axes are batch axes.
        valid: boolean ``[T]`` or ``[W, T]`` aligned with the leading axis of ``z``; ``None`` → all valid.
        padded: whether ``valid`` has a ``False`` (when the caller knows, saving a device sync).
    """
    if padded is None:
        padded = valid is not None and not bool(valid.all())
    if padded:
        z = torch.where(expand_mask(valid, z.ndim - 1).unsqueeze(-1), z, torch.zeros((), dtype=z.dtype, device=z.device))
    else:
        z = z.contiguous()
    s = torch.matmul(z, z.transpose(-1, -2))
    s.diagonal(dim1=-2, dim2=-1).zero_()
    peak = s.amax(dim=(-1, -2), keepdim=True)
    positive = peak > 0
    s.div_(torch.where(positive, peak, torch.ones_like(peak)))
    # on accelerators (and in compiled code) a pass is cheaper than a sync or a graph break
    if s.device.type != "cpu" or torch.compiler.is_compiling() or not bool(positive.all()):
        s.mul_(positive)
    return s


def similarity(
    head_outputs: torch.Tensor | np.ndarray,
    threshold: float = 0.3,
    attention_mask: torch.Tensor | np.ndarray | None = None,
    *,
    kind: str = "dot",
) -> Similarity:
    """Context similarity of head outputs ``[..., T, d]``.

    Args:
        head_outputs: per-head output vectors; leading axes are batch axes.
        threshold: high-similarity cut on the normalised matrix, in (0, 1].
        attention_mask: ``[T]`` or ``[W, T]`` (aligned with the leading axis of ``head_outputs``);
            padded positions never enter the max, the matrix or the mask. ``None`` → all valid.
        kind: ``"dot"`` (the paper: unnormalised vectors) or ``"cosine"`` (unit vectors).
    """
    threshold = check_threshold(threshold)
    require(kind in KINDS, f"unknown similarity kind {kind!r}", f"use one of {', '.join(KINDS)}")
    as_numpy = isinstance(head_outputs, np.ndarray)
    z = torch.as_tensor(head_outputs).float()
    require(z.ndim >= 2, f"head_outputs has shape {tuple(z.shape)}", "pass vectors shaped [..., T, d]")
    if kind == "cosine":
        z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    raw = torch.matmul(z, z.transpose(-1, -2))
    t = z.shape[-2]
    mask_t = torch.ones(t, dtype=torch.bool, device=z.device) if attention_mask is None else torch.as_tensor(attention_mask, device=z.device)
    require(mask_t.shape[-1] == t, f"attention_mask has {mask_t.shape[-1]} positions but head_outputs has {t}",
            "pass the attention_mask of the same windows")
    norm = normalized_similarity(z, mask_t.bool())
    high = norm > threshold
    if as_numpy:
        return Similarity(raw.numpy(), norm.numpy(), high.numpy(), threshold, kind)
    return Similarity(raw, norm, high, threshold, kind)
