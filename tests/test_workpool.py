"""The ordered worker pool: order, errors, crashes, shutdown, and no re-import of the caller's main."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from headsim.errors import HeadsimError
from headsim.workpool import OrderedPool, _cgroup_quota, available_cpus


def _slow_square(x: int, delay: float) -> int:
    time.sleep(delay)
    return x * x


def _pid() -> int:
    return os.getpid()


def _env(name: str) -> str | None:
    return os.environ.get(name)


def _fail(x: int) -> None:
    raise KeyError(f"no item {x}")


def _die() -> None:
    os._exit(7)


def _bad_init() -> None:
    raise RuntimeError("cannot start")


def test_results_come_in_submission_order_whatever_order_they_finish_in():
    # early items sleep longest, so they finish last on two workers
    args = [(i, 0.2 if i < 2 else 0.0) for i in range(12)]
    with OrderedPool(2) as pool:
        assert list(pool.map(_slow_square, args)) == [i * i for i in range(12)]


def test_work_is_spread_over_separate_single_threaded_processes():
    with OrderedPool(3, in_flight=1) as pool:
        pids = set(pool.map(_slow_pid, [(0.2,)] * 6))
        assert len(pids) == 3 and os.getpid() not in pids
        assert pool.submit(_env, "TOKENIZERS_PARALLELISM").result() == "false"


def _slow_pid(delay: float) -> int:
    time.sleep(delay)
    return os.getpid()


def test_an_exception_in_a_task_is_raised_in_the_parent_with_the_worker_traceback():
    with OrderedPool(1) as pool:
        with pytest.raises(KeyError, match="no item 3") as info:
            list(pool.map(_fail, [(3,)]))
        if sys.version_info >= (3, 11):
            assert any("_fail" in note for note in info.value.__notes__)
        assert pool.submit(_slow_square, 4, 0.0).result() == 16  # the worker survives its task's error


def test_a_worker_that_dies_fails_its_tasks_with_a_clear_error():
    with OrderedPool(1) as pool:
        fut = pool.submit(_die)
        with pytest.raises(HeadsimError, match="exit code 7"):
            fut.result(timeout=30)


def test_a_failing_initializer_stops_map_with_its_own_error():
    with OrderedPool(1, _bad_init) as pool:
        with pytest.raises(RuntimeError, match="cannot start"):
            list(pool.map(_slow_square, [(1, 0.0)]))


def test_leaving_the_pool_stops_its_processes_even_mid_stream():
    with OrderedPool(2) as pool:
        it = pool.map(_slow_square, [(i, 0.05) for i in range(100)])
        assert next(it) == 0
        procs = [w.proc for w in pool.workers]
    assert all(p.poll() is not None for p in procs)


def test_bad_process_count_is_a_clear_error():
    with pytest.raises(HeadsimError, match="processes 0 must be 1 or more"):
        OrderedPool(0)


def test_a_script_without_a_main_guard_can_use_workers(tmp_path):
    """multiprocessing's spawn would re-run this script in each worker and fail; ours never imports it."""
    marker = tmp_path / "imported"
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        import pathlib
        pathlib.Path({str(marker)!r}).open("a").write("x")
        from headsim.workpool import OrderedPool
        from tests.test_workpool import _slow_square
        with OrderedPool(2) as pool:
            print(list(pool.map(_slow_square, [(i, 0.0) for i in range(5)])))
    """))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 4, 9, 16]"
    assert marker.read_text() == "x"  # the script ran once: in the parent only


def test_available_cpus_respects_affinity_and_a_container_quota(tmp_path):
    assert 1 <= available_cpus() <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert available_cpus() <= len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert _cgroup_quota(tmp_path) == 2.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert _cgroup_quota(tmp_path) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000")
    assert _cgroup_quota(tmp_path) == 3.0
