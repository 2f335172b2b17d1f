"""The Typer application object and the shared error handling of every command."""

from __future__ import annotations

import warnings

import typer
from rich.console import Console
from rich.markup import escape

from .. import interrupts
from ..errors import HeadsimError

app = typer.Typer(
    name="headsim",
    help="What attention heads do, measured by the vectors they output (context similarity).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def _print_line(problem: str, fix: str, *, label: str = "error") -> None:
    err_console.print(f"[bold red]{label}:[/] {escape(problem)}" + (f" — [bold]fix:[/] {escape(fix)}" if fix else ""),
                      highlight=False, soft_wrap=True, markup=True)


def fail(error: HeadsimError) -> None:
    """Print one line naming the problem and the fix, exit with code 2."""
    _print_line(error.problem, error.fix)
    raise typer.Exit(code=2)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings reach the user as one yellow line each (no file, line or source echo)."""
    err_console.print(f"[yellow]warning:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def run_app(argv: list[str] | None = None) -> int:
    """Invoke the app: :class:`HeadsimError` → one line, exit code 2; SIGINT/SIGTERM → one line,
    exit code 130/143 (a long run first saves a checkpoint); never a traceback for either."""
    try:
        with interrupts.raising(), warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = app(args=argv, standalone_mode=False)
    except HeadsimError as exc:
        try:
            fail(exc)
        except typer.Exit as done:
            return done.exit_code
    except interrupts.Interrupted as exc:
        _print_line(exc.problem, exc.fix, label="stopped")
        return exc.exit_code
    except typer.Exit as done:
        return done.exit_code
    except (typer.Abort, KeyboardInterrupt):
        _print_line("interrupted", "")
        return 130
    except Exception as exc:  # click usage errors (typer >= 0.22 vendors its own click: duck-type them)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        raise
    if isinstance(code, int) and code:  # typer answers a KeyboardInterrupt it caught with the code 130
        if code == 130:
            _print_line("interrupted", "")
        return code
    return 0
