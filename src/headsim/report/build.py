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
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from matplotlib.figure import Figure

from .. import __version__
from ..runs.layout import HEADS, LAYERS, RUN_JSON, STATS_NC, WINDOWS
from ..runs.run import Run
from ..runs.rundir import RunDir
from ..plots import corpus as cf
from ..plots.style import save
from .claims import Claim, claims_frame, compute_claims, token_shares
from .html import model_label, model_note, render

EXAMPLE_DIR = "example"
PAIR_ROWS = 40


# ---------------------------------------------------------------------------------------------
# Reading a run
# ---------------------------------------------------------------------------------------------


@dataclass
class RunData(Run):
    """A finished run (:class:`~headsim.runs.run.Run`) with what the report adds: the share of valid
    tokens each kind of token takes (:func:`~headsim.report.claims.token_shares`)."""

    shares: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return model_label(self.model)


def load_tokenizer(meta: dict):
    """The run's tokenizer from its model source (a hub model's at its recorded commit), from disk or
    the local cache only (:func:`headsim.model.load.load_tokenizer`); ``None`` when it is not there."""
    from ..model.load import load_tokenizer as tokenizer_of

    model = meta.get("model", {})
    return tokenizer_of(model["source"], model.get("commit")) if model.get("source") else None


def load_run_data(run_dir: str | os.PathLike, *, tokenizer=None, use_tokenizer: bool = True) -> RunData:
    """Read a finished run (:meth:`RunDir.load`) and its token shares; ``tokenizer`` defaults to the
    run's model tokenizer (loaded offline; without one punctuation is not counted)."""
    run = RunDir(run_dir).load()
    if tokenizer is None and use_tokenizer:
        tokenizer = load_tokenizer(run.meta)
    data = RunData(run.path, run.meta, run.heads, run.layers)
    data.shares = token_shares(data.windows, tokenizer, data.dataset, framing=data.model.get("framing"))
    return data


# ---------------------------------------------------------------------------------------------
# Figures and captions
# ---------------------------------------------------------------------------------------------


@dataclass
class FigureSpec:
    stem: str
    label: str
    title: str
    make: Callable[[RunData], Figure]
    caption: Callable[[RunData], str]


def _layers_text(layers: list[int]) -> str:
    return ", ".join(str(x) for x in layers)


