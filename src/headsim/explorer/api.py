"""Payloads of the explorer's JSON API, as plain functions (no HTTP in here).

The server (:mod:`headsim.explorer.app`) only validates requests, caches and locks; everything a
response contains is built here from the core: one window of a text is a
:class:`headsim.views.TextView` (built once by the model tap, exactly what ``headsim inspect``
shows: attention, normalised similarity, separator columns, blocks, and each head's attention
focus by the corpus statistics' own function), block averages come from :mod:`headsim.views`.
Layers and heads are 1-based in every payload (as in every figure and table); token positions are
0-based (position 0 named by the model's own opening token: :func:`numbering`).

A run directory is read-only input, read through :meth:`headsim.runs.rundir.RunDir.load` (only a
finished run): its head table once, one head's distance histogram and the first few windows (for the
example menu) on request.
"""

from __future__ import annotations

import hashlib
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import HeadsimError, require
from ..inspection import EXAMPLES, check_index, example_text
from ..model.load import LoadedModel
from ..report.html import provenance_rows
from ..runs.rundir import RunDir
from ..tokens import first_position_note
from ..stats.tables import same_sentence_excess
from ..context_similarity import check_threshold
from ..views import TextView, cut_text, separators_from_scores, window_view
from ..views.text_view import PAIR_LIMIT, VIEW_RESOLUTION, ZOOM_LIMIT
from ..windows import Windows

DEFAULT_THRESHOLD = 0.3
DEFAULT_SEP_THRESHOLD = 0.5
DEFAULT_SEQ_LEN = 128
THUMB_SIZE = 32  # thumbnails are max-pooled to at most THUMB_SIZE × THUMB_SIZE
DECIMALS = 4  # attention and similarity are rounded to this many decimals in payloads
COUNT_STEPS = 100  # high_counts[k] = pairs above k / COUNT_STEPS
RUN_WINDOWS = 4  # windows of a run offered as examples
NUMBERING = "layers and heads numbered from 1; token positions from 0"


def numbering(loaded: LoadedModel) -> str:
    """:data:`NUMBERING` with what position 0 is for ``loaded``: its own opening token (``<s> = 0`` for a
    decoder, ``[CLS] = 0`` for BERT), or the first text token where its windows open with none."""
    return f"{NUMBERING} ({first_position_note(loaded.tokenizer, loaded.framing.open)})"

EXAMPLE_TITLES = {
    "gerstenslager": "Gerstenslager (paper Fig 4)",
    "airport_policing": "Airport policing (paper Fig 9)",
}

# head statistics of a run, in display order, with what each measures
HEAD_STATS = {
    "p_repeat": "probability that a high-similarity pair is a repeated token (Fig 6a)",
    "p_repeat_same_sentence": "probability that a high-similarity pair is a repeated token within one sentence",
    "p_same_sentence": "probability that a high-similarity pair lies within one sentence (Figs 6b, 8)",
    "p_same_sentence_chance": "chance level of p_same_sentence (random pairs of the same windows)",
    "p_same_sentence_excess": "p_same_sentence minus its chance level",
    "mean_distance": "mean token distance |i - j| of high-similarity pairs (Fig 7)",
    "median_distance": "median token distance of high-similarity pairs (Fig 7)",
    "anchor_fraction_mean": "fraction of high-similarity elements containing the head's most common token (Fig 11a)",
    "attn_cls": "attention to [CLS]",
    "attn_sep": "attention to [SEP]",
    "attn_punct": "attention to punctuation",
    "attn_prev": "attention to the previous token",
    "attn_next": "attention to the next token",
    "n_pairs": "number of high-similarity pairs counted over the corpus",
}

# per-head statistics of the analysed text (always available, no run needed)
TEXT_STATS = {
    "attn_cls": "attention to [CLS] in this text (mean over query tokens)",
    "attn_sep": "attention to [SEP] in this text",
    "attn_punct": "attention to punctuation in this text",
    "attn_prev": "attention to the previous token in this text",
    "attn_next": "attention to the next token in this text",
}


# ---------------------------------------------------------------------------------------------
# small helpers


def analysis_id(text: str, seq_len: int) -> str:
    """Stable id of an analysis: a hash of (text, seq_len)."""
    return hashlib.sha256(f"{int(seq_len)}\x00{text}".encode("utf-8")).hexdigest()[:16]


