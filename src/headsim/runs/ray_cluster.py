"""The Ray engine's cluster (:class:`Cluster`): joined or started for the run, its workers checked against
the cluster's resources and started, every wait on them under a deadline (:func:`timeout`), and every
actor and process the run started ended however it ends. See :mod:`headsim.runs.ray`."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator

import numpy as np
import psutil

from ..corpus.parts import Counted, Fields
from ..errors import HeadsimError, require
from ..interrupts import Deferred
from .options import RayOptions
from .progress import ShareProgress
from .ray_worker import Worker

INSTALL = 'pip install "headsim[ray]"'
RESTARTS = 3  # restarts of a dead actor (and retries of its share) before the run stops
COUNT_CHARS = 1 << 20  # characters of text per token-counting call
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
        # the progress actor stays on the driver's node: a node lost mid-run takes only workers with it
        here = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.tracker = ray.remote(num_cpus=0)(ShareProgress).options(name=progress, scheduling_strategy=here).remote()
        # an object is put once and referenced here for the whole run: a restarted actor reads it again
        self.model_ref = self.model if self.model is None or isinstance(self.model, str) else ray.put(self.model)
        count = r.count(ray.cluster_resources())  # refused here, before any actor, if the cluster cannot hold them
        worker = ray.remote(Worker)
        self.actors = [worker.options(num_cpus=r.cpus_per_actor, num_gpus=r.gpus_per_actor, max_restarts=RESTARTS, max_task_retries=RESTARTS,
                                      name=f"headsim-worker-{i}-{run_id}")
                       .remote(self.model_ref, self.device, self.dtype, max(1, int(r.cpus_per_actor)), progress,
                               gpu_share=r.gpus_per_actor)
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

    def count_parts(self, files: list[str], fields: Fields) -> list[Counted]:
        """Every unit of the corpus parts ``files``, each file read and counted by one worker (file ``i`` on
        worker ``i mod workers``), in order."""
        refs = [self.actors[i % len(self.actors)].count_file.remote(f, fields) for i, f in enumerate(files)]
        got = self.get(refs, "count the corpus's tokens", lambda ready: f"{ready} of {len(refs)} corpus parts counted")
        return [c for counted in got for c in counted]

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


#: ``ray.init`` arguments of a local cluster started for a run: quiet, no dashboard, and the workers at the
#: niceness of the process that started it (Ray's default, 15, lets every other process on a shared machine
#: go first: the single process would not run so)
LOCAL_CLUSTER = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR,
                 "_system_config": {"worker_niceness": 0}}


def _init(ray, address: str | None) -> None:
    """``ray.init`` quietly: a local cluster (``address`` ``None``: :data:`LOCAL_CLUSTER`) or the one at ``address``."""
    if address is None:
        ray.init(**LOCAL_CLUSTER)
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
