"""`headsim analyze --engine ray`: one run's corpus statistics spread over a Ray cluster, exactly.

Plan → shares → exact merge:

1. The driver reads the corpus (:func:`headsim.corpus.load_corpus`: local specs and URLs)
   and starts the workers, Ray actors (:class:`Worker`) that each hold one copy of the model.
2. The workers count every text's tokens (blocks of texts, in parallel). From the counts the driver
   numbers the packed windows once, as the single process cuts them, and splits ``[0, windows)``
   into shares: ranges of whole batches (:func:`plan_shares`).
3. A worker windows its share itself (:func:`share_batches`: tokenises and splits the sentences of
   only the texts the share touches, packing from the share's first token), feeds the same batches
   as the single process through :class:`headsim.analysis.Engine` into a zeroed
   :class:`~headsim.stats.CorpusStats` and returns its state and the share's ``windows.parquet`` rows.
4. The driver adds the states (:meth:`CorpusStats.merge`: counts exact, float sums equal to a
   single-process run's up to addition order) and writes the same run directory through
   :class:`headsim.rundir.RunDir` and the single process's own steps (:func:`headsim.analysis.start_run`,
   :func:`~headsim.analysis.finish_run`): marker, a lock the driver holds for the whole run, a
   checksummed checkpoint manifest, the atomic final commit. A checkpoint holds the sum of the shares
   finished so far and each one's windows as a part from its first window; ``resume`` runs only the
   shares the verified parts do not hold.

The workers asked for are checked against the cluster's resources before any actor starts
(:meth:`Resources.count`: refused in one line when the cluster cannot hold them), and every wait on
the actors has a deadline (:func:`timeout`): the start-up, the token count, and any stretch of the
run in which no worker reports progress. An actor that dies is restarted by Ray and its share runs
again (``max_restarts`` and ``max_task_retries``: :data:`RESTARTS`); an exception inside a worker, or
the deadline, stops the run with one line after checkpointing the finished shares (resumable).
``--shard I/N`` (:func:`headsim.analysis.shard_range`) cuts shares from the part's first window.
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

from . import rundir
from .errors import HeadsimError, require
from .windows import Framing, Windows

INSTALL = 'pip install "headsim[ray]"'
ENGINES = ("local", "ray")
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
TOKENIZE_TEXTS = 32  # texts tokenised and sentence-split together inside a share


def import_ray():
    """The ``ray`` module, or a one-line error naming the install command."""
    try:
        import ray
    except ImportError:
        raise HeadsimError("the Ray engine needs Ray, which is not installed", f"install it: {INSTALL}") from None
    return ray


# ------------------------------------------------------------------ shares: plan and windows


@dataclass(frozen=True)
class Share:
    """Windows ``[start, stop)`` of the packed corpus, and the texts they come from.

    ``texts`` are ``[first_text, last_text)``; the share's tokens begin ``skip`` tokens into the
    first text and number ``tokens``.
    """

    index: int
    start: int
    stop: int
    first_text: int
    last_text: int
    skip: int
    tokens: int

    @property
    def windows(self) -> int:
        return self.stop - self.start


def plan_shares(counts: np.ndarray, content: int, windows: int, share_windows: int, *, start: int = 0) -> list[Share]:
    """Cut packed windows ``[start, windows)`` of ``content`` text tokens each (:meth:`Framing.content`),
    of texts with ``counts`` tokens, into shares of ``share_windows`` (the last may be shorter)."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    require(0 <= start < windows <= -(-total // content), f"windows {start}..{windows} asked of {total} tokens",
            "ask for at most the windows the corpus gives")
    require(share_windows >= 1, f"share_windows {share_windows} must be at least 1", "pass a positive number of windows")
    shares = []
    for index, start in enumerate(range(start, windows, share_windows)):
        stop = min(start + share_windows, windows)
        a, b = start * content, min(stop * content, total)
        first = int(np.searchsorted(ends, a, side="right"))
        last = int(np.searchsorted(ends, b, side="left")) + 1
        shares.append(Share(index, start, stop, first, last, a - int(ends[first] - counts[first]), b - a))
    return shares


