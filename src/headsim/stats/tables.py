"""Per-head and per-layer summary tables from the statistics Dataset (:meth:`CorpusStats.to_dataset`).

Every ratio is NaN where its denominator is 0. Layers and heads are 1-based, as in the paper.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

HEADS_COLUMNS = [
    "layer", "head", "n_pairs", "p_repeat", "p_repeat_same_sentence", "p_same_sentence", "p_same_sentence_chance",
    "mean_distance", "median_distance", "anchor_fraction_mean", "attn_cls", "attn_sep", "attn_punct", "attn_prev",
    "attn_next",
    # extras
    "mean_pairs_per_window", "anchor_windows", "anchor_cls", "anchor_sep", "anchor_punct",
    "share_sim_below_0_1", "share_sim_0_1_to_0_6",
]
LAYERS_COLUMNS = [
    "layer", "n_pairs", "mean_distance", "median_distance", "p_same_sentence", "p_same_sentence_chance",
    "mean_distinct_anchors", "median_anchor_fraction", "share_sim_below_0_1", "share_sim_0_1_to_0_6",
    # extras
    "p_repeat", "mean_pairs_per_window",
]
LOW_CUT, HIGH_CUT = 0.1, 0.6  # §3: most normalised values lie below 0.1, few in [0.1, 0.6)


def ratio(num, den) -> np.ndarray:
    """``num / den`` elementwise as float64 (broadcast), NaN where ``den`` is 0.

    The one ratio of the package: a zero denominator (no pairs, no windows) gives NaN, never 0 or
    inf; any other denominator divides, negative ones included (counts are never negative, so a
    negative one would be a defect that must show, not hide as NaN). NaN inputs give NaN."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)


