"""The paper's claims as measured checks on a finished run.

:func:`compute_claims` turns a run's statistics (``stats.nc``), its ``heads`` / ``layers`` tables and
``run.json`` into a list of :class:`~headsim.figures.claim.Claim`: what the paper says (paraphrased,
with its section and figure), what was computed, the value, the criterion in words and a verdict.
Nothing is hard-coded: every value and verdict comes from the run. Where the data cannot say (no
pairs, a missing variable, too few layers), the verdict is "not applicable" and the value says why.

Each claim lives in the module of the figure that shows it (:mod:`headsim.figures`, e.g. claim 3 in
``figures/fig08.py``), with its cut-offs as module constants stated in its criterion; this module
collects them from the report's figures (:data:`headsim.report.contents.FIGURES`) and works out the
token shares claim 1 compares attention with.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

from ..figures.base import Statistics
from ..figures.claim import FAILS, HOLDS, NA, VERDICTS, Claim, jsonable
from ..runs.layout import STATS_NC, WINDOWS
from .contents import FIGURES

__all__ = ["FAILS", "HOLDS", "NA", "VERDICTS", "Claim", "claims_frame", "compute_claims", "jsonable", "token_shares"]


def token_shares(windows: pd.DataFrame | None, tokenizer=None, ds: xr.Dataset | None = None, *,
                 framing: dict | None = None) -> dict:
    """Share of [CLS], [SEP] and punctuation tokens among the valid tokens of the analysed windows.

    With the model's ``tokenizer`` the ids in ``windows.parquet`` are classified exactly as the
    statistics classify attention targets: the window's opening and closing tokens (``framing``, as
    run.json's ``model.framing`` records them: ``{"open": id | None, "close": id | None}``; runs
    without it: the tokenizer's, :func:`headsim.stats.batch.target_ids`) and
    :func:`headsim.tokens.punctuation_lookup`. Without a tokenizer, the opening and closing tokens
    count one each per window (none where ``framing`` says the windows have none) and punctuation is
    unknown. Uniform attention over a window's valid keys would put exactly these shares on each kind.
    """
    opens, closes = ((True, True) if framing is None
                     else (framing.get("open") is not None, framing.get("close") is not None))
    if windows is not None and len(windows):
        mask = np.concatenate([np.asarray(m, dtype=bool) for m in windows["attention_mask"]])
        n_tokens = int(mask.sum())
        n_windows = len(windows)
        source = WINDOWS
    elif ds is not None:
        n_tokens, n_windows = int(ds["tokens"].values), int(ds["windows"].values)
        mask = None
        source = f"{STATS_NC} (windows, tokens)"
    else:
        return {"cls": math.nan, "sep": math.nan, "punct": None, "tokens": 0, "method": "no windows"}
    if n_tokens == 0:
        return {"cls": math.nan, "sep": math.nan, "punct": None, "tokens": 0, "method": "no valid tokens"}
    if tokenizer is not None and mask is not None:
        from ..stats.batch import target_ids
        from ..tokens import punctuation_lookup

        ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in windows["input_ids"]])[mask]
        cls, sep = (framing.get("open"), framing.get("close")) if framing is not None else target_ids(tokenizer)
        share = lambda target: 0.0 if target is None else float((ids == target).mean())  # noqa: E731
        lookup = punctuation_lookup(tokenizer)
        punct = lookup[np.clip(ids, 0, len(lookup) - 1)] & (ids < len(lookup))
        return {"cls": share(cls), "sep": share(sep), "punct": float(punct.mean()), "tokens": n_tokens,
                "method": f"token ids of {source} classified with the model's tokenizer, as the statistics do"}
    return {"cls": n_windows * opens / n_tokens, "sep": n_windows * closes / n_tokens, "punct": None, "tokens": n_tokens,
            "method": f"one opening and one closing token per window where the model frames windows with them "
                      f"({source}); punctuation not counted (tokenizer unavailable)"}


def compute_claims(ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame, run_meta: dict, *,
                   shares: dict | None = None) -> list[Claim]:
    """Every claim of the paper checked on one run (see the module docstring), in the order of their ids.

    Args:
        ds: the run's ``stats.nc``.
        heads, layers: ``heads.parquet`` and ``layers.parquet``.
        run_meta: ``run.json`` (model and corpus, for context).
        shares: token shares from :func:`token_shares` (windows + tokenizer); default: one [CLS]
            and one [SEP] per window from ``ds``, punctuation not counted.
    """

    shares = shares if shares is not None else token_shares(None, None, ds)
    stats = Statistics(ds, heads, layers, shares)
    return sorted((claim for figure in FIGURES for claim in figure.claims(stats)), key=lambda c: c.id)


def claims_frame(claims: list[Claim]) -> pd.DataFrame:
    """The claims as a table (the ``numbers`` left out)."""
    return pd.DataFrame([{k: v for k, v in c.to_dict().items() if k != "numbers"} for c in claims],
                        columns=["id", "claim", "measure", "value", "criterion", "verdict"])
