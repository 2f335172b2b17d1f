"""``headsim export``: a run, an ablation study or a text as one standalone HTML, SVG or PNG file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app, console
from .progress import Bars
from .options import Device, Model, SeqLen, Threshold, check_head_options, window_note


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
    resolution: int = typer.Option(512, "--resolution", help="A text window of more tokens is shown as a binned overview on this many position bins."),
) -> None:
    """One standalone file to open offline, mail or put on a page: a text's head explorer, a run's
    summary or an ablation study (html), or its key figure (svg, png)."""
    from ..errors import require
    from ..views.html.export import FORMATS, export as write, load_source

    from ..inspection import Inspection

    require(fmt in FORMATS, f"unknown format {fmt!r}", f"use --format {' or '.join(FORMATS)}")
    check_head_options(model, [("--layer", layer)], [("--head", head)])
    with Bars() as bars:
        obj = load_source(source, model=None if model == "default" else model, seq_len=seq_len, window=window, layer=layer,
                          head=head, threshold=threshold, device=device, resolution=resolution,
                          progress=bars.stage("running the model (layers)"))
        if isinstance(obj, Inspection):
            window_note(obj.view, seq_len)
        written = write(obj, out, fmt)
        bars.step(f"{fmt} written")
    console.print(f"{fmt}: {written}")
