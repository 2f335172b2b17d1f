"""`headsim analyze --engine ray`: one run's corpus statistics spread over a Ray cluster, exactly.

Plan → shares → exact merge:

1. The driver reads the corpus (:func:`headsim.corpus_uri.load_corpus_any`: local specs and URLs)
   and starts the workers, Ray actors (:class:`Worker`) that each hold one copy of the model.
2. The workers count every text's tokens (blocks of texts, in parallel). From the counts the driver
   numbers the packed windows once, as the single process cuts them, and splits ``[0, windows)``
   into shares: ranges of whole batches (:func:`plan_shares`).
3. A worker windows its share itself (:func:`share_batches`: tokenises and splits the sentences of
   only the texts the share touches, packing from the share's first token), feeds the same batches
   as the single process through :class:`headsim.analysis.Engine` into a zeroed
   :class:`~headsim.stats.CorpusStats` and returns its state and the share's ``windows.parquet`` rows.
4. The driver adds the states (:meth:`CorpusStats.merge`: counts exact, float sums equal to a
   single-process run's up to addition order) and writes the same run directory. A checkpoint holds
   the sum of the shares finished so far and their numbers; ``resume`` runs only the others.

An actor that dies is restarted by Ray and its share runs again (``max_restarts`` and
``max_task_retries``: :data:`RESTARTS`); an exception inside a worker stops the run with the
worker's error, leaving the run directory unfinished (resumable).
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import rundir
from .errors import HeadsimError, require
from .windows import TokenStream, Windows

INSTALL = 'pip install "headsim[ray]"'
ENGINES = ("local", "ray")
RESTARTS = 3  # restarts of a dead actor (and retries of its share) before the run stops
COUNT_CHARS = 1 << 20  # characters of text per token-counting call
MAX_SHARE_BATCHES = 64  # a share's state and windows travel to the driver once per share
STATE = "ray-state.npz"  # in checkpoint/: the finished shares' summed state and their numbers
POLL_SECONDS = 0.5
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


def plan_shares(counts: np.ndarray, seq_len: int, windows: int, share_windows: int) -> list[Share]:
    """Cut the first ``windows`` packed windows of texts with ``counts`` tokens into shares of
    ``share_windows`` (the last may be shorter)."""
    content = seq_len - 2
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    require(0 < windows <= -(-total // content), f"{windows} windows asked of {total} tokens",
            "ask for at most the windows the corpus gives")
    require(share_windows >= 1, f"share_windows {share_windows} must be at least 1", "pass a positive number of windows")
    shares = []
    for index, start in enumerate(range(0, windows, share_windows)):
        stop = min(start + share_windows, windows)
        a, b = start * content, min(stop * content, total)
        first = int(np.searchsorted(ends, a, side="right"))
        last = int(np.searchsorted(ends, b, side="left")) + 1
        shares.append(Share(index, start, stop, first, last, a - int(ends[first] - counts[first]), b - a))
    return shares


def _clip(streams: Iterable[TokenStream], skip: int, tokens: int) -> Iterator[TokenStream]:
    """The ``tokens`` tokens of ``streams`` after the first ``skip``, as (partial) streams."""
    for s in streams:
        n = len(s.ids)
        a = min(skip, n)
        b = min(n, a + tokens)
        skip -= a
        if b > a:
            yield TokenStream(s.ids[a:b], s.offsets[a:b], s.sentences[a:b], s.text_index)
        tokens -= b - a
        if tokens == 0:
            return


def share_batches(texts: list[str], share: Share, tokenizer, seq_len: int, batch_size: int,
                  sentence_splitter: str) -> Iterator[Windows]:
    """The share's windows in batches of ``batch_size``: exactly windows ``[start, stop)`` of
    :func:`headsim.windows.iter_windows` over the whole corpus with ``pack=True``, ``texts`` being the
    corpus texts ``[first_text, last_text)``."""
    from .windows import _assemble, _chunks, tokenize

    streams = (s for i in range(0, len(texts), TOKENIZE_TEXTS)  # a few texts at a time: the model starts early
               for s in tokenize(texts[i:i + TOKENIZE_TEXTS], tokenizer, first_index=share.first_text + i,
                                 sentence_splitter=sentence_splitter))
    batch: list = []
    made = 0
    for window in _chunks(_clip(streams, share.skip, share.tokens), seq_len - 2, pack=True):
        batch.append(window)
        if len(batch) == batch_size:
            made += len(batch)
            yield _assemble(batch, seq_len, tokenizer, token_strings=False)
            batch = []
    if batch:
        made += len(batch)
        yield _assemble(batch, seq_len, tokenizer, token_strings=False)
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
    fused: bool


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

    def describe(self, seq_len: int) -> dict:
        """The model as the run records it, and the batch size it would pick at ``seq_len``; raises
        what loading the model raised."""
        from .analysis import default_batch_size

        if self.failure is not None:
            raise self.failure
        m = self.loaded
        return {"model": m.describe(), "name": m.name, "source": m.source, "max_seq_len": m.max_seq_len,
                "dtype": str(m.dtype).replace("torch.", ""), "device": str(m.device),
                "batch_size": default_batch_size(m, min(seq_len, m.max_seq_len))}

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
                                   top_k_columns=s.top_k_columns, device=self.loaded.device, fused=s.fused)

            self.engine, self.settings = Engine(self.loaded, fresh(), fresh), s
        self.engine.stats.reset()
        return self.engine

    def run(self, share: Share, texts: list[str], settings: Settings):
        """Accumulate ``share`` from zero; returns ``(share index, state_dict, windows table)``."""
        import pyarrow as pa

        from .analysis import prefetch

        import ray

        engine = self._engine(settings)
        tracker = ray.get_actor(self.progress)
        attempt, done, tables = uuid.uuid4().hex, 0, []
        source = share_batches(texts, share, self.loaded.tokenizer, settings.seq_len, settings.batch_size,
                               settings.sentence_splitter)
        with closing(prefetch(source)) as batches:
            for w in batches:
                engine.process_safely(w)
                tables.append(rundir.windows_table(share.start + done, w.input_ids, w.attention_mask, w.sentence_ids))
                done += len(w)
                tracker.report.remote(share.index, attempt, done)
        return share.index, engine.stats.state_dict(), pa.concat_tables(tables)


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

    def count(self, ray) -> int:
        """The workers asked for, else as many as the cluster's GPUs (or CPUs) allow."""
        if self.workers:
            return self.workers
        have = ray.cluster_resources()
        if self.gpus > 0:
            return max(1, int(have.get("GPU", 0) // self.gpus))
        return max(1, int(have.get("CPU", 1) // self.cpus))


class Cluster:
    """The run's workers and progress actor on a Ray cluster (joined, or started for the run), all
    ended on exit; :attr:`startup_seconds`: joining, spawning the workers and loading the model."""

    def __init__(self, address: str | None, model, device: str | None, dtype: str | None, resources: Resources,
                 seq_len: int) -> None:
        self.ray = import_ray()
        self.address, self.model, self.device, self.dtype = address, model, device, dtype
        self.resources, self.seq_len = resources, seq_len
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
        self.started_here = _connect(ray, self.address)
        run_id = uuid.uuid4().hex[:8]
        progress = f"headsim-progress-{run_id}"
        self.tracker = ray.remote(num_cpus=0)(Progress).options(name=progress).remote()
        # an object is put once and referenced here for the whole run: a restarted actor reads it again
        self.model_ref = self.model if self.model is None or isinstance(self.model, str) else ray.put(self.model)
        worker = ray.remote(Worker)
        self.actors = [worker.options(num_cpus=r.cpus, num_gpus=r.gpus, max_restarts=RESTARTS, max_task_retries=RESTARTS,
                                      name=f"headsim-worker-{i}-{run_id}")
                       .remote(self.model_ref, self.device, self.dtype, max(1, int(r.cpus)), progress)
                       for i in range(r.count(ray))]
        self.info = self.get([a.describe.remote(self.seq_len) for a in self.actors])[0]
        self.startup_seconds = time.perf_counter() - t0
        return self

    def get(self, refs):
        """``ray.get``, a worker's failure as one line."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as exc:
            raise _worker_error(exc) from None

    def count_tokens(self, texts: list[str]) -> np.ndarray:
        """Tokens of every text, counted by the workers in blocks of about :data:`COUNT_CHARS` characters."""
        pool = self.ray.util.ActorPool(self.actors)
        try:
            return np.concatenate(list(pool.map(lambda a, b: a.count.remote(b), list(_blocks(texts)))))
        except self.ray.exceptions.RayError as exc:
            raise _worker_error(exc) from None

    def __exit__(self, *exc) -> bool:
        for a in self.actors:
            self.ray.kill(a)
        if self.tracker is not None:
            self.ray.kill(self.tracker)
        if self.started_here:
            self.ray.shutdown()
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


def _target(corpus, total: int, seq_len: int, windows: int | None, allow_fewer: bool) -> int:
    """Windows to analyse: ``windows`` or all ``total`` tokens give (as the single process decides)."""
    content = seq_len - 2
    require(total >= content, f"corpus {corpus.name!r} has {total} tokens, less than one window of {seq_len}",
            "use a larger corpus or a smaller --seq-len")
    available = -(-total // content)
    if windows is None or windows <= available:
        return available if windows is None else windows
    require(allow_fewer, f"{windows} windows asked for but corpus {corpus.name!r} gives only {available} windows of {seq_len} tokens",
            "pass --windows at most that, or --allow-fewer to analyse all of them")
    warnings.warn(f"corpus {corpus.name!r} gives only {available} windows; analysing all of them", stacklevel=3)
    return available


class Checkpoint:
    """``checkpoint/`` of a Ray run: the summed state of the finished shares with their numbers
    (:data:`STATE`), written every so often, and each finished share's windows."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self):
        """``(CorpusStats, finished share numbers)``, or ``(None, set())`` when nothing was saved."""
        from .stats import CorpusStats

        f = self.path / STATE
        if not f.exists():
            return None, set()
        with np.load(f, allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
        done = {int(i) for i in state.pop("__shares_done__")}
        return CorpusStats.from_state_dict(state), done

    def start(self, done: set[int]) -> None:
        """Create the folder; drop window files of shares the saved state does not hold."""
        self.path.mkdir(parents=True, exist_ok=True)
        for part in self.path.glob("share-*.parquet"):
            if int(part.stem.split("-")[1]) not in done:
                part.unlink()

    def share_file(self, index: int) -> Path:
        return self.path / f"share-{index:07d}.parquet"

    def add_share(self, index: int, table) -> None:
        import pyarrow.parquet as pq

        rundir.atomic_write(self.share_file(index), lambda p: pq.write_table(table, p))

    def save(self, stats, done: set[int]) -> None:
        state = dict(stats.state_dict())
        state["__shares_done__"] = np.asarray(sorted(done), dtype=np.int64)

        def write(path: Path) -> None:
            with open(path, "wb") as fh:
                np.savez(fh, **state)

        rundir.atomic_write(self.path / STATE, write)

    def windows_to(self, shares: list[Share], target: Path) -> None:
        """The shares' window tables in window order as one parquet file (memory: one share)."""
        import pyarrow.parquet as pq

        files = [self.share_file(s.index) for s in shares]

        def write(path: Path) -> None:
            with pq.ParquetWriter(path, pq.read_schema(files[0])) as writer:
                for f in files:
                    writer.write_table(pq.read_table(f))

        rundir.atomic_write(target, write)


def _resume_from(out: Path, meta: dict, share_windows: int | None) -> dict | None:
    """Check a run to resume against this one; its meta (``None``: it is finished)."""
    old = rundir.read_json(out / rundir.RUN_JSON)
    if old.get("complete"):
        return None
    require(old.get("engine") == "ray", f"--resume refused: {str(out)!r} was started without --engine ray",
            "resume it without --engine ray, or start again with --overwrite")
    require(old.get("config") == meta["config"], f"--resume refused: {str(out)!r} was started with other settings",
            f"use the same settings as before ({old.get('config')}) or --overwrite")
    before = int(old["ray"]["share_windows"])
    require(share_windows is None or meta["ray"]["share_windows"] == before,
            f"--resume refused: {str(out)!r} was cut into shares of {before} windows",
            "resume with the same --share-windows, or without it")
    return old


def run_engine(engine: str = "ray", **params):
    """Run :func:`headsim.analysis.analyze` on ``engine`` (``"ray"``); ``params`` are analyze's, already
    checked there (threshold, windows, top_k_columns, checkpoint_every, resume)."""
    require(engine in ENGINES, f"unknown engine {engine!r}", f"use one of {', '.join(ENGINES)}")
    return analyze_on_ray(**params)


def analyze_on_ray(model=None, corpus="default", *, windows: int | None = None, out=None, seq_len: int = 128,
                   threshold: float = 0.3, top_k_columns: int = 3, batch_size: int | None = None,
                   checkpoint_every: int | None = None, resume: bool = False, overwrite: bool = False,
                   allow_fewer: bool = True, device: str | None = None, dtype: str | None = None,
                   text_field: str = "text", text_column: str = "text", sentence_splitter: str = "pysbd",
                   workers: int | None = None, fused: bool = False, progress: bool | Callable[[int, int], None] = True,
                   address: str | None = None, gpus_per_worker: float = 0.0, cpus_per_worker: float = 1.0,
                   share_windows: int | None = None):
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
    from .analysis import AnalysisConfig, Result
    from .context_similarity import check_threshold
    from .corpus_uri import load_corpus_any
    from .sentences import check_splitter
    from .stats import CorpusStats, heads_table, layers_table
    from .windows import check_seq_len

    import_ray()
    threshold = check_threshold(threshold)
    check_splitter(sentence_splitter)
    resources = Resources(workers, cpus_per_worker, gpus_per_worker).check()
    require(share_windows is None or (isinstance(share_windows, int) and share_windows >= 1),
            f"share_windows {share_windows!r} must be at least 1", "pass a positive number of windows")
    out_path = Path(out) if out is not None else None
    corp = load_corpus_any(corpus, text_field=text_field, text_column=text_column)
    texts = [d.text for d in corp]
    if out_path is not None:  # refuse another run's directory before the cluster starts
        rundir.prepare_out_dir(out_path, resume=resume, overwrite=overwrite)
    with Cluster(address, model, device, dtype, resources, seq_len) as cluster:
        info, n = cluster.info, len(cluster.actors)
        seq_len = check_seq_len(seq_len, info["max_seq_len"])
        t = time.perf_counter()
        counts = cluster.count_tokens(texts)
        counting = time.perf_counter() - t
        target = _target(corp, int(counts.sum()), seq_len, windows, allow_fewer)
        bs = int(batch_size) if batch_size else int(info["batch_size"])
        require(bs >= 1, f"batch_size {batch_size} must be at least 1", "pass a positive batch size")
        config = AnalysisConfig(info["source"], corp.sha256, target, seq_len, threshold, top_k_columns, bs,
                                info["dtype"], sentence_splitter)
        meta = {
            "model": info["model"], "corpus": {"name": corp.name, "sha256": corp.sha256, "documents": len(corp),
                                               "tokens": int(counts.sum()), "windows_available": -(-int(counts.sum()) // (seq_len - 2))},
            "windows": target, "seq_len": seq_len, "threshold": threshold, "top_k_columns": top_k_columns,
            "batch_size": bs, "dtype": info["dtype"], "device": info["device"], "sentence_splitter": sentence_splitter,
            "fused": bool(fused), "versions": rundir.package_versions(), "git_commit": rundir.git_commit(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": False,
            "config": asdict(config), "engine": "ray",
            "ray": {"address": address, "workers": n, "cpus_per_worker": cpus_per_worker, "gpus_per_worker": gpus_per_worker,
                    "share_windows": _share_size(share_windows, target, bs, n), "ray_version": cluster.ray.__version__},
        }
        total, done, ckpt = None, set(), None
        if out_path is not None:
            ckpt = Checkpoint(out_path / rundir.CHECKPOINT)
            old = _resume_from(out_path, meta, share_windows) if resume else meta
            if old is None:
                run = rundir.load_run(out_path)
                return Result(run.meta, run.dataset, run.heads, run.layers, out_path)
            meta["created"], meta["ray"]["share_windows"] = old["created"], old["ray"]["share_windows"]
            if resume:
                total, done = ckpt.load()
            ckpt.start(done)
            rundir.write_json(out_path / rundir.RUN_JSON, meta)
        shares = plan_shares(counts, seq_len, target, meta["ray"]["share_windows"])
        if total is None:
            total = CorpusStats(info["model"]["n_layers"], info["model"]["n_heads"], seq_len, threshold=threshold,
                                top_k_columns=top_k_columns)
        settings = Settings(seq_len, threshold, top_k_columns, bs, sentence_splitter, bool(fused))
        resumed = sum(s.windows for s in shares if s.index in done)
        started = time.perf_counter()
        redone = _drive(cluster, shares, texts, settings, total, done, ckpt, checkpoint_every, progress, target, resumed)
        elapsed = time.perf_counter() - started
        meta["ray"].update({"shares": len(shares), "startup_seconds": round(cluster.startup_seconds, 3),
                            "count_seconds": round(counting, 3), "shares_redone": redone, "resumed_windows": resumed})
    ds = total.to_dataset()
    ds.attrs.update({"model": info["name"], "corpus": corp.name})
    heads, layers = heads_table(ds), layers_table(ds)
    meta.update({"complete": True, "seconds": round(elapsed, 3),
                 "windows_per_second": round((target - resumed) / max(elapsed, 1e-9), 3),
                 "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    if out_path is None:
        return Result(meta, ds, heads, layers, None)
    rundir.write_dataset(out_path / rundir.STATS_NC, ds)
    rundir.write_table(out_path / rundir.HEADS, heads)
    rundir.write_table(out_path / rundir.LAYERS, layers)
    ckpt.windows_to(shares, out_path / rundir.WINDOWS)
    rundir.write_json(out_path / rundir.RUN_JSON, meta)
    shutil.rmtree(ckpt.path, ignore_errors=True)
    return Result(meta, ds, heads, layers, out_path)


def _drive(cluster: Cluster, shares: list[Share], texts: list[str], settings: Settings, total, done: set[int],
           ckpt: Checkpoint | None, checkpoint_every: int | None, progress, target: int, resumed: int) -> int:
    """Run every share not in ``done`` on the workers, adding each state into ``total`` as it arrives
    and checkpointing when due; shows one progress bar. Returns the shares run more than once."""
    from .analysis import CHECKPOINT_SECONDS, _progress
    from .stats import CorpusStats

    ray = cluster.ray
    pool = ray.util.ActorPool(cluster.actors)
    for s in shares:
        if s.index not in done:  # texts are sliced when an idle worker takes the share
            pool.submit(lambda actor, s: actor.run.remote(s, texts[s.first_text:s.last_text], settings), s)
    finished, shown, since_save, last_save = resumed, resumed, 0, time.perf_counter()
    attempts: dict[int, int] = {}
    with _progress(progress, target, resumed) as advance:

        def refresh() -> None:
            nonlocal shown
            reports = ray.get(cluster.tracker.snapshot.remote())
            attempts.update({share: len(runs) for share, runs in reports.items()})
            now = min(target, finished + sum(max(runs.values()) for share, runs in reports.items() if share not in done))
            if now > shown:
                advance(now - shown)
                shown = now

        while pool.has_next():
            try:
                index, state, table = pool.get_next_unordered(timeout=POLL_SECONDS)
            except TimeoutError:
                refresh()
                continue
            except ray.exceptions.RayError as exc:
                raise _worker_error(exc) from None
            total.merge(CorpusStats.from_state_dict(state))
            done.add(index)
            finished += shares[index].windows
            since_save += shares[index].windows
            if ckpt is not None:  # in memory a run keeps no windows (as the single process)
                ckpt.add_share(index, table)
            refresh()
            due = (time.perf_counter() - last_save >= CHECKPOINT_SECONDS) if checkpoint_every is None \
                else since_save >= checkpoint_every
            if ckpt is not None and due and pool.has_next():
                ckpt.save(total, done)
                since_save, last_save = 0, time.perf_counter()
    return sum(1 for n in attempts.values() if n > 1)
