"""`headsim merge`: combine run shards exactly.

Every variable of a run's ``stats.nc`` is a sum or a count over windows, so shards of one corpus
(or several corpora analysed with the same model and settings) merge by adding them; the tables
are then derived again from the merged arrays.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import xarray as xr

from ..errors import require
from ..stats import heads_table, layers_table
from .run import Run
from .rundir import RunDir, load_run, staged
from .spec import RunSpec, describe_changes


def run_ids(run: Run) -> list[str]:
    """The ids of the analyze runs whose windows ``run`` holds (a merged run holds several)."""
    return list(run.meta.get("run_ids") or [RunDir(run.path).run_id])


def holdings(run: Run) -> list[dict]:
    """The windows of which corpora ``run`` holds (``run.json``'s ``holds``: corpus sha256 and name,
    ``[first, stop)`` ranges); a run written before they were recorded holds windows ``[0, windows)``
    of its corpus (every run then started at the first window)."""
    held = run.meta.get("holds")
    if isinstance(held, list):
        return held
    return [{"corpus_sha256": run.spec.corpus_sha256, "corpus": run.meta.get("corpus", {}).get("name"),
             "windows": [[0, int(run.meta.get("windows", 0))]]}]


def check_disjoint(runs: list[Run]) -> None:
    """Refuse runs that hold one window of one corpus twice, naming both runs and the windows."""
    ranges: dict[str, list[tuple[int, int, Path, str]]] = {}
    for run in runs:
        for held in holdings(run):
            for first, stop in held["windows"]:
                ranges.setdefault(held["corpus_sha256"], []).append((int(first), int(stop), run.path, held.get("corpus")))
    for sha, spans in ranges.items():
        spans.sort(key=lambda span: span[:2])
        for (a0, a1, a_path, name), (b0, b1, b_path, _) in zip(spans, spans[1:]):
            require(b0 >= a1, f"runs {str(a_path)!r} and {str(b_path)!r} both hold windows {b0}..{min(a1, b1) - 1} of "
                    f"corpus {name!r} (sha256 {sha[:12]}…): merged, they would count those windows twice",
                    "merge runs of disjoint windows: analyse one corpus in parts with headsim analyze --shard I/N")


def check_mergeable(runs: list[Run]) -> None:
    """Refuse runs that would be counted twice (the same run, or overlapping windows of one corpus)
    or were made with settings that change the numbers."""
    seen: dict[str, Path] = {}
    for run in runs:
        for rid in run_ids(run):
            require(rid not in seen, f"runs {str(seen.get(rid))!r} and {str(run.path)!r} hold the same analysis (run id {rid})",
                    "pass each run once (a copy of a run, or a merge that already holds it, would count its windows twice)")
            seen[rid] = run.path
    first = runs[0]
    for run in runs[1:]:
        changed = first.spec.differences(run.spec, RunSpec.NUMBERS)
        require(not changed, f"runs {str(first.path)!r} and {str(run.path)!r} differ in settings that change the numbers ("
                + describe_changes(changed, "first", "this") + ")",
                "merge only runs made with the same model and settings (analyse the shards again with one setting)")
    check_disjoint(runs)


def merge_datasets(datasets: list[xr.Dataset]) -> xr.Dataset:
    """Add run datasets variable by variable (coordinates and attributes must agree)."""
    require(len(datasets) >= 1, "nothing to merge", "pass at least one run directory")
    total = datasets[0].copy(deep=True)
    for ds in datasets[1:]:
        require(set(ds.data_vars) == set(total.data_vars), "runs hold different statistics",
                "merge runs made by the same headsim version")
        for name in total.data_vars:
            require(ds[name].shape == total[name].shape, f"runs disagree on the shape of {name}",
                    "merge runs of the same model and seq_len")
            total[name] = total[name] + ds[name].values
    return total


def merge_runs(run_dirs: list[str | os.PathLike], out: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Merge finished runs into ``out``, a run directory like theirs.

    The merged run is written into a temporary directory beside ``out`` and renamed onto it only when
    complete; ``out`` may not be one of the inputs (nor inside one, nor hold one).
    """
    require(len(run_dirs) >= 2, "merge needs at least two run directories", "pass RUN_A RUN_B … --out DIR")
    out_path = Path(out)
    target = out_path.resolve()
    for d in run_dirs:
        src = Path(d).resolve()
        require(src != target and target not in src.parents and src not in target.parents,
                f"--out {str(out_path)!r} overlaps the input run {str(d)!r}",
                "write the merge to a new directory (merge never writes over its inputs)")
    for d in run_dirs:
        RunDir(d).lock.check_free()
    runs = [load_run(d) for d in run_dirs]
    check_mergeable(runs)
    ds = merge_datasets([r.dataset for r in runs])
    with staged(out_path, overwrite=overwrite) as stage:
        tables, offset = [], 0
        for run in runs:
            t = run.window_table()
            t = t.set_column(t.schema.get_field_index("window"), "window",
                             pa.array(range(offset, offset + t.num_rows), type=pa.int64()))
            tables.append(t)
            offset += t.num_rows
        stage.commit(merged_meta(runs), ds, heads_table(ds), layers_table(ds), tables)
    return out_path


def merged_meta(runs: list[Run]) -> dict:
    """``run.json`` of the merge: the first run's model and spec, the corpora and windows of all."""
    first = runs[0].meta
    windows = int(sum(r.meta["windows"] for r in runs))
    shards = hashlib.sha256("+".join(r.spec.corpus_sha256 for r in runs).encode()).hexdigest()
    spec = replace(runs[0].spec, corpus_sha256=shards, windows=windows, first_window=0)
    meta = {key: first[key] for key in ("model", "device", "versions", "git_commit") if key in first}
    return {**meta, **spec.as_meta(),
            "corpus": {"name": "+".join(r.meta["corpus"]["name"] for r in runs), "sha256": shards,
                       "shards": [{"path": str(r.path), "corpus": r.meta["corpus"], "windows": r.meta["windows"]} for r in runs]},
            "merged_from": [str(r.path) for r in runs],
            "holds": [held for r in runs for held in holdings(r)],
            "run_ids": [rid for r in runs for rid in run_ids(r)],
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": False}
