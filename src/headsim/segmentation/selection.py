"""Data-driven choice of the segmenter's layers, heads and thresholds (on development text only).

Topic level (:func:`fit_topic`):

1. One encoder pass over every development document (units joined by single spaces, windows of
   ``seq_len`` tokens every ``stride`` tokens) captures every head's output vectors. Each token
   vector is scaled to unit length; a unit is the mean of its tokens' vectors (so the dot product
   of two units is the block average of the cosine context similarity matrix over their tokens);
   per document the unit vectors are centred (the document mean is subtracted: it is what every
   sentence shares) and scaled to unit length.
2. Each head is scored by how well its unit similarity separates unit pairs within one gold
   segment from pairs across a boundary: the ROC AUC of cosine similarity, for pairs 1, 2, 3 and
   4 units apart (each distance apart, then averaged, so that distance does not confound it).
3. Heads are ranked by that score; the number of heads kept ``n`` and the block size ``k`` (units
   on each side of a gap) are the pair with the lowest mean Pk on the development documents when
   each is cut at its gold number of boundaries (ties: fewer heads, then smaller ``k``).
4. Without a count, boundaries are the local peaks of the depth score whose within-text z-score
   exceeds a threshold; the threshold (or the alternative of taking the development mean segment
   length) is the one with the lowest development Pk.

Sentence level (:func:`fit_sentence`): every layer's column attention score (summed over heads
and query rows, divided by the window's largest non-special column) is compared with pySBD's
sentence ends on development text, for three candidate sets (any token, the paper's rule;
punctuation tokens; sentence-final marks . ! ? … only)
and a grid of thresholds; the (layer, candidates, threshold) with the best boundary F1 wins. If
its F1 is below :data:`MIN_SENTENCE_F1` the model is said to show no separator columns and the
segmenter falls back to pySBD.

The result is a small JSON-ready dict (:data:`DEFAULT_CONFIG` is the one shipped, fitted on the
development splits of both benchmark datasets of the embedded corpus with the embedded
all-MiniLM-L6-v2); regenerate it with ``python -m headsim.segmentation.selection``
(prints the JSON; ``--write`` replaces :data:`DEFAULT_CONFIG` in this file).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import require
from ..models import LoadedModel, as_loaded
from .datasets import SegDoc
from .metrics import pk, to_boundary_vector

HEAD_DISTANCES = (1, 2, 3, 4)
N_HEADS_GRID = (1, 2, 3, 4, 6, 8)
K_GRID = (3, 5, 7, 10)
Z_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5)
SENTENCE_THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
MIN_SENTENCE_F1 = 0.8
SEQ_LEN, STRIDE = 256, 192


# --------------------------------------------------------------------------------------------
# Topic level
# --------------------------------------------------------------------------------------------


def prepare_units(vectors: np.ndarray, n_heads: int) -> np.ndarray:
    """Centre a document's unit vectors per head and scale each to unit length: ``[n, heads, d]``."""
    v = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), n_heads, -1)
    if len(v) > 1:
        v = v - v.mean(axis=0, keepdims=True)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def doc_unit_vectors(loaded: LoadedModel, units: Sequence[str], heads: Sequence[tuple[int, int]],
                     seq_len: int = SEQ_LEN, stride: int = STRIDE, batch: int = 16) -> np.ndarray:
    """Mean (cosine-normalised) output vector of each unit for ``heads``: ``[n, len(heads) * d]``.

    The units are joined by single spaces, as the benchmark gives them (stripped sentences).
    """
    from .segmenter import PassSpec, encoder_pass, unit_vectors

    text = " ".join(units)
    starts = np.cumsum([0] + [len(u) + 1 for u in units[:-1]])
    spec = PassSpec(heads=tuple(heads), seq_len=seq_len, stride=stride, batch=batch, norm="cosine")
    return unit_vectors(encoder_pass(loaded, text, spec, starts), len(units), len(heads) * loaded.d_head)


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    if len(pos) == 0 or len(neg) == 0:
        return 0.5
    values = np.concatenate([pos, neg])
    ranks = values.argsort(kind="stable").argsort() + 1.0
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def head_scores(prepared: Sequence[tuple[np.ndarray, Sequence[int]]]) -> np.ndarray:
    """Within- vs across-segment AUC of each head (mean over :data:`HEAD_DISTANCES`): ``[heads]``."""
    n_heads = prepared[0][0].shape[1]
    labels = []
    for v, gold in prepared:
        seg = np.zeros(len(v), dtype=np.int64)
        for g in gold:
            seg[g + 1:] += 1
        labels.append(seg)
    out = np.zeros(n_heads)
    for h in range(n_heads):
        aucs = []
        for dist in HEAD_DISTANCES:
            pos, neg = [], []
            for (v, _), seg in zip(prepared, labels):
                if len(v) <= dist:
                    continue
                s = (v[:-dist, h] * v[dist:, h]).sum(-1)
                same = seg[:-dist] == seg[dist:]
                pos.append(s[same])
                neg.append(s[~same])
            if pos:
                aucs.append(_auc(np.concatenate(pos), np.concatenate(neg)))
        out[h] = float(np.mean(aucs)) if aucs else 0.5
    return out


