"""Command-line interface: ``headsim COMMAND``. Each command lives in a module of its own."""

from __future__ import annotations

import sys

from .app import app, run_app
from . import basic  # noqa: F401  (registers version, inspect)


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_app(sys.argv[1:]))


__all__ = ["app", "main"]
