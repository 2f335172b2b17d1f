"""``headsim export``: one standalone file of a run, an ablation study or a text, as HTML (the same
view as the notebook display, opens offline) or as its key figure in SVG or PNG."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import require

FORMATS = ("html", "svg", "png")


def load_source(source: str, *, model=None, seq_len: int = 128, window: int = 0, layer: int | None = None, head: int = 1,
                threshold: float = 0.3, device: str | None = None, resolution: int | None = None, progress=None):
    """What ``source`` names: a run directory (``run.json``) → :class:`~headsim.runs.run.Run`; an
    ablation folder (``ablation.json``) → :class:`~headsim.ablation.study.AblationResult`; a text
    file or the text itself → :class:`~headsim.inspection.Inspection` of window ``window`` (0-based)
    with head (``layer``, ``head``, 1-based) selected, viewed on ``resolution`` position bins above it
    (default: the view resolution); ``progress(done, total)`` as the model's layers are done."""
    path = Path(source)

    def exists(test) -> bool:
        try:
            return test()
        except OSError:  # a text too long to be a file name
            return False

    if exists(path.is_dir):
        if (path / "ablation.json").is_file():
            from ...ablation.study import load_ablation

            return load_ablation(path)
        from ...runs.rundir import load_run

        return load_run(path)
    from ...corpus import read_text_file
    from ...inspection import inspect_text

    text = read_text_file(path) if exists(path.is_file) else source
    return inspect_text(text, model, layer=layer, head=head, threshold=threshold, seq_len=seq_len, window=window,
                        device=device, progress=progress, **({} if resolution is None else {"resolution": resolution}))


def key_figure(obj):
    """The figure that stands for ``obj`` in SVG/PNG: a text's chosen head (S and its mask), a run's
    Fig 8, an ablation study's per-head map."""
    from ...ablation.study import AblationResult
    from ...inspection import Inspection

    if isinstance(obj, Inspection):
        return obj.similarity_figure()
    if isinstance(obj, AblationResult):
        from ...ablation.plots import heads_figure

        return heads_figure(obj.meta, obj.heads)
    from ... import figures as cf
    from ...report.html import model_label

    return cf.fig08_same_sentence(obj.dataset, obj.heads, obj.layers, model=model_label(obj.model))


def export(obj, out: str | os.PathLike, fmt: str = "html") -> Path:
    """Write ``obj`` (anything with ``to_html``; for SVG/PNG a run, ablation study or inspection) to
    ``out`` as one standalone file of format ``fmt``; returns its path."""
    require(fmt in FORMATS, f"unknown format {fmt!r}", f"use one of {', '.join(FORMATS)}")
    out = Path(out)
    require(not out.is_dir(), f"--out {str(out)!r} is a directory", "pass the path of the file to write")
    if fmt == "html":
        return obj.to_html(out)
    import io

    import matplotlib.pyplot as plt

    from ...io import write_bytes

    fig = key_figure(obj)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight")
    finally:
        plt.close(fig)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes(out, buf.getvalue())
