"""`headsim merge`: combine run shards exactly.

Every variable of a run's ``stats.nc`` is a sum or a count over windows, so shards of one corpus
(or several corpora analysed with the same model and settings) merge by adding them; the tables
are then derived again from the merged arrays.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import xarray as xr

from . import rundir
from .errors import require
from .stats import heads_table, layers_table

#: settings that must agree for shards to be added together
MUST_MATCH = ("seq_len", "threshold", "top_k_columns")


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
    """Merge finished runs into ``out`` (stats.nc, tables, windows.parquet, run.json)."""
    require(len(run_dirs) >= 2, "merge needs at least two run directories", "pass RUN_A RUN_B … --out DIR")
    runs = [rundir.load_run(d) for d in run_dirs]
    first = runs[0].meta
    for run in runs[1:]:
        require(run.meta["model"]["source"] == first["model"]["source"],
                f"run {str(run.path)!r} used model {run.meta['model']['name']!r}, not {first['model']['name']!r}",
                "merge only runs of the same model")
        for key in MUST_MATCH:
            require(run.meta[key] == first[key], f"run {str(run.path)!r} has {key}={run.meta[key]}, not {first[key]}",
                    "merge only runs made with the same settings")
    out_path = Path(out)
    rundir.prepare_out_dir(out_path, resume=False, overwrite=overwrite)
    ds = merge_datasets([r.dataset for r in runs])
    rundir.write_dataset(out_path / rundir.STATS_NC, ds)
    rundir.write_table(out_path / rundir.HEADS, heads_table(ds))
    rundir.write_table(out_path / rundir.LAYERS, layers_table(ds))
    tables, offset = [], 0
    for run in runs:
        t = pq.read_table(run.path / rundir.WINDOWS)
        t = t.set_column(t.schema.get_field_index("window"), "window",
                         pa.array(range(offset, offset + t.num_rows), type=pa.int64()))
        tables.append(t)
        offset += t.num_rows
    rundir.atomic_write(out_path / rundir.WINDOWS, lambda p: pq.write_table(pa.concat_tables(tables), p))
    meta = {key: first[key] for key in ("model", "seq_len", "threshold", "top_k_columns", "dtype", "device",
                                         "sentence_splitter", "versions", "git_commit") if key in first}
    meta.update({
        "corpus": {"name": "+".join(r.meta["corpus"]["name"] for r in runs),
                   "shards": [{"path": str(r.path), "corpus": r.meta["corpus"], "windows": r.meta["windows"]} for r in runs]},
        "windows": int(sum(r.meta["windows"] for r in runs)),
        "merged_from": [str(r.path) for r in runs],
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "complete": True,
    })
    rundir.write_json(out_path / rundir.RUN_JSON, meta)
    return out_path
