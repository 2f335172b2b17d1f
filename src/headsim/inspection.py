"""`headsim inspect`: the per-text views of one window (Figs 4, 5, 9, 12 and similarity) in one call."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .context_similarity import check_threshold
from .errors import require
from .model.load import LoadedModel, as_loaded
from .io import writing
from .tokens import first_position_note
from .views import TextView, text_view
from .views.text_view import PAIR_LIMIT, VIEW_RESOLUTION
from .display import HtmlDisplay
from .views.html import text_view_html

EXAMPLES = ("gerstenslager", "airport_policing")


def example_text(name: str = "gerstenslager") -> str:
    """A built-in example paragraph (the inputs of the paper's Fig 4 and Fig 9)."""
    require(name in EXAMPLES, f"unknown example {name!r}", f"use one of {', '.join(EXAMPLES)}")
    return resources.files("headsim").joinpath(f"examples/{name}.txt").read_text(encoding="utf-8").strip()


def default_figure_layers(n_layers: int) -> list[int]:
    """0-based layers shown in Fig 4: first, middle, second to last, last (the paper: 1, 6, 10, 11 of 12)."""
    return sorted({0, (n_layers - 1) // 2, max(n_layers - 2, 0), n_layers - 1})


def check_index(value: int, n: int, what: str) -> int:
    """1-based ``value`` → 0-based, with a clear error when out of range."""
    require(isinstance(value, (int, np.integer)) and 1 <= value <= n, f"{what} {value} is out of range",
            f"this model has {what}s 1..{n} (numbered from 1)")
    return int(value) - 1


@dataclass
class Inspection(HtmlDisplay):
    """Everything `headsim inspect` shows for one window (a :class:`~headsim.views.TextView` and the
    chosen head, thresholds and layers); layer/head fields are 0-based."""

    view: TextView
    layer: int
    head: int
    threshold: float
    sep_layer: int
    sep_threshold: float
    figure_layers: list[int]
    #: list every pair of every head in :attr:`pairs` (default: each head's most similar
    #: :data:`~headsim.views.text_view.PAIR_LIMIT`, at every window length)
    all_pairs: bool = False

    model = property(lambda self: self.view.model)
    window = property(lambda self: self.view.window)
    valid_len = property(lambda self: self.view.n)
    tokens = property(lambda self: self.view.tokens)
    attention = property(lambda self: self.view.attention, doc="``[L, H, n, n]`` attention of the window's valid tokens.")
    normalized = property(lambda self: self.view.normalized, doc="``[L, H, n, n]`` normalised similarity.")

    @cached_property
    def mask(self) -> np.ndarray:
        """``[L, H, n, n]`` high-similarity elements at :attr:`threshold` (exact views only)."""
        return self.view.mask(self.threshold)

    #: tick labels drawn on each axis of a long window's binned figures
    OVERVIEW_TICKS = 24

    @property
    def overview_note(self) -> str:
        """What the figures of a long window show (empty for an exact view)."""
        v = self.view
        if not v.binned:
            return ""
        return (f"\n{v.n} tokens shown on {v.attention.shape[-1]} position bins (each cell the mean of its block; "
                "ticks: first–last token of a bin)")

    @cached_property
    def _head_total(self) -> int:
        return int(self.view.pairs(self.threshold, [(self.layer, self.head)], limit=1).attrs["total"])

    def head_pair_count(self) -> int:
        """Exact number of pairs above the threshold of the inspected head."""
        return self._head_total

    def similarity_figure(self):
        """The inspected head's similarity and high-similarity mask (over bins for a long window)."""
        from .plots.text import similarity_panels

        v, l, h = self.view, self.layer, self.head
        mask = v.mask_overview(self.threshold, l, h) if v.binned else self.mask[l, h]
        return similarity_panels(self.normalized[l, h], mask, self.labels, layer=l, head=h, threshold=self.threshold,
                                 model=self.model.name, n_pairs=self.head_pair_count() if v.binned else None,
                                 max_ticks=self.max_ticks, note=self.overview_note)

    @property
    def labels(self) -> list[str]:
        """Row/column labels of the figures' matrices: ``"i:token"``, or a long window's bins."""
        from .plots.style import token_labels

        return self.view.labels if self.view.binned else token_labels(self.tokens)

    @property
    def max_ticks(self) -> int | None:
        return self.OVERVIEW_TICKS if self.view.binned else None

    @cached_property
    def column_scores(self) -> np.ndarray:
        """``[n]`` normalised column attention of the separator layer."""
        return self.view.column_scores(self.sep_layer)

    @cached_property
    def separators(self) -> np.ndarray:
        return self.view.separators(self.sep_layer, self.sep_threshold)

    @cached_property
    def blocks(self) -> np.ndarray:
        return self.view.blocks(self.separators)

    @cached_property
    def pairs(self) -> pd.DataFrame:
        """Fig 9's pair table of every head, all layers: each head's most similar
        :data:`headsim.views.text_view.PAIR_LIMIT` (every pair with :attr:`all_pairs`), ``attrs["total"]``
        counting all."""
        return self.view.pairs(self.threshold, limit=None if self.all_pairs else PAIR_LIMIT)

    @cached_property
    def meta(self) -> dict:
        """The settings and findings written to ``inspect.json`` (layers and heads 1-based)."""
        v = self.view
        return {
            "model": v.model.describe(), "seq_len": v.seq_len, "window": v.window, "windows": v.n_windows,
            "valid_tokens": v.n, "layer": self.layer + 1, "head": self.head + 1, "threshold": self.threshold,
            "separator_layer": self.sep_layer + 1, "separator_threshold": self.sep_threshold,
            "separators": [int(s) for s in self.separators], "figure_layers": [x + 1 for x in self.figure_layers],
            "numbering": f"layers and heads from 1; token positions from 0 ({self.position_0})",
            "position_0": self.position_0,
            "pairs_total": int(self.pairs.attrs["total"]), "pairs_per_head_limit": self.pairs.attrs["limit"],
            "head_pairs_total": self.head_pair_count(),
            **({"view_bins": int(v.attention.shape[-1])} if v.binned else {}),
        }

    @property
    def position_0(self) -> str:
        """What token position 0 is (``[CLS] = 0`` for an encoder, ``<s> = 0`` … for a decoder)."""
        return first_position_note(self.model.tokenizer, self.model.framing.open)

    def _html_body(self) -> tuple[str, str]:
        body = text_view_html(self.view, layer=self.layer, head=self.head, threshold=self.threshold)
        return f"headsim: layer {self.layer + 1}, head {self.head + 1}", body

    def head_pairs(self, layer: int | None = None, head: int | None = None) -> pd.DataFrame:
        """Pair table of one head (default: the inspected one)."""
        layer = self.layer if layer is None else layer
        head = self.head if head is None else head
        sel = (self.pairs["layer"] == layer + 1) & (self.pairs["head"] == head + 1)
        return self.pairs[sel].reset_index(drop=True)

    def token_table(self) -> pd.DataFrame:
        """Index, token, character span and sentence of each valid token."""
        n, v = self.valid_len, self.view
        return pd.DataFrame({
            "index": np.arange(n), "token": self.tokens,
            "start": v.offsets[:, 0], "end": v.offsets[:, 1],
            "sentence": v.sentences, "column_score": self.column_scores,
            "separator": np.isin(np.arange(n), self.separators), "block": self.blocks,
        })

    #: files :meth:`write` makes, in order (the steps its ``progress`` counts)
    WRITE_STEPS = 8

    def write(self, out_dir: str | os.PathLike, progress=None) -> list[Path]:
        """Write figures (PNG + SVG), tables (CSV + Parquet) and ``inspect.json``; all or nothing.
        ``progress(done, total)``, where given, is called as each of :data:`WRITE_STEPS` is done."""
        done = iter(range(1, self.WRITE_STEPS + 1))

        def step() -> None:
            if progress is not None:
                progress(next(done), self.WRITE_STEPS)

        from .plots import save
        from .plots.text import fig04_attention, fig05_blocks, fig09_pair_table, fig12_summed_similarity

        out = Path(out_dir)
        require(not out.exists() or out.is_dir(), f"output path {str(out)!r} is a file, not a directory",
                "pass a directory for --out (it is created if missing)")
        model, v = self.model.name, self.view
        labels, ticks, note = self.labels, self.max_ticks, self.overview_note
        attention, l, h = self.attention, self.layer, self.head
        lines = v.separator_lines(self.separators)
        averaged = v.block_average(l, h, self.separators)
        with writing(out):  # a read-only or full disk: one line naming --out
            tmp = Path(tempfile.mkdtemp(prefix=".inspect-", dir=out.parent if out.parent.exists() else None))
            try:
                save(fig04_attention(attention, labels, self.figure_layers, h, model=model, max_ticks=ticks, note=note),
                     tmp, "fig04_attention")
                step()
                save(fig05_blocks(attention[l, h], self.normalized[l, h], lines, averaged, labels, layer=l, head=h,
                                  sep_layer=self.sep_layer, model=model, max_ticks=ticks, note=note), tmp, "fig05_blocks")
                step()
                save(self.similarity_figure(), tmp, "similarity")
                step()
                save(fig09_pair_table(self.head_pairs(), self.tokens, layer=l, head=h, threshold=self.threshold,
                                      model=model, total=self.head_pair_count()), tmp, "fig09_pairs")
                step()
                save(fig12_summed_similarity(self.normalized, labels, self.figure_layers,
                                             title="similarity summed over heads, one input" + (
                                                 f" ({v.n} tokens on {v.attention.shape[-1]} bins)" if v.binned else ""),
                                             model=model, max_ticks=ticks), tmp, "fig12_summed_similarity")
                step()
                for stem, table in (("fig09_pairs", self.pairs), ("tokens", self.token_table())):
                    table.to_csv(tmp / f"{stem}.csv", index=False)
                    table.to_parquet(tmp / f"{stem}.parquet", index=False)
                    step()
                (tmp / "inspect.json").write_text(json.dumps(self.meta, indent=2))
                step()
                out.mkdir(parents=True, exist_ok=True)
                written = []
                for f in sorted(tmp.iterdir()):
                    shutil.move(f, out / f.name)  # os.replace fails across file systems (tmp outside out's parent)
                    written.append(out / f.name)
                return written
            finally:
                shutil.rmtree(tmp, ignore_errors=True)


def inspect_text(
    text: str,
    model: LoadedModel | str | None = None,
    *,
    layer: int | None = None,
    head: int = 1,
    threshold: float = 0.3,
    sep_layer: int | None = None,
    sep_threshold: float = 0.5,
    figure_layers: list[int] | None = None,
    seq_len: int = 128,
    window: int = 0,
    device: str | None = None,
    resolution: int = VIEW_RESOLUTION,
    all_pairs: bool = False,
    progress=None,
) -> Inspection:
    """Analyse one window of ``text``.

    Args:
        layer, head: the head shown in Figs 5 and 9 (1-based; layer defaults to the last).
        threshold: high-similarity threshold on the normalised matrix.
        sep_layer: layer whose attention columns mark separators (1-based; default last).
        sep_threshold: normalised column-attention threshold for separators ([CLS]/[SEP] excluded).
        figure_layers: 1-based layers for Figs 4 and 12 (default: first, middle, second to last, last).
        window: which window of a long text (0-based).
        resolution: a window of more valid tokens is shown as a binned overview on this many position
            bins (:class:`~headsim.views.TextView`).
        all_pairs: the pair table lists every pair of every head (default: each head's most similar
            :data:`~headsim.views.text_view.PAIR_LIMIT`, the total counted exactly).
        progress: ``progress(done, total)`` as the model's layers are done (:func:`~headsim.views.text_view`).
    """
    loaded = as_loaded(model, device=device)
    n_layers, n_heads = loaded.n_layers, loaded.n_heads
    l = check_index(layer if layer is not None else n_layers, n_layers, "layer")
    h = check_index(head, n_heads, "head")
    sl = check_index(sep_layer if sep_layer is not None else n_layers, n_layers, "layer")
    threshold = check_threshold(threshold)
    sep_threshold = check_threshold(sep_threshold, "separator threshold")
    shown = default_figure_layers(n_layers) if figure_layers is None else [check_index(x, n_layers, "layer") for x in figure_layers]
    return Inspection(text_view(text, loaded, seq_len=seq_len, window=window, resolution=resolution, progress=progress), l, h, threshold, sl, sep_threshold, shown,
                      all_pairs)