def distance_summary(ds: xr.Dataset, pooled: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Mean and median distance ``j − i`` of the high-similarity pairs, the ``pooled`` dims of
    ``distance_hist`` (``"layer"``, ``"head"``) summed first.

    The mean is exact (``distance_sum / n_pairs``; from the histogram for a Dataset written before
    ``distance_sum`` existed). The median is the smallest entry of the ``distance`` coordinate whose
    cumulative share reaches 0.5: on a binned run the first distance of the median's bin (exact for
    the short distances that have a bin each).
    """
    hist = ds["distance_hist"].sum(pooled).values.astype(np.float64)
    d = ds["distance"].values.astype(np.float64)
    total = hist.sum(axis=-1)
    if "distance_sum" in ds:
        mean = ratio(ds["distance_sum"].sum(pooled).values, total)
    else:
        mean = ratio((hist * d).sum(axis=-1), total)
    cum = np.cumsum(hist, axis=-1)
    reached = cum >= 0.5 * total[..., None]
    median = np.where(total > 0, d[reached.argmax(axis=-1)], np.nan)
    return mean, median


def histogram_share(hist: np.ndarray, edges: np.ndarray, low: float, high: float) -> np.ndarray:
    """Share of a histogram ``[..., bin]`` in ``[low, high)`` (values clamped into the end bins count there).

    Bins fully inside count whole; a bin the cut falls inside counts by the overlapping fraction
    of its width (with the default bins 0.1 and 0.6 are bin edges, so the share is exact).
    """
    hist = np.asarray(hist, dtype=np.float64)
    e0, e1 = np.asarray(edges[:-1], dtype=np.float64), np.asarray(edges[1:], dtype=np.float64)
    width = e1 - e0
    part = (np.minimum(e1, high) - np.maximum(e0, low)) / width
    part = np.clip(part, 0.0, 1.0)
    part = np.where(np.abs(part) < 1e-9, 0.0, np.where(np.abs(part - 1.0) < 1e-9, 1.0, part))
    return ratio((hist * part).sum(axis=-1), hist.sum(axis=-1))


def histogram_median(hist: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Median of a binned distribution ``[..., bin]``: linear interpolation inside the median bin.

    With ``N`` values and cumulative counts ``C``, the median bin ``k`` is the first with
    ``C_k ≥ N/2``; the median is ``lo_k + (N/2 − C_{k−1}) / n_k · width_k``.
    """
    hist = np.asarray(hist, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    total = hist.sum(axis=-1)
    cum = np.cumsum(hist, axis=-1)
    k = (cum >= 0.5 * total[..., None]).argmax(axis=-1)
    before = np.take_along_axis(cum, k[..., None], axis=-1)[..., 0] - np.take_along_axis(hist, k[..., None], axis=-1)[..., 0]
    count = np.take_along_axis(hist, k[..., None], axis=-1)[..., 0]
    lo, width = edges[k], edges[k + 1] - edges[k]
    inside = ratio(0.5 * total - before, count)
    return np.where(total > 0, lo + np.nan_to_num(inside) * width, np.nan)


def _queries(ds: xr.Dataset) -> np.ndarray:
    if "attn_queries_layer" in ds:
        return ds["attn_queries_layer"].values.astype(np.float64)
    return np.full(ds.sizes["layer"], float(ds["attn_queries"].values))


def heads_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per (layer, head), 1-based; columns :data:`HEADS_COLUMNS` (see ``docs/statistics.md``)."""
    L, H = ds.sizes["layer"], ds.sizes["head"]
    v = lambda name: ds[name].values
    n_pairs = v("n_pairs")
    mean_d, median_d = distance_summary(ds)
    focus = v("attn_focus") / np.where(_queries(ds) > 0, _queries(ds), np.nan)[:, None, None]
    target = {t: i for i, t in enumerate(ds["target"].values.tolist())}
    kinds = {t: i for i, t in enumerate(ds["anchor_kind"].values.tolist())}
    chance = same_sentence_chance(ds)
    edges = np.asarray(ds.attrs["sim_bin_edges"], dtype=np.float64)
    hist = v("sim_value_hist")
    cols = {
        "layer": np.repeat(ds["layer"].values, H),
        "head": np.tile(ds["head"].values, L),
        "n_pairs": n_pairs,
        "p_repeat": ratio(v("n_repeat"), n_pairs),
        "p_repeat_same_sentence": ratio(v("n_repeat_same_sentence"), v("n_same_sentence")),
        "p_same_sentence": ratio(v("n_same_sentence"), n_pairs),
        "p_same_sentence_chance": np.full((L, H), chance),
        "mean_distance": mean_d,
        "median_distance": median_d,
        "anchor_fraction_mean": ratio(v("anchor_fraction_sum"), v("anchor_windows")),
        "attn_cls": focus[..., target["cls"]],
        "attn_sep": focus[..., target["sep"]],
        "attn_punct": focus[..., target["punct"]],
        "attn_prev": focus[..., target["prev"]],
        "attn_next": focus[..., target["next"]],
        "mean_pairs_per_window": ratio(n_pairs, v("layer_windows")[:, None]),
        "anchor_windows": v("anchor_windows"),
        "anchor_cls": ratio(v("anchor_kind_counts")[..., kinds["cls"]], v("anchor_windows")),
        "anchor_sep": ratio(v("anchor_kind_counts")[..., kinds["sep"]], v("anchor_windows")),
        "anchor_punct": ratio(v("anchor_kind_counts")[..., kinds["punct"]], v("anchor_windows")),
        "share_sim_below_0_1": histogram_share(hist, edges, -np.inf, LOW_CUT),
        "share_sim_0_1_to_0_6": histogram_share(hist, edges, LOW_CUT, HIGH_CUT),
    }
    out = pd.DataFrame({k: np.asarray(c).reshape(-1) for k, c in cols.items()}, columns=HEADS_COLUMNS)
    for name in ("layer", "head", "n_pairs", "anchor_windows"):
        out[name] = out[name].astype(np.int64)
    return _with_stack(out, ds, H)


def _with_stack(out: pd.DataFrame, ds: xr.Dataset, per_layer: int) -> pd.DataFrame:
    """An encoder-decoder's tables say each layer's stack (the Dataset's ``stack`` coordinate on
    ``layer``: encoder self, decoder self, decoder cross) in a column after ``layer``; a hybrid
    stack's, each layer's own number in the model (``model_layer``, 1-based)."""
    if "stack" in ds.coords:
        out.insert(1, "stack", np.repeat(ds["stack"].values.astype(str), per_layer))
    if "model_layer" in ds.coords:
        out.insert(1, "model_layer", np.repeat(ds["model_layer"].values.astype(np.int64), per_layer))
    return out


def layers_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per layer, 1-based; columns :data:`LAYERS_COLUMNS` (see ``docs/statistics.md``)."""
    v = lambda name: ds[name].values
    n_pairs = v("n_pairs").sum(axis=1)
    mean_d, median_d = distance_summary(ds, ("head",))
    distinct = v("anchor_distinct_hist").astype(np.float64)
    n = np.arange(distinct.shape[-1], dtype=np.float64)
    edges = np.asarray(ds.attrs["sim_bin_edges"], dtype=np.float64)
    hist = v("sim_value_hist").sum(axis=1)
    cols = {
        "layer": ds["layer"].values,
        "n_pairs": n_pairs,
        "mean_distance": mean_d,
        "median_distance": median_d,
        "p_same_sentence": ratio(v("n_same_sentence").sum(axis=1), n_pairs),
        "p_same_sentence_chance": np.full(n_pairs.shape, same_sentence_chance(ds)),
        "mean_distinct_anchors": ratio((distinct * n).sum(axis=-1), distinct.sum(axis=-1)),
        "median_anchor_fraction": histogram_median(v("anchor_fraction_hist").sum(axis=1),
                                                   np.asarray(ds.attrs["fraction_bin_edges"], dtype=np.float64)),
        "share_sim_below_0_1": histogram_share(hist, edges, -np.inf, LOW_CUT),
        "share_sim_0_1_to_0_6": histogram_share(hist, edges, LOW_CUT, HIGH_CUT),
        "p_repeat": ratio(v("n_repeat").sum(axis=1), n_pairs),
        "mean_pairs_per_window": ratio(n_pairs, v("layer_windows")),
    }
    out = pd.DataFrame(cols, columns=LAYERS_COLUMNS)
    for name in ("layer", "n_pairs"):
        out[name] = out[name].astype(np.int64)
    return _with_stack(out, ds, 1)


# ---------------------------------------------------------------------------------------------
# Chance levels and histogram axes (what figures and claims read beside the tables)
# ---------------------------------------------------------------------------------------------


def same_sentence_chance(ds: xr.Dataset) -> float:
    """Share of valid pairs whose two tokens lie in one sentence (Fig 8's chance level; NaN without pairs)."""
    return float(ratio(ds["valid_pairs_same_sentence"].values, ds["valid_pairs"].values))


def chance_distances(ds: xr.Dataset) -> np.ndarray:
    """Distribution of ``j − i`` over all valid pairs ``i < j`` (what random pairs would give), per
    ``distance`` entry (bin, on a binned run): ``valid_pairs_distance`` normalised to sum to 1 (all
    zeros without pairs; all NaN for a binned Dataset written before ``valid_pairs_distance`` existed,
    whose bins cannot give it)."""
    if "valid_pairs_distance" in ds:
        out = ds["valid_pairs_distance"].values.astype(np.float64)
    elif int(ds.attrs.get("position_binned", 0)):
        return np.full(ds.sizes["distance"], np.nan)
    else:
        pcv = ds["pair_count_valid"].values.astype(np.float64)
        out = np.array([np.trace(pcv, offset=d) if d else 0.0 for d in range(ds.sizes["distance"])])
    s = out.sum()
    return out / s if s > 0 else out


def distance_centres(ds: xr.Dataset) -> np.ndarray:
    """The distance each ``distance`` entry stands for: itself, or on a binned run the middle of its
    bin of distances (``(first + last) / 2``)."""
    d = ds["distance"].values.astype(np.float64)
    if not int(ds.attrs.get("position_binned", 0)):
        return d
    last = np.append(d[1:], float(ds.attrs["seq_len"])) - 1
    return (d + last) / 2


def random_pair_distance(ds: xr.Dataset) -> float:
    """Mean ``j − i`` of all valid pairs ``i < j`` (what random pairs would give; on a binned run each
    bin counted at its middle); NaN without pairs."""
    chance = chance_distances(ds)
    return float((chance * distance_centres(ds)).sum()) if chance.sum() > 0 else math.nan


def sim_bin_edges(ds: xr.Dataset) -> np.ndarray:
    """Edges of the ``sim_bin`` histogram (attribute ``sim_bin_edges``; else rebuilt from the centres)."""
    edges = ds["sim_bin"].attrs.get("sim_bin_edges", ds.attrs.get("sim_bin_edges"))
    if edges is not None:
        return np.asarray(edges, dtype=np.float64)
    c = ds["sim_bin"].values.astype(np.float64)
    half = np.diff(c).mean() / 2 if len(c) > 1 else 0.5
    return np.concatenate([[c[0] - half], (c[:-1] + c[1:]) / 2, [c[-1] + half]])


def same_sentence_excess(heads: pd.DataFrame) -> pd.Series:
    """The heads-table column ``p_same_sentence_excess``: ``p_same_sentence − p_same_sentence_chance`` per
    row, how much more often a head's pairs share a sentence than random pairs of the same windows (Fig 8b;
    NaN where the head has no pairs). ``heads`` is :func:`heads_table`'s frame or a run's ``heads.parquet``."""
    return heads["p_same_sentence"] - heads["p_same_sentence_chance"]
