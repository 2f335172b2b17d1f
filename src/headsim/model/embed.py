"""Text embeddings through the tap: mean of the last hidden state over each text's valid tokens.

This is all-MiniLM-L6-v2's own pooling (sentence-transformers: mean pooling, then unit length), so
for the embedded model the vectors equal ``SentenceTransformer.encode(..., normalize_embeddings=True)``
up to float rounding; for other models it is the common mean-pooled embedding.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..errors import require
from .tap import hidden_states


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B, T, D]`` hidden states → ``[B, D]`` means over the rows where ``mask`` is 1."""
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)


def embed(loaded, texts: Sequence[str], *, batch_size: int = 32, max_tokens: int | None = None,
          normalize: bool = True, grad: bool = False) -> np.ndarray | torch.Tensor:
    """Embeddings ``[len(texts), hidden]`` (numpy float32; a tensor keeping the graph with ``grad``).

    Texts are tokenized with the model's own special tokens and truncated to ``max_tokens`` (default:
    the model's longest window).
    """
    require(len(texts) > 0, "no texts to embed", "pass at least one text")
    limit = int(max_tokens or loaded.max_seq_len)
    out = []
    for start in range(0, len(texts), batch_size):
        enc = loaded.tokenizer(list(texts[start: start + batch_size]), padding=True, truncation=True, max_length=limit,
                               return_tensors="pt", return_token_type_ids=False)
        hidden = hidden_states(loaded, enc["input_ids"], enc["attention_mask"], grad=grad)
        vec = mean_pool(hidden.float(), enc["attention_mask"].to(hidden.device))
        if normalize:
            vec = torch.nn.functional.normalize(vec, dim=-1)
        out.append(vec if grad else vec.cpu())
    vecs = torch.cat(out)
    return vecs if grad else vecs.numpy()
