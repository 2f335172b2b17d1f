"""Checking a family against itself: tiny random-weight models and the tap's three exactness checks.

Used by ``tests/test_architectures.py`` (one row per family) and ``benchmarks/family_coverage.py`` (every
text model type of the installed transformers). Each check compares the tap with the model run
directly (no headsim code on the reference side, except the tap's own capture of the values the
attention function receives):

- ``attention``: the tap's probabilities against the eager model's ``output_attentions`` (their
  softmax where the family returns pre-softmax scores there: ``Arch.scores``);
- ``head_outputs``: the tap's Z against eager probabilities × values in float64 (grouped key/value
  heads expanded to their query heads);
- ``invariance``: one window alone, inside a padded batch, and left-padded, give the same numbers.

Every error is a maximum absolute difference over valid positions; for head outputs it is relative
to the largest head output of the batch when that exceeds 1 (families without 1/√d scaling, such as
T5, reach magnitudes where float32 summation order alone moves values by more than 1e-5).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import HeadsimError
from .tap import Tap, _configs, _implementation, capture, local_to_dense
from .tiny import DROP, MULTIMODAL, OVERRIDES, RULES, SMALL, TOWER, TOWERED, VOCAB  # noqa: F401 (re-exported)


def _defaults(model_type: str):
    """The family's config class with its own defaults (``None`` where it does not build bare)."""
    from transformers import CONFIG_MAPPING

    try:
        return CONFIG_MAPPING[model_type]()
    except Exception:  # noqa: BLE001 (a config class that needs arguments: no rule applies)
        return None


def tiny_config_kwargs(model_type: str, **overrides) -> dict:
    """The config arguments of a tiny ``model_type``: :data:`SMALL` (or the whole config of a
    multimodal model), the :data:`RULES` its config class matches, the family's :data:`OVERRIDES`
    and ``overrides``."""
    kwargs = dict(MULTIMODAL[model_type]) if model_type in MULTIMODAL else dict(SMALL)
    defaults = _defaults(model_type) if model_type not in MULTIMODAL else None
    for names, sizes in RULES:
        if defaults is not None and any(_attr(defaults, n) is not None for n in names):
            kwargs.update({k: v for k, v in sizes.items() if k == "head_dim" or _has(defaults, k)})
    kwargs.update(OVERRIDES.get(model_type, {}))
    kwargs.update(overrides)
    return {k: v for k, v in kwargs.items() if v is not DROP}


