"""Print, on one line, the versions the tests run with (what pip resolved on this machine)."""

import platform
from importlib import metadata


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


print("versions: " + ", ".join([f"python {platform.python_version()}"]
                               + [f"{name} {version(name)}" for name in ("torch", "transformers", "triton", "numpy", "numba")]))
