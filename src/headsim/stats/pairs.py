"""Per-batch statistics of high-similarity pairs (Figs 6, 7, 8, 10, 11, 12, 13).

Everything here reduces one layer's batch ``[B, H, T, T]`` to per-head totals in a fixed number
of tensor passes, vectorised over windows and heads. A pair is an unordered pair ``i < j`` of valid
positions; the high-similarity relation is read from the upper triangle of the mask only (the mask
of ``Z·Zᵀ`` is symmetric up to floating-point rounding; reading one triangle makes every count
well defined), and the mirrored pair ``(j, i)`` is implied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .batch import BatchTensors

ANCHOR_KINDS = ("cls", "sep", "punct", "other")
_KEY_SHIFT = 1 << 32  # anchor ranking key: count · 2³² − token id (more pairs first, then smaller id)


@dataclass(frozen=True)
class SimBins:
    """Histogram bins of normalised similarity values.

    Bin of a value ``v`` (float32 arithmetic, as the code runs it)::

        clamp(floor(v · scale + offset), 0, bins − 1),   scale = bins / (hi − lo), offset = −lo · scale

    so bin ``k`` holds ``[lo + k·w, lo + (k+1)·w)`` with ``w = (hi − lo) / bins`` up to float32
    rounding at the edges; values below ``lo`` / at or above ``hi`` land in the end bins, NaN in
    bin 0.
    """

    bins: int
    lo: float
    hi: float

    @property
    def scale(self) -> np.float32:
        return np.float32(self.bins / (self.hi - self.lo))

    @property
    def offset(self) -> np.float32:
        return np.float32(-self.lo * self.bins / (self.hi - self.lo))

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(self.lo, self.hi, self.bins + 1)

    @property
    def centres(self) -> np.ndarray:
        e = self.edges
        return (e[:-1] + e[1:]) / 2

    def index(self, values: torch.Tensor) -> torch.Tensor:
        """int32 bin index of float32 ``values``.

        Clamping before the conversion makes truncation equal ``floor`` and keeps every value in
        range, so the definition above costs five elementwise passes.
        """
        t = values * float(self.scale)  # both constants are float32 values: the arithmetic stays float32
        t.add_(float(self.offset)).clamp_(0, self.bins - 1)
        return t.nan_to_num_(nan=0.0).to(torch.int32)

    @property
    def zero_bin(self) -> int:
        """Bin of the value 0.0."""
        return int(self.index_numpy(np.zeros(1))[0])

    def index_numpy(self, values: np.ndarray) -> np.ndarray:
        """The same bin index for numpy values."""
        v = np.asarray(values, dtype=np.float32)
        t = v * self.scale + self.offset
        t = np.nan_to_num(t.astype(np.float32), nan=0.0)
        return np.clip(np.floor(t), 0, self.bins - 1).astype(np.int64)


def fraction_bin(numerator: torch.Tensor, denominator: torch.Tensor, bins: int) -> torch.Tensor:
    """Bin of ``numerator / denominator`` in ``bins`` equal bins over [0, 1] (1.0 → last bin), exact."""
    return torch.clamp((numerator * bins) // denominator.clamp_min(1), max=bins - 1)


@dataclass
class Geometry:
    """Position constants of one ``seq_len`` on one device."""

    upper: torch.Tensor  # [T, T] bool, True above the diagonal
    upper_float: torch.Tensor  # the same as float32 0/1
    upper_flat: torch.Tensor  # [T(T-1)/2] int64 flat indices of i < j

    @classmethod
    def build(cls, t: int, device: torch.device) -> Geometry:
        up = torch.ones(t, t, dtype=torch.bool, device=device).triu(1)
        iu = torch.triu_indices(t, t, 1, device=device)
        return cls(up, up.to(torch.float32), (iu[0] * t + iu[1]).contiguous())


def _count_into(acc: torch.Tensor, index: torch.Tensor, weight: torch.Tensor | None = None) -> None:
    """``acc.view(-1)[index] += weight`` (1 where ``weight`` is None), duplicates accumulating."""
    index = index.reshape(-1)
    if weight is None:
        weight = torch.ones(1, dtype=acc.dtype, device=acc.device).expand(index.numel())
    acc.view(-1).index_add_(0, index, weight.reshape(-1).to(acc.dtype))


def value_hist(bins: torch.Tensor, bt: BatchTensors, sim_bins: SimBins) -> torch.Tensor:
    """``[H, bins]`` int64 histogram of the valid pairs from the bin index of every pair ``i < j``
    ``[B, H, T(T-1)/2]``, where pairs that are not valid hold the normalised value exactly 0.0."""
    b, h, n = bins.shape
    nb = sim_bins.bins
    binned = bins.add(torch.arange(0, h * nb, nb, device=bins.device, dtype=torch.int32)[None, :, None])
    hist = torch.bincount(binned.view(-1), minlength=h * nb).view(h, nb)
    hist[:, sim_bins.zero_bin] -= b * n - bt.counts["valid_pairs"]  # take the invalid pairs back out of 0's bin
    return hist


def high_upper(normalized: torch.Tensor, threshold: float, geo: Geometry) -> torch.Tensor:
    """Float32 0/1 ``[B, H, T, T]``: ``normalized > threshold`` above the diagonal (pairs ``i < j``).

    Written straight into a float tensor (a bool mask converted to float costs several passes).
    """
    u = torch.gt(normalized, threshold, out=torch.empty_like(normalized, dtype=torch.float32))
    return u.mul_(geo.upper_float)


@dataclass
class PairReductions:
    """What the pair statistics need from one layer's step of ``B`` windows (all float32 counts).

    Produced by :func:`pair_reductions` (eager) or :func:`headsim.stats.fused.similarity_step`
    (one compiled pass from the head outputs); :func:`add_pairs` turns it into the accumulators.
    """

    sim_sum: torch.Tensor  # [H, T, T] normalised similarity summed over the windows
    hist: torch.Tensor  # [H, bins] int64 values of the valid pairs i < j by bin
    location: torch.Tensor  # [H, T, T] high-similarity pairs i < j summed over the windows
    rows: torch.Tensor  # [B, H, T] partners j > p
    cols: torch.Tensor  # [B, H, T] partners i < p
    inner: torch.Tensor  # [B, H, T] partners j > p with the same token id
    same_sentence: torch.Tensor  # [H] pairs inside one sentence
    repeat: torch.Tensor  # [H] pairs with equal token ids
    repeat_same_sentence: torch.Tensor  # [H] both


def pair_reductions(normalized: torch.Tensor, high: torch.Tensor | float, bt: BatchTensors, geo: Geometry,
                    sim_bins: SimBins, *, masked: bool = False) -> PairReductions:
    """:class:`PairReductions` of one layer's step, eagerly (see :func:`pair_batch` for the arguments)."""
    b, h, t, _ = normalized.shape
    dev = normalized.device
    if not masked:
        keep = bt.pair_valid & ~torch.eye(t, dtype=torch.bool, device=dev)
        normalized = torch.where(keep, normalized.float(), torch.zeros((), device=dev))
        if not isinstance(high, float):
            high = high.bool() & keep
    sim_sum = normalized.sum(dim=0)
    upper = torch.gather(normalized.reshape(b * h, t * t), 1, geo.upper_flat[None].expand(b * h, -1))
    hist = value_hist(sim_bins.index(upper).view(b, h, -1), bt, sim_bins)
    del upper
    # high-similarity pairs i < j between valid positions, as float32 0/1 (exact counts < 2^24)
    if isinstance(high, float):
        u = high_upper(normalized, high, geo)
    else:
        u = torch.zeros_like(normalized).masked_fill_(high & geo.upper, 1.0)
    location = u.sum(dim=0)
    rows = u.sum(dim=-1)
    cols = u.sum(dim=-2)
    same = torch.bmm(bt.same_sentence, u.view(b, h, t * t).transpose(1, 2)).sum(dim=(0, 1))  # [H]
    # pairs with equal token ids, read at their few positions
    rb, ri, rj = bt.repeat_index
    rep = u[rb, :, ri, rj]  # [N, H]
    del u
    inner = torch.zeros(b, t, h, dtype=rep.dtype, device=dev).index_put_((rb, ri), rep, accumulate=True)
    return PairReductions(sim_sum, hist, location, rows, cols, inner.transpose(1, 2), same, rep.sum(dim=0),
                          (rep * bt.repeat_same_sentence[:, None]).sum(dim=0))


