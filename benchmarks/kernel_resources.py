"""What headsim's Triton kernels cost a GPU's multiprocessor, read from the compiler: no GPU needed.

Compiles each kernel ahead of time for an NVIDIA target (default sm_90, the H100/H200) with the
shapes and specialisation the runtime gives BERT-base (12 heads × 128 positions × 64, bf16,
pointers and strides 16-aligned) and reads the cubin: registers per thread, spill stack, shared
memory, loads the window loop prefetches (asynchronous copies, i.e. software-pipelined) and the
matrix instructions used. A kernel needing more registers than 65,536 / threads leaves fewer programs
per multiprocessor; a non-zero stack means spills. This is a static reading, not a timing
(``benchmarks/kernel_sweep.py`` times them on a GPU).

    python benchmarks/kernel_resources.py                        # the default launches
    python benchmarks/kernel_resources.py --launch 16,8,2 --baseline old/triton_kernels.py --json out.json

Results depend on the Triton version (the GPU image's is what counts: install it beside, e.g.
``pip install --target /tmp/triton36 triton==3.6.0`` and run with ``PYTHONPATH=/tmp/triton36``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_sweep import load_baseline  # noqa: E402
from throughput import write_result  # noqa: E402

from headsim.stats import triton_kernels as tk  # noqa: E402

TP, DP, NB, KP = 128, 64, 128, 16  # BERT-base positions and head size; 120 histogram bins (+1) → 128; top-3 columns → 16
FLOATS = {"scale", "threshold", "bscale", "boffset"}
POINTERS = {"valid_ptr": "*i8", "ids_ptr": "*i32", "tiles_ptr": "*i32", "sent_ptr": "*i32", "top_ptr": "*i64", "loc_ptr": "*i32",
            "hist_ptr": "*i32", "rows_ptr": "*i32", "cols_ptr": "*i32", "inner_ptr": "*i32", "cnt_ptr": "*i32"}
INPUTS = {"q_ptr", "k_ptr", "v_ptr", "o_ptr", "z_ptr"}  # bf16; every other pointer is float32
UNALIGNED = {"H", "K", "nbins", "B", "per"}  # 12 heads, 3 columns, 120 bins: no multiples of 16; B, per: never specialised


_SASS_LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH_TARGET = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def sass_loop(sass: str) -> dict | None:
    """The largest loop of a kernel's SASS (``cuobjdump -sass``): the instructions from a backward
    branch's target to the branch, i.e. what one thread issues per iteration of the window loop, and
    the opcodes most used there. None for a kernel without a loop."""
    ins = [(int(m.group(1), 16), m.group(2)) for m in map(_SASS_LINE.match, sass.splitlines()) if m]
    index = {addr: i for i, (addr, _) in enumerate(ins)}
    spans = [(index[t], i) for i, (addr, text) in enumerate(ins)
             if (b := _BRANCH_TARGET.search(text)) and (t := int(b.group(1), 16)) < addr and t in index]
    if not spans:
        return None
    start, end = max(spans, key=lambda span: span[1] - span[0])
    ops = Counter(re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0] for _, text in ins[start:end + 1])
    return {"instructions": end - start + 1, "opcodes": dict(ops.most_common(12))}


def compile_one(fn, constexprs: dict, arch: int, **options) -> dict:
    """Compile ``fn`` for ``sm_<arch>`` and read its resources (and, for a looping kernel, its loop)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import triton

    names = fn.arg_names
    signature = {n: "constexpr" if n in constexprs else
                 ("*bf16" if n in INPUTS else POINTERS.get(n, "*fp32")) if n.endswith("_ptr") else
                 ("fp32" if n in FLOATS else "i32") for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
             if signature[n] != "constexpr" and n not in FLOATS and n not in UNALIGNED}
    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                            target=GPUTarget("cuda", arch, 32), options=options)
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([str(tool), "--dump-resource-usage", str(cubin)], capture_output=True, text=True).stdout
        sass = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True).stdout
    ttgir = kernel.asm["ttgir"]
    registers, stack = (int(re.search(rf"{k}:(\d+)", usage).group(1)) for k in ("REG", "STACK"))
    threads = 32 * options.get("num_warps", 4)
    return {"registers": registers, "spill_stack_bytes": stack, "shared_bytes": kernel.metadata.shared,
            "programs_per_sm_by_registers": 65536 // (threads * max(registers, 1)),
            "prefetched_loads": ttgir.count("async_copy_global_to_local"),
            "matrix": "wgmma" if "warp_group_dot" in ttgir else "mma.sync" if "tt.dot" in ttgir or "mma" in ttgir else "none",
            "loop": sass_loop(sass)}


