#!/usr/bin/env python
"""What the Ray engine adds on one machine: ``headsim analyze`` on the same windows in one process and
on a local Ray cluster with 1 and 2 workers, and the cluster's start-up time (the single process
also with one torch thread, as each 1-CPU worker runs).

Every run analyses the first ``--windows`` packed windows of the same corpus with the same model and
batch size, so the runs must agree (checked: integer statistics equal, float sums to 1e-6) and only
the time differs. Reported per run: the wall time of the ``analyze`` call, the analysis loop alone
(``run.json``'s ``seconds`` and windows/s), and for Ray the workers' start-up (actors spawned, model
loaded) and the token count; separately ``ray.init`` of a local cluster. The machine's load
(``os.getloadavg``) before and after is recorded: on a shared machine the numbers move with it.

    python benchmarks/ray_scale.py --windows 512 --json benchmarks/results/ray-scale-cpu.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from headsim.runs.analyze import analyze
from headsim.corpus import load_corpus
from headsim.runs.rundir import load_run
from headsim.workpool import available_cpus


def compare(a: Path, b: Path) -> dict:
    """Integer variables equal? The largest relative difference of the float ones."""
    da, db = load_run(a).dataset, load_run(b).dataset
    ints_equal, worst = True, 0.0
    for name in da.data_vars:
        x, y = da[name].values, db[name].values
        if x.dtype.kind in "iu":
            ints_equal &= bool(np.array_equal(x, y))
        else:
            scale = np.maximum(np.abs(x), np.abs(y))
            rel = np.divide(np.abs(x - y), scale, out=np.zeros_like(scale), where=scale > 0)
            worst = max(worst, float(rel.max(initial=0.0)))
    return {"integers_equal": ints_equal, "max_relative_float_difference": worst}


def timed(label: str, out: Path, **kw) -> dict:
    t = time.perf_counter()
    res = analyze(out=out, progress=False, **kw)
    wall = time.perf_counter() - t
    row = {"run": label, "wall_seconds": round(wall, 3), "windows": res.meta["windows"],
           "analysis_seconds": res.meta["seconds"], "analysis_windows_per_second": res.meta["windows_per_second"],
           "end_to_end_windows_per_second": round(res.meta["windows"] / wall, 3)}
    if "ray" in res.meta:
        row.update({k: res.meta["ray"][k] for k in ("workers", "cpus_per_worker", "share_windows", "shares",
                                                    "startup_seconds", "count_seconds")})
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help="model name or path (default: the embedded MiniLM)")
    ap.add_argument("--corpus", default="default")
    ap.add_argument("--windows", type=int, default=512)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--share-windows", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import ray

    load_before = os.getloadavg()
    corpus = load_corpus(args.corpus)  # read once (the default corpus parses a Wikipedia dump)
    common = dict(model=args.model, corpus=corpus, windows=args.windows, seq_len=args.seq_len,
                  batch_size=args.batch_size, sentence_splitter="pysbd")
    runs = []
    with tempfile.TemporaryDirectory(prefix="ray-scale-") as tmp:
        tmp = Path(tmp)
        import torch

        threads = torch.get_num_threads()
        runs.append(timed(f"single process, {threads} torch threads", tmp / "single", **common))
        if threads > 1:  # the workers below run 1 thread each: the same for the single process
            torch.set_num_threads(1)
            runs.append(timed("single process, 1 torch thread", tmp / "single-1", **common))
            torch.set_num_threads(threads)
        t = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        init_seconds = time.perf_counter() - t
        print(json.dumps({"ray.init local cluster seconds": round(init_seconds, 3)}), flush=True)
        cpus = available_cpus()
        for label, workers, cpw in (("ray, 1 worker x all CPUs", 1, cpus), ("ray, 1 worker x 1 CPU", 1, 1),
                                    ("ray, 2 workers x 1 CPU", 2, 1)):
            out = tmp / label.replace(" ", "_").replace(",", "")
            row = timed(label, out, engine="ray", workers=workers, cpus_per_worker=cpw,
                        share_windows=args.share_windows, **common)
            row.update(compare(tmp / "single", out))
            runs.append(row)
        ray.shutdown()
    single = runs[0]["analysis_windows_per_second"]  # the default single process
    for row in runs[1:]:
        row["analysis_rate_vs_single"] = round(row["analysis_windows_per_second"] / single, 3)
        row["end_to_end_rate_vs_single"] = round(row["end_to_end_windows_per_second"] / runs[0]["end_to_end_windows_per_second"], 3)
    result = {
        "model": args.model if args.model != "default" else "embedded all-MiniLM-L6-v2 (pretrained)",
        "corpus": corpus.name, "windows": args.windows, "seq_len": args.seq_len, "batch_size": args.batch_size,
        "device": "cpu", "cpus": {"os.cpu_count": os.cpu_count(), "available": available_cpus()},
        "ray_version": ray.__version__, "python": platform.python_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "ray_init_seconds": round(init_seconds, 3), "runs": runs,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
