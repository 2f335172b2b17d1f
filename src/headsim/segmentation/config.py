"""Fitted segmenter configurations: plain JSON, the shipped default is package data.

A configuration is a JSON object with a ``"topic"`` section (heads, block size ``k``, embedding
weight, z threshold, window geometry) and a ``"sentence"`` section (separator layer, candidate
tokens, threshold, fallback). The default, ``default_config.json`` beside this module, is written
by ``python -m headsim.segmentation.selection --write`` and never edited by hand.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import HeadsimError, require

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_config.json")
TOPIC_KEYS = ("heads", "k", "embedding_weight", "threshold")


@lru_cache(maxsize=1)
def _default_text() -> str:
    require(DEFAULT_CONFIG_PATH.is_file(), "no fitted default configuration is shipped",
            "run python -m headsim.segmentation.selection --write, or pass config=")
    return DEFAULT_CONFIG_PATH.read_text(encoding="utf-8")


def default_config() -> dict[str, Any]:
    """A fresh copy of the shipped configuration."""
    return check_config(json.loads(_default_text()))


def check_config(config: Any) -> dict[str, Any]:
    """``config`` if it has what the segmenter reads, else ``HeadsimError``."""
    require(isinstance(config, dict), f"a configuration is a JSON object, not a {type(config).__name__}",
            "pass a dict or a JSON file written by Segmenter.save")
    topic = config.get("topic")
    require(isinstance(topic, dict) and all(k in topic for k in TOPIC_KEYS),
            f"the configuration's topic section lacks one of {', '.join(TOPIC_KEYS)}",
            "use a configuration written by Segmenter.save or selection.fit_topic")
    w = topic["embedding_weight"]
    require(isinstance(w, (int, float)) and 0 <= w <= 1, f"embedding_weight {w!r} is outside [0, 1]", "use 0..1")
    require(bool(topic["heads"]) or w >= 1, "the configuration has no heads but gives them weight",
            "list heads, or set embedding_weight to 1")
    return config


def load_config(config: dict[str, Any] | str | Path | None) -> dict[str, Any]:
    """The shipped default (``None``), a dict as given, or a JSON file's content."""
    if config is None:
        return default_config()
    if isinstance(config, dict):
        return check_config(config)
    path = Path(config)
    require(path.is_file(), f"configuration file {str(path)!r} does not exist", "pass a JSON file written by Segmenter.save")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HeadsimError(f"cannot read configuration {str(path)!r}: {exc}", "pass a JSON file written by Segmenter.save") from exc
    return check_config(data)


def write_config(config: dict[str, Any], path: str | Path) -> Path:
    """Write ``config`` as indented JSON (atomically: :func:`headsim.io.write_bytes`)."""
    from ..io import write_bytes

    return write_bytes(Path(path), (json.dumps(check_config(config), indent=1) + "\n").encode("utf-8"))


def for_model(config: dict[str, Any], loaded, *, shipped: bool) -> dict[str, Any]:
    """The configuration to use with ``loaded``.

    The shipped default was fitted on the embedded all-MiniLM-L6-v2: its heads and separator layer
    mean nothing in another model. For any other model it becomes its embedding-only variant (the
    same per-document scoring on the model's mean-pooled sentence embeddings, which the benchmark's
    ablation found as good as heads and embeddings together on MiniLM; pySBD sentences), with a
    warning naming how to fit a configuration for that model.
    """
    if not shipped or loaded.name == "default":
        return config
    import copy
    import warnings

    warnings.warn(f"the shipped segmentation configuration was fitted for {config.get('model', 'the embedded model')}; "
                  f"for {loaded.name!r} the segmenter scores its mean-pooled sentence embeddings only — fit one for this "
                  "model with headsim.Segmenter(model=...).fit(documents) and pass it with --config", stacklevel=3)
    out = copy.deepcopy(config)
    out["topic"].update(heads=[], embedding_weight=1.0)
    out["sentence"]["fallback"] = True
    out["model"] = f"{loaded.name} (embedding-only variant of the shipped configuration)"
    return check_config(out)
