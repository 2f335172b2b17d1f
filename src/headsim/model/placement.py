"""Where a model runs when accelerate spreads it (``device_map``): the strategy, the memory each device
may hold and the folder for weights offloaded to disk (:class:`Placement`), read from the options
``--device-map``, ``--device-memory`` and ``--offload-folder``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..errors import HeadsimError, require

#: ``device_map`` strategies accelerate knows (``--device-map``)
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


@dataclass
class Placement:
    """A model spread by accelerate: ``device_map`` (one of :data:`DEVICE_MAPS`), the memory each device
    may hold (``max_memory``: GPU index, ``"cpu"`` or ``"mps"`` → size such as ``"20GiB"``; ``None``:
    what is free) and the folder for weights offloaded to disk. Every layer computes on its execution
    device with its own weights, so the capture is the same as on one device."""

    device_map: str
    max_memory: dict | None = None
    offload_folder: str | None = None

    def record(self, model: nn.Module, device: torch.device) -> dict:
        """For run.json: the strategy, the limits, and where each module went (``"disk"``: offloaded;
        ``""``: the whole model, where it fitted on ``device``)."""
        modules = {name: f"cuda:{where}" if isinstance(where, int) else str(where)
                   for name, where in (getattr(model, "hf_device_map", None) or {"": str(device)}).items()}
        return {"device_map": self.device_map,
                "max_memory": {str(k): v for k, v in self.max_memory.items()} if self.max_memory else None,
                "offload_folder": self.offload_folder, "devices": sorted(set(modules.values())), "modules": modules}


def parse_device_memory(spec: str | dict | None) -> dict | None:
    """``"0=20GiB,cpu=64GiB"`` (or a dict) → accelerate's ``max_memory``; refuses unknown devices and sizes."""
    if spec is None or spec == {} or spec == "":
        return None
    if isinstance(spec, str):
        items = []
        for part in (p.strip() for p in spec.split(",") if p.strip()):
            key, eq, value = part.partition("=")
            require(bool(eq) and key.strip() and value.strip(), f"--device-memory entry {part!r} is not DEVICE=SIZE",
                    "pass e.g. --device-memory 0=20GiB,cpu=64GiB (GPU index, cpu or mps = size)")
            items.append((key.strip(), value.strip()))
    else:
        items = list(spec.items())
    from accelerate.utils import convert_file_size_to_int

    out: dict = {}
    for key, value in items:
        text = str(key).lower()
        text = text[5:] if text.startswith("cuda:") else text
        if text.isdigit():
            index = int(text)
            require(index < torch.cuda.device_count(), f"--device-memory names GPU {index}, which this machine does not have",
                    f"this machine has {torch.cuda.device_count()} CUDA device(s); name cpu for main memory")
            name: int | str = index
        else:
            require(text in ("cpu", "mps"), f"--device-memory names an unknown device {key!r}",
                    "use a GPU index (0, 1, …), cpu or mps")
            name = text
        value = int(value) if str(value).strip().isdigit() else value  # plain bytes
        try:
            size = convert_file_size_to_int(value)
        except (ValueError, TypeError):
            size = -1
        require(isinstance(size, int) and size > 0, f"--device-memory size {value!r} for {key} is not a size",
                "write sizes such as 20GiB, 512MiB or 64GB (or bytes)")
        out[name] = value
    return out


def placement(device, device_map: str | None, device_memory=None, offload_folder=None) -> Placement | None:
    """The :class:`Placement` the arguments ask for (``None``: the whole model on one device)."""
    if device_map is None:
        require(device_memory in (None, "", {}), "--device-memory is given without --device-map",
                "add --device-map auto (the limits apply to its placement)")
        require(offload_folder is None, "--offload-folder is given without --device-map", "add --device-map auto")
        return None
    require(device is None, f"both --device {device} and --device-map {device_map} are given",
            "pass one: --device for one device, --device-map to spread the model over several")
    require(device_map in DEVICE_MAPS, f"unknown --device-map {device_map!r}", f"use one of {', '.join(DEVICE_MAPS)}")
    try:
        import accelerate  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a dependency of headsim
        raise HeadsimError("--device-map needs accelerate, which is not installed", "pip install accelerate") from exc
    folder = None
    if offload_folder is not None:
        path = Path(offload_folder).expanduser()
        require(not path.exists() or path.is_dir(), f"--offload-folder {str(offload_folder)!r} is a file",
                "pass a directory (created if missing) for the weights offloaded to disk")
        folder = str(path)
    return Placement(device_map, parse_device_memory(device_memory), folder)
