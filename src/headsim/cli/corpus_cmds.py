"""``headsim analyze`` and ``headsim merge``."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import List, Optional

import typer

from .app import app, console, err_console
from .options import Device, DeviceMap, DeviceMemory, Model, OffloadFolder, Revision, SeqLen, Threshold


def _from_run(ctx: typer.Context, out: Path, given: dict) -> dict:
    """``--resume``: every option left at its default takes the run's own setting."""
    from ..runs.rundir import RunDir
    from ..runs.spec import resume_defaults

    return resume_defaults(RunDir(out).settings(), given,
                           lambda name, _: getattr(ctx.get_parameter_source(name), "name", "") == "DEFAULT")


@app.command()
def analyze(
    ctx: typer.Context,
    model: str = Model,
    revision: Optional[str] = Revision,
    corpus: str = typer.Option("default", "--corpus", "-c", help="'default' (embedded Wikipedia + Lee), a .txt, .jsonl or .parquet file, a directory or a quoted glob of them; also at a URL (s3://, gs://, http(s)://)."),
    windows: Optional[int] = typer.Option(None, "--windows", "-n", help="Windows to analyse (default: the whole corpus)."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory to write."),
    seq_len: int = SeqLen,
    threshold: float = Threshold,
    top_k_columns: int = typer.Option(3, "--top-k-columns", help="Most influential columns zeroed per window for Fig 3."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Windows per forward pass (default: automatic)."),
    checkpoint_every: Optional[int] = typer.Option(None, "--checkpoint-every",
                                                   help="Windows between checkpoints (default: every 30 seconds)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the stopped run in --out (options not given are taken from the run)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a run already in --out (refused if the directory holds files headsim did not write)."),
    allow_fewer: bool = typer.Option(True, "--allow-fewer/--strict-windows", help="When --windows exceeds the corpus: analyse all there is, or stop."),
    device: Optional[str] = Device,
    device_map: Optional[str] = DeviceMap,
    device_memory: Optional[str] = DeviceMemory,
    offload_folder: Optional[Path] = OffloadFolder,
    dtype: Optional[str] = typer.Option(None, "--dtype", help="fp32 (default) or bf16/fp16 (CUDA)."),
    text_field: str = typer.Option("text", "--text-field", help="Field holding the text in a .jsonl corpus."),
    text_column: str = typer.Option("text", "--text-column", help="Column holding the text in a .parquet corpus."),
    sentence_splitter: str = typer.Option("pysbd", "--sentences", help="Sentence splitter for sentence ids: pysbd, punkt (fast) or newline."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Statistics backend: auto (Triton kernels on CUDA where Triton runs, the Numba kernel on a CPU), eager, numba, compiled (torch.compile) or triton. Default: auto, or the run's own with --resume."),
    fused: Optional[bool] = typer.Option(None, "--fused/--eager", hidden=True, help="Old spelling of --backend compiled / --backend eager."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Processes that tokenize and split sentences; 0 = in-process thread (default: automatic). With --engine ray: the old spelling of --actors."),
    actors: Optional[int] = typer.Option(None, "--actors", help="Ray actors (--engine ray), one model copy each (default: one per CPU/GPU of the cluster)."),
    engine: str = typer.Option("local", "--engine", help="local (this process) or ray (a Ray cluster; needs the Ray extra: pip install \"headsim\\[ray]\"). Same results."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster: auto, ray://HOST:10001 (default: start a local one)."),
    gpus_per_actor: float = typer.Option(0.0, "--gpus-per-actor", "--gpus-per-worker", help="GPUs each Ray actor reserves."),
    cpus_per_actor: float = typer.Option(1.0, "--cpus-per-actor", "--cpus-per-worker", help="CPUs each Ray actor reserves (and its torch threads)."),
    share_windows: Optional[int] = typer.Option(None, "--share-windows", help="Windows per Ray work unit, whole batches (default: about 4 per worker)."),
    shard: Optional[str] = typer.Option(None, "--shard", help="I/N: analyse only part I (from 1) of N disjoint, equal parts of the windows; `headsim merge` of all N runs equals one run over all windows."),
    resolution: Optional[int] = typer.Option(None, "--resolution", help="Longest window whose position-pair statistics are kept per position; longer windows keep them on this many position bins (memory independent of --seq-len). Default: the largest of 512, 256, … 16 whose statistics fit --max-memory beside the model (recorded in run.json)."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", help="Memory the run may take, e.g. 3GB (default: half the free RAM, or of the GPU's memory); batch and block sizes, and the resolution when not given, are chosen within it."),
) -> None:
    """Corpus statistics of every head (Figs 2, 3, 6–8, 10–13) into a run directory."""
    from ..errors import require
    from ..runs.analyze import analyze as run_analysis

    if fused is not None:
        alias = "compiled" if fused else "eager"
        require(backend in (None, alias), f"--{'fused' if fused else 'eager'} contradicts --backend {backend}",
                "pass --backend alone")
        backend = alias
    arguments = {**{k: v for k, v in ctx.params.items() if k != "fused"}, "backend": backend,
                 "offload_folder": None if offload_folder is None else str(offload_folder)}
    if resume:
        arguments = _from_run(ctx, out, arguments)
    model, corpus = arguments.pop("model"), arguments.pop("corpus")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_analysis(model, corpus, **arguments)
    for w in caught:
        if issubclass(w.category, UserWarning):
            err_console.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    meta = result.meta
    at = f" at commit {meta['model']['commit']}" if meta["model"].get("commit") else ""
    console.print(f"analysed {meta['windows']} windows of {meta['seq_len']} tokens with {meta['model']['name']}{at} "
                  f"({meta['model']['n_layers']} layers × {meta['model']['n_heads']} heads) → {out}/")


@app.command()
def merge(
    runs: List[Path] = typer.Argument(..., help="Finished run directories (same model and settings)."),
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the merged run."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a run already in --out (refused if the directory holds files headsim did not write)."),
) -> None:
    """Combine run shards exactly (sums and counts add)."""
    from ..runs.merge import merge_runs

    path = merge_runs(runs, out, overwrite=overwrite)
    console.print(f"merged {len(runs)} runs → {path}/")
