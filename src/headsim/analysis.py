"""`headsim analyze`: stream a corpus through a model into the corpus statistics, resumably.

The corpus is cut into packed windows (running text, full windows) in a background thread while
the model runs. Every layer's queries, keys and head outputs go straight from the hooks into the
accumulators (:mod:`headsim.stats`), so nothing bigger than one layer of one batch is ever held.
Every ``checkpoint_every`` windows (by default every 30 seconds) the accumulator state and the windows analysed so far are saved
atomically; ``resume=True`` continues from there and ends with results identical to an
uninterrupted run (same batches, same order of additions).

:func:`analyze` goes in three steps after its quick checks (:func:`check_arguments`, and
:func:`resume_settings` for the output directory and a resumed run's own settings): :func:`plan`
(the model and corpus loaded, the windows counted, the batch size settled: a :class:`Plan` holding
the run's :class:`~headsim.runspec.RunSpec` and ``run.json``), :func:`run` (the loop) and
:func:`finalize` (agreement check, tables, commit). The run directory itself is
:class:`headsim.rundir.RunDir`'s; the Ray engine (:mod:`headsim.ray_engine`) shares
:func:`new_meta`, :func:`start_run`, :func:`finish_run` and :func:`check_engine`.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from . import rundir
from .memory import MemoryPlan, default_max_memory, parse_memory, peak_memory, plan_memory
from .model.tap import Tap, capture
from .stats.schema import DEFAULT_RESOLUTION
from .corpus import Corpus, load_corpus
from .errors import HeadsimError, require
from .interrupts import Interrupted, StopRequests
from .models import LoadedModel, as_loaded
from .runspec import RunSpec, describe_changes, resume_flags
from .sentences import check_splitter
from .context_similarity import check_threshold
from .stats import BatchInfo, CorpusStats, batch_info, heads_table, layers_table
from .stats.backends import Choice, check_name, choose_backend, is_out_of_memory
from .windows import Windows, check_seq_len, check_workers, iter_windows, token_counts
from .workpool import available_cpus


class CorpusCount(NamedTuple):
    """What :func:`count_windows` found: packed windows and tokens, and whether it read the whole corpus
    (else both are lower bounds)."""

    windows: int
    tokens: int
    complete: bool


def count_windows(corpus: Corpus, tokenizer, seq_len: int, enough: int | None = None, *, specials: int = 2) -> CorpusCount:
    """Packed windows and tokens the corpus gives (a fast pass of the tokenizer alone); with ``enough``,
    counting stops once that many windows are certain. ``specials``: framing tokens per window."""
    content = seq_len - specials
    total, texts, start, step = 0, [d.text for d in corpus], 0, 8
    while start < len(texts) and (enough is None or total < enough * content):
        total += sum(token_counts(tokenizer, texts[start: start + step]))
        start, step = start + step, min(2 * step, 256)
    return CorpusCount(-(-total // content), total, start >= len(texts))


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
            return f"headsim: softmax(QK^T*scale) over valid keys ({how}); equal to the family's eager attention"
        return ("the model's own eager attention function (transformers AttentionInterface)" if self.loaded.arch.interface
                else "the model's output_attentions")

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

        def computing(layer, q, k, v, scale):
            return stats.update_qkv(layer, q.to(dev), k.to(dev), v.to(dev), info, scale).to(q.device)

        if self.own_attention and stats.impl.computes_head_outputs:
            self._tap.run_computing(info.input_ids, mask, computing)
        elif self.own_attention:
            self._tap.run(info.input_ids, mask, right_padded=True,  # windows are built right-padded
                          on_layer=lambda cap: stats.update_captured(cap.layer, cap.query.to(dev), cap.key.to(dev),
                                                                     cap.head_outputs.to(dev), info))
        elif self.loaded.arch.interface:  # the model's attention, a block of query rows at a time
            self._tap.run(info.input_ids, mask, right_padded=True,
                          on_tile=lambda layer, rows, probs: stats.add_attention_block(layer, rows, probs.to(dev), info),
                          on_layer=lambda cap: stats.update_layer(cap.layer, None, cap.head_outputs.to(dev), info))
        else:
            self._tap.run(info.input_ids, mask, right_padded=True,
                          on_layer=lambda cap: stats.update_layer(cap.layer, cap.attention.to(dev),
                                                                  cap.head_outputs.to(dev), info))

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
    from .context_similarity import similarity

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


CHECKPOINT_SECONDS = 30.0  # default checkpoint interval of analyze


def default_batch_size(loaded: LoadedModel, seq_len: int, backend: str) -> int:
    """Windows per batch: 32 on CPU; on CUDA sized to about a quarter of free memory, by an estimate
    of 8 MiB per 128-token window with the Triton kernels (BERT-base, bf16, H100: the whole process
    peaked at 1.12 GB with 256 windows, weights and accumulators included, about 3.3 MB per window).

    With the kernels no ``T×T`` tensor exists, and large batches spread the per-layer bookkeeping (a
    few hundred small tensor operations) over more windows: up to 2,048 windows then (BERT-base,
    bf16, H100: 0.21 of the bare forward's throughput at 256 windows, 0.46 at 1,024, 0.55 at 4,096).
    An out-of-memory error halves the batch (:class:`Engine`). ``backend``: the statistics backend
    chosen (:func:`headsim.stats.choose_backend`).
    """
    if loaded.device.type != "cuda":
        return 32
    free, _ = torch.cuda.mem_get_info(loaded.device)
    kernels = backend == "triton"
    per_window = (0 if kernels else loaded.n_heads * seq_len * seq_len * 4 * 12) + seq_len * 4096 * 16
    return int(max(8, min(2048 if kernels else 512, free // 4 // per_window)))


def default_workers(loaded: LoadedModel, windows: int) -> int:
    """Windowing processes for a run of ``windows`` windows (0: a thread of this process).

    Beside a CPU model windowing stays in a thread: the model's threads need both cores, and a
    windowing process competing with them slowed 512 windows down by a third (measured with
    benchmarks/throughput.py). Beside an accelerator, runs of 1,024 windows or more use one process
    per spare CPU up to 15 (CPUs this process may use: affinity and container quota, see
    :func:`headsim.workpool.available_cpus`), so pySBD's pure-Python splitting never holds the
    interpreter lock the thread that launches the GPU kernels needs.
    """
    if loaded.device.type == "cpu" or windows < 1024:
        return 0
    return max(1, min(15, available_cpus() - 1))


@dataclass
class Result:
    """What :func:`analyze` returns: the run on disk (or in memory when ``out`` is None)."""

    meta: dict
    dataset: object
    heads: object
    layers: object
    path: Path | None = None


def analyze(
    model: LoadedModel | str | None = None,
    corpus: Corpus | str = "default",
    *,
    windows: int | None = None,
    out: str | os.PathLike | None = None,
    seq_len: int = 128,
    threshold: float = 0.3,
    top_k_columns: int = 3,
    batch_size: int | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    allow_fewer: bool = True,
    device: str | None = None,
    dtype: str | None = None,
    text_field: str = "text",
    text_column: str = "text",
    sentence_splitter: str = "pysbd",
    workers: int | None = None,
    backend: str | None = None,
    progress: bool | Callable[[int, int], None] = True,
    engine: str = "local",
    address: str | None = None,
    gpus_per_worker: float = 0.0,
    cpus_per_worker: float = 1.0,
    share_windows: int | None = None,
    shard: str | tuple[int, int] | None = None,
    resolution: int = DEFAULT_RESOLUTION,
    max_memory: str | int | None = None,
    revision: str | None = None,
    device_map: str | None = None,
    device_memory: str | dict | None = None,
    offload_folder: str | os.PathLike | None = None,
) -> Result:
    """Corpus statistics of every head (paper Figs 2, 3, 6–8, 10–13).

    Args:
        model: a loaded model or a name for :func:`~headsim.load_model` (a hub id is downloaded into
            the Hugging Face cache at ``revision``; run.json records the commit).
        revision, device_map, device_memory, offload_folder: as for :func:`~headsim.load_model`
            (``device_map`` spreads a model too big for one device over GPUs, CPU and disk; the
            statistics are the same wherever a layer lives; run.json records the placement).
        corpus: a :class:`~headsim.corpus.Corpus` or a spec for :func:`~headsim.corpus.load_corpus`.
        windows: how many windows to analyse (default: the whole corpus).
        out: run directory; ``None`` keeps everything in memory (no checkpoints).
        threshold: high-similarity threshold; top_k_columns: columns zeroed for Fig 3.
        checkpoint_every: windows between checkpoints (rounded up to whole batches); ``None``: after the
            batch that ends :data:`CHECKPOINT_SECONDS` after the last checkpoint (a fast GPU run would
            otherwise spend its time writing accumulators); a finished run writes its results instead.
        resume / overwrite: continue or replace a run already in ``out``.
        allow_fewer: when ``windows`` exceeds the corpus, analyse what exists (the windowing finds the
            end, so the corpus is not tokenised twice), else stop before starting (the corpus is counted
            first, as it is without ``windows``).
        sentence_splitter: sentence ids from ``"pysbd"``, ``"punkt"`` or ``"newline"``.
        backend: the statistics backend (:mod:`headsim.stats.backends`): ``"auto"`` (the default: Triton
            kernels on CUDA where Triton runs, eager elsewhere), ``"eager"``, ``"compiled"``
            (``torch.compile``; the first batch pays the compilation) or ``"triton"``; the same counts up
            to threshold flips from float summation order. A named backend that cannot run is refused
            before the run; one that fails mid-run stops it (``--backend eager`` runs on), while under
            ``auto`` a failure falls back to eager, recorded in run.json (``statistics_backend``).
            ``None``: ``"auto"``, or on ``resume`` the backend the run asked for.
        workers: windowing processes, 0 for a thread (:func:`default_workers` when ``None``); results do not depend on it.
        progress: show a progress bar (or a callback ``(done, total)``).
        shard: ``(i, n)`` or ``"i/n"``: analyse only the ``i``-th of ``n`` equal, disjoint parts (1-based) of
            the windows the run would analyse (:func:`shard_range`); the parts' runs merge
            (:func:`headsim.merging.merge_runs`) into the statistics of one run over all of them.
        engine: ``"local"`` (this process) or ``"ray"`` (a Ray cluster, :mod:`headsim.ray_engine`, which
            documents ``address``, ``gpus_per_worker``, ``cpus_per_worker``, ``share_windows`` and
            ``workers`` there); the same results either way.
        resolution: windows longer than this keep every position-pair statistic on this many position
            bins (docs/statistics.md), so memory does not grow with ``seq_len``; shorter ones per position.
        max_memory: the memory the run may take (bytes, or e.g. ``"3GB"``; default: half of the memory
            free now, the GPU's on CUDA): the batch size (unless given) and the block of attention rows
            are chosen within it; a budget that cannot hold one window stops the run before it starts.
            run.json records the budget (``memory``) and the peak memory of the run.
    """
    params = dict(locals())  # for another engine, after the checks below
    threshold = check_arguments(threshold, top_k_columns, windows, checkpoint_every, batch_size, sentence_splitter,
                                workers if engine == "local" else None, backend)  # Ray checks its own workers
    shard = check_shard(shard)
    out_path = Path(out) if out is not None else None
    windows, batch_size, dtype, backend = resume_settings(out_path, resume=resume, overwrite=overwrite, engine=engine,
                                                          windows=windows, batch_size=batch_size, dtype=dtype,
                                                          backend=backend)
    loading = {"revision": revision, "device_map": device_map, "device_memory": device_memory, "offload_folder": offload_folder}
    if engine != "local":
        given = [f"--{k.replace('_', '-')}" for k, v in loading.items() if v is not None]
        require(not given, f"{', '.join(given)} works with --engine local only",
                "pass a local model directory to --engine ray (every worker loads it on its node)")
        from .ray_engine import run_engine

        require(seq_len <= resolution and max_memory is None, f"the {engine} engine analyses windows within the "
                f"resolution ({resolution}) without a memory budget", "run long windows and --max-memory with --engine local")
        params = {k: v for k, v in params.items() if k not in ("resolution", "max_memory", *loading)}
        return run_engine(**dict(params, threshold=threshold, windows=windows, batch_size=batch_size, dtype=dtype,
                                 backend=backend, shard=shard))
    settled = plan(model, corpus, windows=windows, seq_len=seq_len, threshold=threshold, top_k_columns=top_k_columns,
                   batch_size=batch_size, device=device, dtype=dtype, text_field=text_field, text_column=text_column,
                   sentence_splitter=sentence_splitter, allow_fewer=allow_fewer, backend=backend,
                   checkpoint_every=checkpoint_every, workers=workers, progress=progress, shard=shard,
                   resolution=resolution, max_memory=max_memory, loading=loading)
    if out_path is None:
        return run(settled, None)
    with rundir.RunDir(out_path).writer(resume=resume, overwrite=overwrite) as run_dir:
        meta = start_run(run_dir, settled.meta, resume=resume)
        return meta if isinstance(meta, Result) else run(replace(settled, meta=meta), run_dir)


def check_arguments(threshold: float, top_k_columns: int, windows: int | None, checkpoint_every: int | None,
                    batch_size: int | None, sentence_splitter: str, workers: int | None, backend: str | None = None) -> float:
    """Refuse bad :func:`analyze` arguments before anything is loaded or written; the threshold as a float."""
    threshold = check_threshold(threshold)
    require(isinstance(top_k_columns, int) and top_k_columns >= 0, f"top_k_columns {top_k_columns!r} must be ≥ 0",
            "pass a small non-negative integer (e.g. 3)")
    require(windows is None or (isinstance(windows, int) and windows >= 1), f"windows {windows!r} must be at least 1",
            "pass a positive number of windows")
    require(checkpoint_every is None or checkpoint_every >= 1, f"checkpoint_every {checkpoint_every} must be at least 1",
            "pass a positive number of windows, or leave it unset to checkpoint every 30 seconds")
    require(batch_size is None or (isinstance(batch_size, int) and batch_size >= 1),
            f"batch_size {batch_size!r} must be at least 1", "pass a positive batch size, or leave it unset for the automatic one")
    check_splitter(sentence_splitter)
    if backend is not None:
        check_name(backend)
    if workers is not None:
        check_workers(workers)
    return threshold


class Settings(NamedTuple):
    """What an :func:`analyze` call leaves open, settled (on ``resume``, from the stored run)."""

    windows: int | None
    batch_size: int | None
    dtype: str | None
    backend: str


def resume_settings(out_path: Path | None, *, resume: bool, overwrite: bool, engine: str, windows: int | None,
                    batch_size: int | None, dtype: str | None, backend: str | None) -> Settings:
    """Check the output directory before the slow model load; with ``resume``, what the call leaves
    open (``windows``, ``batch_size``, ``dtype``, ``backend``) becomes the stored run's own setting.
    ``backend`` left open is otherwise ``"auto"``."""
    run_dir = rundir.RunDir(out_path) if out_path is not None else None
    if run_dir is not None:
        run_dir.check_target(resume=resume, overwrite=overwrite)
        rundir.check_writable(out_path)  # a read-only or full output fails before the model loads
    if run_dir is None or not resume:
        return Settings(windows, batch_size, dtype, backend or "auto")
    stored_meta = run_dir.resume_meta()
    check_engine(stored_meta, engine, out_path)
    stored = RunSpec.from_meta(stored_meta, str(out_path / rundir.RUN_JSON))
    return Settings(stored.windows if windows is None else windows, stored.batch_size if batch_size is None else batch_size,
                    stored.dtype if dtype is None else dtype, backend or requested_backend(stored_meta))


@dataclass(frozen=True)
class Plan:
    """What :func:`plan` settled before the first window: the model and corpus, the run's spec and the
    ``run.json`` to start with, and how to run (checkpoints, windowing workers, progress)."""

    loaded: LoadedModel
    corpus: Corpus
    spec: RunSpec
    meta: dict
    backend: Choice
    checkpoint_every: int | None = None
    workers: int | None = None
    progress: object = True
    share: object = None  # a --shard: the :class:`headsim.ray_engine.Share` of its windows
    memory: MemoryPlan | None = None

    def fresh(self) -> CorpusStats:
        """Empty statistics for this run."""
        s = self.spec
        tile = {} if self.memory is None else {"tile_bytes": self.memory.tile_bytes}
        return CorpusStats(self.loaded.n_layers, self.loaded.n_heads, s.seq_len, threshold=s.threshold,
                           top_k_columns=s.top_k_columns, device=self.loaded.device, backend=self.backend,
                           resolution=s.resolution, **tile)


def plan(model: LoadedModel | str | None, corpus: Corpus | str, *, windows: int | None, seq_len: int, threshold: float,
         top_k_columns: int, batch_size: int | None, device: str | None, dtype: str | None, text_field: str,
         text_column: str, sentence_splitter: str, allow_fewer: bool, backend: str = "auto", checkpoint_every: int | None = None,
         workers: int | None = None, progress: object = True, shard: tuple[int, int] | None = None,
         resolution: int = DEFAULT_RESOLUTION, max_memory: str | int | None = None, loading: dict | None = None) -> Plan:
    """Load the model and the corpus, settle the windows to analyse and the batch size: the run's
    :class:`~headsim.runspec.RunSpec` and ``run.json`` (arguments checked by :func:`check_arguments`); the
    statistics backend is chosen here, once (a named one that cannot run is refused before the run).
    ``loading``: further :func:`~headsim.load_model` arguments (revision, placement)."""
    require(isinstance(resolution, int) and not isinstance(resolution, bool) and resolution >= 2,
            f"resolution {resolution!r} must be an integer of at least 2", "pass e.g. --resolution 512 (the default)")
    budget = parse_memory(max_memory) if max_memory is not None else None
    loaded = as_loaded(model, device=device, dtype=dtype, **{k: v for k, v in (loading or {}).items() if v is not None})
    seq_len = check_seq_len(seq_len, loaded.max_seq_len, loaded.extrapolates)
    # a named backend that cannot run is refused here
    choice = choose_backend(backend, loaded.device, binned=seq_len > resolution)
    if budget is None:
        budget = default_max_memory(loaded.device)
    wanted = batch_size if batch_size is not None else (
        default_batch_size(loaded, seq_len, choice.chosen) if loaded.device.type == "cuda" else None)
    memory = plan_memory(loaded, seq_len, resolution, budget, batch_size=wanted)
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus, text_field=text_field, text_column=text_column)
    # The whole corpus is counted only where the number matters before the run: to analyse all of it, or
    # to refuse too large a --windows up front. Otherwise the windowing itself tells (its tokenizer pass
    # would be done twice), and counting stops at one window.
    specials = loaded.framing.specials
    share = None
    if shard is None:
        count = count_windows(corp, loaded.tokenizer, seq_len, enough=None if windows is None or not allow_fewer else 1,
                              specials=specials)
        first, target = 0, window_target(corp, count, windows, seq_len, specials, allow_fewer)
    else:  # a shard starts inside the corpus: every text's tokens are counted to find where
        from .ray_engine import plan_shares

        counts = np.asarray(token_counts(loaded.tokenizer, [d.text for d in corp]), dtype=np.int64)
        count = CorpusCount(-(-int(counts.sum()) // (seq_len - specials)), int(counts.sum()), True)
        first, stop = shard_range(window_target(corp, count, windows, seq_len, specials, allow_fewer), shard)
        share, target = plan_shares(counts, seq_len - specials, stop, stop - first, start=first)[0], stop - first
    bs = memory.batch_size
    spec = RunSpec(loaded.source, corp.sha256, target, seq_len, threshold, top_k_columns, bs,
                   str(loaded.dtype).replace("torch.", ""), sentence_splitter, first, resolution, loaded.commit)
    meta = new_meta(loaded.describe(), corp, corpus, count, spec, device=str(loaded.device), backend=choice.record(),
                    shard=shard)
    meta["memory"] = memory.record()
    return Plan(loaded, corp, spec, meta, choice, checkpoint_every, workers, progress, share, memory)


def check_shard(shard: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``"i/n"`` or ``(i, n)`` with ``1 <= i <= n`` as ``(i, n)``; a clear error otherwise."""
    if shard is None:
        return None
    fix = "pass --shard I/N: part I (from 1) of N, e.g. --shard 1/4 ... --shard 4/4"
    try:
        i, n = (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except (TypeError, ValueError):
        raise HeadsimError(f"--shard {shard!r} is not I/N", fix) from None
    require(1 <= i <= n, f"--shard {i}/{n} is not a part of {n}", fix)
    return i, n


def shard_range(windows: int, shard: tuple[int, int]) -> tuple[int, int]:
    """Windows ``[first, stop)`` of part ``i`` of ``n`` (1-based) of ``windows`` windows: ``n`` disjoint
    ranges as equal as can be, together all of them; a part without a window is refused."""
    i, n = shard
    first, stop = (i - 1) * windows // n, i * windows // n
    require(stop > first, f"--shard {i}/{n} holds no window: the run has only {windows} windows",
            f"use at most {windows} shards")
    return first, stop


def window_target(corp: Corpus, count: CorpusCount, windows: int | None, seq_len: int, specials: int,
                  allow_fewer: bool) -> int:
    """Windows to analyse: ``windows``, or all the corpus gives (also when it gives fewer and
    ``allow_fewer``, with a warning); refuses a corpus shorter than one window."""
    require(count.tokens >= seq_len - specials, f"corpus {corp.name!r} has {count.tokens} tokens, less than one window of {seq_len}",
            "use a larger corpus or a smaller --seq-len")
    target = count.windows if windows is None else windows
    if count.complete and target > count.windows:
        require(allow_fewer, f"{target} windows asked for but corpus {corp.name!r} gives only {count.windows} windows of {seq_len} tokens",
                "pass --windows at most that, or --allow-fewer to analyse all of them")
        _warn_fewer(corp, count.windows)
        target = count.windows
    return target


def new_meta(model: dict, corp: Corpus, given: object, count: CorpusCount, spec: RunSpec, *, device: str,
             backend: dict, engine: str = "local", shard: tuple[int, int] | None = None) -> dict:
    """``run.json`` of a run about to start (``complete: false``); ``given``: the corpus as the call named it;
    ``backend``: the statistics backend requested and chosen (the run's end adds what ran)."""
    meta = {
        "model": model, "corpus": {"name": corp.name, "sha256": corp.sha256, "documents": len(corp),
                                   "tokens": count.tokens if count.complete else None,
                                   "windows_available": count.windows if count.complete else None},
        **spec.as_meta(), "device": device, "statistics_backend": dict(backend), "versions": rundir.package_versions(),
        "git_commit": rundir.git_commit(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "complete": False, "engine": engine,
    }
    if not isinstance(given, Corpus):
        meta["corpus"]["spec"] = str(given)  # what --resume passes again
    if shard is not None:
        meta["shard"] = {"index": shard[0], "count": shard[1], "first_window": spec.first_window}
    return meta


def requested_backend(meta: dict | None) -> str:
    """The statistics backend a run asked for (runs written before the choice was recorded: ``"compiled"``
    where they ran with ``fused``, else ``"auto"``)."""
    meta = meta or {}
    return (meta.get("statistics_backend") or {}).get("requested") or ("compiled" if meta.get("fused") else "auto")


def check_engine(old: dict | None, engine: str, out_path: Path) -> None:
    """Refuse to resume an unfinished run on another engine than it was started on (its checkpoint
    is that engine's); a finished run is only read back."""
    was = (old or {}).get("engine", "local")
    if (old or {}).get("complete") or was == engine:
        return
    flag = "" if was == "local" else f" --engine {was}"
    raise HeadsimError(f"--resume refused: {str(out_path)!r} was started with --engine {was}, not --engine {engine}",
                       f"resume it on its own engine: headsim analyze --out {out_path} --resume{flag}")


def start_run(run_dir: rundir.RunDir, meta: dict, *, resume: bool) -> dict | Result:
    """Inside :meth:`RunDir.writer`: check a run to resume against ``meta`` and write ``run.json``;
    the meta to run with (a resumed run keeps its own), or, when the run is finished already, its
    :class:`Result` (read, and so verified, once)."""
    if resume:
        old = run_dir.resume_meta()
        changed = RunSpec.from_meta(old).differences(RunSpec.from_meta(meta))
        if old.get("complete"):
            require(not changed, f"--resume: {str(run_dir.path)!r} already holds a finished run made with other settings "
                    f"({describe_changes(changed)})", "pass --overwrite to replace it, or another --out")
            finished = load_result(run_dir.path)  # a damaged run is refused here, as by every reader
            warnings.warn(f"{str(run_dir.path)!r} already holds this run, finished: nothing to do", stacklevel=3)
            return finished
        check_engine(old, meta.get("engine", "local"), run_dir.path)
        require(not changed, f"--resume refused: {str(run_dir.path)!r} was started with other settings "
                f"({describe_changes(changed)})",
                f"pass the run's own settings ({resume_flags(changed, old)}), or --overwrite to start again")
        meta = old
    return run_dir.write_meta({**meta, "run_id": run_dir.run_id})


def finish_run(meta: dict, stats: CorpusStats, names: tuple[str, str], elapsed: float, processed: int,
               run_dir: rundir.RunDir | None, parts: list) -> Result:
    """The statistics' dataset and tables, ``meta`` completed (``processed``: windows analysed in
    ``elapsed`` seconds by this call), committed into ``run_dir`` with the window ``parts`` not yet
    checkpointed (or kept in memory without one). ``names``: the model's and the corpus's."""
    ds = stats.to_dataset()
    ds.attrs.update({"model": names[0], "corpus": names[1]})
    stacks = meta.get("model", {}).get("stacks") or []
    if set(stacks) - {"self"} and len(stacks) == ds.sizes["layer"]:  # an encoder-decoder's three stacks
        ds = ds.assign_coords(stack=("layer", list(stacks)))
    heads, layers = heads_table(ds), layers_table(ds)
    meta.update({"complete": True, "seconds": round(elapsed, 3), "windows_per_second": round(processed / max(elapsed, 1e-9), 3),
                 "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    first = RunSpec.from_meta(meta).first_window
    meta["holds"] = [holding(meta["corpus"], first, first + int(meta["windows"]))]
    if run_dir is None:
        return Result(meta, ds, heads, layers, None)
    meta = run_dir.commit(meta, ds, heads, layers, parts)
    return Result(meta, ds, heads, layers, run_dir.path)


def holding(corpus: dict, first: int, stop: int) -> dict:
    """``run.json``'s record of windows ``[first, stop)`` of ``corpus`` (its run.json entry) held by a
    run: what :func:`headsim.merging.check_mergeable` compares so that no window is counted twice."""
    return {"corpus_sha256": corpus["sha256"], "corpus": corpus["name"], "windows": [[int(first), int(stop)]]}


class _Pass(NamedTuple):
    """What the loop of :func:`run` leaves for :func:`finalize`."""

    position: int  # windows analysed in all (resumed ones included)
    resumed: int  # windows the checkpoint held when this call started
    parts: list  # window tables not yet checkpointed
    first: Windows | None  # up to 16 windows, for the bf16/fp16 agreement check
    elapsed: float


def run(plan: Plan, run_dir: rundir.RunDir | None) -> Result:
    """Run the model over the windows into the statistics (checkpointed into ``run_dir``), then :func:`finalize`.

    From here on a first SIGINT/SIGTERM only asks the loop to stop after the batch in hand (with a
    checkpoint and the line that says how to resume), whenever it arrives."""
    with StopRequests() as stop:
        stats, done = plan.fresh(), 0
        saved = run_dir.load_checkpoint() if run_dir is not None else None
        if saved is not None:
            # fresh statistics (this run's backend) plus the checkpoint's, read on the host: an exact copy
            stats, done = stats.merge(CorpusStats.from_state_dict(saved[0], backend="eager")), saved[1]
        engine = Engine(plan.loaded, stats, plan.fresh, tile_bytes=None if plan.memory is None else plan.memory.tile_bytes)
        plan.meta.setdefault("attention", engine.attention_source())
        return finalize(plan, engine, _loop(plan, engine, done, run_dir, stop), run_dir)


def _loop(plan: Plan, engine: Engine, done: int, run_dir: rundir.RunDir | None, stop: StopRequests) -> _Pass:
    """Every batch from window ``done`` to the target through ``engine``, checkpointed when due."""
    loaded, spec, target = plan.loaded, plan.spec, plan.spec.windows
    every = None if plan.checkpoint_every is None else max(1, -(-plan.checkpoint_every // spec.batch_size)) * spec.batch_size
    n_workers = default_workers(loaded, target - done) if plan.workers is None else plan.workers
    if plan.share is None:
        source = iter_windows((d.text for d in plan.corpus), loaded.tokenizer, spec.seq_len, pack=True,
                              batch_windows=spec.batch_size, sentence_splitter=spec.sentence_splitter, workers=n_workers,
                              token_strings=False, framing=loaded.framing)
    else:  # a --shard: its windows cut from its first token, as the Ray engine cuts a share
        from .ray_engine import share_batches

        s = plan.share
        source = share_batches([d.text for d in plan.corpus][s.first_text:s.last_text], s, loaded.tokenizer, spec.seq_len,
                               spec.batch_size, spec.sentence_splitter, loaded.framing)
    parts, first, position = [], None, 0
    started = last_save = time.perf_counter()
    shown = _progress(plan.progress, target, done)
    with shown as advance, closing(prefetch(source)) as batches:
        for batch in batches:
            if position >= target:
                break
            take = min(len(batch), target - position)
            if position + take <= done:  # finished before the checkpoint we resumed from
                position += take
                continue
            batch = batch.select(slice(0, take)) if take < len(batch) else batch
            first = batch.select(slice(0, 16)) if first is None else first
            engine.process_safely(batch)
            position += take
            parts.append(rundir.windows_table(position - take, batch.input_ids, batch.attention_mask, batch.sentence_ids))
            advance(take)
            if position >= target:
                break  # the finished run is written by finalize, with no checkpoint of its own
            due = (time.perf_counter() - last_save >= CHECKPOINT_SECONDS) if every is None else position % every == 0
            if run_dir is not None and (due or stop.signum is not None):
                run_dir.save_checkpoint(engine.stats.state_dict(), position, parts, one_part=True)
                parts, last_save = [], time.perf_counter()
            if stop.signum is not None:
                raise _stopped(stop.signum, position, target, run_dir)
        if position < target:
            shown.end_at(position)
    return _Pass(position, done, parts, first, time.perf_counter() - started)


def finalize(plan: Plan, engine: Engine, passed: _Pass, run_dir: rundir.RunDir | None) -> Result:
    """Complete ``run.json`` (windows analysed, fp32 agreement of a bf16/fp16 run, the statistics
    backend) and write the results (:func:`finish_run`: tables, commit, checkpoint removed)."""
    meta, loaded = plan.meta, plan.loaded
    if passed.position < plan.spec.windows:  # the windowing ran out: the corpus was not counted whole beforehand
        _warn_fewer(plan.corpus, passed.position)
        meta["corpus"]["windows_available"] = passed.position
    meta["windows"] = passed.position
    if loaded.dtype != torch.float32 and passed.first is not None and "agreement_vs_fp32" not in meta:
        meta["agreement_vs_fp32"] = _agreement_vs_fp32(loaded, passed.first, plan.spec.threshold)
    meta["statistics_backend"] = engine.backend_record()
    meta["memory"] = {**meta.get("memory", {}), **peak_memory(loaded.device)}
    return finish_run(meta, engine.stats, (loaded.name, plan.corpus.name), passed.elapsed, passed.position - passed.resumed,
                      run_dir, passed.parts)


def _agreement_vs_fp32(loaded: LoadedModel, first: Windows, threshold: float) -> dict:
    """How the thresholded similarity of ``first`` agrees with the model's fp32 twin (:func:`mask_agreement`)."""
    try:
        reference = as_loaded(loaded.source, dtype="fp32", **loaded.load_args())
    except HeadsimError as exc:  # a model built in memory has no fp32 twin to load
        return {"not_measured": exc.problem}
    return {"identical_thresholded_elements": mask_agreement(loaded, reference, first, threshold), "windows": len(first)}


def _stopped(signum: int, position: int, target: int, run_dir: rundir.RunDir | None, engine: str = "local") -> Interrupted:
    """The line for a run stopped by a signal at a batch boundary (its checkpoint just saved)."""
    name = signal.Signals(signum).name
    if run_dir is None:
        return Interrupted(signum, f"stopped by {name} after {position} of {target} windows (nothing saved: no --out)",
                           "run it again, with --out DIR to make it resumable")
    return Interrupted(signum, f"stopped by {name} after {position} of {target} windows; checkpoint saved in {str(run_dir.path)!r}",
                       f"continue with headsim analyze --out {run_dir.path} --resume" + ("" if engine == "local" else f" --engine {engine}"))


def _warn_fewer(corpus: Corpus, windows: int) -> None:
    warnings.warn(f"corpus {corpus.name!r} gives only {windows} windows; analysing all of them", stacklevel=3)


def load_result(path: Path) -> Result:
    run = rundir.load_run(path)
    return Result(run.meta, run.dataset, run.heads, run.layers, path)


class _progress:
    """A rich progress bar (windows/s, ETA), a callback, or nothing."""

    def __init__(self, progress, total: int, done: int):
        self.progress, self.total, self.done = progress, total, done
        self.bar = None

    def __enter__(self):
        if callable(self.progress):
            state = {"done": self.done}

            def advance(n: int) -> None:
                state["done"] += n
                self.progress(state["done"], self.total)
            return advance
        if not self.progress:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("analysing windows"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]} windows/s"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), transient=False)
        self.bar.__enter__()
        task = self.bar.add_task("analyse", total=self.total, completed=self.done, rate="–")
        t0, base = time.perf_counter(), self.done

        def advance(n: int) -> None:
            self.bar.advance(task, n)
            got = self.bar.tasks[0].completed - base
            self.bar.update(task, rate=f"{got / max(time.perf_counter() - t0, 1e-9):.1f}")
        return advance

    def end_at(self, total: int) -> None:
        """The corpus ran out at ``total`` windows: that is the whole run."""
        self.total = total
        if callable(self.progress):
            self.progress(total, total)
        elif self.bar is not None:
            self.bar.update(self.bar.tasks[0].id, total=total)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False
