"""Corpus statistics accumulators: exact, mergeable, checkpointable (paper Figs 2, 3, 6–8, 10–13).

:class:`CorpusStats` keeps running sums (float64) and counts (int64) on the compute device. The
driver calls :meth:`~CorpusStats.begin_batch` once per batch of windows and
:meth:`~CorpusStats.update_layer` once per layer; each update reduces the batch ``[B, H, T, T]``
to per-head totals in a fixed number of tensor passes (no Python loop over windows or heads).
Counts add and sums add, so accumulators of disjoint parts of a corpus :meth:`~CorpusStats.merge`
into exactly the accumulator of the whole, and :meth:`~CorpusStats.state_dict` /
:meth:`~CorpusStats.from_state_dict` checkpoint and resume bit for bit.
:meth:`~CorpusStats.to_dataset` labels everything as an :class:`xarray.Dataset`
(layers and heads 1-based, as in the paper); ``docs/statistics.md`` defines every variable.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import torch
import xarray as xr

from ..errors import HeadsimError, require
from ..model.plain import attention_probs
from ..context_similarity import check_threshold, normalized_similarity
from . import fused
from .attention import TARGETS, add_attention, add_reduced_attention, attention_batch, rank_columns, settle_columns
from .batch import BatchInfo, BatchTensors, batch_tensors, check_info, dense_repeats
from .pairs import ANCHOR_KINDS, Geometry, PairReductions, SimBins, add_pairs, pair_batch, value_hist

SCHEMA = "headsim.stats/1"
CONFIG_KEYS = ("n_layers", "n_heads", "seq_len", "threshold", "top_k_columns", "sim_bins", "sim_range",
               "fraction_bins")

# name → (dims, float?) of every stored accumulator; L layers, H heads, T positions
_SPEC: dict[str, tuple[tuple[str, ...], bool]] = {
    "windows": ((), False),
    "tokens": ((), False),
    "valid_pairs": ((), False),
    "valid_pairs_same_sentence": ((), False),
    "pair_count_valid": (("T", "T"), False),
    "layer_windows": (("L",), False),
    "attn_windows": (("L",), False),
    "attn_queries_layer": (("L",), False),
    "attn_pair_count": (("L", "T", "T"), False),
    "attn_sum": (("L", "H", "T", "T"), True),
    "attn_sum_top_zeroed": (("L", "H", "T", "T"), True),
    "attn_focus": (("L", "H", "TARGET"), True),
    "location_upper": (("L", "H", "T", "T"), False),
    "n_repeat": (("L", "H"), False),
    "n_same_sentence": (("L", "H"), False),
    "n_repeat_same_sentence": (("L", "H"), False),
    "sim_sum": (("L", "H", "T", "T"), True),
    "sim_value_hist": (("L", "H", "SIMBIN"), False),
    "anchor_fraction_hist": (("L", "H", "FRACBIN"), False),
    "anchor_fraction_sum": (("L", "H"), True),
    "anchor_windows": (("L", "H"), False),
    "anchor_kind": (("L", "H", "KIND"), False),
    "anchor_distinct_hist": (("L", "H1"), False),
}
_CPU_STEP_BYTES = 8 << 20
_WINDOW_LEVEL = ("windows", "tokens", "valid_pairs", "valid_pairs_same_sentence", "pair_count_valid")
_PAIR_KEYS = ("location_upper", "n_repeat", "n_same_sentence", "n_repeat_same_sentence", "sim_sum", "sim_value_hist",
              "anchor_fraction_hist", "anchor_fraction_sum", "anchor_windows", "anchor_kind", "anchor_distinct_hist")
_ATTENTION_KEYS = ("attn_sum", "attn_sum_top_zeroed", "attn_focus")

# Dataset variable → (figure, description); also written as variable attributes
VARIABLES: dict[str, tuple[str, str]] = {
    "attn_sum": ("2, 3 left", "sum over windows of attention probabilities at valid (query, key)"),
    "attn_sum_top_zeroed": ("3 middle", "attn_sum with each window's and head's top_k_columns largest key columns zeroed"),
    "attn_sum_top_diag_zeroed": ("3 right", "attn_sum_top_zeroed with |query - key| <= 1 zeroed"),
    "pair_count_valid": ("2, 3", "windows in which both positions are valid (denominator for averages)"),
    "attn_pair_count": ("2, 3", "windows whose attention entered the layer with both positions valid"),
    "attn_windows": ("2, 3", "windows whose attention entered the layer"),
    "attn_focus": ("4, §2", "sum over valid query rows of the attention mass on [CLS], [SEP], punctuation, key i-1, key i+1"),
    "attn_queries": ("4, §2", "valid query rows summed into attn_focus (largest over layers)"),
    "attn_queries_layer": ("4, §2", "valid query rows summed into attn_focus, per layer"),
    "n_pairs": ("6, 7, 8", "high-similarity pairs i < j"),
    "n_repeat": ("6a", "high-similarity pairs with equal token ids"),
    "n_same_sentence": ("6b, 8", "high-similarity pairs inside one sentence (sentence ids >= 0 and equal)"),
    "n_repeat_same_sentence": ("6b", "high-similarity pairs with equal token ids inside one sentence"),
    "distance_hist": ("7, 13", "high-similarity pairs by distance j - i"),
    "valid_pairs": ("8 chance", "valid pairs i < j over all windows"),
    "valid_pairs_same_sentence": ("8 chance", "valid pairs i < j inside one sentence over all windows"),
    "location_counts": ("10", "windows with a high-similarity pair at (query, key), symmetric"),
    "sim_sum": ("12", "sum over windows of normalised similarity matrices"),
    "sim_value_hist": ("§3", "normalised similarity values of valid pairs i < j by bin"),
    "anchor_fraction_hist": ("11a", "windows by the fraction of high-similarity pairs containing the anchor token"),
    "anchor_fraction_sum": ("11a", "sum over windows with pairs of the anchor fraction"),
    "anchor_windows": ("11a", "windows with at least one high-similarity pair"),
    "anchor_kind_counts": ("11a", "windows whose anchor token is [CLS], [SEP], punctuation or other"),
    "anchor_distinct_hist": ("11b", "windows by the number of distinct anchor token ids across the layer's heads"),
    "layer_windows": ("6-13", "windows whose head outputs entered the layer"),
    "windows": ("all", "windows seen (begin_batch)"),
    "tokens": ("all", "valid tokens seen"),
}


def _dims(spec: tuple[str, ...], sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(sizes[d] for d in spec)


class CorpusStats:
    """Running corpus statistics of every head of an encoder.

    Args:
        n_layers, n_heads, seq_len: model and window geometry.
        threshold: high-similarity cut on the normalised similarity matrix, in (0, 1] (paper: 0.3).
        top_k_columns: key columns zeroed per window and head in ``attn_sum_top_zeroed`` (Fig 3).
        sim_bins, sim_range: histogram of normalised similarity values (``sim_value_hist``).
        fraction_bins: histogram of anchor fractions over [0, 1] (Fig 11a).
        device: where accumulators live and batch math runs.
        chunk_windows: windows per vectorised step inside a batch (results do not depend on it);
            ``0``: the whole batch. ``None`` (automatic): on CPU equal steps with one
            ``[windows, H, T, T]`` float32 tensor of at most about 8 MiB, so temporaries stay in cache
            and reuse allocator memory instead of page-faulting fresh pages; on GPU the whole batch.
        fused: run each step's ``T×T`` work through ``torch.compile`` (:mod:`headsim.stats.fused`):
            the same counts, sums to float rounding; worth it for long runs (the first batch pays the
            compilation). Falls back to the eager path, with a warning, where compiling fails.
        kernels: run each step through headsim's Triton kernels (:mod:`headsim.stats.triton_kernels`:
            no ``T×T`` tensor in memory; counts equal the eager path up to threshold flips from float
            summation order). ``None`` (default): on CUDA devices where Triton is installed. ``True``
            elsewhere needs Triton's interpreter (``TRITON_INTERPRET=1``, for tests). Falls back to the
            eager path, with a warning, where a kernel fails to compile or run.
    """

    def __init__(self, n_layers: int, n_heads: int, seq_len: int, *, threshold: float = 0.3,
                 top_k_columns: int = 3, sim_bins: int = 120, sim_range=(-0.2, 1.0), fraction_bins: int = 20,
                 device="cpu", chunk_windows: int | None = None, fused: bool = False,
                 kernels: bool | None = None) -> None:
        for name, value, low in (("n_layers", n_layers, 1), ("n_heads", n_heads, 1), ("seq_len", seq_len, 2),
                                 ("top_k_columns", top_k_columns, 0), ("sim_bins", sim_bins, 1),
                                 ("fraction_bins", fraction_bins, 1)):
            require(isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) >= low,
                    f"{name} {value!r} must be an integer >= {low}", f"pass an integer {name} of at least {low}")
        lo, hi = (float(x) for x in sim_range)
        require(np.isfinite(lo) and np.isfinite(hi) and lo < hi, f"sim_range {tuple(sim_range)!r} is not an interval",
                "pass (low, high) with low < high, e.g. (-0.2, 1.0)")
        self.n_layers, self.n_heads, self.seq_len = int(n_layers), int(n_heads), int(seq_len)
        self.threshold = check_threshold(threshold)
        self.top_k_columns, self.fraction_bins = int(top_k_columns), int(fraction_bins)
        self.bins = SimBins(int(sim_bins), lo, hi)
        self.device = torch.device(device)
        self._sizes = {"L": self.n_layers, "H": self.n_heads, "T": self.seq_len, "TARGET": len(TARGETS),
                       "SIMBIN": self.bins.bins, "FRACBIN": self.fraction_bins, "KIND": len(ANCHOR_KINDS),
                       "H1": self.n_heads + 1}
        self.acc: dict[str, torch.Tensor] = {
            name: torch.zeros(_dims(dims, self._sizes), dtype=torch.float64 if is_float else torch.int64,
                              device=self.device)
            for name, (dims, is_float) in _SPEC.items()
        }
        self._geo = Geometry.build(self.seq_len, self.device)
        require(chunk_windows is None or (isinstance(chunk_windows, (int, np.integer)) and chunk_windows >= 0),
                f"chunk_windows {chunk_windows!r} must be None or a non-negative integer",
                "pass None (automatic), 0 (whole batches) or a number of windows")
        self.chunk_windows = None if chunk_windows is None else int(chunk_windows)
        self.fused = bool(fused)
        self.kernels = self._kernels_wanted(kernels)
        self._info: BatchInfo | None = None
        self._chunks: list[tuple[slice, BatchTensors]] = []
        self._done: set[int] = set()  # layers of the current batch already added
        self._pending: tuple | None = None  # a kernel step's attention, to finish (_settle)
        #: every switch to another statistics path during the run, with its reason (run.json records them)
        self.fallbacks: list[str] = []

    def _kernels_wanted(self, kernels: bool | None) -> bool:
        if kernels is False or (kernels is None and self.device.type != "cuda"):
            return False
        from . import triton_kernels

        ok = triton_kernels.available(self.device)
        require(ok or kernels is None, f"kernels=True but Triton cannot run on {self.device}",
                "install Triton and use a CUDA device (or TRITON_INTERPRET=1 on the CPU), or pass kernels=None")
        return ok

    # ------------------------------------------------------------------ configuration
    @property
    def config(self) -> dict:
        return {"n_layers": self.n_layers, "n_heads": self.n_heads, "seq_len": self.seq_len,
                "threshold": self.threshold, "top_k_columns": self.top_k_columns, "sim_bins": self.bins.bins,
                "sim_range": (self.bins.lo, self.bins.hi), "fraction_bins": self.fraction_bins}

    def _windows_before_batch(self) -> int:
        return self.windows - (self._info.n_windows if self._info is not None else 0)

    @property
    def backend(self) -> str:
        """The statistics path in use now: ``"triton"``, ``"compiled"`` or ``"eager"``."""
        return "triton" if self.kernels else "compiled" if self.fused else "eager"

    @property
    def windows(self) -> int:
        return int(self.acc["windows"])

    def __repr__(self) -> str:
        return (f"CorpusStats(layers={self.n_layers}, heads={self.n_heads}, seq_len={self.seq_len}, "
                f"threshold={self.threshold}, windows={self.windows}, device={self.device})")

    # ------------------------------------------------------------------ updates
    def begin_batch(self, info: BatchInfo) -> None:
        """Start a batch: derive its shared tensors and add its window-level counts.

        Call once per batch, before the batch's :meth:`update_layer` calls (one per layer, any
        order); after the last layer the batch's tensors are released.
        """
        check_info(info, self.seq_len, self.device)
        self._settle()
        b = info.n_windows
        step = self._step(b)
        self._info, self._chunks, self._done = None, [], set()
        for start in range(0, b, max(step, 1)):
            index = slice(start, min(start + step, b))
            bt = batch_tensors(info.select(index))
            for name in _WINDOW_LEVEL:
                self.acc[name] += bt.counts[name]
            self._chunks.append((index, bt))
        self._info = info

    def _step(self, b: int) -> int:
        """Windows per vectorised step for a batch of ``b`` windows."""
        if self.chunk_windows is not None:
            return b if self.chunk_windows == 0 else self.chunk_windows
        if self.device.type != "cpu":
            return b
        per_window = self.n_heads * self.seq_len * self.seq_len * 4
        steps = max(1, -(-b * per_window // _CPU_STEP_BYTES))
        return max(1, -(-b // steps))  # equal steps of about 8 MiB per [windows, H, T, T] tensor

    def _current(self, info: BatchInfo) -> list[tuple[slice, BatchTensors]]:
        require(self._info is not None and self._info is info,
                "update_layer got a batch that begin_batch has not started (or whose layers are all added)",
                "call begin_batch(info) once per batch and pass the same BatchInfo to update_layer")
        return self._chunks

    def _finish_layer(self, layer: int) -> None:
        """Once every layer of the batch is in, drop the batch's tensors (nothing T×T outlives a batch)."""
        self._done.add(layer)
        if len(self._done) == self.n_layers:
            self._settle()
            self._info, self._chunks, self._done = None, [], set()

    def _check_layer(self, layer: int) -> int:
        require(isinstance(layer, (int, np.integer)) and 0 <= int(layer) < self.n_layers,
                f"layer {layer!r} is out of range", f"pass a 0-based layer index in 0..{self.n_layers - 1}")
        return int(layer)

    def _check_shape(self, name: str, tensor: torch.Tensor, shape: tuple, last: str = "") -> None:
        got = tuple(tensor.shape)
        ok = len(got) == len(shape) and all(s is None or g == s for g, s in zip(got, shape))
        want = "[" + ", ".join("d" if s is None else str(s) for s in shape) + "]"
        require(ok, f"{name} has shape {got}, expected {want}", f"pass {name} shaped [batch, heads, seq, {last}]")
        require(tensor.device.type == self.device.type, f"{name} is on {tensor.device}, the accumulator on {self.device}",
                "move it to the accumulator's device")

    def _slices(self, layer: int, keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """Views of one layer of the named accumulators (updated in place)."""
        return {key: self.acc[key][layer] for key in keys}

    def update_layer(self, layer: int, attention: torch.Tensor | None, head_outputs: torch.Tensor,
                     info: BatchInfo) -> None:
        """Add one layer of the current batch.

        Args:
            layer: 0-based layer index.
            attention: ``[B, H, T, T]`` softmax probabilities, or ``None`` to skip the attention
                statistics for this call.
            head_outputs: ``[B, H, T, d]`` head output vectors (any float dtype; similarity is
                computed in float32 by :func:`headsim.context_similarity.normalized_similarity`).
            info: the batch passed to :meth:`begin_batch`.
        """
        self._update(layer, head_outputs, info, attention=attention)

    def update_captured(self, layer: int, query: torch.Tensor, key: torch.Tensor, head_outputs: torch.Tensor,
                        info: BatchInfo) -> None:
        """Add one layer from the captured queries and keys ``[B, H, T, d]`` and head outputs.

        The attention probabilities are computed here one step of windows at a time
        (:func:`headsim.model.plain.attention_probs`), so the batch's ``[B, H, T, T]`` attention never
        exists whole; the numbers equal :meth:`update_layer` with those probabilities.
        """
        self._check_shape("query", query, (info.n_windows, self.n_heads, self.seq_len, None), "d_head")
        self._check_shape("key", key, tuple(query.shape), "d_head")
        self._update(layer, head_outputs, info, qk=(query, key))

    def update_qkv(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, info: BatchInfo,
                   scale: float | None = None) -> torch.Tensor:
        """Add one layer from its queries, keys and values ``[B, H, T, d]``; returns the head outputs.

        The attention probabilities computed for the statistics also give the head outputs
        (``probs · V``, float32, returned in ``value``'s dtype), so a driver that lets headsim compute
        the model's attention (:func:`headsim.model.tap.Tap.run_computing`) pays for attention once.
        """
        b, h, t = info.n_windows, self.n_heads, self.seq_len
        self._check_shape("query", query, (b, h, t, None), "d_head")
        self._check_shape("key", key, tuple(query.shape), "d_head")
        self._check_shape("value", value, (b, h, t, None), "d_head")
        # [B, T, H, d] memory seen as [B, H, T, d]: the layout the model continues with, so handing the
        # outputs back costs no copy
        out = torch.empty(b, t, h, value.shape[-1], dtype=value.dtype, device=value.device).transpose(1, 2)
        self._update(layer, out, info, qk=(query, key), value=value, scale=scale)
        return out

    def _update(self, layer: int, head_outputs: torch.Tensor, info: BatchInfo, *,
                attention: torch.Tensor | None = None, qk: tuple[torch.Tensor, torch.Tensor] | None = None,
                value: torch.Tensor | None = None, scale: float | None = None) -> None:
        """Add one layer step by step. With ``value`` the head outputs are computed here from the
        probabilities and written into ``head_outputs`` (an empty tensor) before they are used."""
        layer = self._check_layer(layer)
        chunks = self._current(info)
        b, h, t = info.n_windows, self.n_heads, self.seq_len
        self._check_shape("head_outputs", head_outputs, (b, h, t, None), "d_head")
        if attention is not None:
            self._check_shape("attention", attention, (b, h, t, t), "seq")
        pairs, attn = self._slices(layer, _PAIR_KEYS), self._slices(layer, _ATTENTION_KEYS)
        for index, bt in chunks:
            if self.kernels and self._kernel_step(index, bt, head_outputs, qk, attention, value, scale, pairs, attn):
                continue
            if self.fused and value is None and self._fused_step(index, bt, head_outputs, qk, attention, pairs, attn):
                continue
            if qk is not None:
                probs = attention_probs(qk[0][index], qk[1][index], bt.valid, bt.padded, scale)
                if value is not None:  # the model's head outputs, before the statistics overwrite probs
                    head_outputs[index] = torch.matmul(probs, value[index].float())
                attention_batch(probs, bt, self.top_k_columns, attn, owned=True)
                del probs
            elif attention is not None:
                attention_batch(attention[index], bt, self.top_k_columns, attn)
            normalized = normalized_similarity(head_outputs[index].float(), bt.valid, bt.padded)
            pair_batch(normalized, self.threshold, bt, self._geo, self.bins, pairs, masked=True)
            del normalized
        self.acc["layer_windows"][layer] += b
        if attention is not None or qk is not None:
            self._count_attention(layer, b, chunks)
        self._finish_layer(layer)

    def _kernel_step(self, index: slice, bt: BatchTensors, head_outputs: torch.Tensor, qk, attention, value,
                     scale: float | None, pairs: dict, attn: dict) -> bool:
        """One step through the Triton kernels; ``False`` (after a warning, nothing added) where they
        fail, and the caller goes on eagerly."""
        from . import triton_kernels as tk

        sb, info = self.bins, bt.info
        try:
            ap = None
            if qk is not None:
                out = None if value is None else head_outputs[index]
                ap = tk.attention_pass(qk[0][index], qk[1][index], None if value is None else value[index], bt.valid,
                                       scale, out)
            red = tk.similarity_pass(head_outputs[index], bt.valid, info.input_ids, bt.sentences, self.threshold,
                                     float(sb.scale), float(sb.offset), sb.bins)
        except Exception as exc:  # noqa: BLE001 (a kernel failure must not end a long run)
            warnings.warn(f"Triton kernels unavailable ({type(exc).__name__}: {exc}); continuing eagerly", stacklevel=4)
            self.fallbacks.append(f"triton -> eager after {self._windows_before_batch()} windows: {type(exc).__name__}: {str(exc)[:200]}")
            self.kernels = False
            return False
        if ap is not None:
            self._add_attention_pass(ap, qk[0][index], qk[1][index], bt, scale, attn)
        elif attention is not None:
            attention_batch(attention[index], bt, self.top_k_columns, attn)
        add_pairs(red, bt, pairs)
        return True

    def _add_attention_pass(self, ap, q: torch.Tensor, k: torch.Tensor, bt: BatchTensors, scale: float | None,
                            attn: dict) -> None:
        """Add a kernel's attention reductions; the few zeroed top columns are recomputed from Q, K and
        each row's max and exp-sum (a ``[B, H, T, k]`` product instead of the whole matrix).

        Settling near-tied top columns needs the host to read the device, so the top columns are only
        ranked now and the rest is added at the next layer's step (or at the end of the batch): by
        then the device has moved on, and the host's bookkeeping overlaps the next layer's kernels
        instead of leaving the device idle once per layer.
        """
        pending = (rank_columns(ap.column_sums, bt.valid, self.top_k_columns), ap, q, k, bt, scale, attn)
        self._settle()
        self._pending = pending

    def _settle(self) -> None:
        """Finish the attention step :meth:`_add_attention_pass` left pending, if any."""
        if self._pending is None:
            return
        from . import triton_kernels

        ranking, ap, q, k, bt, scale, attn = self._pending
        self._pending = None

        def exact(bi: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
            probs = attention_probs(q[bi, hi][:, None], k[bi, hi][:, None], bt.valid[bi], True, scale)  # no sync
            return (probs[:, 0] * bt.valid[bi][:, :, None]).to(torch.float64).sum(dim=-2)

        top = settle_columns(ranking, bt.valid, exact)
        columns = triton_kernels.attention_columns(q, k, top, ap, bt.valid, scale)
        add_reduced_attention(ap.column_sums, ap.diagonals, top, columns, bt, attn, plain_sum=ap.plain_sum)

    def _fused_step(self, index: slice, bt: BatchTensors, head_outputs: torch.Tensor, qk, attention, pairs: dict,
                    attn: dict) -> bool:
        """One step through the compiled functions; ``False`` (after a warning, nothing added) where
        compiling or running them fails, and the caller goes on eagerly."""
        geo, sb = self._geo, self.bins
        z = head_outputs[index]
        try:
            att = None
            if qk is not None:
                q, k = qk[0][index], qk[1][index]
                fused.batch_dynamic(q, k, bt.valid)
                att = fused.compiled(fused.attention_step)(q, k, bt.valid, bt.padded)
            repeats, repeats_same = dense_repeats(bt)
            fused.batch_dynamic(z, bt.valid, bt.same_sentence, repeats, repeats_same)
            red = fused.compiled(fused.similarity_step)(
                z, bt.valid, bt.padded, geo.upper_float, bt.same_sentence,
                repeats, repeats_same, geo.upper_flat, self.threshold, float(sb.scale),
                float(sb.offset), sb.bins)
        except Exception as exc:  # noqa: BLE001 (a compiler failure must not end a long run)
            warnings.warn(f"fused statistics unavailable ({type(exc).__name__}: {exc}); continuing eagerly",
                          stacklevel=4)
            self.fallbacks.append(f"compiled -> eager after {self._windows_before_batch()} windows: {type(exc).__name__}: {str(exc)[:200]}")
            self.fused = False
            return False
        if att is not None:
            a, col, plain, prev, nxt = att
            add_attention(a, col, bt, self.top_k_columns, attn, plain_sum=plain, diagonals=(prev, nxt))
            del a, att
        elif attention is not None:
            attention_batch(attention[index], bt, self.top_k_columns, attn)
        add_pairs(PairReductions(red[0], value_hist(red[1], bt, sb), *red[2:]), bt, pairs)
        return True

    def _count_attention(self, layer: int, b: int, chunks: list[tuple[slice, BatchTensors]]) -> None:
        self.acc["attn_windows"][layer] += b
        for _, bt in chunks:
            self.acc["attn_queries_layer"][layer] += bt.counts["tokens"]
            self.acc["attn_pair_count"][layer] += bt.counts["pair_count_valid"]

    def update_attention(self, layer: int, attention: torch.Tensor, info: BatchInfo) -> None:
        """Add only the attention statistics of one layer of the current batch.

        For drivers that add attention separately; call it before that layer's
        :meth:`update_similarity` (a batch's tensors are dropped once every layer's similarity is in).
        """
        layer = self._check_layer(layer)
        chunks = self._current(info)
        b, h, t = info.n_windows, self.n_heads, self.seq_len
        self._check_shape("attention", attention, (b, h, t, t), "seq")
        attn = self._slices(layer, _ATTENTION_KEYS)
        for index, bt in chunks:
            attention_batch(attention[index], bt, self.top_k_columns, attn)
        self._count_attention(layer, b, chunks)

    def update_similarity(self, layer: int, normalized: torch.Tensor, high: torch.Tensor, info: BatchInfo) -> None:
        """Add one layer from an already computed normalised similarity and high-similarity mask.

        For similarities computed elsewhere (e.g. ``kind="cosine"``); entries off the valid
        off-diagonal block are ignored. :meth:`update_layer` is this plus the similarity itself.
        """
        layer = self._check_layer(layer)
        chunks = self._current(info)
        b, h, t = info.n_windows, self.n_heads, self.seq_len
        self._check_shape("normalized", normalized, (b, h, t, t), "seq")
        self._check_shape("high", high, (b, h, t, t), "seq")
        pairs = self._slices(layer, _PAIR_KEYS)
        for index, bt in chunks:
            pair_batch(normalized[index], high[index], bt, self._geo, self.bins, pairs, masked=False)
        self.acc["layer_windows"][layer] += b
        self._finish_layer(layer)

    def reset(self) -> CorpusStats:
        """Zero every accumulator and forget any batch in progress (reusing the memory); returns ``self``."""
        for value in self.acc.values():
            value.zero_()
        self._info, self._chunks, self._done, self._pending = None, [], set(), None
        return self

    # ------------------------------------------------------------------ merging and checkpoints
    def merge(self, other: CorpusStats) -> CorpusStats:
        """Add ``other``'s counts and sums into this accumulator (exact); returns ``self``."""
        require(isinstance(other, CorpusStats), f"cannot merge a {type(other).__name__}", "merge CorpusStats objects")
        require(other.config == self.config, f"cannot merge statistics with different settings: {other.config} vs {self.config}",
                "merge runs made with the same model, seq_len, threshold and bins")
        self._settle()
        other._settle()
        for name, value in other.acc.items():
            self.acc[name] += value.to(self.device)
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume, as numpy arrays (config under ``config.*``)."""
        cfg = self.config
        state = {f"config.{k}": np.asarray(cfg[k], dtype=np.float64 if k in ("threshold", "sim_range") else np.int64)
                 for k in CONFIG_KEYS}
        state["config.schema"] = np.asarray(SCHEMA)
        self._settle()
        state.update({name: value.detach().cpu().numpy().copy() for name, value in self.acc.items()})
        return state

    @classmethod
    def from_state_dict(cls, state: Mapping[str, np.ndarray], device="cpu") -> CorpusStats:
        """Rebuild an accumulator from :meth:`state_dict` output (a dict or an ``np.load`` archive)."""
        missing = [k for k in (*(f"config.{c}" for c in CONFIG_KEYS), *_SPEC) if k not in state]
        require(not missing, f"checkpoint state lacks {', '.join(missing[:5])}",
                "resume from a state written by CorpusStats.state_dict of this headsim version")
        schema = str(np.asarray(state["config.schema"])) if "config.schema" in state else SCHEMA
        require(schema == SCHEMA, f"checkpoint schema {schema!r} is not {SCHEMA!r}", "start the run again")
        get = lambda k: np.asarray(state[f"config.{k}"])
        stats = cls(int(get("n_layers")), int(get("n_heads")), int(get("seq_len")), threshold=float(get("threshold")),
                    top_k_columns=int(get("top_k_columns")), sim_bins=int(get("sim_bins")),
                    sim_range=tuple(float(x) for x in get("sim_range")), fraction_bins=int(get("fraction_bins")),
                    device=device)
        for name, current in stats.acc.items():
            value = np.asarray(state[name])
            if tuple(value.shape) != tuple(current.shape) or value.dtype.kind != ("f" if current.is_floating_point() else "i"):
                raise HeadsimError(f"checkpoint array {name!r} has shape {value.shape} {value.dtype}, "
                                   f"expected {tuple(current.shape)}", "resume from a matching checkpoint")
            dtype = np.float64 if current.is_floating_point() else np.int64
            stats.acc[name] = torch.from_numpy(value.astype(dtype)).to(stats.device)
        return stats

    # ------------------------------------------------------------------ output
    def to_dataset(self) -> xr.Dataset:
        """All statistics as a labelled Dataset (see ``docs/statistics.md`` for every variable)."""
        self._settle()
        a = {name: value.detach().cpu().numpy() for name, value in self.acc.items()}
        L, H, T = self.n_layers, self.n_heads, self.seq_len
        up = a["location_upper"]
        lhqk = ("layer", "head", "query", "key")
        distance = np.zeros((L, H, T), dtype=np.int64)
        for d in range(1, T):
            distance[..., d] = up.diagonal(offset=d, axis1=2, axis2=3).sum(axis=-1)
        near = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :]) <= 1
        queries = a["attn_queries_layer"]
        data = {
            "attn_sum": (lhqk, a["attn_sum"]),
            "attn_sum_top_zeroed": (lhqk, a["attn_sum_top_zeroed"]),
            "attn_sum_top_diag_zeroed": (lhqk, np.where(near, 0.0, a["attn_sum_top_zeroed"])),
            "pair_count_valid": (("query", "key"), a["pair_count_valid"]),
            "attn_pair_count": (("layer", "query", "key"), a["attn_pair_count"]),
            "attn_windows": (("layer",), a["attn_windows"]),
            "attn_focus": (("layer", "head", "target"), a["attn_focus"]),
            "attn_queries": ((), np.int64(queries.max() if queries.size else 0)),
            "attn_queries_layer": (("layer",), queries),
            "n_pairs": (("layer", "head"), up.sum(axis=(2, 3))),
            "n_repeat": (("layer", "head"), a["n_repeat"]),
            "n_same_sentence": (("layer", "head"), a["n_same_sentence"]),
            "n_repeat_same_sentence": (("layer", "head"), a["n_repeat_same_sentence"]),
            "distance_hist": (("layer", "head", "distance"), distance),
            "valid_pairs": ((), a["valid_pairs"]),
            "valid_pairs_same_sentence": ((), a["valid_pairs_same_sentence"]),
            "location_counts": (lhqk, up + up.transpose(0, 1, 3, 2)),
            "sim_sum": (lhqk, a["sim_sum"]),
            "sim_value_hist": (("layer", "head", "sim_bin"), a["sim_value_hist"]),
            "anchor_fraction_hist": (("layer", "head", "fraction_bin"), a["anchor_fraction_hist"]),
            "anchor_fraction_sum": (("layer", "head"), a["anchor_fraction_sum"]),
            "anchor_windows": (("layer", "head"), a["anchor_windows"]),
            "anchor_kind_counts": (("layer", "head", "anchor_kind"), a["anchor_kind"]),
            "anchor_distinct_hist": (("layer", "n_anchors"), a["anchor_distinct_hist"]),
            "layer_windows": (("layer",), a["layer_windows"]),
            "windows": ((), a["windows"]),
            "tokens": ((), a["tokens"]),
        }
        frac_edges = np.linspace(0.0, 1.0, self.fraction_bins + 1)
        coords = {
            "layer": np.arange(1, L + 1), "head": np.arange(1, H + 1),
            "query": np.arange(T), "key": np.arange(T), "distance": np.arange(T),
            "target": list(TARGETS), "anchor_kind": list(ANCHOR_KINDS),
            "sim_bin": self.bins.centres, "fraction_bin": (frac_edges[:-1] + frac_edges[1:]) / 2,
            "n_anchors": np.arange(H + 1),
        }
        ds = xr.Dataset({k: xr.Variable(dims, np.asarray(v)) for k, (dims, v) in data.items()}, coords=coords)
        for name, (figure, text) in VARIABLES.items():
            ds[name].attrs.update({"figure": figure, "description": text})
        ds.attrs.update({
            "schema": SCHEMA,
            "threshold": self.threshold,
            "top_k_columns": self.top_k_columns,
            "seq_len": T,
            "n_layers": L,
            "n_heads": H,
            "sim_bins": self.bins.bins,
            "sim_range": np.asarray([self.bins.lo, self.bins.hi]),
            "sim_bin_edges": self.bins.edges,
            "fraction_bins": self.fraction_bins,
            "fraction_bin_edges": frac_edges,
            "conventions": "layer and head 1-based; query, key, distance 0-based positions; pairs i < j of valid "
                           "positions; padding excluded; sentence ids -1 for [CLS], [SEP] and padding",
        })
        return ds
