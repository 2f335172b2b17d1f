"""Fig 1b (one input): one head's similarity S and its high-similarity mask, drawn by
:func:`headsim.plots.text.similarity_panels` for the report's example."""

from __future__ import annotations

from .base import ExampleFigure


def example_caption(meta: dict) -> str:
    return (f"Layer {meta.get('layer')}, head {meta.get('head')}: S = Z·Zᵀ of the head's output vectors with the "
            f"diagonal zeroed and divided by its maximum (left), and the elements above the threshold "
            f"{meta.get('threshold')} (right).")


EXAMPLE = ExampleFigure("similarity", "Similarity", "one head's similarity and its high-similarity mask", example_caption)
