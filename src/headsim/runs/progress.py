"""How far a run is: the progress bar or callback of both engines (:class:`ProgressBar`), and the
Ray engine's record of windows done per share (:class:`ShareProgress`, run as an actor)."""

from __future__ import annotations

import time


def _terminal():
    """Standard error as a rich console."""
    from rich.console import Console

    return Console(stderr=True)


def announce(progress, line: str) -> None:
    """Print ``line`` on standard error where it is a terminal and a progress bar is shown (``progress``
    true and not a callback); a log or a pipe gets none (run.json keeps what it says)."""
    if progress and not callable(progress):
        console = _terminal()
        if console.is_terminal:
            console.print(line, highlight=False, soft_wrap=True)


class ProgressBar:
    """A rich progress bar (windows/s, ETA), a callback ``(done, total)``, or nothing (``progress`` falsy);
    entered, it gives ``advance(n)``."""

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


class ShareProgress:
    """Windows done per share and attempt (a Ray actor the workers report to and the driver polls)."""

    def __init__(self) -> None:
        self.done: dict[int, dict[str, int]] = {}

    def report(self, share: int, attempt: str, done: int) -> None:
        self.done.setdefault(share, {})[attempt] = done

    def snapshot(self) -> dict[int, dict[str, int]]:
        return self.done
