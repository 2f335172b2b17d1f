"""Command-line interface: ``headsim COMMAND``. Each command lives in a module of its own."""

from __future__ import annotations

import sys

from .app import app, run_app
from . import ablate_cmd, basic, corpus_cmds, export_cmd, models_cmd, report_cmds, segment_cmd, serve  # noqa: F401  (each module registers its commands)


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_app(sys.argv[1:]))


__all__ = ["app", "main"]
