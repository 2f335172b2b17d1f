"""Per-document encoder features for the segmentation benchmark, cached on disk.

For every document the benchmark needs two things from the model, computed once and kept in
``benchmarks/.cache/segmentation/`` (a folder that ignores itself in git):

* ``heads``: ``[n_units, n_layers * n_heads, d_head]`` float16: each unit's mean cosine-normalised
  output vector for every head (one streamed pass, :func:`headsim.segmentation.features.encoder_pass`
  through :func:`~headsim.segmentation.features.doc_unit_vectors`);
* ``embeddings``: ``[n_units, hidden]`` float32: each unit's sentence embedding
  (:func:`headsim.segmentation.features.sentence_embeddings`).

Every method of the benchmark reads these, so every model run of the benchmark goes through those
two library functions. The cache key is the model, the unit texts, the window geometry and
:data:`FEATURE_VERSION`.

    python benchmarks/segmentation_features.py      # fill the cache for every installed source
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from headsim.segmentation.datasets import SegDoc  # noqa: E402

FEATURE_VERSION = 1
CACHE_DIR = Path(__file__).parent / ".cache" / "segmentation"
SEQ_LEN, STRIDE = 256, 192
MAX_SCORED = 40  # documents scored per held-out source (the encoder time on 2 shared cores bounds it)


@dataclass
class DocFeatures:
    """Cached model features of one document's units."""

    heads: np.ndarray  # [n, layers * heads, d] float16, heads in (layer, head) order
    embeddings: np.ndarray  # [n, hidden] float32, unit length


class FeatureStore:
    """Load-or-compute per-document features with one loaded model (loaded on first miss)."""

    def __init__(self, model: str | None = None, cache_dir: Path = CACHE_DIR) -> None:
        self.model_name = model or "default"
        self.cache_dir = cache_dir
        self._loaded = None
        self.hits = self.misses = 0

    @property
    def loaded(self):
        if self._loaded is None:
            from headsim.model.load import as_loaded

            self._loaded = as_loaded(None if self.model_name == "default" else self.model_name, device="cpu")
        return self._loaded

    def _path(self, units: Sequence[str]) -> Path:
        key = "\x1e".join([f"v{FEATURE_VERSION}", self.model_name, str(SEQ_LEN), str(STRIDE), *units])
        return self.cache_dir / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()[:24]}.npz"

    def get(self, doc: SegDoc | Sequence[str]) -> DocFeatures:
        units = doc.unit_texts if isinstance(doc, SegDoc) else list(doc)
        path = self._path(units)
        if path.is_file():
            with np.load(path) as f:
                self.hits += 1
                return DocFeatures(f["heads"], f["embeddings"])
        self.misses += 1
        from headsim.segmentation.features import doc_unit_vectors, sentence_embeddings

        loaded = self.loaded
        all_heads = [(l_, h) for l_ in range(loaded.n_layers) for h in range(loaded.n_heads)]
        vec = doc_unit_vectors(loaded, units, all_heads, SEQ_LEN, STRIDE)
        feats = DocFeatures(vec.reshape(len(units), len(all_heads), -1).astype(np.float16),
                            sentence_embeddings(loaded, units).astype(np.float32))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        ignore = self.cache_dir.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, heads=feats.heads, embeddings=feats.embeddings)
        tmp.replace(path)
        return feats


class CachedEncoder:
    """A stand-in for ``SentenceTransformer`` whose ``encode`` reads :class:`FeatureStore` embeddings.

    The benchmark registers each document's units before a baseline sees them, so the baselines'
    embeddings are exactly the cached ones (computed by ``sentence_embeddings``).
    """

    def __init__(self, store: FeatureStore) -> None:
        self.store = store
        self.table: dict[str, np.ndarray] = {}

    def register(self, docs: Sequence[SegDoc]) -> None:
        for d in docs:
            for text, vec in zip(d.unit_texts, self.store.get(d).embeddings):
                self.table.setdefault(text, vec)

    def encode(self, sentences, batch_size: int = 32, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True, **_: object) -> np.ndarray:
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        missing = [t for t in dict.fromkeys(texts) if t.strip() not in self.table]
        if missing:
            from headsim.segmentation.features import sentence_embeddings

            self.table.update(zip([t.strip() for t in missing], sentence_embeddings(self.store.loaded, missing)))
        out = np.stack([self.table[t.strip()] for t in texts]) if texts else np.zeros((0, 384), np.float32)
        return out[0] if single else out

    def get_sentence_embedding_dimension(self) -> int:
        return int(next(iter(self.table.values())).shape[-1]) if self.table else 384


def main(argv: Sequence[str] | None = None) -> int:
    """Fill the cache for every installed source (one skipped with its reason), in the order the
    benchmark scores them (:func:`~headsim.segmentation.datasets.scored_documents` with
    ``"all"``, at most ``--max-scored`` per source, as the benchmark's default), round robin over
    the sources, so that an interrupted fill covers every source alike. ``--part I/N``: only every
    N-th document from the I-th (several processes)."""
    import argparse
    import itertools
    import time

    from headsim.errors import HeadsimError
    from headsim.segmentation.datasets import SOURCES, scored_documents

    parser = argparse.ArgumentParser(description="fill the segmentation benchmark's feature cache")
    parser.add_argument("--part", default="0/1", help="I/N: this process fills every N-th document from the I-th")
    parser.add_argument("--max-scored", type=int, default=MAX_SCORED,
                        help="at most this many documents per source, as the benchmark scores (0: every document)")
    args = parser.parse_args(argv)
    part, parts = (int(x) for x in args.part.split("/"))
    store = FeatureStore()
    queues = []
    for name, make in SOURCES.items():
        try:
            queues.append([(name, d) for d in scored_documents(make(), "all", args.max_scored or None)])
        except HeadsimError as exc:
            print(f"skipping source {name}: {exc}", file=sys.stderr, flush=True)
    order = [x for row in itertools.zip_longest(*queues) for x in row if x is not None]
    start = time.perf_counter()
    for i, (name, doc) in enumerate(order):
        if i % parts == part:
            store.get(doc)
            print(f"{i + 1}/{len(order)} {name} {doc.doc_id}: {time.perf_counter() - start:.0f} s", file=sys.stderr,
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
