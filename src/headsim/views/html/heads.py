"""The head explorer of one window as a self-contained fragment: its payload (quantised, compressed
matrices), a static PNG of the head grid for where scripts do not run, and the script that draws it.

The payload is built from plain arrays, so a caller may pass matrices over tokens or over bins of
tokens (a binned overview of a long window): ``labels`` names the rows and columns either way.
"""

from __future__ import annotations

import base64
import html
import io
import json
import uuid
import zlib

import numpy as np

from ...errors import require
from .page import script_bundle, script_tag

ATTENTION_LEVELS = 7  # √attention in 1/7 steps (drawn only: colours of the explorer's √ scale)
SIMILARITY_STEPS = 50  # S in 0.02 steps, the threshold slider's: every slider position's mask and pair count is exact
THUMB = 10  # cells per side of a head in the static grid


def _b64(a: np.ndarray, level: int = 7, strategy: int = zlib.Z_DEFAULT_STRATEGY) -> str:
    c = zlib.compressobj(level, zlib.DEFLATED, 15, 9, strategy)
    return base64.b64encode(c.compress(np.ascontiguousarray(a, dtype=np.uint8).tobytes()) + c.flush()).decode("ascii")


def pack_nibbles(a: np.ndarray) -> np.ndarray:
    """Values 0..15 two to a byte (the first in the high nibble; an odd count padded with 0)."""
    flat = np.asarray(a, dtype=np.uint8).reshape(-1)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] << 4) | flat[1::2]


def similarity_levels(similarity: np.ndarray) -> np.ndarray:
    """``uint8`` level ``q`` of each S value with ``S > k/steps  ⇔  q ≥ k`` for every k in 1..steps
    (``q = ceil(steps·S) - 1``, clipped to 0..steps; steps = SIMILARITY_STEPS): the masks and pair
    counts at the slider's positions (multiples of 1/steps) are exact."""
    q = np.ceil(np.asarray(similarity, dtype=np.float64) * SIMILARITY_STEPS) - 1
    return np.clip(q, 0, SIMILARITY_STEPS).astype(np.uint8)


def attention_levels(attention: np.ndarray) -> np.ndarray:
    """``uint8`` √attention in ``1/ATTENTION_LEVELS`` steps."""
    return np.round(np.sqrt(np.clip(attention, 0, 1)) * ATTENTION_LEVELS).astype(np.uint8)


THUMB_SIZE = 24  # cells per side of a head's thumbnail in the interactive grid (its tiles are 8 to 64 px)


