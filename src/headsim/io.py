"""Files headsim writes and reads, for every module: atomic writes (a temporary name moved into
place), JSON, Arrow tables and xarray datasets, and the size-and-checksum records of manifests.

Write failures (a full disk, no permission, a read-only file system) become one-line errors
(:class:`~headsim.errors.HeadsimError`) naming the path; a damaged file being read becomes one line
too (:func:`reading`), whichever library noticed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .errors import HeadsimError, require


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_failed(path: Path, exc: OSError) -> HeadsimError:
    what = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in what:  # pyarrow's errors carry no errno
        fix = "free space on that disk (or pass another --out), then run the command again (analyze: with --resume)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "pass an output path you may write to"
    else:
        fix = "pass another output path"
    return HeadsimError(f"cannot write {str(path)!r}: {what}", fix)


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """OS errors in the block (full disk, read-only file system, no permission) become the one-line
    error that names ``path``, the output being written."""
    try:
        yield
    except OSError as exc:
        raise write_failed(Path(path), exc) from exc


def check_writable(path: str | os.PathLike) -> None:
    """Refuse, before any slow work, an output ``path`` whose nearest existing folder cannot be
    written (a probe folder is made there and removed; nothing else is created)."""
    folder = Path(path).absolute()
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    if not folder.is_dir():
        return  # a file in the way: the command's own check names it
    with writing(Path(path)):
        os.rmdir(tempfile.mkdtemp(prefix=".headsim-probe-", dir=folder))


def atomic_write(path: Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``path``; an OS error (full disk, no
    permission) becomes a :class:`HeadsimError` and leaves ``path`` as it was."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
        os.close(fd)
        write(Path(tmp))
        os.replace(tmp, path)
    except OSError as exc:
        raise write_failed(path, exc) from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    def write(p: Path) -> None:
        with open(p, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    return atomic_write(path, write)


def write_json(path: Path, data: dict) -> Path:
    return write_bytes(path, json.dumps(data, indent=2, default=_json_default).encode("utf-8"))


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
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeadsimError(f"cannot read {str(path)!r}: {exc}", "point to a directory written by headsim analyze") from exc
    require(isinstance(data, dict), f"{str(path)!r} is not a headsim run.json (not a JSON object)",
            "point to a directory written by headsim analyze")
    return data


def write_dataset(path: Path, ds: xr.Dataset, encoding: dict | None = None) -> Path:
    """``stats.nc`` (with the netCDF ``encoding`` of its variables, where given), serialised in memory
    first: the file itself is then written by Python, whose errors (a full disk) are clean, where the
    HDF5 library writing straight to disk could crash."""
    return write_bytes(path, bytes(ds.to_netcdf(engine="h5netcdf", encoding=encoding)))


def damaged(path: Path, exc: Exception) -> HeadsimError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return HeadsimError(f"cannot read {str(path)!r}: {first}",
                        "the file is damaged: run the analysis again (headsim analyze --overwrite) or restore the file")


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Any error reading ``path`` in the block (h5py, xarray, pyarrow and OS errors for a damaged
    file) becomes one :func:`damaged` line."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - several libraries, several types
        raise damaged(path, exc) from exc


def open_dataset(path: Path) -> xr.Dataset:
    with reading(path):
        return xr.open_dataset(path, engine="h5netcdf")


def read_table(path: Path) -> pd.DataFrame:
    with reading(path):
        return pd.read_parquet(path)


def write_table(path: Path, df: pd.DataFrame) -> Path:
    return atomic_write(path, lambda p: df.to_parquet(p, index=False))


def file_record(path: Path) -> dict:
    """Size and sha256 of a file, as manifests store them."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


def check_file(path: Path, record: dict, what: str, fix: str) -> None:
    """Refuse a file that is missing or whose size or checksum differs from ``record``."""
    require(path.is_file(), f"{what} {str(path)!r} is missing", fix)
    got = file_record(path)
    require(got["size"] == record.get("size"), f"{what} {str(path)!r} is damaged ({got['size']} bytes, "
            f"{record.get('size')} written)", fix)
    require(got["sha256"] == record.get("sha256"), f"{what} {str(path)!r} is damaged (its checksum changed)", fix)
