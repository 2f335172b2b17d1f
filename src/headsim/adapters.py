"""Declarative adapters: where each architecture keeps the tensors headsim reads.

An adapter names, for one family of encoders, the module paths of the layer stack and of each
layer's query/key/value projections and attention output projection, plus the einops pattern
that splits a projection's output into heads. The core (:mod:`headsim.capture`) reads only these
generic names, so adding an architecture is one entry in :data:`ADAPTERS`, never a special case
in the core.

Tensor layouts (einops names): ``batch seq (head d_head)`` is what the projections emit and what
the attention output projection receives; headsim works in ``batch head seq d_head``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .errors import HeadsimError

#: einops pattern from a projection's output to per-head vectors.
SPLIT_HEADS = "batch seq (head d_head) -> batch head seq d_head"


@dataclass(frozen=True)
class Adapter:
    """Where one architecture keeps its attention tensors.

    Attributes:
        name: architecture family, e.g. ``"bert"``.
        layers: path from the base model to the ``nn.ModuleList`` of encoder layers.
        query, key, value: paths from one layer to its Q/K/V ``nn.Linear`` projections.
        head_output: path from one layer to the attention output projection; its *input* is the
            concatenation of every head's context vectors (the paper's head outputs).
        n_heads_attr, hidden_attr, n_layers_attr: config attributes with those sizes.
    """

    name: str
    layers: str = "encoder.layer"
    query: str = "attention.self.query"
    key: str = "attention.self.key"
    value: str = "attention.self.value"
    head_output: str = "attention.output.dense"
    n_heads_attr: str = "num_attention_heads"
    hidden_attr: str = "hidden_size"
    n_layers_attr: str = "num_hidden_layers"

    def layer_modules(self, model: nn.Module) -> nn.ModuleList:
        """The encoder's layer stack."""
        return model.get_submodule(self.layers)

    def attention_of(self, layer: nn.Module) -> nn.Module:
        """The module that owns the Q/K/V projections and calls the attention function."""
        return layer.get_submodule(self.query.rsplit(".", 1)[0]) if "." in self.query else layer

    def modules_of(self, layer: nn.Module) -> dict[str, nn.Linear]:
        """The projections of one layer, by generic name."""
        return {
            role: layer.get_submodule(getattr(self, role))
            for role in ("query", "key", "value", "head_output")
        }


_BERT_LAYOUT = Adapter("bert")

#: model_type (from the Hugging Face config) → adapter. All of these share BERT's module layout.
ADAPTERS: dict[str, Adapter] = {
    "bert": _BERT_LAYOUT,
    "roberta": Adapter("roberta"),
    "xlm-roberta": Adapter("xlm-roberta"),
    "camembert": Adapter("camembert"),
    "electra": Adapter("electra"),
    "data2vec-text": Adapter("data2vec-text"),
}


def _has_bert_layout(model: nn.Module, adapter: Adapter) -> bool:
    try:
        layers = adapter.layer_modules(model)
        mods = adapter.modules_of(layers[0])
    except (AttributeError, IndexError, TypeError):
        return False
    return all(isinstance(m, nn.Linear) for m in mods.values())


def adapter_for(model: nn.Module) -> Adapter:
    """The adapter for a loaded base model, or a clear error if headsim cannot read it.

    Known model types use their entry in :data:`ADAPTERS`; any other model whose modules have the
    BERT self-attention layout is accepted with that layout. Models whose attention does not
    follow plain scaled dot-product attention over absolute positions are refused.
    """
    config = model.config
    model_type = getattr(config, "model_type", "")
    adapter = ADAPTERS.get(model_type, Adapter(model_type or "bert-layout"))
    if not _has_bert_layout(model, adapter):
        raise HeadsimError(
            f"not supported yet: {type(model).__name__} (model_type {model_type!r})",
            "headsim reads encoders with the BERT self-attention layout (BERT, RoBERTa, MiniLM, "
            "ELECTRA, XLM-R); pass one of those",
            status=422,
        )
    position_type = getattr(config, "position_embedding_type", "absolute")
    if position_type not in (None, "absolute"):
        raise HeadsimError(
            f"not supported yet: {type(model).__name__} with position_embedding_type={position_type!r}",
            "headsim recomputes attention as softmax(QK^T/sqrt(d)); relative position scores are not "
            "modelled — use a model with absolute position embeddings",
        )
    if getattr(config, "is_decoder", False):
        raise HeadsimError(
            f"not supported yet: {type(model).__name__} configured as a decoder",
            "load the model as a bidirectional encoder (is_decoder=False)",
        )
    return adapter
