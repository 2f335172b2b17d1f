"""Corpus statistics of every head (paper Figs 2, 3, 6, 7, 8, 10, 11, 12, 13).

:class:`CorpusStats` accumulates exact counts and float64 sums batch by batch, merges, checkpoints
and labels them as an :class:`xarray.Dataset`; :func:`heads_table` and :func:`layers_table`
summarise that Dataset. :mod:`.schema` declares every variable (``docs/statistics.md``'s table is
generated from it); :mod:`.backends` computes each step (eager, compiled or Triton, chosen once).
"""

from __future__ import annotations

from .accumulators import CorpusStats
from .backends import choose_backend
from .schema import SCHEMA, VARIABLES
from .attention import TARGETS
from ..tokens import is_punctuation_token, punctuation_ids
from .batch import BatchInfo, batch_info
from .pairs import ANCHOR_KINDS, SimBins
from .tables import HEADS_COLUMNS, LAYERS_COLUMNS, heads_table, layers_table

__all__ = [
    "ANCHOR_KINDS",
    "HEADS_COLUMNS",
    "LAYERS_COLUMNS",
    "SCHEMA",
    "TARGETS",
    "VARIABLES",
    "BatchInfo",
    "CorpusStats",
    "SimBins",
    "batch_info",
    "choose_backend",
    "heads_table",
    "is_punctuation_token",
    "layers_table",
    "punctuation_ids",
]
