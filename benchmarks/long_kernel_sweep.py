#!/usr/bin/env python
"""GPU: the long windows' pairs kernel (headsim.stats.triton_long.binned_pairs) under several launches.

Random bf16 head outputs of one layer in a real shape (``--heads``, ``--head-dim``, ``--seq-len`` on
``--resolution`` bins), one window; each launch (tile side, warps) is checked against the default
launch's reductions (every count equal), then timed with ``triton.testing.do_bench`` (median ms). The
JSON lists every launch and the fastest; ``long_windows.py --launch`` runs with the fastest.

    python benchmarks/long_kernel_sweep.py --seq-len 8192 --json sweep.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

LAUNCHES = ("64,8", "64,16", "64,4", "32,4", "32,8", "128,16")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--resolution", type=int, default=512)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--launch", nargs="+", default=list(LAUNCHES), help="ROWS,WARPS")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    import triton.testing

    from headsim.stats import triton_long
    from headsim.stats.pairs import SimBins
    from headsim.stats.tiled import Bins
    from headsim.stats.triton_kernels import Launch

    t, h, dev = a.seq_len, a.heads, torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    z = torch.randn(1, t, h, a.head_dim, device=dev, generator=g, dtype=torch.bfloat16).transpose(1, 2)  # the model's layout
    rng = np.random.default_rng(0)
    ids = torch.as_tensor(rng.integers(1000, 3000, size=(1, t)), device=dev)
    valid = torch.ones(1, t, dtype=torch.bool, device=dev)
    sentences = torch.as_tensor(np.arange(t)[None] // 24, device=dev)
    bins = Bins.build(t, a.resolution, dev)
    sim = SimBins(120, -0.2, 1.0)

    def run(launch):
        return triton_long.binned_pairs(z, valid, ids, sentences, 0.3, sim, bins.distance, bins.r, launch)

    reference = run(triton_long.PAIRS_LAUNCH)
    rows = []
    for text in a.launch:
        block, warps = (int(x) for x in text.split(","))
        launch = Launch(block_rows=block, num_warps=warps)
        try:
            red, dist, dsum = run(launch)
            same = all(torch.equal(getattr(red, f), getattr(reference[0], f)) for f in ("hist", "location", "rows", "cols", "inner")) \
                and torch.equal(dist, reference[1]) and torch.equal(dsum, reference[2])
            ms = triton.testing.do_bench(lambda: run(launch), warmup=3, rep=30)
            rows.append({"launch": text, "ms": ms, "equal_counts": same})
        except Exception as exc:  # noqa: BLE001 (a launch this GPU cannot build: reported, not fatal)
            rows.append({"launch": text, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"})
        print(json.dumps(rows[-1]), flush=True)
    timed = [r for r in rows if "ms" in r and r["equal_counts"]]
    best = min(timed, key=lambda r: r["ms"])["launch"] if timed else None
    out = {"device": torch.cuda.get_device_name(), "seq_len": t, "resolution": a.resolution, "heads": h,
           "head_dim": a.head_dim, "default": f"{triton_long.PAIRS_LAUNCH.block_rows},{triton_long.PAIRS_LAUNCH.num_warps}",
           "rows": rows, "fastest": best}
    print("fastest:", best)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
