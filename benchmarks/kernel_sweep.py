"""Time headsim's two looping Triton passes on a GPU for several launch configurations, side by side
in one process on the same inputs, against the model's own attention (SDPA) and, optionally,
another version of the kernels module.

    python benchmarks/kernel_sweep.py --json sweep.json                       # BERT-base shapes, bf16
    python benchmarks/kernel_sweep.py --baseline old/triton_kernels.py        # + that file's passes

Inputs are random and shaped as BERT-base gives them to the kernels (12 heads × 128 positions × 64,
queries/keys/values as strided views of ``[B, T, H·d]``, a tenth of the windows padded); the
timings do not depend on the values, since the kernels have no data-dependent branch. Each
configuration's reductions are checked against the default's (counts equal, sums to float32
rounding) before it is timed. Times are medians of CUDA-event timings, reported per window and per
layer (µs) and for a 12-layer model per window. The ``best`` entry is the fastest configuration that
agrees; ``benchmarks/throughput.py --launch`` runs the whole pipeline with it.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from headsim.stats import triton_kernels as tk  # noqa: E402
from headsim.stats.pairs import SimBins  # noqa: E402
from throughput import write_result  # noqa: E402

H, T, D, LAYERS = 12, 128, 64, 12
BINS = SimBins(120, -0.2, 1.0)  # CorpusStats' default histogram of similarity values


def inputs(b: int, dtype: torch.dtype, device: str, t: int = T, seed: int = 0) -> dict:
    g = torch.Generator(device=device).manual_seed(seed)

    def heads():  # [B, H, T, d] as a strided view of the projection's [B, T, H·d] output
        return torch.randn(b, t, H * D, device=device, dtype=dtype, generator=g).view(b, t, H, D).transpose(1, 2)

    pos = torch.arange(t, device=device)
    lengths = torch.randint(t // 6, t, (b,), device=device, generator=g)
    padded = torch.arange(b, device=device) % 10 == 9
    valid = ~(padded[:, None] & (pos[None, :] >= lengths[:, None]))
    ids = torch.randint(1000, 1400, (b, t), device=device, generator=g)  # repeats, as real text has
    sentences = torch.where(valid, pos // 24, -1)
    z = heads()
    z += 2 * torch.randn(H, 1, D, device=device, dtype=dtype, generator=g)  # a shared direction: high pairs exist
    return dict(q=heads(), k=heads(), v=heads(), z=z, valid=valid, ids=ids, sentences=sentences)


def timed(fn, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` CUDA-event timings (wall time off a GPU), after two
    warm-up calls."""
    fn(), fn()
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def passes(module, x: dict, launch=None):
    """(attention pass, similarity pass) callables of ``module`` (headsim's or a baseline file's)."""
    kw = {} if launch is None else {"launch": launch}
    out = torch.empty_like(x["q"])
    return (lambda: module.attention_pass(x["q"], x["k"], x["v"], x["valid"], None, out, **kw),
            lambda: module.similarity_pass(x["z"], x["valid"], x["ids"], x["sentences"], 0.3, float(BINS.scale),
                                           float(BINS.offset), BINS.bins, **kw))


def agrees(a, b) -> bool:
    """Whether two passes' results are the same reductions within tests/test_kernels.py's tolerances:
    floats to float32 rounding; counts with rare threshold flips (another product tiling may round a
    similarity on the other side of the threshold), at most 10⁻³ of the total."""
    for x, y in zip(vars(a).values(), vars(b).values()):
        for u, w in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            u, w = u.double(), w.double()
            total = max(float(w.abs().sum()), 1.0)
            if not (torch.allclose(u, w, rtol=1e-4, atol=1e-4) or float((u - w).abs().sum()) <= 1e-3 * total):
                return False
    return True


def load_baseline(path: str):
    """Another version of headsim.stats.triton_kernels, imported from a file as a sibling module."""
    spec = importlib.util.spec_from_file_location("headsim.stats._baseline_triton_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def per_window_us(seconds: float, b: int) -> dict:
    return {"us_per_window_layer": seconds / b * 1e6, "us_per_window_12_layers": seconds / b * 1e6 * LAYERS}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, default=2048, help="windows per call (default 2048)")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    ap.add_argument("--block-rows", default="16,32,64")
    ap.add_argument("--warps", default="4,8")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--tiles", default="rows,triangle", help="pairs pass tilings to time (the attention pass has rows only)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--baseline", help="a triton_kernels.py of another version, timed on the same inputs")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--positions", type=int, default=T, help=argparse.SUPPRESS)  # smaller for the interpreter smoke test
    args = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if tk.triton is None or not tk.available(torch.device(device)):
        sys.exit("kernel_sweep.py needs a CUDA GPU and Triton (fix: run it on a GPU machine, e.g. via "
                 "benchmarks/gpu_run.sh; TRITON_INTERPRET=1 runs it on a CPU as a smoke test, timings meaningless)")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    b = args.windows
    x = inputs(b, dtype, device, args.positions)
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (Triton interpreter: timings meaningless)",
              "triton": tk.triton.__version__, "torch": torch.__version__,
              "dtype": args.dtype, "windows": b, "shape": {"heads": H, "positions": args.positions, "head_dim": D},
              "inputs": "random (timings do not depend on values)", "defaults": {}, "configs": []}
    bias = torch.zeros(b, 1, 1, args.positions, device=device, dtype=dtype).masked_fill(~x["valid"][:, None, None, :], -torch.inf)
    sdpa = timed(lambda: torch.nn.functional.scaled_dot_product_attention(x["q"], x["k"], x["v"], attn_mask=bias),
                 args.repeats)
    result["sdpa"] = per_window_us(sdpa, b)
    ref_att, ref_sim = (f() for f in passes(tk, x))
    for name, launch in (("attention", tk.ATTENTION_LAUNCH), ("pairs", tk.PAIRS_LAUNCH)):
        result["defaults"][name] = vars(launch)
    best = {}
    grid = itertools.product(*(map(int, s.split(",")) for s in (args.block_rows, args.warps, args.stages)),
                             args.tiles.split(","))
    for bm, warps, stages, tiles in grid:
        launch = tk.Launch(bm, warps, stages, tiles)
        att, sim = passes(tk, x, launch)
        row = {"launch": vars(launch)}
        timed_passes = (("attention", att, ref_att),) if tiles == "rows" else ()
        for name, fn, ref in (*timed_passes, ("pairs", sim, ref_sim)):
            try:
                ok = agrees(fn(), ref)
                row[name] = {"agrees": ok, **per_window_us(timed(fn, args.repeats), b)}
            except Exception as exc:  # noqa: BLE001 (a configuration that does not compile is reported, not fatal)
                row[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                continue
            cur = best.get(name)
            if ok and (cur is None or row[name]["us_per_window_layer"] < cur[1]["us_per_window_layer"]):
                best[name] = (vars(launch), row[name])
        print(json.dumps(row), flush=True)
        result["configs"].append(row)
    result["best"] = {name: {"launch": cfg, **timing} for name, (cfg, timing) in best.items()}
    if args.baseline:
        att, sim = passes(load_baseline(args.baseline), x)
        result["baseline"] = {"file": args.baseline,
                              "attention": {"agrees": agrees(att(), ref_att), **per_window_us(timed(att, args.repeats), b)},
                              "pairs": {"agrees": agrees(sim(), ref_sim), **per_window_us(timed(sim, args.repeats), b)}}
    print(json.dumps({k: result[k] for k in ("device", "sdpa", "defaults", "best") + (("baseline",) if args.baseline else ())},
                     indent=1))
    return write_result(result, args.json)


if __name__ == "__main__":
    main()
