"""`headsim reproduce`: analysis + report of every paper figure and claim, in one call.

The run lives in ``OUT/run`` and is reused (or resumed) when it is already there with the same
settings; the report (figures, claims, index.html) is written into ``OUT``. With
``window_lengths``, runs at the other lengths go into ``OUT/run-<length>`` (reused the same way), over
the same text as the main run, and the report gains its "Window length" section.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .runs.rundir import RunDir
from .runs.analyze import analyze
from .corpus import Corpus, load_corpus
from .errors import require
from .inspection import Inspection, inspect_text
from .model.load import as_loaded
from .runs.spec import RunSpec
from .windows import MIN_SEQ_LEN

#: windows analysed by default: a few minutes on 2 CPU cores with the embedded model (the paper: 20,000)
DEFAULT_WINDOWS = 4000


def example_inspection(corpus: Corpus, model, *, seq_len: int, threshold: float, progress=None) -> Inspection:
    """Per-text views (Figs 4, 5, 9, 12) of a fixed example: the first window of the corpus's first document
    (``progress`` as :func:`~headsim.inspection.inspect_text`'s)."""
    return inspect_text(corpus.documents[0].text, model, seq_len=seq_len, threshold=threshold, window=0, progress=progress)


def parse_lengths(text: str) -> list[int]:
    """``"128,256,512"`` → ``[128, 256, 512]`` (ascending, each once); a one-line error otherwise."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    require(bool(parts) and all(p.isdigit() for p in parts), f"--window-lengths {text!r} is not a list of window lengths",
            "pass whole numbers of tokens separated by commas, e.g. --window-lengths 128,256,512")
    lengths = sorted({int(p) for p in parts})
    require(lengths[0] >= MIN_SEQ_LEN, f"--window-lengths {text!r} holds {lengths[0]}, shorter than the shortest window",
            f"pass lengths of at least {MIN_SEQ_LEN} tokens")
    return lengths


def matched_windows(windows: int | None, seq_len: int, length: int, framing) -> int | None:
    """Windows of ``length`` tokens that cover the text of ``windows`` windows of ``seq_len`` (packed
    windows hold ``framing.content(T)`` text tokens each); ``None`` (the whole corpus) stays ``None``."""
    if windows is None:
        return None
    return max(1, math.ceil(windows * framing.content(seq_len) / framing.content(length)))


def _ensure_run(loaded, corp: Corpus, run_dir: Path, *, windows: int | None, seq_len: int, threshold: float,
                batch_size: int | None, progress: bool) -> None:
    """Analyse into ``run_dir`` unless a finished run with these settings is there (an unfinished one is resumed)."""
    meta = RunDir(run_dir).stored_meta()
    finished = meta is not None and meta.get("complete") is True
    if finished and _same_run(meta, loaded.source, corp.sha256, windows, seq_len, threshold, loaded.commit):
        return
    analyze(loaded, corp, windows=windows, out=run_dir, seq_len=seq_len, threshold=threshold, batch_size=batch_size,
            overwrite=finished, resume=meta is not None and not finished, progress=progress)


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
    window_lengths: Sequence[int] | None = None,
    progress: bool = True,
) -> Path:
    """Analyse (or reuse) a run and write the full report into ``out``; returns the index.html path.

    ``window_lengths``: also analyse the corpus at these window lengths (``seq_len`` itself is the main
    run), each over the same text as the main run (:func:`matched_windows`), into ``out/run-<length>``,
    and compare them in the report (:mod:`headsim.report.window_lengths`).
    """
    from .report.build import build_report

    out_path = Path(out)
    require(not out_path.exists() or out_path.is_dir(), f"--out {str(out_path)!r} is a file, not a directory",
            "pass a directory for the report (it is created if missing)")
    run_dir = out_path / "run"
    loaded = as_loaded(model, device=device, dtype=dtype)
    corp = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    others = [t for t in sorted(set(window_lengths or ())) if t != seq_len]
    settings = dict(threshold=threshold, batch_size=batch_size, progress=progress)
    _ensure_run(loaded, corp, run_dir, windows=windows, seq_len=seq_len, **settings)
    for length in others:
        _ensure_run(loaded, corp, out_path / f"run-{length}", seq_len=length,
                    windows=matched_windows(windows, seq_len, length, loaded.framing), **settings)
    example = example_inspection(corp, loaded, seq_len=seq_len, threshold=threshold)
    return build_report(run_dir, out_path, example, window_runs=[out_path / f"run-{t}" for t in others])


def _same_run(meta: dict, source: str, corpus_sha256: str, windows: int | None, seq_len: int, threshold: float,
              commit: str | None = None) -> bool:
    """The stored run was made with these settings (``windows``: as asked, or all the corpus gives;
    ``commit``: a hub model's)."""
    spec = RunSpec.from_meta(meta)
    asked = replace(spec, model_source=source, corpus_sha256=corpus_sha256, seq_len=seq_len, threshold=threshold,
                    model_commit=commit)
    available = meta["corpus"].get("windows_available") or windows
    return not spec.differences(asked) and (windows is None or meta["windows"] == min(windows, available))
