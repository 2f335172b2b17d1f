"""A model's layers and heads read from its config alone, before any weights are (for checks that
must not wait for a slow load: `headsim inspect --layer 40` on a 32-layer model)."""

from __future__ import annotations

import os

import torch


def head_counts(name_or_path: str | os.PathLike | None) -> tuple[int, int] | None:
    """``(layers, heads)`` the loaded model will report (:attr:`LoadedModel.n_layers`,
    :attr:`LoadedModel.n_heads`), from the config of the embedded model or a local directory: the
    model is built on the meta device (no memory, no weights read). ``None`` for a hub id (its files
    are fetched with the model) or a config this cannot read: the load then checks, and says why."""
    from .resolve import arch_for
    from .load import LoadedModel, _quiet_transformers, _resolve_source

    name, source, on_hub = _resolve_source(name_or_path)
    if on_hub:
        return None
    _quiet_transformers()
    from transformers import AutoConfig, AutoModel

    try:
        config = AutoConfig.from_pretrained(source, local_files_only=True, trust_remote_code=False)
        if getattr(config, "auto_map", None):
            return None
        with torch.device("meta"):
            model = AutoModel.from_config(config, trust_remote_code=False)
        shell = LoadedModel(model, None, arch_for(model), name, source)
        return shell.n_layers, shell.n_heads
    except Exception:  # noqa: BLE001 - any config the load itself refuses, with its own message
        return None