def figure_specs() -> list[FigureSpec]:
    """Every corpus figure of the report, in order, with its caption."""

    def fig02_caption(r: RunData) -> str:
        ls = cf.default_fig02_layers(r.dataset.sizes["layer"])
        return (f"Attention probabilities summed over all {r.n_windows:,} windows for layers {_layers_text(ls)} (rows): "
                f"left head 1 alone, right the sum over the layer's {r.dataset.sizes['head']} heads. Row i is the query "
                "position, column j the key position (0 is [CLS]). A bright main diagonal is attention to the token "
                "itself, a band just below or above it attention to the previous or next token, and bright vertical "
                "lines are positions that many queries attend to ([CLS], [SEP], separators). Colours are clipped at "
                "each panel's 99th percentile so the diagonal stays visible beside those columns (the colour bar shows "
                "the clipped range). The paper: each head's summed map is centred on the diagonal, some one step off it.")

    def fig03_caption(r: RunData) -> str:
        k = r.dataset.attrs.get("top_k_columns", r.meta.get("top_k_columns", "k"))
        L = r.dataset.sizes["layer"]
        return (f"Layer {L} (the last), attention summed over its {r.dataset.sizes['head']} heads and all {r.n_windows:,} windows. "
                f"Left: the plain sum, dominated by a few columns that almost every query attends to. Middle: the same "
                f"sum after zeroing, in every window and head, the {k} key columns that receive the most attention. "
                f"Right: {cf.zeroed_band(r.dataset)} zeroed as well. What remains shows the structure the dominant columns "
                "hide (the paper: a diagonal).")

    def fig06_caption(r: RunData) -> str:
        return (f"Per head (rows: layers, columns: heads), (a) the share of its high-similarity pairs (normalised "
                f"similarity above {r.threshold:g}) whose two tokens are the same token id, over all {r.n_windows:,} "
                "windows; (b) the same share among the pairs that lie inside one sentence. Values are printed in each "
                "cell, grey cells have no pairs. Heads that detect repeated tokens stand out as bright cells; the paper "
                "finds that heads differ strongly, and that restricting to one sentence changes little.")

    def fig07_caption(r: RunData) -> str:
        L = r.dataset.sizes["layer"]
        return (f"Layer {L} (the last): for each head, the distance |i − j| between the two tokens of its "
                "high-similarity pairs (bars: share of the head's pairs per distance), the distance distribution of "
                "all valid pairs (grey line: what randomly chosen pairs would give) and the head's mean distance (red "
                "dashed). Bars above the grey line at short distances mean the head prefers near neighbours. Below: the "
                "mean distance of every head of every layer, the shown layer outlined. The paper (BERT-base, last "
                "layer): every head but one averages below 50 tokens; the exception pairs identical tokens across the "
                "whole input.")

    def fig08_caption(r: RunData) -> str:
        spw = r.sentences_per_window()
        spw_text = f" (windows hold {spw:.1f} sentences on average)" if math.isfinite(spw) else ""
        chance = cf.same_sentence_chance(r.dataset)
        return (f"(a) Per head, the probability that a high-similarity pair lies inside one sentence. (b) Its "
                f"difference from chance, red above and blue below; chance = {chance:.3f} is the share of all valid "
                f"pairs that lie inside one sentence{spw_text}. (c) Per layer, all heads pooled (line) and single heads "
                "(dots) against chance (dashed). [CLS] and [SEP] belong to no sentence. The paper: heads prefer pairs "
                "within one sentence, well above the chance that 3–4 sentences per window give.")

    def fig10_caption(r: RunData) -> str:
        return (f"For every layer (rows) and head (columns): how often each position pair (i, j) is a high-similarity "
                f"pair, summed over all {r.n_windows:,} windows (the map is symmetric). Each panel is scaled to its own "
                "maximum, so compare patterns, not brightness, between panels: a bright diagonal means pairs of "
                "neighbouring tokens, bright lines one position paired with many, an even panel pairs anywhere. The "
                "paper shows two heads of the last layer, each with its own typical locations.")

    def fig11_caption(r: RunData) -> str:
        H = r.dataset.sizes["head"]
        return (f"(a) Per head, the mean over windows of the share of its high-similarity pairs that contain its most "
                f"common token (its anchor). (b) The distribution of that share, per layer with all heads pooled. (c) "
                f"Per layer, the number of distinct anchor tokens among the layer's {H} heads in one window (0 when no "
                f"head has pairs, {H} when every head centres on a different token). The paper: most of a head's pairs "
                "contain its anchor, and the heads of a layer pick different anchors.")

    def fig12_caption(r: RunData) -> str:
        ls = cf.first_middle_last(r.dataset.sizes["layer"])
        return (f"Normalised similarity matrices S / max S summed over all heads and all {r.n_windows:,} windows, for "
                f"layers {_layers_text(ls)}. Row i and column j are token positions; the diagonal is zero by "
                "construction. The paper shows one input: evenly spread in the first layer, concentrated on the "
                "diagonal in the middle, spread within sentences in the last. Summed over many windows, sentence "
                "boundaries fall at different positions, so mainly the dependence on distance survives (a band along "
                "the diagonal); the per-text version is in the example section.")

    def fig13_caption(r: RunData) -> str:
        ls = cf.first_middle_last(r.dataset.sizes["layer"])
        return (f"Distance |i − j| of high-similarity pairs with all heads of the layer pooled, for layers "
                f"{_layers_text(ls)} (share of the layer's pairs per distance), with the distribution of all valid "
                "pairs (grey: chance), the mean (red dashed) and the median (orange dotted). The paper: spread out in "
                "the first layer, extremely short in the middle layers, slightly longer again in the last.")

    def simhist_caption(r: RunData) -> str:
        return (f"Distribution of the normalised similarity values S / max S of all valid pairs i < j, per layer with "
                f"all heads pooled, on a log scale. The legend gives each layer's share below 0.1 and between 0.1 and "
                f"0.6 (grey band); the dashed line is the threshold {r.threshold:g}. Values outside the histogram's "
                "range are counted in its end bins. The paper (§3): most values lie below 0.1 and few between 0.1 and "
                "0.6, so the threshold separates the high-similarity elements.")

    def focus_caption(r: RunData) -> str:
        return ("Mean attention a query gives to [CLS], [SEP], punctuation tokens, the previous token and the next "
                "token, per head (heatmaps) and per layer averaged over heads (bottom right, where dotted lines give "
                "the share of [CLS], [SEP] and punctuation among the tokens, i.e. what uniform attention would give; "
                f"{r.shares.get('method', '')}). The paper: attention goes to [CLS] in the first layers and to sentence "
                "separators in the last.")

    def m(r: RunData) -> str:
        return r.label

    return [
        FigureSpec("fig02_summed_attention", "Fig 2", "summed attention maps",
                   lambda r: cf.fig02_summed_attention(r.dataset, model=m(r)), fig02_caption),
        FigureSpec("fig03_zeroed_attention", "Fig 3", "last layer, dominant columns zeroed",
                   lambda r: cf.fig03_zeroed_attention(r.dataset, model=m(r)), fig03_caption),
        FigureSpec("fig06_repeat_probability", "Fig 6", "repeated tokens among high-similarity pairs",
                   lambda r: cf.fig06_repeat_probability(r.heads, model=m(r)), fig06_caption),
        FigureSpec("fig07_distance_histograms", "Fig 7", "distances of high-similarity pairs per head",
                   lambda r: cf.fig07_distance_histograms(r.dataset, r.heads, model=m(r)), fig07_caption),
        FigureSpec("fig08_same_sentence", "Fig 8", "high-similarity pairs within one sentence",
                   lambda r: cf.fig08_same_sentence(r.dataset, r.heads, r.layers, model=m(r)), fig08_caption),
        FigureSpec("fig10_locations", "Fig 10", "locations of high-similarity pairs",
                   lambda r: cf.fig10_locations(r.dataset, model=m(r)), fig10_caption),
        FigureSpec("fig11_anchors", "Fig 11", "anchor tokens",
                   lambda r: cf.fig11_anchors(r.dataset, r.heads, r.layers, model=m(r)), fig11_caption),
        FigureSpec("fig12_summed_similarity", "Fig 12", "summed similarity, first / middle / last layer",
                   lambda r: cf.fig12_summed_similarity(r.dataset, model=m(r)), fig12_caption),
        FigureSpec("fig13_layer_distances", "Fig 13", "distances by layer",
                   lambda r: cf.fig13_layer_distances(r.dataset, model=m(r)), fig13_caption),
        FigureSpec("sim_value_histogram", "§3", "distribution of normalised similarity values",
                   lambda r: cf.sim_value_histogram(r.dataset, model=m(r)), simhist_caption),
        FigureSpec("attention_focus", "§2, Fig 4", "where attention goes",
                   lambda r: cf.attention_focus(r.heads, model=m(r), shares=r.shares), focus_caption),
    ]


