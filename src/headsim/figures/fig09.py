"""Fig 9 (one input): one head's high-similarity token pairs, drawn by
:func:`headsim.plots.text.fig09_pair_table` for the report's example (the page adds the pair table)."""

from __future__ import annotations

from .base import ExampleFigure


def example_caption(meta: dict) -> str:
    return (f"Layer {meta.get('layer')}, head {meta.get('head')}: the pairs whose normalised similarity exceeds "
            f"{meta.get('threshold')} (table, positions from 0) and the input's tokens, the paired ones coloured by "
            "token value, as in the paper's Fig 9.")


EXAMPLE = ExampleFigure("fig09_pairs", "Fig 9", "high-similarity token pairs of one head", example_caption)
