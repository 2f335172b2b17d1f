"""The local engine: one process runs the model over the windows, windowed ahead in a thread or in
windowing processes (:func:`default_workers`), checkpointed as it goes, resumable.

The corpus is cut into packed windows (running text, full windows) in a background thread while
the model runs. Every layer's queries, keys and head outputs go straight from the hooks into the
accumulators (:mod:`headsim.stats`), so nothing bigger than one layer of one batch is ever held.
Every ``checkpoint_every`` windows (by default every 30 seconds) the accumulator state and the windows
analysed so far are saved atomically; ``resume=True`` continues from there and ends with results
identical to an uninterrupted run (same batches, same order of additions).

:func:`analyze_local` loads the model and settles its memory, then the one planning step
(:func:`headsim.runs.plan.plan`), :func:`run` (the loop) and :func:`finalize` (agreement check,
tables, commit).
"""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch

from ..corpus import Corpus, load_corpus
from ..errors import HeadsimError
from ..interrupts import StopRequests
from ..memory import choose_resolution, default_max_memory, held_bytes, parse_memory, peak_memory, plan_memory
from ..model.load import LoadedModel, as_loaded
from ..stats import CorpusStats
from ..stats.backends import choose_backend
from ..windows import Windows, check_seq_len, iter_windows, token_counts, windows_table
from ..workpool import available_cpus
from .engine import Engine, default_batch_size, mask_agreement, prefetch
from .lifecycle import finish_run, start_run, stopped, CHECKPOINT_SECONDS
from .run import Run
from .options import RunOptions
from .plan import ModelFacts, Plan, announce_size, plan, warn_fewer
from .progress import ProgressBar
from .rundir import RunDir
from .shares import share_batches


@dataclass(frozen=True)
class Job:
    """A planned local run: the model, the :class:`~headsim.runs.plan.Plan` and the options that say how
    to run it (checkpoints, windowing workers, progress)."""

    loaded: LoadedModel
    plan: Plan
    options: RunOptions

    def fresh(self) -> CorpusStats:
        """Empty statistics for this run, on the model's device."""
        return self.plan.stats.build(self.loaded.device)


def analyze_local(model: LoadedModel | str | None, corpus: Corpus | str, options: RunOptions) -> Run:
    """Analyse ``corpus`` in this process (``options`` checked and settled by :func:`headsim.runs.analyze.analyze`)."""
    budget = parse_memory(options.max_memory) if options.max_memory is not None else None
    loaded = as_loaded(model, device=options.device, dtype=options.dtype, **options.loading())
    seq_len = check_seq_len(options.seq_len, loaded.max_seq_len, loaded.extrapolates)
    if budget is None:
        budget = default_max_memory(loaded.device)
    chosen = options.resolution is None
    if chosen:  # the largest resolution whose statistics fit the budget beside the model
        options = replace(options, resolution=choose_resolution(loaded.n_layers, loaded.n_heads, seq_len,
                                                                budget - held_bytes(loaded)))
    # a named backend that cannot run is refused here
    choice = choose_backend(options.backend, loaded.device, binned=seq_len > options.resolution)
    wanted = options.batch_size if options.batch_size is not None else (
        default_batch_size(loaded, seq_len, choice.chosen) if loaded.device.type == "cuda" else None)
    # a batch holds no more windows than the run analyses (nor does the memory plan count more)
    memory = plan_memory(loaded, seq_len, options.resolution, budget, batch_size=wanted,
                         largest_batch=min(32, options.windows or 32))
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus, text_field=options.text_field,
                                                                 text_column=options.text_column)
    settled = plan(options, corp, corpus, ModelFacts.of(loaded), lambda texts: token_counts(loaded.tokenizer, texts),
                   seq_len=seq_len, batch_size=memory.batch_size, backend=choice, backend_record=choice.record(),
                   tile_bytes=memory.tile_bytes)
    settled.meta["memory"] = {**memory.record(), "resolution": options.resolution,
                              "resolution_from": "budget" if chosen else "option"}
    settled.meta["size"] = announce_size(options, loaded.describe(), settled.spec.windows, seq_len)
    if options.out is None:
        return run(Job(loaded, settled, options), None)
    with RunDir(options.out).writer(resume=options.resume, overwrite=options.overwrite) as run_dir:
        meta = start_run(run_dir, settled.meta, resume=options.resume)
        return meta if isinstance(meta, Run) else run(Job(loaded, replace(settled, meta=meta), options), run_dir)


