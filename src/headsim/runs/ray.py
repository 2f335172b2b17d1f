"""`headsim analyze --engine ray`: one run's corpus statistics spread over a Ray cluster, exactly.

Plan → shares → exact merge:

1. The driver reads the corpus (:func:`headsim.corpus.load_corpus`: local specs and URLs)
   and starts the workers, Ray actors (:class:`Worker`) that each hold one copy of the model.
2. The workers count every text's tokens (blocks of texts, in parallel). From the counts the driver
   plans the run with the single process's own step (:func:`headsim.runs.plan.plan`): the packed
   windows numbered once, as the single process cuts them, and ``[0, windows)`` split into shares:
   ranges of whole batches (:func:`headsim.runs.shares.plan_shares`).
3. A worker windows its share itself (:func:`headsim.runs.shares.share_batches`: tokenises and splits the sentences of
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
again (``max_restarts`` and ``max_task_retries``: :data:`RESTARTS`); an exception inside a worker, or
the deadline, stops the run with one line after checkpointing the finished shares (resumable).
``--shard I/N`` (:func:`headsim.runs.plan.shard_range`) cuts shares from the part's first window.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import torch

from ..corpus import Corpus, load_corpus
from ..errors import HeadsimError, require
from ..interrupts import Deferred, StopRequests
from ..memory import peak_memory
from ..stats import CorpusStats
from ..model.load import as_loaded
from ..stats.backends import choose_backend
from ..windows import check_seq_len, token_counts, windows_table
from .engine import Engine, default_batch_size, prefetch
from .lifecycle import CHECKPOINT_SECONDS, finish_run, start_run, stopped
from .run import Run
from .options import RayOptions, RunOptions
from .plan import ModelFacts, StatsRecipe, plan
from .progress import ProgressBar, ShareProgress
from .rundir import RunDir
from .shares import Share, plan_shares, share_batches

INSTALL = 'pip install "headsim[ray]"'
RESTARTS = 3  # restarts of a dead actor (and retries of its share) before the run stops
COUNT_CHARS = 1 << 20  # characters of text per token-counting call
MAX_SHARE_BATCHES = 64  # a share's state and windows travel to the driver once per share
POLL_SECONDS = 0.5
TIMEOUT_ENV = "HEADSIM_RAY_TIMEOUT"
TIMEOUT_SECONDS = 600.0  # start-up, the token count, and any stretch of a run in which no worker reports progress


def timeout() -> float:
    """Seconds the driver waits on the workers without any progress before it stops the run:
    ``$HEADSIM_RAY_TIMEOUT``, else :data:`TIMEOUT_SECONDS`."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    if not value:
        return TIMEOUT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    require(seconds > 0, f"{TIMEOUT_ENV}={value!r} is not a positive number of seconds",
            f"set {TIMEOUT_ENV} to the seconds to wait, e.g. 600, or unset it")
    return seconds


def import_ray():
    """The ``ray`` module, or a one-line error naming the install command."""
    try:
        import ray
    except ImportError:
        raise HeadsimError("the Ray engine needs Ray, which is not installed", f"install it: {INSTALL}") from None
    return ray


# ------------------------------------------------------------------ the actors


@dataclass(frozen=True)
class ShareSettings:
    """What a worker needs to accumulate a share (all of it decides the numbers): the run's statistics
    (:class:`~headsim.runs.plan.StatsRecipe`) and how its windows are cut."""

    stats: StatsRecipe
    batch_size: int
    sentence_splitter: str
    first_window: int = 0  # the run's first window of the corpus (a --shard): its windows.parquet counts from there


