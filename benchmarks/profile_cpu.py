#!/usr/bin/env python
"""Where a window's milliseconds go on the CPU: every corpus statistic of one model at one length,
split by part, each part beside its bound on this machine.

One process: the model of ``benchmarks/long_windows.py`` (``decoder``: Llama config, ``mistral``:
Mistral config with a sliding window of 4,096, ``encoder``: ModernBERT) or the embedded MiniLM
(``minilm``), windows of random ids framed as the model's own; one warm-up, then the bare sdpa
forward and the statistics (``Engine.process``, as ``headsim analyze`` runs them) timed, the
statistics under cProfile. The parts are the cumulative times of the functions that own them:

  tap: masks            the family's mask for each block of query rows (RowMask.rows, live_keys)
  tap: eager attention  the family's eager function on each block (QK, mask, softmax, PV)
  attention (headsim)   the attention headsim computes itself (plain families: probabilities, PV)
  attention blocks      each block of probabilities reduced as it comes (AttentionTiles.add)
  attention finish      a layer's top columns, bins and focus (AttentionTiles.finish, reduce_attention)
  pairs: maximum        the first pass over S for each head's maximum (_peak)
  pairs: S tiles        the second pass's S = Z·Zᵀ tiles (_similarity_tile from FusedPairs.add)
  pairs: kernel         decisions and binning of every pair (cpu_kernels.reduce_tile; reduce_upper, with the maximum)
  pairs: rest           repeated-token pairs and the layer's bookkeeping of the pair sums
  memory release        malloc_trim after each layer (release_free_memory)
  model, rest           the forward outside attention (embeddings, projections, MLP, norms)
  other                 the remainder (batch tensors, hooks, joining)

Bounds: ``flop / GEMM rate`` and ``bytes / bandwidth`` with this CPU's rates measured here (an
fp32 GEMM of 2,048² and a copy of 512 MiB, all threads), for the least work each part must do
(``--bounds`` prints the formulas' inputs). Timings on a shared machine: compare parts, not runs.

    python benchmarks/profile_cpu.py --model decoder --seq-len 8192
    python benchmarks/profile_cpu.py --model minilm --seq-len 128 --windows 32
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

PARTS = {  # part -> (module, qualified name) of the function whose cumulative time is the part's
    "tap: masks": [("headsim.model.tap", "RowMask.rows"), ("headsim.model.tap", "live_keys")],
    "tap: eager attention": [("transformers.models.llama.modeling_llama", "eager_attention_forward"),
                             ("transformers.models.mistral.modeling_mistral", "eager_attention_forward"),
                             ("transformers.models.modernbert.modeling_modernbert", "eager_attention_forward")],
    "attention (headsim)": [("headsim.model.plain", "attention_probs"), ("headsim.model.plain", "head_matmul")],
    "attention blocks": [("headsim.stats.tiled", "AttentionTiles.add")],
    "attention finish": [("headsim.stats.tiled", "AttentionTiles.finish"), ("headsim.stats.attention", "reduce_attention"),
                         ("headsim.stats.attention", "ReducedAttention.join")],
    "pairs: maximum": [("headsim.stats.tiled", "_peak")],
    "pairs: S tiles": [("headsim.stats.tiled", "_similarity_tile")],  # less what _peak calls
    "pairs: kernel": [("headsim.stats.cpu_kernels", "reduce_tile"), ("headsim.stats.cpu_kernels", "reduce_upper")],
    "pairs: all": [("headsim.stats.backends.numba_cpu", "Numba._pair_reductions"),
                   ("headsim.stats.accumulators", "CorpusStats._pairs_tiled"), ("headsim.stats.pairs", "add_pairs")],
    "memory release": [("headsim.memory", "release_free_memory")],
    "tap: whole": [("headsim.model.tap", "_tap_attention")],
    "stats: layer": [("headsim.stats.accumulators", "CorpusStats._update")],
    "pass": [("headsim.model.tap", "Tap._pass")],
}


def _key(module: str, qualname: str):
    import importlib

    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    code = obj.__code__
    return code.co_filename, code.co_firstlineno, code.co_name


def parts(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of each part (see the module docstring) from a profile of ``Engine.process``."""
    table = stats.stats
    cum = {}
    for name, anchors in PARTS.items():
        total, seen = 0.0, set()
        for module, qualname in anchors:
            try:
                key = _key(module, qualname)
            except (ImportError, AttributeError):
                continue
            if key in table and key not in seen:  # (a family may re-export another's function)
                seen.add(key)
                total += table[key][3]
        cum[name] = total
    peak_key = _key("headsim.stats.tiled", "_peak")
    sim_key = _key("headsim.stats.tiled", "_similarity_tile")
    if sim_key in table and peak_key in table[sim_key][4]:  # S tiles built by the first pass belong to it
        cum["pairs: S tiles"] -= table[sim_key][4][peak_key][3]
    out = {k: cum[k] for k in ("tap: masks", "tap: eager attention", "attention (headsim)", "attention blocks",
                               "attention finish", "pairs: maximum", "pairs: S tiles", "pairs: kernel")}
    out["pairs: rest"] = cum["pairs: all"] - cum["pairs: maximum"] - cum["pairs: S tiles"] - cum["pairs: kernel"]
    out["memory release"] = cum["memory release"]
    # the forward outside attention: the pass less the tap's attention and the statistics it calls
    inside = cum["tap: whole"] + cum["stats: layer"] + cum["memory release"]
    out["model, rest"] = max(0.0, cum["pass"] - inside) if cum["tap: whole"] else None
    return out


