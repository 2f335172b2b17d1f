"""``headsim export``: a run, an ablation study or a text as one standalone HTML, SVG or PNG file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app, console
from .options import Device, Model, SeqLen, Threshold


@app.command()
def export(
    source: str = typer.Argument(..., help="A run directory, an ablation folder, a text file, or the text itself."),
    fmt: str = typer.Option("html", "--format", "-f", help="html (interactive, opens offline), svg or png (the key figure)."),
    out: Path = typer.Option(..., "--out", "-o", help="The file to write."),
    model: str = Model,
    seq_len: int = SeqLen,
    window: int = typer.Option(0, "--window", help="Which window of a long text (0-based)."),
    layer: Optional[int] = typer.Option(None, "--layer", help="Head selected first, its layer (from 1; default the last)."),
    head: int = typer.Option(1, "--head", help="Head selected first (from 1)."),
    threshold: float = Threshold,
    device: Optional[str] = Device,
) -> None:
    """One standalone file to open offline, mail or put on a page: a text's head explorer, a run's
    summary or an ablation study (html), or its key figure (svg, png)."""
    from ..errors import require
    from ..views.html.export import FORMATS, export as write, load_source

    require(fmt in FORMATS, f"unknown format {fmt!r}", f"use --format {' or '.join(FORMATS)}")
    obj = load_source(source, model=None if model == "default" else model, seq_len=seq_len, window=window, layer=layer,
                      head=head, threshold=threshold, device=device)
    console.print(f"{fmt}: {write(obj, out, fmt)}")
