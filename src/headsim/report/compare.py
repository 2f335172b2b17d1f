"""`headsim compare`: several finished runs side by side, in one ``index.html``.

:func:`compare_runs` reads each run, draws the per-layer curves of all runs on shared axes (mean
distance, same sentence against chance, spread of the repetition probability over heads, distinct
anchors, where attention goes) and puts the claims of every run into one table.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..display import HtmlDisplay
from ..errors import require
from .. import __version__
from ..plots.comparison import layer_comparison
from ..plots.style import save_once
from ..runs.run import Run
from ..stats.tables import random_pair_distance
from .reading import ReportRun, load_report_run
from .claims import compute_claims, jsonable
from .html import PAPER_MODEL, is_default_model, minilm_note, model_description, render

STEM = "compare_layers"


def _labels(runs: list[ReportRun]) -> list[str]:
    """Unique short labels: the directory name, with its parent where names repeat (a run in memory: its
    model's label)."""
    names = [r.label if r.path is None else r.path.resolve().name or str(r.path) for r in runs]
    out = []
    for i, (r, name) in enumerate(zip(runs, names)):
        if names.count(name) > 1 and r.path is not None:
            parent = r.path.resolve().parent.name
            name = f"{parent}/{name}" if parent else f"{name} ({i + 1})"
        out.append(name)
    seen: dict[str, int] = {}
    for i, name in enumerate(out):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            out[i] = f"{name} ({seen[name]})"
    return out


@dataclass
class Comparison(HtmlDisplay):
    """Finished runs read for comparison (:func:`compare`), each with its unique short label; in a
    notebook it displays the runs and their per-layer figure, :meth:`to_html` writes it as one page."""

    runs: list[ReportRun]
    labels: list[str]

    def figure(self):
        """The per-layer statistics of every run on shared axes (:func:`headsim.plots.comparison.layer_comparison`)."""
        return layer_comparison([{"label": label, "legend": f"{label}: {r.label}", "heads": r.heads, "layers": r.layers,
                                     "n_heads": int(r.dataset.sizes["head"]), "shares": r.shares,
                                     "random_distance": random_pair_distance(r.dataset)} for label, r in zip(self.labels, self.runs)])

    def warnings(self) -> list[str]:
        """What makes the runs' numbers not directly comparable (depths, thresholds, window lengths)."""
        runs = self.runs
        depths = {int(r.dataset.sizes["layer"]) for r in runs}
        warnings = []
        if len(depths) > 1:
            warnings.append(f"The runs have different depths ({', '.join(str(d) for d in sorted(depths))} layers): the "
                            "curves are drawn against the layer number, so the same layer number is not the same relative depth.")
        for key, what in (("threshold", "thresholds"), ("seq_len", "window lengths")):
            values = {str(r.meta.get(key, r.dataset.attrs.get(key))) for r in runs}
            if len(values) > 1:
                warnings.append(f"The runs use different {what} ({', '.join(sorted(values))}); their statistics are not "
                                "directly comparable.")
        weights: dict[str, list[str]] = {}
        for label, r in zip(self.labels, runs):
            if r.spec.model_fingerprint:
                weights.setdefault(r.spec.model_fingerprint, []).append(label)
        warnings += [f"Runs {', '.join(same)} were made with the same weights (fingerprint {fp[:12]})."
                     for fp, same in weights.items() if len(same) > 1]
        return warnings

    def run_rows(self) -> list[dict]:
        """One row per run: label, path, model, shape, corpus, windows, window length, threshold, created."""
        rows = []
        for label, r in zip(self.labels, self.runs):
            m = r.model
            rows.append({
                "label": label, "path": str(r.path), "model": r.label, "note": model_description(m),
                "shape": f"{r.dataset.sizes['layer']} × {r.dataset.sizes['head']}", "corpus": r.meta.get("corpus", {}).get("name", "?"),
                "windows": f"{r.n_windows:,}", "seq_len": r.dataset.attrs.get("seq_len", r.meta.get("seq_len", "?")),
                "threshold": f"{r.threshold:g}", "created": r.meta.get("created", "?"),
            })
        return rows

    def _html_body(self) -> tuple[str, str]:
        from ..views.html.summaries import comparison_html

        return comparison_html(self)


def compare(run_dirs: list[str | os.PathLike | Run]) -> Comparison:
    """Read two or more finished runs for comparison (directories, or :class:`~headsim.runs.run.Run` s as
    :func:`headsim.analyze` returns them, in memory too; a one-line error names a run that cannot be read)."""
    run_dirs = list(run_dirs)
    require(len(run_dirs) >= 2, f"compare needs at least two run directories, got {len(run_dirs)}", "pass RUN_A RUN_B …")
    runs = [load_report_run(d) for d in run_dirs]
    return Comparison(runs, _labels(runs))


def compare_runs(run_dirs: list[str | os.PathLike | Run], out_dir: str | os.PathLike, *, dpi: int = 200) -> Path:
    """Compare finished runs; writes ``compare_layers.png/.svg``, ``claims_compare.csv/.json`` and
    ``index.html`` into ``out_dir`` and returns the path of ``index.html``."""
    comparison = compare(run_dirs)
    runs, labels = comparison.runs, comparison.labels
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    claims = {label: compute_claims(r.dataset, r.heads, r.layers, r.meta, shares=r.shares) for label, r in zip(labels, runs)}
    tmp = Path(tempfile.mkdtemp(prefix=".compare-", dir=out))
    try:
        save_once(comparison.figure(), tmp, STEM, dpi=dpi)
        warnings = comparison.warnings()
        figures = [{"stem": STEM, "title": "per-layer statistics of every run", "png": f"{STEM}.png", "svg": f"{STEM}.svg",
                    "caption": ("Per layer (numbered from 1), one colour per run: (a) mean distance |i − j| of "
                                "high-similarity pairs, dotted the mean of random valid pairs; (b) probability that a "
                                "high-similarity pair lies inside one sentence, dashed the chance level; (c) probability "
                                "that a pair is two equal tokens, the median head (line) and the range over heads (band); "
                                "(d) number of distinct anchor tokens across a layer's heads, dashed the number of heads; "
                                "(e–g) mean attention per query on [SEP] + punctuation, on [CLS], and on the previous + "
                                "next token, dotted each kind's share of the tokens (uniform attention).")}]
        rows, csv_rows = [], []
        ids = [c.id for c in next(iter(claims.values()))]
        for k, cid in enumerate(ids):
            first = next(iter(claims.values()))[k]
            cells = [{"verdict": claims[label][k].verdict, "value": claims[label][k].value} for label in labels]
            rows.append({"claim": first.claim, "criterion": first.criterion, "cells": cells})
            row = {"id": cid, "claim": first.claim, "criterion": first.criterion}
            for label, cell in zip(labels, cells):
                row[f"{label}: verdict"] = cell["verdict"]
                row[f"{label}: value"] = cell["value"]
            csv_rows.append(row)
        pd.DataFrame(csv_rows).to_csv(tmp / "claims_compare.csv", index=False)
        payload = {"runs": [{"label": label, "path": str(r.path), "model": r.model, "windows": r.n_windows,
                             "threshold": r.threshold, "token_shares": r.shares} for label, r in zip(labels, runs)],
                   "claims": {label: [c.to_dict() for c in cs] for label, cs in claims.items()}}
        (tmp / "claims_compare.json").write_text(json.dumps(jsonable(payload), indent=2, ensure_ascii=False))
        run_rows = comparison.run_rows()
        default_run = next((r.model for r in runs if is_default_model(r.model)), None)
        note = f"The paper analysed {PAPER_MODEL}. " + minilm_note(None)
        if default_run is not None:
            note += " Runs of the embedded model show whether the paper's qualitative pattern appears in it."
        html = render("compare.html.j2", runs=run_rows, figures=figures, claim_rows=rows, warnings=warnings, note=note,
                      headsim_version=__version__, generated=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        (tmp / "index.html").write_text(html, encoding="utf-8")
        for item in sorted(tmp.iterdir(), key=lambda f: (f.name == "index.html", f.name)):
            os.replace(item, out / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "index.html"
