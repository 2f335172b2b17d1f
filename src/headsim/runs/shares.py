"""A corpus's packed windows cut into shares: ranges of whole batches that a worker windows by itself,
exactly as the single process cuts them (:func:`plan_shares`, :func:`share_batches`). The Ray engine
runs one share per task; a local ``--shard`` is one share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import require
from ..windows import Framing, Windows, pack_windows, tokenize

TOKENIZE_TEXTS = 32  # texts tokenised and sentence-split together inside a share


@dataclass(frozen=True)
class Share:
    """Windows ``[start, stop)`` of the packed corpus, and the texts they come from.

    ``texts`` are ``[first_text, last_text)``; the share's tokens begin ``skip`` tokens into the
    first text and number ``tokens``.
    """

    index: int
    start: int
    stop: int
    first_text: int
    last_text: int
    skip: int
    tokens: int

    @property
    def windows(self) -> int:
        return self.stop - self.start


def plan_shares(counts: np.ndarray, content: int, windows: int, share_windows: int, *, start: int = 0) -> list[Share]:
    """Cut packed windows ``[start, windows)`` of ``content`` text tokens each (:meth:`Framing.content`),
    of texts with ``counts`` tokens, into shares of ``share_windows`` (the last may be shorter)."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    require(0 <= start < windows <= -(-total // content), f"windows {start}..{windows} asked of {total} tokens",
            "ask for at most the windows the corpus gives")
    require(share_windows >= 1, f"share_windows {share_windows} must be at least 1", "pass a positive number of windows")
    shares = []
    for index, start in enumerate(range(start, windows, share_windows)):
        stop = min(start + share_windows, windows)
        a, b = start * content, min(stop * content, total)
        first = int(np.searchsorted(ends, a, side="right"))
        last = int(np.searchsorted(ends, b, side="left")) + 1
        shares.append(Share(index, start, stop, first, last, a - int(ends[first] - counts[first]), b - a))
    return shares


def share_batches(texts: list[str], share: Share, tokenizer, seq_len: int, batch_size: int,
                  sentence_splitter: str, framing: Framing) -> Iterator[Windows]:
    """The share's windows in batches of ``batch_size``: exactly windows ``[start, stop)`` of
    :func:`headsim.windows.iter_windows` over the whole corpus with ``pack=True`` and ``framing``,
    ``texts`` being the corpus texts ``[first_text, last_text)``."""
    streams = (s for i in range(0, len(texts), TOKENIZE_TEXTS)  # a few texts at a time: the model starts early
               for s in tokenize(texts[i:i + TOKENIZE_TEXTS], tokenizer, first_index=share.first_text + i,
                                 sentence_splitter=sentence_splitter))
    made = 0
    for w in pack_windows(streams, seq_len, tokenizer, framing, batch_windows=batch_size, skip=share.skip,
                          take=share.tokens, token_strings=False):
        made += len(w)
        yield w
    require(made == share.windows, f"share {share.index} gave {made} windows, not {share.windows}",
            "the corpus changed while it was read; start the run again")
