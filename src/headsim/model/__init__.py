"""Models: which families headsim reads (:mod:`.arch`) and the one code path that runs them (:mod:`.tap`)."""

from .arch import ARCHS, Arch, families
from .resolve import arch_for
from .tap import LayerCapture, Tap, TapOutput, capture, hidden_states

__all__ = ["ARCHS", "Arch", "LayerCapture", "Tap", "TapOutput", "arch_for", "capture", "families", "hidden_states"]
