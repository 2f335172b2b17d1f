"""``headsim segment``: topic or sentence segments of a text file from one encoder pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .app import app, console
from .options import Device, Model, read_text_arg


@app.command()
def segment(
    file: Path = typer.Argument(..., help="UTF-8 text file to segment."),
    level: str = typer.Option("topic", "--level", help="topic (groups of sentences) or sentence."),
    n_segments: Optional[int] = typer.Option(None, "--n-segments", "-k", help="Number of segments (default: the fitted threshold decides)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the segments here as JSON lines (start, end, text)."),
    units: str = typer.Option("pysbd", "--units", help="Topic level: sentence units from pysbd or from the model's separator columns ('model')."),
    config: Optional[Path] = typer.Option(None, "--config", help="A fitted configuration (JSON); default: the shipped one."),
    model: str = Model,
    device: Optional[str] = Device,
    rows: int = typer.Option(10, "--rows", help="Segments shown in the terminal."),
) -> None:
    """Cut a text into topic segments (or sentences) with the paper's separator columns and head similarity."""
    from ..errors import require
    from ..segmentation.segmenter import LEVELS
    from ..segmentation.segmenter import segment as run_segment

    require(rows >= 0, f"--rows {rows} is negative", "pass how many segments to print (0 or more)")
    require(level in LEVELS, f"unknown --level {level!r}", f"use one of {', '.join(LEVELS)}")
    require(out is None or not out.is_dir(), f"--out {str(out)!r} is a directory", "pass a file path, e.g. segments.jsonl")
    text = read_text_arg(None, file)
    if out is not None:
        from ..io import check_writable

        check_writable(out)  # before the model runs
    with console.status("running the model…"):
        segments = run_segment(text, model, level=level, n_segments=n_segments, units=units,
                               config=None if config is None else str(config), device=device)
    if out is not None:
        from ..io import write_bytes

        lines = "".join(json.dumps({"start": s.start, "end": s.end, "text": s.text}, ensure_ascii=False) + "\n" for s in segments)
        write_bytes(out, lines.encode("utf-8"))
    table = Table(title=f"{len(segments)} {level} segments of {file.name} ({len(text):,} characters)")
    for column in ("#", "start", "end", "chars", "begins with"):
        table.add_column(column, justify="left" if column == "begins with" else "right")
    for i, s in enumerate(segments[:rows]):
        preview = " ".join(s.text.split())
        table.add_row(str(i + 1), str(s.start), str(s.end), str(s.end - s.start),
                      preview[:70] + ("…" if len(preview) > 70 else ""))
    console.print(table)
    if len(segments) > rows:
        console.print(f"… {len(segments) - rows} more segments" + (f" in {out}" if out else " (use --out to save them all)"))
    elif out is not None:
        console.print(f"wrote {out}")
