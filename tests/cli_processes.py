"""``headsim`` CLI runs in child processes, for the tests that kill or signal them mid-run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def spawn(args: list, **kw) -> subprocess.Popen:
    """``headsim ARGS`` in a child process (offline; stderr piped, stdout dropped)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "headsim.cli", *map(str, args)], env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until ``path`` exists while ``proc`` still runs (the test fails if it ended first)."""
    deadline = time.time() + timeout
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be interrupted"
