"""``headsim version`` and ``headsim inspect``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .app import app, console
from .progress import Bars
from .options import Device, Model, Revision, SeqLen, Threshold, check_head_options, read_text_arg, window_note


@app.command()
def version() -> None:
    """Print the versions of headsim and of the libraries it runs on."""
    import torch
    import transformers

    from .. import __version__

    console.print(f"headsim {__version__} (torch {torch.__version__}, transformers {transformers.__version__})")


@app.command()
def inspect(
    text: Optional[str] = typer.Argument(None, help="Text to analyse (or use --text-file / --example)."),
    text_file: Optional[Path] = typer.Option(None, "--text-file", "-f", help="Read the text from a UTF-8 file."),
    example: Optional[str] = typer.Option(None, "--example", help="A built-in paragraph: gerstenslager (Fig 4) or airport_policing (Fig 9)."),
    model: str = Model,
    revision: Optional[str] = Revision,
    layer: Optional[int] = typer.Option(None, "--layer", "-l", help="Layer for Figs 5 and 9 (1-based; default last)."),
    head: int = typer.Option(1, "--head", help="Head for Figs 4, 5 and 9 (1-based)."),
    threshold: float = Threshold,
    sep_layer: Optional[int] = typer.Option(None, "--sep-layer", help="Layer whose attention columns mark separators (1-based; default last)."),
    sep_threshold: float = typer.Option(0.5, "--sep-threshold", help="Separator threshold on normalised column attention, in (0, 1]."),
    figure_layers: Optional[str] = typer.Option(None, "--figure-layers", help="Comma-separated 1-based layers for Figs 4 and 12."),
    seq_len: int = SeqLen,
    window: int = typer.Option(0, "--window", help="Which window of a long text (0-based)."),
    device: Optional[str] = Device,
    out: Path = typer.Option(Path("inspect-out"), "--out", "-o", help="Output directory."),
    rows: int = typer.Option(25, "--rows", help="Pair-table rows printed in the terminal."),
    resolution: int = typer.Option(512, "--resolution", help="A window of more tokens is shown as a binned overview on this many position bins."),
    all_pairs: bool = typer.Option(False, "--all-pairs", help="fig09_pairs.csv lists every pair of every head (default: each head's 300 most similar, with exact totals)."),
) -> None:
    """Per-text views of one window: Figs 4, 5, 9, 12 and the similarity matrix of one head."""
    from ..errors import require
    from ..inspection import example_text, inspect_text
    from ..io import check_writable

    require(rows >= 0, f"--rows {rows} is negative", "pass how many rows to print (0 or more)")
    require(not out.exists() or out.is_dir(), f"--out {str(out)!r} is a file, not a directory",
            "pass a directory (it is created if missing)")
    if example is not None:
        require(text is None and text_file is None, "--example given together with a text", "pass one of them")
        body = example_text(example)
    else:
        body = read_text_arg(text, text_file)
    layers = None
    if figure_layers:
        try:
            layers = [int(x) for x in figure_layers.split(",") if x.strip()]
        except ValueError:
            from ..errors import HeadsimError

            raise HeadsimError(f"--figure-layers {figure_layers!r} is not a list of numbers", "pass e.g. --figure-layers 1,3,6")
    check_head_options(model, [("--layer", layer), ("--sep-layer", sep_layer), *(("--figure-layers", x) for x in layers or [])],
                       [("--head", head)])
    check_writable(out)  # before the model runs
    if revision is not None:
        from ..model.load import load_model

        model = load_model(model, device=device, revision=revision)
    with Bars() as bars:
        result = inspect_text(body, model, layer=layer, head=head, threshold=threshold, sep_layer=sep_layer,
                              sep_threshold=sep_threshold, figure_layers=layers, seq_len=seq_len, window=window,
                              device=device, resolution=resolution, all_pairs=all_pairs,
                              progress=bars.stage("running the model (layers)"))
        window_note(result.view, seq_len)
        written = result.write(out, progress=bars.stage("figures and tables"))
    pairs = result.head_pairs()
    total = result.head_pair_count()
    table = Table(title=f"High-similarity pairs, layer {result.layer + 1}, head {result.head + 1} "
                        f"(threshold {result.threshold:g}; {total} pairs"
                        + (f"; the {len(pairs)} most similar kept)" if total > len(pairs) else ")"), title_justify="left")
    for col in ("Token_i", "Token_j", "Index_i", "Index_j", "similarity"):
        table.add_column(col, justify="right" if col.startswith(("Index", "sim")) else "left")
    for r in pairs.head(rows).itertuples():
        table.add_row(r.token_i, r.token_j, str(r.index_i), str(r.index_j), f"{r.similarity:.3f}")
    console.print(table)
    if len(pairs) > rows:
        console.print(f"… {len(pairs) - rows} more rows in {out / 'fig09_pairs.csv'}")
    if result.view.binned:
        console.print(f"{result.valid_len} tokens shown on {result.view.attention.shape[-1]} position bins; "
                      "exact regions: TextView.zoom or the explorer's zoom")
    seps = ", ".join(f"{i}:{result.tokens[i]}" for i in result.separators) or "none"
    console.print(f"separator columns (layer {result.sep_layer + 1}, > {result.sep_threshold:g}): {seps}")
    console.print(f"wrote {len(written)} files to {out}/")