def pair_batch(normalized: torch.Tensor, high: torch.Tensor | float, bt: BatchTensors, geo: Geometry,
               sim_bins: SimBins, into: dict[str, torch.Tensor], *, masked: bool = False) -> None:
    """Add one layer's batch to the per-layer accumulator slices ``into`` (in place).

    Args:
        normalized: ``[B, H, T, T]`` float32 normalised similarity (0 on the diagonal and padding).
        high: the threshold (a float: the mask is ``normalized > high``, computed here in one pass),
            or a ``[B, H, T, T]`` bool high-similarity mask (only ``i < j`` between valid positions is read).
        bt: the batch's :class:`~headsim.stats.batch.BatchTensors`.
        into: one layer's accumulators: ``location_upper [H, T, T]``, ``n_repeat``,
            ``n_same_sentence``, ``n_repeat_same_sentence`` ``[H]``, ``sim_sum [H, T, T]`` (float64),
            ``sim_value_hist [H, bins]``, ``anchor_fraction_hist [H, fraction_bins]``,
            ``anchor_fraction_sum [H]`` (float64), ``anchor_windows [H]``, ``anchor_kind [H, 4]``,
            ``anchor_distinct_hist [H + 1]``; counts int64.
        masked: ``True`` when ``normalized`` is already zero off the valid off-diagonal block (as
            :func:`headsim.context_similarity.normalized_similarity` returns it); otherwise it and a
            mask ``high`` are masked here first.
    """
    add_pairs(pair_reductions(normalized, high, bt, geo, sim_bins, masked=masked), bt, into)


