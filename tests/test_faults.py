"""Fault injection on run directories (issue 17, cases 1–9): user files are never deleted, a run that
looks finished is never wrong, an interrupted run resumes to identical results, every failure is one
line with exit code 2 (130/143 for SIGINT/SIGTERM).

A tiny random BERT (2 layers × 4 heads, hidden 32) and a few Lee documents keep every run under a
second; kills run the CLI in a subprocess, the rest calls it in-process.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import xarray as xr

from cli_processes import spawn, wait_for
from headsim.runs.analyze import analyze
from headsim.cli import run_app
from headsim.errors import HeadsimError

SETTINGS = ["--seq-len", "32", "--batch-size", "4", "--checkpoint-every", "8"]
RESULT_FILES = ("stats.nc", "heads.parquet", "layers.parquet", "windows.parquet")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """(tiny model dir, corpus file, work dir)."""
    import torch
    from transformers import BertConfig, BertModel

    from headsim.corpus import lee_documents
    from headsim.model.load import load_model

    root = tmp_path_factory.mktemp("faults")
    tok = load_model().tokenizer
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128)
    model = root / "tiny"
    BertModel(cfg, add_pooling_layer=False).save_pretrained(model)
    tok.save_pretrained(model)
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(d.text for d in lee_documents()[:40]), encoding="utf-8")
    return model, corpus, root


def cli(capsys, *args) -> tuple[int, str]:
    """Run the CLI in-process: (exit code, stderr)."""
    capsys.readouterr()
    code = run_app([str(a) for a in args])
    return code, capsys.readouterr().err


def analyze_args(env, out, windows: int = 48, *extra) -> list[str]:
    model, corpus, _ = env
    return ["analyze", "--model", model, "--corpus", corpus, *SETTINGS, "--windows", str(windows), "--out", out, *extra]


def one_line_error(code: int, err: str, expected: int = 2) -> None:
    assert code == expected, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert " — fix: " in err, err


def tree(path: Path) -> dict[str, str]:
    """Every file under ``path`` with its sha256."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def finished(path: Path) -> bool:
    try:
        return json.loads((path / "run.json").read_text()).get("complete") is True
    except (OSError, ValueError):
        return False