def share_batches(texts: list[str], share: Share, tokenizer, seq_len: int, batch_size: int,
                  sentence_splitter: str, framing: Framing) -> Iterator[Windows]:
    """The share's windows in batches of ``batch_size``: exactly windows ``[start, stop)`` of
    :func:`headsim.windows.iter_windows` over the whole corpus with ``pack=True`` and ``framing``,
    ``texts`` being the corpus texts ``[first_text, last_text)``."""
    from .windows import pack_windows, tokenize

    streams = (s for i in range(0, len(texts), TOKENIZE_TEXTS)  # a few texts at a time: the model starts early
               for s in tokenize(texts[i:i + TOKENIZE_TEXTS], tokenizer, first_index=share.first_text + i,
                                 sentence_splitter=sentence_splitter))
    made = 0
    for w in pack_windows(streams, seq_len, tokenizer, framing, batch_windows=batch_size, skip=share.skip,
                          take=share.tokens, token_strings=False):
        made += len(w)
        yield w
    require(made == share.windows, f"share {share.index} gave {made} windows, not {share.windows}",
            "the corpus changed while it was read; start the run again")


# ------------------------------------------------------------------ the actors


@dataclass(frozen=True)
class Settings:
    """What a worker needs to accumulate a share (all of it decides the numbers)."""

    seq_len: int
    threshold: float
    top_k_columns: int
    batch_size: int
    sentence_splitter: str
    backend: str
    first_window: int = 0  # the run's first window of the corpus (a --shard): its windows.parquet counts from there


class Worker:
    """One model copy on the cluster (a Ray actor): counts tokens, accumulates shares.

    Args:
        model: a model name or path for :func:`~headsim.load_model` (must resolve on the worker's
            node), or a :class:`~headsim.models.LoadedModel` shipped by value.
        progress: the name of the run's :class:`Progress` actor; every batch reports the windows done
            in its share there.
    """

    def __init__(self, model, device: str | None, dtype: str | None, threads: int, progress: str) -> None:
        import torch

        from .models import as_loaded

        torch.set_num_threads(max(1, threads))
        self.progress = progress
        self.engine = None
        self.settings: Settings | None = None
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
        from .analysis import default_batch_size
        from .stats import choose_backend

        if self.failure is not None:
            raise self.failure
        m = self.loaded
        choice = choose_backend(backend, m.device)
        return {"backend": choice.record(), "model": m.describe(), "name": m.name, "source": m.source, "max_seq_len": m.max_seq_len,
                "extrapolates": m.extrapolates, "dtype": str(m.dtype).replace("torch.", ""), "device": str(m.device), "specials": m.framing.specials,
                "batch_size": default_batch_size(m, min(seq_len, m.max_seq_len), choice.chosen)}

    def count(self, texts: list[str]) -> np.ndarray:
        """Tokens of each text, without special tokens."""
        from .windows import token_counts

        return np.asarray(token_counts(self.loaded.tokenizer, texts), dtype=np.int64)

    def _engine(self, s: Settings):
        if self.engine is None or self.settings != s:
            from .analysis import Engine
            from .stats import CorpusStats

            def fresh() -> CorpusStats:
                return CorpusStats(self.loaded.n_layers, self.loaded.n_heads, s.seq_len, threshold=s.threshold,
                                   top_k_columns=s.top_k_columns, device=self.loaded.device, backend=s.backend)

            self.engine, self.settings = Engine(self.loaded, fresh(), fresh), s
        self.engine.stats.reset()
        return self.engine

    def run(self, share: Share, texts: list[str], settings: Settings) -> dict:
        """Accumulate ``share`` from zero; returns its ``index``, the ``state`` (state_dict), its
        ``windows`` table and the engine's ``attention`` and ``backend`` records (as run.json has them)."""
        import pyarrow as pa

        from .analysis import prefetch

        import ray

        engine = self._engine(settings)
        tracker = ray.get_actor(self.progress)
        attempt, done, tables = uuid.uuid4().hex, 0, []
        # the attempt is registered before any work (and waited for): an actor killed mid-share may drop
        # its later, unawaited reports, but its attempt is already counted (run.json: shares_redone)
        ray.get(tracker.report.remote(share.index, attempt, 0))
        source = share_batches(texts, share, self.loaded.tokenizer, settings.seq_len, settings.batch_size,
                               settings.sentence_splitter, self.loaded.framing)
        with closing(prefetch(source)) as batches:
            for w in batches:
                engine.process_safely(w)
                tables.append(rundir.windows_table(share.start - settings.first_window + done, w.input_ids, w.attention_mask,
                                                   w.sentence_ids))
                done += len(w)
                tracker.report.remote(share.index, attempt, done)
        return {"index": share.index, "state": engine.stats.state_dict(), "windows": pa.concat_tables(tables),
                "attention": engine.attention_source(), "backend": engine.backend_record()}