@dataclass
class AnchorCounts:
    """What one layer's step adds to the anchor statistics (Fig 11), per head: windows by anchor fraction bin
    ``fraction_hist`` ``[H, bins]``, the fractions' sum ``fraction_sum`` ``[H]`` float64, windows with a
    high-similarity pair ``windows`` ``[H]``, those windows by anchor kind ``kind`` ``[H, 4]``, and windows by
    the number of distinct anchor ids across the heads ``distinct`` ``[H + 1]`` (counts int64)."""

    fraction_hist: torch.Tensor
    fraction_sum: torch.Tensor
    windows: torch.Tensor
    kind: torch.Tensor
    distinct: torch.Tensor

    @classmethod
    def zeros(cls, heads: int, fraction_bins: int, device: torch.device | str = "cpu") -> AnchorCounts:
        """Counts of no window, to add a step's to."""
        counts = {"dtype": torch.int64, "device": device}
        return cls(torch.zeros(heads, fraction_bins, **counts), torch.zeros(heads, dtype=torch.float64, device=device),
                   torch.zeros(heads, **counts), torch.zeros(heads, len(ANCHOR_KINDS), **counts),
                   torch.zeros(heads + 1, **counts))


def anchor_counts(rows: torch.Tensor, cols: torch.Tensor, inner: torch.Tensor, bt: BatchTensors,
                  fraction_bins: int) -> AnchorCounts:
    """:class:`AnchorCounts` of a step from its partner counts ``rows``, ``cols`` and ``inner`` ``[B, H, T]``
    (:class:`PairReductions`), by torch operations (the CPU kernel:
    :func:`headsim.stats.cpu_kernels.anchor_counts`).

    A window's anchor for a head is the token id whose positions take part in most of its high-similarity
    pairs (ties to the smaller id): pairs containing class ``c`` = Σ_{p∈c} degree(p) − pairs inside ``c``;
    its fraction is that count over the window's pairs, for windows with at least one pair."""
    b, h, t = rows.shape
    dev = rows.device
    # [B, H, T] (column c = first position of an id); integer-valued float32 sums: exact in any order
    degree = (rows + cols - inner) * bt.valid[:, None, :]
    per_class = torch.zeros_like(degree).scatter_add_(-1, bt.first[:, None, :].expand(b, h, t), degree)
    ids = bt.info.input_ids.long()[:, None, :]
    best = (per_class.to(torch.int64) * _KEY_SHIFT - ids).argmax(dim=-1, keepdim=True)  # [B, H, 1]
    count = per_class.gather(-1, best)[..., 0].to(torch.int64)
    anchor = ids.expand(b, h, t).gather(-1, best)[..., 0]
    n_w = rows.sum(dim=-1).to(torch.int64)  # [B, H] pairs per window and head
    has = n_w > 0
    head = torch.arange(h, device=dev)[None, :]
    out = AnchorCounts.zeros(h, fraction_bins, dev)
    _count_into(out.fraction_hist, head * fraction_bins + fraction_bin(count, n_w, fraction_bins), has)
    share = count.to(torch.float64) / n_w.clamp_min(1).to(torch.float64)
    out.fraction_sum += torch.where(has, share, torch.zeros_like(share)).sum(dim=0)
    out.windows += has.sum(dim=0)
    _count_into(out.kind, head * len(ANCHOR_KINDS) + bt.categories[:, None, :].expand(b, h, t).gather(-1, best)[..., 0], has)
    # Fig 11b: distinct anchor ids over the heads that have one
    ranked = torch.where(has, anchor, torch.full_like(anchor, -1)).sort(dim=-1).values
    fresh = (ranked[:, 1:] != ranked[:, :-1]) & (ranked[:, 1:] >= 0)
    _count_into(out.distinct, fresh.sum(dim=-1) + (ranked[:, 0] >= 0))
    return out


def add_pairs(red: PairReductions, bt: BatchTensors, into: dict[str, torch.Tensor],
              anchors: AnchorCounts | None = None) -> None:
    """Add one step's :class:`PairReductions` to the per-layer accumulator slices ``into``; its
    :class:`AnchorCounts` where the caller has them (else computed here, :func:`anchor_counts`)."""
    # Fig 12 and the value distribution (§3: most values < 0.1, few in 0.1–0.6)
    into["sim_sum"] += red.sim_sum
    into["sim_value_hist"] += red.hist
    into["location_upper"] += red.location.to(torch.int64)  # Fig 10
    into["n_same_sentence"] += red.same_sentence.to(torch.int64)  # Figs 6b, 8
    into["n_repeat"] += red.repeat.to(torch.int64)  # Fig 6a
    into["n_repeat_same_sentence"] += red.repeat_same_sentence.to(torch.int64)
    if anchors is None:  # Fig 11
        anchors = anchor_counts(red.rows, red.cols, red.inner, bt, into["anchor_fraction_hist"].shape[-1])
    into["anchor_fraction_hist"] += anchors.fraction_hist
    into["anchor_fraction_sum"] += anchors.fraction_sum
    into["anchor_windows"] += anchors.windows
    into["anchor_kind"] += anchors.kind
    into["anchor_distinct_hist"] += anchors.distinct
