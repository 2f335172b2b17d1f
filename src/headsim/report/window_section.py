"""The report's "Window length" section: a :class:`~headsim.report.window_lengths.WindowLengths`
drawn (``window_lengths.png/.svg``), written (``window_lengths.csv``, ``window_lengths_claims.csv``)
and described for ``index.html``."""

from __future__ import annotations

import math
from pathlib import Path

from ..plots.window_lengths import window_length_figure
from .window_lengths import STATISTICS, WindowLengths

STEM = "window_lengths"
STATISTICS_CSV = "window_lengths.csv"
CLAIMS_CSV = "window_lengths_claims.csv"
#: statistics that are shares or probabilities (shown with three decimals), the rest with two
_PLAIN = {"mean_distance", "random_pair_distance", "mean_distinct_anchors"}


def _cell(name: str, value: float) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    if name == "distance_change_from_layer_1":
        return f"{value:+.1%}".replace("-", "\u2212")
    return f"{value:.2f}" if name in _PLAIN else f"{value:.3f}"


def _rows(cmp: WindowLengths, layer: int | None) -> list[list[str]]:
    wide = cmp.table(layer)
    return [[name, STATISTICS[name]] + [_cell(name, wide.loc[name, t]) for t in cmp.lengths] for name in wide.index]


def summary(cmp: WindowLengths) -> str:
    """One sentence: which claims change their verdict with the window length."""
    verdicts = cmp.verdicts()
    if not cmp.changed:
        return (f"No claim changes its verdict between {' and '.join(str(t) for t in cmp.lengths)} tokens "
                f"({cmp.model}).")
    parts = [f"{cid} ({', '.join(f'{t}: {verdicts.loc[cid, t]}' for t in cmp.lengths)})" for cid in cmp.changed]
    return f"On {cmp.model}, {len(cmp.changed)} of {len(verdicts)} claims change their verdict with the window length: " + "; ".join(parts) + "."


def write_section(cmp: WindowLengths, out: Path, *, dpi: int = 200) -> dict:
    """Draw and write the comparison into ``out``; returns the template's ``window`` context."""
    from ..plots.style import save_once

    fig = window_length_figure(cmp.statistics, model=cmp.model, windows=cmp.windows, corpus=cmp.corpus)
    save_once(fig, out, STEM, dpi=dpi)
    cmp.statistics.to_csv(out / STATISTICS_CSV, index=False)
    verdicts = cmp.verdicts()
    claims = cmp.claims.merge(verdicts["changes"].rename("verdict_changes_with_length"), left_on="id", right_index=True)
    claims.insert(0, "model", cmp.model)
    claims.to_csv(out / CLAIMS_CSV, index=False)
    counts = ", ".join(f"{cmp.windows[t]:,} windows of {t} tokens" for t in cmp.lengths)
    values = cmp.claims.set_index(["id", "seq_len"])["value"]
    return {
        "model": cmp.model,
        "lengths": cmp.lengths,
        "intro": (f"The paper fixes windows of 128 tokens. Here the same model, {cmp.model}, and corpus ({cmp.corpus}) "
                  f"with every other setting equal, at {len(cmp.lengths)} window lengths: {counts}. Statistics from "
                  f"{STATISTICS_CSV} (tidy: statistic, layer, window length, value; an empty layer pools all layers), "
                  f"verdicts from {CLAIMS_CSV}."),
        "summary": summary(cmp),
        "rows": _rows(cmp, None),
        "layers": [{"layer": layer, "rows": _rows(cmp, layer)}
                   for layer in sorted(int(x) for x in cmp.statistics["layer"].dropna().unique())],
        "claims": [{"id": cid, "claim": cmp.claim_text[cid], "changes": bool(verdicts.loc[cid, "changes"]),
                    "cells": [{"verdict": verdicts.loc[cid, t], "value": values.get((cid, t), "")} for t in cmp.lengths]}
                   for cid in verdicts.index],
        "figure": {"png": f"{STEM}.png", "svg": f"{STEM}.svg",
                   "caption": (f"{cmp.model}, {counts} of the corpus {cmp.corpus}: each statistic against the window "
                               "length (log₂ axis), one line per layer (numbered from 1) and, black, all layers pooled. "
                               "Distances are divided by the mean distance of random valid pairs, which grows with the "
                               "window; dotted lines are the chance of a pair inside one sentence and the share of "
                               "framing tokens among the tokens (what uniform attention would give).")},
        "files": [(STATISTICS_CSV, f"key statistics of {cmp.model} at each window length (tidy)"),
                  (CLAIMS_CSV, f"each claim's verdict and value at each window length ({cmp.model})"),
                  (f"{STEM}.png", "the window-length figure"), (f"{STEM}.svg", "the window-length figure (SVG)")],
    }
