#!/usr/bin/env python
"""What the Ray engine adds on one machine: ``headsim analyze`` on the same windows in one process and
on a local Ray cluster with as many 1-CPU workers as cores, side by side, ``--repeat`` times each
(interleaved, the order alternating, so a change in the machine's load hits both alike), and the
cluster's start-up time. ``--modes all`` adds the single process with one torch thread and Ray with
1 worker x all CPUs and 1 worker x 1 CPU (once each).

Every run analyses the first ``--windows`` packed windows of the same corpus with the same model and
batch size, so the runs must agree (checked: integer statistics equal, float sums to 1e-6) and only
the time differs. Reported per run: the wall time of the ``analyze`` call (for Ray: the workers' start-up
and the token count included, ``ray.init`` not), the analysis loop alone (``run.json``'s ``seconds``
and windows/s), for Ray the workers' start-up (actors spawned, model loaded), the token count and the
workers' seconds per step of a share (``worker_seconds``: waiting for windows, model and statistics, …),
and the machine's load (``os.getloadavg``) before each run: on a shared machine the numbers move with it.
The summary gives the median, minimum and maximum of each engine's wall time and their ratio.

    python benchmarks/ray_scale.py --windows 2000 --repeat 5 --json benchmarks/results/ray-scale-2000.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from headsim.runs.analyze import analyze
from headsim.corpus import load_corpus
from headsim.runs.ray_cluster import LOCAL_CLUSTER
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
    load = os.getloadavg()[0]
    t = time.perf_counter()
    res = analyze(out=out, progress=False, overwrite=True, **kw)
    wall = time.perf_counter() - t
    row = {"run": label, "wall_seconds": round(wall, 3), "windows": res.meta["windows"],
           "analysis_seconds": res.meta["seconds"], "analysis_windows_per_second": res.meta["windows_per_second"],
           "end_to_end_windows_per_second": round(res.meta["windows"] / wall, 3), "load_average_before": round(load, 2)}
    if "ray" in res.meta:
        row.update({k: res.meta["ray"][k] for k in ("workers", "cpus_per_worker", "share_windows", "shares",
                                                    "startup_seconds", "count_seconds", "worker_seconds")})
    print(json.dumps(row), flush=True)
    return row


def spread(rows: list[dict], key: str = "wall_seconds") -> dict:
    values = [r[key] for r in rows]
    return {"median": round(float(np.median(values)), 3), "min": min(values), "max": max(values), "runs": len(values)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help="model name or path (default: the embedded MiniLM)")
    ap.add_argument("--corpus", default="default")
    ap.add_argument("--windows", type=int, default=2000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--share-windows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each engine, interleaved")
    ap.add_argument("--modes", choices=("pair", "all"), default="pair")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import ray
    import torch

    load_before = os.getloadavg()
    corpus = load_corpus(args.corpus)  # read once (the default corpus parses a Wikipedia dump)
    common = dict(model=args.model, corpus=corpus, windows=args.windows, seq_len=args.seq_len,
                  batch_size=args.batch_size, sentence_splitter="pysbd")
    cpus, threads = available_cpus(), torch.get_num_threads()
    t = time.perf_counter()
    ray.init(num_cpus=cpus, **LOCAL_CLUSTER)  # as a run's own local cluster starts (workers at niceness 0)
    init_seconds = time.perf_counter() - t
    print(json.dumps({"ray.init local cluster seconds": round(init_seconds, 3)}), flush=True)
    local_label, ray_label = f"single process, {threads} torch threads", f"ray, {cpus} workers x 1 CPU"
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ray-scale-") as tmp:
        tmp = Path(tmp)
        for i in range(args.repeat):
            order = [("local", local_label), ("ray", ray_label)]
            for engine, label in (order if i % 2 == 0 else order[::-1]):
                if engine == "local":
                    row = timed(label, tmp / "single", **common)
                else:
                    row = timed(label, tmp / "ray", engine="ray", workers=cpus, cpus_per_worker=1,
                                share_windows=args.share_windows, **common)
                row["repeat"] = i
                runs.append(row)
            runs[-1].update(compare(tmp / "single", tmp / "ray"))
            runs[-2].update(compare(tmp / "single", tmp / "ray"))
            write(args, corpus, cpus, threads, load_before, init_seconds, runs, local_label, ray_label)  # kept as it goes
        if args.modes == "all":
            torch.set_num_threads(1)
            runs.append(timed("single process, 1 torch thread", tmp / "single-1", **common))
            torch.set_num_threads(threads)
            for label, workers, cpw in (("ray, 1 worker x all CPUs", 1, cpus), ("ray, 1 worker x 1 CPU", 1, 1)):
                row = timed(label, tmp / "ray-other", engine="ray", workers=workers, cpus_per_worker=cpw,
                            share_windows=args.share_windows, **common)
                row.update(compare(tmp / "single", tmp / "ray-other"))
                runs.append(row)
    ray.shutdown()
    print(json.dumps(write(args, corpus, cpus, threads, load_before, init_seconds, runs, local_label, ray_label), indent=1))


def write(args, corpus, cpus, threads, load_before, init_seconds, runs, local_label, ray_label) -> dict:
    """The result so far (a summary of the runs done), written to ``--json``."""
    import ray

    local = [r for r in runs if r["run"] == local_label]
    remote = [r for r in runs if r["run"] == ray_label]
    summary = {"local_wall": spread(local), "ray_wall": spread(remote),
               "local_analysis": spread(local, "analysis_seconds"), "ray_analysis": spread(remote, "analysis_seconds"),
               "ray_startup": spread(remote, "startup_seconds"),
               "ratio_of_medians_wall": round(spread(remote)["median"] / spread(local)["median"], 3),
               "ratio_of_medians_analysis": round(spread(remote, "analysis_seconds")["median"]
                                                  / spread(local, "analysis_seconds")["median"], 3),
               "ratios_per_pair": [round(b["wall_seconds"] / a["wall_seconds"], 3) for a, b in zip(local, remote)]}
    result = {
        "model": args.model if args.model != "default" else "embedded all-MiniLM-L6-v2 (pretrained)",
        "corpus": corpus.name, "windows": args.windows, "seq_len": args.seq_len, "batch_size": args.batch_size,
        "device": "cpu", "cpus": {"os.cpu_count": os.cpu_count(), "available": cpus}, "torch_threads": threads,
        "ray_version": ray.__version__, "python": platform.python_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "ray_init_seconds": round(init_seconds, 3), "summary": summary, "runs": runs,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
