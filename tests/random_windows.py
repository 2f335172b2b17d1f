"""Random windows for the statistics tests (padding, sentences, a small vocabulary so repeats and
anchor ties occur, uniform-attention heads so column ties occur) and their comparison with the naive
reference (tests/reference_stats.py)."""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from headsim.stats import BatchInfo, CorpusStats

CLS, SEP, PAD = 1, 2, 0
PUNCT = (3, 4)

COUNTS = ["windows", "tokens", "valid_pairs", "valid_pairs_same_sentence", "pair_count_valid", "n_pairs", "n_repeat",
          "n_same_sentence", "n_repeat_same_sentence", "distance_hist", "location_counts", "sim_value_hist",
          "anchor_fraction_hist", "anchor_windows", "anchor_kind_counts", "anchor_distinct_hist", "layer_windows",
          "attn_queries", "attn_queries_layer", "attn_windows", "attn_pair_count", "valid_pairs_distance", "distance_sum"]
SUMS = ["attn_sum", "attn_sum_top_zeroed", "attn_sum_top_diag_zeroed", "attn_focus", "sim_sum", "anchor_fraction_sum"]


def random_batch(rng: np.random.Generator, b: int, n_layers: int, n_heads: int, t: int, d: int = 8, vocab: int = 6,
                 attention: bool = True, min_len: int = 2) -> dict:
    """Windows with random padding, sentences and a small vocabulary (repeats and anchor ties)."""
    lengths = rng.integers(min_len, t + 1, size=b)
    lengths[0] = t  # one full window per batch
    ids = np.full((b, t), PAD, np.int64)
    sid = np.full((b, t), -1, np.int64)
    for w, n in enumerate(lengths):
        ids[w, 0], ids[w, n - 1] = CLS, SEP
        ids[w, 1:n - 1] = rng.integers(3, 3 + vocab, size=n - 2)
        cuts = np.sort(rng.integers(0, 3, size=n - 2)).cumsum() if rng.random() < 0.5 else np.zeros(n - 2, np.int64)
        sid[w, 1:n - 1] = np.unique(cuts, return_inverse=True)[1]
    valid = np.arange(t)[None, :] < lengths[:, None]
    # head outputs: a per-head token embedding plus noise, so equal tokens tend to be similar
    emb = rng.normal(size=(n_layers, n_heads, 3 + vocab, d))
    z = emb[:, :, ids] + rng.normal(scale=0.7, size=(n_layers, n_heads, b, t, d))  # [L, H, B, T, d]
    z[:, :, ~valid] = rng.normal(scale=50.0, size=(n_layers, n_heads, int((~valid).sum()), d))
    z = np.ascontiguousarray(z.transpose(2, 0, 1, 3, 4))  # [B, L, H, T, d]
    out = {"input_ids": ids, "valid": valid, "sentence_ids": sid, "is_cls": (ids == CLS) & valid,
           "is_sep": (ids == SEP) & valid, "is_punct": np.isin(ids, PUNCT) & valid,
           "head_outputs": z.astype(np.float32), "attention": None}
    if attention:
        logits = rng.normal(scale=2.0, size=(b, n_layers, n_heads, t, t))
        logits[:, :, 0] = 0.0  # some heads attend uniformly: exactly tied column sums
        logits = np.where(valid[:, None, None, None, :], logits, -np.inf)
        a = np.exp(logits - logits.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        pad_rows = ~valid[:, None, None, :, None] | ~valid[:, None, None, None, :]
        a = np.where(pad_rows, rng.random(a.shape), a)  # garbage at padding, must never count
        out["attention"] = a.astype(np.float32)
    return out


def to_info(batch: dict, device: str = "cpu") -> BatchInfo:
    t = lambda name: torch.as_tensor(batch[name], device=device)
    return BatchInfo(t("input_ids"), t("valid"), t("sentence_ids"), t("is_cls"), t("is_sep"), t("is_punct"))


def accumulate(batches: list[dict], n_layers: int, n_heads: int, t: int, **kwargs) -> CorpusStats:
    stats = CorpusStats(n_layers, n_heads, t, **kwargs)
    for batch in batches:
        info = to_info(batch)
        stats.begin_batch(info)
        for layer in range(n_layers):
            att = None if batch["attention"] is None else torch.as_tensor(batch["attention"][:, layer])
            stats.update_layer(layer, att, torch.as_tensor(batch["head_outputs"][:, layer]), info)
    return stats


def assert_matches_reference(ds: xr.Dataset, ref: dict) -> None:
    for name in COUNTS:
        got = ds[name].values
        assert got.dtype == np.int64, name
        np.testing.assert_array_equal(got, np.asarray(ref[name]), err_msg=name)
    for name in SUMS:
        np.testing.assert_allclose(ds[name].values, ref[name], rtol=1e-6, atol=1e-6, err_msg=name)