def _pool(m: np.ndarray, size: int) -> np.ndarray:
    """``[..., n, n]`` block means down to ``[..., s, s]`` (``s = min(size, n)``; row r of the thumbnail
    averages rows ``i`` with ``i·s // n = r``, as draw.js ``thumbnail``)."""
    n = m.shape[-1]
    s = min(size, n)
    edges = np.searchsorted(np.arange(n) * s // n, np.arange(s), side="left")
    sums = np.add.reduceat(np.add.reduceat(m, edges, axis=-2), edges, axis=-1)
    widths = np.diff(np.append(edges, n))
    return sums / np.outer(widths, widths)


def thumbnails(attention: np.ndarray, similarity: np.ndarray, size: int = THUMB_SIZE) -> dict[str, np.ndarray]:
    """Every head's thumbnails as ``uint8`` ``[L, H, s, s]`` (0..255): block means of S (diagonal 0, clipped
    to [0, 1]) and of √attention divided by the head's √maximum (the explorer's √ colours)."""
    s = np.clip(np.asarray(similarity, dtype=np.float32), 0, 1).copy()
    idx = np.arange(s.shape[-1])
    s[..., idx, idx] = 0
    a = np.sqrt(np.clip(np.asarray(attention, dtype=np.float32), 0, None))
    peak = a.max(axis=(-2, -1), keepdims=True)
    a = np.divide(a, peak, out=np.zeros_like(a), where=peak > 0)
    return {k: np.round(np.clip(_pool(v, size), 0, 1) * 255).astype(np.uint8) for k, v in (("similarity", s), ("attention", a))}


def level_counts(levels: np.ndarray, steps: int = SIMILARITY_STEPS) -> np.ndarray:
    """``[L, H, steps + 2]`` ``int32``: ``c[k]`` pairs i < j of a head with level ≥ k (S > k/steps for
    k ≥ 1, :func:`similarity_levels`), for every slider position at once."""
    L, H, m = levels.shape
    hist = np.zeros((L * H, steps + 2), dtype=np.int64)
    np.add.at(hist, (np.repeat(np.arange(L * H), m), levels.reshape(-1).astype(np.int64)), 1)
    return np.cumsum(hist[:, ::-1], axis=1)[:, ::-1].reshape(L, H, steps + 2).astype("<i4")


def explorer_payload(labels: list[str], attention: np.ndarray, similarity: np.ndarray, *, title: str,
                     subtitle: str = "", unit: str = "tokens", stats: dict | None = None,
                     sentences: np.ndarray | None = None, special: np.ndarray | None = None,
                     layer: int = 0, head: int = 0, threshold: float = 0.3, color_by: str = "pairs",
                     tokens: list[str] | None = None, token_bins: np.ndarray | None = None) -> dict:
    """The JSON the head explorer draws: ``attention`` ``[L, H, n, n]`` and the symmetric normalised
    ``similarity`` ``[L, H, n, n]`` over ``labels`` (tokens, or bins of tokens), quantised
    (:func:`attention_levels` packed two to a byte, :func:`similarity_levels`: only ``i < j`` is kept)
    and zlib-compressed one head a chunk (``heads[l·H + h]``), which the page inflates when the head is
    opened; every head's thumbnails (:func:`thumbnails`) and pair counts at every slider position
    (:func:`level_counts`) come precomputed, so a page of a thousand heads is ready at once.
    ``stats``: key → ``{"label", "group", "grid": [L][H]}`` that can colour the head grid. ``layer``,
    ``head`` (0-based) and ``threshold`` are the initial selection. A binned overview (``unit="bins"``)
    may pass the window's ``tokens`` and each one's bin (``token_bins``) so the page shows words."""
    attention, similarity = np.asarray(attention), np.asarray(similarity)
    require(attention.ndim == 4 and attention.shape == similarity.shape and attention.shape[2] == attention.shape[3] == len(labels),
            f"attention {attention.shape} and similarity {similarity.shape} do not match {len(labels)} labels",
            "pass [layers, heads, n, n] matrices over the n labels")
    L, H, n, _ = attention.shape
    iu = np.triu_indices(n, 1)
    # quantised a layer at a time: the float64 temporaries of one layer, not of all L x H heads
    att = np.stack([attention_levels(attention[li]) for li in range(L)])
    levels = np.stack([similarity_levels(similarity[li])[:, iu[0], iu[1]] for li in range(L)])
    per_layer = [thumbnails(attention[li], similarity[li]) for li in range(L)]
    thumbs = {k: np.stack([t[k] for t in per_layer]) for k in per_layer[0]}
    return {
        "title": title, "subtitle": subtitle, "unit": unit, "L": int(L), "H": int(H), "n": int(n),
        "labels": [str(t) for t in labels],
        "sentences": None if sentences is None else [int(s) for s in sentences],
        "special": None if special is None else [bool(s) for s in special],
        "tokens": None if tokens is None else [str(t) for t in tokens],
        "token_bins": None if token_bins is None else [int(b) for b in token_bins],
        "attention": {"levels": ATTENTION_LEVELS, "packing": "nibbles",
                      "heads": [_b64(pack_nibbles(att[li, hi]), 6) for li in range(L) for hi in range(H)]},
        "similarity": {"steps": SIMILARITY_STEPS,
                       "heads": [_b64(levels[li, hi], 9, zlib.Z_FILTERED) for li in range(L) for hi in range(H)],
                       "counts": base64.b64encode(level_counts(levels).tobytes()).decode("ascii")},
        "thumbs": {"size": int(thumbs["similarity"].shape[-1]),
                   **{k: _b64(v, 6) for k, v in thumbs.items()}},
        "stats": stats or {},
        "init": {"layer": int(layer), "head": int(head), "threshold": float(threshold), "color_by": color_by},
    }


def grid_png(similarity: np.ndarray) -> bytes:
    """A PNG of every head's similarity thumbnail (layers as rows, heads as columns, magma), the
    static stand-in of the interactive grid."""
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    L, H, n, _ = similarity.shape
    s = min(THUMB, n)
    edges = np.linspace(0, n, s + 1).astype(int)
    gap = 2
    img = np.ones(((s + gap) * L + gap, (s + gap) * H + gap, 3))
    lut = colormaps["magma"]
    for li in range(L):
        for hi in range(H):
            m = np.clip(similarity[li, hi], 0, 1)
            small = np.add.reduceat(np.add.reduceat(m, edges[:-1], axis=0), edges[:-1], axis=1)
            small /= np.outer(np.diff(edges), np.diff(edges))
            y, x = gap + li * (s + gap), gap + hi * (s + gap)
            img[y:y + s, x:x + s] = lut(small)[..., :3]
    buf = io.BytesIO()
    plt.imsave(buf, np.round(img * 255).astype(np.uint8), format="png")  # shown 3× with crisp pixels (page CSS)
    return buf.getvalue()


def explorer_fragment(payload: dict, fallback_png: bytes | None = None) -> str:
    """The head explorer of ``payload`` as HTML: a static PNG (removed once the script runs), the
    payload as JSON, and the inlined script that mounts the explorer on the element before it."""
    uid = uuid.uuid4().hex[:12]
    data = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    img = ""
    if fallback_png is not None:
        uri = "data:image/png;base64," + base64.b64encode(fallback_png).decode("ascii")
        width = 3 * int.from_bytes(fallback_png[16:20], "big")  # the PNG's width (IHDR), each pixel shown 3 × 3
        img = (f'<figure class="hsv-fallback"><img src="{uri}" width="{width}" style="image-rendering:pixelated" '
               'alt="similarity map of every head">'
               f'<figcaption class="hsv-muted">{html.escape(payload["title"])}: normalised similarity S of every head '
               "(rows: layers, columns: heads). The interactive view draws where scripts run "
               "(a trusted notebook, a browser).</figcaption></figure>")
    return (f'<div class="hsv-root" id="hsv-{uid}">{img}<script type="application/json" class="hsv-data">{data}</script></div>'
            + script_tag(script_bundle() + "\nwindow.headsimViews.mount((document.currentScript && "
                         f"document.currentScript.previousElementSibling) || document.getElementById('hsv-{uid}'));"))


def _focus_stats(view) -> dict:
    return {k: {"label": k, "group": "this text", "grid": np.round(v, 4).tolist()} for k, v in view.focus.items()}


def run_stats(heads, n_layers: int, n_heads: int, columns: tuple[str, ...] = ("p_repeat", "p_same_sentence", "mean_distance"),
              run_name: str = "run") -> dict:
    """Head statistics of a run's ``heads`` table as grid colourings of the explorer."""
    out = {}
    for col in columns:
        if col in heads:
            grid = np.full((n_layers, n_heads), np.nan)
            for row in heads[["layer", "head", col]].itertuples(index=False):
                if 1 <= row[0] <= n_layers and 1 <= row[1] <= n_heads:
                    grid[row[0] - 1, row[1] - 1] = row[2]
            out[f"run:{col}"] = {"label": col, "group": f"corpus, {run_name}",
                                 "grid": [[None if np.isnan(v) else round(float(v), 4) for v in r] for r in grid]}
    return out


def text_view_html(view, *, layer: int | None = None, head: int = 0, threshold: float = 0.3, run=None) -> str:
    """The head explorer of a :class:`~headsim.views.TextView` (0-based ``layer``, default the last;
    ``run``: a :class:`~headsim.runs.run.Run` whose head statistics can colour the grid)."""
    layer = view.n_layers - 1 if layer is None else layer
    from ...report.html import model_label

    name = model_label({"name": view.model.name})
    stats = _focus_stats(view)
    color_by = "pairs"
    if run is not None:
        stats.update(run_stats(run.heads, view.n_layers, view.n_heads, run_name=run.name))
        color_by = "run:p_repeat" if "run:p_repeat" in stats else color_by
    where = f"window {view.window}" + (f" of windows 0–{view.n_windows - 1}" if view.n_windows > 1 else "")
    if view.binned:  # a long window: the binned overview (each cell the mean of a block of token pairs)
        per_token = dict(labels=view.labels, unit="bins", sentences=None, special=None, tokens=view.tokens,
                         token_bins=view.bins,
                         subtitle=f"{where} · {view.n} tokens on {view.attention.shape[-1]} position bins (each cell "
                                  "the mean over a block of token pairs; drag a rectangle on a map to zoom in, exact "
                                  "values of a region in `headsim serve`) · layers and heads from 1, tokens from 0")
    else:
        per_token = dict(labels=view.tokens, unit="tokens", sentences=view.sentences, special=view.special,
                         subtitle=f"{where} · {view.n} tokens · layers and heads from 1, tokens from 0")
    labels = per_token.pop("labels")
    payload = explorer_payload(
        labels, view.attention, view.normalized, title=f"{name}: {view.n_layers} layers × {view.n_heads} heads",
        stats=stats, layer=layer, head=head, threshold=threshold, color_by=color_by, **per_token)
    return explorer_fragment(payload, grid_png(view.normalized))
