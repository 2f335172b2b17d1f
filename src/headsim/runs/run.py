"""A finished run as its readers see it (:class:`Run`): ``run.json``, the summary tables at once,
the statistics and the windows when first used. Read through :func:`headsim.runs.rundir.load_run`,
which checks the run is finished and whole first; :func:`headsim.analyze` returns the same class, for a
run kept in memory too (:meth:`Run.in_memory`, ``path`` ``None``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import xarray as xr

from ..display import HtmlDisplay
from ..io import open_dataset, read_table, reading
from ..stats import schema
from .layout import RUN_JSON, STATS_NC, WINDOWS
from .spec import RunSpec


@dataclass
class Run(HtmlDisplay):
    """A finished run, read by :meth:`RunDir.load` or returned by :func:`headsim.analyze`: ``run.json``
    (:attr:`meta`), its :attr:`spec` and the two summary tables at once; the statistics (:attr:`dataset`)
    and the windows when first used. :meth:`open_dataset` and :meth:`window_table` read lazily (one head
    of the statistics, the first rows of the windows) for readers such as the explorer that never need
    the whole files. A run kept in memory (``path`` ``None``: analysed without ``out``) holds them all."""

    path: Path | None
    meta: dict
    heads: pd.DataFrame
    layers: pd.DataFrame

    @classmethod
    def in_memory(cls, meta: dict, dataset: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame,
                  windows: pa.Table | None = None, path: Path | None = None) -> "Run":
        """A run whose statistics (and, kept in memory, its ``windows``) are already at hand: what
        :func:`headsim.analyze` returns (``path``: where it was committed, ``None`` in memory)."""
        run = cls(path, meta, heads, layers)
        run.__dict__["dataset"] = dataset  # the cached properties, filled
        if windows is not None:
            run.__dict__["_window_arrow"] = windows
        return run

    @property
    def name(self) -> str:
        """The run directory's name (``"in memory"`` without one)."""
        return self.path.name if self.path is not None else "in memory"

    @property
    def spec(self) -> RunSpec:
        return RunSpec.from_meta(self.meta, str(self.path / RUN_JSON) if self.path is not None else "the run")

    @property
    def model(self) -> dict:
        model = self.meta.get("model")
        return model if isinstance(model, dict) else {}

    @cached_property
    def dataset(self) -> xr.Dataset:
        """The statistics (``stats.nc``), read whole on first use."""
        path = self.path / STATS_NC
        with open_dataset(path) as ds, reading(path):
            return schema.decode(ds.load())

    @contextmanager
    def open_dataset(self) -> Iterator[xr.Dataset]:
        """The statistics opened lazily: only what is selected is read (closed when the block ends)."""
        if self.path is None:
            yield self.dataset
            return
        with open_dataset(self.path / STATS_NC) as ds:
            yield schema.decode(ds)

    @cached_property
    def windows(self) -> pd.DataFrame:
        """The analysed windows (window, input_ids, attention_mask, sentence_ids per row)."""
        if self.path is None:
            return self.window_table().to_pandas()
        return read_table(self.path / WINDOWS)

    def window_table(self, rows: int | None = None, columns: list[str] | None = None) -> pa.Table:
        """The windows as an Arrow table: the first ``rows`` only (all by default), ``columns`` only."""
        if self.path is None:
            table = self.__dict__.get("_window_arrow")
            table = table if table is not None else pa.table({})
            table = table.select(columns) if columns is not None else table
            return table if rows is None else table.slice(0, rows)
        path = self.path / WINDOWS
        with reading(path):
            if rows is None:
                return pq.read_table(path, columns=columns)
            batch = next(pq.ParquetFile(path).iter_batches(batch_size=rows, columns=columns), None)
            return pa.Table.from_batches([batch]) if batch is not None else pq.read_schema(path).empty_table()

    @property
    def n_windows(self) -> int:
        return int(self.meta.get("windows", 0))

    @property
    def threshold(self) -> float:
        return float(self.meta["threshold"])

    def _html_body(self) -> tuple[str, str]:
        """Settings, model (with its revision), the top heads and Figs 6 and 8 (see :meth:`to_html`)."""
        from ..views.html.summaries import run_html

        return run_html(self)

    def sentences_per_window(self) -> float:
        """Mean number of sentences in a window (NaN for a run without windows)."""
        if not len(self.windows):
            return float("nan")
        return float(np.mean([len({s for s in np.asarray(ids).tolist() if s >= 0}) for ids in self.windows["sentence_ids"]]))
