"""Options shared by several commands (one definition each)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

Model = typer.Option("default", "--model", "-m", help="'default' (embedded all-MiniLM-L6-v2), a local directory, or a hub id "
                     "(owner/name: downloaded into the Hugging Face cache; HF_TOKEN, HF_HUB_OFFLINE hold).")
Revision = typer.Option(None, "--revision", help="Hub models: a branch, tag or commit id (default: main); the commit is recorded.")
DeviceMap = typer.Option(None, "--device-map", help="Spread a model too big for one device with accelerate: auto (GPUs, "
                         "then CPU, then disk), balanced, balanced_low_0 or sequential. Same statistics.")
DeviceMemory = typer.Option(None, "--device-memory", help="Memory each device may hold under --device-map, e.g. 0=20GiB,cpu=64GiB.")
OffloadFolder = typer.Option(None, "--offload-folder", help="Folder for the weights --device-map puts on disk.")
Device = typer.Option(None, "--device", help="cpu or cuda (default: cuda when available).")
SeqLen = typer.Option(128, "--seq-len", help="Tokens per window including [CLS] and [SEP] (the paper: 128).")
Threshold = typer.Option(0.3, "--threshold", help="High-similarity threshold on the normalised matrix, in (0, 1].")
Out = typer.Option(..., "--out", "-o", help="Output directory.")


def read_text_arg(text: Optional[str], text_file: Optional[Path]) -> str:
    """The text from the argument or from ``--text-file`` (:func:`headsim.corpus.read_text_file`), with clear errors."""
    from ..corpus import read_text_file
    from ..errors import require

    require(not (text and text_file), "both TEXT and --text-file given", "pass one of them")
    if text_file is None:
        require(text is not None, "no text given", "pass TEXT, --text-file FILE or --example NAME")
        return text
    return read_text_file(text_file)


def check_head_options(model: str, layers: list[tuple[str, int | None]], heads: list[tuple[str, int | None]]) -> None:
    """Refuse an out-of-range layer or head option (``[("--layer", 40)]``, 1-based) before the model
    loads: the model's config alone is read (:func:`headsim.model.shape.head_counts`; a hub model is
    checked once loaded)."""
    from ..errors import require
    from ..model.shape import head_counts

    counts = head_counts(None if model == "default" else model)
    if counts is None:
        return
    for given, n, what in ((layers, counts[0], "layers"), (heads, counts[1], "heads")):
        for option, value in given:
            require(value is None or 1 <= value <= n, f"{option} {value} is out of range",
                    f"this model has {what} 1..{n} (numbered from 1)")


def window_note(view, seq_len: int) -> None:
    """On standard error, which window of a text longer than one window was taken, and how to take another."""
    from .app import err_console

    if view.n_windows > 1:
        err_console.print(f"[yellow]note:[/] the text gives {view.n_windows} windows of {seq_len} tokens; analysed "
                          f"window {view.window} only ({view.n} tokens) — pick another with --window N "
                          f"(0..{view.n_windows - 1})", highlight=False, soft_wrap=True)