class Worker:
    """One model copy on the cluster (a Ray actor): counts tokens, accumulates shares.

    Args:
        model: a model name or path for :func:`~headsim.load_model` (must resolve on the worker's
            node), or a :class:`~headsim.model.load.LoadedModel` shipped by value.
        progress: the name of the run's :class:`~headsim.runs.progress.ShareProgress` actor; every batch reports the windows done
            in its share there.
    """

    def __init__(self, model, device: str | None, dtype: str | None, threads: int, progress: str) -> None:
        torch.set_num_threads(max(1, threads))
        self.progress = progress
        self.engine = None
        self.settings: ShareSettings | None = None
        try:  # a failure here would kill the actor with its traceback as the message: keep it for describe()
            self.loaded = as_loaded(model, device=device, dtype=dtype)
        except Exception as exc:
            self.failure: Exception | None = exc
        else:
            self.failure = None

    def describe(self, seq_len: int, backend: str = "auto") -> dict:
        """The model as the run records it, the statistics ``backend`` chosen for its device and the
        batch size it would pick at ``seq_len``; raises what loading the model raised, or the refusal
        of a named backend that cannot run here."""
        if self.failure is not None:
            raise self.failure
        m = self.loaded
        choice = choose_backend(backend, m.device)
        return {"backend": choice.record(), "model": m.describe(), "name": m.name, "source": m.source, "max_seq_len": m.max_seq_len,
                "extrapolates": m.extrapolates, "dtype": str(m.dtype).replace("torch.", ""), "device": str(m.device), "specials": m.framing.specials,
                "commit": m.commit, "batch_size": default_batch_size(m, min(seq_len, m.max_seq_len), choice.chosen)}

    def count(self, texts: list[str]) -> np.ndarray:
        """Tokens of each text, without special tokens."""
        return np.asarray(token_counts(self.loaded.tokenizer, texts), dtype=np.int64)

    def _engine(self, s: ShareSettings) -> Engine:
        if self.engine is None or self.settings != s:
            def fresh() -> CorpusStats:
                return s.stats.build(self.loaded.device)

            self.engine, self.settings = Engine(self.loaded, fresh(), fresh), s
        self.engine.stats.reset()
        return self.engine

    def run(self, share: Share, texts: list[str], settings: ShareSettings) -> dict:
        """Accumulate ``share`` from zero; returns its ``index``, the ``state`` (state_dict), its
        ``windows`` table and the engine's ``attention`` and ``backend`` records (as run.json has them)."""
        import pyarrow as pa
        import ray

        engine = self._engine(settings)
        tracker = ray.get_actor(self.progress)
        attempt, done, tables = uuid.uuid4().hex, 0, []
        # the attempt is registered before any work (and waited for): an actor killed mid-share may drop
        # its later, unawaited reports, but its attempt is already counted (run.json: shares_redone)
        ray.get(tracker.report.remote(share.index, attempt, 0))
        source = share_batches(texts, share, self.loaded.tokenizer, settings.stats.seq_len, settings.batch_size,
                               settings.sentence_splitter, self.loaded.framing)
        with closing(prefetch(source)) as batches:
            for w in batches:
                engine.process_safely(w)
                tables.append(windows_table(share.start - settings.first_window + done, w.input_ids, w.attention_mask,
                                            w.sentence_ids))
                done += len(w)
                tracker.report.remote(share.index, attempt, done)
        return {"index": share.index, "state": engine.stats.state_dict(), "windows": pa.concat_tables(tables),
                "attention": engine.attention_source(), "backend": engine.backend_record()}


# ------------------------------------------------------------------ the driver


def _worker_error(exc: BaseException) -> HeadsimError:
    """One line from a failed worker: its own HeadsimError, or the exception's type and first line."""
    cause = getattr(exc, "cause", None) or exc
    if isinstance(cause, HeadsimError):
        return HeadsimError(f"a Ray worker stopped: {cause.problem}", cause.fix)
    line = (str(cause).strip().splitlines() or [""])[0]
    return HeadsimError(f"a Ray worker stopped: {type(cause).__name__}: {line}",
                        "fix the cause and run again; with --resume a run directory keeps its finished shares")


