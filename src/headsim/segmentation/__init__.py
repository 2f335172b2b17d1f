"""Topic segmentation: sentence units, encoder features, gap scores, the Segmenter, data and metrics.

Modules: :mod:`.units` (sentences), :mod:`.features` (the model runs: one encoder pass, sentence
embeddings), :mod:`.columns` (separator columns → sentences), :mod:`.scoring` (gap scores and
boundary choice, pure numpy), :mod:`.selection` (fitting), :mod:`.config` (JSON configurations),
:mod:`.segmenter` (``segment`` and ``Segmenter``), :mod:`.datasets`, :mod:`.metrics`,
:mod:`.baselines`.
"""

from .baselines import (
    ChonkieSemanticBaseline,
    EmbeddingBreakpointBaseline,
    EvenSplitBaseline,
    RandomSplitBaseline,
    SegmentationMethod,
    TextTilingBaseline,
)
from .datasets import SOURCES, SegDoc, Source, choi_lee_docs, dev_test_split, wikipedia_topic_docs
from .metrics import boundary_f1, boundary_similarity, bootstrap_ci, paired_comparison, pk, to_boundary_vector, windowdiff
from .types import Segment, Segmentation, Unit, boundaries_to_segments
from .units import sentence_units

__all__ = [
    "SOURCES",
    "ChonkieSemanticBaseline",
    "EmbeddingBreakpointBaseline",
    "EvenSplitBaseline",
    "RandomSplitBaseline",
    "SegDoc",
    "Segment",
    "Segmentation",
    "SegmentationMethod",
    "Source",
    "TextTilingBaseline",
    "Unit",
    "bootstrap_ci",
    "boundaries_to_segments",
    "boundary_f1",
    "boundary_similarity",
    "choi_lee_docs",
    "dev_test_split",
    "paired_comparison",
    "pk",
    "sentence_units",
    "to_boundary_vector",
    "wikipedia_topic_docs",
    "windowdiff",
]
