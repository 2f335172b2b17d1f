"""The start and the end of a run, the same on every engine: ``run.json`` written (or a resumed run
checked against it: :func:`start_run`), the results committed (:func:`finish_run`), the line for a run
stopped by a signal (:func:`stopped`); :func:`headsim.analyze` returns the run as a
:class:`~headsim.runs.run.Run`, on disk or in memory, the class :func:`headsim.load_run` returns."""

from __future__ import annotations

import signal
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from ..errors import HeadsimError, require
from ..interrupts import Interrupted
from ..stats import CorpusStats, heads_table, layers_table
from .rundir import RunDir, load_run
from .run import Run
from .spec import RunSpec, describe_changes, resume_flags

CHECKPOINT_SECONDS = 30.0  # default checkpoint interval of analyze


def check_engine(old: dict | None, engine: str, out_path: Path) -> None:
    """Refuse to resume an unfinished run on another engine than it was started on (its checkpoint
    is that engine's); a finished run is only read back."""
    was = (old or {}).get("engine", "local")
    if (old or {}).get("complete") or was == engine:
        return
    flag = "" if was == "local" else f" --engine {was}"
    raise HeadsimError(f"--resume refused: {str(out_path)!r} was started with --engine {was}, not --engine {engine}",
                       f"resume it on its own engine: headsim analyze --out {out_path} --resume{flag}")


def start_run(run_dir: RunDir, meta: dict, *, resume: bool) -> dict | Run:
    """Inside :meth:`RunDir.writer`: check a run to resume against ``meta`` and write ``run.json``;
    the meta to run with (a resumed run keeps its own), or, when the run is finished already, its
    :class:`~headsim.runs.run.Run` (read, and so verified, once)."""
    if resume:
        old = run_dir.resume_meta()
        changed = RunSpec.from_meta(old).differences(RunSpec.from_meta(meta))
        if old.get("complete"):
            require(not changed, f"--resume: {str(run_dir.path)!r} already holds a finished run made with other settings "
                    f"({describe_changes(changed)})", "pass --overwrite to replace it, or another --out")
            finished = load_run(run_dir.path)  # a damaged run is refused here, as by every reader
            warnings.warn(f"{str(run_dir.path)!r} already holds this run, finished: nothing to do", stacklevel=3)
            return finished
        check_engine(old, meta.get("engine", "local"), run_dir.path)
        require(not changed, f"--resume refused: {str(run_dir.path)!r} was started with other settings "
                f"({describe_changes(changed)})",
                f"pass the run's own settings ({resume_flags(changed, old)}), or --overwrite to start again")
        meta = old
    return run_dir.write_meta({**meta, "run_id": run_dir.run_id})


def finish_run(meta: dict, stats: CorpusStats, names: tuple[str, str], elapsed: float, processed: int,
               run_dir: RunDir | None, parts: list) -> Run:
    """The statistics' dataset and tables, ``meta`` completed (``processed``: windows analysed in
    ``elapsed`` seconds by this call), committed into ``run_dir`` with the window ``parts`` not yet
    checkpointed (or kept in memory without one, with the windows). ``names``: the model's and the corpus's."""
    ds = stats.to_dataset()
    ds.attrs.update({"model": names[0], "corpus": names[1]})
    stacks = meta.get("model", {}).get("stacks") or []
    if set(stacks) - {"self"} and len(stacks) == ds.sizes["layer"]:  # an encoder-decoder's three stacks
        ds = ds.assign_coords(stack=("layer", list(stacks)))
    own = meta.get("model", {}).get("model_layers") or []
    if own and len(own) == ds.sizes["layer"]:  # a hybrid stack: each analysed layer's own number in the model
        ds = ds.assign_coords(model_layer=("layer", [int(x) for x in own]))
    heads, layers = heads_table(ds), layers_table(ds)
    meta.update({"complete": True, "seconds": round(elapsed, 3), "windows_per_second": round(processed / max(elapsed, 1e-9), 3),
                 "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    first = RunSpec.from_meta(meta).first_window
    meta["holds"] = [holding(meta["corpus"], first, first + int(meta["windows"]))]
    if run_dir is None:
        windows = pa.concat_tables(parts).sort_by("window") if parts else None  # shares finish in any order
        return Run.in_memory(meta, ds, heads, layers, windows)
    meta = run_dir.commit(meta, ds, heads, layers, parts)
    return Run.in_memory(meta, ds, heads, layers, path=run_dir.path)


def holding(corpus: dict, first: int, stop: int) -> dict:
    """``run.json``'s record of windows ``[first, stop)`` of ``corpus`` (its run.json entry) held by a
    run: what :func:`headsim.runs.merge.check_mergeable` compares so that no window is counted twice."""
    return {"corpus_sha256": corpus["sha256"], "corpus": corpus["name"], "windows": [[int(first), int(stop)]]}


def stopped(signum: int, position: int, target: int, run_dir: RunDir | None, engine: str = "local") -> Interrupted:
    """The line for a run stopped by a signal at a batch boundary (its checkpoint just saved)."""
    name = signal.Signals(signum).name
    if run_dir is None:
        return Interrupted(signum, f"stopped by {name} after {position} of {target} windows (nothing saved: no --out)",
                           "run it again, with --out DIR to make it resumable")
    return Interrupted(signum, f"stopped by {name} after {position} of {target} windows; checkpoint saved in {str(run_dir.path)!r}",
                       f"continue with headsim analyze --out {run_dir.path} --resume" + ("" if engine == "local" else f" --engine {engine}"))
