"""A run directory on disk, written and checked (:class:`RunDir`). `headsim analyze` and `merge` write
runs through :class:`RunDir`; `report`, `compare`, `reproduce`, `merge`, `ablate` and the explorer
read them only through :meth:`RunDir.load` (a :class:`Run`).

The names in it and which of them headsim owns: :mod:`headsim.runs.layout`; the reader:
:class:`headsim.runs.run.Run`; the lock: :class:`headsim.runs.lock.RunLock`.

:class:`RunDir` keeps these promises (each has a test in ``tests/test_faults.py``):

- headsim deletes only its own files: ``--overwrite`` clears a directory only when it is a headsim run
  (marker, or a ``run.json`` written by headsim) holding nothing but the names above and the report's
  outputs; otherwise it refuses and names what else is there.
- one writer at a time: the lock is taken before the first write and held until the process is done;
  a lock whose process is gone (same host, PID not alive or reused) is taken over.
- finished means ``run.json`` has this layout, says complete, and every file it lists has its size
  and checksum; every reader checks this (:meth:`RunDir.check_finished`), so a damaged, half-written
  or older-layout run never looks finished, and the refusal reads the same in every command.
- a checkpoint is committed by its manifest, written last; resume verifies every part it names.
- every file is written under a temporary name and moved into place; write failures (full disk,
  no permission) become one-line errors.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import xarray as xr

from ..errors import HeadsimError, require
from ..io import (atomic_write, check_file, file_record, now, read_json, read_table, write_dataset, write_failed, write_json,
                  write_table)
from ..stats import schema
from ..windows import WINDOWS_SCHEMA
from .layout import (CHECKPOINT, CHECKPOINT_OWN, HEADS, LAYERS, LAYOUT, LOCK, MANIFEST, MARKER, MARKER_KIND, RESULT_FILES,
                     RUN_JSON, RUN_OWN, STATS_NC, WINDOWS, describe_names, foreign, own_file)
from .lock import RunLock
from .run import Run
from .spec import RunSpec, requested_backend


def _headsim_meta(meta: object) -> bool:
    """A ``run.json`` written by headsim (runs from before the marker have no other proof)."""
    return isinstance(meta, dict) and {"model", "seq_len", "threshold", "complete"} <= set(meta)


class RunDir:
    """One run directory: what is in it, its lock, its checkpoint, its commit and its finished check.

    Writers use :meth:`writer` (analyze) or :func:`staged` (merge); readers :meth:`check_finished`
    and :meth:`load`.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.lock = RunLock(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT

    # -- what is there ------------------------------------------------------------------------

    def marker(self) -> dict | None:
        """The marker's contents, ``None`` without a valid one."""
        try:
            data = json.loads((self.path / MARKER).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("kind") == MARKER_KIND and data.get("run_id") else None

    def read_meta(self) -> dict | None:
        """``run.json`` (``None`` when there is none; an error when it cannot be read)."""
        path = self.path / RUN_JSON
        return read_json(path) if path.is_file() else None

    def is_headsim(self) -> bool:
        """Written by headsim: the marker, or a headsim ``run.json`` (runs from before the marker)."""
        if self.marker() is not None:
            return True
        try:
            return _headsim_meta(self.read_meta())
        except HeadsimError:
            return False

    def holds_run(self) -> bool:
        """A run has started writing here (``run.json`` or a checkpoint)."""
        return (self.path / RUN_JSON).exists() or self.checkpoint.exists()

    def entries(self) -> list[str]:
        """Names in the directory besides the lock."""
        return sorted(p.name for p in self.path.iterdir() if p.name != LOCK)

    def foreign(self) -> list[str]:
        """What is in the directory that headsim does not write (empty for a clean run directory)."""
        return foreign(self.path, RUN_OWN)

    @property
    def run_id(self) -> str:
        """The marker's run id; for runs from before the marker, one derived from their statistics."""
        marker = self.marker()
        if marker is not None:
            return str(marker["run_id"])
        meta = self.read_meta() or {}
        if meta.get("run_id"):
            return str(meta["run_id"])
        return "stats-sha256:" + file_record(self.path / STATS_NC)["sha256"]

    def settings(self) -> dict:
        """The analyze settings this run was started with, as :func:`headsim.analyze` arguments
        (for ``--resume`` without repeating them); empty when there is no run here yet."""
        meta = self.stored_meta()
        if meta is None:
            return {}
        out = RunSpec.from_meta(meta, str(self.path / RUN_JSON)).analyze_args()
        spec = (meta.get("corpus") or {}).get("spec")
        if spec is not None:
            out["corpus"] = spec
        shard = meta.get("shard")
        if isinstance(shard, dict):  # a part of the windows: its count is not the windows of the whole, so left open
            out["shard"] = f"{shard['index']}/{shard['count']}"
            out.pop("windows", None)
        out["backend"] = requested_backend(meta)
        return out

    def check_layout(self, meta: dict) -> None:
        """Refuse a ``run.json`` written with another layout than :data:`LAYOUT` (another headsim version)."""
        got = meta.get("layout")
        require(got == LAYOUT, f"run {str(self.path)!r} was written by another version of headsim "
                f"({f'layout {got}' if got else 'no layout version'}; this version reads layout {LAYOUT})",
                f"analyse it again with this version: headsim analyze --out {self.path} --overwrite "
                "(with the run's --model, --corpus and settings)")

    def stored_meta(self) -> dict | None:
        """``run.json`` of the run here (``None`` when there is none); one written with another layout
        is refused (:meth:`check_layout`), as every reader refuses it."""
        meta = self.read_meta()
        if meta is not None:
            self.check_layout(meta)
        return meta

    def resume_meta(self) -> dict:
        """``run.json`` of the run ``--resume`` continues (this layout; :meth:`check_target` saw it exists)."""
        meta = self.stored_meta()
        require(meta is not None, f"nothing to resume in {str(self.path)!r} (the run stopped before its first write)",
                "start the run again without --resume (add --overwrite to replace what is there)")
        return meta

    def check_target(self, *, resume: bool, overwrite: bool) -> None:
        """Refuse, before anything is written, an output this run must not use (reads only)."""
        require(not (resume and overwrite), "--resume and --overwrite given together", "pass one of them")
        p, shown = self.path, str(self.path)
        if not p.exists():
            require(not resume, f"nothing to resume in {shown!r} (it does not exist)", "start the run without --resume")
            return
        require(p.is_dir(), f"output {shown!r} is a file", "pass a directory for --out")
        try:
            entries = self.entries()
        except OSError as exc:
            raise HeadsimError(f"cannot read output directory {shown!r}: {exc.strerror}", "pass a directory you may write to") from exc
        self.lock.check_free()
        if not entries:
            require(not resume, f"nothing to resume in {shown!r} (it is empty)", "start the run without --resume")
            return
        headsim = self.is_headsim()
        if not headsim:
            if resume:
                raise HeadsimError(f"nothing to resume in {shown!r}: it holds no headsim run ({describe_names(entries)})",
                                   "start the run without --resume, in an empty or new directory")
            if overwrite:
                raise HeadsimError(f"--overwrite refused: {shown!r} holds files that are not a headsim run ({describe_names(entries)})",
                                   "choose an empty or new directory (headsim deletes only its own runs)")
            raise HeadsimError(f"output directory {shown!r} already holds other files ({describe_names(entries)})",
                               "pass an empty or new directory for --out")
        if overwrite:
            foreign = self.foreign()
            require(not foreign, f"--overwrite refused: {shown!r} also holds files headsim did not write ({describe_names(foreign)})",
                    "move them out of the run directory, or pass another --out (headsim deletes only its own files)")
            return
        if resume:
            self.resume_meta()
            return
        if self.holds_run():
            raise HeadsimError(f"output directory {shown!r} already holds another run",
                               "pass --resume to continue it, --overwrite to replace it, or another --out")
        foreign = self.foreign()
        require(not foreign, f"output directory {shown!r} already holds other files ({describe_names(foreign)})",
                "pass an empty or new directory for --out")

    # -- writing ------------------------------------------------------------------------------

    def _write_marker(self) -> None:
        write_json(self.path / MARKER, {"kind": MARKER_KIND, "layout": LAYOUT, "run_id": uuid.uuid4().hex, "created": now()})

    def _clear(self) -> None:
        """Delete the previous run (only headsim's files: :meth:`check_target` checked)."""
        require(not self.foreign(), f"--overwrite refused: {str(self.path)!r} holds files headsim did not write",
                "move them out of the run directory")
        for entry in self.path.iterdir():
            if entry.name == LOCK:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    @contextmanager
    def writer(self, *, resume: bool, overwrite: bool) -> Iterator["RunDir"]:
        """Hold the run directory for writing: checked, locked, cleared on ``overwrite``, marked.

        A new run gets a new run id in its marker before anything else is written; the lock is
        released when the block ends (however it ends).
        """
        self.check_target(resume=resume, overwrite=overwrite)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_failed(self.path, exc) from exc
        self.lock.acquire()
        try:
            self.check_target(resume=resume, overwrite=overwrite)  # again, now that no one else can write
            if overwrite or not self.holds_run():
                self._clear()
            if self.marker() is None:
                self._write_marker()
            yield self
        finally:
            self.lock.release()

    def write_meta(self, meta: dict) -> dict:
        """Write ``run.json`` (with this version's :data:`LAYOUT`); returns what was written."""
        meta = {**meta, "layout": LAYOUT}
        write_json(self.path / RUN_JSON, meta)
        return meta

    # -- the checkpoint -----------------------------------------------------------------------

    def _manifest(self) -> dict | None:
        path = self.checkpoint / MANIFEST
        if not path.is_file():
            return None
        try:
            man = json.loads(path.read_text(encoding="utf-8"))
            int(man["windows_done"]), man["state"]["name"], list(man["parts"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise HeadsimError(f"the checkpoint manifest {str(path)!r} is damaged ({type(exc).__name__})",
                               "start the run again with --overwrite (the checkpoint cannot be trusted)") from exc
        return man

    def _verified_parts(self, man: dict, contiguous: bool = True) -> list[tuple[int, Path]]:
        """``(first window, file)`` of every window part the manifest names, each checked, in window
        order; they must not overlap, hold ``windows_done`` windows together and, when ``contiguous``,
        cover windows ``0..windows_done`` (a run that goes in order; the Ray engine's shares finish in
        any order)."""
        fix = "start the run again with --overwrite (the checkpoint cannot be trusted)"
        files, end, rows = [], 0, 0
        for part in sorted(man["parts"], key=lambda p: int(p.get("start", -1))):
            start = int(part.get("start", -1))
            require(start >= end and (start == end or not contiguous),
                    f"checkpoint of {str(self.path)!r} has no windows {end}..{start}" if start > end else
                    f"checkpoint of {str(self.path)!r} holds window {start} twice", fix)
            path = self.checkpoint / str(part["name"])
            check_file(path, part, "checkpoint part", fix)
            files.append((start, path))
            end = start + int(part["rows"])
            rows += int(part["rows"])
        require(rows == int(man["windows_done"]), f"checkpoint of {str(self.path)!r} holds {rows} windows, "
                f"its manifest says {man['windows_done']}", fix)
        return files

    def _tidy_checkpoint(self, man: dict | None) -> None:
        """Remove checkpoint files the manifest does not name (written after its last commit)."""
        if not self.checkpoint.is_dir():
            return
        keep = {MANIFEST} if man is not None else set()
        if man is not None:
            keep |= {man["state"]["name"]} | {p["name"] for p in man["parts"]}
        for entry in self.checkpoint.iterdir():
            if entry.name not in keep and entry.is_file() and not entry.is_symlink() and own_file(entry.name, CHECKPOINT_OWN):
                entry.unlink()

    def load_checkpoint(self, *, contiguous: bool = True) -> tuple[dict, int] | None:
        """The accumulator state and the windows done, every part verified (see :meth:`_verified_parts`
        for ``contiguous``); ``None`` without a checkpoint."""
        man = self._manifest()
        if man is None:
            if self.checkpoint.is_dir() and any(self.checkpoint.iterdir()):
                warnings.warn(f"the checkpoint in {str(self.path)!r} has no manifest (stopped before its first commit); "
                              "starting from the first window", stacklevel=3)
            self._tidy_checkpoint(None)
            return None
        fix = "start the run again with --overwrite (the checkpoint cannot be trusted)"
        self._verified_parts(man, contiguous)
        state_path = self.checkpoint / man["state"]["name"]
        check_file(state_path, man["state"], "checkpoint state", fix)
        try:
            with np.load(state_path, allow_pickle=False) as z:
                state = {k: z[k] for k in z.files}
        except Exception as exc:  # noqa: BLE001 - zip/npy errors of a damaged file
            raise HeadsimError(f"cannot read checkpoint state {str(state_path)!r}: {exc}", fix) from exc
        done = int(state.pop("__windows_done__"))
        require(done == int(man["windows_done"]), f"checkpoint state {str(state_path)!r} does not match its manifest", fix)
        self._tidy_checkpoint(man)
        return state, done

    def checkpoint_parts(self) -> list[tuple[int, int]]:
        """``(first window, windows)`` of every window part the checkpoint's manifest names, in window
        order (read after :meth:`load_checkpoint` verified them); empty without a checkpoint."""
        man = self._manifest()
        return sorted((int(p["start"]), int(p["rows"])) for p in man["parts"]) if man is not None else []

    def save_checkpoint(self, state: dict, done: int, parts: list[pa.Table], *, one_part: bool = False) -> None:
        """Commit a checkpoint: new window parts and state first, then the manifest that names them.

        ``parts`` are :func:`~headsim.windows.windows_table` rows, each stored as a part of its own from its first
        ``window``; with ``one_part`` they are consecutive and stored as one part.
        """
        man = self._manifest() or {"parts": []}
        entries = list(man["parts"])
        if parts and one_part:
            parts = [pa.concat_tables(parts)]
        for table in parts:
            if table.num_rows == 0:
                continue
            start = int(table["window"][0].as_py())
            path = self.checkpoint / f"windows-{start:09d}.parquet"
            atomic_write(path, lambda p, t=table: pq.write_table(t, p))
            entries.append({"name": path.name, "start": start, "rows": table.num_rows, **file_record(path)})
        state = dict(state, __windows_done__=np.int64(done))
        path = self.checkpoint / f"state-{done:09d}.npz"

        def write(p: Path) -> None:
            with open(p, "wb") as fh:
                np.savez(fh, **state)

        atomic_write(path, write)
        new = {"format": 1, "windows_done": int(done), "state": {"name": path.name, **file_record(path)}, "parts": entries}
        write_json(self.checkpoint / MANIFEST, new)
        self._tidy_checkpoint(new)

    # -- finishing ----------------------------------------------------------------------------

    def _write_windows(self, parts: list[pa.Table]) -> None:
        """``windows.parquet``: the checkpoint's verified parts and ``parts`` (:func:`~headsim.windows.windows_table`
        rows) in window order, which must run from window 0 without a gap (memory: one part)."""
        man = self._manifest()
        files = self._verified_parts(man, contiguous=False) if man is not None else []
        sources = sorted([(start, f) for start, f in files] +
                         [(int(t["window"][0].as_py()), t) for t in parts if t.num_rows], key=lambda item: item[0])
        require(sources, f"no windows to write into {str(self.path)!r}", "analyse at least one window")

        def write(path: Path) -> None:
            end = 0
            with pq.ParquetWriter(path, WINDOWS_SCHEMA) as writer:
                for start, source in sources:
                    table = (source if isinstance(source, pa.Table) else pq.read_table(source)).cast(WINDOWS_SCHEMA)
                    require(start == end, f"the windows of {str(self.path)!r} have a gap or overlap at window {min(start, end)}",
                            "start the run again with --overwrite")
                    writer.write_table(table)
                    end = start + table.num_rows

        atomic_write(self.path / WINDOWS, write)

    def commit(self, meta: dict, ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame,
               parts: list[pa.Table]) -> dict:
        """Write the results, then ``run.json`` listing them with checksums and ``complete: true``
        (the moment the run becomes finished), then drop the checkpoint. Returns the final meta."""
        write_dataset(self.path / STATS_NC, ds, schema.encoding(ds))
        write_table(self.path / HEADS, heads)
        write_table(self.path / LAYERS, layers)
        self._write_windows(parts)
        meta = self.write_meta({**meta, "run_id": self.run_id, "complete": True,
                                "files": {name: file_record(self.path / name) for name in RESULT_FILES}})
        if self.checkpoint.is_dir() and not foreign(self.checkpoint, CHECKPOINT_OWN):
            shutil.rmtree(self.checkpoint, ignore_errors=True)
        return meta

    # -- reading ------------------------------------------------------------------------------

    def check_finished(self) -> dict:
        """``run.json`` of a finished run of this layout, every file it lists verified; one-line
        errors otherwise, the same for every reader."""
        p, shown = self.path, str(self.path)
        require(p.is_dir(), f"run directory {shown!r} does not exist", "pass a directory written by headsim analyze")
        require((p / RUN_JSON).is_file(), f"{shown!r} is not a headsim run (no {RUN_JSON})",
                f"pass a directory written by headsim analyze (headsim analyze --out {p} …)")
        meta = read_json(p / RUN_JSON)
        self.check_layout(meta)
        require(meta.get("complete") is True, f"run {shown!r} is not finished",
                f"finish it with headsim analyze --out {p} --resume")
        fix = f"the run is damaged: run it again (headsim analyze --out {p} --overwrite …) or restore its files"
        files = meta.get("files")
        malformed = f"{str(p / RUN_JSON)!r} has a malformed file list"
        require(isinstance(files, dict) and set(RESULT_FILES) <= set(files), malformed, fix)
        for name, record in files.items():
            require(isinstance(record, dict) and "/" not in name, malformed, fix)
            check_file(p / name, record, "run file", fix)
        return meta

    def load(self) -> Run:
        """Read a finished run (:meth:`check_finished` first): the meta and tables now, the rest on use."""
        meta = self.check_finished()
        return Run(self.path, meta, read_table(self.path / HEADS), read_table(self.path / LAYERS))


def load_run(path: str | os.PathLike) -> Run:
    """Read a finished run directory, with a clear error when it is not one."""
    return RunDir(path).load()


@contextmanager
def staged(out: str | os.PathLike, *, overwrite: bool) -> Iterator[RunDir]:
    """A new run built in a temporary directory beside ``out`` and renamed onto it when the block
    ends without error (``out``, if it is a run, is replaced only then; on error it stays as it was)."""
    target = RunDir(out)
    target.check_target(resume=False, overwrite=overwrite)
    parent = target.path.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.tmp-", dir=parent))
    except OSError as exc:
        raise write_failed(target.path, exc) from exc
    stage = RunDir(tmp)
    held = target.path.is_dir()
    try:
        if held:
            target.lock.acquire()
            target.check_target(resume=False, overwrite=overwrite)
        stage._write_marker()
        yield stage
        if held and target.entries():
            old = Path(tempfile.mkdtemp(prefix=f".{target.path.name}.old-", dir=parent))
            os.replace(target.path, old / "run")
            os.replace(tmp, target.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if held:
                target.lock.release()
                target.path.rmdir()
            os.replace(tmp, target.path)
    except OSError as exc:
        raise write_failed(target.path, exc) from exc
    finally:
        target.lock.release()  # a no-op when its file went away with the old directory
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
