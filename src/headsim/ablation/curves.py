"""Pruning curves: a task's score against the number of heads removed, in one criterion's order."""

from __future__ import annotations

import numpy as np


def curve_points(n_total: int, step: int, extra: tuple[int, ...] = ()) -> list[int]:
    """Numbers of removed heads to score: 0, step, 2·step, …, n_total, plus ``extra``."""
    return sorted(set(range(0, n_total + 1, max(1, step))) | {n_total} | {int(e) for e in extra if 0 <= e <= n_total})


def removable(points: np.ndarray, scores: np.ndarray, full: float, tolerance: float) -> int:
    """Heads removed before the score first falls below ``full − tolerance`` (on the curve's points).

    The largest ``n`` such that every point ``n' ≤ n`` scores at least ``full − tolerance``.
    """
    order = np.argsort(points)
    best = 0
    for n, s in zip(np.asarray(points)[order], np.asarray(scores)[order]):
        if not s >= full - tolerance:  # NaN counts as a fall
            break
        best = int(n)
    return best
