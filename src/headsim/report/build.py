"""`headsim report`: a finished run → figures (PNG + SVG), ``claims.json`` / ``claims.csv`` and ``index.html``.

:func:`build_report` reads a finished run (:meth:`headsim.runs.rundir.RunDir.load`: statistics, tables,
run.json and windows), draws every corpus figure of the paper (Figs 2, 3, 6, 7, 8, 10,
11, 12, 13, plus the similarity-value histogram and the attention focus), checks every claim
(:mod:`headsim.report.claims`) and writes a self-contained ``index.html``. The per-text figures
(Figs 4, 5, 9 and Fig 12 of one input) come from an :class:`~headsim.inspection.Inspection` that
the caller passes; without one the page says how to get them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..errors import require
from ..figures.claim import jsonable
from ..runs.layout import HEADS, LAYERS, RUN_JSON, STATS_NC, WINDOWS
from ..runs.run import Run
from .claims import Claim, claims_frame, compute_claims
from .contents import EXAMPLE_FIGURES, FIGURES
from .html import model_note, render, run_rows
from .reading import ReportRun, load_report_run

EXAMPLE_DIR = "example"
PAIR_ROWS = 40
CSS_PX = 96  # CSS pixels an inch: a figure's SVG is shown at its natural size where the page is wide enough


# ---------------------------------------------------------------------------------------------
# The per-text example
# ---------------------------------------------------------------------------------------------


def _example_section(example, out: Path) -> dict:
    """Write the inspection into ``out/example`` and describe it for the page."""
    written = example.write(out / EXAMPLE_DIR)
    names = {p.name for p in written}
    meta = example.meta
    layer, head, thr = meta.get("layer"), meta.get("head"), meta.get("threshold")
    model = example.model.name if hasattr(example, "model") else "model"
    figures = [{"stem": f.stem, "label": f.label, "title": f.title, "caption": f.caption(meta),
                "png": f"{EXAMPLE_DIR}/{f.stem}.png", "svg": f"{EXAMPLE_DIR}/{f.stem}.svg"}
               for f in EXAMPLE_FIGURES if f"{f.stem}.png" in names]
    pairs = example.head_pairs()
    total = int(meta.get("head_pairs_total", len(pairs)))  # the head's table keeps its most similar pairs
    show = pairs.sort_values("similarity", ascending=False, kind="stable").head(PAIR_ROWS)
    rows = [[r.token_i, r.token_j, int(r.index_i), int(r.index_j), f"{r.similarity:.3f}"] for r in show.itertuples()]
    return {
        "intro": (f"Figures of one input, from headsim inspect with {model}: window {meta.get('window', 0)} of "
                  f"{meta.get('windows', 1)} of the example text, {meta.get('valid_tokens', '?')} tokens, threshold {thr}. "
                  "Files in the example/ folder."),
        "figures": figures,
        "head_label": f"layer {layer}, head {head}",
        "pairs_caption": (f"The token pairs (Token_i, Token_j, Index_i, Index_j) whose normalised similarity in layer "
                          f"{layer}, head {head} exceeds {thr}, as in the paper's Fig 9; positions from 0 ({meta.get('position_0', '[CLS] = 0')}). "
                          + (f"Shown: the {len(show)} of its {total} pairs with the highest similarity."
                             if total > len(show) else f"All {total} pairs, highest similarity first.")),
        "pair_columns": ["Token_i", "Token_j", "Index_i", "Index_j", "S / max S"],
        "pair_rows": rows,
        "pairs_more": (f"{len(pairs) - len(show)} more pairs of this head in the CSV"
                       + (f" (its {len(pairs)} most similar of {total})." if total > len(pairs) else ".")
                       if len(pairs) > len(show) else ("This head has no high-similarity pair in this input." if not total else "")),
        "pairs_csv": f"{EXAMPLE_DIR}/fig09_pairs.csv",
    }


NO_EXAMPLE = ("The per-text figures (Fig 4 attention maps, Fig 5 separator blocks, Fig 9 pair tables, Fig 12 of one "
              "input) need the model to run on one input; this report was built without one. Run "
              "`headsim report RUN_DIR --example` or `headsim inspect TEXT --out DIR` to draw them.")


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


def _rel(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def write_claims(claims: list[Claim], out: Path, run: ReportRun) -> list[Path]:
    """``claims.json`` (with provenance) and ``claims.csv`` into ``out``."""
    payload = {"model": run.model, "model_label": run.label, "run_dir": str(run.path), "windows": run.n_windows,
               "threshold": run.threshold, "token_shares": run.shares, "claims": [c.to_dict() for c in claims]}
    (out / "claims.json").write_text(json.dumps(jsonable(payload), indent=2, ensure_ascii=False))
    claims_frame(claims).to_csv(out / "claims.csv", index=False)
    return [out / "claims.json", out / "claims.csv"]


def build_report(run_dir: str | os.PathLike | Run, out_dir: str | os.PathLike | None = None, example=None, *,
                 tokenizer=None, window_runs: Sequence[str | os.PathLike] = (), dpi: int = 200, progress=None) -> Path:
    """Write the report of a finished run; returns the path of ``index.html``.

    Args:
        run_dir: a directory written by ``headsim analyze`` (or ``reproduce``), or a
            :class:`~headsim.runs.run.Run` (:func:`headsim.analyze`'s result, one kept in memory included).
        out_dir: where to write (default: the run's directory; required for a run in memory); figures, claims and ``index.html`` go there,
            the per-text example into ``out_dir/example``.
        example: an :class:`~headsim.inspection.Inspection` for Figs 4, 5, 9 (``None``: skipped,
            with a note on the page).
        tokenizer: the run model's tokenizer for the token shares of claim 1 (default: loaded
            offline from the run's model source; without it punctuation is not counted).
        window_runs: finished runs of the same model, corpus and settings at other window lengths
            (``--seq-len``): a "Window length" section compares them with this run
            (:mod:`headsim.report.window_lengths`; runs that differ in anything else are refused
            before anything is written).
        dpi: PNG resolution.
        progress: ``progress(done, total)`` as each figure (then the claims, the example, the page) is done.
    """
    run = load_report_run(run_dir, tokenizer=tokenizer)
    lengths = None
    if window_runs:
        from .window_lengths import compare_window_lengths

        lengths = compare_window_lengths([run] + [load_report_run(d, tokenizer=tokenizer) for d in window_runs])
    require(out_dir is not None or run.path is not None, "the run is kept in memory: the report needs out_dir",
            "pass out_dir (a directory for index.html and its figures)")
    out = Path(out_dir) if out_dir is not None else run.path
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        figures, steps = [], len(FIGURES) + 2

        def done(k: int) -> None:
            if progress is not None:
                progress(k, steps)

        for k, fig in enumerate(FIGURES, start=1):
            drawn = fig.draw(run, tmp, dpi=dpi)
            figures.append({"stem": fig.stem, "label": fig.label, "title": fig.title, "caption": fig.caption(run),
                            "png": f"{fig.stem}.png", "svg": f"{fig.stem}.svg", "width": round(drawn.width_in * CSS_PX),
                            "cell": "" if drawn.cell_in is None else f"{drawn.cell_in * CSS_PX:.1f}"})
            done(k)
        claims = compute_claims(run.dataset, run.heads, run.layers, run.meta, shares=run.shares)
        write_claims(claims, tmp, run)
        example_ctx = _example_section(example, tmp) if example is not None else None
        done(len(FIGURES) + 1)
        from ..ablation.report import report_section

        ablation_ctx = report_section(run.path, tmp) if run.path is not None else None
        window_ctx = None
        if lengths is not None:
            from .window_section import write_section

            window_ctx = write_section(lengths, tmp, dpi=dpi)
        files = [("claims.json", "the claims with their numbers, as JSON"), ("claims.csv", "the claims table")]
        for name, what in ((RUN_JSON, "run metadata"), (STATS_NC, "all statistics (xarray Dataset, netCDF)"),
                           (HEADS, "per-head summary table"), (LAYERS, "per-layer summary table"),
                           (WINDOWS, "the analysed windows (token ids, sentence ids)")):
            if run.path is not None and (run.path / name).is_file():
                files.append((_rel(run.path / name, out), what))
        if window_ctx is not None:
            files += window_ctx["files"]
        if example_ctx is not None:
            for name, what in (("fig09_pairs.csv", "high-similarity pairs of every head for the example input"),
                               ("tokens.csv", "tokens of the example input"), ("inspect.json", "settings of the example")):
                if (tmp / EXAMPLE_DIR / name).is_file():
                    files.append((f"{EXAMPLE_DIR}/{name}", what))
        html = render("report.html.j2", model_name=run.label, model_note=model_note(run.model), run_rows=run_rows(run),
                      claims=[c.to_dict() for c in claims], figures=figures, windows=f"{run.n_windows:,}",
                      example=example_ctx, no_example=NO_EXAMPLE, position_zero=run.position_zero, ablation=ablation_ctx, window=window_ctx, files=files, headsim_version=__version__,
                      generated=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        (tmp / "index.html").write_text(html, encoding="utf-8")
        done(steps)
        for item in sorted(tmp.iterdir(), key=lambda f: (f.name == "index.html", f.name)):  # the page last
            target = out / item.name
            if item.is_dir():
                if target.exists():
                    shutil.rmtree(target)
                os.replace(item, target)
            else:
                os.replace(item, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "index.html"
