"""``headsim ablate``: which heads matter — task scores with heads removed, by every criterion."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .app import app, console
from .options import Device, Model


@app.command()
def ablate(
    out: Path = typer.Option(..., "--out", "-o", help="Results folder (parquet tables, figures, ablation.json)."),
    run: Optional[Path] = typer.Option(None, "--run", help="A finished `headsim analyze` run of the same model: adds the role groups (repetition, same-sentence, long-range, anchor heads)."),
    tasks: str = typer.Option("lee,polarity,drift", "--tasks", help="Comma-separated tasks: lee, polarity, wordsim353, simlex999, drift. The first one's first metric is the primary score."),
    mode: str = typer.Option("zero", "--mode", help="zero: heads' outputs set to 0; mean: set to their mean over corpus documents."),
    group_fraction: float = typer.Option(0.25, "--group-fraction", help="Size of role and random groups, as a share of all heads."),
    draws: int = typer.Option(100, "--draws", help="Random groups of that size (95 % interval from their percentiles)."),
    curve_orders: int = typer.Option(10, "--curve-orders", help="Random orders whose whole pruning curve is scored."),
    step: Optional[int] = typer.Option(None, "--step", help="Heads between pruning-curve points (default: a twelfth of all heads)."),
    gradient_task: str = typer.Option("lee", "--gradient-task", help="Task whose loss gives gradient importance (lee or polarity)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random groups and orders."),
    model: str = Model,
    device: Optional[str] = Device,
) -> None:
    """Score each head alone, each layer, each measured role and random groups; pruning curves by every criterion."""
    from ..ablation.study import StudyConfig, ablation_study
    from ..report.html import model_label
    from ..io import check_writable, read_json

    check_writable(out)  # before minutes of scoring
    config = StudyConfig(tasks=tuple(t.strip() for t in tasks.split(",") if t.strip()), group_fraction=group_fraction,
                         draws=draws, curve_orders=curve_orders, step=step, mode=mode, gradient_task=gradient_task, seed=seed)
    path = ablation_study(None if model == "default" else model, out, run_dir=run, config=config, device=device)
    meta = read_json(path)
    s, metric = meta["summary"], meta["primary_metric"]
    table = Table(title=f"{model_label(meta['model'])}: {metric} after removing {s['group_size']} of {s['n_heads_total']} heads")
    for column in ("criterion", metric, "Δ vs full", "random groups scoring ≤"):
        table.add_column(column, justify="left" if column == "criterion" else "right")
    full = s["full"][metric]
    table.add_row("full model", f"{full:.4f}", "", "")
    for name, value in s["at_group_size"].items():
        table.add_row(name, f"{value:.4f}", f"{value - full:+.4f}", f"{s['random_share_at_or_below'][name]:.2f}")
    r = s["random"]
    table.add_row(f"random ({r['draws']} draws): mean [95 %]", f"{r['mean']:.4f} [{r['p2.5']:.4f}, {r['p97.5']:.4f}]",
                  f"{r['mean'] - full:+.4f}", "")
    console.print(table)
    console.print(f"results: {path.parent}")
