"""What the accumulators know about one batch of windows: :class:`BatchInfo` and its derived tensors.

:class:`BatchInfo` is what the driver hands in (token ids, validity, sentence ids, token
categories). :class:`BatchTensors` is derived from it once per batch by
:meth:`CorpusStats.begin_batch <headsim.stats.CorpusStats.begin_batch>` and shared by every layer:
the valid-pair masks, the equal-token and same-sentence relations and the token-class membership
used for the anchor statistics (Fig 11).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import require
from ..tokens import boundary_ids, punctuation_lookup
from ..windows import Framing


def position_bins(seq_len: int, positions: int) -> np.ndarray:
    """Bin of every position (or distance) ``0..seq_len−1`` among ``positions`` equal bins:
    ``p · positions // seq_len`` (the identity when ``positions == seq_len``)."""
    return np.arange(seq_len, dtype=np.int64) * positions // seq_len


def distance_edges(seq_len: int, n_bins: int) -> np.ndarray:
    """Edges ``e_0 = 0 < e_1 < … < e_n = seq_len`` of ``n_bins`` distance bins (bin ``k`` holds the
    distances ``e_k ≤ d < e_{k+1}``): one bin per distance while ``n_bins ≥ seq_len``; else one bin per
    distance ``0..m−1`` and ``n_bins − m`` log-spaced bins from ``m`` to ``seq_len`` (edges
    ``round(m · q^i)``, ``q = (seq_len / m)^(1/(n_bins − m))``), with ``m`` the fewest exact distances
    for which no log-spaced bin is narrower than one token (``m · (q − 1) ≥ 1``)."""
    t, r = int(seq_len), int(n_bins)
    if r >= t:
        return np.arange(t + 1, dtype=np.int64)
    m = 1
    while m < r - 1 and m * ((t / m) ** (1.0 / (r - m)) - 1.0) < 1.0:
        m += 1
    q = (t / m) ** (1.0 / (r - m))
    edges = np.concatenate([np.arange(m, dtype=np.int64), np.round(m * q ** np.arange(r - m + 1)).astype(np.int64)])
    edges[-1] = t
    for k in range(m + 1, r):  # rounding never merges two bins (every bin at least one token wide)
        edges[k] = min(max(edges[k], edges[k - 1] + 1), t - (r - k))
    return edges


#: the widest position bin the GPU kernels take (:mod:`headsim.stats.triton_long`: a tile holds whole bins)
KERNEL_MAX_WIDTH = 128


def bin_width(t: int, r: int) -> int | None:
    """Positions per bin where all ``r`` bins of ``t`` positions hold the same power-of-two number, else ``None``."""
    if r <= 0 or t % r:
        return None
    w = t // r
    return w if w & (w - 1) == 0 else None


def kernel_tiles(t: int, r: int) -> bool:
    """Whether windows of ``t`` positions on ``r`` position bins can run on the GPU's tile kernels
    (:mod:`headsim.stats.triton_long`): bins of a power of two from 2 to :data:`KERNEL_MAX_WIDTH` positions."""
    w = bin_width(t, r)
    return w is not None and 2 <= w <= KERNEL_MAX_WIDTH


def distance_bins(seq_len: int, n_bins: int) -> np.ndarray:
    """Bin of every distance ``0..seq_len−1`` among the ``n_bins`` bins of :func:`distance_edges`."""
    return np.searchsorted(distance_edges(seq_len, n_bins), np.arange(seq_len), side="right").astype(np.int64) - 1


