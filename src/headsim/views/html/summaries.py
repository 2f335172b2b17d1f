"""Static displays of a run, a comparison of runs, a segmentation and an ablation study: a summary
table, a small table of numbers and the key figures as inline SVG. No script: nothing can fail to
load, and the same HTML is the notebook display and the body of the exported page."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from .page import figure_svg

HEAD_COLUMNS = ("layer", "head", "n_pairs", "p_repeat", "p_same_sentence", "p_same_sentence_chance", "mean_distance",
                "attn_cls", "attn_sep")


def _e(value) -> str:
    return html.escape(str(value))


def definition_list(rows: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows) + "</dl>"


def table(df: pd.DataFrame, digits: int = 3) -> str:
    """A small DataFrame as an HTML table, numbers right-aligned and rounded."""
    head = "".join(f'<th class="{"num" if pd.api.types.is_numeric_dtype(df[c]) else ""}">{_e(c)}</th>' for c in df.columns)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, (float, np.floating)):
                cells.append(f'<td class="num">{"–" if np.isnan(v) else f"{v:.{digits}g}"}</td>')
            elif isinstance(v, (int, np.integer)):
                cells.append(f'<td class="num">{int(v)}</td>')
            else:
                cells.append(f"<td>{_e(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def figures(*figs) -> str:
    return '<div class="hsv-figs">' + "".join(f'<div class="hsv-fig">{figure_svg(f)}</div>' for f in figs) + "</div>"


def run_html(run) -> tuple[str, str]:
    """Title and body of a finished run (:class:`~headsim.runs.run.Run`): its settings (model with its
    exact revision where ``run.json`` has one), the heads with the most same-sentence pairs, Figs 6 and 8."""
    from ... import figures as cf
    from ...report.html import model_label, run_rows

    label = model_label(run.model)
    heads = run.heads
    cols = [c for c in HEAD_COLUMNS if c in heads]
    top = heads.sort_values("p_same_sentence", ascending=False).head(8)[cols] if "p_same_sentence" in heads else heads[cols].head(8)
    body = (f"<h3>headsim run <span class=\"hsv-muted\">{_e(run.name)}</span></h3>"
            + definition_list(run_rows(run))
            + f"<h4>Heads with the most same-sentence pairs <span class=\"hsv-muted\">(of {len(heads)}; layers and heads from 1;"
            " every head in <code>run.heads</code>)</span></h4>" + table(top)
            + "<h4>Key figures</h4>"
            + figures(cf.fig08_same_sentence(run.dataset, heads, run.layers, model=label),
                      cf.fig06_repeat_probability(heads, model=label)))
    return f"headsim run {run.name}", body


def comparison_html(comparison) -> tuple[str, str]:
    """Title and body of a :class:`~headsim.report.compare.Comparison`: the runs, warnings, the per-layer figure."""
    rows = pd.DataFrame(comparison.run_rows())[["label", "model", "shape", "corpus", "windows", "seq_len", "threshold"]]
    warn = "".join(f'<p class="hsv-error">{_e(w)}</p>' for w in comparison.warnings())
    body = ("<h3>Comparison of " + _e(len(comparison.runs)) + " runs</h3>" + table(rows) + warn
            + figures(comparison.figure()))
    return "headsim comparison: " + " vs ".join(comparison.labels), body


def segmentation_html(seg) -> tuple[str, str]:
    """Title and body of a :class:`~headsim.segmentation.types.Segmentation`: the text with a mark at
    each boundary, and the boundary signal (the score of every gap between units) when there is one."""
    parts = []
    for k, s in enumerate(seg):
        parts.append(f'<span class="hsv-seg-mark" title="segment {k + 1}: characters {s.start}–{s.end}">§{k + 1}</span>'
                     + _e(s.text))
    body = (f"<h3>{len(seg)} segments <span class=\"hsv-muted\">of {len(seg.text):,} characters"
            f"{'' if seg.level is None else f', {seg.level} level'}</span></h3>"
            f'<div class="hsv-seg">{"".join(parts)}</div>')
    if seg.scores is not None and len(seg.scores):
        body += "<h4>Boundary signal</h4>" + figures(signal_figure(seg))
    return f"headsim segmentation: {len(seg)} segments", body


def signal_figure(seg):
    """The gap scores between consecutive units, the gaps that became boundaries marked."""
    from matplotlib.figure import Figure

    scores = np.asarray(seg.scores, dtype=float)
    cuts = {s.start for s in seg[1:]}
    chosen = np.array([seg.unit_spans[g + 1][0] in cuts for g in range(len(scores))])
    fig = Figure(figsize=(min(12, 2 + 0.18 * len(scores)), 2.6), layout="constrained")
    ax = fig.subplots()
    x = np.arange(1, len(scores) + 1)
    ax.bar(x, scores, color=np.where(chosen, "#4f46e5", "#c7d2fe"))
    ax.set_xlabel("gap after sentence unit")
    ax.set_ylabel("boundary score")
    ax.set_title("dark: the gaps cut into segments", fontsize=9)
    return fig


def ablation_html(result) -> tuple[str, str]:
    """Title and body of an :class:`~headsim.ablation.study.AblationResult`: settings, the scores of
    the full model and of random groups, the heads whose removal costs most, its figures."""
    from ...ablation.plots import curves_figure, heads_figure
    from ...report.html import model_label

    meta, summary = result.meta, result.meta["summary"]
    metric = meta["primary_metric"]
    rows = [("model", model_label(meta["model"])), ("tasks", ", ".join(meta["config"]["tasks"])),
            ("mode", meta["config"]["mode"]), ("primary metric", metric),
            ("full model", ", ".join(f"{k} {v:.3f}" for k, v in summary["full"].items())),
            (f"random groups of {summary['group_size']}", f"{metric} mean {summary['random']['mean']:.3f}, 95% "
             f"[{summary['random']['p2.5']:.3f}, {summary['random']['p97.5']:.3f}] over {summary['random']['draws']} draws")]
    worst = result.heads.sort_values(f"delta_{metric}").head(8)
    body = ("<h3>Head ablation study</h3>" + definition_list(rows)
            + "<h4>Heads whose removal alone costs most</h4>" + table(worst)
            + figures(heads_figure(meta, result.heads), curves_figure(meta, result.curves)))
    return "headsim ablation study", body