class Cluster:
    """The run's workers and progress actor on a Ray cluster (joined, or started for the run), all
    ended on exit; :attr:`startup_seconds`: joining, spawning the workers and loading the model."""

    def __init__(self, address: str | None, model, device: str | None, dtype: str | None, resources: RayOptions,
                 seq_len: int, backend: str = "auto") -> None:
        self.ray = import_ray()
        self.address, self.model, self.device, self.dtype = address, model, device, dtype
        self.resources, self.seq_len, self.backend = resources, seq_len, backend
        self.actors: list = []
        self.tracker = None
        self.started_here = False
        self.earlier: set[int] = set()

    def __enter__(self) -> "Cluster":
        try:
            return self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _start(self) -> "Cluster":
        ray, r = self.ray, self.resources
        t0 = time.perf_counter()
        self.started_here = not ray.is_initialized()  # set first: a failed ray.init is shut down too
        self.earlier = {p.pid for p in _descendants()}
        _connect(ray, self.address)
        run_id = uuid.uuid4().hex[:8]
        progress = f"headsim-progress-{run_id}"
        self.tracker = ray.remote(num_cpus=0)(ShareProgress).options(name=progress).remote()
        # an object is put once and referenced here for the whole run: a restarted actor reads it again
        self.model_ref = self.model if self.model is None or isinstance(self.model, str) else ray.put(self.model)
        count = r.count(ray.cluster_resources())  # refused here, before any actor, if the cluster cannot hold them
        worker = ray.remote(Worker)
        self.actors = [worker.options(num_cpus=r.cpus_per_actor, num_gpus=r.gpus_per_actor, max_restarts=RESTARTS, max_task_retries=RESTARTS,
                                      name=f"headsim-worker-{i}-{run_id}")
                       .remote(self.model_ref, self.device, self.dtype, max(1, int(r.cpus_per_actor)), progress)
                       for i in range(count)]
        refs = [a.describe.remote(self.seq_len, self.backend) for a in self.actors]
        self.info = self.get(refs, "start", lambda ready: f"{ready} of {len(refs)} Ray workers started (each loads the model)")[0]
        self.startup_seconds = time.perf_counter() - t0
        return self

    def get(self, refs, doing: str, progress: Callable[[int], str] | None = None, seconds: float | None = None):
        """``ray.get`` of ``refs`` within :func:`timeout` seconds (waiting in short steps, so SIGINT and
        SIGTERM are handled at once); a worker's failure, or the deadline, as one line naming what was
        being done (``doing``; ``progress(ready)`` says how far it got)."""
        ray = self.ray
        seconds = timeout() if seconds is None else seconds
        deadline, pending = time.monotonic() + seconds, list(refs)
        try:
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    got = f" ({progress(len(refs) - len(pending))})" if progress is not None else ""
                    raise HeadsimError(f"the Ray workers did not {doing} within {seconds:g} s{got}",
                                       f"check the cluster (ray status: resources, pending actors, dead nodes); "
                                       f"a slow cluster may take longer: set {TIMEOUT_ENV} to more seconds")
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=min(POLL_SECONDS, left))
            return ray.get(list(refs))
        except ray.exceptions.RayError as exc:
            raise _worker_error(exc) from None

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        """Tokens of every text, counted by the workers in blocks of about :data:`COUNT_CHARS` characters
        (block ``i`` on worker ``i mod workers``; each worker's calls queue on it)."""
        blocks = list(_blocks(texts))
        refs = [self.actors[i % len(self.actors)].count.remote(b) for i, b in enumerate(blocks)]
        return np.concatenate(self.get(refs, "count the corpus's tokens",
                                       lambda ready: f"{ready} of {len(refs)} blocks counted"))

    def __exit__(self, *exc) -> bool:
        """End every actor this run started and, when this run started the connection, the connection
        (a local cluster started here with it, and every process it started), however the run ends (an
        interrupted start-up too); a signal meanwhile waits until this is done."""
        ray = self.ray
        with Deferred():
            for a in [*self.actors, *([self.tracker] if self.tracker is not None else [])]:
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - an actor already gone
                    pass
            self.actors, self.tracker = [], None
            if self.started_here:
                # ray.shutdown ends the processes ray.init started, not the agents its raylet started (on their
                # own they notice the raylet's end only after a minute)
                started = [p for p in _descendants() if p.pid not in self.earlier and _is_ray(p)]
                ray.shutdown()
                _end(started)
        return False


def _descendants() -> list[psutil.Process]:
    """The processes below this one."""
    return psutil.Process().children(recursive=True)


def _is_ray(process: psutil.Process) -> bool:
    """Whether ``process`` is one of Ray's (its name or command line names Ray)."""
    try:
        return "ray" in process.name().lower() or any("ray" in part.lower() for part in process.cmdline())
    except psutil.Error:
        return False


def _end(processes: list[psutil.Process], grace: float = 3.0) -> None:
    """End ``processes``: SIGTERM, then SIGKILL for any still running after ``grace`` seconds (psutil checks
    that a pid still names the same process before signalling it)."""
    running = [p for p in processes if p.is_running()]
    for p in running:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(running, timeout=grace)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=grace)


def _connect(ray, address: str | None) -> bool:
    """Join the cluster at ``address`` (``None``: a local one started here); whether this call made
    the connection (and so ends it)."""
    if ray.is_initialized():
        return False
    _check_reachable(address)
    try:
        with Deferred():
            _init(ray, address)
    except (ImportError, ConnectionError, RuntimeError, ValueError) as exc:
        client = isinstance(exc, ImportError) or "ray[client]" in str(exc)  # ray:// needs the client's gRPC
        raise HeadsimError(f"cannot reach a Ray cluster at {address!r}: {str(exc).splitlines()[0]}",
                           'install the Ray client: pip install "ray[client]"' if client else
                           "start one (ray start --head, ray up, KubeRay) or pass --address auto / ray://HOST:10001") from None
    return True


def _init(ray, address: str | None) -> None:
    """``ray.init`` quietly: a local cluster without a dashboard (``address`` ``None``) or the one at ``address``."""
    if address is None:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    else:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)


def _check_reachable(address: str | None, seconds: float = 5.0) -> None:
    """A ``HOST:PORT`` or ``ray://HOST:PORT`` address must accept a connection (Ray itself waits minutes)."""
    import re
    import socket

    m = re.fullmatch(r"(?:ray://)?\[?([^\[\]/]+?)\]?:(\d+)", address or "")
    if m is None:
        return
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=seconds).close()
    except OSError as exc:
        raise HeadsimError(f"cannot reach a Ray cluster at {address!r}: {exc.strerror or exc}",
                           "check the address (the head's GCS port, 6379 by default, or ray://HOST:10001) and that the cluster is up") from None


