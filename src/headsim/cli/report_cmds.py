"""``headsim reproduce``, ``headsim report`` and ``headsim compare``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import app, console
from .options import Device, Model, SeqLen, Threshold
from .progress import Bars


@app.command()
def reproduce(
    model: str = Model,
    corpus: str = typer.Option("default", "--corpus", "-c", help="'default' or a corpus path (see analyze)."),
    windows: Optional[int] = typer.Option(None, "--windows", "-n", help="Windows to analyse (default 4000; the paper: 20000)."),
    out: Path = typer.Option(Path("reproduce-out"), "--out", "-o", help="Report directory (the run goes into OUT/run)."),
    seq_len: int = SeqLen,
    threshold: float = Threshold,
    device: Optional[str] = Device,
    dtype: Optional[str] = typer.Option(None, "--dtype", help="fp32 (default) or bf16/fp16 (CUDA)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Windows per forward pass (default: automatic)."),
    window_lengths: Optional[str] = typer.Option(
        None, "--window-lengths", help="Also analyse these window lengths, e.g. 128,256,512, over the same text as the main "
        "run (into OUT/run-<length>), and compare them in the report's 'Window length' section (default: off)."),
) -> None:
    """Every figure of the paper (2–13) and every claim as a measured check, in OUT/index.html."""
    from ..reproduction import DEFAULT_WINDOWS, parse_lengths, reproduce as run
    from ..io import check_writable

    lengths = parse_lengths(window_lengths) if window_lengths is not None else None
    check_writable(out)  # before the analysis
    index = run(model, corpus, windows=DEFAULT_WINDOWS if windows is None else windows, out=out, seq_len=seq_len, threshold=threshold,
                device=device, dtype=dtype, batch_size=batch_size, window_lengths=lengths)
    console.print(f"report: {index}")


@app.command()
def report(
    run_dirs: List[Path] = typer.Argument(..., help="A finished run directory (from analyze or reproduce); more runs of "
                                          "the same model, corpus and settings at other --seq-len add a 'Window length' "
                                          "section comparing them.", metavar="RUN_DIR [RUN_AT_OTHER_LENGTH]..."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Report directory (default: the run directory)."),
    example: bool = typer.Option(True, "--example/--no-example", help="Also draw the per-text figures (4, 5, 9) on a fixed example window (runs the model once)."),
    device: Optional[str] = Device,
) -> None:
    """Regenerate the report from saved results without recomputing the statistics."""
    from ..corpus import load_corpus
    from ..report.build import build_report
    from ..reproduction import example_inspection
    from ..io import check_writable
    from ..runs.rundir import load_run

    run_dir, window_runs = run_dirs[0], run_dirs[1:]
    run = load_run(run_dir)
    if window_runs:  # refused before the example runs the model
        from ..report.window_lengths import check_window_runs

        check_window_runs([run] + [load_run(d) for d in window_runs])
    check_writable(out or run_dir)  # before the model runs for the example
    inspection = None
    with Bars() as bars:
        if example:
            meta = run.meta
            corpus = load_corpus(meta["corpus"]["name"]) if "shards" not in meta["corpus"] else None
            if corpus is not None:
                model = meta["model"]["name"] if meta["model"]["name"] != "default" else None
                inspection = example_inspection(corpus, model, seq_len=meta["seq_len"], threshold=meta["threshold"],
                                                progress=bars.stage("example: running the model (layers)"))
        index = build_report(run_dir, out or run_dir, inspection, window_runs=window_runs,
                             progress=bars.stage("figures, claims and page"))
    console.print(f"report: {index}")


@app.command()
def compare(
    runs: List[Path] = typer.Argument(..., help="Two or more finished run directories."),
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the comparison page."),
) -> None:
    """Put several runs side by side: per-layer curves on shared axes and the claims table."""
    from ..errors import require
    from ..report.compare import compare_runs
    from ..io import check_writable

    require(len(runs) >= 2, "compare needs at least two run directories", "pass RUN_A RUN_B …")
    check_writable(out)
    index = compare_runs(runs, out)
    console.print(f"comparison: {index}")