def assert_same_run(a: Path, b: Path) -> None:
    with xr.open_dataset(a / "stats.nc", engine="h5netcdf") as da, xr.open_dataset(b / "stats.nc", engine="h5netcdf") as db:
        xr.testing.assert_identical(da.load(), db.load())
    import pandas as pd

    for name in ("heads.parquet", "layers.parquet", "windows.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(a / name), pd.read_parquet(b / name), check_exact=True)


@pytest.fixture(scope="module")
def reference(env, tmp_path_factory) -> dict[int, Path]:
    """Uninterrupted runs of 48 and 200 windows."""
    out = {}
    for n in (48, 200):
        path = tmp_path_factory.mktemp("ref") / f"run{n}"
        assert run_app([str(a) for a in analyze_args(env, path, n)]) == 0
        out[n] = path
    return out


@pytest.fixture(scope="module")
def halves(env, tmp_path_factory) -> list[Path]:
    """Two shards of an 8-window run (disjoint: they merge)."""
    root = tmp_path_factory.mktemp("halves")
    for i in (1, 2):
        assert run_app([str(a) for a in analyze_args(env, root / f"half{i}", 8, "--shard", f"{i}/2")]) == 0
    return [root / "half1", root / "half2"]


def interrupted_run(env, out: Path, windows: int, after: int) -> None:
    """An in-process run stopped (KeyboardInterrupt) once ``after`` windows are done."""
    model, corpus, _ = env

    def stop(done, total):
        if done >= after:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        analyze(str(model), str(corpus), windows=windows, out=out, seq_len=32, batch_size=4, checkpoint_every=8,
                progress=stop)


# -- case 1: --overwrite deletes only headsim's own files -------------------------------------


def test_1_overwrite_never_deletes_user_files(env, reference, halves, tmp_path, capsys):
    v = tmp_path / "v"
    (v / "sub").mkdir(parents=True)
    (v / "run.json").write_text('{"name": "x"}')
    (v / "precious.txt").write_text("x")
    (v / "sub" / "thesis.tex").write_text("y")
    before = tree(v)
    code, err = cli(capsys, *analyze_args(env, v, 4, "--overwrite"))
    one_line_error(code, err)
    assert tree(v) == before and "precious.txt" in err
    # a real run with a user file put into it: refused, naming the file; merge --overwrite the same
    run = tmp_path / "run"
    shutil.copytree(reference[48], run)
    (run / "notes.txt").write_text("mine")
    (run / "checkpoint").mkdir()
    (run / "checkpoint" / "keep.me").write_text("mine too")
    before = tree(run)
    for args in (analyze_args(env, run, 4, "--overwrite"),
                 ["merge", *halves, "--out", run, "--overwrite"]):
        code, err = cli(capsys, *args)
        one_line_error(code, err)
        assert tree(run) == before and "notes.txt" in err
    # only headsim's files (the report's among them): replaced
    (run / "notes.txt").unlink()
    shutil.rmtree(run / "checkpoint")
    (run / "example").mkdir()
    for name in ("index.html", "claims.csv", "fig02_summed_attention.png", "example/tokens.csv", ".stats.nc.tmp-x1y2"):
        (run / name).write_text("headsim's")
    code, err = cli(capsys, *analyze_args(env, run, 4, "--overwrite"))
    assert code == 0, err
    assert finished(run) and json.loads((run / "run.json").read_text())["windows"] == 4
    assert not (run / "index.html").exists() and not (run / "example").exists()


# -- case 2: merge never destroys its inputs ----------------------------------------------------


def test_2_merge_never_writes_over_its_inputs(env, halves, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(halves[0], a)
    shutil.copytree(halves[1], b)
    before = {p: tree(p) for p in (a, b)}
    for out in (a, b, a / "inner", tmp_path):
        code, err = cli(capsys, "merge", a, b, "--out", out, "--overwrite")
        one_line_error(code, err)
        assert {p: tree(p) for p in (a, b)} == before
    # a merge that fails while writing leaves the previous output as it was, and no temporary files
    out = tmp_path / "merged"
    assert cli(capsys, "merge", a, b, "--out", out)[0] == 0
    old = tree(out)
    import headsim.runs.merge as merging

    real = merging.layers_table
    merging.layers_table = lambda ds: (_ for _ in ()).throw(OSError(28, "No space left on device"))
    try:
        with pytest.raises((OSError, HeadsimError)):
            merging.merge_runs([a, b], out, overwrite=True)
    finally:
        merging.layers_table = real
    assert tree(out) == old and sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "merged"]


# -- case 3: one writer per run directory; case "kill at a random point" --------------------------


def test_3_concurrent_writer_refused_and_killed_run_resumes(env, reference, tmp_path, capsys):
    out = tmp_path / "run"
    proc = spawn(analyze_args(env, out, 200, "--checkpoint-every", "4"))
    wait_for(out / "run.json", proc)
    for args in (analyze_args(env, out, 200, "--resume"), analyze_args(env, out, 200, "--overwrite")):
        code, err = cli(capsys, *args)
        one_line_error(code, err)
        assert "in use" in err
    time.sleep(random.Random(17).uniform(0.0, 0.5))  # a random point of the run
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not finished(out)
    code, err = cli(capsys, *analyze_args(env, out, 200, "--resume"))  # the dead process's lock is stale
    assert code == 0, err
    assert_same_run(reference[200], out)


def test_3_locks_of_live_and_dead_processes(tmp_path):
    from headsim.runs.layout import LOCK
    from headsim.runs.rundir import RunDir

    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cases = [({"pid": os.getppid(), "host": os.uname().nodename}, True),  # alive (pytest's parent)
             ({"pid": int(dead.stdout), "host": os.uname().nodename}, False),  # gone: stale
             ({"pid": 1, "host": "elsewhere"}, True)]  # another host: cannot tell, refused
    for holder, refused in cases:
        (run.path / LOCK).write_text(json.dumps(holder))
        if refused:
            with pytest.raises(HeadsimError, match=f"in use by headsim process {holder['pid']} on {holder['host']}"):
                with run.writer(resume=False, overwrite=False):
                    pass
            assert json.loads((run.path / LOCK).read_text()) == holder
        else:
            with run.writer(resume=False, overwrite=False):
                assert json.loads((run.path / LOCK).read_text())["pid"] == os.getpid()
            assert not (run.path / LOCK).exists()


# -- case 4: SIGINT/SIGTERM stop with a line, exit 130/143, resumable -----------------------------


def test_4_signals_stop_cleanly_and_resume(env, reference, tmp_path, capsys):
    runs = {sig: tmp_path / signal.Signals(sig).name for sig in (signal.SIGINT, signal.SIGTERM)}
    procs = {}
    for sig, out in runs.items():  # one at a time: a run started early could finish while another is awaited
        procs[sig] = proc = spawn(analyze_args(env, out, 200, "--checkpoint-every", "4"))
        wait_for(out / "checkpoint" / "manifest.json", proc)  # the first checkpoint: the run is inside its loop
        proc.send_signal(sig)
    for sig, proc in procs.items():
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err
        last = err.strip().splitlines()[-1]
        assert signal.Signals(sig).name in last and "--resume" in last and "Traceback" not in err
        assert not finished(runs[sig])
        code, err = cli(capsys, *analyze_args(env, runs[sig], 200, "--resume"))
        assert code == 0, err
        assert_same_run(reference[200], runs[sig])


# -- case 5: resume verifies every checkpoint file -----------------------------------------------


def test_5_damaged_checkpoint_is_never_resumed_into_a_wrong_run(env, reference, tmp_path, capsys):
    base = tmp_path / "base"
    interrupted_run(env, base, 48, 30)
    files = sorted(p.name for p in (base / "checkpoint").iterdir())
    assert len(files) >= 3
    for name in files:
        for damage in ("delete", "truncate", "flip"):
            run = tmp_path / f"{damage}-{name}"
            shutil.copytree(base, run)
            target = run / "checkpoint" / name
            if damage == "delete":
                target.unlink()
            elif damage == "truncate":
                target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
            else:
                data = bytearray(target.read_bytes())
                data[len(data) // 2] ^= 0xFF
                target.write_bytes(bytes(data))
            code, err = cli(capsys, *analyze_args(env, run, 48, "--resume"))
            if code == 0:  # only where the run could start again from a clean state
                assert_same_run(reference[48], run)
            else:
                one_line_error(code, err)
                assert not finished(run), (damage, name)


# -- case 6: merge refuses duplicates and runs made with other settings ---------------------------


def test_6_merge_refuses_duplicates_and_other_settings(env, halves, tmp_path, capsys):
    a, b = halves
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    merged = tmp_path / "ab"
    assert cli(capsys, "merge", a, b, "--out", merged)[0] == 0
    for inputs, word in (([a, a], "same analysis"), ([a, copy], "same analysis"), ([merged, b], "same analysis")):
        code, err = cli(capsys, "merge", *inputs, "--out", tmp_path / "x")
        one_line_error(code, err)
        assert word in err and not (tmp_path / "x").exists()
    punkt = tmp_path / "punkt"
    assert run_app([str(x) for x in analyze_args(env, punkt, 8, "--sentences", "punkt")]) == 0
    bf16 = tmp_path / "bf16"  # a run that says bf16 (made by copying: a CPU cannot run one quickly)
    shutil.copytree(b, bf16)
    meta = json.loads((bf16 / "run.json").read_text())
    meta["dtype"] = meta["spec"]["dtype"] = "bfloat16"
    (bf16 / "run.json").write_text(json.dumps(meta))
    marker = bf16 / ".headsim"
    if marker.exists():
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "run_id": uuid.uuid4().hex}))
    else:  # runs without a marker are told apart by their statistics
        pytest.fail("analyze wrote no marker")
    for other, word in ((punkt, "--sentences"), (bf16, "--dtype")):  # named by the option that sets them
        code, err = cli(capsys, "merge", a, other, "--out", tmp_path / "x")
        one_line_error(code, err)
        assert word in err and not (tmp_path / "x").exists()


