"""``headsim ablate``: which heads matter for each task, by every criterion, into a results folder.

:func:`ablation_study` scores the model with heads removed — each head alone, each layer, the heads
of each measured role (given a statistics run), random groups of the same size — and the pruning
curves of every criterion (single-head ablation, gradient importance, roles, random orders). It
writes ``ablation.json`` (settings and the summary), ``heads.parquet``, ``groups.parquet``,
``curves.parquet`` and the figures (PNG + SVG); see docs/ablation.md for every column.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from ..display import HtmlDisplay
from ..errors import require
from ..model.load import LoadedModel, as_loaded
from ..runs.run import Run
from ..runs.rundir import load_run
from .curves import curve_points, removable
from .importance import (ROLES, as_pairs, ascending, descending, gradient_importance, label, random_orders,
                         rank_correlation, role_scores)
from .intervention import MODES, ablate, head_means
from .tasks import Task, get_tasks, load_drift_texts

ABLATION_JSON, HEADS, GROUPS, CURVES = "ablation.json", "heads.parquet", "groups.parquet", "curves.parquet"
TOLERANCES = (0.01, 0.02, 0.05, 0.10)
SINGLE, GRADIENT, RANDOM = "single-head ablation", "gradient importance", "random"


@dataclass(frozen=True)
class StudyConfig:
    """Settings of one study (everything that changes its numbers).

    Attributes:
        tasks: task names; the first task's first metric is the primary score. Single heads, random
            groups and pruning curves are scored on the first task alone; the full model, layers, role
            groups and every criterion's point at the group size on all tasks.
        group_fraction: size of role groups, random groups and the headline point, as a share of all heads.
        draws: random groups of that size (their 2.5–97.5 percentiles are the 95 % interval).
        curve_orders: random orders whose whole pruning curve is scored (the first ``curve_orders`` draws).
        step: heads between curve points (default: a twelfth of all heads).
        mode: ``"zero"`` or ``"mean"`` ablation (means over the drift task's documents).
        gradient_task: task whose loss gives the gradient importance.
        seed: random groups and orders.
    """

    tasks: tuple[str, ...] = ("lee", "polarity", "drift")
    group_fraction: float = 0.25
    draws: int = 100
    curve_orders: int = 10
    step: int | None = None
    mode: str = "zero"
    gradient_task: str = "lee"
    seed: int = 0

    def check(self) -> None:
        require(0 < self.group_fraction < 1, f"group fraction {self.group_fraction} must lie in (0, 1)", "e.g. 0.25")
        require(self.draws >= 1, f"draws {self.draws} must be at least 1", "e.g. 100 (for a 95 % interval)")
        require(0 <= self.curve_orders <= self.draws, f"curve orders {self.curve_orders} must lie in 0..draws ({self.draws})",
                "pass fewer random curves or more draws")
        require(self.step is None or self.step >= 1, f"step {self.step} must be at least 1", "e.g. 6")
        require(self.mode in MODES, f"unknown mode {self.mode!r}", f"use one of {', '.join(MODES)}")


@dataclass
class _Scorer:
    """Scores head sets, each (set, task) once."""

    model: LoadedModel
    tasks: list[Task]
    mode: str
    means: object = None
    advance: object = None
    memo: dict = field(default_factory=dict)

    def __call__(self, indices, tasks: list[Task] | None = None) -> dict[str, float]:
        key = frozenset(int(i) for i in indices)
        out: dict[str, float] = {}
        todo = [t for t in (tasks or self.tasks) if (key, t.name) not in self.memo]
        if todo:
            pairs = as_pairs(key, self.model.n_heads)
            with ablate(self.model, pairs, mode=self.mode, means=self.means):
                for t in todo:
                    self.memo[(key, t.name)] = t.evaluate(self.model)
        for t in tasks or self.tasks:
            out.update(self.memo[(key, t.name)])
        if self.advance is not None:
            self.advance()
        return out


def _progress(enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), disable=not enabled, transient=False)


def ablated_stacks(loaded: LoadedModel) -> tuple[LoadedModel, str | None]:
    """The model as the study ablates it, and why any stack is left out (``None``: nothing is).

    The tasks score the vectors of the analysed stack's output. An encoder-decoder's decoder never
    reaches its encoder's output, so ablating a decoder self- or cross-attention head could only
    score 0: the study ablates the encoder's heads alone (the same model, read as its encoder) and
    says so (a warning, and ``left_out`` in ``ablation.json``)."""
    if loaded.arch.decoder is None:
        return loaded, None
    n, n_dec = loaded.arch.depths(loaded.model)
    why = (f"{type(loaded.model).__name__} ({loaded.arch.family}) is an encoder-decoder: the tasks score its encoder's "
           f"output, which its decoder never reaches, so only the encoder's {n} layers are ablated; the "
           f"self- and cross-attention heads of its {n_dec} decoder layers are left out")
    return dataclasses.replace(loaded, arch=dataclasses.replace(loaded.arch, decoder=None)), why


def _run_roles(run: Run, loaded: LoadedModel) -> tuple[dict[str, np.ndarray], str]:
    """Role scores of every head from a finished run (:class:`headsim.runs.run.Run`) of ``loaded``
    (an encoder-decoder's run: the rows of its encoder, when the study ablates that alone)."""
    source = run.meta.get("model", {}).get("source")
    require(source is not None and os.path.realpath(str(source)) == os.path.realpath(loaded.source),
            f"the statistics run {str(run.path)!r} was made with model {source!r}, not {loaded.source!r}",
            "pass a run of the same model (headsim analyze --model …), or leave out --run")
    made = run.spec.model_fingerprint
    require(made == loaded.fingerprint, f"the statistics run {str(run.path)!r} was made with other weights than the "
            f"model given (fingerprint {str(made)[:12]} against {str(loaded.fingerprint)[:12]}; None: loaded by name)",
            "pass a run of these very weights (headsim.analyze(model, ...)), or leave out the run")
    heads = run.heads
    if "stack" in heads.columns and loaded.arch.decoder is None:
        heads = heads[heads["stack"].isin(("self", "encoder self"))]
    return role_scores(heads, loaded.n_layers, loaded.n_heads), str(run.path)


def ablation_study(model=None, out: str | os.PathLike = "ablation-out", *, run_dir=None,
                   config: StudyConfig = StudyConfig(), progress: bool = True, device: str | None = None) -> Path:
    """Run the study and write its results into ``out``; returns the path of ``ablation.json``.

    Args:
        model: a :class:`~headsim.model.load.LoadedModel` or a name for :func:`~headsim.load_model`.
        out: results folder (replaced as a whole when the study finishes; nothing is written before).
        run_dir: a finished ``headsim analyze`` run of the same model (its directory, or the
            :class:`~headsim.runs.run.Run` itself), for the role groups (optional).
        config: :class:`StudyConfig`.
    """
    config.check()
    out = Path(out)
    require(not out.exists() or (out.is_dir() and (not any(out.iterdir()) or (out / ABLATION_JSON).is_file())),
            f"--out {str(out)!r} holds files that are not an ablation study", "choose a new or empty directory")
    started, cpu_started = time.time(), time.process_time()
    run = run_dir if isinstance(run_dir, Run) or run_dir is None else load_run(run_dir)  # refused before the model load
    tasks = get_tasks(list(config.tasks))
    loaded, left_out = ablated_stacks(as_loaded(model, device=device))
    if left_out is not None:
        warnings.warn(left_out, stacklevel=2)
    primary, primary_metric = tasks[0], tasks[0].metrics[0]
    grad_task = next((t for t in tasks if t.name == config.gradient_task), None) or get_tasks([config.gradient_task])[0]
    roles, run_path = _run_roles(run, loaded) if run is not None else ({}, None)
    L, H = loaded.n_layers, loaded.n_heads
    n = L * H
    k = max(1, int(round(config.group_fraction * n)))
    step = config.step or max(1, n // 12)
    points = curve_points(n, step, (k,))
    orders = random_orders(n, config.draws, config.seed)
    for t in tasks:
        t.prepare(loaded)
    means = head_means(loaded, load_drift_texts()) if config.mode == "mean" else None

    with _progress(progress) as bar:
        status = bar.add_task(f"gradient importance ({grad_task.name} loss)", total=None)
        grad = gradient_importance(loaded, grad_task)
        bar.update(status, total=1, completed=1)
        n_curve_criteria = 2 + len(roles)
        total = (1 + n + L + len(roles) + config.draws + n_curve_criteria * len(points)
                 + config.curve_orders * len(points))
        job = bar.add_task(f"ablations ({loaded.name}, {config.mode})", total=total)
        score = _Scorer(loaded, tasks, config.mode, means, lambda: bar.advance(job))

        full = score([])
        groups = [dict(kind="full", group="none", draw=0, n_heads=0, heads="", **full)]
        single = np.full(n, np.nan)
        for i in range(n):
            single[i] = score([i], [primary])[primary_metric]
            groups.append(dict(kind="head", group=label([i], H), draw=0, n_heads=1, heads=label([i], H),
                               **{primary_metric: single[i]}))
        for layer in range(L):
            idx = range(layer * H, (layer + 1) * H)
            groups.append(dict(kind="layer", group=f"layer {layer + 1}", draw=0, n_heads=H, heads=label(idx, H), **score(idx)))
        role_orders = {role: descending(s) for role, s in roles.items()}
        for role, order in role_orders.items():
            groups.append(dict(kind="role", group=role, draw=0, n_heads=k, heads=label(order[:k], H), **score(order[:k])))
        for r, order in enumerate(orders):
            groups.append(dict(kind="random", group=RANDOM, draw=r, n_heads=k, heads=label(order[:k], H),
                               **score(order[:k], [primary])))

        criteria = {SINGLE: descending(single),
                    GRADIENT: ascending(grad), **{f"role: {role}": o for role, o in role_orders.items()}}
        curves = []
        for name, order in criteria.items():
            for p in points:
                scored = score(order[:p], None if p == k else [primary])
                curves.append(dict(criterion=name, draw=0, n_removed=p, heads=label(order[:p], H), **scored))
        for r in range(config.curve_orders):
            for p in points:
                curves.append(dict(criterion=RANDOM, draw=r, n_removed=p, heads=label(orders[r][:p], H),
                                   **score(orders[r][:p], [primary])))

    groups_df, curves_df = pd.DataFrame(groups), pd.DataFrame(curves)
    heads_df = _heads_table(L, H, single - full[primary_metric], grad, roles, primary_metric)
    summary = _summary(full, groups_df, curves_df, heads_df, primary_metric, k, n, list(criteria), config)
    meta = {
        "model": loaded.describe(), "config": asdict(config), "primary_metric": primary_metric,
        "metrics": [m for t in tasks for m in t.metrics], "task_metrics": [list(t.metrics) for t in tasks], "n_heads_total": n, "group_size": k, "curve_points": points,
        "gradient_task": grad_task.name, "statistics_run": run_path, "roles": list(roles),
        **({"left_out": left_out} if left_out is not None else {}),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(time.time() - started, 1),
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
        "summary": summary,
    }
    return _write(out, meta, heads_df, groups_df, curves_df)


@dataclass
class AblationResult(HtmlDisplay):
    """A finished study read back (:func:`load_ablation`): ``ablation.json`` (:attr:`meta`, with its
    summary) and the per-head, per-group and pruning-curve tables. Displays in a notebook as its
    settings, scores, costliest heads and figures; :meth:`to_html` writes that page."""

    path: Path
    meta: dict
    heads: pd.DataFrame
    groups: pd.DataFrame
    curves: pd.DataFrame

    def _html_body(self) -> tuple[str, str]:
        from ..views.html.summaries import ablation_html

        return ablation_html(self)


def load_ablation(folder: str | os.PathLike) -> AblationResult:
    """Read a finished ablation study (the ``--out`` folder of ``headsim ablate``)."""
    from ..io import read_json, read_table

    folder = Path(folder)
    require((folder / ABLATION_JSON).is_file(), f"{str(folder)!r} holds no finished ablation study (no {ABLATION_JSON})",
            "pass the --out folder of a finished `headsim ablate`")
    meta = read_json(folder / ABLATION_JSON)
    heads, groups, curves = (read_table(folder / name) for name in (HEADS, GROUPS, CURVES))
    return AblationResult(folder, meta, heads, groups, curves)


def resummarize(folder: str | os.PathLike) -> Path:
    """Recompute ``ablation.json``'s summary and the figures from a saved study's tables (no model run)."""
    from ..io import write_json
    from .plots import draw_figures

    study = load_ablation(folder)
    folder, meta, heads, groups, curves = study.path, study.meta, study.heads, study.groups, study.curves
    config = StudyConfig(**{**meta["config"], "tasks": tuple(meta["config"]["tasks"])})
    metric = meta["primary_metric"]
    full = {m: float(groups.loc[groups["kind"] == "full", m].iloc[0]) for m in meta["metrics"]}
    criteria = list(dict.fromkeys(c for c in curves["criterion"] if c != RANDOM))
    meta["summary"] = _summary(full, groups, curves, heads, metric, meta["group_size"], meta["n_heads_total"], criteria, config)
    meta.setdefault("task_metrics", [list(get_tasks([t])[0].metrics) for t in config.tasks])
    write_json(folder / ABLATION_JSON, meta)
    draw_figures(folder, meta, heads, groups, curves)
    return folder / ABLATION_JSON


def _heads_table(L: int, H: int, delta: np.ndarray, grad: np.ndarray, roles: dict, metric: str) -> pd.DataFrame:
    table = pd.DataFrame({"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L),
                          f"delta_{metric}": delta, "gradient_importance": np.asarray(grad).ravel()})
    for role, s in roles.items():
        table[f"role_{role}"] = np.asarray(s).ravel()
    return table


def _summary(full: dict, groups: pd.DataFrame, curves: pd.DataFrame, heads: pd.DataFrame, metric: str, k: int,
             n: int, criteria: list[str], config: StudyConfig) -> dict:
    rand = groups.loc[groups["kind"] == "random", metric].to_numpy()
    lo, hi = np.percentile(rand, [2.5, 97.5])
    rows_k = {c: curves[(curves["criterion"] == c) & (curves["n_removed"] == k)].iloc[0] for c in criteria}
    at_k = {c: float(row[metric]) for c, row in rows_k.items()}
    at_k_all = {c: {m: float(row[m]) for m in full} for c, row in rows_k.items()}
    share = {c: float((1 + (rand <= v).sum()) / (1 + len(rand))) for c, v in at_k.items()}
    roles = {row.group: {"score": float(getattr(row, metric)), "random_share_at_or_below": share[f"role: {row.group}"]}
             for row in groups[groups["kind"] == "role"].itertuples()}
    removable_heads = {}
    for c in [*criteria, RANDOM]:
        per_draw = []
        for _, curve in curves[curves["criterion"] == c].groupby("draw"):
            per_draw.append([removable(curve["n_removed"].to_numpy(), curve[metric].to_numpy(), full[metric], tol)
                             for tol in TOLERANCES])
        if per_draw:
            arr = np.asarray(per_draw)
            removable_heads[c] = {f"{tol:g}": (int(arr[0, j]) if c != RANDOM else float(np.median(arr[:, j])))
                                  for j, tol in enumerate(TOLERANCES)}
    importance = -heads[f"delta_{metric}"].to_numpy()  # how much the score falls when the head alone is removed
    corr = {"gradient_importance": rank_correlation(importance, heads["gradient_importance"].to_numpy())}
    for col in [c for c in heads.columns if c.startswith("role_")]:
        corr[col] = rank_correlation(importance, heads[col].to_numpy())
    return {
        "full": full, "group_size": k, "n_heads_total": n,
        "random": {"mean": float(rand.mean()), "p2.5": float(lo), "p97.5": float(hi), "draws": int(len(rand))},
        "at_group_size": at_k, "at_group_size_all": at_k_all, "random_share_at_or_below": share, "roles": roles, "removable": removable_heads, "tolerances": list(TOLERANCES),
        "rank_correlation_with_single_head_drop": {c: {"rho": v[0], "ci95": [v[1], v[2]]} for c, v in corr.items()},
    }


def _write(out: Path, meta: dict, heads: pd.DataFrame, groups: pd.DataFrame, curves: pd.DataFrame) -> Path:
    from ..io import write_json
    from .plots import draw_figures

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ablation-", dir=out.parent))
    try:
        heads.to_parquet(tmp / HEADS, index=False)
        groups.to_parquet(tmp / GROUPS, index=False)
        curves.to_parquet(tmp / CURVES, index=False)
        draw_figures(tmp, meta, heads, groups, curves)
        write_json(tmp / ABLATION_JSON, meta)  # last: its presence marks a finished study
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / ABLATION_JSON