def check_text_size(text: str, max_bytes: int) -> str:
    """Refuse texts above ``max_bytes`` (UTF-8) with status 413."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise HeadsimError(f"the text holds a lone surrogate ({text[exc.start]!r} at character {exc.start}), which is not Unicode text",
                           "send valid UTF-8 text (pair or remove the surrogate)") from exc
    require(size <= max_bytes, f"the text is {size:,} bytes, above this server's limit of {max_bytes:,} bytes",
            "send a shorter text (analyse it in parts), or restart the server with a larger --max-text-kb",
            status=413)
    return text


def rounded(a: np.ndarray, decimals: int = DECIMALS) -> list:
    """Nested lists of rounded floats (``-0.0`` → ``0.0``) for JSON."""
    return (np.round(np.asarray(a, dtype=np.float64), decimals) + 0.0).tolist()


def _json_value(v):
    if v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def model_info(loaded: LoadedModel) -> dict:
    """Model dimensions for the page header and the API."""
    info = loaded.describe()
    for key in ("name", "source"):  # a model given as a local path: never show the server's file system
        if Path(str(info.get(key, ""))).is_absolute():
            info[key] = Path(info[key]).name
    info["max_seq_len"] = loaded.max_seq_len
    info["provenance"] = provenance_rows(info)  # a model given as an object: class, adapters, weights fingerprint
    info.pop("object", None)  # its config is for run.json, not the page
    return info


# ---------------------------------------------------------------------------------------------
# texts → windows → per-window tensors


@dataclass
class Prepared:
    """A text cut into windows (cheap: tokenizer only); the model runs per window on demand."""

    id: str
    text: str
    seq_len: int
    windows: Windows

    @property
    def n_windows(self) -> int:
        return len(self.windows)


def prepare(text: str, loaded: LoadedModel, seq_len: int = DEFAULT_SEQ_LEN) -> Prepared:
    """Validate ``text`` and ``seq_len`` and cut the text into windows (same windows as ``extract``)."""
    windows = cut_text(text, loaded, seq_len)
    return Prepared(analysis_id(text, windows.seq_len), text, windows.seq_len, windows)


def compute_window(loaded: LoadedModel, prepared: Prepared, window: int = 0, resolution: int = VIEW_RESOLUTION) -> TextView:
    """Run the model on one window: its :class:`~headsim.views.TextView` (what ``inspect`` shows; a
    window of more than ``resolution`` tokens as a binned overview)."""
    return window_view(loaded, prepared.windows, window, prepared.text, resolution=resolution)


# ---------------------------------------------------------------------------------------------
# /api/analyze


def upper_values(normalized: np.ndarray) -> np.ndarray:
    """``[..., n, n]`` → ``[..., n(n-1)/2]`` values of the pairs ``i < j``."""
    n = normalized.shape[-1]
    i, j = np.triu_indices(n, k=1)
    return normalized[..., i, j]


def high_counts(normalized: np.ndarray, steps: int = COUNT_STEPS) -> np.ndarray:
    """``[L, H, steps + 1]``: number of pairs ``i < j`` with similarity above ``k / steps``.

    The page reads the number of high-similarity pairs at any slider position (steps of 0.01)
    from this, so thumbnails can be coloured by it without a request per slider move.
    """
    vals = np.sort(upper_values(normalized).astype(np.float32), axis=-1)
    edges = (np.arange(steps + 1) / steps).astype(np.float32)
    flat = vals.reshape(-1, vals.shape[-1])
    counts = np.stack([flat.shape[1] - np.searchsorted(row, edges, side="right") for row in flat])
    return counts.reshape(vals.shape[:-1] + (steps + 1,))


def pool_max(matrix: np.ndarray, size: int = THUMB_SIZE) -> np.ndarray:
    """Max-pool ``[..., n, n]`` to at most ``size × size`` (identity when ``n <= size``)."""
    n = matrix.shape[-1]
    if n <= size:
        return matrix
    edges = np.linspace(0, n, size + 1).astype(np.int64)[:-1]
    rows = np.maximum.reduceat(matrix, edges, axis=-2)
    return np.maximum.reduceat(rows, edges, axis=-1)


def thumbnails(matrices: np.ndarray, size: int = THUMB_SIZE) -> list:
    """``[L, H, n, n]`` → ``[L][H]`` flattened ``s × s`` integer images 0..100, each scaled to its max."""
    pooled = pool_max(np.clip(matrices, 0.0, None), size)
    peak = pooled.max(axis=(-1, -2), keepdims=True)
    scaled = np.divide(pooled, peak, out=np.zeros_like(pooled), where=peak > 0)
    q = np.rint(scaled * 100).astype(np.int64)
    return q.reshape(q.shape[0], q.shape[1], -1).tolist()


def analyze_payload(prepared: Prepared, wd: TextView, loaded: LoadedModel,
                    threshold: float = DEFAULT_THRESHOLD) -> dict:
    """Tokens, model dimensions and per-head summaries (counts, focus, thumbnails) of one window."""
    threshold = check_threshold(threshold)
    text, start = wd.window_text()
    offsets = np.where(wd.offsets >= 0, wd.offsets - start, -1)
    if wd.binned:  # exact counts from the head outputs, a block of query rows at a time
        counts = wd.threshold_counts(np.arange(COUNT_STEPS + 1) / COUNT_STEPS)
        n_high = wd.pair_counts(threshold)
    else:
        counts = high_counts(wd.normalized)
        n_high = upper_values(wd.mask(threshold)).sum(axis=-1)
    return {
        "id": prepared.id,
        "seq_len": prepared.seq_len,
        "window": wd.window,
        "n_windows": prepared.n_windows,
        "n_tokens": wd.n,
        "model": model_info(loaded),
        "numbering": numbering(loaded),
        "text": text,
        "tokens": wd.tokens,
        "offsets": offsets.tolist(),
        "sentences": wd.sentences.tolist(),
        "special": wd.special.tolist(),
        "threshold": threshold,
        "view": view_payload(wd),
        "heads": {
            "n_high": n_high.tolist(),
            "high_counts": counts.tolist(),
            "count_steps": COUNT_STEPS,
            **{k: rounded(v) for k, v in wd.focus.items()},
        },
        "text_stats": TEXT_STATS,
        "thumbnails": {
            "size": min(wd.n, THUMB_SIZE),
            "pooling": "max",
            "similarity": thumbnails(wd.normalized),
            "attention": thumbnails(wd.attention),
        },
    }


# ---------------------------------------------------------------------------------------------
# /api/head


def view_payload(wd: TextView) -> dict:
    """How the window's matrices are given: per token, or (a long window) as means over position
    bins, each ``[first, stop)`` of token positions; exact regions come from /api/zoom."""
    if not wd.binned:
        return {"unit": "tokens", "n": wd.n}
    return {"unit": "bins", "n": int(wd.attention.shape[-1]), "bins": wd.bin_ranges.tolist(), "labels": wd.labels,
            "zoom_limit": ZOOM_LIMIT, "pairs_limit": PAIR_LIMIT}


def separator_payload(wd: TextView, layer: int, head: int, sep_layer: int, sep_threshold: float) -> dict:
    """Fig 5: separator columns of a layer's summed attention and the block-averaged similarity of
    ``layer``'s ``head`` (over bins for a long window).

    ``sep_layer`` is 0-based; framing tokens ([CLS]/[SEP], BOS, EOS) are excluded from the column
    scores (as in ``inspect``).
    """
    scores = wd.column_scores(sep_layer)
    seps = separators_from_scores(scores, sep_threshold)
    blocks = wd.blocks(seps)
    averaged = wd.block_average(layer, head, seps)
    return {
        "layer": sep_layer + 1,
        "threshold": sep_threshold,
        "scores": rounded(scores),
        "columns": [int(s) for s in seps],
        "blocks": blocks.tolist(),
        "block_average": rounded(averaged),
    }


def head_payload(prepared: Prepared, wd: TextView, loaded: LoadedModel, layer: int, head: int, *,
                 sep_layer: int | None = None, sep_threshold: float = DEFAULT_SEP_THRESHOLD) -> dict:
    """One head of one window: attention map, normalised similarity and Fig 5 separators.

    ``layer``, ``head`` and ``sep_layer`` are 1-based (``sep_layer`` defaults to the last layer).
    Matrices cover the window's valid tokens only, rounded to :data:`DECIMALS` decimals (a long
    window: means over position bins, ``view`` says which; exact regions from :func:`zoom_payload`).
    """
    n_layers, n_heads = wd.n_layers, wd.n_heads
    l = check_index(layer, n_layers, "layer")
    h = check_index(head, n_heads, "head")
    sl = check_index(sep_layer if sep_layer is not None else n_layers, n_layers, "layer")
    sep_threshold = check_threshold(sep_threshold, "separator threshold")
    sim = wd.normalized[l, h]
    return {
        "view": view_payload(wd),
        "id": prepared.id,
        "window": wd.window,
        "layer": l + 1,
        "head": h + 1,
        "n_tokens": wd.n,
        "numbering": numbering(loaded),
        "tokens": wd.tokens,
        "attention": rounded(wd.attention[l, h]),
        "similarity": rounded(sim),
        "separators": separator_payload(wd, l, h, sl, sep_threshold),
    }


def zoom_payload(prepared: Prepared, wd: TextView, layer: int, head: int, rows: tuple[int, int],
                 cols: tuple[int, int]) -> dict:
    """Exact attention and normalised similarity of one head over query rows ``rows`` × key columns
    ``cols`` (``[start, stop)`` token positions, at most :data:`ZOOM_LIMIT` each; layer and head
    1-based), S divided by the head's maximum over the whole window (:meth:`TextView.zoom`)."""
    l = check_index(layer, wd.n_layers, "layer")
    h = check_index(head, wd.n_heads, "head")
    z = wd.zoom(l, h, slice(*rows), slice(*cols))
    return {
        "id": prepared.id, "window": wd.window, "layer": l + 1, "head": h + 1, "n_tokens": wd.n,
        "numbering": NUMBERING, "rows": [z.rows.start, z.rows.stop], "cols": [z.cols.start, z.cols.stop],
        "row_tokens": z.row_tokens, "col_tokens": z.col_tokens,
        "attention": rounded(z.attention), "similarity": rounded(z.normalized),
    }