class Progress:
    """Windows done per share and attempt (a Ray actor the workers report to and the driver polls)."""

    def __init__(self) -> None:
        self.done: dict[int, dict[str, int]] = {}

    def report(self, share: int, attempt: str, done: int) -> None:
        self.done.setdefault(share, {})[attempt] = done

    def snapshot(self) -> dict[int, dict[str, int]]:
        return self.done


# ------------------------------------------------------------------ the driver


def _worker_error(exc: BaseException) -> HeadsimError:
    """One line from a failed worker: its own HeadsimError, or the exception's type and first line."""
    cause = getattr(exc, "cause", None) or exc
    if isinstance(cause, HeadsimError):
        return HeadsimError(f"a Ray worker stopped: {cause.problem}", cause.fix)
    line = (str(cause).strip().splitlines() or [""])[0]
    return HeadsimError(f"a Ray worker stopped: {type(cause).__name__}: {line}",
                        "fix the cause and run again; with --resume a run directory keeps its finished shares")


@dataclass(frozen=True)
class Resources:
    """Ray workers and what each reserves."""

    workers: int | None
    cpus: float
    gpus: float

    def check(self) -> "Resources":
        for name, value in (("gpus_per_worker", self.gpus), ("cpus_per_worker", self.cpus)):
            require(isinstance(value, (int, float)) and value >= 0, f"{name} {value!r} must be 0 or more",
                    "pass a number of CPUs/GPUs")
        require(self.gpus > 0 or self.cpus > 0, "a Ray worker must reserve some CPU or GPU",
                "pass --cpus-per-worker or --gpus-per-worker above 0")
        require(self.workers is None or (isinstance(self.workers, int) and self.workers >= 1),
                f"workers {self.workers!r} must be at least 1 with the Ray engine",
                "pass a positive number of Ray workers, or leave it unset for one per CPU/GPU of the cluster")
        return self

    def fit(self, have: dict) -> int:
        """How many workers the cluster's resources ``have`` (``ray.cluster_resources()``) hold at once."""
        fits = [int(have.get(kind, 0) // need + 1e-9) for kind, need in (("CPU", self.cpus), ("GPU", self.gpus)) if need > 0]
        return min(fits)

    def count(self, have: dict) -> int:
        """The workers asked for, else as many as the cluster's GPUs and CPUs hold; refused in one line,
        before any actor starts, when the cluster cannot hold them all at once (a worker that can never
        be placed would wait for ever)."""
        fit = self.fit(have)
        per = ", ".join(f"{need:g} {kind}" for kind, need in (("CPU", self.cpus), ("GPU", self.gpus)) if need > 0)
        total = ", ".join(f"{have.get(kind, 0):g} {kind}s" for kind in ("CPU", "GPU"))
        require(fit >= 1, f"the Ray cluster has {total}: not enough for one worker of {per}",
                "add nodes to the cluster, or lower --cpus-per-worker / --gpus-per-worker")
        if self.workers is None:
            return fit
        require(self.workers <= fit, f"--workers {self.workers} asked for, but the Ray cluster has {total}: room for {fit} "
                f"worker{'s' if fit != 1 else ''} of {per}", f"pass --workers {fit} or fewer (or leave it unset), "
                "lower --cpus-per-worker / --gpus-per-worker, or add nodes to the cluster")
        return self.workers


class Cluster:
    """The run's workers and progress actor on a Ray cluster (joined, or started for the run), all
    ended on exit; :attr:`startup_seconds`: joining, spawning the workers and loading the model."""

    def __init__(self, address: str | None, model, device: str | None, dtype: str | None, resources: Resources,
                 seq_len: int, backend: str = "auto") -> None:
        self.ray = import_ray()
        self.address, self.model, self.device, self.dtype = address, model, device, dtype
        self.resources, self.seq_len, self.backend = resources, seq_len, backend
        self.actors: list = []
        self.tracker = None
        self.started_here = False

    def __enter__(self) -> "Cluster":
        try:
            return self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _start(self) -> "Cluster":
        ray, r = self.ray, self.resources
        t0 = time.perf_counter()
        self.started_here = not ray.is_initialized()  # set first: an interrupted ray.init is shut down too
        _connect(ray, self.address)
        run_id = uuid.uuid4().hex[:8]
        progress = f"headsim-progress-{run_id}"
        self.tracker = ray.remote(num_cpus=0)(Progress).options(name=progress).remote()
        # an object is put once and referenced here for the whole run: a restarted actor reads it again
        self.model_ref = self.model if self.model is None or isinstance(self.model, str) else ray.put(self.model)
        count = r.count(ray.cluster_resources())  # refused here, before any actor, if the cluster cannot hold them
        worker = ray.remote(Worker)
        self.actors = [worker.options(num_cpus=r.cpus, num_gpus=r.gpus, max_restarts=RESTARTS, max_task_retries=RESTARTS,
                                      name=f"headsim-worker-{i}-{run_id}")
                       .remote(self.model_ref, self.device, self.dtype, max(1, int(r.cpus)), progress)
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
        (a local cluster started here with it), however the run ends (an interrupted start-up too)."""
        ray = self.ray
        try:
            for a in [*self.actors, *([self.tracker] if self.tracker is not None else [])]:
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - an actor already gone
                    pass
        finally:
            self.actors, self.tracker = [], None
            if self.started_here and ray.is_initialized():
                ray.shutdown()
        return False


def _connect(ray, address: str | None) -> bool:
    """Join the cluster at ``address`` (``None``: a local one started here); whether this call made
    the connection (and so ends it)."""
    if ray.is_initialized():
        return False
    _check_reachable(address)
    try:
        if address is None:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ImportError, ConnectionError, RuntimeError, ValueError) as exc:
        client = isinstance(exc, ImportError) or "ray[client]" in str(exc)  # ray:// needs the client's gRPC
        raise HeadsimError(f"cannot reach a Ray cluster at {address!r}: {str(exc).splitlines()[0]}",
                           'install the Ray client: pip install "ray[client]"' if client else
                           "start one (ray start --head, ray up, KubeRay) or pass --address auto / ray://HOST:10001") from None
    return True


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
def _writing(out_path: Path | None, resume: bool, overwrite: bool) -> Iterator[rundir.RunDir | None]:
    """The run directory held for writing for the whole run (``None``: a run in memory)."""
    if out_path is None:
        yield None
        return
    with rundir.RunDir(out_path).writer(resume=resume, overwrite=overwrite) as run_dir:
        yield run_dir


def run_engine(engine: str = "ray", **params):
    """Run :func:`headsim.analysis.analyze` on ``engine`` (``"ray"``); ``params`` are analyze's, already
    checked there (threshold, windows, top_k_columns, checkpoint_every, resume, the output directory)."""
    require(engine in ENGINES, f"unknown engine {engine!r}", f"use one of {', '.join(ENGINES)}")
    return analyze_on_ray(**params)


def analyze_on_ray(model=None, corpus="default", *, windows: int | None = None, out=None, seq_len: int = 128,
                   threshold: float = 0.3, top_k_columns: int = 3, batch_size: int | None = None,
                   checkpoint_every: int | None = None, resume: bool = False, overwrite: bool = False,
                   allow_fewer: bool = True, device: str | None = None, dtype: str | None = None,
                   text_field: str = "text", text_column: str = "text", sentence_splitter: str = "pysbd",
                   workers: int | None = None, backend: str = "auto", progress: bool | Callable[[int, int], None] = True,
                   address: str | None = None, gpus_per_worker: float = 0.0, cpus_per_worker: float = 1.0,
                   share_windows: int | None = None, shard: tuple[int, int] | None = None):
    """:func:`headsim.analysis.analyze` on a Ray cluster (see the module); the same arguments, and:

    Args:
        workers: Ray workers (actors, one model copy each); default: as many as the cluster's CPUs
            (or GPUs, with ``gpus_per_worker``) allow.
        address: ``None`` starts a local cluster (or uses the one this process joined already);
            ``"auto"`` joins the cluster this node belongs to; ``"ray://HOST:10001"`` connects a client.
        gpus_per_worker, cpus_per_worker: resources each worker reserves (fractions share a device);
            a CPU worker runs ``int(cpus_per_worker)`` torch threads.
        share_windows: windows per share, rounded up to whole batches (default: about four shares per
            worker, at most 64 batches each).
    """
    import torch

    from .analysis import CorpusCount, Result, check_shard, finish_run, new_meta, shard_range, start_run, window_target
    from .memory import peak_memory
    from .corpus import Corpus, load_corpus
    from .interrupts import StopRequests
    from .runspec import RunSpec
    from .stats import CorpusStats
    from .windows import check_seq_len

    import_ray()
    shard = check_shard(shard)
    resources = Resources(workers, cpus_per_worker, gpus_per_worker).check()
    require(share_windows is None or (isinstance(share_windows, int) and share_windows >= 1),
            f"share_windows {share_windows!r} must be at least 1", "pass a positive number of windows")
    out_path = Path(out) if out is not None else None
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus, text_field=text_field, text_column=text_column)
    texts = [d.text for d in corp]
    # the run directory is checked and held before the cluster starts; a signal during the start-up stops it at
    # once (the cluster's exit ends every actor); from then on a first SIGINT/SIGTERM stops the run after the
    # share in hand, with a checkpoint
    with _writing(out_path, resume, overwrite) as run_dir, \
            Cluster(address, model, device, dtype, resources, seq_len, backend) as cluster, StopRequests() as stop:
        info, n = cluster.info, len(cluster.actors)
        seq_len = check_seq_len(seq_len, info["max_seq_len"], info.get("extrapolates", False))
        content = seq_len - info["specials"]
        t = time.perf_counter()
        counts = cluster.count_tokens(texts)
        counting = time.perf_counter() - t
        tokens = int(counts.sum())
        count = CorpusCount(-(-tokens // content), tokens, True)
        first, end = 0, window_target(corp, count, windows, seq_len, info["specials"], allow_fewer)
        if shard is not None:
            first, end = shard_range(end, shard)
        target = end - first
        bs = int(batch_size) if batch_size else int(info["batch_size"])
        spec = RunSpec(info["source"], corp.sha256, target, seq_len, threshold, top_k_columns, bs, info["dtype"],
                       sentence_splitter, first)
        meta = new_meta(info["model"], corp, corpus, count, spec, device=info["device"], backend=info["backend"],
                        engine="ray", shard=shard)
        share = _share_size(share_windows, target, bs, n)
        meta["ray"] = {"share_windows": share}
        total = CorpusStats(info["model"]["n_layers"], info["model"]["n_heads"], seq_len, threshold=threshold,
                            top_k_columns=top_k_columns)
        done: set[int] = set()
        if run_dir is not None:
            meta = start_run(run_dir, meta, resume=resume)
            if isinstance(meta, Result):
                return meta
            before = int(meta["ray"]["share_windows"])
            require(share_windows is None or share == before,
                    f"--resume refused: {str(out_path)!r} was cut into shares of {before} windows",
                    "resume with the same --share-windows, or without it")
        shares = plan_shares(counts, content, end, meta["ray"]["share_windows"], start=first)
        saved = run_dir.load_checkpoint(contiguous=False) if run_dir is not None else None
        if saved is not None:
            total = CorpusStats.from_state_dict(saved[0])
            done = _finished_shares(run_dir.checkpoint_parts(), shares, out_path, first)
        settings = Settings(seq_len, threshold, top_k_columns, bs, sentence_splitter, backend, first)
        resumed = sum(s.windows for s in shares if s.index in done)
        started = time.perf_counter()
        driven = _drive(cluster, shares, texts, settings, total, done, run_dir, checkpoint_every, progress, target,
                        resumed, stop)
        elapsed = time.perf_counter() - started
        meta["ray"].update({"address": address, "workers": n, "cpus_per_worker": cpus_per_worker,
                            "gpus_per_worker": gpus_per_worker, "ray_version": cluster.ray.__version__,
                            "shares": len(shares), "startup_seconds": round(cluster.startup_seconds, 3),
                            "count_seconds": round(counting, 3), "shares_redone": driven.redone,
                            "resumed_windows": resumed})
        if driven.attention is not None:
            meta.setdefault("attention", driven.attention)
        meta["statistics_backend"] = driven.backend()
        meta["memory"] = {"driver": peak_memory(torch.device("cpu"))}  # the workers' own peaks stay on their nodes
        return finish_run(meta, total, (info["name"], corp.name), elapsed, target - resumed, run_dir, driven.parts)


@dataclass
class _Driven:
    """What :func:`_drive` leaves: shares run more than once, window tables not yet checkpointed, and
    the workers' attention and statistics-backend records."""

    redone: int
    parts: list
    attention: str | None
    backends: list[dict]

    def backend(self) -> dict:
        """The workers' records as one, as :meth:`headsim.analysis.Engine.backend_record` has it (a key
        on which workers differ lists their values)."""
        record = {}
        for key in ("requested", "chosen", "ran"):
            values = sorted({b[key] for b in self.backends})
            record[key] = values[0] if len(values) == 1 else values
        return {**record, "fallbacks": [f for b in self.backends for f in b["fallbacks"]]}


def _drive(cluster: Cluster, shares: list[Share], texts: list[str], settings: Settings, total, done: set[int],
           run_dir: rundir.RunDir | None, checkpoint_every: int | None, progress, target: int, resumed: int,
           stop) -> _Driven:
    """Run every share not in ``done`` on the workers, adding each state into ``total`` as it arrives
    and checkpointing into ``run_dir`` when due, or when ``stop`` (:class:`~headsim.interrupts.StopRequests`)
    records a signal: then it raises :class:`~headsim.interrupts.Interrupted`. Shows one progress bar."""
    from .analysis import CHECKPOINT_SECONDS, _progress, _stopped
    from .stats import CorpusStats

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

    with _progress(progress, target, resumed) as advance:

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
                raise _stopped(stop.signum, finished, target, run_dir, "ray")
    driven.redone = sum(1 for n in attempts.values() if n > 1)
    return driven