# ---------------------------------------------------------------------------------------------
# The per-text example
# ---------------------------------------------------------------------------------------------


def _example_section(example, out: Path) -> dict:
    """Write the inspection into ``out/example`` and describe it for the page."""
    written = example.write(out / EXAMPLE_DIR)
    names = {p.name for p in written}
    meta = example.meta
    layer, head, thr = meta.get("layer"), meta.get("head"), meta.get("threshold")
    shown = meta.get("figure_layers", [])
    sep_layer = meta.get("separator_layer")
    model = example.model.name if hasattr(example, "model") else "model"
    specs = [
        ("fig04_attention", "Fig 4", "attention maps of one input",
         f"One input window ({meta.get('valid_tokens', '?')} tokens). Per layer ({_layers_text(shown)}), the attention "
         f"map of head {head} (left) and the sum over the layer's heads (right); tick labels are 'position:token'. The "
         "paper: attention is spread out in the first layers, centred on the diagonal in the middle and focused on "
         "sentence separators in the last."),
        ("fig05_blocks", "Fig 5", "separator blocks of one input",
         f"Layer {layer}, head {head}: attention map (top left), normalised similarity matrix with zeroed diagonal (top "
         f"right), the separator rows and columns found from layer {sep_layer}'s attention columns (bottom left) and "
         "the similarity averaged inside each block between separators (bottom right)."),
        ("fig09_pairs", "Fig 9", "high-similarity token pairs of one head",
         f"Layer {layer}, head {head}: the pairs whose normalised similarity exceeds {thr} (table, positions from 0) "
         "and the input's tokens, the paired ones coloured by token value, as in the paper's Fig 9."),
        ("similarity", "Similarity", "one head's similarity and its high-similarity mask",
         f"Layer {layer}, head {head}: S = Z·Zᵀ of the head's output vectors with the diagonal zeroed and divided by its "
         f"maximum (left), and the elements above the threshold {thr} (right)."),
        ("fig12_summed_similarity", "Fig 12 (one input)", "similarity summed over heads for one input",
         f"The same input: normalised similarity summed over all heads, for layers {_layers_text(shown)}."),
    ]
    figures = [{"stem": stem, "label": label, "title": title, "caption": caption,
                "png": f"{EXAMPLE_DIR}/{stem}.png", "svg": f"{EXAMPLE_DIR}/{stem}.svg"}
               for stem, label, title, caption in specs if f"{stem}.png" in names]
    pairs = example.head_pairs()
    show = pairs.sort_values("similarity", ascending=False, kind="stable").head(PAIR_ROWS)
    rows = [[r.token_i, r.token_j, int(r.index_i), int(r.index_j), f"{r.similarity:.3f}"] for r in show.itertuples()]
    return {
        "intro": (f"Figures of one input, from headsim inspect with {model}: window {meta.get('window', 0)} of "
                  f"{meta.get('windows', 1)} of the example text, {meta.get('valid_tokens', '?')} tokens, threshold {thr}. "
                  "Files in the example/ folder."),
        "figures": figures,
        "head_label": f"layer {layer}, head {head}",
        "pairs_caption": (f"The token pairs (Token_i, Token_j, Index_i, Index_j) whose normalised similarity in layer "
                          f"{layer}, head {head} exceeds {thr}, as in the paper's Fig 9; positions from 0 ([CLS]). "
                          + (f"Shown: the {len(show)} of its {len(pairs)} pairs with the highest similarity."
                             if len(pairs) > len(show) else f"All {len(pairs)} pairs, highest similarity first.")),
        "pair_columns": ["Token_i", "Token_j", "Index_i", "Index_j", "S / max S"],
        "pair_rows": rows,
        "pairs_more": (f"{len(pairs) - len(show)} more pairs of this head in the CSV." if len(pairs) > len(show)
                       else ("This head has no high-similarity pair in this input." if not len(pairs) else "")),
        "pairs_csv": f"{EXAMPLE_DIR}/fig09_pairs.csv",
    }


