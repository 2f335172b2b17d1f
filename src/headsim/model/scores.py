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

import torch


@dataclass
class Scores:
    """One layer's attention ``softmax(query·keyᵀ·scale + mask)``: ``query`` ``[B, H, T, d]``, ``key``
    ``[B, H_kv, T, d]`` (query head ``h`` reads key head ``h // (H / H_kv)``), the mask :meth:`allowed`."""

    query: torch.Tensor
    key: torch.Tensor
    scale: float
    causal: bool
    window: int | None
    valid: torch.Tensor  # [B, T] bool: the window's valid keys

    def allowed(self, rows: slice) -> torch.Tensor:
        """``[B, 1, rows, T]`` bool: the keys each query row of ``rows`` attends."""
        t = self.valid.shape[-1]
        dev = self.valid.device
        q = torch.arange(rows.start, rows.stop, device=dev)[:, None]
        k = torch.arange(t, device=dev)[None, :]
        ok = self.valid[:, None, None, :].expand(-1, 1, rows.stop - rows.start, t)
        if self.causal:
            ok = ok & (k <= q)
        if self.window:
            ok = ok & (q - k < self.window)
        return ok

    def probabilities(self, rows: slice) -> torch.Tensor:
        """``[B, H, rows, T]`` float32: the probabilities of query rows ``rows``, computed by torch (a row
        that attends no key is 0)."""
        group = self.query.shape[1] // self.key.shape[1]
        q = self.query[:, :, rows].float()
        k = self.key.float().repeat_interleave(group, dim=1)
        s = torch.matmul(q, k.transpose(-1, -2)).mul_(self.scale)
        s.masked_fill_(~self.allowed(rows), float("-inf"))
        return s.softmax(dim=-1).nan_to_num_(0.0)


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


def scores_of(module, query: torch.Tensor, key: torch.Tensor, mask, scaling: float | None, dropout: float,
              kwargs: dict, valid: torch.Tensor, rows_per_block: int, checked: dict) -> Scores | None:
    """The layer's :class:`Scores`, or ``None`` where they would not be its attention: dropout, a key
    length other than the window's, keyword arguments that change the softmax, or a mask other than the
    one described (checked once per mask object, remembered in ``checked``)."""
    if dropout or query.shape[2] != key.shape[2] or key.shape[2] != valid.shape[-1]:
        return None
    if any(kwargs.get(name) is not None for name in ("s_aux", "sinks", "softcap", "position_bias")):
        return None
    window = kwargs.get("sliding_window")
    scores = Scores(query, key, float(query.shape[-1] ** -0.5 if scaling is None else scaling),
                    bool(getattr(module, "is_causal", False)), int(window) if window else None, valid)
    seen = (id(mask), scores.causal, scores.window)
    if seen not in checked:  # the mask is kept beside its verdict, so its id is not reused within the pass
        checked[seen] = (mask, _mask_holds(mask, scores, rows_per_block))
    return scores if checked[seen][1] else None
