"""Progress bars of the commands that run longer than a few seconds besides ``analyze`` (``report``,
``inspect``, ``export``): rich bars on standard error when it is a terminal, nothing otherwise."""

from __future__ import annotations

from collections.abc import Callable

Update = Callable[[int, int], None]


class Bars:
    """One rich progress display with a bar per stage (:meth:`stage`); a no-op where standard error is
    not a terminal (a pipe, a log file, a test's captured output)."""

    def __init__(self) -> None:
        import importlib

        self.console = importlib.import_module(__package__ + ".app").err_console  # looked up now (tests swap it)
        self.progress = None

    def __enter__(self) -> "Bars":
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=self.console, transient=False)
            self.progress.__enter__()
        return self

    def stage(self, description: str, total: int | None = None) -> Update:
        """A new bar; the function returned sets it to ``(done, total)``."""
        if self.progress is None:
            return lambda done, total: None
        task = self.progress.add_task(description, total=total)
        return lambda done, total: self.progress.update(task, completed=done, total=total)

    def step(self, description: str) -> None:
        """A stage of one step, done at once (e.g. a page written)."""
        self.stage(description, 1)(1, 1)

    def __exit__(self, *exc) -> bool:
        if self.progress is not None:
            self.progress.__exit__(*exc)
        return False
