"""Topic segmentation: sentence units, gold data, metrics and baselines for the benchmark."""

from .baselines import (
    ChonkieSemanticBaseline,
    EmbeddingBreakpointBaseline,
    EvenSplitBaseline,
    RandomSplitBaseline,
    SegmentationMethod,
    TextTilingBaseline,
)
from .datasets import SegDoc, choi_lee_docs, dev_test_split, wikipedia_topic_docs
from .metrics import boundary_f1, pk, to_boundary_vector, windowdiff
from .types import Segment, Unit, boundaries_to_segments
from .units import sentence_units

__all__ = [
    "ChonkieSemanticBaseline",
    "EmbeddingBreakpointBaseline",
    "EvenSplitBaseline",
    "RandomSplitBaseline",
    "SegDoc",
    "Segment",
    "SegmentationMethod",
    "TextTilingBaseline",
    "Unit",
    "boundaries_to_segments",
    "boundary_f1",
    "choi_lee_docs",
    "dev_test_split",
    "pk",
    "sentence_units",
    "to_boundary_vector",
    "wikipedia_topic_docs",
    "windowdiff",
]
