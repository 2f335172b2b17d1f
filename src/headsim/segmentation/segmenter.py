"""Topic and sentence segmentation: :func:`segment` and the :class:`Segmenter` estimator.

The paper (Halevi et al., §2 and Fig 5) observes that attention forms *columns* on separator
tokens and that the blocks those columns delineate on a head's context similarity matrix
``S = Z·Zᵀ`` group tokens that belong together. This module turns that into a segmenter:

* ``level="sentence"``: a token ends a sentence when the attention its column receives in one
  layer exceeds a threshold (:mod:`headsim.segmentation.columns`); the layer, the threshold and
  the candidate tokens are fitted (:mod:`headsim.segmentation.selection`). When the model shows
  no separator columns the fallback is pySBD.
* ``level="topic"``: adjacent sentence units are grouped by the block-averaged context
  similarity of a few heads. The block average of ``S`` over the tokens of units ``a`` and ``b``
  is exactly ``m_a·m_b``, the dot product of the units' mean head-output vectors, so a unit is
  represented by its mean vector per chosen head; its similarity curve across the gaps is mixed
  with that of the model's sentence embeddings (:func:`headsim.segmentation.scoring.gap_scores`)
  and a gap is scored by its depth. Without a count, a gap is cut when its depth peak stands
  out within its own document (a z-score threshold).

The model runs only in :mod:`headsim.segmentation.features`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import require
from ..model.load import LoadedModel, as_loaded
from .columns import CANDIDATES, newline_cuts, sentence_cuts
from .config import default_config, for_model, load_config, write_config
from .datasets import SegDoc, joined_segdoc
from .features import PassSpec, encoder_pass, sentence_embeddings, unit_vectors
from .scoring import depth_scores, gap_scores, gap_similarity, pick_boundaries
from .types import Segment, Segmentation, boundaries_to_segments

__all__ = [
    "CANDIDATES",
    "LEVELS",
    "PassSpec",
    "Segmenter",
    "default_config",
    "depth_scores",
    "encoder_pass",
    "gap_similarity",
    "pick_boundaries",
    "segment",
    "sentence_cuts",
]

LEVELS = ("topic", "sentence")
UNIT_SOURCES = ("pysbd", "model")


# --------------------------------------------------------------------------------------------
# Topic scores of one text
# --------------------------------------------------------------------------------------------


def _heads(topic: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(h[0]), int(h[1])) for h in topic["heads"]]


def _spec(topic: dict[str, Any], batch: int, col_layers: tuple[int, ...] = ()) -> PassSpec:
    return PassSpec(heads=tuple(_heads(topic)), col_layers=col_layers, seq_len=int(topic.get("seq_len", 256)),
                    stride=int(topic.get("stride", 192)), batch=batch, norm="cosine")


def _scores(vectors: np.ndarray | None, unit_texts: Sequence[str], loaded: LoadedModel, topic: dict[str, Any]) -> np.ndarray:
    """Depth score per gap from the heads' unit vectors ``[n, h * d]`` and the units' embeddings."""
    w = float(topic["embedding_weight"])
    heads = None if vectors is None or w >= 1.0 else vectors.reshape(len(unit_texts), len(_heads(topic)), -1)
    emb = sentence_embeddings(loaded, [t.strip() for t in unit_texts]) if w > 0.0 else None
    return gap_scores(heads, emb, float(topic["k"]), w)


def topic_gap_scores(text: str, unit_spans: Sequence[tuple[int, int]], loaded: LoadedModel, config: dict[str, Any],
                     *, batch: int = 16) -> np.ndarray:
    """Depth score of each gap between the given units of ``text`` (higher = stronger boundary)."""
    topic = config["topic"]
    heads = _heads(topic)
    vectors = None
    if heads and float(topic["embedding_weight"]) < 1.0:
        starts = np.asarray([s for s, _ in unit_spans], dtype=np.int64)
        vectors = unit_vectors(encoder_pass(loaded, text, _spec(topic, batch), starts), len(unit_spans),
                               len(heads) * loaded.d_head)
    return _scores(vectors, [text[a:b] for a, b in unit_spans], loaded, topic)


def _choose(score: np.ndarray, n_segments: int | None, topic: dict[str, Any]) -> list[int]:
    if len(score) == 0:
        return []
    return pick_boundaries(score, None if n_segments is None else n_segments - 1, threshold=float(topic["threshold"]),
                           rule=topic.get("threshold_rule", "z"))


# --------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------


def _as_segdocs(documents: Any) -> list[SegDoc]:
    """Training documents: :class:`SegDoc` objects, or each a sequence of its segments' texts."""
    require(documents is not None and not isinstance(documents, str), "fit takes a list of documents",
            "pass SegDoc objects or, per document, the list of its segments' texts")
    docs = []
    for i, d in enumerate(documents):
        if isinstance(d, SegDoc):
            docs.append(d)
            continue
        require(not isinstance(d, str) and all(isinstance(s, str) for s in d),
                f"document {i} is neither a SegDoc nor a list of segment texts",
                "pass, per document, the list of its segments' texts in order")
        segments = [s.strip() for s in d if s.strip()]
        docs.append(joined_segdoc(f"doc/{i}", segments))
    require(any(d.gold for d in docs), "no training document has a boundary",
            "give documents with at least two segments")
    return docs


