"""A finished run as the report reads it: :class:`ReportRun` (the run, its token shares and a display label)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..model.load import load_tokenizer
from ..tokens import first_position_note
from ..runs.run import Run
from ..runs.rundir import RunDir
from .claims import token_shares
from .html import model_label


@dataclass
class ReportRun(Run):
    """A finished run (:class:`~headsim.runs.run.Run`) as the report reads it: with the share of valid
    tokens each kind of token takes (:func:`~headsim.report.claims.token_shares`) and a display label."""

    shares: dict = field(default_factory=dict)
    position_zero: str = ""  # what position 0 of a window is, in words ("" where the run does not say)

    @property
    def label(self) -> str:
        return model_label(self.model)


def load_report_run(run_dir: str | os.PathLike | Run, *, tokenizer=None, use_tokenizer: bool = True) -> ReportRun:
    """Read a finished run (:meth:`RunDir.load`; or take a :class:`~headsim.runs.run.Run` as it is, one kept
    in memory included) and its token shares; ``tokenizer`` defaults to the
    run's model tokenizer at its recorded commit (:func:`headsim.model.load.load_tokenizer`: from disk
    or the local cache only; without one punctuation is not counted)."""
    run = run_dir if isinstance(run_dir, Run) else RunDir(run_dir).load()
    model = run.model
    if tokenizer is None and use_tokenizer and model.get("source"):
        tokenizer = load_tokenizer(model["source"], model.get("commit"))
    data = ReportRun(run.path, run.meta, run.heads, run.layers)
    data.__dict__.update({k: v for k, v in run.__dict__.items() if k in ("dataset", "windows", "_window_arrow")})
    framing = data.model.get("framing")
    data.shares = token_shares(data.windows, tokenizer, data.dataset, framing=framing)
    if tokenizer is not None and framing is not None:
        data.position_zero = first_position_note(tokenizer, framing.get("open"))
    return data