def valid_pairs_by_distance(valid: torch.Tensor, bins: torch.Tensor, n_bins: int) -> torch.Tensor:
    """Valid pairs ``i < j`` of a batch ``[B, T]`` by distance bin ``bins[j − i]`` ``[n_bins]`` int64
    (``Σ_i valid[i]·valid[i + d]`` per distance ``d``: an autocorrelation, exact by rounding float64 FFTs)."""
    b, t = valid.shape
    f = torch.fft.rfft(valid.to(torch.float64), n=2 * t)
    per_distance = torch.fft.irfft(f * f.conj(), n=2 * t)[:, :t].sum(dim=0).round().to(torch.int64)
    per_distance[0] = 0  # a position with itself is no pair
    return torch.zeros(n_bins, dtype=torch.int64, device=valid.device).index_add_(0, bins, per_distance)


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
    ``framing`` (:attr:`headsim.model.load.LoadedModel.framing`; a BOS-framed decoder has an opener and
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
        binned: the batch is binned (:func:`batch_tensors` with ``positions < T``): nothing ``T×T`` is built.
        repeat_index: ``(window, i, j)`` int64 ``[N]`` each: every pair ``i < j`` of valid positions
            with equal token ids (few per window, so repeated-token statistics read ``N`` elements
            instead of a ``T×T`` pass).
        repeat_same_sentence: ``[N]`` bool, that pair lies in one sentence.
        first: ``[B, T]`` int64: position ``p`` → first position in its window with the same token id
            (the anchor statistics' token classes; padding points at ``T − 1`` and weighs nothing).
        key_targets: ``[B, T, 3]`` float32 key categories [CLS], [SEP], punctuation.
        categories: ``[B, T]`` int64 anchor kind of each position: 0 cls, 1 sep, 2 punct, 3 other.
        sentences: ``[B, T]`` int64 sentence ids, -1 at padding (and wherever a position is in no sentence).
        counts: the batch's window-level counts (0-d int64 tensors, ``pair_count_valid`` ``[T, T]``, or
            ``[R, R]`` over position bins): ``windows``, ``tokens``, ``valid_pairs``,
            ``valid_pairs_same_sentence``, ``pair_count_valid``; binned also ``valid_pairs_distance``
            ``[R]`` (valid pairs ``i < j`` by distance bin, :func:`distance_bins`).

    The ``T×T`` masks :attr:`pair_valid`, :attr:`pair_invalid` and :attr:`same_sentence` are built on first
    use (the backends that read them), once per object; ``None`` in a binned batch.
    """

    info: BatchInfo
    valid: torch.Tensor
    padded: bool
    binned: bool
    repeat_index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    repeat_same_sentence: torch.Tensor
    first: torch.Tensor
    key_targets: torch.Tensor
    categories: torch.Tensor
    counts: dict[str, torch.Tensor]
    sentences: torch.Tensor

    @functools.cached_property
    def pair_valid(self) -> torch.Tensor | None:
        """``[B, 1, T, T]`` bool, both positions valid (diagonal included)."""
        return None if self.binned else (self.valid[:, :, None] & self.valid[:, None, :])[:, None]

    @functools.cached_property
    def pair_invalid(self) -> torch.Tensor | None:
        """The negation of :attr:`pair_valid` (padding on either side)."""
        return None if self.binned else ~self.pair_valid

    @functools.cached_property
    def same_sentence(self) -> torch.Tensor | None:
        """``[B, 1, T*T]`` float32, 1 where both positions are in one sentence (ids ≥ 0, equal)."""
        if self.binned:
            return None
        sent = self.sentences
        b, t = sent.shape
        same = (sent[:, :, None] == sent[:, None, :]) & (sent[:, :, None] >= 0)
        return same.to(torch.float32).reshape(b, 1, t * t)

    def select(self, index: slice) -> BatchTensors:
        """The tensors of the windows at ``index`` (a step of this batch; views where they can be); of the
        ``counts`` only ``windows``, ``tokens`` and ``valid_pairs`` (the others are read from the batch)."""
        if (index.start, index.stop) == (0, len(self.valid)):
            return self
        rb, ri, rj = self.repeat_index
        keep = (rb >= index.start) & (rb < index.stop)
        valid = self.valid[index]
        return BatchTensors(self.info.select(index), valid, not bool(valid.all()), self.binned,
                            (rb[keep] - index.start, ri[keep], rj[keep]), self.repeat_same_sentence[keep],
                            self.first[index], self.key_targets[index], self.categories[index], _window_counts(valid),
                            self.sentences[index])


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


def batch_tensors(info: BatchInfo, positions: int | None = None, rows: int = 1024) -> BatchTensors:
    """Derive the per-batch tensors and the window-level counts of one batch.

    ``positions`` below ``T``: a binned batch (see :class:`BatchTensors`; position ``p`` in bin
    ``p · positions // T``). Pairs of equal token ids are found ``rows`` query rows at a time."""
    valid = info.valid.bool()
    b, t = valid.shape
    dev = valid.device
    ids = info.input_ids.long()
    sent = torch.where(valid, info.sentence_ids.long(), torch.full_like(ids, -1))
    binned = positions is not None and positions < t
    cls, sep = info.is_cls.bool() & valid, info.is_sep.bool() & valid
    punct = info.is_punct.bool() & valid
    targets = torch.stack([cls, sep, punct], dim=-1).to(torch.float32)
    categories = torch.full_like(ids, 3)
    categories = torch.where(punct, torch.full_like(ids, 2), categories)
    categories = torch.where(sep, torch.full_like(ids, 1), categories)
    categories = torch.where(cls, torch.full_like(ids, 0), categories)
    counts = _window_counts(valid)
    # padding as ids of its own (below every token id, one per position): it equals nothing
    key = torch.where(valid, ids, -1 - torch.arange(t, device=dev))
    first = _first_positions(key, valid)
    rb, ri, rj = _repeat_pairs(key, rows)
    repeat_same = (sent[rb, ri] == sent[rb, rj]) & (sent[rb, ri] >= 0)
    per_sentence = torch.zeros(b, t + 1, dtype=torch.int64, device=dev)  # sentence ids < T: bins 1..T, -1 → 0
    per_sentence.scatter_add_(1, (sent + 1).clamp(0, t), torch.ones_like(sent))
    per_sentence[:, 0] = 0
    counts["valid_pairs_same_sentence"] = (per_sentence * (per_sentence - 1) // 2).sum()
    if binned:
        bins = torch.as_tensor(position_bins(t, positions), device=dev)
        per_bin = torch.zeros(b, positions, dtype=torch.int64, device=dev).index_add_(1, bins, valid.long())
        counts["pair_count_valid"] = (per_bin[:, :, None] * per_bin[:, None, :]).sum(dim=0)  # int64: no integer matmul on CUDA
        counts["valid_pairs_distance"] = valid_pairs_by_distance(
            valid, torch.as_tensor(distance_bins(t, positions), device=dev), positions)
    else:  # windows with both positions valid, per position pair: a product of 0/1 values, exact in float64
        v = valid.to(torch.float64)
        counts["pair_count_valid"] = (v.T @ v).round().to(torch.int64)
    return BatchTensors(info, valid, not bool(valid.all()), binned, (rb, ri, rj), repeat_same, first, targets, categories,
                        counts, sent)


def _window_counts(valid: torch.Tensor) -> dict[str, torch.Tensor]:
    """The counts of windows, valid tokens and valid pairs ``i < j`` of ``valid`` ``[B, T]``."""
    n = valid.sum(dim=-1)
    return {"windows": torch.tensor(valid.shape[0], dtype=torch.int64, device=valid.device), "tokens": n.sum(),
            "valid_pairs": (n * (n - 1) // 2).sum()}


def _first_positions(key: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``[B, T]``: the first position of each position's ``key`` in its window (keys: token ids, padding
    with keys of its own; padding points at ``T − 1``): each window's keys sorted, the smallest position
    of each run of equal keys handed back to the run's members."""
    b, t = key.shape
    ordered, order = key.sort(dim=-1)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    run = starts.cumsum(dim=-1) - 1  # [B, T] the run of each sorted entry
    least = torch.full_like(key, t).scatter_reduce_(1, run, order, reduce="amin")  # [B, runs] padded with T
    out = torch.empty_like(key).scatter_(1, order, least.gather(1, run))
    return torch.where(valid, out, torch.full_like(out, t - 1))


def _repeat_pairs(key: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(window, i, j)`` int64 of every pair ``i < j`` with equal ``key`` ``[B, T]`` (padding has keys of its
    own), in that order, found ``rows`` query rows at a time."""
    b, t = key.shape
    found = []
    for start in range(0, t, rows):
        stop = min(start + rows, t)
        same = key[:, start:stop, None] == key[:, None, :]
        same.triu_(start + 1)  # j > i
        wb, wi, wj = same.nonzero(as_tuple=True)
        found.append((wb, wi + start, wj))
    if len(found) == 1:
        return found[0]
    rb, ri, rj = (torch.cat(x) for x in zip(*found))
    order = torch.argsort(rb * (t * t) + ri * t + rj)  # window-major, as one block finds them
    return rb[order], ri[order], rj[order]


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
