"""Orders of heads: by headsim's measured roles, by gradient importance, at random.

Heads are numbered flat, ``index = layer · H + head`` (0-based). Every criterion here returns
either a per-head score ``[L, H]`` or an order (flat indices, the first to remove first).

Role rules (one statistics run of ``headsim analyze``, its ``heads.parquet``; the k most typical
heads of each role form its group, heads without high-similarity pairs rank last):

=================  ====================================================  ========
role               measure (descending)                                  figure
=================  ====================================================  ========
``repetition``     ``p_repeat``: share of the head's pairs that repeat   6a
                   one token id
``same_sentence``  ``p_same_sentence − p_same_sentence_chance``          8b
``long_range``     ``mean_distance`` of the head's pairs                 7
``anchor``         ``anchor_fraction_mean``: share of pairs holding the  11a
                   head's most common token
=================  ====================================================  ========
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch

from ..errors import require
from ..model.load import LoadedModel
from ..stats.tables import same_sentence_excess
from .intervention import gates
from .tasks import Task

ROLES = {
    "repetition": lambda h: h["p_repeat"],
    "same_sentence": same_sentence_excess,
    "long_range": lambda h: h["mean_distance"],
    "anchor": lambda h: h["anchor_fraction_mean"],
}
ROLE_COLUMNS = ("p_repeat", "p_same_sentence", "p_same_sentence_chance", "mean_distance", "anchor_fraction_mean")


def role_scores(heads: pd.DataFrame, n_layers: int, n_heads: int) -> dict[str, np.ndarray]:
    """Each role's measure per head ``[L, H]`` (NaN where the head has no pairs) from ``heads.parquet``."""
    missing = [c for c in ("layer", "head", *ROLE_COLUMNS) if c not in heads.columns]
    require(not missing, f"heads.parquet lacks column(s) {', '.join(missing)}", "re-run headsim analyze with this version")
    require(len(heads) == n_layers * n_heads and heads["layer"].max() == n_layers and heads["head"].max() == n_heads,
            f"the statistics run has {heads['layer'].max()} layers × {heads['head'].max()} heads, the model "
            f"{n_layers} × {n_heads}", "pass the run of the same model (headsim analyze --model …)")
    table = heads.sort_values(["layer", "head"])
    return {role: measure(table).to_numpy(dtype=float).reshape(n_layers, n_heads) for role, measure in ROLES.items()}


def descending(score: np.ndarray) -> np.ndarray:
    """Flat head indices by descending score, NaN last, ties in (layer, head) order."""
    flat = np.asarray(score, dtype=float).ravel()
    key = np.where(np.isnan(flat), np.inf, -flat)
    return np.argsort(key, kind="stable")


def ascending(score: np.ndarray) -> np.ndarray:
    """Flat head indices by ascending score, NaN last, ties in (layer, head) order."""
    flat = np.asarray(score, dtype=float).ravel()
    return np.argsort(np.where(np.isnan(flat), np.inf, flat), kind="stable")


def random_orders(n_total: int, draws: int, seed: int = 0) -> np.ndarray:
    """``[draws, n_total]`` independent random permutations of the heads."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(n_total) for _ in range(draws)]) if draws else np.zeros((0, n_total), int)


def as_pairs(indices, n_heads: int) -> list[tuple[int, int]]:
    """Flat indices → 0-based ``(layer, head)`` pairs."""
    return [(int(i) // n_heads, int(i) % n_heads) for i in indices]


def label(indices, n_heads: int) -> str:
    """``"L.H"`` labels, 1-based, space-separated (sorted)."""
    return " ".join(f"{layer + 1}.{head + 1}" for layer, head in sorted(as_pairs(indices, n_heads)))


def gradient_importance(model: LoadedModel, task: Task) -> np.ndarray:
    """Michel et al. (2019): ``E |∂L/∂ξ_h|`` over the task's loss batches, ξ the head gates, ``[L, H]``."""
    task.prepare(model)
    losses = task.losses(model)
    require(losses is not None, f"task {task.name!r} has no differentiable loss",
            "use --gradient-task lee or polarity")
    total, count = torch.zeros(model.n_layers, model.n_heads, dtype=torch.float64), 0
    with gates(model) as xi:
        for loss in losses:
            (grad,) = torch.autograd.grad(loss, xi)
            total += grad.detach().abs().double().cpu()
            count += 1
    require(count > 0, f"task {task.name!r} gave no loss batch", "check the task's data")
    return (total / count).numpy()


def rank_correlation(x: np.ndarray, y: np.ndarray, *, boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Spearman ρ of two per-head arrays (NaN pairs dropped) and its 95 % bootstrap interval over heads."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return float("nan"), float("nan"), float("nan")
    rho = float(spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():  # a resample of identical values has no correlation: NaN, skipped
        warnings.simplefilter("ignore")
        samples = [spearmanr(x[i], y[i]).statistic for i in (rng.integers(0, len(x), len(x)) for _ in range(boot))]
    lo, hi = np.nanpercentile(np.asarray(samples, float), [2.5, 97.5])
    return rho, float(lo), float(hi)
