"""The model tap's masks and key columns: eager's attention mask built a block of query rows at a time,
the key columns a block may attend, and a block's probabilities or per-pair arguments cut to them.

Nothing ``[T, T]`` is built for a long window: :class:`RowMask` holds the arguments transformers passes
to a mask builder and builds the family's own mask for the rows (and, where known, the key columns)
asked for; :func:`live_keys` finds the columns some row of a block leaves unmasked, so the tap runs the
family's eager attention on those alone (softmax gives every other column exactly 0).
"""

from __future__ import annotations

import torch


class RowMask:
    """The tap's attention mask: the arguments transformers passes to a mask builder, built into
    eager's additive float mask ``[B, 1, rows, T]`` one block of query rows at a time (the family's
    own mask function decides every entry; nothing ``T×T`` is built for a long window)."""

    def __init__(self, kwargs: dict) -> None:
        self.kwargs = kwargs
        self._live: dict[tuple[int, int], slice] = {}  # each block's live key columns (:meth:`block`)

    @property
    def q_length(self) -> int:
        return int(self.kwargs["q_length"])

    def rows(self, start: int, stop: int, keys: slice | None = None) -> torch.Tensor | None:
        """Eager's mask for query rows ``start:stop`` (key columns ``keys``, default all)."""
        from transformers.masking_utils import eager_mask

        kw = dict(self.kwargs, q_length=stop - start, q_offset=int(self.kwargs.get("q_offset", 0)) + start)
        if keys is not None:
            kw.update(kv_length=keys.stop - keys.start, kv_offset=int(self.kwargs.get("kv_offset", 0)) + keys.start)
        return eager_mask(**kw)

    def block(self, start: int, stop: int, n: int, trim: bool = True) -> tuple[slice, torch.Tensor | None]:
        """The key columns of query rows ``start:stop`` that some row may attend (:func:`live_keys`; all
        ``n`` without ``trim``) and eager's mask on them.

        The first call for a block (the first layer the mask serves) builds the block's mask on all
        ``n`` keys to find them; later calls (the other layers of the pass) build it on those columns
        alone: the family's mask function decides each entry from its absolute query and key positions,
        so the entries are the same, at the cost of the live pairs instead of all ``rows × n``."""
        whole = slice(0, n)
        if not trim:
            return whole, self.rows(start, stop)
        keys = self._live.get((start, stop))
        if keys is None:
            mask = self.rows(start, stop)
            keys = self._live[start, stop] = live_keys(mask, n)
            return keys, (mask if mask is None or keys == whole else mask[..., keys])
        return keys, self.rows(start, stop, None if keys == whole else keys)

    def whole(self) -> torch.Tensor | None:
        """Eager's mask for every query row (for families whose own code reads the mask, such as
        the sparse-attention indexers of DeepSeek-V3.2 and GLM-MoE-DSA)."""
        return self.rows(0, self.q_length)

    def __getitem__(self, index):
        return self.whole()[index]

    @property
    def shape(self) -> torch.Size:
        return self.whole().shape

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of eager's float mask (families that turn it into a bias of their own read it: Doge)."""
        return self.kwargs.get("dtype", torch.float32)

    def __getattr__(self, name: str):
        """Any other tensor attribute or method (``masked_fill``, ``device`` ...) of the whole mask: for
        families whose attention edits the mask before the attention function (Qwen4-Exp's indexed
        attention keeps the keys its indexer selects)."""
        if name.startswith("__") or name == "kwargs":
            raise AttributeError(name)
        return getattr(self.whole(), name)

    def __eq__(self, other):  # compared element-wise, as the tensor it stands for (Qwen4-Exp's ``mask == 0``)
        return self.whole() == other

    def __ne__(self, other):
        return self.whole() != other

    __hash__ = object.__hash__

    def for_sdpa(self) -> torch.Tensor | None:
        """The whole mask as sdpa takes it (``None`` where sdpa's own causal flag covers it)."""
        from transformers.masking_utils import sdpa_mask

        return sdpa_mask(**self.kwargs)


def live_keys(mask: torch.Tensor | None, n: int) -> slice:
    """The key columns of a block of eager's float mask ``[B, 1, rows, n]`` that some row may attend:
    from the first to the last column not at the mask dtype's minimum (eager's "masked"). Every
    column outside it is masked for every row, so softmax gives it exactly 0. All ``n`` columns
    where some row has no key left (softmax then spreads over the masked ones) or where ``mask``
    is ``None`` or not eager's float mask."""
    whole = slice(0, n)
    if mask is None or not mask.is_floating_point() or mask.shape[-1] != n:
        return whole
    live = mask != torch.finfo(mask.dtype).min
    columns = live.reshape(-1, n).any(dim=0)
    if not bool(live.any(dim=-1).all()):
        return whole
    at = columns.nonzero()[:, 0]
    return slice(int(at[0]), int(at[-1]) + 1)


def full_keys(probs: torch.Tensor, keys: slice, n: int) -> torch.Tensor:
    """A block of probabilities over key columns ``keys`` ``[..., rows, keys]`` (what ``on_tile``
    receives) as ``[..., rows, n]``, zeros in the columns the tap left out."""
    if (keys.start, keys.stop) == (0, n):
        return probs
    out = probs.new_zeros(*probs.shape[:-1], n)
    out[..., keys] = probs
    return out


def block_kwargs(kwargs: dict, t: int, n: int, rows: slice, keys: slice) -> dict:
    """The attention function's keyword arguments for query rows ``rows`` and key columns ``keys``:
    a per-pair tensor ``[..., T(query), T(key)]`` (a position bias, as T5 passes it) is cut to them."""
    return {k: v[..., rows, keys] if isinstance(v, torch.Tensor) and v.ndim >= 2 and v.shape[-2:] == (t, n) else v
            for k, v in kwargs.items()}
