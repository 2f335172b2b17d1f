"""Fig 5 (one input): separator blocks, drawn by :func:`headsim.plots.text.fig05_blocks` for the
report's example."""

from __future__ import annotations

from .base import ExampleFigure


def example_caption(meta: dict) -> str:
    layer, head = meta.get("layer"), meta.get("head")
    return (f"Layer {layer}, head {head}: attention map (top left), normalised similarity matrix with zeroed diagonal (top "
            f"right), the separator rows and columns found from layer {meta.get('separator_layer')}'s attention columns "
            "(bottom left) and the similarity averaged inside each block between separators (bottom right).")


EXAMPLE = ExampleFigure("fig05_blocks", "Fig 5", "separator blocks of one input", example_caption)