class Pass(NamedTuple):
    """What the loop of :func:`run` leaves for :func:`finalize`."""

    position: int  # windows analysed in all (resumed ones included)
    resumed: int  # windows the checkpoint held when this call started
    parts: list  # window tables not yet checkpointed
    first: Windows | None  # up to 16 windows, for the bf16/fp16 agreement check
    elapsed: float


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


def run(job: Job, run_dir: RunDir | None) -> Run:
    """Run the model over the windows into the statistics (checkpointed into ``run_dir``), then :func:`finalize`.

    From here on a first SIGINT/SIGTERM only asks the loop to stop after the batch in hand (with a
    checkpoint and the line that says how to resume), whenever it arrives."""
    with StopRequests() as stop:
        stats, done = job.fresh(), 0
        saved = run_dir.load_checkpoint() if run_dir is not None else None
        if saved is not None:
            # fresh statistics (this run's backend) plus the checkpoint's, read on the host: an exact copy
            stats, done = stats.merge(CorpusStats.from_state_dict(saved[0], backend="eager")), saved[1]
        engine = Engine(job.loaded, stats, job.fresh, tile_bytes=job.plan.stats.tile_bytes)
        job.plan.meta.setdefault("attention", engine.attention_source())
        return finalize(job, engine, _loop(job, engine, done, run_dir, stop), run_dir)


def _loop(job: Job, engine: Engine, done: int, run_dir: RunDir | None, stop: StopRequests) -> Pass:
    """Every batch from window ``done`` to the target through ``engine``, checkpointed when due."""
    loaded, plan, options = job.loaded, job.plan, job.options
    spec, target = plan.spec, plan.spec.windows
    every = None if options.checkpoint_every is None else max(1, -(-options.checkpoint_every // spec.batch_size)) * spec.batch_size
    n_workers = default_workers(loaded, target - done) if options.workers is None else options.workers
    if plan.share is None:
        source = iter_windows((d.text for d in plan.corpus), loaded.tokenizer, spec.seq_len, pack=True,
                              batch_windows=spec.batch_size, sentence_splitter=spec.sentence_splitter, workers=n_workers,
                              token_strings=False, framing=loaded.framing, limit=target)
    else:  # a --shard: its windows cut from its first token, as the Ray engine cuts a share
        s = plan.share
        source = share_batches([d.text for d in plan.corpus][s.first_text:s.last_text], s, loaded.tokenizer, spec.seq_len,
                               spec.batch_size, spec.sentence_splitter, loaded.framing)
    parts, first, position = [], None, 0
    started = last_save = time.perf_counter()
    shown = ProgressBar(options.progress, target, done)
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
            parts.append(windows_table(position - take, batch.input_ids, batch.attention_mask, batch.sentence_ids))
            advance(take)
            if position >= target:
                break  # the finished run is written by finalize, with no checkpoint of its own
            due = (time.perf_counter() - last_save >= CHECKPOINT_SECONDS) if every is None else position % every == 0
            if run_dir is not None and (due or stop.signum is not None):
                run_dir.save_checkpoint(engine.stats.state_dict(), position, parts, one_part=True)
                parts, last_save = [], time.perf_counter()
            if stop.signum is not None:
                raise stopped(stop.signum, position, target, run_dir)
        if position < target:
            shown.end_at(position)
    return Pass(position, done, parts, first, time.perf_counter() - started)


def finalize(job: Job, engine: Engine, passed: Pass, run_dir: RunDir | None) -> Run:
    """Complete ``run.json`` (windows analysed, fp32 agreement of a bf16/fp16 run, the statistics
    backend) and write the results (:func:`finish_run`: tables, commit, checkpoint removed)."""
    plan, loaded = job.plan, job.loaded
    meta = plan.meta
    if passed.position < plan.spec.windows:  # the windowing ran out: the corpus was not counted whole beforehand
        warn_fewer(plan.corpus, passed.position)
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
