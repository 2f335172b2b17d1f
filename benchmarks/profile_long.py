#!/usr/bin/env python
"""Where one long window's time goes: the statistics of one window profiled by part, beside the bare forward.

Builds a model of ``benchmarks/long_windows.py`` (``--shape``: a tiny one or a real configuration with
random weights), runs one window of ``T`` tokens through the statistics (after a warm-up window) under
torch.profiler, and prints the time of each part, marked with profiler ranges around headsim's own
functions (this script wraps them; the package carries no profiling code):

* ``tap.eager``: the family's eager attention on each block of query rows (scores, mask, softmax, P·V);
* ``attention.block``: each block reduced into the layer's attention sums (``add_attention_block``);
* ``attention.finish``: the layer's top columns, binned sums and near-diagonal entries (``AttentionTiles.finish``);
* ``pairs``: the similarity tiles: first pass for the maximum and the pair decisions (``_pairs_tiled``);
* the rest of the forward (projections, MLPs, norms) is the difference to the whole.

Device time per range where a GPU runs (kernels launched inside it), host time on a CPU; then the
kernels (or operators) that took longest. ``--bare`` profiles the bare sdpa forward too.

    python benchmarks/profile_long.py --shape llama-8b --seq-len 8192 --device cuda --out profile.txt
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from long_windows import KINDS, build, windows  # noqa: E402

RANGES = ("tap.eager", "attention.block", "attention.finish", "pairs")


def _ranged(name: str, fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with torch.profiler.record_function(name):
            return fn(*args, **kwargs)
    return wrapped


def instrument() -> None:
    """Profiler ranges around the parts of a long window (module docstring)."""
    from headsim.model import tap
    from headsim.stats import accumulators, tiled

    eager_of = tap._eager_function
    tap._eager_function = lambda module: _ranged("tap.eager", eager_of(module))
    accumulators.CorpusStats.add_attention_block = _ranged("attention.block", accumulators.CorpusStats.add_attention_block)
    accumulators.CorpusStats._pairs_tiled = _ranged("pairs", accumulators.CorpusStats._pairs_tiled)
    tiled.AttentionTiles.finish = _ranged("attention.finish", tiled.AttentionTiles.finish)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="llama-1b", choices=KINDS)
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="auto")
    p.add_argument("--resolution", type=int, default=512)
    p.add_argument("--bare", action="store_true", help="profile the bare sdpa forward too")
    p.add_argument("--rows", type=int, default=25, help="kernels (operators) listed")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    from headsim.memory import default_max_memory, plan_memory
    from headsim.runs.engine import Engine
    from headsim.stats import CorpusStats

    instrument()
    loaded = build(a.shape, a.device)
    t = a.seq_len
    w = windows(loaded, t, 2)
    memory = plan_memory(loaded, t, a.resolution, default_max_memory(loaded.device), batch_size=1)
    fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, t, resolution=a.resolution, tile_bytes=memory.tile_bytes,
                                device=loaded.device, backend=a.backend)
    engine = Engine(loaded, fresh(), fresh, tile_bytes=memory.tile_bytes)
    cuda = loaded.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    engine.process(w.select(slice(0, 1)))  # warm-up: kernels compiled, memory allocated
    sync()
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    lines = [f"{loaded.name}, T={t}, {loaded.n_layers} layers x {loaded.n_heads} heads, {loaded.model.dtype}, "
             f"device {torch.cuda.get_device_name() if cuda else 'cpu'}, torch {torch.__version__}"]

    def profiled(label: str, fn) -> None:
        with torch.profiler.profile(activities=activities) as prof:
            start = time.perf_counter()
            fn()
            sync()
            wall = time.perf_counter() - start
        events = prof.key_averages()
        attr = "device_time_total" if cuda else "cpu_time_total"
        total = sum(getattr(e, "self_device_time_total" if cuda else "self_cpu_time_total") for e in events
                    if not e.key.startswith(RANGES)) if cuda else wall * 1e6
        lines.append(f"\n== {label}: wall {wall * 1e3:.1f} ms, {'device' if cuda else 'host'} time {total / 1e3:.1f} ms")
        for e in events:
            if e.key in RANGES:
                lines.append(f"  {e.key:20s} {getattr(e, attr) / 1e3:10.1f} ms  ({e.count} calls, "
                             f"{100 * getattr(e, attr) / max(total, 1):5.1f} %)")
        lines.append(events.table(sort_by="self_device_time_total" if cuda else "self_cpu_time_total", row_limit=a.rows,
                                  max_name_column_width=60))

    profiled(f"statistics ({engine.stats.backend_record()['chosen']})", lambda: engine.process(w.select(slice(1, 2))))
    if a.bare:
        stack = loaded.arch.stack_of(loaded.model)
        ids = torch.as_tensor(w.input_ids[:1], device=loaded.device)
        mask = torch.as_tensor(w.attention_mask[:1], device=loaded.device)

        def bare():
            with torch.inference_mode():
                stack(input_ids=ids, attention_mask=mask)

        bare()
        sync()
        profiled("bare sdpa forward", bare)
    text = "\n".join(lines)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
