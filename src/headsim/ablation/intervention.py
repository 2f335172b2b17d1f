"""Head ablation: edit each head's output vectors Z before the attention output projection.

The output projection of a layer receives every head's Z concatenated, ``[B, T, H·d_head]``. A
forward pre-hook on it (:func:`headsim.model.tap.edit_head_outputs`, the tap's) replaces the slices of
the chosen heads: by zeros (``mode="zero"``) or by the head's mean output vector over a corpus
(``mode="mean"``, :func:`head_means`). Heads that are not chosen pass through untouched, and layers
with no chosen head get no hook at all. :func:`gates` multiplies every head's Z by a gate ξ (all
ones) so that a loss can be differentiated with respect to each head's presence (Michel et al. 2019).

Python indices are 0-based ``(layer, head)``; tables, figures and the CLI say 1-based.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import contextmanager

import torch

from ..errors import HeadsimError, require
from ..model.load import LoadedModel, as_loaded
from ..model.tap import edit_head_outputs

MODES = ("zero", "mean")
_ACTIVE: Counter = Counter()  # id(model) → ablations in force


def is_ablated(model: LoadedModel) -> bool:
    """Whether an :func:`ablate` or :func:`gates` context is active on this model."""
    return _ACTIVE[id(model)] > 0


def check_heads(heads: Iterable[Sequence[int]], n_layers: int, n_heads: int) -> dict[int, list[int]]:
    """0-based ``(layer, head)`` pairs → ``{layer: sorted heads}``, validated (1-based in messages)."""
    by_layer: dict[int, set[int]] = {}
    for item in heads:
        try:
            layer, head = (int(v) for v in item)
        except (TypeError, ValueError) as exc:
            raise HeadsimError(f"head {item!r} is not a (layer, head) pair", "pass pairs of 0-based integers") from exc
        require(0 <= layer < n_layers and 0 <= head < n_heads,
                f"head (layer {layer + 1}, head {head + 1}) is out of range",
                f"this model has layers 1..{n_layers} and heads 1..{n_heads} (1-based; Python takes 0-based pairs)")
        by_layer.setdefault(layer, set()).add(head)
    return {layer: sorted(hs) for layer, hs in sorted(by_layer.items())}


def _replace(z: torch.Tensor, heads: list[int], d_head: int, fill: torch.Tensor | None) -> torch.Tensor:
    """``z [B, T, H·d]`` with the given heads' slices set to ``fill [H, d]`` (or zero)."""
    z = z.clone()
    for h in heads:
        z[..., h * d_head:(h + 1) * d_head] = 0.0 if fill is None else fill[h].to(z.dtype)
    return z


@contextmanager
def _pre_hooks(model: LoadedModel, edits: dict[int, object]):
    _ACTIVE[id(model)] += 1
    try:
        with edit_head_outputs(model, edits):
            yield
    finally:
        _ACTIVE[id(model)] -= 1


@contextmanager
def ablate(model: LoadedModel, heads: Iterable[Sequence[int]] = (), mode: str = "zero",
           means: torch.Tensor | None = None):
    """Within the block, the model runs with the given heads removed.

    Args:
        model: a :class:`~headsim.model.load.LoadedModel`, or a model object :func:`~headsim.load_model` takes.
        heads: 0-based ``(layer, head)`` pairs; empty changes nothing.
        mode: ``"zero"`` sets the heads' Z to 0; ``"mean"`` sets it to ``means[layer, head]``.
        means: ``[n_layers, n_heads, d_head]`` mean head outputs (:func:`head_means`), for ``"mean"``.
    """
    require(mode in MODES, f"unknown ablation mode {mode!r}", f"use one of {', '.join(MODES)}")
    model = model if isinstance(model, LoadedModel) else as_loaded(model)
    chosen = check_heads(heads, model.n_layers, model.n_heads)
    if mode == "mean":
        expected = (model.n_layers, model.n_heads, model.d_head)
        require(means is not None and tuple(means.shape) == expected,
                f"mode 'mean' needs means of shape {expected}, got {None if means is None else tuple(means.shape)}",
                "compute them with headsim.ablation.head_means(model, texts)")
        means = means.to(model.device)
    d = model.d_head
    edits = {layer: (lambda z, hs=hs, fill=None if means is None else means[layer]: _replace(z, hs, d, fill))
             for layer, hs in chosen.items()}
    with _pre_hooks(model, edits):
        yield model


@contextmanager
def gates(model: LoadedModel):
    """Yield ξ ``[n_layers, n_heads]`` (ones, requires grad); within the block each head's Z is ξ·Z.

    After ``loss.backward()``, ``ξ.grad[l, h]`` is ∂loss/∂ξ at ξ = 1 (the model's own output).
    """
    xi = torch.ones(model.n_layers, model.n_heads, device=model.device, dtype=model.dtype, requires_grad=True)
    h, d = model.n_heads, model.d_head

    def gated(layer: int):
        return lambda z: (z.unflatten(-1, (h, d)) * xi[layer].to(z.dtype)[:, None]).flatten(-2)

    with _pre_hooks(model, {layer: gated(layer) for layer in range(model.n_layers)}):
        yield xi


def head_means(model: LoadedModel, texts: list[str], *, batch_size: int = 16) -> torch.Tensor:
    """Mean output vector of every head over the valid tokens of ``texts``: ``[L, H, d_head]``."""
    from ..model.embed import pad_batch, tokenize
    from ..model.tap import Tap

    tokens = tokenize(model, texts)
    sums = torch.zeros(model.n_layers, model.n_heads, model.d_head, dtype=torch.float64)
    count, tap, pad = 0, Tap(model), model.framing.pad
    for start in range(0, len(tokens), batch_size):
        ids, mask = pad_batch(list(tokens.ids[start:start + batch_size]), pad)
        weight = mask.to(model.device, torch.float64)[:, None, :, None]  # [B, 1, T, 1]

        def add(cap, weight=weight) -> None:
            sums[cap.layer] += (cap.head_outputs.double() * weight).sum((0, 2)).cpu()

        tap.run(ids, mask, add, right_padded=True)
        count += int(mask.sum())
    return (sums / count).float()