# ---------------------------------------------------------------------------------------------
# examples and runs


class ExplorerRun:
    """A finished run as the explorer shows it (:meth:`headsim.runs.rundir.RunDir.load`: a directory that is
    not one, or an unfinished, damaged or older-layout run, is refused as by every other command):
    head statistics read once, one head's distance histogram and the first windows read on request."""

    def __init__(self, path: str | Path) -> None:
        self.run = RunDir(Path(path).expanduser()).load()
        heads = self.run.heads.copy()
        if {"p_same_sentence", "p_same_sentence_chance"} <= set(heads.columns):
            heads["p_same_sentence_excess"] = same_sentence_excess(heads)
        self.path = self.run.path
        self.warnings: list[str] = []
        self.heads = heads.sort_values(["layer", "head"]).reset_index(drop=True)
        self.n_layers = int(self.heads["layer"].max())
        self.n_heads = int(self.heads["head"].max())
        self._io = threading.Lock()

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stat_columns(self) -> list[str]:
        numeric = [c for c in self.heads.columns if c not in ("layer", "head")
                   and pd.api.types.is_numeric_dtype(self.heads[c])]
        known = [c for c in HEAD_STATS if c in numeric]
        return known + [c for c in numeric if c not in known]

    def check_model(self, loaded: LoadedModel) -> None:
        """The run must come from a model with the same layers × heads."""
        require(self.n_layers == loaded.n_layers and self.n_heads == loaded.n_heads,
                f"run {str(self.path)!r} has {self.n_layers} layers × {self.n_heads} heads but model "
                f"{loaded.name!r} has {loaded.n_layers} × {loaded.n_heads}",
                "start the server with the --model the run was made with")
        made_with = self.run.model.get("name")
        if made_with and made_with != loaded.name and str(loaded.source) != self.model_source:
            self.warnings.append(f"the run was made with model {made_with!r} but the server runs "
                                 f"{loaded.name!r}: its windows are decoded with the server's tokenizer")
        elif self.run.spec.model_fingerprint != loaded.fingerprint:
            made = self.run.spec.model_fingerprint
            self.warnings.append(f"the run was made with other weights (fingerprint {str(made)[:12]}) than the server runs "
                                 f"({str(loaded.fingerprint)[:12]}; None: loaded by name)")
        elif self.commit and loaded.commit and self.commit != loaded.commit:
            self.warnings.append(f"the run was made with commit {self.commit} of {made_with!r} but the server runs "
                                 f"commit {loaded.commit}: start the server with --revision {self.commit}")

    @property
    def model_name(self) -> str | None:
        return self.run.model.get("name")

    @property
    def model_source(self) -> str:
        """Where the run's model was loaded from (run.json ``model.source``, else its name)."""
        m = self.run.model
        return str(m.get("source") or m.get("name") or "default")

    @property
    def commit(self) -> str | None:
        """The commit of the hub model the run was made with (``None`` for a local one)."""
        return self.run.model.get("commit")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "model": self.model_name,
            "commit": self.commit,
            "warnings": list(self.warnings),
            "provenance": provenance_rows(self.run.model),
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "stats": self.stat_columns,
        }


