"""Figures (matplotlib). Pure plotting: arrays in, ``Figure`` out; saving lives in :func:`save`."""

from .style import save

__all__ = ["save"]
