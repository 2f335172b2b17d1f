"""Token categories the statistics ask about: [CLS], [SEP] and punctuation separators."""

from __future__ import annotations

import string
import unicodedata

import numpy as np

_MARKERS = ("##", "Ġ", "▁")


def _is_punctuation(token: str) -> bool:
    body = token
    for m in _MARKERS:
        body = body.replace(m, "")
    return bool(body) and all(ch in string.punctuation or unicodedata.category(ch).startswith("P") for ch in body)


def special_ids(tokenizer) -> tuple[int, int]:
    """The ids of the window-opening and window-closing tokens ([CLS]/<s>, [SEP]/</s>)."""
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    return int(cls), int(sep)


def punctuation_lookup(tokenizer) -> np.ndarray:
    """Boolean array over the vocabulary: True where the token is punctuation only."""
    vocab = tokenizer.get_vocab()
    out = np.zeros(max(len(tokenizer), max(vocab.values()) + 1), dtype=bool)
    special = set(tokenizer.all_special_ids)
    for tok, i in vocab.items():
        out[i] = i not in special and _is_punctuation(tok)
    return out
