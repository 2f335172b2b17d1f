"""Two runs' statistics of the same windows, compared on what float rounding can change and nothing more.

Two runs of the same windows (Triton kernels and eager, GPU and CPU, headsim's attention and the
model's hooks) see head outputs ``Z`` that differ by float rounding, and evaluate ``Z·Zᵀ / max`` in
different orders. A pair's threshold decision, or its histogram bin, can then differ only where the
exact normalised value of either run's ``Z`` lies within that evaluation's rounding bound of the
threshold (of a bin edge). :func:`undecided` finds those pairs from the head outputs both runs
recorded (:class:`RecordingStats`), in float64 and without headsim's similarity code;
:func:`assert_statistics_agree` lets each statistic differ by at most what those pairs can move and
requires everything else to agree: counts exactly, sums to float32 rounding.

The rounding bound: a float32 evaluation of ``s = Σ_k z_ik·z_jk`` over ``d`` terms (float32 products,
or exact products of bf16/fp16 inputs; any summation order, FMA or not) is within ``γ·A_ij`` of it,
``A_ij = Σ_k |z_ik·z_jk|``, ``γ = d·u / (1 − d·u)``, ``u = 2⁻²⁴``; so the matrix maximum ``p`` is within
``γ·max A``, and ``fl(s'/p')`` within ``(γ·A_ij + |n|·γ·max A) / (p − γ·max A) + u·|n|`` of ``n = s/p``
(first order; the bound used is twice that). Where ``p ≤ γ·max A`` the matrix may or may not be all
zero: all its pairs are undecided.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr

from headsim.stats import CorpusStats

U = 2.0 ** -24  # float32 unit roundoff


class RecordingStats(CorpusStats):
    """:class:`CorpusStats` that also appends, per batch, every layer's head outputs as its statistics
    used them (after a kernel step has written them) to ``log``: one ``{"valid", "z": {layer: Z}}``
    per :meth:`begin_batch`. Share one ``log`` between the statistics a run creates (back-off scratch)."""

    def __init__(self, *args, log: list, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = log

    def begin_batch(self, info):
        super().begin_batch(info)
        self.log.append({"valid": info.valid.detach().cpu(), "z": {}})

    def _keep(self, layer: int, head_outputs: torch.Tensor) -> None:
        self.log[-1]["z"][int(layer)] = head_outputs.detach().cpu().double()  # no device memory

    def update_layer(self, layer, attention, head_outputs, info):
        super().update_layer(layer, attention, head_outputs, info)
        self._keep(layer, head_outputs)

    def update_captured(self, layer, query, key, head_outputs, info):
        super().update_captured(layer, query, key, head_outputs, info)
        self._keep(layer, head_outputs)

    def update_qkv(self, layer, query, key, value, info, scale=None):
        out = super().update_qkv(layer, query, key, value, info, scale)
        self._keep(layer, out)
        return out


def recorded(log: list, n_layers: int) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """``valid`` ``[W, T]`` and per layer ``Z`` ``[W, H, T, d]`` (float64; ``None`` for a layer no batch
    reached yet) of the batches that reached every layer any batch reached, in order (a batch abandoned
    on out-of-memory and retried in halves is left out)."""
    reached = set().union(*(b["z"] for b in log))
    done = [b for b in log if reached and set(b["z"]) == reached]
    assert done, "no batch was recorded"
    return (torch.cat([b["valid"] for b in done]),
            [torch.cat([b["z"][layer] for b in done]) if layer in reached else None for layer in range(n_layers)])


def rounding_interval(z: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[W, H, T, T]`` float64 bounds ``lo ≤ n' ≤ hi`` of any float32 evaluation ``n'`` of the normalised
    similarity of head outputs ``z`` ``[W, H, T, d]`` (valid ``[W, T]``; see the module docstring)."""
    d = z.shape[-1]
    gamma = d * U / (1 - d * U)
    z = torch.where(valid[:, None, :, None], z.double(), 0.0)
    s = z @ z.transpose(-1, -2)
    a = z.abs() @ z.abs().transpose(-1, -2)
    off = ~torch.eye(z.shape[-2], dtype=torch.bool)
    s, a = s * off, a * off
    peak = s.amax(dim=(-1, -2), keepdim=True)
    a_max = a.amax(dim=(-1, -2), keepdim=True)
    margin = peak - gamma * a_max
    n = torch.where(peak > 0, s / torch.where(peak > 0, peak, 1.0), 0.0)
    eps = 2 * (gamma * (a + n.abs() * a_max) / margin.clamp_min(1e-300) + U * n.abs())
    unknown = (margin <= 0) & (a_max > 0)  # the sign of the maximum itself is within rounding
    lo = torch.where(unknown, -torch.inf, n - eps)
    hi = torch.where(unknown, torch.inf, n + eps)
    return lo, hi


