"""One window of one text as every head of one model sees it, built once (``inspect`` and the explorer).

:func:`text_view` (a text) or :func:`window_view` (windows already cut) runs the model tap once on
the window's valid tokens and keeps what every per-text view reads: tokens, ids, character spans,
sentences, the framing positions, attention and head outputs, the normalised similarity
(:func:`headsim.context_similarity.normalized_similarity`, the corpus statistics' definition) and
each head's attention focus (:func:`headsim.stats.attention.attention_focus`, the function that
accumulates ``attn_focus`` over a corpus). What depends on a threshold or a layer (the
high-similarity mask, pair tables, separator columns, blocks) is a cheap method over those arrays,
so one view serves any threshold. Layers, heads and positions are 0-based here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..context_similarity import check_threshold, normalized_similarity
from ..display import HtmlDisplay
from ..errors import require
from ..model.tap import capture
from ..models import LoadedModel, as_loaded
from ..stats.attention import TARGETS, attention_focus, diagonal_sums
from ..stats.batch import batch_info, batch_tensors
from ..windows import Windows, check_seq_len, check_texts, make_windows
from .arrays import block_ids, column_scores, framing_positions, pair_table, separators_from_scores


@dataclass(frozen=True, eq=False)
class TextView(HtmlDisplay):
    """One window's valid tokens (``n``) and every head's matrices over them (``L`` layers, ``H`` heads).

    Attributes:
        attention: ``[L, H, n, n]`` float32 probabilities as the model applies them (causal
            families: zero above the diagonal).
        head_outputs: ``[L, H, n, d]`` float32 each query head's output vectors Z.
        normalized: ``[L, H, n, n]`` float32 Z·Zᵀ with the diagonal zeroed, divided by its max.
        focus: ``attn_<target>`` → ``[L, H]`` float64 attention mass on each of
            :data:`headsim.stats.TARGETS` per query token (the corpus's ``attn_focus`` of this window
            divided by its query rows, as ``heads.parquet``'s ``attn_cls`` … ``attn_next``).
        special: ``[n]`` bool, the tokens the model's framing added ([CLS]/[SEP], BOS, EOS).
        offsets: ``[n, 2]`` character spans in ``text`` (-1 for framing tokens); ``sentences``
            ``[n]`` sentence number within the window (-1 for framing tokens).
    """

    model: LoadedModel
    text: str
    seq_len: int
    window: int
    n_windows: int
    tokens: list[str]
    ids: np.ndarray
    offsets: np.ndarray
    sentences: np.ndarray
    special: np.ndarray
    attention: np.ndarray
    head_outputs: np.ndarray
    normalized: np.ndarray
    focus: dict[str, np.ndarray]

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def n_layers(self) -> int:
        return int(self.attention.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attention.shape[1])

    @property
    def causal(self) -> bool:
        """The model attends to earlier keys only (separator scores are then relative to chance)."""
        return bool(self.model.arch.causal)

    @property
    def valid(self) -> np.ndarray:
        return np.ones(self.n, dtype=bool)

    @property
    def nbytes(self) -> int:
        return int(self.attention.nbytes + self.head_outputs.nbytes + self.normalized.nbytes)

    def mask(self, threshold: float) -> np.ndarray:
        """``[L, H, n, n]`` bool: normalised similarity above ``threshold`` (compared in float32, as
        every statistic compares it)."""
        return self.normalized > np.float32(check_threshold(threshold))

    def column_scores(self, layer: int) -> np.ndarray:
        """``[n]`` normalised column attention of ``layer`` summed over its heads, framing tokens
        excluded (:func:`headsim.views.column_scores`)."""
        return column_scores(self.attention[layer], self.valid, exclude=self.special, causal=self.causal)

    def separators(self, layer: int, threshold: float) -> np.ndarray:
        """Positions whose column score in ``layer`` exceeds ``threshold`` (paper §2, Fig 5)."""
        return separators_from_scores(self.column_scores(layer), threshold)

    def blocks(self, separators: np.ndarray) -> np.ndarray:
        """``[n]`` block number of each token, a block ending at each of ``separators``."""
        return block_ids(separators, self.valid)

    def pairs(self, threshold: float, heads: list[tuple[int, int]] | None = None) -> pd.DataFrame:
        """Fig 9's table of high-similarity pairs ``i < j`` of ``heads`` ((layer, head) pairs; default
        every head, layer by layer), layers and heads written 1-based."""
        mask = self.mask(threshold)
        heads = [(li, hi) for li in range(self.n_layers) for hi in range(self.n_heads)] if heads is None else heads
        return pd.concat([pair_table(self.normalized[li, hi], mask[li, hi], self.tokens, layer=li, head=hi)
                          for li, hi in heads], ignore_index=True)

    def _html_body(self) -> tuple[str, str]:
        """The interactive head explorer of this window (grid, attention, S, mask, tokens, pairs)."""
        from .html import text_view_html

        return f"headsim: {self.n} tokens", text_view_html(self)

    def window_text(self) -> tuple[str, int]:
        """The part of the text this window covers, and the character position it starts at."""
        real = self.offsets[:, 0] >= 0
        if not real.any():
            return "", 0
        start, end = int(self.offsets[real, 0].min()), int(self.offsets[real, 1].max())
        return self.text[start:end], start


def check_window(window: int, n_windows: int) -> int:
    """0-based window index, with a clear error when the text has no such window."""
    require(isinstance(window, (int, np.integer)) and 0 <= window < n_windows, f"window {window} does not exist",
            f"this text has windows 0..{n_windows - 1}")
    return int(window)


def cut_text(text: str, loaded: LoadedModel, seq_len: int) -> Windows:
    """``text`` (validated) cut into the model's framed windows of ``seq_len`` (validated), as
    :func:`headsim.extraction.extract` cuts it."""
    check_texts(text)
    return make_windows(text, loaded.tokenizer, check_seq_len(seq_len, loaded.max_seq_len), framing=loaded.framing)


def window_focus(attention: np.ndarray, ids: np.ndarray, sentences: np.ndarray, loaded: LoadedModel) -> dict[str, np.ndarray]:
    """``attn_<target>`` → ``[L, H]``: the corpus statistic ``attn_focus`` of one window of valid tokens
    (``attention`` ``[L, H, n, n]``), per query token. The key targets are the corpus's
    (:func:`headsim.stats.batch_info` on the window's ids), the sums :func:`attention_focus`'s."""
    n = len(ids)
    bt = batch_tensors(batch_info(ids[None], np.ones((1, n), dtype=np.int64), sentences[None], loaded.tokenizer,
                                  framing=loaded.framing))
    a = torch.as_tensor(attention, dtype=torch.float32)
    sums = torch.stack([attention_focus(a[li][None].sum(dim=-2), diagonal_sums(a[li][None]), bt.key_targets)
                        for li in range(a.shape[0])])  # [L, H, targets]
    per_query = (sums / n).numpy()
    return {f"attn_{t}": per_query[..., k] for k, t in enumerate(TARGETS)}


def window_view(loaded: LoadedModel, windows: Windows, window: int, text: str = "") -> TextView:
    """Run the model once on window ``window`` of ``windows`` (its valid tokens only: the numbers equal
    those of :func:`headsim.extraction.extract` up to float rounding) and build its :class:`TextView`.
    ``text`` is the text the windows were cut from (for :meth:`TextView.window_text`)."""
    w = check_window(window, len(windows))
    n = int(windows.attention_mask[w].sum())
    ids = np.asarray(windows.input_ids[w, :n], dtype=np.int64)
    sentences = np.asarray(windows.sentence_ids[w, :n], dtype=np.int64)
    got = capture(loaded, ids[None], np.ones((1, n), dtype=np.int64))
    attention = got["attention"][0].float().cpu()  # [L, H, n, n]
    outputs = got["head_outputs"][0].float().cpu()  # [L, H, n, d]
    return TextView(
        model=loaded, text=text, seq_len=windows.seq_len, window=w, n_windows=len(windows),
        tokens=list(windows.tokens[w][:n]), ids=ids, offsets=windows.offsets[w, :n].copy(), sentences=sentences,
        special=framing_positions(loaded.framing, n), attention=attention.numpy(), head_outputs=outputs.numpy(),
        normalized=normalized_similarity(outputs).numpy(),
        focus=window_focus(attention.numpy(), ids, sentences, loaded),
    )


def text_view(text: str, model: LoadedModel | str | None = None, *, seq_len: int = 128, window: int = 0,
              device: str | None = None) -> TextView:
    """The :class:`TextView` of window ``window`` (0-based) of ``text`` cut into windows of ``seq_len``
    tokens (framing included) for ``model`` (a :class:`~headsim.models.LoadedModel` or a name)."""
    loaded = as_loaded(model, device=device)
    return window_view(loaded, cut_text(text, loaded, seq_len), window, text)
