"""`headsim analyze --engine ray`: shares cut like the single process's windows, corpus URLs, and on a
local Ray cluster the same run directory as the single process, through a killed actor, a worker's
exception and a killed driver."""

from __future__ import annotations

import copy
import functools
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
import xarray as xr

import headsim
from cli_processes import spawn, wait_for
from headsim.runs.analyze import analyze
from headsim.corpus import lee_documents, load_corpus
from headsim.errors import HeadsimError
from headsim.model.load import from_pretrained_objects, load_model
from headsim.runs.shares import plan_shares, share_batches
from headsim.runs.layout import CHECKPOINT, MANIFEST
from headsim.runs.rundir import load_run
from headsim.windows import Framing, iter_windows, token_counts



def on_ray(test):
    """A test on the local cluster: marked ``ray`` and ``slow`` (both run in CI)."""
    return pytest.mark.slow(pytest.mark.ray(test))

RUN = dict(seq_len=32, batch_size=8, progress=False)  # with share_windows=24: 13 shares of 3 batches
# Each Ray worker costs its start-up (torch and transformers imported, the model loaded: about 13 s of CPU on
# a slow machine): tests whose subject is not several workers at once run one.


@pytest.fixture(scope="session")
def cluster():
    """A local Ray cluster of 2 CPUs and one GPU for the session (a resource Ray schedules by: no device
    is used, the actors it is granted to run on the CPU); its GCS address."""
    ray = pytest.importorskip("ray")
    # the machine is shared: Ray's memory monitor must not kill workers for other processes' memory
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ray-corpus") / "lee.txt"
    path.write_text("\n\n".join(d.text for d in lee_documents()[:40]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def parted(tmp_path_factory, corpus) -> Path:
    """The texts of ``corpus`` as a directory of parts: a .txt, a .jsonl and a .parquet of five row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [d.text for d in load_corpus(corpus)]
    root = tmp_path_factory.mktemp("ray-parts")
    (root / "a.txt").write_text("\n\n".join(texts[:7]), encoding="utf-8")
    (root / "b.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts[7:15]), encoding="utf-8")
    pq.write_table(pa.table({"text": texts[15:]}), root / "c.parquet", row_group_size=6)
    assert pq.ParquetFile(root / "c.parquet").num_row_groups == 5
    return root


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_bert_dir, corpus) -> Path:
    """The single-process run the Ray runs must equal."""
    out = tmp_path_factory.mktemp("ray-ref") / "run"
    analyze(str(tiny_bert_dir), str(corpus), out=out, **RUN)
    return out


def assert_same_stats(ref: Path, heads: pd.DataFrame, ds: xr.Dataset) -> None:
    """``heads`` and ``ds`` equal the run at ``ref``: counts exactly, float sums to relative 1e-6."""
    ha = pd.read_parquet(ref / "heads.parquet")
    pd.testing.assert_frame_equal(ha, heads, rtol=1e-6, check_exact=False)
    ints = [c for c in ha.columns if ha[c].dtype.kind in "iu"]
    assert ints and (ha[ints] == heads[ints]).all().all()
    da = xr.open_dataset(ref / "stats.nc", engine="h5netcdf").load()
    assert set(da.data_vars) == set(ds.data_vars)
    for name in da.data_vars:
        x, y = da[name].values, ds[name].values
        if x.dtype.kind in "iu":
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=0, err_msg=name)
    assert int(da["windows"]) > 0


def assert_same_run(a: Path, b: Path) -> None:
    """heads.parquet and stats.nc equal (see :func:`assert_same_stats`), windows.parquet identical."""
    assert_same_stats(a, pd.read_parquet(b / "heads.parquet"), xr.open_dataset(b / "stats.nc", engine="h5netcdf").load())
    wa, wb = pd.read_parquet(a / "windows.parquet"), pd.read_parquet(b / "windows.parquet")
    assert wa["window"].tolist() == wb["window"].tolist() == list(range(len(wa)))
    for col in ("input_ids", "attention_mask", "sentence_ids"):
        assert wa[col].map(list).tolist() == wb[col].map(list).tolist(), col


def assert_same_meta(local: Path, ray: Path, *same: str) -> None:
    """run.json of a Ray run has the local run's keys and ``ray``, and the same values at ``same``."""
    a, b = load_run(local).meta, load_run(ray).meta
    assert set(a) ^ set(b) == {"ray"} and (a["engine"], b["engine"]) == ("local", "ray")
    assert set(a["files"]) == set(b["files"])
    for key in ("model", "windows", "seq_len", "threshold", "top_k_columns", "batch_size", "dtype", "sentence_splitter",
                "attention", "statistics_backend", *same):
        assert a[key] == b[key], key


# ------------------------------------------------------------------ no cluster needed


@pytest.mark.parametrize("seq_len,windows,share,batch", [(32, None, 24, 8), (32, 37, 16, 4), (16, None, 9, 3),
                                                          (32, 250, 248, 8)])  # a share over more than TOKENIZE_TEXTS texts
def test_shares_give_exactly_the_single_process_windows(tokenizer, seq_len, windows, share, batch):
    texts = [d.text for d in lee_documents()[:40]]  # more than one block of TOKENIZE_TEXTS
    whole = list(iter_windows(texts, tokenizer, seq_len, pack=True, batch_windows=batch, token_strings=False))
    target = sum(len(w) for w in whole) if windows is None else windows
    framing = Framing.of_tokenizer(tokenizer)
    shares = plan_shares(np.asarray(token_counts(tokenizer, texts)), framing.content(seq_len), target, share)
    assert [s.start for s in shares] == list(range(0, target, share)) and shares[-1].stop == target
    assert any(s.skip > 0 for s in shares), "no share starts inside a text: the test would not test that"
    got = [w for s in shares
           for w in share_batches(texts[s.first_text:s.last_text], s, tokenizer, seq_len, batch, "pysbd", framing)]
    # same batches as the single process (shares are whole batches), same windows
    expect = [w.select(slice(0, max(0, min(len(w), target - i * batch)))) for i, w in enumerate(whole)]
    expect = [w for w in expect if len(w)]
    assert [len(w) for w in got] == [len(w) for w in expect]
    for g, e in zip(got, expect):
        for name in ("input_ids", "attention_mask", "offsets", "sentence_ids"):
            np.testing.assert_array_equal(getattr(g, name), getattr(e, name), err_msg=name)


def test_corpus_urls_read_like_local_paths(tmp_path, corpus):
    docs = lee_documents()[:5]
    (tmp_path / "c.jsonl").write_text("\n".join(f'{{"body": {json.dumps(d.text)}}}' for d in docs))
    pd.DataFrame({"t": [d.text for d in docs]}).to_parquet(tmp_path / "c.parquet")
    (tmp_path / "dir").mkdir()
    for i, d in enumerate(docs):
        (tmp_path / "dir" / f"{i}.txt").write_text(d.text)
    (tmp_path / "dir" / "skip.md").write_text("not a corpus file")
    for local, kw in ((corpus, {}), (tmp_path / "c.jsonl", {"text_field": "body"}),
                      (tmp_path / "c.parquet", {"text_column": "t"}), (tmp_path / "dir", {})):
        want = load_corpus(local, **kw)
        got = load_corpus(local.as_uri(), **kw)
        assert got.name == local.as_uri() and got.sha256 == want.sha256 and len(got) == len(want) > 0
        assert [d.doc_id for d in got] == [d.doc_id for d in want]
        assert all(d.source.startswith(local.as_uri()) for d in got)
    with pytest.raises(HeadsimError, match="missing.txt': not found"):
        load_corpus((tmp_path / "missing.txt").as_uri())
    with pytest.raises(HeadsimError, match="no column 'nope'"):  # the reader's error names the URL
        load_corpus((tmp_path / "c.parquet").as_uri(), text_column="nope")
    with pytest.raises(HeadsimError, match="cannot open corpus URL"):
        load_corpus("nosuchscheme://bucket/corpus.txt")


def test_an_unreachable_cluster_is_refused_at_once():
    from headsim.runs.ray import _check_reachable

    for address in ("127.0.0.1:1", "ray://127.0.0.1:1"):
        with pytest.raises(HeadsimError, match="cannot reach a Ray cluster"):
            _check_reachable(address, seconds=2)
    _check_reachable("auto")  # resolved by Ray itself
    _check_reachable(None)


def test_engine_ray_without_ray_is_one_line_and_exit_2(tmp_path, corpus, monkeypatch, capsys):
    from headsim.cli.app import run_app

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    code = run_app(["analyze", "--engine", "ray", "--corpus", str(corpus), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and 'pip install "headsim[ray]"' in err
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ on a local cluster


def _in_actor() -> bool:
    import ray

    return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None


def _kill_own_process_once(marker: str, calls: list, module, args) -> None:
    """Forward pre-hook: in the second batch of the first worker to get here, SIGKILL that worker's
    process (as the kernel's out-of-memory killer or a lost node would end it: no clean-up, no goodbye)."""
    if not _in_actor():
        return
    calls[0] += 1
    if calls[0] == 2 and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)


def _fail(module, args) -> None:
    if _in_actor():
        raise RuntimeError("poisoned batch\nsecond line of the worker's message")


def _hooked(tiny_bert_dir: Path, hook) -> object:
    """A copy of the tiny model with ``hook`` before its forward, shipped to the workers by value."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    loaded = load_model(str(tiny_bert_dir))
    model = copy.deepcopy(loaded.model)
    model.register_forward_pre_hook(hook)
    return from_pretrained_objects(model, loaded.tokenizer, name="tiny-hooked")


@on_ray
def test_ray_run_equals_the_single_process_run(cluster, tmp_path, reference, tiny_bert_dir, corpus):
    parquet = tmp_path / "lee.parquet"
    pd.DataFrame({"text": [d.text for d in load_corpus(corpus)]}).to_parquet(parquet)
    res = headsim.analyze(str(tiny_bert_dir), parquet.as_uri(), out=tmp_path / "run", engine="ray", workers=2,
                          share_windows=24, **RUN)
    assert_same_run(reference, tmp_path / "run")
    assert_same_meta(reference, tmp_path / "run")
    meta = load_run(tmp_path / "run").meta
    assert meta["engine"] == "ray" and meta["ray"]["workers"] == 2 and meta["ray"]["shares"] > 2
    assert meta["windows"] == res.meta["windows"] == load_run(reference).meta["windows"]
    assert not (tmp_path / "run" / "checkpoint").exists()


@on_ray
def test_a_corpus_in_parts_is_read_by_the_workers_alone(cluster, tmp_path, reference, tiny_bert_dir, corpus, parted,
                                                         monkeypatch):
    """The reference corpus as a directory of parts (a .txt, a .jsonl and a .parquet of several row groups):
    the Ray engine gives the single process's windows and statistics, and its driver never opens a part
    (the readers fail there; the workers, other processes, read them). Two actors at 0.5 GPU each share
    the cluster's one GPU."""
    from headsim.corpus import parts, readers
    from headsim.runs import ray as ray_engine

    texts = [d.text for d in load_corpus(corpus)]
    whole = load_corpus(parted)  # as the single process reads it
    assert [d.text for d in whole] == texts

    def opened(*args, **kwargs):
        raise AssertionError("the driver opened a corpus part")

    for module, names in ((parts, ("read_unit", "units_of", "fetch")), (readers, ("read_unit", "iter_units")),
                          (ray_engine, ("load_corpus",))):
        for name in names:
            monkeypatch.setattr(module, name, opened)
    res = analyze(str(tiny_bert_dir), str(parted), out=tmp_path / "run", engine="ray", actors=2, cpus_per_actor=1,
                  gpus_per_actor=0.5, share_windows=24, **RUN)
    assert_same_run(reference, tmp_path / "run")
    meta = load_run(tmp_path / "run").meta
    assert meta["corpus"]["sha256"] == whole.sha256 and meta["corpus"]["documents"] == len(texts)
    assert meta["corpus"]["spec"] == str(parted) and res.meta["ray"]["workers"] == 2
    assert meta["ray"]["gpus_per_worker"] == 0.5 and meta["ray"]["shares"] > 2


@on_ray
def test_a_url_corpus_gives_the_same_run_on_both_engines(cluster, tmp_path, tiny_bert_dir, corpus):
    """Both engines read corpora through the one reader: an http URL (a server on 127.0.0.1) gives one run."""
    import http.server
    import threading

    pytest.importorskip("aiohttp")  # fsspec's http file system
    handler = functools.partial(type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None}),
                                directory=str(corpus.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{corpus.name}"
    try:
        for engine, extra in (("local", {}), ("ray", {"actors": 1, "share_windows": 8})):
            analyze(str(tiny_bert_dir), url, out=tmp_path / engine, windows=24, engine=engine, **extra, **RUN)
    finally:
        server.shutdown()
        server.server_close()
    assert_same_run(tmp_path / "local", tmp_path / "ray")
    assert_same_meta(tmp_path / "local", tmp_path / "ray")
    for engine in ("local", "ray"):  # the corpus as read from the URL is the file's, and --resume reads the URL again
        held = load_run(tmp_path / engine).meta["corpus"]
        assert (held["spec"], held["sha256"]) == (url, load_corpus(str(corpus)).sha256)


@on_ray
def test_a_killed_worker_process_costs_no_window(cluster, tmp_path, reference, tiny_bert_dir, corpus):
    hook = functools.partial(_kill_own_process_once, str(tmp_path / "killed"), [0])
    res = analyze(_hooked(tiny_bert_dir, hook), str(corpus), out=tmp_path / "run", engine="ray", workers=1,
                  share_windows=24, **RUN)
    killed = int((tmp_path / "killed").read_text())  # the worker's process id: it is gone
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == psutil.STATUS_ZOMBIE
    assert res.meta["ray"]["shares_redone"] >= 1
    assert_same_run(reference, tmp_path / "run")  # every window once, statistics equal


@on_ray
def test_shards_on_either_engine_merge_into_the_single_process_run(cluster, tmp_path, reference, tiny_bert_dir, parted):
    """The reference corpus in parts, its first half on the single process, the second on Ray: merged, the
    single process's run over the whole corpus."""
    from headsim.runs.merge import merge_runs

    analyze(str(tiny_bert_dir), str(parted), out=tmp_path / "one", shard="1/2", **RUN)
    analyze(str(tiny_bert_dir), str(parted), out=tmp_path / "two", shard=(2, 2), engine="ray", workers=1,
            share_windows=16, **RUN)
    assert load_run(tmp_path / "one").spec.corpus_sha256 == load_run(tmp_path / "two").spec.corpus_sha256
    total = load_run(reference).meta["windows"]
    assert load_run(tmp_path / "two").meta["holds"][0]["windows"] == [[total // 2, total]]
    merged = load_run(merge_runs([tmp_path / "one", tmp_path / "two"], tmp_path / "merged"))
    assert_same_stats(reference, merged.heads, merged.dataset)
    whole = pd.read_parquet(reference / "windows.parquet")["input_ids"].map(list).tolist()
    assert merged.windows["input_ids"].map(list).tolist() == whole  # the same windows, in order


def test_actors_are_checked_against_the_cluster_before_any_starts():
    from headsim.runs.options import RayOptions, RunOptions

    two = {"CPU": 2.0, "memory": 1e9}

    def ray(actors, cpus=1.0, gpus=0.0):
        return RayOptions(actors, cpus_per_actor=cpus, gpus_per_actor=gpus)

    assert ray(None).check().count(two) == 2 and ray(2).count(two) == 2
    assert ray(None, 0.5).count(two) == 4 and ray(None, 1.0, 1.0).count({"CPU": 8, "GPU": 3}) == 3
    assert ray(None, 1.0, 0.5).count({"CPU": 16, "GPU": 1}) == 2  # one GPU: two actors at 0.5 GPU each
    with pytest.raises(HeadsimError, match="--actors 100000 asked for, but the Ray cluster has 2 CPUs, 0 GPUs: room for 2 workers") as e:
        ray(100000).count(two)
    assert "--actors 2 or fewer" in e.value.fix
    with pytest.raises(HeadsimError, match="not enough for one worker of 1 CPU, 1 GPU"):
        ray(None, 1.0, 1.0).count(two)
    with pytest.raises(HeadsimError, match="with the Ray engine") as e:
        ray(-1).check()
    assert "windowing" not in e.value.fix
    # analyze's arguments: workers under the Ray engine is the old spelling of actors, the old resource names too
    old = RunOptions.from_arguments(engine="ray", workers=3, cpus_per_worker=2.0, gpus_per_worker=0.5)
    assert old.ray == RayOptions(3, 2.0, 0.5) and old.workers is None
    assert RunOptions.from_arguments(workers=3).workers == 3 and RunOptions.from_arguments(workers=3).ray.actors is None
    with pytest.raises(HeadsimError, match="both given"):
        RunOptions.from_arguments(engine="ray", workers=3, actors=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'windws'"):
        RunOptions.from_arguments(windws=3)


def test_gpu_actors_plan_their_batch_for_their_share_of_the_gpu(monkeypatch):
    """``--gpus-per-actor 0.5``: each of the two actors on a GPU plans its batch from half the device's
    memory, whatever the other already holds, so both pick the same; a whole GPU plans from what is free."""
    import types

    import torch

    from headsim.runs.engine import default_batch_size

    gib = 1 << 30
    gpu = types.SimpleNamespace(device=torch.device("cuda", 0), n_heads=12)
    per_window = 12 * 128 * 128 * 4 * 12 + 128 * 4096 * 16  # the eager estimate at 128 tokens
    for free, share, budget in ((70 * gib, 1.0, 70 * gib), (70 * gib, 0.5, 40 * gib), (36 * gib, 0.5, 36 * gib),
                                (79 * gib, 0.25, 20 * gib)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, free=free: (free, 80 * gib))
        assert default_batch_size(gpu, 128, "eager", share=share) == min(512, budget // 4 // per_window)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (80 * gib, 80 * gib))
    assert default_batch_size(gpu, 128, "triton", share=0.5) == 40 * gib // 4 // (128 * 4096 * 16)  # 1,280 < the cap
    cpu = types.SimpleNamespace(device=torch.device("cpu"), n_heads=12)
    assert default_batch_size(cpu, 128, "eager", share=0.5) == 32
    # the worker (a plain class here, no cluster) plans with the share of the GPU its actor was given
    from headsim.runs import ray_worker

    asked = []
    monkeypatch.setattr(ray_worker, "default_batch_size", lambda loaded, seq_len, backend, share: asked.append(share) or 7)
    worker = ray_worker.Worker(types.SimpleNamespace(), None, None, 1, "progress", gpu_share=0.5)  # no model: fails
    worker.failure, worker.loaded = None, types.SimpleNamespace(  # a loaded model, as describe() reads it
        device=torch.device("cpu"), max_seq_len=512, describe=dict, name="m", source="m", extrapolates=False,
        dtype=torch.float32, framing=types.SimpleNamespace(specials=2), commit=None)
    assert worker.describe(128)["batch_size"] == 7 and asked == [0.5]


@on_ray
def test_ray_start_up_is_refused_or_ends_by_its_deadline_leaving_no_actor(cluster, tmp_path, tiny_bert_dir, corpus,
                                                                           monkeypatch, capsys):
    import ray

    from headsim.cli import run_app

    def headsim_actors() -> list:
        return [a for a in ray.util.list_named_actors(all_namespaces=True) if "headsim" in str(a)]

    args = ["analyze", "--engine", "ray", "--address", cluster, "--model", tiny_bert_dir, "--corpus", corpus,
            "--seq-len", "32", "--out", tmp_path / "run"]
    code = run_app([str(a) for a in args + ["--workers", "100000"]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--actors 100000 asked for" in err and "room for 2" in err
    code = run_app([str(a) for a in args + ["--workers", "-1", "--overwrite"]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Ray workers" in err and "windowing" not in err
    # the cluster holds the worker, but another job holds its CPUs: the start-up ends by its deadline
    hog = ray.remote(num_cpus=2)(type("Hog", (), {"ping": lambda self: 1})).remote()
    try:
        ray.get(hog.ping.remote())
        monkeypatch.setenv("HEADSIM_RAY_TIMEOUT", "3")
        code = run_app([str(a) for a in args + ["--workers", "1", "--overwrite"]])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert "did not start within 3 s (0 of 1 Ray workers started" in err and "HEADSIM_RAY_TIMEOUT" in err
        assert headsim_actors() == []  # the pending worker and the progress actor were ended
    finally:
        ray.kill(hog)


@on_ray
@pytest.mark.parametrize("stage", [("ray::DashboardAgent",), ("ray::IDLE", "ray::Worker")], ids=["cluster", "workers"])
def test_an_interrupted_start_up_leaves_no_process_running(tmp_path, tiny_bert_dir, corpus, stage):
    """SIGINT while the run's own local cluster starts (its raylet's agents up) or starts its workers: exit
    130, and every process the run started (the cluster's, its agents, the workers') is gone."""
    proc = spawn(["analyze", "--engine", "ray", "--workers", "1", "--model", tiny_bert_dir, "--corpus", corpus,
                  "--seq-len", "32", "--out", tmp_path / "run"])
    me, seen, deadline = psutil.Process(proc.pid), set(), time.time() + 120
    while proc.poll() is None and time.time() < deadline and not any(n.startswith(stage) for n in _names(seen)):
        seen |= {k.pid for k in me.children(recursive=True)}
        time.sleep(0.02)
    assert proc.poll() is None and seen, f"the run ended before a {' or '.join(stage)} process started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    # the run ends its cluster's agents itself (on their own they outlive their raylet by a minute); a
    # few seconds' poll only for their parents to reap them
    deadline = time.time() + 5
    while (alive := _alive(seen)) and time.time() < deadline:
        time.sleep(0.2)
    assert alive == [], _names(alive)


def _names(pids) -> list[str]:
    """The process names of ``pids`` (those still there)."""
    names = []
    for pid in pids:
        try:
            names.append(psutil.Process(pid).name())
        except psutil.Error:
            pass
    return names


def _alive(pids: set[int]) -> list[int]:
    """The processes of ``pids`` still running (zombies, already gone but not reaped, are not)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@on_ray
def test_a_worker_exception_stops_the_run_in_one_line(cluster, tmp_path, tiny_bert_dir, corpus):
    with pytest.raises(HeadsimError) as caught:
        analyze(_hooked(tiny_bert_dir, _fail), str(corpus), out=tmp_path / "run", engine="ray", workers=1,
                share_windows=24, **RUN)
    message = str(caught.value)
    assert "RuntimeError: poisoned batch" in message and "\n" not in message
    assert not (tmp_path / "run" / "heads.parquet").exists() and not (tmp_path / "run" / "stats.nc").exists()
    with pytest.raises(HeadsimError, match="not finished"):
        load_run(tmp_path / "run")


@on_ray
def test_a_killed_driver_resumes_from_its_checkpointed_shares(cluster, tmp_path, reference, tiny_bert_dir, corpus):
    out = tmp_path / "run"
    args = ["analyze", "--engine", "ray", "--address", cluster, "--workers", "2", "--share-windows", "8",
            "--checkpoint-every", "1", "--model", str(tiny_bert_dir), "--corpus", str(corpus), "--seq-len", "32",
            "--batch-size", "8", "--out", str(out)]
    proc = spawn(args)
    wait_for(out / CHECKPOINT / MANIFEST, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "heads.parquet").exists()
    with pytest.raises(HeadsimError, match="started with --engine ray") as caught:  # its checkpoint is the Ray engine's
        analyze(str(tiny_bert_dir), str(corpus), out=out, resume=True, **RUN)
    assert "--engine ray" in caught.value.fix and "\n" not in str(caught.value)
    res = analyze(str(tiny_bert_dir), str(corpus), out=out, resume=True, engine="ray", workers=2, share_windows=8,
                  checkpoint_every=1, **RUN)
    assert 8 <= res.meta["ray"]["resumed_windows"] < res.meta["windows"]
    assert_same_run(reference, out)


@on_ray
def test_a_decoder_family_on_ray_equals_the_single_process_run(cluster, tmp_path, tokenizer, corpus):
    """A tiny random Llama (BOS framing: content is seq_len - 1): same windows, statistics and run.json."""
    from headsim.model.verify import tiny_model

    tok = copy.deepcopy(tokenizer)
    tok.bos_token = tok.cls_token
    model, _ = tiny_model("llama", vocab_size=len(tok))
    loaded = from_pretrained_objects(model, tok, name="tiny-llama")
    assert (loaded.framing.open, loaded.framing.close) == (tok.cls_token_id, None)
    analyze(loaded, str(corpus), out=tmp_path / "local", windows=40, **RUN)
    analyze(loaded, str(corpus), out=tmp_path / "ray", windows=40, engine="ray", workers=1, share_windows=16, **RUN)
    assert_same_run(tmp_path / "local", tmp_path / "ray")
    assert_same_meta(tmp_path / "local", tmp_path / "ray", "spec")
    local, ray = load_run(tmp_path / "local").meta["corpus"], load_run(tmp_path / "ray").meta["corpus"]
    assert local["tokens"] is None and ray["tokens"] > 0  # with --windows the single process counts only what it needs
    assert {k: v for k, v in local.items() if v is not None} == {k: ray[k] for k in local if local[k] is not None}
    ids = pd.read_parquet(tmp_path / "ray" / "windows.parquet")["input_ids"].map(list)
    assert all(row[0] == tok.cls_token_id and tok.sep_token_id not in row for row in ids)


def test_a_checkpoint_of_shares_finished_out_of_order_is_verified_and_written_in_order(tmp_path):
    """The Ray engine's checkpoint: window parts of finished shares in any order, checked on resume."""
    from headsim.runs.rundir import RunDir
    from headsim.windows import windows_table

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 90, size=(12, 8))
    mask, sent = np.ones_like(ids), np.zeros_like(ids)
    table = lambda a, b: windows_table(a, ids[a:b], mask[a:b], sent[a:b])  # noqa: E731
    with RunDir(tmp_path / "run").writer(resume=False, overwrite=False) as run_dir:
        run_dir.save_checkpoint({"x": np.arange(3)}, 4, [table(8, 12)])  # the third share finished first
        run_dir.save_checkpoint({"x": np.arange(3)}, 8, [table(0, 4)])
        with pytest.raises(HeadsimError, match="no windows 4..8"):  # the single process resumes only a prefix
            run_dir.load_checkpoint()
        state, done = run_dir.load_checkpoint(contiguous=False)
        assert done == 8 and run_dir.checkpoint_parts() == [(0, 4), (8, 4)]
        run_dir.commit({"model": "m"}, xr.Dataset({"v": ("a", np.arange(2))}), pd.DataFrame({"a": [1]}),
                       pd.DataFrame({"a": [1]}), [table(4, 8)])
    got = pd.read_parquet(tmp_path / "run" / "windows.parquet")
    assert got["window"].tolist() == list(range(12))
    assert np.array_equal(np.stack(got["input_ids"].map(np.asarray)), ids)
    with RunDir(tmp_path / "gap").writer(resume=False, overwrite=False) as run_dir:
        run_dir.save_checkpoint({"x": np.arange(3)}, 4, [table(8, 12)])
        with pytest.raises(HeadsimError, match="gap or overlap at window 0"):  # windows 0..8 never came
            run_dir.commit({"model": "m"}, xr.Dataset(), pd.DataFrame(), pd.DataFrame(), [])
        assert not (tmp_path / "gap" / "run.json").exists()
        part = next((tmp_path / "gap" / "checkpoint").glob("windows-*.parquet"))
        part.write_bytes(part.read_bytes()[:-8])
        with pytest.raises(HeadsimError, match="damaged"):
            run_dir.load_checkpoint(contiguous=False)


@on_ray
def test_a_node_lost_mid_run_on_a_cluster_of_several_nodes_costs_no_window(tmp_path, reference, tiny_bert_dir, corpus):
    """Four Ray nodes on this machine (tests/ray_nodes.py: a head without CPUs, three of one CPU), two
    workers; the node of the first worker to start a batch is removed while it holds that batch. The run
    equals the single process's, run.json names the share run again, and no process of the cluster stays."""
    import subprocess

    script = Path(__file__).with_name("ray_nodes.py")
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(headsim.__file__).parents[1]),
                                                                      os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), str(tiny_bert_dir), str(corpus), str(tmp_path / "run"), str(report)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and report.exists(), done.stderr[-3000:]
    got = json.loads(report.read_text())
    assert "error" not in got and got["removed"], got.get("error")
    redone = got["ray"]["redone"]
    assert got["ray"]["shares_redone"] == len(redone) >= 1 and all(r["attempts"] >= 2 for r in redone)
    assert_same_run(reference, tmp_path / "run")  # every window once, statistics equal
    assert load_run(tmp_path / "run").meta["ray"]["redone"] == redone
    deadline = time.time() + 10
    while (alive := _alive(set(got["pids"]))) and time.time() < deadline:
        time.sleep(0.2)
    assert alive == [], _names(alive)