def rates(threads: int) -> dict[str, float]:
    """This CPU's fp32 GEMM rate (flop/s) and copy bandwidth (bytes/s, read + write), best of three."""
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    x, y = torch.empty(1 << 27), torch.empty(1 << 27)
    x.fill_(1.0)
    y.copy_(x)
    gemm, copy = [], []
    for _ in range(3):
        start = time.perf_counter()
        torch.mm(a, b)
        gemm.append(2 * 2048 ** 3 / (time.perf_counter() - start))
        start = time.perf_counter()
        y.copy_(x)
        copy.append(2 * x.numel() * 4 / (time.perf_counter() - start))
    return {"gemm_flops": max(gemm), "bandwidth": max(copy), "threads": threads}


def bounds(loaded, t: int, n: int, rate: dict) -> dict[str, dict]:
    """The least work of each part for ``n`` windows of ``t`` tokens, as seconds at ``rate``.

    Attention: ``P`` (query, key) pairs per head the mask leaves (all ``t²`` for an encoder, ``t(t+1)/2``
    causal, a band for a sliding window), ``QK`` and ``PV`` at ``2·d`` flop per pair each, the
    probabilities written once and read once by the statistics (float32). S: the ``t(t+1)/2`` pairs of
    its upper triangle, ``2·d`` flop each per pass (two passes: maximum, then decisions), and each
    tile written and read once per pass. Decisions: every upper-triangle pair read once."""
    cfg = loaded.stack_config
    h, layers = loaded.n_heads, loaded.n_layers
    d = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // h)
    window = getattr(cfg, "sliding_window", None)
    causal = loaded.arch.family not in ("modernbert", "bert")
    if causal:
        w = min(t, window or t)
        pairs = w * (w + 1) // 2 + (t - w) * w
    else:
        pairs = t * t
    upper = t * (t + 1) // 2
    scale = n * layers * h

    def part(flop, byte):
        return {"flop": flop, "bytes": byte, "seconds": max(flop / rate["gemm_flops"], byte / rate["bandwidth"])}

    return {"attention": part(scale * pairs * 4 * d, scale * pairs * 8),
            "attention blocks": part(0, scale * pairs * 4),
            "pairs: maximum": part(scale * upper * 2 * d, scale * upper * 8),
            "pairs: S tiles": part(scale * upper * 2 * d, scale * upper * 4),
            "pairs: kernel": part(0, scale * upper * 4)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="decoder", choices=["decoder", "mistral", "encoder", "minilm"])
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--windows", type=int, default=1)
    p.add_argument("--max-memory", default="3GB")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own)")
    p.add_argument("--top", type=int, default=0, help="also print the N functions of most cumulative time")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    import long_windows
    from headsim.memory import parse_memory, plan_memory
    from headsim.runs.engine import Engine
    from headsim.stats import CorpusStats

    if a.model == "minilm":
        from headsim.model.load import load_model

        loaded = load_model("default")
    else:
        loaded = long_windows.build(a.model)
    t, n = a.seq_len, a.windows
    w = long_windows.windows(loaded, t, n)
    memory = plan_memory(loaded, t, 512, parse_memory(a.max_memory), batch_size=n)
    fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, t, tile_bytes=memory.tile_bytes)
    engine = Engine(loaded, fresh(), fresh, tile_bytes=memory.tile_bytes)
    stack = loaded.arch.stack_of(loaded.model)
    ids, mask = torch.as_tensor(w.input_ids), torch.as_tensor(w.attention_mask)

    def bare():
        with torch.inference_mode():
            stack(input_ids=ids, attention_mask=mask)

    rate = rates(torch.get_num_threads())
    engine.process(w)  # warm-up (Numba's compilation, first allocations)
    bare()
    start, cpu = time.perf_counter(), time.process_time()
    bare()
    bare_s, bare_cpu = time.perf_counter() - start, time.process_time() - cpu
    profile = cProfile.Profile(time.process_time)  # processor seconds (all threads): steadier on a shared machine
    start, cpu = time.perf_counter(), time.process_time()
    profile.runcall(engine.process, w)
    stats_s, stats_cpu = time.perf_counter() - start, time.process_time() - cpu
    st = pstats.Stats(profile)
    got = parts(st)
    total = sum(st.stats[k][3] for k in st.stats if k[2] == "process" and k[0].endswith("engine.py"))
    got["other"] = total - sum(v for v in got.values() if v)
    bound = bounds(loaded, t, n, rate)
    bound_of = {"tap: eager attention": "attention", "attention (headsim)": "attention"}
    print(f"{a.model} T={t} windows={n}: bare {bare_s * 1e3:.0f} ms ({bare_cpu * 1e3:.0f} ms processor), statistics "
          f"{stats_s * 1e3:.0f} ms ({stats_cpu * 1e3:.0f} ms processor, under cProfile); processor ratio "
          f"{bare_cpu / stats_cpu:.3f}; parts in processor ms; "
          f"GEMM {rate['gemm_flops'] / 1e9:.0f} GFLOP/s, copy {rate['bandwidth'] / 1e9:.1f} GB/s")
    print(f"{'part':24s} {'ms':>9s} {'share':>6s} {'bound ms':>9s}")
    for name, sec in got.items():
        if sec is None:
            continue
        b = bound.get(bound_of.get(name, name))
        shown = "" if b is None else f"{b['seconds'] * 1e3:9.1f}"
        print(f"{name:24s} {sec * 1e3:9.1f} {sec / total:6.1%} {shown}")
    if a.top:
        st.sort_stats("cumulative").print_stats(a.top)
    if a.json:
        a.json.write_text(json.dumps({"model": a.model, "seq_len": t, "windows": n, "bare_s": bare_s, "stats_s": stats_s,
                                      "bare_cpu_s": bare_cpu, "stats_cpu_s": stats_cpu,
                                      "parts_s": got, "bounds": bound, "rates": rate}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