class Segmenter:
    """Topic segmentation by head-output similarity mixed with sentence-embedding similarity.

    scikit-learn style: the constructor only stores its arguments; :meth:`fit` learns from
    documents with known segments and sets the attributes ending in ``_``; :meth:`predict` cuts a
    list of sentences, :meth:`segment` a text. ``Segmenter.from_config()`` gives one fitted with
    the shipped configuration (what :func:`headsim.segment` uses).

    Args:
        model: a loaded model or a name for :func:`headsim.load_model` (default: embedded MiniLM);
            loaded on first use.
        device: ``"cpu"`` / ``"cuda"`` (default: CUDA when available).
        batch: windows per forward pass.
        head_criterion: ``"content"`` (rank heads without looking at boundaries) or ``"boundary"``.
        n_heads, k, embedding_weight, threshold: fix a parameter instead of fitting it (``None``).

    Fitted attributes: ``heads_`` (``(layer, head)``, 0-based), ``k_``, ``embedding_weight_``,
    ``threshold_``, ``config_`` (the JSON-ready configuration, also written by :meth:`save`).
    """

    def __init__(self, model: LoadedModel | str | None = None, *, device: str | None = None, batch: int = 16,
                 head_criterion: str = "content", n_heads: int | None = None, k: int | None = None,
                 embedding_weight: float | None = None, threshold: float | None = None) -> None:
        self.model = model
        self.device = device
        self.batch = batch
        self.head_criterion = head_criterion
        self.n_heads = n_heads
        self.k = k
        self.embedding_weight = embedding_weight
        self.threshold = threshold

    # -- fitting --------------------------------------------------------------------------

    def _loaded(self) -> LoadedModel:
        if getattr(self, "_loaded_model", None) is None:
            self._loaded_model = as_loaded(self.model, device=self.device)
        return self._loaded_model

    def _grids(self) -> dict[str, Any]:
        from . import selection

        require(self.head_criterion in selection.HEAD_CRITERIA, f"unknown head_criterion {self.head_criterion!r}",
                f"use one of {', '.join(selection.HEAD_CRITERIA)}")
        fixed = {"n_heads": self.n_heads, "k": self.k, "embedding_weight": self.embedding_weight, "threshold": self.threshold}
        return {"criterion": self.head_criterion, **{name: [v] for name, v in fixed.items() if v is not None}}

    def fit(self, documents: Sequence[SegDoc] | Sequence[Sequence[str]], y: None = None) -> Segmenter:
        """Choose heads, block size, embedding weight and threshold on ``documents``; returns self.

        ``documents``: :class:`~headsim.segmentation.datasets.SegDoc` objects, or per document the
        list of its segments' texts (each is cut into sentences; the gold boundaries fall between
        segments).
        """
        from .selection import fit_topic

        docs = _as_segdocs(documents)
        topic = fit_topic(docs, self._loaded(), **self._grids())
        return self._set_fitted({"model": self._loaded().name, "topic": topic, "sentence": default_config()["sentence"]})

    def _set_fitted(self, config: dict[str, Any]) -> Segmenter:
        topic = config["topic"]
        self.config_ = config
        self.heads_ = _heads(topic)
        self.k_ = float(topic["k"])
        self.embedding_weight_ = float(topic["embedding_weight"])
        self.threshold_ = float(topic["threshold"])
        return self

    @classmethod
    def from_config(cls, config: dict[str, Any] | str | Path | None = None, model: LoadedModel | str | None = None,
                    *, device: str | None = None, batch: int = 16) -> Segmenter:
        """A fitted segmenter from a configuration (dict or JSON path; default: the shipped one)."""
        return cls(model, device=device, batch=batch)._set_fitted(load_config(config))

    def save(self, path: str | Path) -> Path:
        """Write the fitted configuration as JSON (read it back with :meth:`from_config`)."""
        return write_config(self._fitted(), path)

    def _fitted(self) -> dict[str, Any]:
        require(hasattr(self, "config_"), "this Segmenter is not fitted",
                "call fit(documents) first, or use Segmenter.from_config()")
        return self.config_

    # -- prediction -----------------------------------------------------------------------

    def gap_scores(self, units: Sequence[str]) -> np.ndarray:
        """Depth score of each gap between ``units`` (sentences, joined by single spaces)."""
        topic = self._fitted()["topic"]
        units = [u.strip() for u in units]
        text = " ".join(units)
        starts = np.cumsum([0] + [len(u) + 1 for u in units[:-1]])
        spans = [(int(s), int(s) + len(u)) for s, u in zip(starts, units)]
        if len(units) < 2:
            return np.zeros(0)
        return topic_gap_scores(text, spans, self._loaded(), {"topic": topic}, batch=self.batch)

    def predict(self, units: Sequence[str], n_boundaries: int | None = None) -> list[int]:
        """Gap indices to cut ``units`` at (gap ``i`` follows unit ``i``); ``n_boundaries``: exactly so many."""
        require(not isinstance(units, str), "predict takes a list of sentences", "use segment(text) for a text")
        if n_boundaries is not None:
            require(0 <= n_boundaries <= max(len(units) - 1, 0),
                    f"cannot place {n_boundaries} boundaries between {len(units)} units",
                    "ask for between 0 and len(units) - 1")
        if len(units) < 2:
            return []
        return _choose(self.gap_scores(units), None if n_boundaries is None else n_boundaries + 1, self._fitted()["topic"])

    def segment(self, text: str, n_segments: int | None = None, *, units: str = "pysbd") -> list[Segment]:
        """Topic segments of ``text`` (see :func:`segment`)."""
        return segment(text, self._loaded(), "topic", n_segments, config=self._fitted(), units=units, batch=self.batch)


