"""The report's figures, one module each: its data selection, plot, caption and the claims it checks.

``figNN.py`` is the paper's Fig NN over a corpus run (``similarity_values`` is §3's threshold argument,
``focus`` §2's attention targets); each ends with ``FIGURE``, a :class:`PaperFigure`. The
statistics they read beyond the run's tables (chance levels, histogram edges) come from
:mod:`headsim.stats.tables`; the shared styling from :mod:`headsim.plots.style`. The report's list of
figures is :data:`headsim.report.contents.FIGURES`. The per-text figures of the report's example
(Figs 1b, 4, 5, 9, 12 of one input, drawn by :mod:`headsim.plots.text`) keep their captions here too,
as ``EXAMPLE`` (:class:`~headsim.figures.base.ExampleFigure`). Adding a figure: docs/adding.md.
"""

from .base import ExampleFigure, PaperFigure, Statistics
from .claim import Claim
from .fig02 import fig02_summed_attention
from .fig03 import fig03_zeroed_attention
from .fig06 import fig06_repeat_probability
from .fig07 import fig07_distance_histograms
from .fig08 import fig08_same_sentence
from .fig10 import fig10_locations
from .fig11 import fig11_anchors
from .fig12 import fig12_summed_similarity
from .fig13 import fig13_layer_distances
from .focus import attention_focus
from .similarity_values import sim_value_histogram

__all__ = ["Claim", "ExampleFigure", "PaperFigure", "Statistics", "attention_focus", "fig02_summed_attention", "fig03_zeroed_attention",
           "fig06_repeat_probability", "fig07_distance_histograms", "fig08_same_sentence", "fig10_locations",
           "fig11_anchors", "fig12_summed_similarity", "fig13_layer_distances", "sim_value_histogram"]
