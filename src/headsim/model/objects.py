"""Models already in memory: the transformers model headsim reads inside an object a user holds, and
the object's provenance (class, config, adapters, a fingerprint of the weights).

:func:`unwrap` accepts a transformers model (a base model or one with a head, whose base is read), a
PEFT model (its adapters as the user set them: active or not, merged or not), a model placed by
accelerate's ``device_map``, nnsight's ``LanguageModel`` and TransformerLens' ``TransformerBridge``
(each read through the transformers model it holds); anything else, and quantised weights, are refused
in one line. Nothing here changes the object: :meth:`headsim.model.load.LoadedModel.reading` switches
a model found in train mode to eval mode for each pass and back.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import HeadsimError, require

#: what ``model=`` accepts, in the words of the refusals
ACCEPTED = ("a name, a local directory or a hub id; a transformers model (AutoModel, or one with a head); a PEFT "
            "model; nnsight's LanguageModel; or TransformerLens' TransformerBridge")
#: elements of a tensor reduced at a time by :func:`fingerprint`, as rows of :data:`WIDTH` (a multiple of it)
CHUNK = 1 << 22
WIDTH = 1024


@dataclass
class Unwrapped:
    """What :func:`unwrap` found: the ``base`` model the tap reads, the tokenizer a wrapper carries (or
    ``None``), the config's ``name_or_path`` (``""``: none) and the object's provenance record."""

    base: nn.Module
    tokenizer: object | None
    name_or_path: str
    record: dict = field(default_factory=dict)


def _is(obj, package: str, attr: str) -> bool:
    return type(obj).__module__.split(".")[0] == package and hasattr(obj, attr)


def unwrap(obj) -> Unwrapped:
    """The transformers base model inside ``obj`` and its provenance; a one-line refusal for anything
    else (naming :data:`ACCEPTED`) and for quantised weights."""
    given, wrapper, tokenizer = type(obj), None, None
    if _is(obj, "nnsight", "_module"):  # an nnsight LanguageModel (an Envoy around the model)
        wrapper, tokenizer = f"nnsight {given.__name__}", getattr(obj, "tokenizer", None)
        if not getattr(obj, "dispatched", True) and hasattr(obj, "dispatch"):
            obj.dispatch()  # loaded lazily on the meta device: nnsight loads its weights at the first trace too
        obj = obj._module
    elif _is(obj, "transformer_lens", "original_model"):  # a TransformerBridge (bridge modules inside the HF tree)
        wrapper, tokenizer = f"TransformerLens {given.__name__}", getattr(obj, "tokenizer", None)
        obj = unbridged(obj.__dict__.get("original_model") or obj.original_model)
    require(isinstance(obj, nn.Module) and hasattr(obj, "config"),
            f"model= got a {given.__module__}.{given.__name__}, which headsim cannot read",
            f"pass {ACCEPTED}")
    adapters: list[dict] = []
    if _is(obj, "peft", "get_base_model"):  # a PeftModel: read with its adapters as they are set
        adapters = peft_adapters(obj)
        obj = obj.get_base_model()
    check_not_quantised_object(obj)
    base = getattr(obj, "base_model", obj)  # transformers: the model under a head (itself for a base model)
    base = base if isinstance(base, nn.Module) and hasattr(base, "config") else obj
    config = base.config
    name = str(getattr(config, "name_or_path", "") or getattr(config, "_name_or_path", "") or "")
    record = {"class": f"{given.__module__.split('.')[0]}.{given.__name__}", "wrapper": wrapper,
              "head_class": type(obj).__name__ if obj is not base else None, "name_or_path": name or None,
              "config": _config_record(config), "adapters": adapters,
              "device_map": {k: str(v) for k, v in (getattr(obj, "hf_device_map", None) or {}).items()} or None}
    return Unwrapped(base, tokenizer, name, record)


def check_not_quantised_object(model: nn.Module) -> None:
    """A model quantised in memory (bitsandbytes, GPTQ, AWQ …: a ``quantization_config`` or a quantizer)
    is refused, as a quantised checkpoint is (whose config :func:`headsim.model.load.check_not_quantised`
    reads)."""
    quantised = getattr(model, "is_quantized", False) or getattr(model, "hf_quantizer", None) is not None
    if quantised and not getattr(model.config, "quantization_config", None):
        raise HeadsimError(f"{type(model).__name__} holds quantised weights: headsim does not measure quantised weights "
                           "(their capture is not verified, so the numbers could silently differ)",
                           "load the unquantised model, in bf16 (and with device_map='auto' to fit it)")


def _config_record(config) -> dict:
    """The config as run.json keeps it: what differs from the family's defaults (``to_diff_dict``)."""
    try:
        return json.loads(config.to_json_string(use_diff=True))
    except (TypeError, ValueError, AttributeError):
        return {"model_type": getattr(config, "model_type", None)}


