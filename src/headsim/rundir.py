"""A run directory on disk: what `headsim analyze` writes and `report`, `merge`, `serve` read.

Layout::

    run.json          model, corpus (name, sha256), windows, seq_len, threshold, dtype, device,
                      package versions, git commit, timings; "complete": true once finished
    stats.nc          labelled arrays (xarray Dataset, netCDF4 via h5netcdf)
    heads.parquet     one row per (layer, head), 1-based
    layers.parquet    one row per layer
    windows.parquet   one row per analysed window: input_ids, attention_mask, sentence_ids
    checkpoint/       while running: accumulator state + window parts (removed when complete)

Every file is written to a temporary name and moved into place, so a killed run never leaves a
half-written file behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import xarray as xr

from .errors import HeadsimError, require

RUN_JSON, STATS_NC, HEADS, LAYERS, WINDOWS = "run.json", "stats.nc", "heads.parquet", "layers.parquet", "windows.parquet"
CHECKPOINT = "checkpoint"
STATE, PROGRESS = "state.npz", "progress.json"


def atomic_write(path: Path, write) -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_json(path: Path, data: dict) -> Path:
    return atomic_write(path, lambda p: p.write_text(json.dumps(data, indent=2, default=_json_default)))


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HeadsimError(f"cannot read {str(path)!r}: {exc}", "point to a directory written by headsim analyze") from exc


def write_dataset(path: Path, ds: xr.Dataset) -> Path:
    return atomic_write(path, lambda p: ds.to_netcdf(p, engine="h5netcdf"))


def read_dataset(path: Path) -> xr.Dataset:
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


def write_table(path: Path, df: pd.DataFrame) -> Path:
    return atomic_write(path, lambda p: df.to_parquet(p, index=False))


def windows_table(start: int, input_ids: np.ndarray, attention_mask: np.ndarray, sentence_ids: np.ndarray) -> pa.Table:
    """Rows for ``windows.parquet``: integer lists per window, numbered from ``start``."""
    n = input_ids.shape[0]

    def lists(a: np.ndarray, t: type) -> pa.ListArray:  # one list per row, over the array's own buffer
        a = np.ascontiguousarray(a, dtype=t)
        return pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * a.shape[1]), pa.array(a.reshape(-1)))

    return pa.table({
        "window": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "input_ids": lists(input_ids, np.int32),
        "attention_mask": lists(attention_mask, np.int8),
        "sentence_ids": lists(sentence_ids, np.int32),
    })


def git_commit() -> str | None:
    """The commit of the headsim checkout, if it is one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    names = ("headsim", "torch", "transformers", "tokenizers", "numpy", "xarray", "pandas", "pyarrow", "pysbd")
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def is_run_dir(path: Path) -> bool:
    return (path / RUN_JSON).exists() or (path / CHECKPOINT).exists()


def prepare_out_dir(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse to clobber another run unless told to; create the directory."""
    require(not (resume and overwrite), "--resume and --overwrite given together", "pass one of them")
    if out.exists():
        require(out.is_dir(), f"output {str(out)!r} is a file", "pass a directory for --out")
        holds = any(out.iterdir())
        if holds and not (resume or overwrite):
            what = "another run" if is_run_dir(out) else "other files"
            raise HeadsimError(f"output directory {str(out)!r} already holds {what}",
                               "pass --resume to continue it, --overwrite to replace it, or another --out")
        if overwrite and holds:
            require(is_run_dir(out), f"--overwrite refused: {str(out)!r} holds files that are not a headsim run",
                    "choose an empty or new directory")
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


@dataclass
class Run:
    """A finished run loaded from disk."""

    path: Path
    meta: dict
    dataset: xr.Dataset
    heads: pd.DataFrame
    layers: pd.DataFrame

    def windows(self) -> pd.DataFrame:
        """The analysed windows (input_ids, attention_mask, sentence_ids per row)."""
        return pd.read_parquet(self.path / WINDOWS)


def load_run(path: str | os.PathLike) -> Run:
    """Read a finished run directory, with a clear error when it is not one."""
    p = Path(path)
    require(p.is_dir(), f"run directory {str(p)!r} does not exist", "pass a directory written by headsim analyze")
    require((p / RUN_JSON).exists(), f"{str(p)!r} is not a headsim run (no run.json)", "run headsim analyze --out DIR first")
    meta = read_json(p / RUN_JSON)
    require(meta.get("complete", False), f"run {str(p)!r} is not finished",
            f"finish it with headsim analyze --resume --out {p}")
    return Run(p, meta, read_dataset(p / STATS_NC), pd.read_parquet(p / HEADS), pd.read_parquet(p / LAYERS))
