"""Gap scores and boundary choice from unit features (pure numpy, no model).

A document of ``n`` units has ``n - 1`` gaps; gap ``i`` lies after unit ``i``. A gap score is
higher where a topic boundary is more likely: the TextTiling *depth* of a similarity curve
(climb to the highest similarity on each side, sum the two drops).
"""

from __future__ import annotations

import numpy as np

from ..errors import require

__all__ = ["THRESHOLD_RULES", "depth_scores", "gap_similarity", "pick_boundaries", "prepare_units"]


def gap_similarity(vectors: np.ndarray, n_heads: int, k: int, head_weights: np.ndarray | None = None) -> np.ndarray:
    """Similarity across each of the ``n - 1`` gaps: per head, the cosine between the mean unit
    vectors of the ``k`` units before and the ``k`` after the gap (fewer at the text's ends),
    averaged over heads (optionally weighted). ``vectors`` is ``[n, n_heads * d]``."""
    n = len(vectors)
    if n < 2:
        return np.zeros(0)
    v = vectors.reshape(n, n_heads, -1).astype(np.float64)
    prefix = np.concatenate([np.zeros((1,) + v.shape[1:]), np.cumsum(v, axis=0)])
    g = np.arange(n - 1)
    lo, hi = np.maximum(g + 1 - k, 0), np.minimum(g + 1 + k, n)
    left = (prefix[g + 1] - prefix[lo]) / (g + 1 - lo)[:, None, None]
    right = (prefix[hi] - prefix[g + 1]) / (hi - g - 1)[:, None, None]
    num = (left * right).sum(-1)
    den = np.linalg.norm(left, axis=-1) * np.linalg.norm(right, axis=-1)
    cos = np.divide(num, den, out=np.zeros_like(num), where=den > 0)  # [n-1, heads]
    w = np.ones(n_heads) if head_weights is None else np.asarray(head_weights, dtype=np.float64)
    return cos @ (w / w.sum())


def depth_scores(sim: np.ndarray) -> np.ndarray:
    """TextTiling depth of each gap: climb to the highest similarity on each side, sum the drops."""
    s = np.asarray(sim, dtype=np.float64)
    n = len(s)
    if n == 0:
        return s
    # climb while the similarity keeps rising (Hearst 1997): the peak reached from gap i
    left = s.copy()
    for i in range(1, n):
        if s[i - 1] >= s[i]:
            left[i] = left[i - 1]
    right = s.copy()
    for i in range(n - 2, -1, -1):
        if s[i + 1] >= s[i]:
            right[i] = right[i + 1]
    return (left - s) + (right - s)


def _local_peaks(score: np.ndarray, radius: int) -> np.ndarray:
    """Gaps whose score is the largest within ``radius`` gaps on either side (first of ties)."""
    n = len(score)
    out = []
    for i in range(n):
        lo, hi = max(0, i - radius), min(n, i + radius + 1)
        window = score[lo:hi]
        if score[i] > 0 and score[i] >= window.max() and int(np.argmax(window)) + lo == i:
            out.append(i)
    return np.asarray(out, dtype=np.int64)


THRESHOLD_RULES = ("z", "relative", "elbow")


def pick_boundaries(score: np.ndarray, n_boundaries: int | None, *, threshold: float | None = None,
                    rule: str = "z", radius: int = 1) -> list[int]:
    """Gaps to cut at from a gap score (higher = stronger boundary).

    With ``n_boundaries``: the strongest local peaks (ties: earlier first), topped up with the
    strongest remaining gaps if there are too few peaks. Without, the peaks that stand out within
    the text: ``rule="elbow"`` (no threshold): the peaks sorted by score are cut before the largest
    drop between consecutive ones (the strong boundaries, however many; at least one if there is a
    peak); ``rule="relative"``:
    peaks of at least ``threshold`` times the text's highest score; ``rule="z"``: peaks whose
    standardised score ``(score - mean) / std`` exceeds ``threshold``. The first two do not make
    the count grow with the text's length.
    """
    score = np.asarray(score, dtype=np.float64)
    n_gaps = len(score)
    if n_gaps == 0:
        return []
    peaks = _local_peaks(score, radius)
    if n_boundaries is None:
        require(rule in THRESHOLD_RULES, f"unknown threshold rule {rule!r}", f"use one of {', '.join(THRESHOLD_RULES)}")
        if rule == "elbow":
            depth = np.sort(score[peaks])[::-1]
            if len(depth) < 2 or depth[0] <= 0:
                return sorted(int(i) for i in peaks)
            drops = (depth[:-1] - depth[1:]) / depth[0]
            n = int(np.argmax(drops)) + 1
            return sorted(int(i) for i in peaks[np.argsort(-score[peaks], kind="stable")][:n])
        require(threshold is not None, "no boundary count and no threshold", "pass n_boundaries or a threshold")
        if rule == "relative":
            top = score.max()
            return sorted(int(i) for i in peaks if top > 0 and score[i] >= threshold * top)
        sd = score.std()
        if sd <= 0:
            return []
        z = (score - score.mean()) / sd
        return sorted(int(i) for i in peaks if z[i] > threshold)
    n_boundaries = int(n_boundaries)
    require(0 <= n_boundaries <= n_gaps, f"cannot place {n_boundaries} boundaries between {n_gaps + 1} units",
            f"ask for at most {n_gaps + 1} segments")
    ranked = [int(i) for i in peaks[np.argsort(-score[peaks], kind="stable")]]
    chosen = ranked[:n_boundaries]
    if len(chosen) < n_boundaries:
        taken = set(chosen)
        for i in np.argsort(-score, kind="stable"):
            if len(chosen) >= n_boundaries:
                break
            if int(i) not in taken:
                chosen.append(int(i))
                taken.add(int(i))
    return sorted(chosen)



