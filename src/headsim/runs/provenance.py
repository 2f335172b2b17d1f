"""Where a run came from: the headsim checkout's commit and the versions of the packages that
decide its numbers (both recorded in ``run.json``)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit() -> str | None:
    """The commit of the headsim checkout, if it is one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    names = ("headsim", "torch", "transformers", "tokenizers", "numpy", "xarray", "pandas", "pyarrow", "pysbd")
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out
