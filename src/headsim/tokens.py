"""Token categories the statistics ask about: the window's opening/closing tokens and punctuation."""

from __future__ import annotations

import unicodedata

import numpy as np


_PREFIXES = ("##", "\u0120", "\u2581")  # WordPiece continuation, GPT-2/RoBERTa space, SentencePiece space


def boundary_ids(tokenizer) -> tuple[int | None, int | None]:
    """Ids of the window-opening and window-closing tokens ([CLS]/<s>, [SEP]/</s>), ``None`` if absent."""
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    return (None if cls is None else int(cls)), (None if sep is None else int(sep))


def token_body(token: str) -> str:
    """A token string without its word-piece marker (``##``, ``Ġ`` or ``▁``)."""
    for prefix in _PREFIXES:
        if token.startswith(prefix):
            return token[len(prefix):]
    return token


def token_texts(tokenizer, ids: list[int]) -> list[str]:
    """Each token of ``ids`` as the text it stands for, for display: the tokenizer's own decoding of
    that token alone (``convert_tokens_to_string``: a byte-level ``Ġthe`` reads `` the``; WordPiece's
    ``##ing`` and special tokens stay as they are), or its raw string where alone it decodes to no
    whole character (a piece of a multi-byte character)."""
    raw = tokenizer.convert_ids_to_tokens(list(ids))
    out = []
    for token in raw:
        try:
            text = tokenizer.convert_tokens_to_string([token])
        except Exception:  # noqa: BLE001 - a tokenizer without a decoder for single tokens
            text = token
        out.append(token if not text or "\ufffd" in text else text)
    return out


def first_position_note(tokenizer, opening: int | None) -> str:
    """What position 0 of a window is, in words: its opening token (``[CLS] = 0``, ``<s> = 0``), or
    the first text token where the model's windows open with none."""
    if opening is None:
        return "the first text token = 0"
    return f"{tokenizer.convert_ids_to_tokens(int(opening))} = 0"


def is_punctuation_token(token: str) -> bool:
    """A token made only of Unicode punctuation (categories P*), word-piece markers stripped."""
    body = token_body(token)
    return body != "" and all(unicodedata.category(ch).startswith("P") for ch in body)


_PUNCT_CACHE: dict[int, tuple[object, np.ndarray]] = {}


def punctuation_ids(tokenizer) -> np.ndarray:
    """Sorted int64 ids of the tokenizer's punctuation tokens (see :func:`is_punctuation_token`)."""
    hit = _PUNCT_CACHE.get(id(tokenizer))
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids = sorted(i for tok, i in tokenizer.get_vocab().items() if i not in special and is_punctuation_token(tok))
    out = np.asarray(ids, dtype=np.int64)
    _PUNCT_CACHE[id(tokenizer)] = (tokenizer, out)
    return out


def punctuation_lookup(tokenizer) -> np.ndarray:
    """Boolean array over the vocabulary: True where the token is punctuation only."""
    ids = punctuation_ids(tokenizer)
    out = np.zeros(max(len(tokenizer), int(ids.max(initial=0)) + 1), dtype=bool)
    out[ids] = True
    return out