def prepare_units(vectors: np.ndarray, n_heads: int) -> np.ndarray:
    """Centre a document's unit vectors per head and scale each to unit length: ``[n, heads, d]``."""
    v = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), n_heads, -1)
    if len(v) > 1:
        v = v - v.mean(axis=0, keepdims=True)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def _zscore(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def block_size(k: float, n_units: int) -> int:
    """Units on each side of a gap: ``k`` itself when ``k >= 1``, else that fraction of the
    document's units (at least 2), so that blocks grow with long documents."""
    require(k > 0, f"block size k must be positive, got {k}", "use e.g. 3, or a fraction such as 0.05")
    return int(k) if k >= 1 else max(2, int(round(k * n_units)))


def combined_similarity(heads: np.ndarray | None, embeddings: np.ndarray | None, k: float,
                        embedding_weight: float) -> np.ndarray:
    """Similarity across each gap from head vectors and sentence embeddings, mixed per document.

    ``heads``: unit vectors ``[n, h, d]`` of the chosen heads; ``embeddings``: ``[n, D]``. Each is
    centred and normalised per document (:func:`prepare_units`), turned into a block similarity
    curve (:func:`gap_similarity`, ``k`` units a side) and standardised within the document; the
    result is ``(1 - w) * heads + w * embeddings`` with ``w = embedding_weight`` (a source that is
    missing, or has weight 0, is not computed). ``k`` below 1 is a fraction of the document
    (:func:`block_size`).
    """
    require(0.0 <= embedding_weight <= 1.0, f"embedding_weight {embedding_weight} is outside [0, 1]", "use 0..1")
    k = block_size(k, len(heads) if heads is not None else len(embeddings))
    parts = []
    if embedding_weight < 1.0:
        require(heads is not None, "head vectors are needed when embedding_weight < 1", "pass heads")
        v = prepare_units(np.asarray(heads).reshape(len(heads), -1), heads.shape[1] if heads.ndim == 3 else 1)
        parts.append((1.0 - embedding_weight, gap_similarity(v.reshape(len(v), -1), v.shape[1], k)))
    if embedding_weight > 0.0:
        require(embeddings is not None, "sentence embeddings are needed when embedding_weight > 0", "pass embeddings")
        e = prepare_units(embeddings, 1)
        parts.append((embedding_weight, gap_similarity(e.reshape(len(e), -1), 1, k)))
    n = len(heads) if heads is not None else len(embeddings)
    if n < 2:
        return np.zeros(0)
    return sum(w * _zscore(c) for w, c in parts)


def gap_scores(heads: np.ndarray | None, embeddings: np.ndarray | None, k: float, embedding_weight: float) -> np.ndarray:
    """Depth score of each gap (higher = stronger boundary) of :func:`combined_similarity`."""
    return depth_scores(combined_similarity(heads, embeddings, k, embedding_weight))


def content_scores(docs: list[np.ndarray], near: tuple[int, ...] = (1, 2)) -> np.ndarray:
    """How well each head tells nearby sentences of one document from sentences of another.

    ``docs``: per document the unit vectors of every head ``[n, heads, d]`` (at least two
    documents). Vectors are centred over all documents and scaled to unit length. Per head, the
    ROC AUC of the cosine of unit pairs ``near`` apart in one document (unit ``i`` with ``i + d``)
    against position-matched pairs across documents (unit ``i`` of one document with unit
    ``i + d`` of the next): both sets hold the same positions, so heads that encode position or
    sentence form score about 0.5 and heads that encode content score higher. No boundary is
    looked at, only which document a sentence comes from.
    """
    n_heads = docs[0].shape[1]
    flat = np.concatenate([np.asarray(v, dtype=np.float64).reshape(len(v), n_heads, -1) for v in docs])
    mean = flat.mean(axis=0, keepdims=True)
    unit = [(np.asarray(v, dtype=np.float64).reshape(len(v), n_heads, -1) - mean) for v in docs]
    unit = [v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9) for v in unit]
    pos: list[np.ndarray] = []
    neg: list[np.ndarray] = []
    for a, v in enumerate(unit):
        w = unit[(a + 1) % len(unit)]
        if a == (a + 1) % len(unit):
            continue
        for d in near:
            m = min(len(v) - d, len(w) - d)
            if m <= 0:
                continue
            pos.append((v[:m] * v[d:d + m]).sum(-1))  # [m, heads]
            neg.append((v[:m] * w[d:d + m]).sum(-1))
    if not pos:
        return np.full(n_heads, 0.5)
    p, q = np.concatenate(pos), np.concatenate(neg)
    return np.asarray([auc(p[:, h], q[:, h]) for h in range(n_heads)])


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC AUC of scores ``pos`` (positives) against ``neg`` (ties count as ordered by position)."""
    if len(pos) == 0 or len(neg) == 0:
        return 0.5
    values = np.concatenate([pos, neg])
    ranks = values.argsort(kind="stable").argsort() + 1.0
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))
