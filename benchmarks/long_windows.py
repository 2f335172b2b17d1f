#!/usr/bin/env python
"""Long windows: peak memory and speed of every corpus statistic against the bare forward, by window length.

Two random-weight models (timing and memory only, never science), built from their transformers
config classes with the embedded MiniLM vocabulary:
  * ``decoder``: a tiny Mistral/Llama-kind decoder (Llama config: 4 layers, 8 heads, 2 key/value
    heads, hidden 128, RoPE, position limit 65,536);
  * ``mistral`` (when named): the same sizes in a Mistral config, sliding window of 4,096 keys;
  * ``encoder``: a tiny ModernBERT-style encoder (4 layers, 8 heads, hidden 128, local attention
    over 128 tokens in three layers of four, global in the fourth; RoPE; position limit 65,536).

Each (model, T) runs in its own subprocess, so its peak RSS is its own. In it, on the same windows
(random token ids, one sentence per 24 tokens), side by side: the bare forward (the model as loaded,
sdpa attention, nothing captured), then every statistic (headsim.runs.engine.Engine → CorpusStats, blocks
of query rows, position bins above the resolution), each timed over ``--repeats`` passes after one
warm-up; their windows/s and ratio. The bare forward's peak RSS is measured after its warm-up; the
peak is then reset (Linux: ``/proc/self/clear_refs``; ``peak_rss_own`` says it was) and the
statistics' own peak measured over their first pass, so a bare forward that needs more (ModernBERT's
sdpa at 32,768 tokens) does not hide it. A bare forward that runs out of memory (the decoder's at 32,768
tokens on an 80 GB GPU) leaves the row with ``bare_failed`` and no ratio; the statistics are still timed.
Each row also carries processor seconds (``cpu_seconds``, ``cpu_ratio``), steadier than wall time on a
shared machine; ``--threads`` sets torch's threads in each process.

    python benchmarks/long_windows.py --json benchmarks/results/long-windows-cpu.json --plot docs/img/long-windows.png
    python benchmarks/long_windows.py --one decoder 8192 > d8192.json   # one size, printed as JSON
    python benchmarks/long_windows.py --one decoder 8192 --device cuda   # on a GPU, its peak allocations too
    python benchmarks/long_windows.py --rows d*.json e*.json --json ... --plot ...   # table and plot of such rows
    python benchmarks/long_windows.py --one mistral 8192 --analyze --windows 2   # headsim analyze of the default corpus
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

SIZES = (128, 512, 2048, 8192, 32768)
MODELS = ("decoder", "encoder")
#: real configurations with random weights (bf16 on a GPU; the embedded vocabulary of 30,522 tokens stands in
#: for Llama's 128,256, which changes the embedding table's size and nothing of attention)
SHAPES = {
    "tiny-mistral": dict(family="mistral", hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=2, sliding_window=4096),
    "llama-1b": dict(family="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                     num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0),
    "llama-8b": dict(family="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                     num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0),
}
KINDS = (*MODELS, "mistral", "tiny-llama-gqa", "tiny-modernbert", *SHAPES)
ALIASES = {"tiny-llama-gqa": "decoder", "tiny-modernbert": "encoder", "mistral": "tiny-mistral"}


def build(kind: str, device: str = "cpu", dtype: torch.dtype | None = None):
    """The random-weight model of ``kind`` (seed 0; :data:`KINDS`) with the embedded tokenizer, on
    ``device`` in ``dtype`` (default: float32, bf16 for the real shapes on a GPU), as a LoadedModel."""
    from headsim.model.load import from_pretrained_objects, load_model

    tok = copy.deepcopy(load_model().tokenizer)
    torch.manual_seed(0)
    kind = ALIASES.get(kind, kind)
    if kind in SHAPES:
        from transformers import LlamaConfig, LlamaModel, MistralConfig, MistralModel

        spec = dict(SHAPES[kind])
        config_class, model_class = {"llama": (LlamaConfig, LlamaModel), "mistral": (MistralConfig, MistralModel)}[spec.pop("family")]
        tok.bos_token = tok.cls_token
        cfg = config_class(**spec, max_position_embeddings=131072, vocab_size=len(tok))
        cfg._attn_implementation = "sdpa"
        big = kind.startswith("llama-")
        dtype = dtype or (torch.bfloat16 if big and device != "cpu" else torch.float32)
        before = torch.get_default_dtype()
        torch.set_default_dtype(dtype)  # weights made in their dtype on the device: no float32 copy of 8B parameters
        try:
            with torch.device(device):
                model = model_class(cfg).eval()
        finally:
            torch.set_default_dtype(before)
        return from_pretrained_objects(model, tok, name="tiny-mistral-gqa" if kind == "tiny-mistral" else f"{kind} (random weights)")
    if kind == "decoder":
        from transformers import LlamaConfig, LlamaModel

        tok.bos_token = tok.cls_token
        sizes = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=8,
                     num_key_value_heads=2, max_position_embeddings=65536, vocab_size=len(tok))
        if kind == "mistral":  # a sliding window of 4,096 keys (Mistral-7B-v0.1's)
            cfg, net, name = MistralConfig(sliding_window=4096, **sizes), MistralModel, "tiny-mistral-gqa"
        else:
            cfg, net, name = LlamaConfig(**sizes), LlamaModel, "tiny-llama-gqa"
        cfg._attn_implementation = "sdpa"
        return from_pretrained_objects(net(cfg).eval().to(device), tok, name=name)
    from transformers import ModernBertConfig, ModernBertModel

    cfg = ModernBertConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=8,
                           max_position_embeddings=65536, vocab_size=len(tok), global_attn_every_n_layers=4,
                           local_attention=128, pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id,
                           sep_token_id=tok.sep_token_id)
    cfg._attn_implementation = "sdpa"
    return from_pretrained_objects(ModernBertModel(cfg).eval().to(device), tok, name="tiny-modernbert")


def windows(loaded, t: int, n: int):
    """``n`` full windows of ``t`` random tokens, framed like the model's own, sentences of 24 tokens."""
    from headsim.windows import Windows

    rng = np.random.default_rng(0)
    framing = loaded.framing
    ids = rng.integers(1000, 29000, size=(n, t))
    ids[:, 0] = framing.open
    if framing.close is not None:
        ids[:, -1] = framing.close
    sentence = np.broadcast_to(np.arange(t) // 24, (n, t)).copy()
    sentence[:, 0] = -1
    if framing.close is not None:
        sentence[:, -1] = -1
    none = np.full((n, t), -1, np.int64)
    return Windows(ids.astype(np.int64), np.ones((n, t), np.int64), np.full((n, t, 2), -1, np.int64),
                   sentence.astype(np.int64), none)


def rss() -> int:
    """This process's peak resident memory since start, or since :func:`reset_peak` (Linux's VmHWM)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak() -> bool:
    """Start the peak of :func:`rss` afresh (Linux: ``5`` into ``/proc/self/clear_refs``), so the
    statistics' peak is their own and not the bare forward's when that one is higher."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def one(kind: str, t: int, n: int, repeats: int, resolution: int, max_memory: str | None, device: str = "cpu",
        backend: str = "auto", loaded=None) -> dict:
    """One model at one length, in this process (see the module docstring). On CUDA the row also carries
    the GPU's peak allocations, the bare forward's and the statistics' own (``peak_gpu_bare``, ``peak_gpu``)."""
    from headsim.runs.engine import Engine
    from headsim.memory import default_max_memory, parse_memory, plan_memory
    from headsim.stats import CorpusStats

    loaded = loaded or build(kind, device)
    w = windows(loaded, t, n)
    ids, mask = torch.as_tensor(w.input_ids, device=device), torch.as_tensor(w.attention_mask, device=device)
    stack = loaded.arch.stack_of(loaded.model)
    cuda = loaded.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def bare():
        with torch.inference_mode():
            for i in range(n):
                stack(input_ids=ids[i:i + 1], attention_mask=mask[i:i + 1])
        sync()

    budget = parse_memory(max_memory) if max_memory else default_max_memory(loaded.device)
    memory = plan_memory(loaded, t, resolution, budget, batch_size=1)
    fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, t, resolution=resolution, tile_bytes=memory.tile_bytes,
                                device=loaded.device, backend=backend)
    stats = fresh()
    engine = Engine(loaded, stats, fresh, tile_bytes=memory.tile_bytes)

    def full():
        for i in range(n):
            engine.process(w.select(slice(i, i + 1)))
        sync()

    bare_failed = None
    if cuda:  # a size after another in this process: the bare forward's peak is its own, not the last size's
        torch.cuda.reset_peak_memory_stats()
    try:
        bare()  # warm-up
    except torch.OutOfMemoryError as e:  # the bare sdpa forward's own limit (the decoder at 32,768 tokens on an 80 GB GPU)
        bare_failed = f"bare forward out of memory: {str(e).splitlines()[0]}"
        if cuda:
            torch.cuda.empty_cache()
    bare_rss = rss()
    separate = reset_peak()
    gpu = {}
    if cuda:
        gpu["peak_gpu_bare"] = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    stats_rss = None
    times = {"bare": [], "stats": []}
    cpu = {"bare": [], "stats": []}  # processor seconds of this process (all threads): steadier on a shared machine
    for _ in range(repeats):  # alternate, so both see the same machine
        for name, fn in (("stats", full), ("bare", bare))[:1 if bare_failed else 2]:
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
            if name == "stats" and stats_rss is None:
                stats_rss = rss()  # the statistics' own peak (the whole process's where it cannot be reset)
                if cuda:
                    gpu["peak_gpu"] = torch.cuda.max_memory_allocated()
    best = {k: min(v) if v else None for k, v in times.items()}
    best_cpu = {k: min(v) if v else None for k, v in cpu.items()}
    ratio = lambda b: None if bare_failed else b["bare"] / b["stats"]
    return {"model": kind, "model_name": loaded.name, "seq_len": t, "windows": n, "repeats": repeats,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "dtype": str(loaded.model.dtype),
            "backend": engine.stats.backend_record(), "layers": loaded.n_layers, "heads": loaded.n_heads,
            "pairs_launch": _pairs_launch(),
            "resolution": resolution, "tile_bytes": memory.tile_bytes, "peak_rss_bare": bare_rss, "peak_rss": stats_rss,
            "peak_rss_own": separate, "bare_failed": bare_failed,
            "bare_windows_per_s": None if bare_failed else n / best["bare"], "stats_windows_per_s": n / best["stats"],
            "ratio": ratio(best), "seconds": times, "cpu_seconds": cpu,
            "cpu_ratio": ratio(best_cpu), "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(), "device": torch.cuda.get_device_name() if cuda else "cpu", **gpu}


def through_analyze(kind: str, t: int, n: int, repeats: int, max_memory: str | None, loaded, corpus: str = "default",
                    workers: int | None = None) -> dict:
    """``headsim.analyze`` of the first ``n`` windows of ``corpus`` at ``t`` tokens (the whole run: windowing,
    statistics, the run directory written), beside the bare forward of the very windows it analysed
    (read back from its ``windows.parquet``), alternating in this process after one warm-up of each."""
    import tempfile

    import headsim

    stack = loaded.arch.stack_of(loaded.model)
    times = {"bare": [], "analyze": []}
    cpu = {"bare": [], "analyze": []}
    ran: dict = {}

    def full():
        with tempfile.TemporaryDirectory() as d:
            run = headsim.analyze(loaded, corpus, windows=n, seq_len=t, out=Path(d) / "run", max_memory=max_memory,
                                  progress=False, workers=workers)
            ran.update(meta=run.meta, windows=run.windows)

    def bare():
        w = ran["windows"]
        with torch.inference_mode():
            for ids, mask in zip(w["input_ids"], w["attention_mask"]):
                stack(input_ids=torch.as_tensor(np.asarray(ids, np.int64))[None],
                      attention_mask=torch.as_tensor(np.asarray(mask, np.int64))[None])

    full()  # warm-up (and the windows for the bare forward)
    bare()
    reset_peak()
    peak = None
    for _ in range(repeats):
        for name, fn in (("analyze", full), ("bare", bare)):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
            peak = rss() if peak is None else peak  # the analyze pass's peak (the warm-up's when it cannot be reset)
    best = {k: min(v) for k, v in times.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    meta = ran["meta"]
    return {"model": kind, "model_name": loaded.name, "seq_len": t, "windows": len(ran["windows"]), "repeats": repeats,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "dtype": str(loaded.model.dtype),
            "through": "headsim.analyze", "corpus": corpus, "corpus_documents": meta["corpus"].get("documents"),
            "backend": meta.get("statistics_backend"), "resolution": meta["memory"].get("resolution"),
            "batch_size": meta.get("batch_size"), "peak_rss": peak, "peak_rss_run": meta["memory"].get("peak_rss"),
            "bare_windows_per_s": n / best["bare"], "stats_windows_per_s": n / best["analyze"],
            "ratio": best["bare"] / best["analyze"], "seconds": times, "cpu_seconds": cpu,
            "cpu_ratio": best_cpu["bare"] / best_cpu["analyze"], "threads": torch.get_num_threads(),
            "load_average": os.getloadavg(), "device": "cpu"}


def _pairs_launch() -> str | None:
    """The long windows' GPU pairs kernel's launch (tile side, warps), where Triton is there."""
    try:
        from headsim.stats import triton_long
    except ImportError:
        return None
    return f"{triton_long.PAIRS_LAUNCH.block_rows},{triton_long.PAIRS_LAUNCH.num_warps}"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    gpu = all("peak_gpu" in r for r in rows)  # a GPU's rows: its peak allocations, not the host's RSS
    peak, peak_bare = ("peak_gpu", "peak_gpu_bare") if gpu else ("peak_rss", "peak_rss_bare")
    where = rows[0].get("device", "cpu") if rows else "cpu"
    where = "CPU" if where == "cpu" else where
    for kind, marker in zip(dict.fromkeys(r["model"] for r in rows), "os^vD<>"):
        got = sorted((r for r in rows if r["model"] == kind), key=lambda r: r["seq_len"])
        if not got:
            continue
        x = [r["seq_len"] for r in got]
        label = got[0]["model_name"]
        left.plot(x, [r[peak] / 2**30 for r in got], marker=marker, label=f"{label}: all statistics")
        left.plot(x, [r[peak_bare] / 2**30 for r in got], marker=marker, ls="--", label=f"{label}: bare forward")
        timed = [r for r in got if r["ratio"] is not None]  # a bare forward out of memory has no ratio
        right.plot([r["seq_len"] for r in timed], [r["ratio"] for r in timed], marker=marker, label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("window length T (tokens)")
        ax.grid(alpha=0.3)
    left.set_ylabel("peak GPU allocations (GiB)" if gpu else "peak RSS (GiB)")
    left.set_title(f"Peak memory (random-weight tiny models, {where})", fontsize=10)
    right.set_ylabel("windows/s: all statistics ÷ bare sdpa forward")
    right.set_yscale("log")
    right.axhline(0.1, color="grey", lw=0.8, ls=":")
    right.set_title("Speed relative to the bare forward")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", nargs=2, metavar=("MODEL", "T"),
                   help="run one size here and print its JSON row (T,T,...: several sizes on the one model, a row each)")
    p.add_argument("--models", "--shape", nargs="+", default=list(MODELS), choices=KINDS,
                   help="models to run: the tiny decoder and encoder, tiny-mistral, or real shapes llama-1b, llama-8b")
    p.add_argument("--backend", default="auto",
                   help="statistics backend (auto; eager: the torch tiles; numba; triton), or several: auto,eager")
    p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    p.add_argument("--windows", type=int, default=0, help="windows per size (default: 8 up to 512 tokens, 2 to 8,192, 1 above)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--resolution", type=int, default=512)
    p.add_argument("--max-memory", default=None)
    p.add_argument("--device", default="cpu", help="cpu or cuda (the GPU's peak allocations are reported too)")
    p.add_argument("--launch", type=Path, help="a long_kernel_sweep.py JSON: the long windows' pairs kernel takes its fastest launch")
    p.add_argument("--threads", type=int, default=0, help="torch threads in each size's process (default: torch's own)")
    p.add_argument("--analyze", nargs="?", const="default", metavar="CORPUS",
                   help="with --one: time headsim.analyze of the corpus's first windows (default corpus: several MB) "
                        "beside the bare forward of the same windows, instead of the statistics alone")
    p.add_argument("--workers", type=int, default=None, help="with --analyze: windowing processes (default: analyze's own)")
    p.add_argument("--rows", nargs="+", type=Path, help="rows printed by --one (one file each): tabulate and plot them")
    p.add_argument("--json", type=Path)
    p.add_argument("--plot", type=Path)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.launch and json.loads(a.launch.read_text()).get("fastest"):
        from headsim.stats import triton_long
        from headsim.stats.triton_kernels import Launch

        block, warps = (int(x) for x in json.loads(a.launch.read_text())["fastest"].split(","))
        triton_long.PAIRS_LAUNCH = Launch(block_rows=block, num_warps=warps)
    if a.one:
        kind = a.one[0]
        loaded = build(kind, a.device)  # once for every size and backend of this process
        for t in (int(x) for x in a.one[1].split(",")):
            n = a.windows or (8 if t <= 512 else 2 if t <= 8192 else 1)
            if a.analyze:
                print(json.dumps(through_analyze(kind, t, n, a.repeats, a.max_memory, loaded, a.analyze, a.workers)),
                      flush=True)
                continue
            for backend in a.backend.split(","):
                print(json.dumps(one(kind, t, n, a.repeats, a.resolution, a.max_memory, a.device, backend, loaded)),
                      flush=True)
                if loaded.device.type == "cuda":
                    torch.cuda.empty_cache()
        return 0
    rows = []
    for f in a.rows or []:
        lines = f.read_text().strip().splitlines()
        if not lines:  # a size that failed or ran out of time printed nothing
            print(f"{f}: no row (that size failed)", file=sys.stderr)
            continue
        rows.extend(json.loads(line) for line in lines)  # a row per size and backend
    for kind in [] if a.rows else a.models:
        for t in a.sizes:
            cmd = [sys.executable, __file__, "--one", kind, str(t), "--repeats", str(a.repeats), "--resolution",
                   str(a.resolution), "--windows", str(a.windows), "--threads", str(a.threads), "--device", a.device,
                   "--backend", a.backend] + (["--max-memory", a.max_memory] if a.max_memory else [])
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{kind} T={t}: failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                rows.append({"model": kind, "seq_len": t, "failed": done.stderr.strip().splitlines()[-1:]})
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for row in rows:
        if "failed" not in row:
            bare = (f"bare {row['bare_windows_per_s']:8.3f} w/s  ratio {row['ratio']:.3f}" if row["ratio"] is not None
                    else f"{row['bare_failed']}")
            print(f"{row['model']:8s} T={row['seq_len']:6d}  peak RSS {row['peak_rss'] / 2**30:5.2f} GiB (bare {row['peak_rss_bare'] / 2**30:4.2f})  "
                  f"stats {row['stats_windows_per_s']:8.3f} w/s  {bare}"
                  + (f"  GPU peak {row['peak_gpu'] / 2**30:5.2f} GiB (bare {row['peak_gpu_bare'] / 2**30:4.2f})" if "peak_gpu" in row else ""),
                  flush=True)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "torch": torch.__version__,
            "machine": platform.platform(), "cpus": torch.get_num_threads(), "load_average": os.getloadavg()}
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if a.plot:
        plot([r for r in rows if "failed" not in r], a.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
