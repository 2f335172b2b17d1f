"""headsim: what attention heads do, measured by the vectors they output.

Implements the context similarity analysis of Halevi, Tzach, Gross, Rosner & Kanter,
"Self-attention vector output similarities reveal how machines pay attention" (Physica A 686,
2026) for the encoders and decoders of every family in :mod:`headsim.model.arch`. The names below
are the public API the README shows; everything else is importable from its module.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("headsim")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

# transformers imports tqdm.auto, which warns in a notebook kernel without ipywidgets; headsim shows no
# progress bar there (model loading turns them off), so the warning would only clutter the first output
warnings.filterwarnings("ignore", message="IProgress not found")

_LAZY = {
    "HeadsimError": "headsim.errors",
    "load_model": "headsim.model.load",
    "analyze": "headsim.runs.analyze",
    "load_run": "headsim.runs.rundir",
    "Run": "headsim.runs.run",
    "RunOptions": "headsim.runs.options",
    "RayOptions": "headsim.runs.options",
    "LoadedModel": "headsim.model.load",
    "extract": "headsim.extraction",
    "Extraction": "headsim.extraction",
    "similarity": "headsim.context_similarity",
    "Similarity": "headsim.context_similarity",
    "make_windows": "headsim.windows",
    "inspect_text": "headsim.inspection",
    "text_view": "headsim.views",
    "TextView": "headsim.views",
    "example_text": "headsim.inspection",
    "ablate": "headsim.ablation",
    "load_ablation": "headsim.ablation.study",
    "compare": "headsim.report.compare",
    "segment": "headsim.segmentation.segmenter",
    "Segmenter": "headsim.segmentation.segmenter",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'headsim' has no attribute {name!r}")
