"""`headsim analyze --engine ray`: one run's corpus statistics spread over a Ray cluster, exactly.

Plan → shares → exact merge:

1. The driver starts the workers, Ray actors (:class:`~headsim.runs.ray_worker.Worker`,
   :class:`~headsim.runs.ray_cluster.Cluster`) that each hold one copy of the model. A corpus of files
   (:mod:`headsim.corpus.parts`: a file, directory, glob or list, local or at URLs) is only listed here;
   a :class:`~headsim.corpus.Corpus` object (or ``default``) is held here.
2. The workers count every text's tokens: each reads the parts it is given and returns their documents'
   token counts and digests (a :class:`~headsim.corpus.parts.CountedCorpus` here, no text), or counts
   blocks of the texts held here. From the counts the driver
   plans the run with the single process's own step (:func:`headsim.runs.plan.plan`): the packed
   windows numbered once, as the single process cuts them, and ``[0, windows)`` split into shares:
   ranges of whole batches (:func:`headsim.runs.shares.plan_shares`).
3. A worker windows its share itself, from its texts or from the parts that hold them, read there
   (:func:`headsim.runs.shares.share_batches`: tokenises and splits the sentences of
   only the texts the share touches, packing from the share's first token), feeds the same batches
   as the single process through :class:`headsim.runs.engine.Engine` into a zeroed
   :class:`~headsim.stats.CorpusStats` and returns its state and the share's ``windows.parquet`` rows.
4. The driver adds the states (:meth:`CorpusStats.merge`: counts exact, float sums equal to a
   single-process run's up to addition order) and writes the same run directory through
   :class:`headsim.runs.rundir.RunDir` and the single process's own steps (:func:`headsim.runs.lifecycle.start_run`,
   :func:`~headsim.runs.lifecycle.finish_run`): marker, a lock the driver holds for the whole run, a
   checksummed checkpoint manifest, the atomic final commit. A checkpoint holds the sum of the shares
   finished so far and each one's windows as a part from its first window; ``resume`` runs only the
   shares the verified parts do not hold.

The workers asked for are checked against the cluster's resources before any actor starts
(:meth:`headsim.runs.options.RayOptions.count`: refused in one line when the cluster cannot hold them), and every wait on
the actors has a deadline (:func:`timeout`): the start-up, the token count, and any stretch of the
run in which no worker reports progress. An actor that dies is restarted by Ray and its share runs
again (``max_restarts`` and ``max_task_retries``: :data:`RESTARTS`); a worker Ray gives up on (its node
lost) hands its share to another (:class:`_Pool`); an exception inside a worker, or
the deadline, stops the run with one line after checkpointing the finished shares (resumable).
``--shard I/N`` (:func:`headsim.runs.plan.shard_range`) cuts shares from the part's first window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from ..corpus import Corpus, load_corpus
from ..corpus.parts import CountedCorpus, Fields, Slice, list_files, spec_name
from ..errors import HeadsimError, require
from ..interrupts import StopRequests
from ..memory import peak_memory
from ..stats import CorpusStats
from ..windows import check_seq_len
from .lifecycle import CHECKPOINT_SECONDS, finish_run, start_run, stopped
from .run import Run
from .options import RunOptions
from .plan import ModelFacts, announce_size, plan
from .progress import ProgressBar
from .ray_cluster import (INSTALL, POLL_SECONDS, RESTARTS, TIMEOUT_ENV, Cluster, _check_reachable, _worker_error,  # noqa: F401
                          import_ray, timeout)
from .ray_worker import ShareSettings, Worker  # noqa: F401
from .rundir import RunDir
from .shares import Share, plan_shares

MAX_SHARE_BATCHES = 64  # a share's state and windows travel to the driver once per share
T = TypeVar("T")


def _share_size(requested: int | None, target: int, batch: int, workers: int) -> int:
    """Windows per share: a whole number of batches; by default about four shares per worker, at most
    :data:`MAX_SHARE_BATCHES` batches, and where a size down to half that gives a number of shares
    that is a multiple of the workers, that size (no worker idles through another's last share)."""
    if requested is not None:
        return batch * max(1, -(-int(requested) // batch))
    batches = -(-target // batch)
    size = min(MAX_SHARE_BATCHES, max(1, -(-batches // (4 * workers))))
    even = [s for s in range(size, max(1, size // 2) - 1, -1) if -(-batches // s) % workers == 0]
    return batch * (even[0] if even else size)


def _finished_shares(parts: list[tuple[int, int]], shares: list[Share], out: Path, first: int = 0) -> set[int]:
    """The shares a verified checkpoint holds: each of its window parts (numbered from the run's
    ``first`` window) must be one whole share."""
    by_start = {s.start - first: s for s in shares}
    done = set()
    for start, rows in parts:
        share = by_start.get(start)
        require(share is not None and share.windows == rows,
                f"the checkpoint of {str(out)!r} holds windows {start}..{start + rows}, which are not one of the run's shares",
                "start the run again with --overwrite (the checkpoint cannot be trusted)")
        done.add(share.index)
    return done


@contextmanager
def _writing(out_path: Path | None, resume: bool, overwrite: bool) -> Iterator[RunDir | None]:
    """The run directory held for writing for the whole run (``None``: a run in memory)."""
    if out_path is None:
        yield None
        return
    with RunDir(out_path).writer(resume=resume, overwrite=overwrite) as run_dir:
        yield run_dir


def analyze_ray(model, corpus: Corpus | str, options: RunOptions) -> Run:
    """Analyse ``corpus`` on a Ray cluster (see the module; ``options`` checked and settled by
    :func:`headsim.runs.analyze.analyze`, :attr:`~headsim.runs.options.RunOptions.ray` its own)."""
    import_ray()
    ray_options = options.ray
    out_path = Path(options.out) if options.out is not None else None
    # a corpus of files is only listed here: the workers read its parts (each share those it touches)
    fields = Fields(options.text_field, options.text_column)
    files = None if isinstance(corpus, Corpus) or corpus == "default" else list_files(corpus)
    corp = corpus if isinstance(corpus, Corpus) or files is not None else load_corpus(corpus)
    # the run directory is checked and held before the cluster starts; a signal during the start-up stops it at
    # once (the cluster's exit ends every actor); from then on a first SIGINT/SIGTERM stops the run after the
    # share in hand, with a checkpoint
    with _writing(out_path, options.resume, options.overwrite) as run_dir, \
            Cluster(ray_options.address, model, options.device, options.dtype, ray_options, options.seq_len,
                    options.backend) as cluster, StopRequests() as stop:
        info, n = cluster.info, len(cluster.actors)
        seq_len = check_seq_len(options.seq_len, info["max_seq_len"], info.get("extrapolates", False))
        facts = ModelFacts(info["source"], info["model"], info["dtype"], info["device"], info["specials"],
                           info["model"]["n_layers"], info["model"]["n_heads"], info.get("commit"))
        bs = int(options.batch_size) if options.batch_size else int(info["batch_size"])
        counting = _Timed(cluster.count_tokens)
        if files is not None:
            corp = counting.timed(lambda: CountedCorpus(spec_name(corpus), cluster.count_parts(files, fields), fields))
            source: Callable[[int, int], list[str] | Slice] = corp.slice
        else:
            texts = [d.text for d in corp]
            source = lambda first, last: texts[first:last]  # noqa: E731
        settled = plan(options, corp, corpus, facts, counting, seq_len=seq_len, batch_size=bs, backend=options.backend,
                       backend_record=info["backend"], shares=True, counts=getattr(corp, "counts", None))
        first, end, target = settled.spec.first_window, settled.stop, settled.spec.windows
        share = _share_size(ray_options.share_windows, target, bs, n)
        meta = settled.meta
        meta["size"] = announce_size(options, info["model"], target, seq_len)
        meta["ray"] = {"share_windows": share}
        total = settled.stats.build("cpu", backend="auto")
        done: set[int] = set()
        if run_dir is not None:
            meta = start_run(run_dir, meta, resume=options.resume)
            if isinstance(meta, Run):
                return meta
            before = int(meta["ray"]["share_windows"])
            require(ray_options.share_windows is None or share == before,
                    f"--resume refused: {str(out_path)!r} was cut into shares of {before} windows",
                    "resume with the same --share-windows, or without it")
        shares = plan_shares(settled.counts, seq_len - facts.specials, end, meta["ray"]["share_windows"], start=first)
        saved = run_dir.load_checkpoint(contiguous=False) if run_dir is not None else None
        if saved is not None:
            total = CorpusStats.from_state_dict(saved[0])
            done = _finished_shares(run_dir.checkpoint_parts(), shares, out_path, first)
        settings = ShareSettings(settled.stats, bs, options.sentence_splitter, first)
        resumed = sum(s.windows for s in shares if s.index in done)
        started = time.perf_counter()
        driven = _drive(cluster, shares, source, settings, total, done, run_dir, options.checkpoint_every, options.progress,
                        target, resumed, stop)
        elapsed = time.perf_counter() - started
        meta["ray"].update({"address": ray_options.address, "workers": n, "cpus_per_worker": ray_options.cpus_per_actor,
                            "gpus_per_worker": ray_options.gpus_per_actor, "ray_version": cluster.ray.__version__,
                            "shares": len(shares), "startup_seconds": round(cluster.startup_seconds, 3),
                            "count_seconds": round(counting.seconds, 3), "shares_redone": len(driven.redone),
                            "redone": driven.redone, "workers_lost": driven.lost, "resumed_windows": resumed,
                            "worker_seconds": {k: round(v, 3) for k, v in sorted(driven.seconds.items())}})
        if driven.attention is not None:
            meta.setdefault("attention", driven.attention)
        meta["statistics_backend"] = driven.backend()
        meta["memory"] = {"driver": peak_memory(torch.device("cpu"))}  # the workers' own peaks stay on their nodes
        return finish_run(meta, total, (info["name"], corp.name), elapsed, target - resumed, run_dir, driven.parts)


class _Timed:
    """``count`` with the seconds its calls took (run.json's ``count_seconds``)."""

    def __init__(self, count: Callable[[list[str]], np.ndarray]) -> None:
        self.count, self.seconds = count, 0.0

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.timed(lambda: self.count(texts))

    def timed(self, call: Callable[[], T]) -> T:
        """``call()``, its seconds added."""
        t = time.perf_counter()
        try:
            return call()
        finally:
            self.seconds += time.perf_counter() - t


@dataclass
class _Driven:
    """What :func:`_drive` leaves: the shares run more than once (``{"share", "windows", "attempts"}``),
    window tables not yet checkpointed, the workers' attention and statistics-backend records, and
    their seconds per step of a share summed (:class:`headsim.runs.ray_worker.Worker.run`)."""

    redone: list[dict]
    lost: int  # workers given up on (their restarts spent, e.g. their node gone): their shares ran elsewhere
    parts: list
    attention: str | None
    backends: list[dict]
    seconds: dict[str, float]

    def backend(self) -> dict:
        """The workers' records as one, as :meth:`headsim.runs.engine.Engine.backend_record` has it (a key
        on which workers differ lists their values)."""
        record = {}
        for key in ("requested", "chosen", "ran"):
            values = sorted({b[key] for b in self.backends})
            record[key] = values[0] if len(values) == 1 else values
        return {**record, "fallbacks": [f for b in self.backends for f in b["fallbacks"]]}


def _drive(cluster: Cluster, shares: list[Share], source: Callable[[int, int], list[str] | Slice], settings: ShareSettings,
           total, done: set[int],
           run_dir: RunDir | None, checkpoint_every: int | None, progress, target: int, resumed: int,
           stop) -> _Driven:
    """Run every share not in ``done`` on the workers, adding each state into ``total`` as it arrives
    and checkpointing into ``run_dir`` when due, or when ``stop`` (:class:`~headsim.interrupts.StopRequests`)
    records a signal: then it raises :class:`~headsim.interrupts.Interrupted`. A share goes out with
    ``source(first_text, last_text)``: its texts, or the corpus parts holding them. Shows one progress bar."""
    ray = cluster.ray
    pool = _Pool(cluster.actors, [s for s in shares if s.index not in done],
                 lambda actor, s: actor.run.remote(s, source(s.first_text, s.last_text), settings))
    finished, shown, since_save, last_save = resumed, resumed, 0, time.perf_counter()
    attempts: dict[int, int] = {}
    driven = _Driven([], 0, [], None, [], {})
    patience, seen, moved = timeout(), None, time.monotonic()

    def save() -> None:
        nonlocal since_save, last_save
        run_dir.save_checkpoint(total.state_dict(), finished, driven.parts)
        driven.parts, since_save, last_save = [], 0, time.perf_counter()

    with ProgressBar(progress, target, resumed) as advance:

        def refresh() -> None:
            nonlocal shown, seen, moved
            reports = cluster.get([cluster.tracker.snapshot.remote()], "report progress", seconds=patience)[0]
            attempts.update({share: len(runs) for share, runs in reports.items()})
            now = min(target, finished + sum(max(runs.values()) for share, runs in reports.items() if share not in done))
            if now > shown:
                advance(now - shown)
                shown = now
            state = (finished, sorted((k, sorted(v.items())) for k, v in reports.items()))
            if state != seen:  # a batch done, a share begun (again) or finished: the run moves
                seen, moved = state, time.monotonic()

        while pool.has_next():
            try:
                got = pool.next(ray, POLL_SECONDS)
            except ray.exceptions.RayError as exc:
                failure = _worker_error(exc)
                if run_dir is not None and driven.parts:  # keep what finished: --resume runs only the rest
                    save()
                raise failure from None
            if got is None:
                refresh()
            if got is None and time.monotonic() - moved > patience:
                if run_dir is not None and driven.parts:
                    save()
                raise HeadsimError(f"no Ray worker reported progress for {patience:g} s ({finished} of {target} windows done)",
                                   "check the cluster (ray status: dead nodes, pending actors); "
                                   + (f"continue with headsim analyze --out {run_dir.path} --resume --engine ray"
                                      if run_dir is not None else "run it again")
                                   + f"; a slow worker may need more: set {TIMEOUT_ENV} to more seconds")
            if got is not None:
                total.merge(CorpusStats.from_state_dict(got["state"]))
                done.add(got["index"])
                finished += shares[got["index"]].windows
                since_save += shares[got["index"]].windows
                driven.attention = driven.attention or got["attention"]
                driven.backends.append(got["backend"])
                for step, seconds in got["seconds"].items():
                    driven.seconds[step] = driven.seconds.get(step, 0.0) + seconds
                if run_dir is not None:  # in memory a run keeps no windows (as the single process)
                    driven.parts.append(got["windows"])
                refresh()
            due = got is not None and ((time.perf_counter() - last_save >= CHECKPOINT_SECONDS) if checkpoint_every is None
                                       else since_save >= checkpoint_every)
            if run_dir is not None and (due or stop.signum is not None) and pool.has_next() and driven.parts:
                save()
            if stop.signum is not None and pool.has_next():
                raise stopped(stop.signum, finished, target, run_dir, "ray")
    driven.lost = pool.lost
    driven.redone = [{"share": i, "windows": [shares[i].start, shares[i].stop], "attempts": n}
                     for i, n in sorted(attempts.items()) if n > 1]
    return driven


class _Pool:
    """Shares handed to idle workers one at a time (a slow worker simply gets fewer), ``submit(actor, share)``
    starting one. A worker that Ray gives up on (:class:`ray.exceptions.RayActorError`: its restarts spent,
    its node gone) costs no share: the share goes to the next idle worker, and the worker gets more shares
    only while it has failed no more than :data:`~headsim.runs.ray_cluster.RESTARTS` times (a restarted
    actor serves again); the run stops only when no worker is left."""

    def __init__(self, actors: list, shares: list[Share], submit: Callable) -> None:
        self.idle, self.todo, self.submit = list(actors), list(shares), submit
        self.running: dict = {}  # object ref -> (share, actor)
        self.failures: dict[int, int] = {}
        self.lost = 0

    def has_next(self) -> bool:
        return bool(self.running or self.todo)

    def _feed(self) -> None:
        while self.idle and self.todo:
            actor, share = self.idle.pop(0), self.todo.pop(0)
            self.running[self.submit(actor, share)] = (share, actor)

    def next(self, ray, seconds: float) -> dict | None:
        """The next finished share's result, or ``None`` after ``seconds`` without one; a worker's own
        error (:class:`ray.exceptions.RayTaskError`) is raised."""
        self._feed()
        require(bool(self.running), "every Ray worker was lost", "check the cluster (ray status: dead nodes) and run again with --resume")
        ready, _ = ray.wait(list(self.running), num_returns=1, timeout=seconds)
        if not ready:
            return None
        share, actor = self.running.pop(ready[0])
        try:
            got = ray.get(ready[0])
        except ray.exceptions.RayActorError:
            self.todo.insert(0, share)
            key = id(actor)
            self.failures[key] = self.failures.get(key, 0) + 1
            if self.failures[key] <= RESTARTS:
                self.idle.append(actor)
            else:
                self.lost += 1
            if not self.idle and not self.running:
                raise
            return None
        self.idle.append(actor)
        return got
