"""Old home of model loading: everything lives in :mod:`headsim.model.load` (kept so imports keep working)."""

from .model.load import (DEFAULT_MODEL, LoadedModel, Placement, as_loaded, default_model_dir, from_pretrained_objects,
                         load_model, load_tokenizer, resolve_device, resolve_dtype)

__all__ = ["DEFAULT_MODEL", "LoadedModel", "Placement", "as_loaded", "default_model_dir", "from_pretrained_objects",
           "load_model", "load_tokenizer", "resolve_device", "resolve_dtype"]
