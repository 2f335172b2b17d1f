"""Fig 4 (one input): attention maps of a head and of its layer, drawn by
:func:`headsim.plots.text.fig04_attention` for the report's example."""

from __future__ import annotations

from .base import ExampleFigure, layers_text


def example_caption(meta: dict) -> str:
    return (f"One input window ({meta.get('valid_tokens', '?')} tokens). Per layer ({layers_text(meta.get('figure_layers', []))}), "
            f"the attention map of head {meta.get('head')} (left) and the sum over the layer's heads (right); tick labels "
            "are 'position:token'. The paper: attention is spread out in the first layers, centred on the diagonal in "
            "the middle and focused on sentence separators in the last.")


EXAMPLE = ExampleFigure("fig04_attention", "Fig 4", "attention maps of one input", example_caption)
