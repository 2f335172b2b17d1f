"""Segmentation metrics on boundary vectors: Pk, WindowDiff (NLTK), boundary similarity B
(segeval), boundary F1; bootstrap intervals over documents and paired per-document comparisons.

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


def boundary_similarity(ref: Sequence[int], hyp: Sequence[int], n_t: int = 2) -> float:
    """Boundary similarity B (Fournier 2013, segeval's implementation; 1 is perfect).

    Edits between the two boundary sets: a boundary in both is a match; a hypothesis boundary
    within ``n_t - 1`` gaps of an unmatched reference boundary is a near miss (a transposition,
    weighted by its distance: 0.5 for one gap with ``n_t = 2``), any other boundary of either set
    is an addition; B = 1 - (additions + weighted transpositions) / (additions + transpositions +
    matches). Two texts without boundaries
    score 1.0 (segeval raises on that case).
    """
    ref_v, hyp_v = _vectors(ref, hyp)
    if not any(ref_v) and not any(hyp_v):
        return 1.0
    import segeval

    return float(segeval.boundary_similarity(_masses(ref_v), _masses(hyp_v), n_t=n_t))


def _masses(vector: Sequence[int]) -> tuple[int, ...]:
    """Segment lengths in units of a boundary vector (segeval's representation)."""
    cuts = [i + 1 for i, x in enumerate(vector) if x]
    edges = [0, *cuts, len(vector) + 1]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampling documents)."""
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    require(x.size > 0, "bootstrap needs at least one value", "score at least one document")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def paired_comparison(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0) -> dict[str, float]:
    """Per-document comparison of two methods' scores on the same documents (lower is better).

    Returns the mean of ``a - b`` with its 95 % bootstrap interval, the counts of documents where
    ``a`` is lower (``wins``), equal (``ties``) or higher (``losses``), and the two-sided sign-test
    p-value over the untied documents.
    """
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    require(x.shape == y.shape and x.size > 0, "paired scores need the same documents, at least one",
            "score both methods on the same documents")
    d = x - y
    lo, hi = bootstrap_ci(d, n_boot=n_boot, seed=seed)
    wins, losses = int((d < -1e-12).sum()), int((d > 1e-12).sum())
    return {"mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi, "wins": wins,
            "ties": int(d.size - wins - losses), "losses": losses, "sign_p": _sign_test(wins, losses)}


def _sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial (p = 1/2) test of ``wins`` against ``losses``."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return float(min(1.0, 2 * tail))
