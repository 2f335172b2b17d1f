"""Forward hooks that capture each head's queries, keys, values and output vectors.

The model runs as loaded (its own attention kernel, SDPA included); hooks on the Q/K/V
projections and a pre-hook on the attention output projection read the tensors on the way. The
attention probabilities are recomputed from the captured queries and keys only when asked for,
so a statistic that needs none of them never pays for a T×T softmax.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
from einops import rearrange

from .adapters import SPLIT_HEADS
from .models import LoadedModel

ROLES = ("query", "key", "value", "head_output")
Sink = Callable[[int, str, torch.Tensor], None]


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``batch seq (head d_head)`` → ``batch head seq d_head``."""
    return rearrange(x, SPLIT_HEADS, head=n_heads)


@contextmanager
def hooks(loaded: LoadedModel, sink: Sink, roles: Sequence[str] = ("query", "key", "head_output"),
          layers: Sequence[int] | None = None):
    """Register hooks that send ``(layer, role, tensor[batch, head, seq, d_head])`` to ``sink``.

    ``role`` is one of :data:`ROLES`; ``head_output`` is the input of the attention output
    projection (every head's context vectors, the paper's head outputs).
    """
    adapter, n_heads = loaded.adapter, loaded.n_heads
    stack = adapter.layer_modules(loaded.model)
    chosen = range(len(stack)) if layers is None else layers
    handles = []

    def on_output(li: int, role: str):
        return lambda _m, _inp, out: sink(li, role, split_heads(out, n_heads))

    def on_input(li: int, role: str):
        return lambda _m, inp: sink(li, role, split_heads(inp[0], n_heads))

    try:
        for li in chosen:
            mods = adapter.modules_of(stack[li])
            for role in roles:
                if role == "head_output":
                    handles.append(mods[role].register_forward_pre_hook(on_input(li, role)))
                else:
                    handles.append(mods[role].register_forward_hook(on_output(li, role)))
        yield
    finally:
        for h in handles:
            h.remove()


def attention_probs(query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor,
                    padded: bool | None = None, scale: float | None = None) -> torch.Tensor:
    """softmax(QKᵀ/√d) over valid keys, in float32: ``[batch, head, seq, seq]``.

    Rows of padded queries are computed like the model does (they attend to the valid keys).
    The scale is applied to the queries (a ``[seq, d]`` pass instead of a ``[seq, seq]`` one) and
    the additive key mask only where a window has padding (``padded``, when the caller knows it,
    spares a device synchronisation). ``scale`` defaults to 1/√d, as in every BERT-layout model.
    """
    q = query.float() * (query.shape[-1] ** -0.5 if scale is None else scale)
    scores = torch.matmul(q, key.float().transpose(-1, -2))
    valid = attention_mask.bool()
    if (not bool(valid.all())) if padded is None else padded:
        bias = torch.zeros(valid.shape, dtype=scores.dtype, device=scores.device)
        bias.masked_fill_(~valid, torch.finfo(scores.dtype).min)
        scores.add_(bias[:, None, None, :])  # additive mask, as the model's own kernels apply it
    return torch.softmax(scores, dim=-1)


_ACTIVE = threading.local()
_NAME = "headsim"
OwnAttention = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor, "float | None"], torch.Tensor]


def _attention_function(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """What transformers calls as the attention of a model switched to headsim's (see :func:`own_attention`)."""
    fn, layer_of = _ACTIVE.current
    out = fn(layer_of[id(module)], query, key, value, scaling)  # [batch, head, seq, d_head]
    return out.transpose(1, 2).contiguous(), None


@contextmanager
def own_attention(loaded: LoadedModel, fn: OwnAttention):
    """Compute the model's attention with ``fn`` instead of its own kernel, for one forward pass.

    ``fn(layer, query, key, value, scale)`` gets each layer's ``[batch, head, seq, d_head]`` tensors and
    returns the head outputs (softmax(QKᵀ·scale)·V over valid keys) that the model then uses, so a
    caller that needs the attention probabilities anyway computes them once, not twice. Yields
    ``False`` (nothing switched) where transformers has no attention-function registry; the caller
    then falls back to :func:`hooks`. The key mask is the caller's own (encoders mask padded keys only).
    """
    try:
        from transformers import AttentionInterface
    except ImportError:
        yield False
        return
    AttentionInterface.register(_NAME, _attention_function)
    stack = loaded.adapter.layer_modules(loaded.model)
    layer_of = {id(loaded.adapter.attention_of(layer)): li for li, layer in enumerate(stack)}
    config = loaded.model.config
    previous = getattr(config, "_attn_implementation", None)
    if previous is None:
        yield False
        return
    _ACTIVE.current = (fn, layer_of)
    config._attn_implementation = _NAME
    try:
        yield True
    finally:
        config._attn_implementation = previous
        _ACTIVE.current = None


def forward(loaded: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
    """Run the encoder once (no gradients); results arrive through hooks."""
    with torch.inference_mode():
        loaded.model(input_ids=input_ids, attention_mask=attention_mask)


def capture(loaded: LoadedModel, input_ids, attention_mask, roles: Sequence[str] = ("query", "key", "head_output"),
            layers: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
    """Run one batch and return each role stacked over layers: ``[batch, layer, head, seq, d_head]``."""
    got: dict[str, dict[int, torch.Tensor]] = {r: {} for r in roles}
    ids = torch.as_tensor(input_ids, device=loaded.device)
    mask = torch.as_tensor(attention_mask, device=loaded.device)
    with hooks(loaded, lambda li, role, t: got[role].__setitem__(li, t), roles, layers):
        forward(loaded, ids, mask)
    return {r: torch.stack([got[r][li] for li in sorted(got[r])], dim=1) for r in roles}
