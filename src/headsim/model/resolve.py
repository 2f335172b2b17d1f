"""Which entry reads a given model: its family's row of :data:`headsim.model.arch.ARCHS` (a multimodal
model's text stack read as its own family), else an entry read off the model's modules
(:func:`infer_arch`), or a one-line refusal naming the supported families (:func:`arch_for`)."""

from __future__ import annotations

from dataclasses import replace

from torch import nn

from ..errors import HeadsimError
from .arch import _BART, _BY_TYPE, REFUSED, Arch, Decoder, _uses_attention_interface, config_value, families

_STACKS = ("layers", "encoder.layer", "encoder.layers", "h", "transformer.h", "transformer.layer", "decoder.layers", "blocks",
           "model.layers", "block", "encoder.block")
_PROJECTIONS = ("o_proj", "out_proj", "c_proj", "dense", "o", "Wo", "out_lin", "output.dense",
                "output_projection.o_proj")  # the last: behind a gate module of its own (NeoMME)


def own_value_projection(module: nn.Module) -> str | None:
    """The name of an attention module's value projection (a linear layer), or ``None``."""
    for name in ("value", "v_lin", "v_proj", "v"):
        got = getattr(module, name, None)
        if isinstance(got, nn.Linear):
            return name
    return None


def infer_arch(model: nn.Module) -> Arch | None:
    """An entry read off an unlisted model's modules, or ``None``.

    Accepted only when the layout is unambiguous: one stack of ``num_hidden_layers`` layers; in a
    layer, one module that calls its attention through transformers' ``AttentionInterface`` (and
    whose modelling file defines the eager function the tap reads probabilities from), at the same
    path in every layer that has one (where only some layers have it, the stack is a hybrid one:
    :attr:`Arch.mixed`, the other layers are not analysed), else one
    attention module with a linear value projection of its own (BERT-like families that return
    their probabilities themselves); a linear output projection under a conventional name. Encoder-decoders are read at their encoder.
    """
    config = model.config
    got = _layer_list(model)
    if got is None:
        return None
    stack_path, layers_path, layers = got
    found = [[name for name, m in layer.named_modules() if name and _uses_attention_interface(m)] for layer in layers]
    attending = {tuple(f) for f in found if f}
    mixed = False
    if len(attending) == 1 and len(next(iter(attending))) == 1:  # one attention module, at every layer or some
        attention = list(next(iter(attending)))
        mixed = not all(found)
    else:
        attention = found[0]
    layer = layers[found.index(attention)] if attention in found else layers[0]
    interface = len(attention) == 1
    if not interface:  # an attention module of its own that returns (context, probabilities)
        attention = [name for name, m in layer.named_modules()
                     if name and "attention" in type(m).__name__.lower() and own_value_projection(m) is not None]
    if len(attention) != 1:
        return None
    attn_path = attention[0]
    attn = layer.get_submodule(attn_path)
    parent = attn_path.rsplit(".", 1)[0] if "." in attn_path else ""
    for candidate in [f"{attn_path}.{p}" for p in _PROJECTIONS] + ([f"{parent}.output.dense"] if parent else []):
        try:
            proj = layer.get_submodule(candidate)
        except AttributeError:
            continue
        if hasattr(proj, "weight") and proj.weight.ndim == 2:
            break
    else:
        return None
    causal = bool(getattr(attn, "is_causal", False)) and not stack_path
    return Arch(getattr(config, "model_type", "?"), (getattr(config, "model_type", "?"),), layers=layers_path,
                attention=attn_path, output_projection=candidate, stack=stack_path, causal=causal, interface=interface,
                decoder=_bart_like_decoder(model) if stack_path and interface else None,
                framing="auto", inferred=True, mixed=mixed,
                sinks="read off the module layout: see the family's own [CLS]/BOS and punctuation")


def _layer_list(model: nn.Module) -> tuple[str, str, nn.ModuleList] | None:
    """The stack an inferred entry reads (an encoder-decoder's encoder, else the model), the path of its
    ``num_hidden_layers`` layers and the layers; ``None`` where no such list is found."""
    config = model.config
    stack_path = "encoder" if getattr(config, "is_encoder_decoder", False) and hasattr(model, "encoder") else ""
    stack = model.get_submodule(stack_path) if stack_path else model
    n_layers = config_value(getattr(stack, "config", config), Arch.n_layers_attr)
    for layers_path in _STACKS:
        try:
            layers = stack.get_submodule(layers_path)
        except AttributeError:
            continue
        if isinstance(layers, nn.ModuleList) and len(layers) == n_layers and n_layers:
            return stack_path, layers_path, layers
    return None


def _unreadable(model: nn.Module) -> str:
    """Why :func:`infer_arch` found no layout, where it can say more than that: layers that call the
    attention function from several modules."""
    got = _layer_list(model)
    for layer in got[2] if got else []:
        callers = [name for name, m in layer.named_modules() if name and _uses_attention_interface(m)]
        if len(callers) > 1:
            return (f"its layers call the attention function from several modules ({', '.join(callers)}): besides "
                    "attention over the window's tokens, another attention (such as one over earlier layers' outputs) "
                    "that the tap cannot tell apart")
    return "its layout could not be read off its modules"


