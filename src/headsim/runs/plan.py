"""The one planning step of a run, for every engine (:func:`plan`): the corpus counted, the windows to
analyse settled (all, ``windows``, or a ``--shard`` of them), the run's
:class:`~headsim.runs.spec.RunSpec` and starting ``run.json``, and the recipe of its statistics
(:class:`StatsRecipe`: built here by the local engine, on every actor by the Ray engine).

Before it, :func:`settle_output` checks the output directory and fills, on ``--resume``, what the call
left open from the stored run (:func:`headsim.runs.spec.resume_defaults`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from typing import NamedTuple

import numpy as np

from ..corpus import Corpus
from ..corpus.parts import CountedCorpus
from ..errors import require
from ..io import check_writable
from ..memory import accumulator_bytes, format_bytes
from ..stats import CorpusStats, schema
from ..stats.backends import Choice
from .layout import estimated_bytes
from .lifecycle import check_engine
from .options import RunOptions
from .progress import announce
from .provenance import git_commit, package_versions
from .rundir import RunDir
from .shares import Share, plan_shares
from .spec import RunSpec, resume_defaults

#: what counts tokens: every text's tokens, without special tokens
TokenCounter = Callable[[list[str]], np.ndarray]


def settle_output(options: RunOptions) -> RunOptions:
    """Check the output directory before the slow model load (a read-only or full output fails here);
    with ``resume``, every option left open becomes the stored run's own setting. ``backend`` left
    open is otherwise ``"auto"``."""
    if options.out is None:
        return replace(options, backend=options.backend or "auto")
    run_dir = RunDir(options.out)
    run_dir.check_target(resume=options.resume, overwrite=options.overwrite)
    check_writable(options.out)
    if not options.resume:
        return replace(options, backend=options.backend or "auto")
    check_engine(run_dir.resume_meta(), options.engine, run_dir.path)
    given = {f.name: getattr(options, f.name) for f in fields(options) if f.name != "ray"}
    return replace(options, **resume_defaults(run_dir.settings(), given))


class CorpusCount(NamedTuple):
    """What counting found: packed windows and tokens, and whether it read the whole corpus (else both
    are lower bounds)."""

    windows: int
    tokens: int
    complete: bool


def count_windows(corpus: Corpus, count_tokens: TokenCounter, content: int, enough: int | None = None) -> CorpusCount:
    """Packed windows of ``content`` text tokens and tokens the corpus gives (a fast pass of the tokenizer
    alone, in growing blocks of texts); with ``enough``, counting stops once that many windows are certain."""
    total, texts, start, step = 0, [d.text for d in corpus], 0, 8
    while start < len(texts) and (enough is None or total < enough * content):
        total += int(sum(count_tokens(texts[start: start + step])))
        start, step = start + step, min(2 * step, 256)
    return CorpusCount(-(-total // content), total, start >= len(texts))


def shard_range(windows: int, shard: tuple[int, int]) -> tuple[int, int]:
    """Windows ``[first, stop)`` of part ``i`` of ``n`` (1-based) of ``windows`` windows: ``n`` disjoint
    ranges as equal as can be, together all of them; a part without a window is refused."""
    i, n = shard
    first, stop = (i - 1) * windows // n, i * windows // n
    require(stop > first, f"--shard {i}/{n} holds no window: the run has only {windows} windows",
            f"use at most {windows} shards")
    return first, stop


def warn_fewer(corpus: Corpus | CountedCorpus, windows: int) -> None:
    """The warning of a corpus that gives fewer windows than asked for (all of them are analysed)."""
    warnings.warn(f"corpus {corpus.name!r} gives only {windows} windows; analysing all of them", stacklevel=3)


def window_target(corp: Corpus | CountedCorpus, count: CorpusCount, windows: int | None, seq_len: int, specials: int,
                  allow_fewer: bool) -> int:
    """Windows to analyse: ``windows``, or all the corpus gives (also when it gives fewer and
    ``allow_fewer``, with a warning); refuses a corpus shorter than one window."""
    require(count.tokens >= seq_len - specials, f"corpus {corp.name!r} has {count.tokens} tokens, less than one window of {seq_len}",
            "use a larger corpus or a smaller --seq-len")
    target = count.windows if windows is None else windows
    if count.complete and target > count.windows:
        require(allow_fewer, f"{target} windows asked for but corpus {corp.name!r} gives only {count.windows} windows of {seq_len} tokens",
                "pass --windows at most that, or --allow-fewer to analyse all of them")
        warn_fewer(corp, count.windows)
        target = count.windows
    return target


def new_meta(model: dict, corp: Corpus | CountedCorpus, given: object, count: CorpusCount, spec: RunSpec, *, device: str,
             backend: dict, engine: str = "local", shard: tuple[int, int] | None = None) -> dict:
    """``run.json`` of a run about to start (``complete: false``); ``given``: the corpus as the call named it;
    ``backend``: the statistics backend requested and chosen (the run's end adds what ran)."""
    meta = {
        "model": model, "corpus": {"name": corp.name, "sha256": corp.sha256, "documents": len(corp),
                                   "tokens": count.tokens if count.complete else None,
                                   "windows_available": count.windows if count.complete else None},
        **spec.as_meta(), "device": device, "statistics_backend": dict(backend), "versions": package_versions(),
        "git_commit": git_commit(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "complete": False, "engine": engine,
    }
    if not isinstance(given, Corpus):
        meta["corpus"]["spec"] = [str(g) for g in given] if isinstance(given, (list, tuple)) else str(given)  # what --resume passes again
    if shard is not None:
        meta["shard"] = {"index": shard[0], "count": shard[1], "first_window": spec.first_window}
    return meta


@dataclass(frozen=True)
class ModelFacts:
    """What planning needs of the model: from the loaded model (local engine) or an actor's description
    of its copy (Ray engine)."""

    source: str
    record: dict  # run.json's "model"
    dtype: str
    device: str
    specials: int  # framing tokens per window
    n_layers: int
    n_heads: int
    commit: str | None = None

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of a model given as an object (run.json's ``model.object.fingerprint``), else ``None``."""
        return ((self.record.get("object") or {}).get("fingerprint") or {}).get("sha256")

    @classmethod
    def of(cls, loaded) -> "ModelFacts":
        """The facts of a :class:`~headsim.model.load.LoadedModel`."""
        return cls(loaded.source, loaded.describe(), str(loaded.dtype).replace("torch.", ""), str(loaded.device),
                   loaded.framing.specials, loaded.n_layers, loaded.n_heads, loaded.commit)


@dataclass(frozen=True)
class StatsRecipe:
    """A run's statistics, to be built where they accumulate (:meth:`build`): the same on every engine."""

    n_layers: int
    n_heads: int
    seq_len: int
    threshold: float
    top_k_columns: int
    resolution: int
    backend: str | Choice = "auto"
    tile_bytes: int | None = None  # the block of attention rows the memory plan allows (default: the statistics')

    def build(self, device="cpu", backend: str | Choice | None = None) -> CorpusStats:
        """Empty statistics on ``device`` (with ``backend``, else the run's)."""
        tile = {} if self.tile_bytes is None else {"tile_bytes": self.tile_bytes}
        return CorpusStats(self.n_layers, self.n_heads, self.seq_len, threshold=self.threshold,
                           top_k_columns=self.top_k_columns, device=device,
                           backend=self.backend if backend is None else backend, resolution=self.resolution, **tile)


@dataclass(frozen=True)
class Plan:
    """What :func:`plan` settled before the first window."""

    corpus: Corpus | CountedCorpus
    spec: RunSpec
    meta: dict  # run.json to start with
    stats: StatsRecipe
    counts: np.ndarray | None = None  # every text's tokens, where they were counted (a shard, shares)
    share: Share | None = None  # a local --shard: its windows as one share

    @property
    def stop(self) -> int:
        """The corpus's window after the run's last."""
        return self.spec.first_window + self.spec.windows


def plan(options: RunOptions, corp: Corpus | CountedCorpus, given: object, model: ModelFacts, count_tokens: TokenCounter, *, seq_len: int,
         batch_size: int, backend: str | Choice, backend_record: dict, shares: bool = False,
         tile_bytes: int | None = None, counts: np.ndarray | None = None) -> Plan:
    """Count the corpus, settle the windows to analyse, and make the run's spec, ``run.json`` and statistics.

    ``given``: the corpus as the call named it (run.json keeps a spec for ``--resume``). ``options`` are checked (:meth:`RunOptions.check`) and settled (:func:`settle_output`); ``seq_len``,
    ``batch_size`` and the statistics ``backend`` (with its run.json ``backend_record``) the engine settled
    for the model. ``count_tokens`` counts texts' tokens; every text is counted when ``shares`` (the
    engine cuts shares) or for a ``--shard`` (which starts inside the corpus); otherwise the whole corpus
    is counted only where the number matters before the run (to analyse all of it, or to refuse too
    large a ``windows`` up front): else the windowing itself tells, and counting stops at one window.
    ``counts``: every text's tokens counted already (a corpus in parts, counted where its parts were
    read: ``corp`` is then a :class:`~headsim.corpus.parts.CountedCorpus`, which holds no text).
    """
    specials, content = model.specials, seq_len - model.specials
    share = None
    if shares or options.shard is not None or counts is not None:
        counts = np.asarray(count_tokens([d.text for d in corp]) if counts is None else counts, dtype=np.int64)
        count = CorpusCount(-(-int(counts.sum()) // content), int(counts.sum()), True)
    else:
        count = count_windows(corp, count_tokens, content,
                              enough=None if options.windows is None or not options.allow_fewer else 1)
    first, stop = 0, window_target(corp, count, options.windows, seq_len, specials, options.allow_fewer)
    if options.shard is not None:
        first, stop = shard_range(stop, options.shard)
        if not shares:  # the local engine cuts a shard's windows from its first token, as one share
            share = plan_shares(counts, content, stop, stop - first, start=first)[0]
    spec = RunSpec(model.source, corp.sha256, stop - first, seq_len, options.threshold, options.top_k_columns, batch_size,
                   model.dtype, options.sentence_splitter, first, options.resolution, model.commit, model.fingerprint)
    meta = new_meta(model.record, corp, given, count, spec,
                    device=model.device, backend=backend_record, engine=options.engine, shard=options.shard)
    recipe = StatsRecipe(model.n_layers, model.n_heads, seq_len, options.threshold, options.top_k_columns,
                         options.resolution, backend, tile_bytes)
    return Plan(corp, spec, meta, recipe, counts, share)


def announce_size(options: RunOptions, model: dict, windows: int, seq_len: int) -> dict:
    """run.json's ``size`` entry (the estimate before the run: the directory on disk, the statistics in
    memory) for the model described by ``model`` (run.json's ``model``: layers, heads, causal), printed as
    one line where progress is shown; both engines record it."""
    n_layers, n_heads = int(model["n_layers"]), int(model["n_heads"])
    layout = schema.Layout(n_layers, n_heads, seq_len, resolution=options.resolution)
    disk = estimated_bytes(layout, windows, bool(model.get("causal")))
    held = accumulator_bytes(n_layers, n_heads, seq_len, options.resolution)
    where = f"in {options.out}" if options.out is not None else "if written (no --out: kept in memory)"
    bins = (f"on {options.resolution} position bins" if layout.binned
            else f"per position (resolution {options.resolution})")
    announce(options.progress, f"run size: about {format_bytes(disk)} on disk {where}; statistics "
             f"{format_bytes(held)} in memory, {bins}")
    return {"estimated_bytes": disk, "statistics_bytes": held}
