"""`headsim reproduce`: analysis + report of every paper figure and claim, in one call.

The run lives in ``OUT/run`` and is reused (or resumed) when it is already there with the same
settings; the report (figures, claims, index.html) is written into ``OUT``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from . import rundir
from .analysis import analyze
from .corpus import Corpus, load_corpus
from .errors import require
from .inspection import Inspection, inspect_text
from .models import as_loaded
from .runspec import RunSpec

#: windows analysed by default: a few minutes on 2 CPU cores with the embedded model (the paper: 20,000)
DEFAULT_WINDOWS = 4000


def example_inspection(corpus: Corpus, model, *, seq_len: int, threshold: float) -> Inspection:
    """Per-text views (Figs 4, 5, 9, 12) of a fixed example: the first window of the corpus's first document."""
    return inspect_text(corpus.documents[0].text, model, seq_len=seq_len, threshold=threshold, window=0)


def reproduce(
    model=None,
    corpus: Corpus | str = "default",
    *,
    windows: int | None = DEFAULT_WINDOWS,
    out: str | os.PathLike = "reproduce-out",
    seq_len: int = 128,
    threshold: float = 0.3,
    device: str | None = None,
    dtype: str | None = None,
    batch_size: int | None = None,
    progress: bool = True,
) -> Path:
    """Analyse (or reuse) a run and write the full report into ``out``; returns the index.html path."""
    from .report.build import build_report

    out_path = Path(out)
    require(not out_path.exists() or out_path.is_dir(), f"--out {str(out_path)!r} is a file, not a directory",
            "pass a directory for the report (it is created if missing)")
    run_dir = out_path / "run"
    loaded = as_loaded(model, device=device, dtype=dtype)
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    meta = rundir.RunDir(run_dir).stored_meta()
    finished = meta is not None and meta.get("complete") is True
    same = finished and _same_run(meta, loaded.source, corp.sha256, windows, seq_len, threshold, loaded.commit)
    if not same:  # a finished run with other settings is replaced; an unfinished one is resumed
        analyze(loaded, corp, windows=windows, out=run_dir, seq_len=seq_len, threshold=threshold, batch_size=batch_size,
                overwrite=finished, resume=meta is not None and not finished, progress=progress)
    example = example_inspection(corp, loaded, seq_len=seq_len, threshold=threshold)
    return build_report(run_dir, out_path, example)


def _same_run(meta: dict, source: str, corpus_sha256: str, windows: int | None, seq_len: int, threshold: float,
              commit: str | None = None) -> bool:
    """The stored run was made with these settings (``windows``: as asked, or all the corpus gives;
    ``commit``: a hub model's)."""
    spec = RunSpec.from_meta(meta)
    asked = replace(spec, model_source=source, corpus_sha256=corpus_sha256, seq_len=seq_len, threshold=threshold,
                    model_commit=commit)
    available = meta["corpus"].get("windows_available") or windows
    return not spec.differences(asked) and (windows is None or meta["windows"] == min(windows, available))