@dataclass
class Undecided:
    """What float rounding can change between two runs, per layer ``L``, window ``W`` and head ``H``."""

    pairs: np.ndarray  # [L, W, H, T, T] bool: valid pairs i < j whose threshold decision can differ
    high: np.ndarray  # [L, W, H] int64: valid pairs i < j above the threshold in both runs for certain
    binned: np.ndarray  # [L, H] int64: valid pairs i < j whose value-histogram bin can differ

    @property
    def per_window(self) -> np.ndarray:
        """``[L, W, H]`` undecided pairs."""
        return self.pairs.sum(axis=(-1, -2))


def at_risk(lo: torch.Tensor, hi: torch.Tensor, valid: torch.Tensor, threshold: float, sim_bins: int,
            sim_range: tuple[float, float]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[W, H, T, T]`` bool over the valid pairs ``i < j`` whose float32 value lies in ``[lo, hi]``: the
    threshold decision ``v > threshold`` is open, ``v`` is above it for certain, the histogram bin
    ``floor(v·scale + offset)`` (float32 constants, as :class:`headsim.stats.pairs.SimBins` defines
    them) is open."""
    t = valid.shape[-1]
    upper = torch.ones(t, t, dtype=torch.bool).triu(1) & valid[:, None, :, None] & valid[:, None, None, :]
    # the kernels compare with float32(threshold), eager torch with the threshold: either may decide
    t_low, t_high = sorted((float(threshold), float(np.float32(threshold))))
    lo_r, hi_r = (float(x) for x in sim_range)
    scale = float(np.float32(sim_bins / (hi_r - lo_r)))
    offset = float(np.float32(-lo_r * sim_bins / (hi_r - lo_r)))

    def bin_of(v: torch.Tensor, side: int) -> torch.Tensor:
        """Lowest (``side`` −1) or highest (+1) bin of a float32 value at ``v``: ``v·scale`` rounds by at
        most ``u·|v·scale|``; adding ``offset`` rounds monotonically and never below an integer it
        reaches exactly, but may round up to the next one (fused or not)."""
        x = v * scale
        x = x + side * U * x.abs() + offset
        if side > 0:
            x = x + 2 * U * x.abs()
        return torch.floor(x.clamp(0, sim_bins - 1))

    return (upper & (lo <= t_high) & (hi > t_low), upper & (lo > t_high),
            upper & (bin_of(lo, -1) != bin_of(hi, 1)))


def undecided(log_a: list, log_b: list, n_layers: int, threshold: float, sim_bins: int,
              sim_range: tuple[float, float], z_rtol: float = 1e-4) -> Undecided:
    """The pairs whose decisions (:func:`at_risk`) the two recorded runs (:class:`RecordingStats` logs of
    the same windows) may take differently.

    The runs' head outputs must agree to ``z_rtol`` of each layer's largest (rounding, not a
    different computation: that would make many pairs undecided and prove little)."""
    (valid, za), (valid_b, zb) = recorded(log_a, n_layers), recorded(log_b, n_layers)
    assert torch.equal(valid, valid_b), "the two runs recorded different windows"
    keep = valid[:, None, :, None]
    pairs, high, binned = [], [], []
    for layer, (a, b) in enumerate(zip(za, zb)):
        assert (a is None) == (b is None), f"layer {layer} was added in one run only"
        if a is None:  # no batch reached this layer yet: nothing added, nothing to decide
            w, t = valid.shape
            h = next(z for z in za if z is not None).shape[1]
            pairs.append(np.zeros((w, h, t, t), dtype=bool))
            high.append(np.zeros((w, h), dtype=np.int64))
            binned.append(np.zeros(h, dtype=np.int64))
            continue
        gap, size = ((a - b) * keep).abs().max(), (b * keep).abs().max()
        assert gap <= z_rtol * size, f"layer {layer}: the runs' head outputs differ by {gap:.3g} (largest {size:.3g})"
        (lo_a, hi_a), (lo_b, hi_b) = rounding_interval(a, valid), rounding_interval(b, valid)
        flip, sure, edge = at_risk(torch.minimum(lo_a, lo_b), torch.maximum(hi_a, hi_b), valid, threshold, sim_bins,
                                   sim_range)
        pairs.append(flip.numpy())
        high.append(sure.sum(dim=(-1, -2)).numpy())
        binned.append(edge.sum(dim=(0, 2, 3)).numpy())
    return Undecided(np.stack(pairs), np.stack(high).astype(np.int64), np.stack(binned).astype(np.int64))


def _flip_bounds(und: Undecided) -> dict[str, tuple[str, np.ndarray]]:
    """Per threshold-dependent variable: how it is compared (``"each"``: every element; ``"l1"``: the
    summed absolute difference over its last axis; ``"moved"``: that, with equal totals over it) and the
    largest difference the undecided pairs allow."""
    k = und.per_window  # [L, W, H]
    touched = k > 0
    at = und.pairs.sum(axis=1)  # [L, H, T, T]
    t = at.shape[-1]
    distance = np.zeros(at.shape[:2] + (t,), dtype=np.int64)
    for d in range(1, t):
        distance[..., d] = at.diagonal(offset=d, axis1=2, axis2=3).sum(axis=-1)
    # a window's anchor count and its pair count each move by at most k, so with m certain pairs its
    # anchor fraction c/n moves by at most k/m + (c'/n')·k/m ≤ 2k/m (and by at most 1 when m = 0)
    share = np.where(touched, np.where(und.high > 0, np.minimum(1.0, 2 * k / np.maximum(und.high, 1)), 1.0), 0.0)
    per_head = k.sum(axis=1)
    return {
        "n_pairs": ("each", per_head), "n_repeat": ("each", per_head), "n_same_sentence": ("each", per_head),
        "n_repeat_same_sentence": ("each", per_head),
        "location_counts": ("each", at + at.transpose(0, 1, 3, 2)),
        "distance_hist": ("each", distance),
        "distance_sum": ("each", distance @ np.arange(t)),  # each flipped pair adds or removes its distance
        "anchor_windows": ("each", (touched & (und.high == 0)).sum(axis=1)),  # only there can "has pairs" flip
        "anchor_fraction_sum": ("each", share.sum(axis=1)),
        # a changed decision moves a count from one bin to another (every valid pair and every window
        # has a bin; a window has an anchor fraction and kind only if it has pairs)
        "sim_value_hist": ("moved", 2 * und.binned),
        "anchor_fraction_hist": ("l1", 2 * touched.sum(axis=1)),
        "anchor_kind_counts": ("l1", 2 * touched.sum(axis=1)),
        "anchor_distinct_hist": ("moved", 2 * touched.any(axis=2).sum(axis=1)),
    }


def assert_statistics_agree(fast: xr.Dataset, ref: xr.Dataset, und: Undecided, *, rtol: float, atol: float,
                            max_undecided: float = 1e-3) -> None:
    """``fast`` and ``ref`` (two runs' :meth:`CorpusStats.to_dataset`) agree up to what ``und`` can change:
    threshold-dependent statistics within :func:`_flip_bounds` (plus ``rtol``/``atol`` for the anchor
    fraction sum), every other count exactly, every other sum to ``rtol``/``atol``.
    At most ``max_undecided`` of ``ref``'s high pairs may be undecided, so that the bounds stay tight."""
    n_high = int(ref["n_pairs"].sum())
    assert und.pairs.sum() <= max_undecided * max(n_high, 1), (int(und.pairs.sum()), n_high)
    bounds = _flip_bounds(und)
    assert set(bounds) <= set(ref.data_vars) and set(fast.data_vars) == set(ref.data_vars)
    for name in ref.data_vars:
        x, y = fast[name].values, ref[name].values
        if name in bounds:
            how, bound = bounds[name]
            diff = np.abs(x.astype(np.float64) - y)
            if how == "moved":
                np.testing.assert_array_equal(x.sum(axis=-1), y.sum(axis=-1), err_msg=f"{name} totals")
            if how != "each":
                diff = diff.sum(axis=-1)
            if np.issubdtype(y.dtype, np.floating):
                bound = bound + atol + rtol * np.abs(y)
            bad = diff > bound
            assert not bad.any(), (f"{name}: {int(bad.sum())} elements differ by more than the undecided pairs allow, "
                                   f"first at {np.argwhere(bad)[0].tolist()}: {diff[bad][0]} > {bound[bad][0]}")
        elif np.issubdtype(y.dtype, np.integer):
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=name)
