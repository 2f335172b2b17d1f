"""The Typer application object and the shared error handling of every command."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

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


def fail(error: HeadsimError) -> None:
    """Print one line naming the problem and the fix, exit with code 2."""
    problem, fix = escape(error.problem), escape(error.fix)
    err_console.print(f"[bold red]error:[/] {problem}" + (f" — [bold]fix:[/] {fix}" if fix else ""),
                      highlight=False, soft_wrap=True, markup=True)
    raise typer.Exit(code=2)


def run_app(argv: list[str] | None = None) -> int:
    """Invoke the app, turning :class:`HeadsimError` into exit code 2 without a traceback."""
    try:
        app(args=argv, standalone_mode=False)
    except HeadsimError as exc:
        try:
            fail(exc)
        except typer.Exit as done:
            return done.exit_code
    except typer.Exit as done:
        return done.exit_code
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted")
        return 130
    except Exception as exc:  # click usage errors (typer >= 0.22 vendors its own click: duck-type them)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        raise
    return 0
