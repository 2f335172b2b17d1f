"""The Typer application object and the shared error handling of every command."""

from __future__ import annotations

import errno
import os
import traceback
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


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="Show the full traceback of an unexpected error "
                                                             "(also accepted after the command; or HEADSIM_DEBUG=1).")) -> None:
    """What attention heads do, measured by the vectors they output (context similarity)."""


DEBUG = "--debug"


def escaped_line(exc: Exception) -> HeadsimError:
    """One line (problem and fix) for an error no check of headsim caught: an OS error names the file
    and what to do about its cause; anything else its type and first line."""
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else None
        what = exc.strerror or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        code = exc.errno
        text = str(exc)
        if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in text:
            fix = "free space on that disk or pass another output path, then run the command again"
        elif code in (errno.EROFS, errno.EACCES, errno.EPERM) or "Read-only file system" in text:
            fix = "pass an output path you may write to (and input files you may read)"
        elif code in (errno.ENOENT, errno.ENOTDIR) or isinstance(exc, FileNotFoundError):
            fix = "check the path (a missing input, or a folder that does not exist)"
        else:
            fix = "check the paths and the disk, then run the command again"
        where = f" {str(name)!r}" if name is not None else ""
        return HeadsimError(f"cannot access{where}: {what}", fix)
    first = (str(exc).strip().splitlines() or [""])[0]
    return HeadsimError(f"unexpected error: {type(exc).__name__}" + (f": {first}" if first else ""),
                        "run the command again with --debug to see where it came from (and report it if the input is right)")


def run_app(argv: list[str] | None = None) -> int:
    """Invoke the app: :class:`HeadsimError` → one line, exit code 2; SIGINT/SIGTERM → one line,
    exit code 130/143 (a long run first saves a checkpoint); never a traceback for either. Any other
    error that escapes a command (an OS error, a library's) → one line (:func:`escaped_line`), exit
    code 2; with ``--debug`` (anywhere on the line) or ``HEADSIM_DEBUG=1`` its traceback follows."""
    argv = list(argv) if argv is not None else []
    debug = DEBUG in argv or os.environ.get("HEADSIM_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != DEBUG]
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
        if debug:
            err_console.print(escape("".join(traceback.format_exception(exc))), highlight=False, soft_wrap=True)
        line = escaped_line(exc)
        _print_line(line.problem, line.fix)
        return 2
    if isinstance(code, int) and code:  # typer answers a KeyboardInterrupt it caught with the code 130
        if code == 130:
            _print_line("interrupted", "")
        return code
    return 0
