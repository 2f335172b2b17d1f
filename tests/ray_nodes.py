"""A Ray cluster of several nodes on this machine, one of them lost mid-run (run by tests/test_ray.py in a
process of its own, so the test session's own Ray connection is untouched).

    python tests/ray_nodes.py MODEL CORPUS OUT REPORT

starts a head node without CPUs (the driver and the run's progress actor live there) and three nodes of
one CPU each (``ray.cluster_utils.Cluster``: separate raylets and object stores), runs ``headsim.analyze``
on the Ray engine with two workers, and removes, mid-share, the node whose worker first reaches its first
batch (it holds that batch until the node is gone): Ray restarts the worker on the spare node and its
share runs again. Writes to REPORT (JSON) the run's ``run.json`` ``ray`` record, the node removed and the
process ids of every process the cluster started; ends them all before it exits.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import psutil


def _hold_first_batch(marker: str, module, args) -> None:
    """Forward pre-hook on the workers: the first batch of the first worker to get here writes its node's
    id to ``marker`` and waits until that node is removed (its process ends with it)."""
    import ray

    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None or os.path.exists(marker):
        return
    try:
        fd = os.open(marker + ".lock", os.O_CREAT | os.O_EXCL)  # one worker only
    except FileExistsError:
        return
    os.close(fd)
    Path(marker + ".tmp").write_text(ray.get_runtime_context().get_node_id())
    os.replace(marker + ".tmp", marker)
    time.sleep(120)  # the node is removed meanwhile


def main(model: str, corpus: str, out: str, report: str) -> None:
    import copy

    import ray
    from ray.cluster_utils import Cluster

    import headsim
    from headsim.model.load import from_pretrained_objects, load_model
    from headsim.runs.ray_cluster import _descendants, _end

    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")  # a shared machine: no kills for others' memory
    fast = {"health_check_period_ms": 200, "health_check_failure_threshold": 3, "health_check_timeout_ms": 500}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                            "_system_config": fast})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(3)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    marker = str(Path(report).with_suffix(".node"))
    loaded = load_model(model)
    hooked = copy.deepcopy(loaded.model)
    hooked.register_forward_pre_hook(lambda module, args: _hold_first_batch(marker, module, args))
    held = from_pretrained_objects(hooked, loaded.tokenizer, name="tiny-held")
    result: dict = {}

    def run() -> None:
        try:
            res = headsim.analyze(held, corpus, out=out, engine="ray", actors=2, share_windows=24, seq_len=32,
                                  batch_size=8, progress=False)
            result["ray"] = res.meta["ray"]
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            result["error"] = f"{type(exc).__name__}: {exc} (from {str(exc.__context__)[:2000]})"

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 240
    while not os.path.exists(marker) and thread.is_alive() and time.time() < deadline:
        time.sleep(0.1)
    victim = Path(marker).read_text() if os.path.exists(marker) else None
    removed = [n for n in nodes if n.node_id == victim]
    for node in removed:
        cluster.remove_node(node, allow_graceful=False)
    thread.join(timeout=300)
    started = [p.pid for p in _descendants()]
    ray.shutdown()
    cluster.shutdown()
    _end([p for p in _descendants()])
    Path(report).write_text(json.dumps({**result, "removed": victim if removed else None, "pids": started}))


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
