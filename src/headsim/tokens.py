"""Token categories the statistics ask about: the window's opening/closing tokens and punctuation."""

from __future__ import annotations

import numpy as np

from .errors import HeadsimError


def special_ids(tokenizer) -> tuple[int, int]:
    """Ids of the window-opening and window-closing tokens ([CLS]/<s>, [SEP]/</s>)."""
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if cls is None or sep is None:
        raise HeadsimError("the tokenizer has no [CLS]/[SEP] (or <s>/</s>) tokens",
                           "use an encoder tokenizer (BERT, RoBERTa) that defines them")
    return int(cls), int(sep)


def punctuation_lookup(tokenizer) -> np.ndarray:
    """Boolean array over the vocabulary: True where the token is punctuation only."""
    from .stats.batch import punctuation_ids

    ids = punctuation_ids(tokenizer)
    out = np.zeros(max(len(tokenizer), int(ids.max(initial=0)) + 1), dtype=bool)
    out[ids] = True
    return out
