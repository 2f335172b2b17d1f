"""A claim of the paper checked on a run (:class:`Claim`), its verdicts and the formatting its values share."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

HOLDS, FAILS, NA = "holds", "does not hold", "not applicable"
VERDICTS = (HOLDS, FAILS, NA)


@dataclass
class Claim:
    """One paper claim checked on a run.

    Attributes:
        id: short stable identifier (``"c1_separators"`` …); claims are listed in the order of their ids.
        claim: the paper's statement, paraphrased, with section and figure.
        measure: what was computed, from which file.
        value: the result: a number or a short text.
        criterion: when the claim counts as holding, in words.
        verdict: ``"holds"``, ``"does not hold"`` or ``"not applicable"``.
        numbers: the numbers behind ``value`` (for tables, tests and comparisons).
    """

    id: str
    claim: str
    measure: str
    value: float | str
    criterion: str
    verdict: str
    numbers: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return jsonable(asdict(self))


def jsonable(x):
    """``x`` with numpy numbers and arrays as Python ones and NaN / inf as ``None`` (for JSON)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def column(df: pd.DataFrame, *names: str) -> pd.Series:
    """The first of ``names`` that ``df`` has (tables have gained extra names over time)."""
    for name in names:
        if name in df.columns:
            return df[name]
    raise KeyError(f"none of {names} in table columns {list(df.columns)}")


def finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def head_name(layer: int, head: int) -> str:
    return f"L{int(layer)}H{int(head)}"


def signed_pct(x: float) -> str:
    """``+12.3%`` / ``−4.5%`` (a true minus sign)."""
    return "n/a" if not finite(x) else f"{x:+.1%}".replace("-", "\u2212")


def fmt_pct(x: float) -> str:
    return "n/a" if not finite(x) else f"{x:.0%}" if abs(x) >= 0.1 else f"{x:.1%}"