# -- case 7: --resume takes the run's own settings; other settings are refused clearly -------------


def test_7_resume_without_repeating_the_settings(env, reference, tmp_path, capsys):
    run = tmp_path / "run"
    interrupted_run(env, run, 48, 20)
    code, err = cli(capsys, *analyze_args(env, run, 48, "--threshold", "0.5", "--resume"))
    one_line_error(code, err)
    assert "--threshold 0.3" in err and "{" not in err
    code, err = cli(capsys, "analyze", "--out", run, "--resume")  # the README's command
    assert code == 0, err
    assert_same_run(reference[48], run)
    code, err = cli(capsys, *analyze_args(env, run, 48, "--threshold", "0.5", "--resume"))  # finished, other settings
    one_line_error(code, err)
    assert "--overwrite" in err


# -- case 8: one line, exit 2, instead of tracebacks -----------------------------------------------


def test_8_damaged_inputs_and_unwritable_outputs_are_one_line_errors(env, reference, tmp_path, capsys):
    model, corpus, _ = env
    for kind in ("pickle", "safetensors"):
        bad = tmp_path / f"model-{kind}"
        shutil.copytree(model, bad)
        if kind == "pickle":
            (bad / "model.safetensors").unlink()
            (bad / "pytorch_model.bin").write_bytes(b"\x80\x04cos\nsystem\n(S'echo pwned'\ntR.")
        else:
            (bad / "model.safetensors").write_bytes(b"\xff" * 64)
        code, err = cli(capsys, "analyze", "--model", bad, "--corpus", corpus, "--windows", "4", "--out", tmp_path / f"o-{kind}")
        one_line_error(code, err)
        assert not finished(tmp_path / f"o-{kind}")
    for name in RESULT_FILES + ("run.json",):
        run = tmp_path / f"cut-{name}"
        shutil.copytree(reference[48], run)
        (run / name).write_bytes((run / name).read_bytes()[:100])
        code, err = cli(capsys, "merge", run, reference[200], "--out", tmp_path / "m")
        one_line_error(code, err)
        assert not (tmp_path / "m").exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args in (analyze_args(env, blocker / "run", 4), analyze_args(env, "/proc/nope/run", 4),
                 ["reproduce", "--model", model, "--corpus", corpus, "--out", blocker]):
        one_line_error(*cli(capsys, *args))


