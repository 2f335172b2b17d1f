"""The Ray engine's worker (:class:`Worker`, a Ray actor holding one model copy): it counts tokens (of
texts it is sent, or of the corpus parts it reads itself) and accumulates shares, windowing each one
itself from the texts or parts it touches. See :mod:`headsim.runs.ray`."""

from __future__ import annotations

import time
import uuid
from contextlib import closing
from dataclasses import dataclass

import numpy as np
import torch

from ..corpus.parts import Counted, Fields, Slice, count_unit, units_of
from ..model.load import as_loaded
from ..stats import CorpusStats
from ..stats.backends import choose_backend
from ..windows import token_counts, windows_table
from .engine import Engine, default_batch_size, prefetch
from .plan import StatsRecipe
from .shares import Share, share_batches


@dataclass(frozen=True)
class ShareSettings:
    """What a worker needs to accumulate a share (all of it decides the numbers): the run's statistics
    (:class:`~headsim.runs.plan.StatsRecipe`) and how its windows are cut."""

    stats: StatsRecipe
    batch_size: int
    sentence_splitter: str
    first_window: int = 0  # the run's first window of the corpus (a --shard): its windows.parquet counts from there


class _Clock:
    """Seconds spent per step of a share (run.json's ``worker_seconds``: where a worker's time goes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.mark = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.seconds[step] = self.seconds.get(step, 0.0) + now - self.mark
        self.mark = now


class Worker:
    """One model copy on the cluster (a Ray actor): counts tokens, accumulates shares.

    Args:
        model: a model name or path for :func:`~headsim.load_model` (must resolve on the worker's
            node), or a :class:`~headsim.model.load.LoadedModel` shipped by value.
        threads: torch threads (the actor's CPUs).
        progress: the name of the run's :class:`~headsim.runs.progress.ShareProgress` actor; every batch
            reports the windows done in its share there.
        gpu_share: the fraction of one GPU the actor holds (``--gpus-per-actor``; 0 on CPUs): its default
            batch size is planned for that fraction of the device's memory.
    """

    def __init__(self, model, device: str | None, dtype: str | None, threads: int, progress: str,
                 gpu_share: float = 0.0) -> None:
        torch.set_num_threads(max(1, threads))
        self.progress, self.gpu_share = progress, gpu_share
        self.engine = None
        self.settings: ShareSettings | None = None
        try:  # a failure here would kill the actor with its traceback as the message: keep it for describe()
            self.loaded = as_loaded(model, device=device, dtype=dtype)
        except Exception as exc:
            self.failure: Exception | None = exc
        else:
            self.failure = None

    def describe(self, seq_len: int, backend: str = "auto") -> dict:
        """The model as the run records it, the statistics ``backend`` chosen for its device and the
        batch size it would pick at ``seq_len`` (on a GPU, for its :attr:`gpu_share`); raises what loading
        the model raised, or the refusal of a named backend that cannot run here."""
        if self.failure is not None:
            raise self.failure
        m = self.loaded
        choice = choose_backend(backend, m.device)
        batch = default_batch_size(m, min(seq_len, m.max_seq_len), choice.chosen, share=self.gpu_share or 1.0)
        return {"backend": choice.record(), "model": m.describe(), "name": m.name, "source": m.source, "max_seq_len": m.max_seq_len,
                "extrapolates": m.extrapolates, "dtype": str(m.dtype).replace("torch.", ""), "device": str(m.device), "specials": m.framing.specials,
                "commit": m.commit, "batch_size": batch}

    def count(self, texts: list[str]) -> np.ndarray:
        """Tokens of each text, without special tokens."""
        return np.asarray(token_counts(self.loaded.tokenizer, texts), dtype=np.int64)

    def count_file(self, file: str, fields: Fields) -> list[Counted]:
        """Every unit of corpus part ``file`` (:mod:`headsim.corpus.parts`), read here, with its documents' tokens
        and digest."""
        return [count_unit(u, fields, self.count) for u in units_of(file, fields)]

    def _engine(self, s: ShareSettings) -> Engine:
        if self.engine is None or self.settings != s:
            def fresh() -> CorpusStats:
                return s.stats.build(self.loaded.device)

            self.engine, self.settings = Engine(self.loaded, fresh(), fresh), s
        self.engine.stats.reset()
        return self.engine

    def run(self, share: Share, source: list[str] | Slice, settings: ShareSettings) -> dict:
        """Accumulate ``share`` from zero, from its texts or the corpus parts that hold them (read here);
        returns its ``index``, the ``state`` (state_dict), its ``windows`` table, the engine's
        ``attention`` and ``backend`` records (as run.json has them) and the ``seconds`` per step."""
        import pyarrow as pa
        import ray

        clock = _Clock()
        engine = self._engine(settings)
        tracker = ray.get_actor(self.progress)
        attempt, done, tables = uuid.uuid4().hex, 0, []
        # the attempt is registered before any work (and waited for): an actor killed mid-share may drop
        # its later, unawaited reports, but its attempt is already counted (run.json: shares_redone)
        ray.get(tracker.report.remote(share.index, attempt, 0))
        texts = source if isinstance(source, list) else source.texts()
        clock.lap("read")
        batches = share_batches(texts, share, self.loaded.tokenizer, settings.stats.seq_len, settings.batch_size,
                                settings.sentence_splitter, self.loaded.framing)
        with closing(prefetch(batches)) as ahead:
            for w in ahead:
                clock.lap("wait_for_windows")
                engine.process_safely(w)
                clock.lap("model_and_statistics")
                tables.append(windows_table(share.start - settings.first_window + done, w.input_ids, w.attention_mask,
                                            w.sentence_ids))
                done += len(w)
                tracker.report.remote(share.index, attempt, done)
                clock.lap("other")
        state = engine.stats.state_dict()
        clock.lap("state")
        return {"index": share.index, "state": state, "windows": pa.concat_tables(tables),
                "attention": engine.attention_source(), "backend": engine.backend_record(), "seconds": clock.seconds}
