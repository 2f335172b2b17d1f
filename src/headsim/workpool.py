"""Worker processes that run functions in order, started without the caller's ``__main__``.

multiprocessing's ``spawn`` and ``forkserver`` start methods re-import the caller's main module in
every worker: a script without an ``if __name__ == "__main__":`` guard then fails, and one that
imports torch at its top pays that import once per worker before any work starts. The workers here
are plain ``python -m headsim.workpool`` processes that import only the modules of the functions
they are given (a windowing worker: numpy, tokenizers and the sentence splitter). Each worker runs
single-threaded (parallelism comes from the processes, so 15 workers never start 15 × 16 Rust or
OpenMP threads), ignores Ctrl-C (the parent stops it) and exits when the parent closes its input.

Functions and their arguments travel by pickle, so they must be importable module-level functions.
"""

from __future__ import annotations

import math
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path

from .errors import HeadsimError, require

_PROTOCOL = pickle.HIGHEST_PROTOCOL
_SINGLE_THREAD = {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                  "OPENBLAS_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1"}


def available_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota (containers).

    ``os.cpu_count()`` reports the host's CPUs even where a container may use only a few of them.
    """
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(n, math.ceil(quota)) if quota else n)


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs allowed by cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``; None when unlimited."""
    try:
        text = (root / "cpu.max").read_text().split()
        if text and text[0] != "max":
            return int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


class _Worker:
    """One process, a thread feeding its input and one reading its replies into futures."""

    def __init__(self, index: int, env: dict) -> None:
        self.index = index
        self.proc = subprocess.Popen([sys.executable, "-m", "headsim.workpool"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self.pending: deque[Future] = deque()
        self.inbox: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        threading.Thread(target=self._feed, daemon=True, name=f"headsim-worker-{index}-in").start()
        threading.Thread(target=self._read, daemon=True, name=f"headsim-worker-{index}-out").start()

    def submit(self, fn: Callable, args: tuple) -> Future:
        fut: Future = Future()
        with self.lock:
            self.pending.append(fut)
        self.inbox.put((fn, args))
        return fut

    def _feed(self) -> None:
        try:
            while (item := self.inbox.get()) is not None:
                pickle.dump(item, self.proc.stdin, protocol=_PROTOCOL)
                self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):  # the process died; _read reports it
            pass
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def _read(self) -> None:
        try:
            while True:
                try:
                    kind, value, tb = pickle.load(self.proc.stdout)
                except EOFError:
                    break
                with self.lock:
                    fut = self.pending.popleft()
                if kind == "ok":
                    fut.set_result(value)
                else:
                    fut.set_exception(_rebuild(value, tb))
        except Exception as exc:  # a reply that cannot be read: fail what waits on it, below
            failure = exc
        else:
            failure = None
        code = self.proc.wait()
        with self.lock:
            left, self.pending = list(self.pending), deque()
        for fut in left:
            fut.set_exception(HeadsimError(
                f"worker process {self.index} stopped (exit code {code}{'; ' + repr(failure) if failure else ''})",
                "see its message above; a worker killed by the system (code -9) usually ran out of memory: "
                "use fewer worker processes"))

    def stop(self) -> None:
        """Close the input after what has been sent; terminate the process if tasks are left."""
        try:
            while True:
                self.inbox.get_nowait()  # tasks not yet sent
        except queue.Empty:
            pass
        self.inbox.put(None)
        with self.lock:
            busy = bool(self.pending)
        if busy and self.proc.poll() is None:
            self.proc.terminate()

    def join(self, timeout: float) -> None:
        """Wait for the process to end (its input is closed), then kill it if it has not."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _rebuild(exc: BaseException | None, tb: str) -> BaseException:
    """The worker's exception (or a stand-in when it could not travel), its traceback attached."""
    if exc is None:
        return HeadsimError(f"a worker process failed:\n{tb}", "see the traceback above")
    if hasattr(exc, "add_note"):
        exc.add_note(f"in a worker process:\n{tb}")
    return exc


class OrderedPool:
    """Processes that run ``fn(*args)`` for a stream of argument tuples and give results in order.

    Args:
        processes: number of worker processes (1 or more).
        initializer: run once in each worker before any task (e.g. to load a tokenizer).
        initargs: its arguments.
        in_flight: tasks queued per worker (2 keeps every worker busy while results are taken).

    Use as a context manager; leaving it stops the workers (also when the consumer of
    :meth:`map` stops early).
    """

    def __init__(self, processes: int, initializer: Callable | None = None, initargs: tuple = (), *,
                 in_flight: int = 2) -> None:
        require(isinstance(processes, int) and processes >= 1, f"processes {processes!r} must be 1 or more",
                "pass the number of worker processes")
        env = dict(os.environ, **_SINGLE_THREAD)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
        self.in_flight = max(1, int(in_flight))
        self.workers = [_Worker(i, env) for i in range(processes)]
        self._init = [w.submit(initializer, initargs) for w in self.workers] if initializer is not None else []

    def submit(self, fn: Callable, *args) -> Future:
        """Queue ``fn(*args)`` on the least busy worker."""
        worker = min(self.workers, key=lambda w: len(w.pending))
        return worker.submit(fn, args)

    def map(self, fn: Callable, arg_tuples: Iterable[tuple]) -> Iterator:
        """``fn(*args)`` for each tuple, in the order given, read lazily and a bounded number ahead."""
        for fut in self._init:
            fut.result()  # a failed initializer stops here with its own error
        flight: deque[Future] = deque()
        limit = self.in_flight * len(self.workers)
        for args in arg_tuples:
            flight.append(self.submit(fn, *args))
            if len(flight) >= limit:
                yield flight.popleft().result()
        while flight:
            yield flight.popleft().result()

    def close(self, timeout: float = 10.0) -> None:
        """Stop every worker: an idle one ends when its input closes; one with tasks left (a consumer
        that stopped early) is terminated, its results being of no use. Kills what outlives ``timeout``."""
        for w in self.workers:
            w.stop()
        for w in self.workers:
            w.join(timeout)

    def __enter__(self) -> "OrderedPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve() -> None:
    """The worker's loop: read (fn, args), reply (kind, value, traceback), until end of input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a task prints goes to stderr, never into the replies
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    while True:
        try:
            fn, args = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = ("ok", fn(*args), "")
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            tb = traceback.format_exc()
            try:
                pickle.dumps(exc, protocol=_PROTOCOL)
            except Exception:
                exc = None
            reply = ("err", exc, tb)
        pickle.dump(reply, replies, protocol=_PROTOCOL)
        replies.flush()


if __name__ == "__main__":
    _serve()
