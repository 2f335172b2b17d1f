"""Segmentation metrics on boundary vectors: Pk, WindowDiff (NLTK) and boundary F1.

A *boundary vector* for a text of ``n`` units has ``n - 1`` entries, one per gap: ``1`` when a
segment ends after unit ``i``, else ``0``. Pk and WindowDiff slide a window of ``k`` gaps, i.e.
they compare units ``i`` and ``i + k``; NLTK's implementation is used (``N - k + 1`` windows).

Default ``k``: half the mean reference segment length in units, ``n_units / (2 * n_segments)``,
rounded half up, at least 2 (Beeferman et al. 1999; Pevzner & Hearst 2002), then capped at the
number of gaps so that short texts still have one window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..errors import require
from .types import check_gaps


def to_boundary_vector(n_units: int, boundary_indices: Iterable[int]) -> list[int]:
    """The 0/1 vector of length ``n_units - 1`` with ones at the given gap indices."""
    require(n_units >= 1, f"n_units must be at least 1, got {n_units}", "count the units of the text")
    vector = [0] * (n_units - 1)
    for g in check_gaps(n_units, boundary_indices):
        vector[g] = 1
    return vector


def _vectors(ref: Sequence[int], hyp: Sequence[int]) -> tuple[list[int], list[int]]:
    ref_v, hyp_v = [int(x) for x in ref], [int(x) for x in hyp]
    require(
        len(ref_v) == len(hyp_v),
        f"reference has {len(ref_v)} gaps but hypothesis has {len(hyp_v)}",
        "build both with to_boundary_vector(n_units, ...) for the same units",
    )
    bad = sorted({x for x in ref_v + hyp_v} - {0, 1})
    require(not bad, f"boundary vectors must hold only 0 and 1, found {bad[:5]}", "use to_boundary_vector")
    return ref_v, hyp_v


def default_k(ref: Sequence[int]) -> int:
    """Half the mean reference segment length in units (rounded half up, at least 2)."""
    n_units, n_segments = len(ref) + 1, sum(ref) + 1
    return max(2, math.floor(n_units / (2 * n_segments) + 0.5))


def _nltk():  # imported on first use: importing nltk takes over a second
    from nltk.metrics import segmentation

    return segmentation


def _window(ref: list[int], k: int | None) -> int:
    k = default_k(ref) if k is None else int(k)
    require(k >= 1, f"window k must be at least 1, got {k}", "pass k >= 1 or leave it None")
    return min(k, len(ref))


def pk(ref: Sequence[int], hyp: Sequence[int], k: int | None = None) -> float:
    """Pk: the share of unit pairs ``k`` apart whose same-segment status differs (0 is perfect).

    A text of one unit (no gaps) scores 0.
    """
    ref_v, hyp_v = _vectors(ref, hyp)
    if not ref_v:
        return 0.0
    return float(_nltk().pk(ref_v, hyp_v, k=_window(ref_v, k), boundary=1))


def windowdiff(ref: Sequence[int], hyp: Sequence[int], k: int | None = None) -> float:
    """WindowDiff: the share of ``k``-gap windows whose boundary counts differ (0 is perfect)."""
    ref_v, hyp_v = _vectors(ref, hyp)
    if not ref_v:
        return 0.0
    return float(_nltk().windowdiff(ref_v, hyp_v, _window(ref_v, k), boundary=1))


def boundary_f1(ref: Sequence[int], hyp: Sequence[int], tolerance: int = 0) -> tuple[float, float, float]:
    """Precision, recall and F1 of hypothesis boundaries against reference boundaries.

    A hypothesis boundary matches an unmatched reference boundary at most ``tolerance`` gaps away
    (one-to-one; greedy left to right, which is optimal on a line). When there is nothing to find
    or nothing found, the empty ratio counts 1.0 only if both are empty, else 0.0.
    """
    ref_v, hyp_v = _vectors(ref, hyp)
    require(tolerance >= 0, f"tolerance must be >= 0, got {tolerance}", "pass 0 for exact matches")
    ref_b = [i for i, x in enumerate(ref_v) if x]
    hyp_b = [i for i, x in enumerate(hyp_v) if x]
    if not ref_b and not hyp_b:
        return 1.0, 1.0, 1.0
    matched, j = 0, 0
    for r in ref_b:
        while j < len(hyp_b) and hyp_b[j] < r - tolerance:
            j += 1
        if j < len(hyp_b) and hyp_b[j] <= r + tolerance:
            matched += 1
            j += 1
    precision = matched / len(hyp_b) if hyp_b else 0.0
    recall = matched / len(ref_b) if ref_b else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