# --------------------------------------------------------------------------------------------
# One call
# --------------------------------------------------------------------------------------------


def _check_args(text: Any, level: str, units: str, n_segments: Any, batch: Any) -> None:
    require(isinstance(text, str), f"text is a {type(text).__name__}, not a string", "pass a str")
    require(level in LEVELS, f"unknown level {level!r}", f"use one of {', '.join(LEVELS)}")
    require(units in UNIT_SOURCES, f"unknown units {units!r}", "use 'pysbd' or 'model'")
    require(text.strip() != "", "the text is empty or whitespace only", "pass text with at least one word")
    if n_segments is not None:
        require(isinstance(n_segments, (int, np.integer)) and not isinstance(n_segments, bool) and n_segments >= 1,
                f"n_segments {n_segments!r} must be a positive integer", "pass 1 or more, or leave it out")
    require(isinstance(batch, (int, np.integer)) and batch >= 1, f"batch {batch!r} must be a positive integer", "pass e.g. 16")


def sentence_segments(text: str, loaded: LoadedModel, config: dict[str, Any], *, batch: int = 16) -> list[Segment]:
    """Sentences of ``text`` cut at separator columns (or by pySBD where the config says so)."""
    sent = config["sentence"]
    if sent.get("fallback"):
        from .units import sentence_units

        return sentence_units(text)
    spec = PassSpec(col_layers=(int(sent["layer"]),), seq_len=int(config["topic"].get("seq_len", 256)),
                    stride=int(config["topic"].get("stride", 192)), batch=batch)
    cuts: set[int] = set(newline_cuts(text))
    for block in encoder_pass(loaded, text, spec):
        cuts.update(sentence_cuts(text, block, 0, float(sent["threshold"]), sent["candidates"], loaded.tokenizer))
    edges = [0, *sorted(c for c in cuts if 0 < c < len(text)), len(text)]
    return [Segment(a, b, text[a:b]) for a, b in zip(edges, edges[1:]) if b > a]


