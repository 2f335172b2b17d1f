"""What the accumulators know about one batch of windows: :class:`BatchInfo` and its derived tensors.

:class:`BatchInfo` is what the driver hands in (token ids, validity, sentence ids, token
categories). :class:`BatchTensors` is derived from it once per batch by
:meth:`CorpusStats.begin_batch <headsim.stats.CorpusStats.begin_batch>` and shared by every layer:
the valid-pair masks, the equal-token and same-sentence relations and the token-class membership
used for the anchor statistics (Fig 11).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import require
from ..tokens import boundary_ids, punctuation_lookup
from ..windows import Framing


@dataclass
class BatchInfo:
    """One batch of ``B`` windows of ``T`` tokens, as torch tensors on the compute device.

    Attributes:
        input_ids: ``[B, T]`` int64 token ids.
        valid: ``[B, T]`` bool, ``attention_mask == 1`` ([CLS], text, [SEP]); padding ``False``.
        sentence_ids: ``[B, T]`` int64 sentence number within the window; -1 for [CLS], [SEP]
            and padding.
        is_cls, is_sep, is_punct: ``[B, T]`` bool token categories (only valid positions count).
    """

    input_ids: torch.Tensor
    valid: torch.Tensor
    sentence_ids: torch.Tensor
    is_cls: torch.Tensor
    is_sep: torch.Tensor
    is_punct: torch.Tensor

    @property
    def n_windows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[1])

    def select(self, index: slice) -> BatchInfo:
        """The windows at ``index`` (views)."""
        return BatchInfo(self.input_ids[index], self.valid[index], self.sentence_ids[index], self.is_cls[index],
                         self.is_sep[index], self.is_punct[index])


def batch_info(input_ids, attention_mask, sentence_ids, tokenizer, device: str | torch.device = "cpu", *,
               framing: Framing | None = None) -> BatchInfo:
    """Build a :class:`BatchInfo` from window arrays (numpy or torch) and the model's tokenizer.

    The ``cls`` / ``sep`` attention targets are the window's opening and closing tokens: those of
    ``framing`` (:attr:`headsim.models.LoadedModel.framing`; a BOS-framed decoder has an opener and
    no closer, so GPT-2's ``<|endoftext|>``, its BOS and EOS at once, is counted once, as the opener);
    without it the tokenizer's ``cls_token_id`` / ``sep_token_id`` (``bos`` / ``eos`` for
    RoBERTa-style tokenizers). Punctuation is :func:`punctuation_lookup`.
    """
    dev = torch.device(device)
    host_ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.int64)
    ids = host_ids.to(dev)
    valid = torch.as_tensor(np.asarray(attention_mask)).to(dev) == 1
    sent = torch.as_tensor(np.asarray(sentence_ids), dtype=torch.int64).to(dev)
    require(ids.ndim == 2 and valid.shape == ids.shape and sent.shape == ids.shape,
            f"window arrays have shapes {tuple(ids.shape)}, {tuple(valid.shape)}, {tuple(sent.shape)}",
            "pass input_ids, attention_mask and sentence_ids shaped [windows, seq_len]")
    cls, sep = target_ids(tokenizer, framing)
    is_cls = (ids == cls) & valid if cls is not None else torch.zeros_like(valid)
    is_sep = (ids == sep) & valid if sep is not None else torch.zeros_like(valid)
    is_punct = _punctuation(tokenizer, host_ids).to(dev) & valid
    return BatchInfo(ids, valid, torch.where(valid, sent, torch.full_like(sent, -1)), is_cls, is_sep, is_punct)


def target_ids(tokenizer, framing: Framing | None = None) -> tuple[int | None, int | None]:
    """Ids counted as the ``cls`` and ``sep`` attention targets (see :func:`batch_info`)."""
    return (framing.open, framing.close) if framing is not None else boundary_ids(tokenizer)


def _punctuation(tokenizer, ids: torch.Tensor) -> torch.Tensor:
    """Which of the host ``ids`` are punctuation tokens, by a lookup in a vocabulary-sized table (40×
    faster than ``torch.isin`` on the sorted punctuation ids); ids outside the vocabulary are not."""
    table, host = punctuation_lookup(tokenizer), ids.numpy()
    return torch.from_numpy(np.take(table, host, mode="clip") & (host >= 0) & (host < len(table)))


@dataclass
class BatchTensors:
    """Per-batch tensors shared by every layer (built by :func:`batch_tensors`).

    Attributes:
        info: the :class:`BatchInfo` they were built from (``update_layer`` checks identity).
        valid: ``[B, T]`` bool.
        padded: whether any position of the batch is padding (full windows skip every mask pass).
        pair_valid: ``[B, 1, T, T]`` bool, both positions valid (diagonal included).
        pair_invalid: its negation (padding on either side).
        same_sentence: ``[B, 1, T*T]`` float32, 1 where both positions are in one sentence (ids ≥ 0, equal).
        repeat_index: ``(window, i, j)`` int64 ``[N]`` each: every pair ``i < j`` of valid positions
            with equal token ids (few per window, so repeated-token statistics read ``N`` elements
            instead of a ``T×T`` pass).
        repeat_same_sentence: ``[N]`` bool, that pair lies in one sentence.
        token_class: ``[B, T, T]`` float32 one-hot: position ``p`` → first position ``c`` in its
            window with the same token id (0 rows for padding).
        key_targets: ``[B, T, 3]`` float32 key categories [CLS], [SEP], punctuation.
        categories: ``[B, T]`` int64 anchor kind of each position: 0 cls, 1 sep, 2 punct, 3 other.
        sentences: ``[B, T]`` int64 sentence ids, -1 at padding (and wherever a position is in no sentence).
        counts: the batch's window-level counts (0-d int64 tensors, ``pair_count_valid`` ``[T, T]``):
            ``windows``, ``tokens``, ``valid_pairs``, ``valid_pairs_same_sentence``, ``pair_count_valid``.
    """

    info: BatchInfo
    valid: torch.Tensor
    padded: bool
    pair_valid: torch.Tensor
    pair_invalid: torch.Tensor
    same_sentence: torch.Tensor
    repeat_index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    repeat_same_sentence: torch.Tensor
    token_class: torch.Tensor
    key_targets: torch.Tensor
    categories: torch.Tensor
    counts: dict[str, torch.Tensor]
    sentences: torch.Tensor


def check_info(info: BatchInfo, seq_len: int, device: torch.device) -> None:
    """Shapes and dtypes of a :class:`BatchInfo`, with a clear error."""
    require(isinstance(info, BatchInfo), f"expected a BatchInfo, got {type(info).__name__}",
            "build one with headsim.stats.batch_info")
    shape = tuple(info.input_ids.shape)
    require(len(shape) == 2 and shape[1] == seq_len, f"batch has shape {shape}, expected [B, {seq_len}]",
            f"pass windows of seq_len {seq_len} (the accumulator's seq_len)")
    for name in ("valid", "sentence_ids", "is_cls", "is_sep", "is_punct"):
        t = getattr(info, name)
        require(tuple(t.shape) == shape, f"BatchInfo.{name} has shape {tuple(t.shape)}, expected {shape}",
                "give every BatchInfo field the shape [B, T]")
        require(t.device == device or (t.device.type == device.type and device.index is None),
                f"BatchInfo.{name} is on {t.device}, the accumulator on {device}",
                "build the BatchInfo on the accumulator's device")


def batch_tensors(info: BatchInfo) -> BatchTensors:
    """Derive the per-batch tensors and the window-level counts of one batch."""
    valid = info.valid.bool()
    b, t = valid.shape
    ids = info.input_ids.long()
    sent = torch.where(valid, info.sentence_ids.long(), torch.full_like(ids, -1))
    upper = torch.ones(t, t, dtype=torch.bool, device=valid.device).triu(1)
    pv = valid[:, :, None] & valid[:, None, :]  # [B, T, T]
    same_id = (ids[:, :, None] == ids[:, None, :]) & pv
    same_sent = (sent[:, :, None] == sent[:, None, :]) & (sent[:, :, None] >= 0)
    # first position with the same id; padding rows → T, then dropped by the valid factor
    positions = torch.arange(t, device=valid.device)
    first = torch.where(same_id, positions, t).amin(dim=-1).clamp_max(t - 1)
    token_class = torch.nn.functional.one_hot(first, t).to(torch.float32) * valid[:, :, None]
    rb, ri, rj = (same_id & upper).nonzero(as_tuple=True)
    cls, sep = info.is_cls.bool() & valid, info.is_sep.bool() & valid
    punct = info.is_punct.bool() & valid
    targets = torch.stack([cls, sep, punct], dim=-1).to(torch.float32)
    categories = torch.full_like(ids, 3)
    categories = torch.where(punct, torch.full_like(ids, 2), categories)
    categories = torch.where(sep, torch.full_like(ids, 1), categories)
    categories = torch.where(cls, torch.full_like(ids, 0), categories)
    n = valid.sum(dim=-1)
    counts = {
        "windows": torch.tensor(b, dtype=torch.int64, device=valid.device),
        "tokens": n.sum(),
        "valid_pairs": (n * (n - 1) // 2).sum(),
        "valid_pairs_same_sentence": (same_sent & upper).sum(),
        "pair_count_valid": pv.sum(dim=0),
    }
    pair_valid = pv[:, None]
    return BatchTensors(info, valid, not bool(valid.all()), pair_valid, ~pair_valid,
                        same_sent.to(torch.float32).reshape(b, 1, t * t), (rb, ri, rj), same_sent[rb, ri, rj],
                        token_class, targets, categories, counts, sent)


def dense_repeats(bt: BatchTensors) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, T, T]`` float32 0/1 masks of :attr:`BatchTensors.repeat_index` (pairs ``i < j`` with equal
    ids) and of those inside one sentence, for code that wants dense masks (the fused steps)."""
    b, t = bt.valid.shape
    rb, ri, rj = bt.repeat_index
    rep = torch.zeros(b, t, t, dtype=torch.float32, device=bt.valid.device)
    rep_same = torch.zeros_like(rep)
    rep[rb, ri, rj] = 1.0
    rep_same[rb, ri, rj] = bt.repeat_same_sentence.to(torch.float32)
    return rep, rep_same