def _share_size(requested: int | None, target: int, batch: int, workers: int) -> int:
    """Windows per share: a whole number of batches; by default about four shares per worker, at most
    :data:`MAX_SHARE_BATCHES` batches."""
    if requested is None:
        batches = -(-target // batch)
        return batch * min(MAX_SHARE_BATCHES, max(1, -(-batches // (4 * workers))))
    return batch * max(1, -(-int(requested) // batch))


def _blocks(texts: list[str], chars: int = COUNT_CHARS) -> Iterator[list[str]]:
    block, size = [], 0
    for t in texts:
        block.append(t)
        size += len(t)
        if size >= chars:
            yield block
            block, size = [], 0
    if block:
        yield block


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
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus, text_field=options.text_field,
                                                                 text_column=options.text_column)
    texts = [d.text for d in corp]
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
        settled = plan(options, corp, corpus, facts, counting, seq_len=seq_len, batch_size=bs, backend=options.backend,
                       backend_record=info["backend"], shares=True)
        first, end, target = settled.spec.first_window, settled.stop, settled.spec.windows
        share = _share_size(ray_options.share_windows, target, bs, n)
        meta = settled.meta
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
        driven = _drive(cluster, shares, texts, settings, total, done, run_dir, options.checkpoint_every, options.progress,
                        target, resumed, stop)
        elapsed = time.perf_counter() - started
        meta["ray"].update({"address": ray_options.address, "workers": n, "cpus_per_worker": ray_options.cpus_per_actor,
                            "gpus_per_worker": ray_options.gpus_per_actor, "ray_version": cluster.ray.__version__,
                            "shares": len(shares), "startup_seconds": round(cluster.startup_seconds, 3),
                            "count_seconds": round(counting.seconds, 3), "shares_redone": driven.redone,
                            "resumed_windows": resumed})
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
        t = time.perf_counter()
        try:
            return self.count(texts)
        finally:
            self.seconds += time.perf_counter() - t


@dataclass
class _Driven:
    """What :func:`_drive` leaves: shares run more than once, window tables not yet checkpointed, and
    the workers' attention and statistics-backend records."""

    redone: int
    parts: list
    attention: str | None
    backends: list[dict]

    def backend(self) -> dict:
        """The workers' records as one, as :meth:`headsim.runs.engine.Engine.backend_record` has it (a key
        on which workers differ lists their values)."""
        record = {}
        for key in ("requested", "chosen", "ran"):
            values = sorted({b[key] for b in self.backends})
            record[key] = values[0] if len(values) == 1 else values
        return {**record, "fallbacks": [f for b in self.backends for f in b["fallbacks"]]}


def _drive(cluster: Cluster, shares: list[Share], texts: list[str], settings: ShareSettings, total, done: set[int],
           run_dir: RunDir | None, checkpoint_every: int | None, progress, target: int, resumed: int,
           stop) -> _Driven:
    """Run every share not in ``done`` on the workers, adding each state into ``total`` as it arrives
    and checkpointing into ``run_dir`` when due, or when ``stop`` (:class:`~headsim.interrupts.StopRequests`)
    records a signal: then it raises :class:`~headsim.interrupts.Interrupted`. Shows one progress bar."""
    ray = cluster.ray
    pool = ray.util.ActorPool(cluster.actors)
    for s in shares:
        if s.index not in done:  # texts are sliced when an idle worker takes the share
            pool.submit(lambda actor, s: actor.run.remote(s, texts[s.first_text:s.last_text], settings), s)
    finished, shown, since_save, last_save = resumed, resumed, 0, time.perf_counter()
    attempts: dict[int, int] = {}
    driven = _Driven(0, [], None, [])
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
                got = pool.get_next_unordered(timeout=POLL_SECONDS)
            except TimeoutError:
                got = None
                refresh()
            except ray.exceptions.RayError as exc:
                failure = _worker_error(exc)
                if run_dir is not None and driven.parts:  # keep what finished: --resume runs only the rest
                    save()
                raise failure from None
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
                if run_dir is not None:  # in memory a run keeps no windows (as the single process)
                    driven.parts.append(got["windows"])
                refresh()
            due = got is not None and ((time.perf_counter() - last_save >= CHECKPOINT_SECONDS) if checkpoint_every is None
                                       else since_save >= checkpoint_every)
            if run_dir is not None and (due or stop.signum is not None) and pool.has_next() and driven.parts:
                save()
            if stop.signum is not None and pool.has_next():
                raise stopped(stop.signum, finished, target, run_dir, "ray")
    driven.redone = sum(1 for n in attempts.values() if n > 1)
    return driven
