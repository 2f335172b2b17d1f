"""Naive reference for headsim.stats, written from the definitions in docs/statistics.md.

Plain loops over windows, layers, heads and pairs i < j; no code from headsim.stats. The only
headsim function used is headsim.context_similarity.similarity (the normalised similarity matrices and
their high-similarity masks), called on the same batch tensors the accumulator sees so that the
float32 values, and therefore every threshold decision, are bit for bit the same.

Each batch is a dict of numpy arrays: ``input_ids``, ``valid``, ``sentence_ids``, ``is_cls``,
``is_sep``, ``is_punct`` ``[B, T]``; ``head_outputs`` ``[B, L, H, T, d]``; ``attention``
``[B, L, H, T, T]`` or None. The result maps Dataset variable names to numpy arrays (layers and
heads 0-based as array axes).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

from headsim.context_similarity import similarity

TARGETS = ("cls", "sep", "punct", "prev", "next")
KINDS = ("cls", "sep", "punct", "other")


def sim_bin(value: float, bins: int, lo: float, hi: float) -> int:
    """Bin of a normalised value: clamp(floor(v·s + o), 0, bins−1) in float32, s = bins/(hi−lo), o = −lo·s."""
    s = np.float32(bins / (hi - lo))
    o = np.float32(-lo * bins / (hi - lo))
    x = np.float32(np.float32(value) * s)
    x = np.float32(x + o)
    if math.isnan(float(x)):
        return 0
    return int(min(max(math.floor(float(x)), 0), bins - 1))


def token_kind(info: dict, w: int, token_id: int) -> int:
    """Kind of a token id in window w, read at its first position: cls > sep > punct > other."""
    first = next(p for p in range(len(info["input_ids"][w])) if info["valid"][w, p] and info["input_ids"][w, p] == token_id)
    if info["is_cls"][w, first]:
        return 0
    if info["is_sep"][w, first]:
        return 1
    if info["is_punct"][w, first]:
        return 2
    return 3


def reference_stats(batches: list[dict], n_layers: int, n_heads: int, seq_len: int, *, threshold: float = 0.3,
                    top_k_columns: int = 3, sim_bins: int = 120, sim_range=(-0.2, 1.0),
                    fraction_bins: int = 20) -> dict[str, np.ndarray]:
    L, H, T = n_layers, n_heads, seq_len
    lo, hi = sim_range
    r = {
        "windows": 0, "tokens": 0, "valid_pairs": 0, "valid_pairs_same_sentence": 0,
        "valid_pairs_distance": np.zeros(T, np.int64), "distance_sum": np.zeros((L, H), np.int64),
        "pair_count_valid": np.zeros((T, T), np.int64),
        "attn_sum": np.zeros((L, H, T, T)), "attn_sum_top_zeroed": np.zeros((L, H, T, T)),
        "attn_sum_top_diag_zeroed": np.zeros((L, H, T, T)), "attn_focus": np.zeros((L, H, 5)),
        "attn_queries_layer": np.zeros(L, np.int64), "attn_windows": np.zeros(L, np.int64),
        "attn_pair_count": np.zeros((L, T, T), np.int64),
        "n_pairs": np.zeros((L, H), np.int64), "n_repeat": np.zeros((L, H), np.int64),
        "n_same_sentence": np.zeros((L, H), np.int64), "n_repeat_same_sentence": np.zeros((L, H), np.int64),
        "distance_hist": np.zeros((L, H, T), np.int64), "location_counts": np.zeros((L, H, T, T), np.int64),
        "sim_sum": np.zeros((L, H, T, T)), "sim_value_hist": np.zeros((L, H, sim_bins), np.int64),
        "anchor_fraction_hist": np.zeros((L, H, fraction_bins), np.int64), "anchor_fraction_sum": np.zeros((L, H)),
        "anchor_windows": np.zeros((L, H), np.int64), "anchor_kind_counts": np.zeros((L, H, 4), np.int64),
        "anchor_distinct_hist": np.zeros((L, H + 1), np.int64), "layer_windows": np.zeros(L, np.int64),
        "_anchor_ties": 0, "_column_ties": 0,
    }
    for batch in batches:
        ids, valid, sid = batch["input_ids"], batch["valid"].astype(bool), batch["sentence_ids"]
        B = ids.shape[0]
        for w in range(B):
            pos = [p for p in range(T) if valid[w, p]]
            r["windows"] += 1
            r["tokens"] += len(pos)
            for i in pos:
                for j in pos:
                    r["pair_count_valid"][i, j] += 1
                    if i < j:
                        r["valid_pairs"] += 1
                        r["valid_pairs_distance"][j - i] += 1
                        if sid[w, i] >= 0 and sid[w, i] == sid[w, j]:
                            r["valid_pairs_same_sentence"] += 1
        for l in range(L):
            sim = similarity(torch.as_tensor(batch["head_outputs"][:, l]), threshold, torch.as_tensor(valid))
            norm, mask = sim.normalized.numpy(), sim.mask.numpy()
            r["layer_windows"][l] += B
            for w in range(B):
                pos = [p for p in range(T) if valid[w, p]]
                anchors = set()
                for h in range(H):
                    pairs = []
                    for a, i in enumerate(pos):
                        for j in pos[a + 1:]:
                            v = norm[w, h, i, j]
                            r["sim_sum"][l, h, i, j] += float(v)
                            r["sim_sum"][l, h, j, i] += float(norm[w, h, j, i])
                            r["sim_value_hist"][l, h, sim_bin(v, sim_bins, lo, hi)] += 1
                            if mask[w, h, i, j]:
                                pairs.append((i, j))
                    for i, j in pairs:
                        same_id = ids[w, i] == ids[w, j]
                        same_sent = sid[w, i] >= 0 and sid[w, i] == sid[w, j]
                        r["n_pairs"][l, h] += 1
                        r["n_repeat"][l, h] += same_id
                        r["n_same_sentence"][l, h] += same_sent
                        r["n_repeat_same_sentence"][l, h] += same_id and same_sent
                        r["distance_hist"][l, h, j - i] += 1
                        r["distance_sum"][l, h] += j - i
                        r["location_counts"][l, h, i, j] += 1
                        r["location_counts"][l, h, j, i] += 1
                    if not pairs:
                        continue
                    # anchor: the token id contained in the most pairs, ties → smaller id
                    counts: dict[int, int] = {}
                    for i, j in pairs:
                        for tid in {int(ids[w, i]), int(ids[w, j])}:
                            counts[tid] = counts.get(tid, 0) + 1
                    best = max(counts.values())
                    tied = sorted(t for t, c in counts.items() if c == best)
                    r["_anchor_ties"] += len(tied) > 1
                    anchor = tied[0]
                    anchors.add(anchor)
                    frac = Fraction(best, len(pairs))
                    r["anchor_fraction_hist"][l, h, min(math.floor(frac * fraction_bins), fraction_bins - 1)] += 1
                    r["anchor_fraction_sum"][l, h] += float(frac)
                    r["anchor_windows"][l, h] += 1
                    r["anchor_kind_counts"][l, h, token_kind(batch, w, anchor)] += 1
                r["anchor_distinct_hist"][l, len(anchors)] += 1
            if batch.get("attention") is None:
                continue
            r["attn_windows"][l] += B
            for w in range(B):
                pos = [p for p in range(T) if valid[w, p]]
                r["attn_queries_layer"][l] += len(pos)
                for q in pos:
                    for k in pos:
                        r["attn_pair_count"][l, q, k] += 1
                for h in range(H):
                    A = batch["attention"][w, l, h].astype(np.float64)
                    colsum = {k: sum(A[q, k] for q in pos) for k in pos}
                    ranked = sorted(pos, key=lambda k: (-colsum[k], k))
                    top = set(ranked[:top_k_columns])
                    if len(ranked) > top_k_columns > 0 and colsum[ranked[top_k_columns - 1]] == colsum[ranked[top_k_columns]]:
                        r["_column_ties"] += 1
                    for q in pos:
                        for k in pos:
                            r["attn_sum"][l, h, q, k] += A[q, k]
                            if k not in top:
                                r["attn_sum_top_zeroed"][l, h, q, k] += A[q, k]
                                if abs(q - k) > 1:
                                    r["attn_sum_top_diag_zeroed"][l, h, q, k] += A[q, k]
                            if batch["is_cls"][w, k]:
                                r["attn_focus"][l, h, 0] += A[q, k]
                            if batch["is_sep"][w, k]:
                                r["attn_focus"][l, h, 1] += A[q, k]
                            if batch["is_punct"][w, k]:
                                r["attn_focus"][l, h, 2] += A[q, k]
                            if k == q - 1:
                                r["attn_focus"][l, h, 3] += A[q, k]
                            if k == q + 1:
                                r["attn_focus"][l, h, 4] += A[q, k]
    r["attn_queries"] = int(r["attn_queries_layer"].max())
    return r


#: the dims of each position-pair variable that hold positions (query, key)
POSITION_AXES = {"pair_count_valid": (0, 1), "attn_pair_count": (1, 2), "attn_sum": (2, 3),
                 "attn_sum_top_zeroed": (2, 3), "attn_sum_top_diag_zeroed": (2, 3), "location_counts": (2, 3),
                 "sim_sum": (2, 3)}
#: the dim of each distance variable that holds distances j − i
DISTANCE_AXES = {"distance_hist": 2, "valid_pairs_distance": 0}


def log_distance_edges(seq_len: int, n_bins: int) -> list[int]:
    """The distance bins docs/statistics.md defines, by a plain search: one bin per distance 0..m−1,
    then ``n_bins − m`` bins with edges ``round(m · q^i)``, ``q = (seq_len/m)^(1/(n_bins − m))``, ``m``
    the least with ``m · (q − 1) ≥ 1``."""
    for m in range(1, n_bins):
        q = (seq_len / m) ** (1.0 / (n_bins - m))
        if m * (q - 1) >= 1 or m == n_bins - 1:
            break
    return list(range(m)) + [round(m * q ** i) for i in range(n_bins - m)] + [seq_len]


def binned_reference(ref: dict, seq_len: int, positions: int) -> dict:
    """The reference's exact values summed into bins, by plain loops: position ``p`` in bin
    ``floor(p · positions / seq_len)``; distance ``d`` in the bin ``k`` of :func:`log_distance_edges`
    with ``e_k ≤ d < e_{k+1}``: what docs/statistics.md says a binned variable holds."""
    out = dict(ref)
    for name, axes in POSITION_AXES.items():
        out[name] = _binned(np.asarray(ref[name]), axes, positions, lambda p: p * positions // seq_len)
    edges = log_distance_edges(seq_len, positions)
    in_bin = lambda d: next(k for k in range(positions) if edges[k] <= d < edges[k + 1])  # noqa: E731
    for name, axis in DISTANCE_AXES.items():
        out[name] = _binned(np.asarray(ref[name]), (axis,), positions, in_bin)
    return out


def _binned(exact: np.ndarray, axes: tuple[int, ...], n: int, bin_of) -> np.ndarray:
    shape = list(exact.shape)
    for axis in axes:
        shape[axis] = n
    binned = np.zeros(shape, dtype=exact.dtype)
    for index in np.ndindex(*exact.shape):
        target = list(index)
        for axis in axes:
            target[axis] = bin_of(index[axis])
        binned[tuple(target)] += exact[index]
    return binned