NO_EXAMPLE = ("The per-text figures (Fig 4 attention maps, Fig 5 separator blocks, Fig 9 pair tables, Fig 12 of one "
              "input) need the model to run on one input; this report was built without one. Run "
              "`headsim report RUN_DIR --example` or `headsim inspect TEXT --out DIR` to draw them.")


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


def run_rows(run: RunData) -> list[tuple[str, str]]:
    m, c = run.model, run.meta.get("corpus", {})
    versions = run.meta.get("versions", {})
    rows = [
        ("model", f"{run.label} — {m.get('class', '?')} ({m.get('model_type', '?')})"),
        ("model source", str(m.get("source", "?"))),
        *([("model revision", str(m.get("revision") or m.get("commit")))] if m.get("revision") or m.get("commit") else []),
        ("layers × heads", f"{m.get('n_layers', run.dataset.sizes['layer'])} × {m.get('n_heads', run.dataset.sizes['head'])}, "
                           f"{m.get('d_head', '?')} dimensions per head"),
        ("dtype, device", f"{m.get('dtype', run.meta.get('dtype', '?'))}, {m.get('device', run.meta.get('device', '?'))}"),
        ("corpus", f"{c.get('name', '?')} ({c.get('documents', '?')} documents"
                   + (f", {c['tokens']:,} tokens" if isinstance(c.get("tokens"), int) else "")
                   + f"; sha256 {str(c.get('sha256', '?'))[:16]}…)"),
        ("windows analysed", f"{run.n_windows:,} windows of {run.dataset.attrs.get('seq_len', run.meta.get('seq_len', '?'))} "
                             f"tokens ({int(run.dataset['tokens'].values):,} valid tokens)" if "tokens" in run.dataset else str(run.n_windows)),
        ("threshold", f"{run.threshold:g} on S / max S (diagonal zeroed)"),
        ("columns zeroed (Fig 3)", str(run.dataset.attrs.get("top_k_columns", run.meta.get("top_k_columns", "?")))),
    ]
    if run.meta.get("sentence_splitter"):
        rows.append(("sentence splitter", str(run.meta["sentence_splitter"])))
    if versions:
        rows.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    rows.append(("git commit", str(run.meta.get("git_commit") or "unknown")))
    when = run.meta.get("created", "?") + (f", finished {run.meta['finished']}" if run.meta.get("finished") else "")
    if run.meta.get("seconds") is not None:
        when += f" ({float(run.meta['seconds']):,.0f} s)"
    rows.append(("created", when))
    rows.append(("run directory", str(run.path)))
    return rows