def peft_adapters(model) -> list[dict]:
    """Every adapter of a PEFT model: name, type, target modules, rank and alpha, whether it is active
    (not inside ``disable_adapter()``) and whether it is merged into the base weights."""
    layers = [m for m in model.modules() if hasattr(m, "merged_adapters")]  # PEFT's adapter layers
    disabled = any(getattr(m, "disable_adapters", False) for m in layers)  # inside ``with model.disable_adapter():``
    active = set() if disabled else set(getattr(model, "active_adapters", None) or [])
    merged = {name for m in layers for name in (getattr(m, "merged_adapters", None) or [])}
    out = []
    for name, cfg in sorted((getattr(model, "peft_config", None) or {}).items()):
        targets = getattr(cfg, "target_modules", None)
        out.append({"name": name, "type": str(getattr(getattr(cfg, "peft_type", None), "value", cfg.peft_type)),
                    "target_modules": sorted(targets) if isinstance(targets, (set, list, tuple)) else targets,
                    "rank": getattr(cfg, "r", None), "alpha": getattr(cfg, "lora_alpha", None),
                    "base_model": getattr(cfg, "base_model_name_or_path", None),
                    "active": name in active, "merged": name in merged})
    return out


_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
          "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks")


def unbridged(model: nn.Module, memo: dict | None = None) -> nn.Module:
    """The transformers model a TransformerBridge rewrote (each of its modules replaced by a bridge that
    holds the original as ``_original_component``), as transformers built it: a copy of the module tree
    along the paths that hold bridges, every bridge replaced by its original; parameters, buffers and
    every module without a bridge below it are shared, not copied, and the bridge is left as it was."""
    memo = {} if memo is None else memo
    if id(model) in memo:
        return memo[id(model)]
    original = model._modules.get("_original_component")
    if original is not None:
        memo[id(model)] = got = unbridged(original, memo)
        return got
    children = {name: unbridged(child, memo) if child is not None else None for name, child in model._modules.items()}
    if all(children[name] is child for name, child in model._modules.items()):
        memo[id(model)] = model
        return model
    twin = copy.copy(model)  # a shallow copy: its own children and hook tables, the same tensors
    twin._modules = children
    for name in _HOOKS:
        if isinstance(getattr(model, name, None), dict):
            setattr(twin, name, OrderedDict(getattr(model, name)))
    memo[id(model)] = twin
    return twin


def fingerprint(model: nn.Module, adapters: list[dict] | None = None) -> dict:
    """A fingerprint of the weights as read: ``{"sha256": hex, "tensors": n, "offloaded": n}``.

    Contract: SHA-256 over every parameter and buffer of ``model`` (tied ones once), in name order, of
    its name, shape and dtype and two exact checksums of its bits: the sum of its elements read as
    integers of their width and the sum of each element times its 1-based position, both modulo 2^64
    (integer sums: the same on every device and in every order of addition), and of the ``adapters``
    record. Equal weights give equal fingerprints, wherever they sit; any changed element, any swap of
    two elements, another dtype or another adapter setting gives another. The checksums run on the
    tensors' own devices, :data:`CHUNK` elements at a time, and come to the host once per device.
    Weights offloaded by accelerate (on the meta device here) count by name, shape and dtype only
    (``offloaded`` says how many)."""
    rows, sums = [], {}
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    for name, t in sorted(tensors, key=lambda nt: nt[0]):
        offloaded = t.device.type == "meta"
        rows.append([name, list(t.shape), str(t.dtype).replace("torch.", ""), offloaded])
        if not offloaded and t.numel():
            sums.setdefault(t.device, []).append((len(rows) - 1, _checksums(t.detach())))
    for device, got in sums.items():
        values = torch.stack([s for _, s in got]).cpu().tolist()  # one transfer per device
        for (row, _), pair in zip(got, values):
            rows[row].append(pair)
    digest = hashlib.sha256(json.dumps({"tensors": rows, "adapters": adapters or []}, sort_keys=True).encode())
    return {"sha256": digest.hexdigest(), "tensors": len(rows), "offloaded": sum(r[3] for r in rows)}


_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _checksums(t: torch.Tensor) -> torch.Tensor:
    """``[Σ x_i, Σ i·x_i]`` (int64, wrapping modulo 2^64) of a tensor's elements read as integers of their width.

    Read as rows of :data:`WIDTH` elements, ``Σ i·x_i = WIDTH·Σ_r r·(row sum)_r + Σ_c (c + 1)·(column sum)_c``
    (rows and columns from 0): two integer reductions of the elements as they are, with no int64 copy of them."""
    flat = t.contiguous().reshape(-1)
    flat = flat.view(_INTS.get(flat.element_size(), torch.uint8)) if not flat.dtype.is_signed or flat.is_floating_point() else flat
    total = torch.zeros(2, dtype=torch.int64, device=t.device)
    whole = flat.numel() // WIDTH * WIDTH
    for start in range(0, whole, CHUNK):
        block = flat[start:min(start + CHUNK, whole)].view(-1, WIDTH)
        rows, cols = block.sum(1, dtype=torch.int64), block.sum(0, dtype=torch.int64)
        r = torch.arange(start // WIDTH, start // WIDTH + rows.numel(), dtype=torch.int64, device=t.device)
        c = torch.arange(1, WIDTH + 1, dtype=torch.int64, device=t.device)
        total += torch.stack([rows.sum(), WIDTH * (r * rows).sum() + (c * cols).sum()])
    tail = flat[whole:].to(torch.int64)  # fewer than WIDTH elements
    at = torch.arange(whole + 1, whole + 1 + tail.numel(), dtype=torch.int64, device=t.device)
    return total + torch.stack([tail.sum(), (at * tail).sum()])
