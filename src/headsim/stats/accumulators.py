"""Corpus statistics accumulators: exact, mergeable, checkpointable (paper Figs 2, 3, 6–8, 10–13).

:class:`CorpusStats` keeps running sums (float64) and counts (int64) on the compute device. The
driver calls :meth:`~CorpusStats.begin_batch` once per batch of windows and
:meth:`~CorpusStats.update_layer` once per layer; each update reduces the batch ``[B, H, T, T]``
to per-head totals in a fixed number of tensor passes (no Python loop over windows or heads).
Counts add and sums add, so accumulators of disjoint parts of a corpus :meth:`~CorpusStats.merge`
into exactly the accumulator of the whole, and :meth:`~CorpusStats.state_dict` /
:meth:`~CorpusStats.from_state_dict` checkpoint and resume bit for bit.
:meth:`~CorpusStats.to_dataset` labels everything as an :class:`xarray.Dataset`
(layers and heads 1-based, as in the paper). What is stored and how the Dataset is made from it is
:mod:`headsim.stats.schema`; how each step is computed is the backend chosen once at construction
(:mod:`headsim.stats.backends`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import torch
import xarray as xr

from ..errors import HeadsimError, require
from ..memory import BLOCK_CACHE_BYTES
from ..context_similarity import check_threshold
from . import schema
from .attention import attention_batch
from .backends import Backend, BackendFailure, Choice, StepSettings, BACKENDS, choose_backend
from .batch import BatchInfo, BatchTensors, batch_tensors, check_info, kernel_tiles
from . import tiled
from .pairs import Geometry, SimBins, add_pairs, pair_batch
from .schema import CONFIG_KEYS, SCHEMA

_CPU_STEP_BYTES = 8 << 20
#: default working memory of one block of a binned window (``tile_bytes``)
TILE_BYTES = 256 << 20


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
        backend: how each step's ``T×T`` work is computed (:mod:`headsim.stats.backends`): ``"auto"``
            (Triton kernels on CUDA where Triton runs, the Numba kernel on a CPU where Numba is
            installed, eager elsewhere), ``"eager"``, ``"numba"``, ``"compiled"`` (``torch.compile``) or
            ``"triton"``, or a :class:`~headsim.stats.backends.Choice`; chosen
            once, here (:func:`~headsim.stats.backends.choose_backend`). A named backend that cannot run
            on ``device`` is refused at once; one that fails during the run raises a
            :class:`~headsim.errors.HeadsimError` if it was named, and under ``auto`` switches to eager
            with a warning, recorded in :attr:`fallbacks` (never silently).
        resolution: windows up to this length keep every position-pair statistic per position;
            longer ones keep them on ``resolution`` position bins (:mod:`headsim.stats.tiled`, eager
            or numba backend), so memory does not grow with ``seq_len``.
        tile_bytes: working memory of one block of query rows of a binned window.
    """

    def __init__(self, n_layers: int, n_heads: int, seq_len: int, *, threshold: float = 0.3,
                 top_k_columns: int = 3, sim_bins: int = 120, sim_range=(-0.2, 1.0), fraction_bins: int = 20,
                 device="cpu", chunk_windows: int | None = None, backend: str | Choice = "auto",
                 resolution: int = schema.DEFAULT_RESOLUTION, tile_bytes: int = TILE_BYTES) -> None:
        for name, value, low in (("n_layers", n_layers, 1), ("n_heads", n_heads, 1), ("seq_len", seq_len, 2),
                                 ("top_k_columns", top_k_columns, 0), ("sim_bins", sim_bins, 1),
                                 ("fraction_bins", fraction_bins, 1), ("resolution", resolution, 2)):
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
        self.layout = schema.Layout(self.n_layers, self.n_heads, self.seq_len, self.bins.bins, (lo, hi),
                                    self.fraction_bins, int(resolution))
        self.resolution, self.binned, self.tile_bytes = int(resolution), self.layout.binned, int(tile_bytes)
        self.acc: dict[str, torch.Tensor] = schema.allocate(self.layout, self.device)
        self._keys = {g: tuple(schema.accumulators(g, self.binned)) for g in ("batch", "pairs", "attention")}
        self._geo = None if self.binned else Geometry.build(self.seq_len, self.device)
        self._bins = tiled.Bins.build(self.seq_len, self.layout.positions, self.device) if self.binned else None
        self._tiles: dict[int, tiled.AttentionTiles] = {}
        require(chunk_windows is None or (isinstance(chunk_windows, (int, np.integer)) and chunk_windows >= 0),
                f"chunk_windows {chunk_windows!r} must be None or a non-negative integer",
                "pass None (automatic), 0 (whole batches) or a number of windows")
        self.chunk_windows = None if chunk_windows is None else int(chunk_windows)
        self._info: BatchInfo | None = None
        self._chunks: list[tuple[slice, BatchTensors]] = []
        self._whole: BatchTensors | None = None  # the current batch's tensors (its steps' are views of them)
        self._done: set[int] = set()  # layers of the current batch already added
        #: the backend asked for and the one chosen (run.json records both)
        self.choice = choose_backend(backend, self.device, binned=self.binned,
                                     kernel_tiles=self.binned and kernel_tiles(self.seq_len, self.layout.positions))
        self._settings = StepSettings(self.threshold, self.top_k_columns, self.bins, self._geo)
        self.impl: Backend = BACKENDS[self.choice.chosen](self._settings)
        #: every switch to another backend during the run, with its reason (run.json records them)
        self.fallbacks: list[str] = []

    # ------------------------------------------------------------------ configuration
    @property
    def config(self) -> dict:
        return {"n_layers": self.n_layers, "n_heads": self.n_heads, "seq_len": self.seq_len,
                "threshold": self.threshold, "top_k_columns": self.top_k_columns, "sim_bins": self.bins.bins,
                "sim_range": (self.bins.lo, self.bins.hi), "fraction_bins": self.fraction_bins,
                "resolution": self.resolution}

    def _windows_before_batch(self) -> int:
        return self.windows - (self._info.n_windows if self._info is not None else 0)

    @property
    def backend(self) -> str:
        """The backend in use now: ``"triton"``, ``"compiled"`` or ``"eager"``."""
        return self.impl.name

    def backend_record(self) -> dict:
        """What run.json records: the backend requested, chosen, running now, and every fallback."""
        return {**self.choice.record(), "ran": self.backend, "fallbacks": list(self.fallbacks)}

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
        self.impl.settle()
        b = info.n_windows
        step = self._step(b)
        self._info, self._done = None, set()
        whole = batch_tensors(info, self.layout.positions)
        for name in self._keys["batch"]:
            self.acc[name] += whole.counts[name]
        self._chunks = [(index, whole.select(index)) for index in (slice(start, min(start + step, b))
                                                                   for start in range(0, b, max(step, 1)))]
        self._info, self._whole = info, whole

    def _step(self, b: int) -> int:
        """Windows per vectorised step for a batch of ``b`` windows."""
        if self.binned:
            return b  # the batch is sized by the memory budget; a binned step works in blocks of rows
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
            self.impl.settle()
            self._info, self._chunks, self._done, self._whole = None, [], set(), None
            self._tiles = {}

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
        pairs, attn = self._slices(layer, self._keys["pairs"]), self._slices(layer, self._keys["attention"])
        if self.binned:
            return self._update_binned(layer, head_outputs, info, chunks[0][1], attention, qk, value, scale, pairs, attn)
        if layer in self._tiles:  # blocks of a window that fits per position: the whole matrix once joined
            attention = self._tiles.pop(layer)
        self._steps(chunks, head_outputs, qk, attention, value, scale, pairs, attn)
        self.acc["layer_windows"][layer] += b
        if attention is not None or qk is not None:
            self._count_attention(layer)
        self._finish_layer(layer)

    def _steps(self, chunks: list[tuple[slice, BatchTensors]], *args) -> None:
        """A layer's steps through the backend: all at once where it takes them so (its bookkeeping once
        per layer), else one by one. A failed backend added nothing of what failed: its fallback redoes
        just that."""
        if self.impl.whole_layer:
            try:
                return self.impl.layer_step(self._whole, chunks, *args)
            except BackendFailure as exc:
                self._fall_back(exc)
                return self._steps(chunks, *args)
        for index, bt in chunks:
            try:
                self.impl.step(index, bt, *args)
            except BackendFailure as exc:
                self._fall_back(exc)
                self.impl.step(index, bt, *args)
        return None

    def rows_per_block(self, windows: int) -> int:
        """Query rows per block of a binned step of ``windows`` windows (within ``tile_bytes``)."""
        return tiled.block_rows(self.tile_bytes, windows, self.n_heads, self.seq_len)

    def add_attention_block(self, layer: int, rows: slice, probs: torch.Tensor, info: BatchInfo,
                            keys: slice | None = None) -> None:
        """Add a block of one layer's attention probabilities ``[B, H, rows, keys]`` (query rows ``rows``,
        in order; key columns ``keys``, default all ``T``, every other probability 0: the model tap's
        ``on_tile``); the layer's :meth:`update_layer` (with ``attention=None``) then finishes its
        attention statistics. A window that fits the resolution is joined whole and added as today; a
        longer one is reduced block by block (nothing ``T×T`` kept)."""
        layer = self._check_layer(layer)
        chunks = self._current(info)
        b, h, t = info.n_windows, self.n_heads, self.seq_len
        keys = slice(0, t) if keys is None else keys
        self._check_shape("attention block", probs, (b, h, rows.stop - rows.start, keys.stop - keys.start), "seq")
        if self.binned:
            tiles = self._tiles.get(layer)
            if tiles is None:
                tiles = self._tiles[layer] = self._attention_tiles(chunks[0][1])
            self._reduced(tiles, lambda: tiles.add(rows, probs, keys))
            return
        whole = self._tiles.get(layer)
        if whole is None:
            whole = self._tiles[layer] = torch.zeros(b, h, t, t, dtype=torch.float32, device=probs.device)
        whole[:, :, rows, keys] = probs

    @property
    def takes_scores(self) -> bool:
        """Whether a layer's attention may arrive as its scaled scores (:meth:`add_attention_scores`): binned
        windows on the GPU or CPU kernels (the torch tiles take the family's own blocks)."""
        return self.binned and self.impl.tile_kernel in ("triton", "numba")

    def add_attention_scores(self, layer: int, scores, info: BatchInfo) -> torch.Tensor | None:
        """Add one layer's attention given as its scaled scores (:class:`headsim.model.scores.Scores`,
        the model tap's ``on_scores``) instead of blocks of probabilities; the layer's :meth:`update_layer`
        (with ``attention=None``) then finishes its attention statistics. Returns the layer's head outputs
        ``[B, H, T, d]`` where they were computed from the same probabilities (the torch tiles, given the
        values), else ``None`` (:meth:`headsim.stats.tiled.AttentionTiles.add_scores`)."""
        layer = self._check_layer(layer)
        chunks = self._current(info)
        require(self.binned, "attention scores are reduced only for windows above the resolution",
                "hand blocks of probabilities (add_attention_block)")
        dev = self.device
        if scores.query.device != dev:  # a model spread over devices hands each layer over from its own
            scores = replace(scores, query=scores.query.to(dev), key=scores.key.to(dev), valid=scores.valid.to(dev),
                             value=None if scores.value is None else scores.value.to(dev))
        tiles = self._tiles[layer] = self._attention_tiles(chunks[0][1])
        rows = self.rows_per_block(info.n_windows)
        if dev.type == "cpu":  # blocks that stay in cache (the tap's own, BLOCK_CACHE_BYTES)
            rows = min(rows, tiled.block_rows(BLOCK_CACHE_BYTES, info.n_windows, self.n_heads, self.seq_len, copies=1))
        return self._reduced(tiles, lambda: tiles.add_scores(scores, rows))

    def _reduced(self, tiles: tiled.AttentionTiles, add):
        """``add()`` into ``tiles`` (its result returned); where their GPU kernel fails (a failed launch wrote
        nothing), the failure is the backend's (an error, or a recorded fallback) and torch does the same again."""
        try:
            return add()
        except Exception as exc:  # noqa: BLE001 (a kernel's failure: an error or a recorded fallback)
            if not tiles.kernel:
                raise
            self._fall_back(self.impl.failure(exc))
            tiles.kernel = False
            return add()

    def _attention_tiles(self, bt: BatchTensors) -> tiled.AttentionTiles:
        """A binned layer's attention, reduced block by block as the backend says."""
        return tiled.AttentionTiles(bt, self.n_heads, self._bins, kernel=self.impl.tile_kernel == "triton")

    def _update_binned(self, layer, head_outputs, info, bt, attention, qk, value, scale, pairs, attn) -> None:
        """A binned layer step (:mod:`headsim.stats.tiled`)."""
        b = info.n_windows
        rows = self.rows_per_block(b)
        tiles = self._tiles.pop(layer, None)
        if qk is not None:
            tiles = tiled.AttentionTiles(bt, self.n_heads, self._bins)
            tiled.attention_blocks(qk[0], qk[1], value, bt, scale, rows, tiles, head_outputs)
        elif attention is not None:
            tiles = self._attention_tiles(bt)
            for start in range(0, self.seq_len, rows):
                tiles.add(slice(start, min(start + rows, self.seq_len)), attention[:, :, start:start + rows])
        if tiles is not None:
            tiles.finish(self.top_k_columns, attn)
            self._count_attention(layer)
            del tiles
        try:
            red, distance, distance_sum = self._pairs_tiled(head_outputs, bt, rows)
        except BackendFailure as exc:  # nothing of the pairs was added yet
            self._fall_back(exc)
            red, distance, distance_sum = self._pairs_tiled(head_outputs, bt, rows)
        add_pairs(red, bt, pairs)
        pairs["distance_hist"] += distance.round().to(torch.int64)
        pairs["distance_sum"] += distance_sum.round().to(torch.int64)
        self.acc["layer_windows"][layer] += b
        self._finish_layer(layer)

    def _pairs_tiled(self, head_outputs, bt, rows):
        """The pair reductions of a binned step, by the backend's tile reduction."""
        kernel = self.impl.tile_kernel
        try:
            return tiled.pair_reductions_tiled(head_outputs, bt, self.threshold, self.bins, self._bins, rows, kernel=kernel)
        except Exception as exc:  # noqa: BLE001 (a kernel's failure: an error or a recorded fallback)
            if kernel == "torch":
                raise
            raise self.impl.failure(exc) from exc

    def _fall_back(self, exc: BackendFailure) -> None:
        """A step of the chosen backend failed (nothing added): an error when the backend was named,
        under ``auto`` a switch to eager with a warning, recorded in :attr:`fallbacks`."""
        where = f"after {self._windows_before_batch()} windows"
        if self.choice.explicit:
            raise HeadsimError(f"statistics backend {exc.backend!r} failed {where}: {exc}",
                               "run with --backend eager (or --backend auto)") from exc.cause
        warnings.warn(f"statistics backend {exc.backend!r} failed ({exc}); continuing with eager", stacklevel=5)
        self.fallbacks.append(f"{exc.backend} -> eager {where}: {exc}")
        self.impl.settle()
        self.impl = BACKENDS["eager"](self._settings)

    def _count_attention(self, layer: int) -> None:
        counts = self._whole.counts
        self.acc["attn_windows"][layer] += counts["windows"]
        self.acc["attn_queries_layer"][layer] += counts["tokens"]
        self.acc["attn_pair_count"][layer] += counts["pair_count_valid"]

    def _whole_matrices(self, method: str) -> None:
        require(not self.binned, f"{method} takes whole [B, H, T, T] matrices, which a window of {self.seq_len} tokens "
                f"(above the resolution {self.resolution}) does not keep",
                "use update_layer / add_attention_block, or a resolution of at least seq_len")

    def update_attention(self, layer: int, attention: torch.Tensor, info: BatchInfo) -> None:
        """Add only the attention statistics of one layer of the current batch.

        For drivers that add attention separately; call it before that layer's
        :meth:`update_similarity` (a batch's tensors are dropped once every layer's similarity is in).
        """
        layer = self._check_layer(layer)
        chunks = self._current(info)
        b, h, t = info.n_windows, self.n_heads, self.seq_len
        self._check_shape("attention", attention, (b, h, t, t), "seq")
        self._whole_matrices("update_attention")
        attn = self._slices(layer, self._keys["attention"])
        for index, bt in chunks:
            attention_batch(attention[index], bt, self.top_k_columns, attn)
        self._count_attention(layer)

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
        self._whole_matrices("update_similarity")
        pairs = self._slices(layer, self._keys["pairs"])
        for index, bt in chunks:
            pair_batch(normalized[index], high[index], bt, self._geo, self.bins, pairs, masked=False)
        self.acc["layer_windows"][layer] += b
        self._finish_layer(layer)

    def reset(self) -> CorpusStats:
        """Zero every accumulator and forget any batch in progress (reusing the memory); returns ``self``."""
        for value in self.acc.values():
            value.zero_()
        self._info, self._chunks, self._done, self._whole = None, [], set(), None
        self.impl.discard()
        return self

    # ------------------------------------------------------------------ merging and checkpoints
    def merge(self, other: CorpusStats) -> CorpusStats:
        """Add ``other``'s counts and sums into this accumulator (exact); returns ``self``."""
        require(isinstance(other, CorpusStats), f"cannot merge a {type(other).__name__}", "merge CorpusStats objects")
        require(other.config == self.config, f"cannot merge statistics with different settings: {other.config} vs {self.config}",
                "merge runs made with the same model, seq_len, threshold and bins")
        self.impl.settle()
        other.impl.settle()
        for name, value in other.acc.items():
            self.acc[name] += value.to(self.device)
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume, as numpy arrays (config under ``config.*``)."""
        cfg = self.config
        state = {f"config.{k}": np.asarray(cfg[k], dtype=np.float64 if k in ("threshold", "sim_range") else np.int64)
                 for k in CONFIG_KEYS}
        state["config.schema"] = np.asarray(SCHEMA)
        self.impl.settle()
        state.update({name: value.detach().cpu().numpy().copy() for name, value in self.acc.items()})
        return state

    @classmethod
    def from_state_dict(cls, state: Mapping[str, np.ndarray], device="cpu", backend: str | Choice = "auto") -> CorpusStats:
        """Rebuild an accumulator from :meth:`state_dict` output (a dict or an ``np.load`` archive);
        it goes on with ``backend`` (which a checkpoint does not record: the numbers do not depend on it)."""
        schema.check_state(state)
        get = lambda k: np.asarray(state[f"config.{k}"])
        stats = cls(int(get("n_layers")), int(get("n_heads")), int(get("seq_len")), threshold=float(get("threshold")),
                    top_k_columns=int(get("top_k_columns")), sim_bins=int(get("sim_bins")),
                    sim_range=tuple(float(x) for x in get("sim_range")), fraction_bins=int(get("fraction_bins")),
                    device=device, backend=backend, resolution=schema.state_resolution(state))
        for name, current in stats.acc.items():
            value = np.asarray(state[name])
            schema.check_array(name, value, tuple(current.shape))
            dtype = np.float64 if current.is_floating_point() else np.int64
            stats.acc[name] = torch.from_numpy(value.astype(dtype)).to(stats.device)
        return stats

    # ------------------------------------------------------------------ output
    def to_dataset(self) -> xr.Dataset:
        """All statistics as a labelled Dataset (see ``docs/statistics.md`` for every variable)."""
        self.impl.settle()
        a = {name: value.detach().cpu().numpy() for name, value in self.acc.items()}
        return schema.build_dataset(schema.derived_values(a, self.binned), self.layout, threshold=self.threshold,
                                    top_k_columns=self.top_k_columns)
