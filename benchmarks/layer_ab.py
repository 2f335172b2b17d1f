#!/usr/bin/env python
"""One layer's statistics of two checkouts side by side in one process: this checkout's ``headsim`` and
another's (``--base``, e.g. a ``git worktree`` of an older commit), alternating, on the same windows.

The other checkout's package is copied into a temporary directory as ``headsim_base`` (its absolute
imports renamed), so both run in this process on the same machine state: a comparison of two commits'
statistics code that a shared machine's load does not decide. The windows are MiniLM-shaped (12 heads,
head size 32; random queries, keys and values, token ids and sentences), their statistics added through
``CorpusStats.update_qkv`` as ``headsim analyze`` adds a ``plain`` family's layer; the script prints each
side's time per window and layer and checks that both give the same statistics (counts equal, sums
within float rounding).

Both sides share the process's C library allocator: a change in how much a step allocates (fresh
tensors of several MB fault their pages in) moves both sides' times, so compare such a change in
separate processes (``throughput.py`` with each checkout on ``PYTHONPATH``, alternating).

    git worktree add --detach /tmp/base e74375f
    python benchmarks/layer_ab.py --base /tmp/base/src --seq-len 512 --windows 16 --repeats 5
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def copy_as(src: Path, into: Path, name: str = "headsim_base") -> None:
    """``src`` (a checkout's ``src`` directory) as package ``name`` under ``into``."""
    shutil.copytree(src / "headsim", into / name, ignore=shutil.ignore_patterns("__pycache__"))
    pattern = re.compile(r'(from|import) headsim([. ])|"headsim\.')
    for f in (into / name).rglob("*.py"):
        text = f.read_text()
        new = pattern.sub(lambda m: f'{m.group(1)} {name}{m.group(2)}' if m.group(1) else f'"{name}.', text)
        if new != text:
            f.write_text(new)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, required=True, help="the other checkout's src directory")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    t, b, h, d, layers = a.seq_len, a.windows, 12, 32, a.layers
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 1200, size=(b, t))
    ids[:, 0], ids[:, -1] = 101, 102
    sentences = np.broadcast_to(np.arange(t) // 24, (b, t)).copy()
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(b, t, h, d, generator=gen).transpose(1, 2) for _ in range(2))
    shared = torch.randn(1, 1, h, d, generator=gen) * 0.5  # a shared direction: pairs above the threshold
    v = (torch.randn(b, t, h, d, generator=gen) + shared).transpose(1, 2)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        copy_as(a.base, Path(tmp))
        sys.path.insert(0, tmp)
        for name in ("headsim_base", "headsim"):
            stats_module = importlib.import_module(f"{name}.stats")
            info = stats_module.BatchInfo(torch.as_tensor(ids), torch.ones(b, t, dtype=torch.bool),
                                          torch.as_tensor(sentences), torch.as_tensor(ids == 101),
                                          torch.as_tensor(ids == 102), torch.as_tensor(ids % 17 == 0))
            stats = stats_module.CorpusStats(layers, h, t, device="cpu")

            def one(stats=stats, info=info):
                stats.begin_batch(info)
                for layer in range(layers):
                    stats.update_qkv(layer, q, k, v, info, scale=d ** -0.5)

            one()  # warm-up (Numba's compilation)
            runs[name] = (one, stats)
        seconds = {name: [] for name in runs}
        for _ in range(a.repeats):
            for name, (one, _) in runs.items():
                start = time.perf_counter()
                one()
                seconds[name].append(time.perf_counter() - start)
        per = {name: min(s) / (layers * b) * 1e3 for name, s in seconds.items()}
        new, old = runs["headsim"][1].to_dataset(), runs["headsim_base"][1].to_dataset()
        differ = {}
        for var in new.data_vars:
            x, y = new[var].values, old[var].values
            if not np.array_equal(x, y):
                if not np.issubdtype(y.dtype, np.floating):
                    raise SystemExit(f"{var}: the counts differ")
                differ[var] = float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-30))
    row = {"seq_len": t, "windows": b, "layers": layers, "threads": torch.get_num_threads(), "repeats": a.repeats,
           "base": str(a.base), "ms_per_window_layer": per, "ratio_new_to_base": per["headsim"] / per["headsim_base"],
           "seconds": seconds, "sums_max_relative_difference": differ}
    print(f"T={t}, {b} windows, {layers} layers: base {per['headsim_base']:.2f} ms, this checkout {per['headsim']:.2f} ms "
          f"per window and layer (min of {a.repeats}): {row['ratio_new_to_base']:.3f} ×; counts equal; sums within "
          f"{max(differ.values(), default=0.0):.1e} relative")
    if a.json:
        a.json.write_text(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
