"""The only place the ablation package runs a model or looks up where its heads are.

Two functions, so that one change redirects the whole package to another forward driver:
:func:`hidden_states` runs the encoder (with or without gradients) and :func:`output_projection`
finds the module whose *input* holds every head's output vectors Z of one layer.
"""

from __future__ import annotations

import torch
from torch import nn

from ..models import LoadedModel


def output_projection(loaded: LoadedModel, layer: int) -> nn.Module:
    """The attention output projection of 0-based ``layer``; its input is ``[B, T, H·d_head]``."""
    adapter = loaded.adapter
    return adapter.modules_of(adapter.layer_modules(loaded.model)[layer])["head_output"]


def hidden_states(loaded: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                  grad: bool = False) -> torch.Tensor:
    """The encoder's last hidden state ``[B, T, D]`` for one batch.

    ``grad=False`` runs under ``torch.inference_mode``; ``grad=True`` keeps the autograd graph, so a
    loss on the result can be differentiated with respect to tensors the hooks put into it (the
    model's own weights stay frozen).
    """
    ids = torch.as_tensor(input_ids, device=loaded.device)
    mask = torch.as_tensor(attention_mask, device=loaded.device)
    if grad:
        with torch.enable_grad():
            return loaded.model(input_ids=ids, attention_mask=mask).last_hidden_state
    with torch.inference_mode():
        return loaded.model(input_ids=ids, attention_mask=mask).last_hidden_state