def _attr(config, name: str):
    """``getattr(config, name, None)``, also where a config refuses a global read of a name that may
    vary per layer (it is then present)."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 (transformers' per-layer attribute error)
        return True


def _has(config, name: str) -> bool:
    """``hasattr(config, name)``, also for a name that may vary per layer."""
    try:
        return hasattr(config, name)
    except Exception:  # noqa: BLE001 (transformers' per-layer attribute error)
        return True


def _scaled_tower(own: dict) -> dict:
    """A tower's config dict at :data:`TOWER` sizes wherever it has the name, and so each config
    nested in it (an audio tower's encoder, a patcher's ...)."""
    depth = own.get("num_hidden_layers")
    own = dict(own, **{k: v for k, v in TOWER.items() if k in own})
    own.pop("layer_types", None)
    n = own.get("num_hidden_layers")
    for k, v in own.items():
        if isinstance(v, dict) and "model_type" in v:
            own[k] = _scaled_tower(v)
        elif depth != n and isinstance(v, list) and len(v) == depth:  # one entry per layer: the first layers'
            own[k] = v[:n]
        elif depth != n and k == "per_layer_config" and isinstance(v, dict):
            own[k] = {i: c for i, c in v.items() if int(i) < n}
    return own


def _composite_kwargs(model_type: str) -> dict | None:
    """A composite model's config arguments (a language model beside vision / audio towers, named
    ``text_config``): a tiny text stack of its own family, each tower at :data:`TOWER` sizes
    (:func:`_scaled_tower`); for a model of :data:`TOWERED` (sub-configs but no ``text_config``), its
    tiny sizes with every sub-config scaled so; ``None`` for a model of one stack."""
    defaults = _defaults(model_type)
    text = getattr(defaults, "text_config", None)
    if (text is None and model_type not in TOWERED) or model_type in MULTIMODAL:
        return None
    if text is None:
        kwargs = tiny_config_kwargs(model_type)
    else:
        kwargs = {"text_config": dict(tiny_config_kwargs(text.model_type), model_type=text.model_type)}
    for name in getattr(defaults, "sub_configs", {}):
        tower = getattr(defaults, name, None)
        if name != "text_config" and tower is not None and hasattr(tower, "to_dict"):
            kwargs[name] = _scaled_tower(tower.to_dict())
    return kwargs


def _merged(sizes: dict, overrides: dict) -> dict:
    """``sizes`` updated by ``overrides``, a nested dict of both merged (a tower's one size named)."""
    return {**sizes, **{k: _merged(sizes[k], v) if isinstance(v, dict) and isinstance(sizes.get(k), dict) else v
                        for k, v in overrides.items()}}


def tiny_config(model_type: str, **overrides):
    """The config of a tiny ``model_type`` (:func:`tiny_config_kwargs`; a composite model's towers
    scaled down as :func:`_composite_kwargs` says, updated by the family's :data:`OVERRIDES`)."""
    from transformers import AutoConfig

    composite = _composite_kwargs(model_type)
    if composite is not None:  # a family's overrides of a tower update its scaled sizes
        return AutoConfig.for_model(model_type, **_merged(composite, dict(OVERRIDES.get(model_type, {}), **overrides)))
    return AutoConfig.for_model(model_type, **tiny_config_kwargs(model_type, **overrides))


def tiny_model(model_type: str, seed: int = 0, **overrides):
    """A tiny random-weight base model of ``model_type`` (weights scaled up so attention is far from
    uniform), and a copy with the same weights running eager attention."""
    from transformers import AutoModel

    config = tiny_config(model_type, **overrides)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(3.0)
    eager = copy.deepcopy(model)
    for c in _configs(eager):
        c._attn_implementation_internal = "eager"
    return model, eager


def random_batch(seed: int = 0, lengths=(12, 7, 3), vocab: int = VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids, right-padded rows of ``lengths`` valid tokens (padding id 0)."""
    rng = np.random.default_rng(seed)
    t = max(lengths)
    ids = rng.integers(3, vocab, size=(len(lengths), t))
    mask = (np.arange(t)[None, :] < np.asarray(lengths)[:, None]).astype(np.int64)
    ids[:, 0] = 1
    return torch.as_tensor(ids * mask), torch.as_tensor(mask)


def eager_attentions(loaded, eager, ids, mask) -> list[torch.Tensor]:
    """``output_attentions`` of the eager copy's analysed stack (``None``: the model itself, switched
    to eager attention for this pass), float64, one ``[B, H, T, T]`` per layer."""
    return _eager_pass(loaded, eager, ids, mask)[0]


def _eager_pass(loaded, eager, ids, mask) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """:func:`eager_attentions`, and what each layer's attention output projection received in the
    same pass (``[B, T, H·d]`` float64, in call order)."""
    model = loaded.model if eager is None else eager
    received: list[torch.Tensor] = []
    first = loaded.arch.time_first  # [T, B, …]: read as [B, T, …]
    hooks = [m.register_forward_pre_hook(lambda _m, args: received.append(
        (args[0].transpose(0, 1) if first else args[0]).detach().double()))
             for m in loaded.arch.output_projections(model, loaded.n_layers)]
    try:
        with torch.no_grad(), _implementation(model, "eager" if eager is None else None):
            if loaded.arch.decoder is None:
                got = loaded.arch.stack_of(model)(input_ids=ids, attention_mask=mask, output_attentions=True,
                                                  **loaded.arch.forward_kwargs()).attentions
            else:  # the tap's order: encoder layers, then each decoder layer's self- and cross-attention
                out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids, decoder_attention_mask=mask,
                            output_attentions=True, use_cache=False)
                got = None if out.encoder_attentions is None else (
                    list(out.encoder_attentions) + [a for pair in zip(out.decoder_attentions, out.cross_attentions) for a in pair])
    finally:
        for h in hooks:
            h.remove()
    arch = loaded.arch
    if arch.mixed and got is not None and len(got) == arch.stack_depth(model) != loaded.n_layers:
        got = [got[i] for i in arch.model_layers(model)]  # a map per layer (MiniMax's lightning layers too): the attending ones
    if got is None or len(got) != loaded.n_layers or len(received) != loaded.n_layers:
        raise AssertionError(f"the eager model returned {0 if got is None else len(got)} attention maps and called "
                             f"its output projections {len(received)} times for {loaded.n_layers} layers")
    if loaded.arch.layout != "dense":  # local attention's own layout, as [B, H, T, T] (tap.local_to_dense)
        got = [local_to_dense(a, loaded.arch.layout, ids.shape[1]) for a in got]
    return [a.double().softmax(-1) if loaded.arch.scores else a.double() for a in got], received


def _heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """``[B, T, n·d]`` → ``[B, n, T, d]``."""
    return x.view(*x.shape[:2], n, -1).transpose(1, 2)


def _falcon_values(attn, out: torch.Tensor) -> torch.Tensor:
    _, value = attn._split_heads(out)[1:]
    return value.transpose(1, 2)


#: outside the attention interface the values come from a forward hook on a projection (path from
#: the attention module) and are read off its output as the family's own code splits it: ``(path,
#: read(attention module, output) → [B, H_kv, T, d])``
VALUE_PROJECTIONS: dict[str, tuple[str, Callable]] = {
    "deberta-v2": ("value_proj", lambda a, o: _heads(o, a.num_attention_heads)),
    "mpnet": ("v", lambda a, o: _heads(o, a.num_attention_heads)),
    "xglm": ("v_proj", lambda a, o: _heads(o, a.num_heads)),
    "prophetnet": ("value_proj", lambda a, o: _heads(o, a.num_attn_heads)),
    "mpt": ("Wqkv", lambda a, o: _heads(o.chunk(3, dim=2)[2], a.n_heads)),
    "bloom": ("query_key_value", lambda a, o: o.view(*o.shape[:2], a.num_heads, 3, a.head_dim)[..., 2, :].transpose(1, 2)),
    "falcon": ("query_key_value", _falcon_values),
    "openai-gpt": ("c_attn", lambda a, o: _heads(o.split(a.split_size, dim=2)[2], a.n_head)),
    "gpt_neox_japanese": ("query_key_value", lambda a, o: o.view(*o.shape[:2], a.num_attention_heads, 3 * a.head_size)
                          [..., 2 * a.head_size:].transpose(1, 2)),
    "ibert": ("value_activation", lambda a, o: _heads(o[0], a.num_attention_heads)),
    "big_bird": ("self.value", lambda a, o: _heads(o, a.config.num_attention_heads)),
    "luke": ("value", lambda a, o: _heads(o, a.num_attention_heads)),
    "fsmt": ("v_proj", lambda a, o: _heads(o.transpose(0, 1), a.num_heads)),
    "longformer": ("value", lambda a, o: _heads(o.transpose(0, 1), a.num_heads)),
    "longt5": ("v", lambda a, o: _heads(o, a.n_heads)),
    "deberta": ("in_proj", lambda a, o: _heads(o, a.num_attention_heads).chunk(3, dim=-1)[2]
                + a.transpose_for_scores(a.v_bias[None, None, :])),
}


def _own_values(loaded, attn) -> tuple[str, Callable]:
    """An attention module outside the interface without a :data:`VALUE_PROJECTIONS` row (inferred
    entries; the decoders of encoder-decoders read through their modules): its own value
    projection, split into ``n_heads`` heads."""
    from .resolve import own_value_projection

    return own_value_projection(attn), lambda a, o: _heads(o, loaded.n_heads)


def values(loaded, ids, mask) -> list[torch.Tensor]:
    """Each layer's values ``[B, H_kv, T, d]`` as the attention receives them (float64)."""
    if loaded.arch.interface:
        got = Tap(loaded, qkv=True, head_outputs=False).run(ids, mask).layers
        return [got[i].value.double() for i in range(loaded.n_layers)]
    out: list[torch.Tensor] = []
    hooks = []
    for attn in loaded.arch.attention_modules(loaded.model, loaded.n_layers):
        path, read = VALUE_PROJECTIONS.get(loaded.config.model_type) or _own_values(loaded, attn)
        hooks.append(attn.get_submodule(path).register_forward_hook(
            lambda m, a, o, attn=attn, read=read: out.append(read(attn, o))))
    try:
        with torch.no_grad(), _implementation(loaded.model, "eager"):  # as the tap runs these families
            if loaded.arch.decoder is None:
                loaded.arch.stack_of(loaded.model)(input_ids=ids, attention_mask=mask, **loaded.arch.forward_kwargs())
            else:
                loaded.model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids, decoder_attention_mask=mask,
                             use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return [v[..., :ids.shape[1], :].double() for v in out]  # the window's positions (Longformer pads to whole bands)


@dataclass
class Verification:
    """Largest absolute differences found by each check."""

    attention: float
    head_outputs: float  # Z against eager probabilities × values
    invariance: float
    causal_upper: float  # attention above the diagonal of valid rows (causal families: must be 0)
    projection: float = 0.0  # Z against what the eager model's output projection received
    #: how far the attention of valid rows is from probabilities: negative entries, or a row over the
    #: valid keys summing above 1 (below 1 is allowed: attention sinks take the rest). Catches a family
    #: whose module hands out scores where both the tap and the eager reference read them
    distribution: float = 0.0

    @property
    def worst(self) -> float:
        """The largest difference of all checks."""
        return max(self.attention, self.head_outputs, self.invariance, self.causal_upper, self.projection,
                   self.distribution)

    def exact(self, tol: float = 1e-5) -> bool:
        return self.worst <= tol

    @property
    def worst_at_projection(self) -> float:
        """The largest difference but for probabilities × values: for families that change a head's
        output between attention and the output projection (a gate, a norm), whose Z is what the
        projection receives."""
        return max(self.attention, self.invariance, self.causal_upper, self.projection, self.distribution)

    def exact_at_projection(self, tol: float = 1e-5) -> bool:
        return self.worst_at_projection <= tol


def _valid_block(x: torch.Tensor, b: int, n: int, square: bool) -> torch.Tensor:
    return x[b, ..., :n, :n] if square else x[b, ..., :n, :]


def verify(loaded, eager=None, seed: int = 0) -> Verification:
    """Run the three checks on random batches of the model's vocabulary (``eager``: a copy running
    eager attention; ``None``: the model itself, switched to eager attention for the reference)."""
    vocab = int(getattr(loaded.config, "vocab_size", VOCAB) or VOCAB)
    ids, mask = random_batch(seed, vocab=vocab)
    rows = mask.bool()
    got = capture(loaded, ids, mask, attention=True)
    att, z = got["attention"].double(), got["head_outputs"].double()  # [B, L, H, T, T], [B, L, H, T, d]
    want, received = _eager_pass(loaded, eager, ids, mask)
    want = torch.stack(want, dim=1)
    vals = values(loaded, ids, mask)
    err_att = err_z = err_dist = 0.0
    for b in range(ids.shape[0]):
        n = int(rows[b].sum())
        block = _valid_block(att, b, n, True)
        err_att = max(err_att, float((block - _valid_block(want, b, n, True)).abs().max()))
        err_dist = max(err_dist, float((-block).clamp_min(0).max()), float((block.sum(-1) - 1).clamp_min(0).max()))
    for li in range(loaded.n_layers):
        v = vals[li].repeat_interleave(loaded.n_heads // vals[li].shape[1], dim=1)
        ref = want[:, li] @ v
        for b in range(ids.shape[0]):
            n = int(rows[b].sum())
            err_z = max(err_z, float((z[b, li, :, :n] - ref[b, :, :n]).abs().max()))
    scale = max(1.0, float(z.abs().max()))
    err_z /= scale
    err_proj = 0.0
    for li, x in enumerate(received):
        ref = _heads(x, loaded.n_heads)
        for b in range(ids.shape[0]):
            n = int(rows[b].sum())
            err_proj = max(err_proj, float((z[b, li, :, :n] - ref[b, :, :n]).abs().max()) / scale)
    upper = torch.triu(torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool), 1) & rows[:, None, None, :, None]
    causal = [li for li, stack in enumerate(loaded.stacks) if loaded.arch.causal or stack == "decoder self"]
    causal_upper = float(att[:, causal].masked_select(upper).abs().max()) if causal else 0.0
    # invariance: window 1 alone, in the batch, and left-padded by 5
    n = int(rows[1].sum())
    alone = capture(loaded, ids[1:2, :n], mask[1:2, :n])
    left = capture(loaded, torch.roll(ids, 5, dims=1), torch.roll(mask, 5, dims=1))
    err_inv = 0.0
    for role in ("attention", "head_outputs"):
        unit = 1.0 if role == "attention" else scale
        full = got[role][1].double()
        one = alone[role][0].double()
        shifted = torch.roll(left[role][1].double(), -5, dims=2)
        if role == "attention":
            shifted = torch.roll(shifted, -5, dims=3)[..., :n, :n]
            full = full[..., :n, :n]
        else:
            shifted, full = shifted[:, :, :n], full[:, :, :n]
        err_inv = max(err_inv, float((full - one).abs().max()) / unit, float((shifted - full).abs().max()) / unit)
    return Verification(err_att, err_z, err_inv, causal_upper, err_proj, err_dist)


def self_check(loaded, tol: float | None = None) -> Verification:
    """Check a model whose entry was read off its modules (:func:`headsim.model.resolve.infer_arch`) on a
    few random tokens of its own weights, before anything is analysed: a clear refusal where the
    tap does not reproduce its attention and what its output projections receive (``tol``: 1e-4 in float32, 3e-2 in half
    precision)."""
    tol = (1e-4 if loaded.dtype == torch.float32 else 3e-2) if tol is None else tol
    try:
        got = verify(loaded)
    except HeadsimError:
        raise
    except Exception as exc:  # noqa: BLE001 (any failure means the inferred layout is wrong)
        raise HeadsimError(f"not supported: {type(loaded.model).__name__} has no architecture entry, and the layout read off "
                           f"its modules does not run ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})",
                           "use a model of a supported family; `headsim models` lists them") from exc
    worst = got.worst_at_projection
    if not worst <= tol:
        raise HeadsimError(f"not supported: {type(loaded.model).__name__} has no architecture entry, and the layout read off "
                           f"its modules does not reproduce its attention exactly (largest difference {worst:.1e})",
                           "use a model of a supported family; `headsim models` lists them")
    return got
