"""Sentence embeddings as the embedded all-MiniLM-L6-v2 defines them: mean pooling, L2-normalised.

The model directory's sentence-transformers files (``sentence_bert_config.json``: max_seq_length 256,
``1_Pooling``: mean over tokens, ``modules.json``: a Normalize module) fix the recipe: the last hidden
state averaged over the valid tokens ([CLS] and [SEP] included, padding excluded), divided by its
norm. A model without those files gets the same recipe with its own position limit. The model runs
through the tap (:func:`headsim.model.tap.hidden_states`), so head ablation and gates apply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import require

if TYPE_CHECKING:
    from .load import LoadedModel
from .tap import hidden_states


@dataclass(frozen=True)
class Tokenized:
    """Token ids of several texts, each truncated to ``max_length`` (special tokens included)."""

    ids: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return len(self.ids)


def max_length(loaded: LoadedModel) -> int:
    """``max_seq_length`` of the model's sentence-transformers config, else its position limit."""
    path = Path(loaded.source) / "sentence_bert_config.json"
    limit = loaded.max_seq_len
    if path.is_file():
        try:
            limit = min(limit, int(json.loads(path.read_text())["max_seq_length"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return limit


def tokenize(loaded: LoadedModel, texts: list[str], max_tokens: int | None = None) -> Tokenized:
    """Tokenise once (with the model's special tokens, truncated at ``max_tokens``, default
    :func:`max_length`)."""
    require(len(texts) > 0, "no texts to embed", "pass at least one text")
    limit = max_length(loaded) if max_tokens is None else min(int(max_tokens), loaded.max_seq_len)
    enc = loaded.tokenizer(list(texts), truncation=True, max_length=limit, add_special_tokens=True)
    return Tokenized(tuple(tuple(int(t) for t in ids) for ids in enc["input_ids"]))


def pad_batch(ids: list[tuple[int, ...]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids`` and ``attention_mask`` ``[B, max length]`` of token-id lists."""
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, x in enumerate(ids):
        input_ids[row, :len(x)] = torch.tensor(x, dtype=torch.long)
        mask[row, :len(x)] = 1
    return input_ids, mask


def mean_pool(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``last [B, T, D]`` over positions where ``mask [B, T]`` is 1, L2-normalised."""
    m = mask.to(last.dtype).unsqueeze(-1)
    pooled = (last * m).sum(1) / m.sum(1).clamp_min(1.0)
    return torch.nn.functional.normalize(pooled.float(), dim=-1)


def embed(loaded: LoadedModel, tokens: Tokenized, *, batch_size: int = 16, grad: bool = False) -> torch.Tensor:
    """Sentence embeddings ``[N, D]`` (float32, unit norm) in the order of ``tokens``.

    Texts are batched by length (less padding); ``grad=True`` keeps the graph (for gate gradients).
    """
    require(batch_size >= 1, f"batch size {batch_size} must be at least 1", "pass a positive batch size")
    order = np.argsort([len(x) for x in tokens.ids], kind="stable")
    pad = loaded.framing.pad
    parts = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        ids, mask = pad_batch([tokens.ids[i] for i in rows], pad)
        last = hidden_states(loaded, ids, mask, grad=grad)
        parts.append(mean_pool(last, mask.to(last.device)))
    out = torch.cat(parts)
    inverse = torch.as_tensor(np.argsort(order, kind="stable"), device=out.device)
    return out.index_select(0, inverse)


def embed_texts(loaded: LoadedModel, texts: list[str], *, batch_size: int = 16, max_tokens: int | None = None) -> np.ndarray:
    """:func:`embed` of ``texts`` (tokenised here) as a float32 numpy array ``[len(texts), hidden]``."""
    return embed(loaded, tokenize(loaded, texts, max_tokens), batch_size=batch_size).cpu().numpy()