def topic_scores(prepared_doc: np.ndarray, k: int) -> np.ndarray:
    """Depth score of each gap from prepared unit vectors ``[n, heads, d]``."""
    from .segmenter import depth_scores, gap_similarity

    n, h = prepared_doc.shape[:2]
    return depth_scores(gap_similarity(prepared_doc.reshape(n, -1), h, k))


def _mean_pk(docs_gold: Sequence[tuple[int, Sequence[int]]], predictions: Sequence[Sequence[int]]) -> float:
    return float(np.mean([pk(to_boundary_vector(n, g), to_boundary_vector(n, p)) for (n, g), p in zip(docs_gold, predictions)]))


def fit_topic_from_vectors(vectors: Sequence[np.ndarray], golds: Sequence[Sequence[int]],
                           heads: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """The topic configuration chosen from every head's unit vectors of the development documents."""
    from .segmenter import pick_boundaries

    require(len(vectors) > 0, "fit needs at least one development document", "pass the dev split")
    n_all = len(heads)
    prepared = [(prepare_units(v, n_all), list(g)) for v, g in zip(vectors, golds)]
    scores = head_scores(prepared)
    order = [int(i) for i in np.argsort(-scores, kind="stable")]
    docs_gold = [(len(v), g) for v, g in prepared]
    best = None
    for n in N_HEADS_GRID:
        chosen = order[: min(n, n_all)]
        for k in K_GRID:
            depth = [topic_scores(v[:, chosen], k) for v, _ in prepared]
            loss = _mean_pk(docs_gold, [pick_boundaries(d, len(g)) for d, (_, g) in zip(depth, docs_gold)])
            if best is None or loss < best[0] - 1e-12:
                best = (loss, n, k, depth)
    loss, n, k, depth = best
    chosen = order[: min(n, n_all)]
    n_units = sum(len(v) for v, _ in prepared)
    mean_segment_units = n_units / sum(len(g) + 1 for _, g in prepared)
    rules: list[tuple[float, float | None]] = []
    for z in Z_GRID:
        rules.append((_mean_pk(docs_gold, [pick_boundaries(d, None, threshold=z) for d in depth]), z))
    rules.append((_mean_pk(docs_gold, [pick_boundaries(d, None, mean_segment_units=mean_segment_units) for d in depth]), None))
    threshold_pk, threshold = min(rules, key=lambda r: r[0])
    return {
        "heads": [list(map(int, heads[i])) for i in chosen],
        "k": int(k),
        "threshold": threshold,
        "mean_segment_units": float(mean_segment_units),
        "dev": {
            "documents": len(prepared),
            "oracle_k_pk": round(float(loss), 4),
            "threshold_pk": round(float(threshold_pk), 4),
            "head_auc": {f"L{heads[i][0] + 1}H{heads[i][1] + 1}": round(float(scores[i]), 4) for i in order[:12]},
        },
    }


def fit_topic(docs: Sequence[SegDoc], model: LoadedModel | str | None = None, *, seq_len: int = SEQ_LEN,
              stride: int = STRIDE, layers: Sequence[int] | None = None) -> dict[str, Any]:
    """Choose heads, block size and threshold on development documents (see the module doc)."""
    loaded = as_loaded(model)
    layers = list(range(loaded.n_layers)) if layers is None else list(layers)
    heads = [(l_, h) for l_ in layers for h in range(loaded.n_heads)]
    vectors = [doc_unit_vectors(loaded, d.unit_texts, heads, seq_len, stride) for d in docs]
    config = fit_topic_from_vectors(vectors, [d.gold for d in docs], heads)
    config.update(seq_len=int(seq_len), stride=int(stride))
    return config


# --------------------------------------------------------------------------------------------
# Sentence level
# --------------------------------------------------------------------------------------------


def gold_sentence_cuts(text: str) -> set[int]:
    """pySBD's sentence starts inside paragraphs (newline-forced starts excluded)."""
    from .units import sentence_units

    cuts = set()
    for u in sentence_units(text)[1:]:
        before = text[:u.start].rstrip(" \t")
        if before and not before.endswith("\n"):
            cuts.add(u.start)
    return cuts


def fit_sentence(texts: Sequence[str], model: LoadedModel | str | None = None, *, seq_len: int = SEQ_LEN,
                 stride: int = STRIDE) -> dict[str, Any]:
    """Choose the separator layer, candidate tokens and threshold against pySBD on ``texts``."""
    from .segmenter import CANDIDATES, PassSpec, encoder_pass, sentence_cuts

    loaded = as_loaded(model)
    layers = tuple(range(loaded.n_layers))
    spec = PassSpec(col_layers=layers, seq_len=seq_len, stride=stride)
    counts: dict[tuple[int, str, float], list[int]] = {}
    for text in texts:
        blocks = list(encoder_pass(loaded, text, spec))
        gold = gold_sentence_cuts(text)
        for li in range(len(layers)):
            for cand in CANDIDATES:
                for thr in SENTENCE_THRESHOLDS:
                    found = set()
                    for b in blocks:
                        found |= set(sentence_cuts(text, b, li, thr, cand, loaded.tokenizer))
                    c = counts.setdefault((li, cand, thr), [0, 0, 0])
                    c[0] += len(found & gold)
                    c[1] += len(found)
                    c[2] += len(gold)
    f1 = {key: (2 * h / (f + g) if f + g else 0.0) for key, (h, f, g) in counts.items()}
    (layer, cand, thr), best = max(f1.items(), key=lambda kv: (kv[1], -kv[0][0]))
    per_layer = {f"L{li + 1}": round(max(v for (l_, c, t), v in f1.items() if l_ == li and c == "any"), 4) for li in range(len(layers))}
    per_layer_p = {f"L{li + 1}": round(max(v for (l_, c, t), v in f1.items() if l_ == li and c == "punctuation"), 4) for li in range(len(layers))}
    per_layer_t = {f"L{li + 1}": round(max(v for (l_, c, t), v in f1.items() if l_ == li and c == "terminal"), 4) for li in range(len(layers))}
    return {
        "layer": int(layers[layer]),
        "candidates": cand,
        "threshold": float(thr),
        "fallback": bool(best < MIN_SENTENCE_F1),
        "dev": {"texts": len(texts), "f1_vs_pysbd": round(float(best), 4),
                "best_f1_any_token_by_layer": per_layer, "best_f1_punctuation_by_layer": per_layer_p,
                "best_f1_terminal_by_layer": per_layer_t},
    }


# --------------------------------------------------------------------------------------------
# The shipped default and its regeneration
# --------------------------------------------------------------------------------------------

# BEGIN DEFAULT_CONFIG (generated by `python -m headsim.segmentation.selection --write`)
DEFAULT_CONFIG: dict[str, Any] = {
    "model": "all-MiniLM-L6-v2 (embedded default)",
    "produced_by": "headsim.segmentation.selection.regenerate_default(): dev splits (30 %, seed 0) of wikipedia_topic_docs() and choi_lee_docs(100, seed=0); sentence level on 10 Wikipedia dev texts",
    "topic": {
        "heads": [
            [
                3,
                1
            ],
            [
                2,
                1
            ],
            [
                4,
                11
            ]
        ],
        "k": 5,
        "threshold": 1.0,
        "mean_segment_units": 10.5921875,
        "dev": {
            "documents": 59,
            "oracle_k_pk": 0.2871,
            "threshold_pk": 0.3183,
            "head_auc": {
                "L4H2": 0.6966,
                "L3H2": 0.6799,
                "L5H12": 0.6652,
                "L5H1": 0.6643,
                "L5H11": 0.66,
                "L4H11": 0.6599,
                "L4H10": 0.6575,
                "L5H4": 0.6566,
                "L2H4": 0.6561,
                "L2H8": 0.6544,
                "L1H4": 0.6538,
                "L5H9": 0.6476
            }
        },
        "seq_len": 256,
        "stride": 192
    },
    "sentence": {
        "layer": 3,
        "candidates": "terminal",
        "threshold": 0.3,
        "fallback": False,
        "dev": {
            "texts": 10,
            "f1_vs_pysbd": 0.8452,
            "best_f1_any_token_by_layer": {
                "L1": 0.1175,
                "L2": 0.3534,
                "L3": 0.4394,
                "L4": 0.5689,
                "L5": 0.1708,
                "L6": 0.1335
            },
            "best_f1_punctuation_by_layer": {
                "L1": 0.3977,
                "L2": 0.6149,
                "L3": 0.6546,
                "L4": 0.8092,
                "L5": 0.4837,
                "L6": 0.3993
            },
            "best_f1_terminal_by_layer": {
                "L1": 0.828,
                "L2": 0.8301,
                "L3": 0.8403,
                "L4": 0.8452,
                "L5": 0.828,
                "L6": 0.824
            }
        }
    }
}
# END DEFAULT_CONFIG


def regenerate_default(model: LoadedModel | str | None = None) -> dict[str, Any]:
    """Fit on the development splits of both benchmark datasets (Wikipedia sections, Choi-Lee)."""
    from .datasets import choi_lee_docs, dev_test_split, wikipedia_topic_docs

    loaded = as_loaded(model)
    wiki_dev, _ = dev_test_split(wikipedia_topic_docs(), 0.3, seed=0)
    lee_dev, _ = dev_test_split(choi_lee_docs(100, seed=0), 0.3, seed=0)
    topic = fit_topic(wiki_dev + lee_dev, loaded)
    sentence = fit_sentence([d.text for d in wiki_dev[:10]], loaded)
    return {
        "model": loaded.name if loaded.name != "default" else "all-MiniLM-L6-v2 (embedded default)",
        "produced_by": "headsim.segmentation.selection.regenerate_default(): dev splits (30 %, seed 0) of "
                       "wikipedia_topic_docs() and choi_lee_docs(100, seed=0); sentence level on 10 Wikipedia dev texts",
        "topic": topic,
        "sentence": sentence,
    }


def _write_default(config: dict[str, Any]) -> None:
    path = Path(__file__)
    source = path.read_text(encoding="utf-8")
    body = "DEFAULT_CONFIG: dict[str, Any] = " + _pyliteral(config) + "\n"
    new = re.sub(r"(# BEGIN DEFAULT_CONFIG[^\n]*\n).*?(# END DEFAULT_CONFIG)", lambda m: m.group(1) + body + m.group(2),
                 source, count=1, flags=re.DOTALL)
    path.write_text(new, encoding="utf-8")


def _pyliteral(config: dict[str, Any]) -> str:
    text = json.dumps(config, indent=4)
    return text.replace(": null", ": None").replace(": true", ": True").replace(": false", ": False")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config = regenerate_default()
    print(json.dumps(config, indent=1))
    if "--write" in args:
        _write_default(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
