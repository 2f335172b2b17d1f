"""A layer's attention handed out as its scaled scores instead of its probabilities.

For families whose eager attention is ``softmax(Q·Kᵀ·scaling + mask)`` and nothing else
(:attr:`headsim.model.arch.Arch.recomputable`), the probabilities are a function of the queries, the
keys and the mask. Where a consumer can recompute them tile by tile (the GPU kernels of
:mod:`headsim.stats.triton_long`), the model tap hands it :class:`Scores` and lets the model go on with
its own attention (sdpa): the ``[heads, T, T]`` probabilities are never written, the eager attention
never runs. The mask is described by three facts (valid keys; earlier keys only where causal; fewer
than ``window`` positions back where the layer slides) and :func:`scores_of` hands scores out only
where the family's own mask, built block by block, says exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass
class Scores:
    """One layer's attention ``softmax(query·keyᵀ·scale + mask)``: ``query`` ``[B, H, T, d]``, ``key``
    ``[B, H_kv, T, d]`` (query head ``h`` reads key head ``h // (H / H_kv)``), the mask :meth:`allowed`;
    ``value`` ``[B, H_kv, T, d]``, where a consumer may compute the layer's head outputs (:meth:`outputs`)."""

    query: torch.Tensor
    key: torch.Tensor
    scale: float
    causal: bool
    window: int | None
    valid: torch.Tensor  # [B, T] bool: the window's valid keys
    value: torch.Tensor | None = None

    @cached_property
    def padded(self) -> bool:
        """Whether some key of the batch is not valid."""
        return not bool(self.valid.all())

    def allowed(self, rows: slice, keys: slice | None = None) -> torch.Tensor:
        """``[B, 1, rows, keys]`` bool: the keys (default all ``T``) each query row of ``rows`` attends."""
        t = self.valid.shape[-1]
        keys = slice(0, t) if keys is None else keys
        dev = self.valid.device
        q = torch.arange(rows.start, rows.stop, device=dev)[:, None]
        k = torch.arange(keys.start, keys.stop, device=dev)[None, :]
        ok = self.valid[:, None, None, keys].expand(-1, 1, rows.stop - rows.start, keys.stop - keys.start)
        if self.causal:
            ok = ok & (k <= q)
        if self.window:
            ok = ok & (q - k < self.window)
        return ok

    def keys(self, rows: slice) -> slice:
        """The key columns query rows ``rows`` may attend (every other column's probability is 0): up to
        the last row where causal, from ``window − 1`` before the first row where the layer slides."""
        t = self.valid.shape[-1]
        start = max(0, rows.start - self.window + 1) if self.window else 0
        return slice(start, min(t, rows.stop) if self.causal else t)

    def _masked_columns(self, rows: slice, keys: slice) -> list[slice]:
        """The key columns (of ``keys``) where :meth:`allowed` may say no for some row of ``rows``."""
        n = keys.stop - keys.start
        if self.padded:
            return [slice(0, n)]
        parts = []
        if self.causal:  # keys after the first row
            parts.append(slice(max(0, rows.start + 1 - keys.start), n))
        if self.window:  # keys a window or more before the last row
            parts.append(slice(0, max(0, min(n, rows.stop - self.window - keys.start))))
        return [p for p in parts if p.stop > p.start]

    def probabilities(self, rows: slice, keys: slice | None = None) -> torch.Tensor:
        """``[B, H, rows, keys]`` float32: the probabilities of query rows ``rows`` over key columns ``keys``
        (default all; columns outside :meth:`keys` hold 0), computed by torch (a row that attends no key is 0).
        The query heads that share a key head are one product with it (no copy of the keys); the mask is
        applied only to the columns where it may say no."""
        b, h, _, d = self.query.shape
        kv = self.key.shape[1]
        keys = slice(0, self.valid.shape[-1]) if keys is None else keys
        m = rows.stop - rows.start
        q = self.query[:, :, rows].float().reshape(b, kv, (h // kv) * m, d)  # heads g·i … g·i + g − 1 read key head i
        k = self.key[:, :, keys].float()
        s = torch.matmul(q, k.transpose(-1, -2)).view(b, h, m, keys.stop - keys.start).mul_(self.scale)
        for part in self._masked_columns(rows, keys):
            cols = slice(keys.start + part.start, keys.start + part.stop)
            s[..., part].masked_fill_(~self.allowed(rows, cols), float("-inf"))
        s = torch.softmax(s, dim=-1, out=s) if s.device.type == "cpu" else s.softmax(dim=-1)
        return s.nan_to_num_(0.0) if self.padded else s

    def outputs(self, probs: torch.Tensor, keys: slice) -> torch.Tensor:
        """The head outputs ``probs · value`` ``[B, H, rows, d]`` (float32) of probabilities ``[B, H, rows, keys]``
        (:meth:`probabilities`), the query heads that share a value head one product with it."""
        b, h, m, n = probs.shape
        kv = self.value.shape[1]
        out = torch.matmul(probs.view(b, kv, (h // kv) * m, n), self.value[:, :, keys].float())
        return out.view(b, h, m, out.shape[-1])


def _mask_holds(mask, scores: Scores, rows_per_block: int) -> bool:
    """Whether eager's float mask (the tap's row mask, or ``None``: nothing masked) allows exactly the keys
    :meth:`Scores.allowed` allows, checked a block of query rows at a time."""
    t = scores.valid.shape[-1]
    for start in range(0, t, rows_per_block):
        rows = slice(start, min(start + rows_per_block, t))
        want = scores.allowed(rows)
        got = None if mask is None else mask.rows(rows.start, rows.stop)
        if got is None:
            if not bool(want.all()):
                return False
            continue
        if got.shape[-1] != t or not torch.equal(got != torch.finfo(got.dtype).min, want.expand_as(got)):
            return False
    return True


def scores_of(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask, scaling: float | None,
              dropout: float, kwargs: dict, valid: torch.Tensor, rows_per_block: int, checked: dict) -> Scores | None:
    """The layer's :class:`Scores`, or ``None`` where they would not be its attention: dropout, a key
    length other than the window's, keyword arguments that change the softmax, or a mask other than the
    one described (checked once per mask object, remembered in ``checked``)."""
    if dropout or query.shape[2] != key.shape[2] or key.shape[2] != valid.shape[-1]:
        return None
    if any(kwargs.get(name) is not None for name in ("s_aux", "sinks", "softcap", "position_bias")):
        return None
    window = kwargs.get("sliding_window")
    scores = Scores(query, key, float(query.shape[-1] ** -0.5 if scaling is None else scaling),
                    bool(getattr(module, "is_causal", False)), int(window) if window else None, valid, value)
    seen = (id(mask), scores.causal, scores.window)
    if seen not in checked:  # the mask is kept beside its verdict, so its id is not reused within the pass
        checked[seen] = (mask, _mask_holds(mask, scores, rows_per_block))
    return scores if checked[seen][1] else None