def info_payload(loaded: LoadedModel, run: ExplorerRun | None, max_text_bytes: int) -> dict:
    """What the page needs before the first analysis."""
    return {
        "model": model_info(loaded),
        "run": run.describe() if run is not None else None,
        "numbering": numbering(loaded),
        "limits": {"max_text_bytes": max_text_bytes, "max_seq_len": loaded.max_seq_len},
        "defaults": {"threshold": DEFAULT_THRESHOLD, "sep_threshold": DEFAULT_SEP_THRESHOLD,
                     "seq_len": DEFAULT_SEQ_LEN, "sep_layer": loaded.n_layers},
        "head_stats": HEAD_STATS,
        "text_stats": TEXT_STATS,
    }


def heads_payload(run: ExplorerRun | None) -> dict:
    """Every head's statistics from the run (404 when no run is loaded)."""
    require(run is not None, "no run is loaded, so there are no corpus head statistics",
            "start the server with --run DIR (a run directory written by headsim analyze)", status=404)
    cols = ["layer", "head"] + run.stat_columns
    rows = [{k: _json_value(v) for k, v in rec.items()} for rec in run.heads[cols].to_dict(orient="records")]
    return {
        "run": run.name,
        "n_layers": run.n_layers,
        "n_heads": run.n_heads,
        "numbering": NUMBERING,
        "columns": cols,
        "descriptions": {c: HEAD_STATS.get(c, "") for c in run.stat_columns},
        "rows": rows,
    }


