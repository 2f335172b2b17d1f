"""`headsim analyze`: stream a corpus through a model into the corpus statistics, resumably.

The corpus is cut into packed windows (running text, full windows) in a background thread while
the model runs. Every layer's queries, keys and head outputs go straight from the hooks into the
accumulators (:mod:`headsim.stats`), so nothing bigger than one layer of one batch is ever held.
Every ``checkpoint_every`` windows (by default every 30 seconds) the accumulator state and the windows analysed so far are saved
atomically; ``resume=True`` continues from there and ends with results identical to an
uninterrupted run (same batches, same order of additions).
"""

from __future__ import annotations

import os
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow.parquet as pq
import torch

from . import rundir
from .capture import forward, hooks, own_attention
from .corpus import Corpus, load_corpus
from .errors import HeadsimError, require
from .models import LoadedModel, as_loaded
from .sentences import check_splitter
from .context_similarity import check_threshold
from .stats import BatchInfo, CorpusStats, batch_info, heads_table, layers_table
from .windows import Windows, check_seq_len, check_workers, iter_windows, token_counts
from .workpool import available_cpus


@dataclass(frozen=True)
class AnalysisConfig:
    """Everything that decides the numbers of a run (a resumed run must match it)."""

    model_source: str
    corpus_sha256: str
    windows: int
    seq_len: int
    threshold: float
    top_k_columns: int
    batch_size: int
    dtype: str
    sentence_splitter: str


class CorpusCount(NamedTuple):
    """What :func:`count_windows` found: packed windows and tokens, and whether it read the whole corpus
    (else both are lower bounds)."""

    windows: int
    tokens: int
    complete: bool