def segment(text: str, model: LoadedModel | str | None = None, level: str = "topic", n_segments: int | None = None,
            *, config: dict[str, Any] | str | Path | None = None, units: str = "pysbd", device: str | None = None,
            batch: int = 16) -> Segmentation:
    """Cut ``text`` into segments whose concatenation is exactly ``text``.

    Args:
        text: any string; empty or whitespace-only text has no segments to find (``HeadsimError``).
        model: a loaded model or a name for :func:`headsim.load_model` (default: embedded MiniLM).
        level: ``"topic"`` (groups of sentences) or ``"sentence"``.
        n_segments: how many segments to return (at most one per unit); ``None``: the fitted
            threshold decides (topic level) or every separator cuts (sentence level).
        config: a fitted configuration (dict or JSON path); default: the shipped one.
        units: topic level only: ``"pysbd"`` sentences (default) or ``"model"``: the sentence level's
            own separator-column sentences, from the same encoder pass.
        device: ``"cpu"`` / ``"cuda"`` (default: CUDA when available).
        batch: windows per forward pass.

    Returns:
        a :class:`~headsim.segmentation.types.Segmentation`: a list of
        :class:`~headsim.segmentation.types.Segment` objects (``start``, ``end``, ``text``) that also
        keeps the units and boundary scores (its notebook display and ``to_html`` show them).
    """
    _check_args(text, level, units, n_segments, batch)
    loaded = as_loaded(model, device=device)
    cfg = for_model(load_config(config), loaded, shipped=config is None)
    if level == "sentence":
        sentences = sentence_segments(text, loaded, cfg, batch=batch)
        if n_segments is not None and n_segments < len(sentences):
            sentences = _merge_to(text, sentences, n_segments)
        return Segmentation(sentences, text, level="sentence")
    if units == "model" and not cfg["sentence"].get("fallback"):
        spans, score = _topic_on_model_units(text, loaded, cfg, batch=batch)
    else:
        if units == "model":
            unit_segs = sentence_segments(text, loaded, cfg, batch=batch)
        else:
            from .units import sentence_units

            unit_segs = sentence_units(text)
        spans = [(u.start, u.end) for u in unit_segs]
        score = topic_gap_scores(text, spans, loaded, cfg, batch=batch) if len(spans) > 1 else np.zeros(0)
    if len(spans) > 1 and n_segments is not None:
        require(n_segments <= len(spans), f"cannot cut {len(spans)} sentence units into {n_segments} segments",
                f"ask for at most {len(spans)} segments")
    return Segmentation(boundaries_to_segments(text, spans, _choose(score, n_segments, cfg["topic"])), text,
                        unit_spans=spans, scores=score, level="topic")


def _topic_on_model_units(text: str, loaded: LoadedModel, config: dict[str, Any], *, batch: int = 16
                          ) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Sentence units from separator columns and their topic gap scores, from one encoder pass.

    The pass captures the separator layer's column attention and the topic heads' outputs; tokens
    arrive in order, so each token's sentence is known when it arrives (the cuts before it are).
    """
    import bisect

    topic, sent = config["topic"], config["sentence"]
    heads = _heads(topic) if float(topic["embedding_weight"]) < 1.0 else []
    spec = _spec({**topic, "heads": heads}, batch, col_layers=(int(sent["layer"]),))
    cuts = list(newline_cuts(text))
    seen = set(cuts)
    n_feat = len(heads) * loaded.d_head
    sums: list[np.ndarray] = []
    counts: list[float] = []
    for block in encoder_pass(loaded, text, spec):
        for c in sentence_cuts(text, block, 0, float(sent["threshold"]), sent["candidates"], loaded.tokenizer):
            if c not in seen:
                seen.add(c)
                bisect.insort(cuts, c)
        if not heads:
            continue
        unit = np.searchsorted(np.asarray(cuts, dtype=np.int64), block.start, side="right")
        top = int(unit.max()) + 1
        while len(sums) < top:
            sums.append(np.zeros(n_feat, dtype=np.float32))
            counts.append(0.0)
        for u in np.unique(unit):
            sel = unit == u
            sums[u] += block.vec[sel].sum(axis=0)
            counts[u] += float(sel.sum())
    edges = [0, *(c for c in cuts if 0 < c < len(text)), len(text)]
    spans = list(zip(edges, edges[1:]))
    if len(spans) < 2:
        return spans, np.zeros(0)
    vectors = None
    if heads:
        while len(sums) < len(spans):
            sums.append(np.zeros(n_feat, dtype=np.float32))
            counts.append(0.0)
        vectors = np.stack(sums) / np.maximum(np.asarray(counts, dtype=np.float32), 1.0)[:, None]
    return spans, _scores(vectors, [text[a:b] for a, b in spans], loaded, topic)


def _merge_to(text: str, sentences: list[Segment], n_segments: int) -> list[Segment]:
    """Merge sentences into ``n_segments`` pieces of nearly equal sentence counts (no scores kept)."""
    from .baselines import even_gaps

    gaps = even_gaps(len(sentences), n_segments - 1)
    return boundaries_to_segments(text, [(s.start, s.end) for s in sentences], gaps)