def test_8_full_disk_is_one_line_and_resumable(env, reference, tmp_path, capsys):
    """On a 700 kB tmpfs mounted in a user namespace (skipped where that is not allowed): the final
    write of stats.nc does not fit."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mnt}"], capture_output=True).returncode:
        pytest.skip("cannot mount a size-limited tmpfs here")
    args = " ".join(f"'{a}'" for a in analyze_args(env, mnt / "run", 200))
    script = f"""mount -t tmpfs -o size=700k tmpfs {mnt} || exit 99
{sys.executable} -m headsim.cli {args} 2> {tmp_path}/full.err; echo $? > {tmp_path}/full.rc
cp -r {mnt}/run {tmp_path}/run"""
    subprocess.run(["unshare", "-rm", "sh", "-c", script], env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300)
    err = (tmp_path / "full.err").read_text()
    assert "Traceback" not in err and "No space left" in err, err
    one_line_error(int((tmp_path / "full.rc").read_text()), err.strip().splitlines()[-1])
    run = tmp_path / "run"
    assert not finished(run)
    code, err = cli(capsys, *analyze_args(env, run, 200, "--resume"))
    assert code == 0, err
    assert_same_run(reference[200], run)


# -- case 9: small validation items ---------------------------------------------------------------


def test_9_small_validation_items(env, tmp_path, capsys, monkeypatch):
    model, corpus, _ = env
    one_line_error(*cli(capsys, *analyze_args(env, tmp_path / "r", 4)[:-2], "--batch-size", "0", "--out", tmp_path / "r"))
    assert not (tmp_path / "r").exists()
    import headsim.report.build as build

    monkeypatch.setattr(build, "build_report", lambda *a, **k: pytest.fail("reproduce ran with --windows 0"))
    one_line_error(*cli(capsys, "reproduce", "--model", model, "--corpus", corpus, "--seq-len", "32",
                        "--windows", "0", "--out", tmp_path / "rep"))
    one_line_error(*cli(capsys, "inspect", "The cat sat.", "--model", model, "--rows", "-3", "--out", tmp_path / "ins"))
    from headsim.context_similarity import check_threshold

    with pytest.raises(HeadsimError) as info:
        check_threshold(1.5, "separator threshold")
    assert "0.3" not in info.value.fix
    # the explorer
    from fastapi.testclient import TestClient

    from headsim.explorer.app import create_app

    with TestClient(create_app(str(model)), base_url="http://127.0.0.1") as c:
        r = c.post("/api/analyze", content=b'{"text": "a \\ud800 b"}', headers={"content-type": "application/json"})
        assert r.status_code in (413, 422) and r.json()["fix"], r.text
        r = c.post("/api/head", json={"text": "The cat sat.", "layer": True, "head": 1})
        assert r.status_code == 422 and r.json()["fix"]
        info_json = c.get("/api/info").json()
        assert not any(str(v).startswith("/") for v in info_json["model"].values())
    with TestClient(create_app(str(model), allowed_hosts=("127.0.0.1",)), base_url="http://127.0.0.1") as c:
        r = c.get("/api/info", headers={"host": "attacker.example"})
        assert r.status_code == 400 and r.json()["fix"]


# -- case 10: every reader refuses a half-written, damaged or other-layout run with the same words ----

#: each damage and the words of the one refusal every reader gives
DAMAGES = {"unfinished": "is not finished", "no-run-json": "is not a headsim run", "missing-file": "is missing",
           "checksum": "its checksum changed", "other-layout": "layout headsim.run/1", "unversioned": "no layout version"}


def damage(run: Path, how: str) -> None:
    meta = json.loads((run / "run.json").read_text())
    if how == "no-run-json":
        (run / "run.json").unlink()
    elif how == "missing-file":
        (run / "heads.parquet").unlink()
    elif how == "checksum":
        data = bytearray((run / "stats.nc").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (run / "stats.nc").write_bytes(bytes(data))
    else:
        if how == "unfinished":
            meta["complete"] = False
        elif how == "other-layout":
            meta["layout"] = "headsim.run/1"
        else:  # a run of a headsim from before the layout had a version
            meta.pop("layout")
        (run / "run.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("how", DAMAGES)
def test_10_every_reader_refuses_a_broken_run_alike(env, reference, tmp_path, how):
    from headsim.ablation.study import ablation_study
    from headsim.explorer.api import ExplorerRun
    from headsim.runs.merge import merge_runs
    from headsim.report.build import build_report
    from headsim.report.compare import compare_runs
    from headsim.reproduction import reproduce
    from headsim.runs.rundir import RunDir

    model, corpus, _ = env
    run, good = tmp_path / "base" / "run", reference[200]
    shutil.copytree(reference[48], run)
    damage(run, how)
    with pytest.raises(HeadsimError, match=DAMAGES[how]) as expected:
        RunDir(run).check_finished()
    readers = {
        "report": lambda: build_report(run, tmp_path / "report"),
        "compare": lambda: compare_runs([run, good], tmp_path / "compare"),
        "merge": lambda: merge_runs([run, good], tmp_path / "merged"),
        "explorer": lambda: ExplorerRun(run),
        "ablate": lambda: ablation_study(str(model), tmp_path / "ablation", run_dir=run, progress=False),
    }
    if how not in ("unfinished", "no-run-json"):  # those two it resumes or starts afresh, as it should
        readers["reproduce"] = lambda: reproduce(str(model), str(corpus), windows=48, seq_len=32, out=run.parent,
                                                 progress=False)
        readers["analyze --resume"] = lambda: analyze(str(model), str(corpus), windows=48, out=run, seq_len=32,
                                                      batch_size=4, resume=True, progress=False)
    for name, read in readers.items():
        with pytest.raises(HeadsimError) as got:
            read()
        assert str(got.value) == str(expected.value), name
    if how == "unversioned":  # the fix the refusal names works
        assert "--overwrite" in expected.value.fix
        analyze(str(model), str(corpus), windows=4, out=run, seq_len=32, overwrite=True, progress=False)
        assert RunDir(run).check_finished()["windows"] == 4


# -- issue 32: shards of one corpus merge into the whole run; overlapping runs are refused -------------


def test_shards_merge_into_the_single_run_and_overlaps_are_refused(env, reference, tmp_path, capsys):
    import numpy as np
    import pandas as pd

    shards = [tmp_path / f"shard{i}" for i in (1, 2, 3)]
    for i, out in enumerate(shards, start=1):
        code, err = cli(capsys, *analyze_args(env, out, 48, "--shard", f"{i}/3"))
        assert code == 0, err
    metas = [json.loads((s / "run.json").read_text()) for s in shards]
    assert [m["holds"][0]["windows"] for m in metas] == [[[0, 16]], [[16, 32]], [[32, 48]]]
    assert json.loads((reference[48] / "run.json").read_text())["holds"][0]["windows"] == [[0, 48]]
    code, err = cli(capsys, "merge", shards[2], shards[0], shards[1], "--out", tmp_path / "merged")
    assert code == 0, err
    with xr.open_dataset(reference[48] / "stats.nc", engine="h5netcdf") as a, \
            xr.open_dataset(tmp_path / "merged" / "stats.nc", engine="h5netcdf") as b:
        assert set(a.data_vars) == set(b.data_vars) and int(b["windows"]) == 48
        for name in a.data_vars:
            x, y = a[name].values, b[name].values
            if x.dtype.kind in "iu":
                np.testing.assert_array_equal(x, y, err_msg=name)  # counts: exactly
            else:
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=0, err_msg=name)  # float sums: to rounding
    windows = pd.read_parquet(tmp_path / "merged" / "windows.parquet")
    whole = pd.read_parquet(reference[48] / "windows.parquet")
    assert sorted(map(tuple, windows["input_ids"].map(list))) == sorted(map(tuple, whole["input_ids"].map(list)))
    # the issue's case: 48 and 200 windows, both from the start, would count windows 0..47 twice
    code, err = cli(capsys, "merge", reference[48], reference[200], "--out", tmp_path / "twice")
    one_line_error(code, err)
    assert "both hold windows 0..47" in err and "--shard" in err and not (tmp_path / "twice").exists()
    code, err = cli(capsys, "merge", tmp_path / "merged", shards[1], "--out", tmp_path / "again")  # a merge holds its parts
    one_line_error(code, err)
    for bad in ("0/3", "4/3", "x", "1/0"):
        one_line_error(*cli(capsys, *analyze_args(env, tmp_path / "bad", 48, "--shard", bad)))
    code, err = cli(capsys, *analyze_args(env, tmp_path / "bad", 2, "--shard", "1/3"))  # 2 windows: part 1 of 3 is empty
    one_line_error(code, err)
    assert "holds no window" in err


# -- issue 32: every command, with a read-only output, a full disk and a missing input: one line, exit 2 ----


@pytest.fixture
def failing_writes(monkeypatch):
    """``fail(folder, errno)``: every file or folder created, and every rename, under ``folder`` fails
    with ``errno`` (a read-only file system, a full disk) as the OS would report it (root ignores
    permissions, so they cannot stand in for a read-only disk here)."""
    import errno as errnos

    def fail(folder: Path, code: int) -> None:
        root = str(Path(folder).absolute())

        def under(path) -> bool:
            try:
                return os.path.abspath(os.fspath(path)).startswith(root)
            except TypeError:
                return False

        def refuse(path):
            raise OSError(code, os.strerror(code), os.fspath(path))

        writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT
        for name, check in (("mkdir", lambda p, *a, **k: under(p)),
                            ("open", lambda p, flags=0, *a, **k: under(p) and flags & writes),
                            ("replace", lambda src, dst, *a, **k: under(dst)),
                            ("rename", lambda src, dst, *a, **k: under(dst)),
                            ("link", lambda src, dst, *a, **k: under(dst))):
            original = getattr(os, name)

            def patched(*args, _original=original, _check=check, **kwargs):
                if _check(*args, **kwargs):
                    refuse(args[1] if _original.__name__ in ("replace", "rename", "link") else args[0])
                return _original(*args, **kwargs)

            monkeypatch.setattr(os, name, patched)
        assert errnos.errorcode[code]

    return fail


def _commands(env, reference, halves, out: Path, missing: Path, port: int) -> dict[str, tuple[list, list]]:
    """For each command: (arguments writing under ``out``, arguments naming the ``missing`` input)."""
    model, corpus, _ = env
    text = out.parent / "text.txt"
    text.write_text("The cat sat on the mat. " * 4, encoding="utf-8")
    small = ["--model", model, "--seq-len", "32"]
    return {
        "analyze": (analyze_args(env, out / "run", 4), analyze_args(env, out / "run", 4)[:3] + ["--corpus", missing, "--out", out.parent / "a"]),
        "merge": (["merge", *halves, "--out", out / "m"], ["merge", halves[0], missing, "--out", out.parent / "m"]),
        "reproduce": (["reproduce", *small, "--corpus", corpus, "--windows", "4", "--out", out / "rep"],
                      ["reproduce", *small, "--corpus", missing, "--windows", "4", "--out", out.parent / "rep"]),
        "report": (["report", reference[48], "--no-example", "--out", out / "rep"], ["report", missing, "--no-example"]),
        "compare": (["compare", reference[48], reference[200], "--out", out / "cmp"],
                    ["compare", reference[48], missing, "--out", out.parent / "cmp"]),
        "inspect": (["inspect", "The cat sat.", "--model", model, "--out", out / "ins"],
                    ["inspect", "--text-file", missing, "--model", model, "--out", out.parent / "ins"]),
        "segment": (["segment", text, "--model", model, "--out", out / "seg.jsonl"], ["segment", missing, "--model", model]),
        "ablate": (["ablate", "--model", model, "--out", out / "abl"], ["ablate", "--model", model, "--run", missing, "--out", out.parent / "abl"]),
        "serve": ([], ["serve", "--model", model, "--run", missing, "--port", port]),
        "export": (["export", halves[0], "--out", out / "run.html"], []),  # a missing path is taken as the text itself
    }


@pytest.mark.parametrize("case", ["read-only output", "full disk", "missing input"])
def test_every_command_fails_in_one_line(env, reference, halves, tmp_path, capsys, failing_writes, case):
    import errno as errnos

    out, missing = tmp_path / "out", tmp_path / "missing"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    commands = _commands(env, reference, halves, out, missing, port)
    if case != "missing input":
        out.mkdir()
        failing_writes(out, errnos.EROFS if case == "read-only output" else errnos.ENOSPC)
    for name, (writing, reading) in commands.items():
        args = reading if case == "missing input" else writing
        if not args:
            continue
        code, err = cli(capsys, *args)
        one_line_error(code, err)
        expect = {"read-only output": "Read-only file system", "full disk": "No space left",
                  "missing input": str(missing)}[case]
        assert expect in err, (name, err)
    assert not missing.exists()


def test_an_unexpected_error_is_one_line_and_its_traceback_behind_debug(env, tmp_path, capsys, monkeypatch):
    import headsim.runs.merge as merging

    def broken(*args, **kwargs):
        raise KeyError("a library's own error")

    monkeypatch.setattr(merging, "merge_runs", broken)
    code, err = cli(capsys, "merge", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "m")
    one_line_error(code, err)
    assert "KeyError" in err and "--debug" in err
    code, err = cli(capsys, "merge", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "m", "--debug")
    assert code == 2 and "Traceback" in err and "in broken" in err


def test_small_items_of_issue_32(env, tmp_path, capsys):
    model, corpus, _ = env
    capsys.readouterr()
    assert run_app(["analyze", "--help"]) == 0
    assert 'pip install "headsim[ray]"' in " ".join(capsys.readouterr().out.split()).replace("│ ", "").replace(" │", "")
    long_text = " ".join(["The cat sat on the mat and looked at the dog."] * 20)
    code = run_app(["inspect", long_text, "--model", str(model), "--seq-len", "32", "--out", str(tmp_path / "ins")])
    err = capsys.readouterr().err
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "analysed window 0 only (32 tokens)" in notes[0] and "--window N" in notes[0], err
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café crème".encode("latin-1"))
    code, err = cli(capsys, "inspect", "--text-file", latin, "--model", model, "--out", tmp_path / "ins2")
    one_line_error(code, err)
    assert "not UTF-8" in err and "binary" not in err and "iconv -f latin1 -t utf-8" in err