def count_windows(corpus: Corpus, tokenizer, seq_len: int, enough: int | None = None) -> CorpusCount:
    """Packed windows and tokens the corpus gives (a fast pass of the tokenizer alone); with ``enough``,
    counting stops once that many windows are certain."""
    total, texts, start, step = 0, [d.text for d in corpus], 0, 8
    while start < len(texts) and (enough is None or total < enough * (seq_len - 2)):
        total += sum(token_counts(tokenizer, texts[start: start + step]))
        start, step = start + step, min(2 * step, 256)
    return CorpusCount(-(-total // (seq_len - 2)), total, start >= len(texts))


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


def is_out_of_memory(exc: BaseException) -> bool:
    """An accelerator out-of-memory error (CUDA's, or the generic one other backends raise)."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


class Engine:
    """Feeds window batches through the model into a :class:`CorpusStats`.

    With ``backoff`` (the default on accelerators) a batch that runs out of memory is retried in
    halves through scratch statistics, so a failed attempt never leaves partial sums behind; the
    size that fits is remembered (:attr:`max_windows`) and later batches are cut to it at once.
    """

    def __init__(self, loaded: LoadedModel, stats: CorpusStats, fresh: Callable[[], CorpusStats], *,
                 backoff: bool | None = None):
        self.loaded, self.stats, self.fresh = loaded, stats, fresh
        self.backoff = loaded.device.type != "cpu" if backoff is None else bool(backoff)
        self.max_windows: int | None = None
        self.own_attention: bool | None = None  # None: not tried yet
        # one scratch accumulator for the whole run, allocated now: the back-off must not need fresh
        # memory at the moment memory ran out
        self._scratch = fresh() if self.backoff else None

    def batch_info(self, w: Windows) -> BatchInfo:
        return batch_info(w.input_ids, w.attention_mask, w.sentence_ids, self.loaded.tokenizer, self.loaded.device)

    def process(self, w: Windows, stats: CorpusStats | None = None) -> None:
        """Add one batch of windows to the statistics.

        The model's attention runs through headsim (:func:`headsim.capture.own_attention`), which
        computes the probabilities once for the statistics and the head outputs; where transformers
        or the model does not route attention through its registry, hooks capture Q, K and the head
        outputs and the probabilities are recomputed (:attr:`own_attention` remembers which). Fused
        statistics (``CorpusStats(fused=True)``) always take the hooks' route.
        """
        stats = self.stats if stats is None else stats
        info = self.batch_info(w)
        stats.begin_batch(info)
        if self.own_attention is not False and not stats.fused:  # fused steps take Q, K and the model's outputs
            seen: set[int] = set()

            def compute(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale) -> torch.Tensor:
                seen.add(layer)
                return stats.update_qkv(layer, q, k, v, info, scale)

            with own_attention(self.loaded, compute) as active:
                if active:
                    forward(self.loaded, info.input_ids, info.valid.long())
            if active and len(seen) == self.loaded.n_layers:
                self.own_attention = True
                return
            require(not seen, f"the model sent {len(seen)} of {self.loaded.n_layers} layers through headsim's attention",
                    "report this model; meanwhile its statistics cannot be computed")
            self.own_attention = False
        pending: dict[int, dict[str, torch.Tensor]] = {}

        def sink(layer: int, role: str, t: torch.Tensor) -> None:
            got = pending.setdefault(layer, {})
            got[role] = t
            if role == "head_output":
                stats.update_captured(layer, got["query"], got["key"], t, info)
                del pending[layer]

        with hooks(self.loaded, sink, ("query", "key", "head_output")):
            forward(self.loaded, info.input_ids, info.valid.long())

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
    from .capture import capture
    from .context_similarity import similarity

    same = total = 0
    for start in range(0, len(windows), 8):
        part = windows.select(slice(start, start + 8))
        masks = []
        for loaded in (low, reference):
            z = capture(loaded, part.input_ids, part.attention_mask, ("head_output",))["head_output"]
            masks.append(similarity(z, threshold, torch.as_tensor(part.attention_mask, device=z.device)).mask.cpu())
        valid = torch.as_tensor(part.attention_mask).bool()
        pairs = (valid[:, None, None, :, None] & valid[:, None, None, None, :]).expand_as(masks[0])
        same += int((masks[0] == masks[1])[pairs].sum())
        total += int(pairs.sum())
    return same / max(total, 1)


CHECKPOINT_SECONDS = 30.0  # default checkpoint interval of analyze


def default_batch_size(loaded: LoadedModel, seq_len: int) -> int:
    """Windows per batch: 32 on CPU; on CUDA sized to about a quarter of free memory, by an estimate
    of 8 MiB per 128-token window with the Triton kernels (BERT-base, bf16, H100: the whole process
    peaked at 1.12 GB with 256 windows, weights and accumulators included, about 3.3 MB per window).

    With the kernels no ``T×T`` tensor exists, and large batches spread the per-layer bookkeeping (a
    few hundred small tensor operations) over more windows: up to 2,048 windows then (BERT-base,
    bf16, H100: 0.21 of the bare forward's throughput at 256 windows, 0.46 at 1,024, 0.55 at 4,096).
    An out-of-memory error halves the batch (:class:`Engine`).
    """
    if loaded.device.type != "cuda":
        return 32
    from .stats import triton_kernels

    free, _ = torch.cuda.mem_get_info(loaded.device)
    kernels = triton_kernels.available(loaded.device)
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


def _checkpoint_state(ckpt: Path) -> tuple[dict, int] | None:
    f = ckpt / rundir.STATE
    if not f.exists():
        return None
    with np.load(f, allow_pickle=False) as z:
        state = {k: z[k] for k in z.files}
    done = int(state.pop("__windows_done__"))
    return state, done


def _save_checkpoint(ckpt: Path, stats: CorpusStats, done: int) -> None:
    state = dict(stats.state_dict())
    state["__windows_done__"] = np.int64(done)

    def write(path: Path) -> None:
        with open(path, "wb") as fh:
            np.savez(fh, **state)

    rundir.atomic_write(ckpt / rundir.STATE, write)


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
    fused: bool = False,
    progress: bool | Callable[[int, int], None] = True,
    engine: str = "local",
    address: str | None = None,
    gpus_per_worker: float = 0.0,
    cpus_per_worker: float = 1.0,
    share_windows: int | None = None,
) -> Result:
    """Corpus statistics of every head (paper Figs 2, 3, 6–8, 10–13).

    Args:
        model: a loaded model or a name for :func:`~headsim.load_model`.
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
        fused: compile each step's ``T×T`` work with ``torch.compile`` (:mod:`headsim.stats.fused`;
            same counts, sums to float rounding; the first batch pays the compilation).
        workers: windowing processes, 0 for a thread (:func:`default_workers` when ``None``); results do not depend on it.
        progress: show a progress bar (or a callback ``(done, total)``).
        engine: ``"local"`` (this process) or ``"ray"`` (a Ray cluster, :mod:`headsim.ray_engine`, which
            documents ``address``, ``gpus_per_worker``, ``cpus_per_worker``, ``share_windows`` and
            ``workers`` there); the same results either way.
    """
    params = dict(locals())  # for another engine, after the checks below
    threshold = check_threshold(threshold)
    require(isinstance(top_k_columns, int) and top_k_columns >= 0, f"top_k_columns {top_k_columns!r} must be ≥ 0",
            "pass a small non-negative integer (e.g. 3)")
    require(windows is None or (isinstance(windows, int) and windows >= 1), f"windows {windows!r} must be at least 1",
            "pass a positive number of windows")
    require(checkpoint_every is None or checkpoint_every >= 1, f"checkpoint_every {checkpoint_every} must be at least 1",
            "pass a positive number of windows, or leave it unset to checkpoint every 30 seconds")
    check_splitter(sentence_splitter)  # before anything is written
    if workers is not None:
        check_workers(workers)
    out_path = Path(out) if out is not None else None
    if out_path is not None and resume:
        require((out_path / rundir.RUN_JSON).exists(), f"nothing to resume in {str(out_path)!r}",
                "start the run without --resume")
    if engine != "local":
        from .ray_engine import run_engine
        return run_engine(**params)
    loaded = as_loaded(model, device=device, dtype=dtype)
    seq_len = check_seq_len(seq_len, loaded.max_seq_len)
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus, text_field=text_field, text_column=text_column)
    # The whole corpus is counted only where the number matters before the run: to analyse all of it, or
    # to refuse too large a --windows up front. Otherwise the windowing itself tells (its tokenizer pass
    # would be done twice), and counting stops at one window.
    count = count_windows(corp, loaded.tokenizer, seq_len, enough=None if windows is None or not allow_fewer else 1)
    require(count.tokens >= seq_len - 2, f"corpus {corp.name!r} has {count.tokens} tokens, less than one window of {seq_len}",
            "use a larger corpus or a smaller --seq-len")
    target = count.windows if windows is None else windows
    if count.complete and target > count.windows:
        require(allow_fewer, f"{target} windows asked for but corpus {corp.name!r} gives only {count.windows} windows of {seq_len} tokens",
                "pass --windows at most that, or --allow-fewer to analyse all of them")
        _warn_fewer(corp, count.windows)
        target = count.windows
    bs = int(batch_size) if batch_size else default_batch_size(loaded, seq_len)
    require(bs >= 1, f"batch_size {batch_size} must be at least 1", "pass a positive batch size")
    config = AnalysisConfig(loaded.source, corp.sha256, target, seq_len, threshold, top_k_columns, bs,
                            str(loaded.dtype).replace("torch.", ""), sentence_splitter)

    def fresh() -> CorpusStats:
        return CorpusStats(loaded.n_layers, loaded.n_heads, seq_len, threshold=threshold,
                           top_k_columns=top_k_columns, device=loaded.device, fused=fused)

    stats = fresh()
    done = 0
    ckpt = None
    meta = {
        "model": loaded.describe(), "corpus": {"name": corp.name, "sha256": corp.sha256, "documents": len(corp),
                                               "tokens": count.tokens if count.complete else None,
                                               "windows_available": count.windows if count.complete else None},
        "windows": target, "seq_len": seq_len, "threshold": threshold, "top_k_columns": top_k_columns,
        "batch_size": bs, "dtype": config.dtype, "device": str(loaded.device), "sentence_splitter": sentence_splitter,
        "fused": bool(fused), "versions": rundir.package_versions(), "git_commit": rundir.git_commit(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": False,
        "config": asdict(config),
    }
    if out_path is not None:
        rundir.prepare_out_dir(out_path, resume=resume, overwrite=overwrite)
        ckpt = out_path / rundir.CHECKPOINT
        if resume:
            old = rundir.read_json(out_path / rundir.RUN_JSON)
            if old.get("complete"):
                return _load_result(out_path)
            require(old.get("config") == asdict(config),
                    f"--resume refused: {str(out_path)!r} was started with other settings",
                    f"use the same settings as before ({old.get('config')}) or --overwrite")
            meta = old
            saved = _checkpoint_state(ckpt)
            if saved is not None:
                stats, done = CorpusStats.from_state_dict(saved[0], device=loaded.device), saved[1]
        ckpt.mkdir(parents=True, exist_ok=True)
        for part in ckpt.glob("windows-*.parquet"):  # parts written after the last saved state
            if int(part.stem.split("-")[1]) >= done:
                part.unlink()
        rundir.write_json(out_path / rundir.RUN_JSON, meta)

    engine = Engine(loaded, stats, fresh)
    every = None if checkpoint_every is None else max(1, -(-checkpoint_every // bs)) * bs
    last_save = time.perf_counter()
    started = time.perf_counter()
    n_workers = default_workers(loaded, target - done) if workers is None else workers
    source = iter_windows((d.text for d in corp), loaded.tokenizer, seq_len, pack=True, batch_windows=bs,
                          sentence_splitter=sentence_splitter, workers=n_workers, token_strings=False)
    parts: list = []
    first: Windows | None = None  # kept for the bf16/fp16 agreement check
    part_start = done
    position = 0
    shown = _progress(progress, target, done)
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
                break  # the finished run is written below, with no checkpoint of its own
            due = (time.perf_counter() - last_save >= CHECKPOINT_SECONDS) if every is None else position % every == 0
            if ckpt is not None and due:
                _flush_parts(ckpt, parts, part_start)
                _save_checkpoint(ckpt, engine.stats, position)
                parts, part_start, last_save = [], position, time.perf_counter()
        if position < target:
            shown.end_at(position)
    elapsed = time.perf_counter() - started
    if position < target:  # the windowing ran out: the corpus was not counted whole beforehand
        _warn_fewer(corp, position)
        meta["corpus"]["windows_available"] = position
    meta["windows"] = position
    if loaded.dtype != torch.float32 and first is not None and "agreement_vs_fp32" not in meta:
        try:
            reference = as_loaded(loaded.source, device=str(loaded.device), dtype="fp32")
            meta["agreement_vs_fp32"] = {"identical_thresholded_elements": mask_agreement(loaded, reference, first, threshold),
                                         "windows": len(first)}
        except HeadsimError as exc:  # a model built in memory has no fp32 twin to load
            meta["agreement_vs_fp32"] = {"not_measured": exc.problem}
    ds = engine.stats.to_dataset()
    ds.attrs.update({"model": loaded.name, "corpus": corp.name})
    heads, layers = heads_table(ds), layers_table(ds)
    meta.update({"complete": True, "seconds": round(elapsed, 3), "windows_per_second": round((position - done) / max(elapsed, 1e-9), 3),
                 "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    if out_path is None:
        return Result(meta, ds, heads, layers, None)
    rundir.write_dataset(out_path / rundir.STATS_NC, ds)
    rundir.write_table(out_path / rundir.HEADS, heads)
    rundir.write_table(out_path / rundir.LAYERS, layers)
    _write_windows(ckpt, parts, part_start, out_path / rundir.WINDOWS)
    rundir.write_json(out_path / rundir.RUN_JSON, meta)
    import shutil

    shutil.rmtree(ckpt, ignore_errors=True)
    return Result(meta, ds, heads, layers, out_path)


def _write_parts(path: Path, parts: list) -> None:
    """Window tables ``parts`` as one parquet file at ``path`` (atomically); nothing when there are none."""
    if not parts:
        return
    import pyarrow as pa

    table = pa.concat_tables(parts)
    rundir.atomic_write(path, lambda p: pq.write_table(table, p))


def _flush_parts(ckpt: Path, parts: list, start: int) -> None:
    _write_parts(ckpt / f"windows-{start:09d}.parquet", parts)


def _write_windows(ckpt: Path, parts: list, start: int, target: Path) -> None:
    """Write ``windows.parquet``: the ``parts`` in memory as they are when no checkpoint has saved any,
    else the checkpoint's parts and these streamed into one file (memory: one part)."""
    if not any(ckpt.glob("windows-*.parquet")):
        _write_parts(target, parts)
        return
    _flush_parts(ckpt, parts, start)
    files = sorted(ckpt.glob("windows-*.parquet"))

    def write(path: Path) -> None:
        with pq.ParquetWriter(path, pq.read_schema(files[0])) as writer:
            for f in files:
                writer.write_table(pq.read_table(f))

    rundir.atomic_write(target, write)


def _warn_fewer(corpus: Corpus, windows: int) -> None:
    warnings.warn(f"corpus {corpus.name!r} gives only {windows} windows; analysing all of them", stacklevel=3)


def _load_result(path: Path) -> Result:
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
