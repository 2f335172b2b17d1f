"""Where the embedded data lies: gensim's bundled test data (``gensim/test/test_data/``), found
without importing gensim."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from headsim.errors import require


def gensim_test_data(name: str, needed_by: str = "the embedded corpus") -> Path:
    """A file of gensim's bundled test data (located without importing gensim, which is slow), or one
    clear error saying what needs it (``needed_by``) when gensim or the file is missing."""
    spec = importlib.util.find_spec("gensim")
    require(spec is not None and spec.origin is not None,
            f"{needed_by} needs gensim's test data, but gensim is not installed", "pip install 'gensim>=4.3'")
    path = Path(spec.origin).parent / "test" / "test_data" / name
    require(path.is_file(), f"{needed_by} needs {name!r}, which is missing from {str(path.parent)!r}",
            "reinstall gensim from its wheel (pip install --force-reinstall gensim)")
    return path