def report(module, launches: list, arch: int) -> list[dict]:
    """Every kernel of ``module`` (headsim's or a baseline file) under each launch."""
    rows = []
    pairs = {"rows": module._pairs_kernel, "triangle": getattr(module, "_pairs_triangle_kernel", None)}
    for launch in launches:
        tiles = getattr(launch, "tiles", "rows")
        looped = [("pairs", pairs[tiles], dict(NB=NB))]
        if tiles == "rows":  # the attention pass has row tiles only
            looped.insert(0, ("attention", module._attention_kernel, dict(STORE_O=True)))
        for name, fn, extra in looped:
            if fn is None:  # a version without this tiling
                continue
            cx = {k: v for k, v in dict(BM=launch.block_rows, TP=TP, DP=DP, F32=False, **extra).items() if k in fn.arg_names}
            if "PER" in fn.arg_names:  # versions before the run length became a runtime argument
                cx["PER"] = 16
            row = {"kernel": name, "launch": vars(launch),
                   **compile_one(fn, cx, arch, num_warps=launch.num_warps, num_stages=launch.num_stages)}
            if row["loop"]:  # what one window costs a head in issued warp instructions, all its programs together
                blocks = -(-TP // min(launch.block_rows, TP))
                programs = blocks * (blocks + 1) // 2 if tiles == "triangle" and name == "pairs" else blocks
                row["warp_instructions_per_window_head"] = row["loop"]["instructions"] * launch.num_warps * programs
            rows.append(row)
    rows.append({"kernel": "peak", **compile_one(module._peak_kernel, dict(TP=TP, DP=DP, F32=False), arch, num_warps=8)})
    rows.append({"kernel": "columns", **compile_one(module._columns_kernel, dict(TP=TP, DP=DP, KP=KP, F32=False), arch,
                                                    num_warps=4)})
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, default=90, help="NVIDIA compute capability × 10 (default 90: H100/H200)")
    ap.add_argument("--launch", action="append", default=[], metavar="ROWS,WARPS,STAGES[,TILES]",
                    help="a launch of the looping kernels to read (repeatable; default: headsim's defaults)")
    ap.add_argument("--baseline", help="a triton_kernels.py of another version, read the same way")
    ap.add_argument("--baseline-launch", default="32,4,3",
                    help="the baseline's launch (default 32,4,3: the versions before Launch, at Triton's default 3 stages)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if tk.triton is None:
        sys.exit("kernel_resources.py needs Triton (fix: pip install triton)")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    launches = [tk.Launch.parse(s) for s in args.launch] or sorted(
        {tk.ATTENTION_LAUNCH, tk.PAIRS_LAUNCH}, key=lambda x: tuple(vars(x).values()))
    result = {"triton": tk.triton.__version__, "arch": f"sm_{args.arch}",
              "shapes": "BERT-base: 12 heads × 128 positions × 64, bf16", "kernels": report(tk, launches, args.arch)}
    if args.baseline:
        result["baseline"] = {"file": args.baseline, "kernels": report(load_baseline(args.baseline),
                                                                              [tk.Launch.parse(args.baseline_launch)],
                                                                              args.arch)}
    for tag, rows in (("headsim", result["kernels"]), ("baseline", result.get("baseline", {}).get("kernels", []))):
        for r in rows:
            launch = ",".join(str(v) for v in r.get("launch", {}).values()) or "-"
            loop = (f"  loop {r['loop']['instructions']} instructions, {r['warp_instructions_per_window_head']} warp "
                    f"instructions per window and head" if r.get("warp_instructions_per_window_head") else "")
            print(f"{tag:9s}{r['kernel']:10s} launch {launch:15s} registers {r['registers']:3d}  spill {r['spill_stack_bytes']:5d} B  "
                  f"shared {r['shared_bytes']:6d} B  programs/SM {r['programs_per_sm_by_registers']}  "
                  f"prefetched loads {r['prefetched_loads']}  {r['matrix']}{loop}")
    return write_result(result, args.json)


if __name__ == "__main__":
    main()