def save_once(fig: Figure, out: Path, stem: str, *, dpi: int = 200) -> list[Path]:
    """:func:`~headsim.plots.style.save` with the layout computed once for both PNG and SVG."""
    fig.canvas.draw()
    fig.set_layout_engine("none")
    return save(fig, out, stem, dpi=dpi)


def _rel(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def write_claims(claims: list[Claim], out: Path, run: RunData) -> list[Path]:
    """``claims.json`` (with provenance) and ``claims.csv`` into ``out``."""
    payload = {"model": run.model, "model_label": run.label, "run_dir": str(run.path), "windows": run.n_windows,
               "threshold": run.threshold, "token_shares": run.shares, "claims": [c.to_dict() for c in claims]}
    (out / "claims.json").write_text(json.dumps(_clean(payload), indent=2, ensure_ascii=False))
    claims_frame(claims).to_csv(out / "claims.csv", index=False)
    return [out / "claims.json", out / "claims.csv"]


def _clean(x):
    from .claims import _jsonable

    return _jsonable(x)


def build_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, example=None, *,
                 tokenizer=None, window_runs: Sequence[str | os.PathLike] = (), dpi: int = 200) -> Path:
    """Write the report of a finished run; returns the path of ``index.html``.

    Args:
        run_dir: a directory written by ``headsim analyze`` (or ``reproduce``).
        out_dir: where to write (default: ``run_dir``); figures, claims and ``index.html`` go there,
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
    """
    run = load_run_data(run_dir, tokenizer=tokenizer)
    lengths = None
    if window_runs:
        from .window_lengths import compare_window_lengths

        lengths = compare_window_lengths([run] + [load_run_data(d, tokenizer=tokenizer) for d in window_runs])
    out = Path(out_dir) if out_dir is not None else run.path
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        figures = []
        for spec in figure_specs():
            save_once(spec.make(run), tmp, spec.stem, dpi=dpi)
            figures.append({"stem": spec.stem, "label": spec.label, "title": spec.title, "caption": spec.caption(run),
                            "png": f"{spec.stem}.png", "svg": f"{spec.stem}.svg"})
        claims = compute_claims(run.dataset, run.heads, run.layers, run.meta, shares=run.shares)
        write_claims(claims, tmp, run)
        example_ctx = _example_section(example, tmp) if example is not None else None
        from ..ablation.report import report_section

        ablation_ctx = report_section(run.path, tmp)
        window_ctx = None
        if lengths is not None:
            from .window_section import write_section

            window_ctx = write_section(lengths, tmp, dpi=dpi)
        files = [("claims.json", "the claims with their numbers, as JSON"), ("claims.csv", "the claims table")]
        for name, what in ((RUN_JSON, "run metadata"), (STATS_NC, "all statistics (xarray Dataset, netCDF)"),
                           (HEADS, "per-head summary table"), (LAYERS, "per-layer summary table"),
                           (WINDOWS, "the analysed windows (token ids, sentence ids)")):
            if (run.path / name).is_file():
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
                      example=example_ctx, no_example=NO_EXAMPLE, ablation=ablation_ctx, window=window_ctx, files=files, headsim_version=__version__,
                      generated=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        (tmp / "index.html").write_text(html, encoding="utf-8")
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
