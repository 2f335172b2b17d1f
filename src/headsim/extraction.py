"""Extraction: texts in, every head's attention map and output vectors out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import require
from .model.tap import capture, check_layers
from .model.load import LoadedModel, as_loaded
from .windows import Windows, check_seq_len, check_texts, make_windows


@dataclass
class Extraction:
    """What one or more texts look like inside every head.

    Arrays (numpy): ``attention`` [W, L, H, T, T] the probabilities as the model applies them (causal
    families: zero above the diagonal); ``head_outputs`` [W, L, H, T, d] each query head's output
    vectors (the input of the attention output projection).
    Layers and heads are 0-based here; figures and tables show them 1-based.
    """

    windows: Windows
    attention: np.ndarray | None
    head_outputs: np.ndarray
    layers: list[int]
    model: LoadedModel
    texts: list[str]

    input_ids = property(lambda self: self.windows.input_ids)
    attention_mask = property(lambda self: self.windows.attention_mask)
    sentence_ids = property(lambda self: self.windows.sentence_ids)
    offsets = property(lambda self: self.windows.offsets)
    tokens = property(lambda self: self.windows.tokens)

    @property
    def n_windows(self) -> int:
        return len(self.windows)

    def layer_position(self, layer: int) -> int:
        """Position in the layer axis of model layer ``layer`` (0-based)."""
        require(layer in self.layers, f"layer {layer + 1} was not extracted",
                f"extract with layers including it (have {[x + 1 for x in self.layers]})")
        return self.layers.index(layer)


def extract(
    texts: str | Iterable[str],
    model: LoadedModel | str | None = None,
    seq_len: int = 128,
    batch_size: int = 8,
    *,
    layers: Sequence[int] | None = None,
    attention: bool = True,
    pack: bool = False,
    device: str | None = None,
    dtype: str | None = None,
) -> Extraction:
    """Run texts through the model (any supported family) and capture every head.

    Args:
        texts: one text or several; each is cut into windows of ``seq_len`` tokens.
        model: a :class:`~headsim.model.load.LoadedModel` or a name for :func:`~headsim.load_model`.
        seq_len: tokens per window including [CLS] and [SEP] (the paper: 128).
        batch_size: windows per forward pass.
        layers: 0-based layers to keep (default all).
        attention: also compute attention probabilities (memory W·L·H·T² floats).
        pack: pack texts into running windows instead of starting a window per text.
    """
    loaded = as_loaded(model, device=device, dtype=dtype)
    items = check_texts(texts)
    seq_len = check_seq_len(seq_len, loaded.max_seq_len, loaded.extrapolates)
    require(int(batch_size) >= 1, f"batch_size {batch_size} must be at least 1", "pass a positive batch size")
    chosen = check_layers(layers, loaded.n_layers)
    windows = make_windows(items, loaded.tokenizer, seq_len, pack=pack, framing=loaded.framing)
    attn_parts, out_parts = [], []
    for start in range(0, len(windows), batch_size):
        ids = windows.input_ids[start: start + batch_size]
        mask = windows.attention_mask[start: start + batch_size]
        got = capture(loaded, ids, mask, layers=chosen, attention=attention)
        out_parts.append(got["head_outputs"].float().cpu().numpy())
        if attention:
            attn_parts.append(got["attention"].cpu().numpy())
    return Extraction(
        windows=windows,
        attention=np.concatenate(attn_parts) if attention else None,
        head_outputs=np.concatenate(out_parts),
        layers=chosen,
        model=loaded,
        texts=items,
    )
