"""Feeding window batches through the model into the statistics (:class:`Engine`), for both engines:
the batches windowed ahead in a thread (:func:`prefetch`), the batch size (:func:`default_batch_size`),
and how a bf16/fp16 run's thresholded similarity agrees with fp32 (:func:`mask_agreement`)."""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Callable, Iterator

import torch

from ..errors import require
from ..memory import release_free_memory
from ..model.tap import Tap, capture
from ..model.load import LoadedModel
from ..stats import BatchInfo, CorpusStats, batch_info
from ..stats.backends import is_out_of_memory
from ..windows import Windows


def prefetch(items: Iterator, depth: int = 4) -> Iterator:
    """Run ``items`` in a background thread, ``depth`` ahead (tokenisation overlaps the model).

    Closing the returned generator (or leaving a ``for`` loop over it early) stops the thread and
    closes ``items``, so windowing worker processes shut down with it.
    """
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()
    failure: list[BaseException] = []

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in items:
                if not put(item):
                    break
        except BaseException as exc:  # re-raised in the consumer
            failure.append(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            put(done)

    thread = threading.Thread(target=work, daemon=True, name="headsim-windows")
    thread.start()
    try:
        while (item := q.get()) is not done:
            yield item
        if failure:
            raise failure[0]
    finally:
        stop.set()
        thread.join(timeout=30)


class Engine:
    """Feeds window batches through the model into a :class:`CorpusStats`.

    With ``backoff`` (the default on accelerators) a batch that runs out of memory is retried in
    halves through scratch statistics, so a failed attempt never leaves partial sums behind; the
    size that fits is remembered (:attr:`max_windows`) and later batches are cut to it at once.
    """

    def __init__(self, loaded: LoadedModel, stats: CorpusStats, fresh: Callable[[], CorpusStats], *,
                 backoff: bool | None = None, own_attention: bool | None = None, tile_bytes: int | None = None):
        self.loaded, self.stats, self.fresh = loaded, stats, fresh
        self.backoff = loaded.device.type != "cpu" if backoff is None else bool(backoff)
        self.max_windows: int | None = None
        require(not own_attention or loaded.arch.plain, f"{loaded.arch.family} attention is not plain softmax over valid keys",
                "let the statistics read the model's own attention (own_attention=None)")
        #: headsim computes the attention of ``plain`` families itself (default); ``False`` reads the
        #: model's own eager attention for every family
        self.own_attention = loaded.arch.plain if own_attention is None else bool(own_attention)
        # one block of attention rows as the tap holds it (the eager function makes about six copies)
        self._tap = Tap(loaded, attention=not self.own_attention, qkv=self.own_attention,
                        tile_bytes=None if tile_bytes is None else max(1, tile_bytes // 6))
        # one scratch accumulator for the whole run, allocated now: the back-off must not need fresh
        # memory at the moment memory ran out
        self._scratch = fresh() if self.backoff else None

    def attention_source(self) -> str:
        """Where the attention the statistics add comes from (recorded in run.json)."""
        if self.own_attention:
            how = ("computed once for the statistics and the model" if self.stats.impl.computes_head_outputs
                   else "queries and keys as the model passes them")
            return f"headsim: softmax(QK^T*scale) over valid keys ({how}); equal to the family's eager attention to float32 rounding"
        if not self.loaded.arch.interface:
            return "the model's output_attentions"
        eager = "the model's own eager attention function (transformers AttentionInterface)"
        if self.loaded.arch.recomputable and self.stats.takes_scores:
            return ("softmax(QK^T*scaling + mask) recomputed from each layer's queries and keys wherever the family's "
                    f"mask is the one checked each pass (valid keys, causal, sliding window); elsewhere {eager}")
        return eager

    def backend_record(self) -> dict:
        """The statistics backend requested and chosen, the one running now and every fallback it made
        (never silent: run.json's ``statistics_backend``)."""
        working = self._scratch if self._scratch is not None else self.stats  # the one process_safely feeds
        record = working.backend_record()
        if working is not self.stats:
            record["fallbacks"] = self.stats.fallbacks + record["fallbacks"]
        return record

    def batch_info(self, w: Windows) -> BatchInfo:
        return batch_info(w.input_ids, w.attention_mask, w.sentence_ids, self.loaded.tokenizer, self.loaded.device,
                          framing=self.loaded.framing)

    def process(self, w: Windows, stats: CorpusStats | None = None) -> None:
        """Add one batch of windows to the statistics, through the model tap.

        For ``plain`` families (:mod:`headsim.model.arch`) the statistics compute each layer's
        attention once, for themselves and for the model (:meth:`headsim.model.tap.Tap.run_computing`);
        a backend that does not compute head outputs (compiled) takes the queries, keys and head outputs
        the model computed instead. Every other family hands the statistics its own attention
        probabilities and head outputs.
        """
        stats = self.stats if stats is None else stats
        info = self.batch_info(w)
        stats.begin_batch(info)
        mask = info.valid.long()
        dev = info.valid.device  # a model spread over devices (device_map) hands each layer over from its own

        def done(result):
            """After each layer: a long window's layer leaves much free in thread arenas (headsim.memory)."""
            if stats.binned:
                release_free_memory()
            return result

        def computing(layer, q, k, v, scale):
            return done(stats.update_qkv(layer, q.to(dev), k.to(dev), v.to(dev), info, scale).to(q.device))

        if self.own_attention and stats.impl.computes_head_outputs:
            self._tap.run_computing(info.input_ids, mask, computing)
        elif self.own_attention:
            self._tap.run(info.input_ids, mask, right_padded=True,  # windows are built right-padded
                          on_layer=lambda cap: done(stats.update_captured(cap.layer, cap.query.to(dev), cap.key.to(dev),
                                                                          cap.head_outputs.to(dev), info)))
        elif self.loaded.arch.interface:  # the model's attention, a block of query rows at a time (or its scores)
            scores = (lambda layer, sc: stats.add_attention_scores(layer, sc, info)) if stats.takes_scores else None
            self._tap.run(info.input_ids, mask, right_padded=True, on_scores=scores,
                          on_tile=lambda layer, rows, probs, keys: stats.add_attention_block(layer, rows, probs.to(dev), info, keys),
                          on_layer=lambda cap: done(stats.update_layer(cap.layer, None, cap.head_outputs.to(dev), info)))
        else:
            self._tap.run(info.input_ids, mask, right_padded=True,
                          on_layer=lambda cap: done(stats.update_layer(cap.layer, cap.attention.to(dev),
                                                                       cap.head_outputs.to(dev), info)))

    def process_safely(self, w: Windows) -> None:
        """:meth:`process`, halving the batch on out-of-memory when :attr:`backoff` is on."""
        if not self.backoff:
            return self.process(w)
        size = len(w) if self.max_windows is None else min(len(w), self.max_windows)
        start = 0
        while start < len(w):
            part = w.select(slice(start, start + size)) if (start, size) != (0, len(w)) else w
            scratch = self._scratch.reset()
            try:
                self.process(part, scratch)
            except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
                if not is_out_of_memory(exc):
                    raise
                scratch.reset()
                require(size > 1, "out of accelerator memory with a single window",
                        "use a smaller --seq-len, --dtype bf16, or a device with more free memory")
                if self.loaded.device.type == "cuda":
                    torch.cuda.empty_cache()
                size = max(1, size // 2)
                self.max_windows = size
                warnings.warn(f"out of memory: continuing with {size} windows per step", stacklevel=2)
                continue
            self.stats.merge(scratch)
            start += size
        return None


def mask_agreement(low: LoadedModel, reference: LoadedModel, windows: Windows, threshold: float) -> float:
    """Share of valid (query, key) elements whose high-similarity flag is the same in both models.

    Used to report how a bf16/fp16 run agrees with fp32 on the same windows.
    """
    from ..context_similarity import similarity

    same = total = 0
    for start in range(0, len(windows), 8):
        part = windows.select(slice(start, start + 8))
        masks = []
        for loaded in (low, reference):
            z = capture(loaded, part.input_ids, part.attention_mask, attention=False)["head_outputs"]
            masks.append(similarity(z, threshold, torch.as_tensor(part.attention_mask, device=z.device)).mask.cpu())
        valid = torch.as_tensor(part.attention_mask).bool()
        pairs = (valid[:, None, None, :, None] & valid[:, None, None, None, :]).expand_as(masks[0])
        same += int((masks[0] == masks[1])[pairs].sum())
        total += int(pairs.sum())
    return same / max(total, 1)


def default_batch_size(loaded: LoadedModel, seq_len: int, backend: str, share: float = 1.0) -> int:
    """Windows per batch: 32 on CPU; on CUDA sized to about a quarter of free memory, by an estimate
    of 8 MiB per 128-token window with the Triton kernels (BERT-base, bf16, H100: the whole process
    peaked at 1.12 GB with 256 windows, weights and accumulators included, about 3.3 MB per window).

    With the kernels no ``T×T`` tensor exists, and large batches spread the per-layer bookkeeping (a
    few hundred small tensor operations) over more windows: up to 2,048 windows then (BERT-base,
    bf16, H100: 0.21 of the bare forward's throughput at 256 windows, 0.46 at 1,024, 0.55 at 4,096).
    An out-of-memory error halves the batch (:class:`Engine`). ``backend``: the statistics backend
    chosen (:func:`headsim.stats.choose_backend`). ``share``: the fraction of the device this process
    may use (a Ray actor at ``--gpus-per-actor 0.5`` shares its GPU with another): free memory counts
    at most that fraction of the device's total, so every actor on the GPU plans the same batch.
    """
    if loaded.device.type != "cuda":
        return 32
    free, total = torch.cuda.mem_get_info(loaded.device)
    if share < 1.0:
        free = min(free, int(total * share))
    kernels = backend == "triton"
    per_window = (0 if kernels else loaded.n_heads * seq_len * seq_len * 4 * 12) + seq_len * 4096 * 16
    return int(max(8, min(2048 if kernels else 512, free // 4 // per_window)))