def distance_histogram(run: ExplorerRun, layer: int, head: int) -> dict:
    """``distance_hist[layer, head, :]`` of the run's statistics (1-based; read lazily, that head only)."""
    with run._io, run.run.open_dataset() as ds:
        da = ds["distance_hist"].sel(layer=layer, head=head)
        counts = np.asarray(da.values, dtype=np.float64)
        distance = np.asarray(da["distance"].values)
    return {"distance": [_json_value(x) for x in distance.tolist()],
            "count": [_json_value(x) for x in counts.tolist()]}


def profile_payload(run: ExplorerRun | None, layer: int, head: int) -> dict:
    """One head's corpus profile: its statistics, their rank among heads, layer means, distance histogram."""
    require(run is not None, "no run is loaded, so there is no corpus profile",
            "start the server with --run DIR (a run directory written by headsim analyze)", status=404)
    l = check_index(layer, run.n_layers, "layer") + 1
    h = check_index(head, run.n_heads, "head") + 1
    table = run.heads
    sel = table[(table["layer"] == l) & (table["head"] == h)]
    require(len(sel) == 1, f"run {run.name!r} has no statistics for layer {l}, head {h}",
            "the run's head table is incomplete; rerun the statistics")
    cols = run.stat_columns
    row = sel.iloc[0]
    ranks = table[cols].rank(ascending=False, method="min")
    layer_rows = table[table["layer"] == l]
    return {
        "layer": l,
        "head": h,
        "run": run.name,
        "numbering": NUMBERING,
        "stats": {c: _json_value(row[c]) for c in cols},
        "ranks": {c: (None if pd.isna(r := ranks.loc[sel.index[0], c]) else int(r)) for c in cols},
        "n_heads_total": int(len(table)),
        "layer_mean": {c: _json_value(layer_rows[c].mean()) for c in cols},
        "descriptions": {c: HEAD_STATS.get(c, "") for c in cols},
        "distance_hist": distance_histogram(run, l, h),
    }


def run_windows(run: ExplorerRun, tokenizer, k: int = RUN_WINDOWS) -> list[dict]:
    """The first ``k`` windows of the run, decoded back to text."""
    with run._io:
        data = run.run.window_table(rows=k, columns=["input_ids", "attention_mask"]).to_pydict()
    out = []
    for i, (ids, mask) in enumerate(zip(data["input_ids"], data["attention_mask"])):
        ids = [t for t, m in zip(ids, mask) if m]
        text = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()
        text = text.removeprefix("##")  # a window may start inside a word
        if text:
            out.append({"id": f"run:{i}", "title": f"run window {i}", "source": "run", "text": text})
    return out


def examples_payload(loaded: LoadedModel, run: ExplorerRun | None) -> dict:
    """Built-in paragraphs (paper Figs 4 and 9) and, with a run, a few of its windows."""
    items = [{"id": f"example:{name}", "title": EXAMPLE_TITLES.get(name, name), "source": "built-in",
              "text": example_text(name)} for name in EXAMPLES]
    if run is not None:
        items += run_windows(run, loaded.tokenizer)
    return {"examples": items}
