"""Stopping cleanly on SIGINT (Ctrl+C) and SIGTERM.

The CLI turns both signals into :class:`Interrupted` (one line, exit code 128 + signal: 130, 143);
long runs use :class:`StopRequests` to finish the batch in hand, save a checkpoint and then raise it.
"""

from __future__ import annotations

import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The process was asked to stop by ``signum`` (a ``BaseException``, like ``KeyboardInterrupt``)."""

    def __init__(self, signum: int, problem: str | None = None, fix: str = "") -> None:
        self.signum = int(signum)
        self.problem = problem or f"interrupted by {signal.Signals(self.signum).name}"
        self.fix = fix
        super().__init__(self.problem)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum, _frame) -> None:
    raise Interrupted(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _Handlers:
    """Install ``handler`` for SIGINT and SIGTERM while in the block (main thread only)."""

    def __init__(self, handler) -> None:
        self.handler, self.saved = handler, {}

    def __enter__(self):
        if _main_thread():
            self.saved = {s: signal.signal(s, self.handler) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> bool:
        for s, old in self.saved.items():
            signal.signal(s, old)
        return False


def raising() -> _Handlers:
    """Both signals raise :class:`Interrupted` where the program is (the CLI's default)."""
    return _Handlers(_raise)


class StopRequests(_Handlers):
    """The first signal is only recorded (:attr:`signum`): the caller stops at a safe point; a second
    one acts as the handlers outside the block would (the CLI: raise :class:`Interrupted` at once)."""

    def __init__(self) -> None:
        super().__init__(self._record)
        self.signum: int | None = None

    def _record(self, signum, _frame) -> None:
        self.signum = signum
        for s, old in self.saved.items():
            signal.signal(s, old)


class Deferred(_Handlers):
    """Signals in the block are only recorded; when it ends, the first is raised again for the handlers
    outside it (the CLI: :class:`Interrupted`; the default SIGINT handler: ``KeyboardInterrupt``). For a
    short step that must not be cut inside, such as ``ray.init`` (cut there, it leaves a core worker whose
    threads crash the interpreter's exit)."""

    def __init__(self) -> None:
        super().__init__(self._record)
        self.signum: int | None = None

    def _record(self, signum, _frame) -> None:
        if self.signum is None:
            self.signum = signum

    def __exit__(self, *exc) -> bool:
        super().__exit__(*exc)
        if self.signum is not None:
            signal.raise_signal(self.signum)
        return False