def arch_for(model: nn.Module) -> Arch:
    """The entry for a loaded model (from the table, else :func:`infer_arch`), or a clear refusal
    naming its class and the supported families."""
    config = model.config
    model_type = getattr(config, "model_type", "")
    if model_type in REFUSED:
        raise HeadsimError(f"not supported: {type(model).__name__} (model_type {model_type!r}): {REFUSED[model_type]}",
                           f"use a model of a supported family ({', '.join(families())}); `headsim models` lists them")
    found = _text_stack(model)
    if found is not None:  # a multimodal language model: its text stack, read as that family's
        name, text = found
        inner = arch_for(text)
        return replace(inner, stack=".".join(p for p in (name, inner.stack) if p),
                       family=f"{inner.family} (text stack of {model_type})")
    if model_type in REFUSED and model_type not in _BY_TYPE:
        raise HeadsimError(f"not supported: {type(model).__name__} (model_type {model_type!r}): {REFUSED[model_type]}",
                           f"use a model of a supported family ({', '.join(families())}); `headsim models` lists them")
    arch = _BY_TYPE.get(model_type) or infer_arch(model)
    if arch is not None and arch.causal_attr and getattr(config, arch.causal_attr, False):
        arch = replace(arch, causal=True)
    if arch is None:
        raise HeadsimError(
            f"not supported: {type(model).__name__} (model_type {model_type!r}) has no architecture entry and "
            + _unreadable(model),
            f"use a model of a supported family ({', '.join(families())}); `headsim models` lists them",
        )
    reason = arch.refuse(config) if arch.refuse is not None else None
    if reason is not None:
        raise HeadsimError(f"not supported: {type(model).__name__} (model_type {model_type!r}): {reason}",
                           f"use a model of a supported family ({', '.join(families())}); `headsim models` lists them")
    if getattr(config, "is_decoder", False) and not arch.causal:
        raise HeadsimError(f"not supported: {type(model).__name__} configured as a decoder (is_decoder=True)",
                           "load the model as a bidirectional encoder (is_decoder=False)")
    heads = [getattr(config, k, None) for k in ("encoder_attention_heads", "decoder_attention_heads",
                                                 "num_heads", "num_decoder_heads")]
    if arch.decoder is not None and len({h for h in heads if h is not None}) > 1:
        raise HeadsimError(f"not supported: {type(model).__name__} ({arch.family}) has encoder and decoder stacks with "
                           f"different numbers of heads ({', '.join(str(h) for h in heads if h is not None)})",
                           "use a model whose encoder and decoder have the same number of heads")
    try:
        layers = arch.layer_modules(model, 1)
        arch.output_projection_of(layers[0])
        arch.attention_of(layers[0])
    except (AttributeError, IndexError, TypeError) as exc:
        raise HeadsimError(f"{type(model).__name__} does not have the {arch.family} layout ({exc})",
                           "load the base model of the family (AutoModel), not a modified one") from exc
    return arch


def _bart_like_decoder(model: nn.Module) -> Decoder | None:
    """The decoder of an encoder-decoder laid out as BART's (``decoder.layers``, each with ``self_attn``
    and ``encoder_attn`` and their ``out_proj``), or ``None`` (its encoder is then read alone)."""
    got = _BART["decoder"]
    try:
        layer = model.get_submodule(got.layers)[0]
        for path in (got.self_attention, got.self_projection, got.cross_attention, got.cross_projection):
            layer.get_submodule(path)
    except (AttributeError, IndexError, TypeError):
        return None
    return got if all(_uses_attention_interface(layer.get_submodule(p)) for p in (got.self_attention,
                                                                                    got.cross_attention)) else None


#: where a multimodal model keeps its language model (ModernVBERT and UltraVBERT: ``text_model``)
TEXT_STACKS = ("language_model", "text_model")


def _text_stack(model: nn.Module) -> tuple[str, nn.Module] | None:
    """A multimodal model's language model and its path (Llava, Qwen2-VL, Gemma 3, Qwen2-Audio,
    Voxtral …: a ``language_model`` beside vision or audio towers; ModernVBERT: a ``text_model``
    beside a ``vision_model``), or ``None``. A language model with a head (Llama 4's
    ``Llama4ForCausalLM``) is read at its base model (``language_model.model``)."""
    for name in TEXT_STACKS:
        text = getattr(model, name, None)
        if name == "text_model" and not hasattr(model, "vision_model"):
            continue  # a model's own text encoder (CLIP-like towers) is not a language model beside others
        if not (isinstance(text, nn.Module) and hasattr(text, "config") and text is not model):
            continue
        base = getattr(text, "model", None)
        if isinstance(base, nn.Module) and hasattr(base, "config") and hasattr(text, "lm_head"):
            return f"{name}.model", base
        return name, text
    return None
