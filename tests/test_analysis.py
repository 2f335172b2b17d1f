"""`headsim analyze`, resume after SIGKILL, merge, bounded memory and bad input."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from cli_processes import spawn, wait_for
from headsim.cli import run_app
from headsim.runs.analyze import analyze
from headsim.errors import HeadsimError
from headsim.runs.merge import merge_runs
from headsim.runs.rundir import load_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> str:
    """A tiny random-weight BERT saved with save_pretrained (fast; for plumbing, never for results)."""
    import torch
    from transformers import BertConfig, BertModel

    from headsim.model.load import load_model

    tok = load_model().tokenizer
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128)
    path = tmp_path_factory.mktemp("tiny") / "tiny-bert"
    BertModel(cfg, add_pooling_layer=False).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _corpus(tmp_path: Path, n_docs: int = 24) -> Path:
    from headsim.corpus import lee_documents

    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(d.text for d in lee_documents()[:n_docs]), encoding="utf-8")
    return path


def test_run_directory_contents(tmp_path):
    corpus = _corpus(tmp_path, 6)
    res = analyze(None, str(corpus), windows=12, out=tmp_path / "run", seq_len=32, batch_size=4,
                  checkpoint_every=8, progress=False)
    run = load_run(tmp_path / "run")
    for name in ("run.json", "stats.nc", "heads.parquet", "layers.parquet", "windows.parquet"):
        assert (tmp_path / "run" / name).exists(), name
    assert not (tmp_path / "run" / "checkpoint").exists()
    assert run.meta["windows"] == 12 and run.meta["complete"] and run.meta["corpus"]["sha256"]
    assert len(run.heads) == 6 * 12 and run.heads["layer"].min() == 1 and run.heads["head"].max() == 12
    windows = run.windows
    assert len(windows) == 12 and list(windows["window"]) == list(range(12))
    assert int(run.dataset["windows"]) == 12
    # the tokens recorded are exactly the valid tokens counted by the statistics
    assert sum(int(np.sum(m)) for m in windows["attention_mask"]) == int(run.dataset["tokens"])
    # windows are packed full except possibly the last
    assert all(int(np.sum(m)) == 32 for m in windows["attention_mask"][:-1])
    assert res.heads.equals(run.heads)
    # the run's spec: what it was asked for, as run.json stores it, in this version's layout
    from headsim.runs.layout import LAYOUT, MARKER
    from headsim.runs.spec import RunSpec

    assert run.spec == RunSpec(run.meta["model"]["source"], run.meta["corpus"]["sha256"], 12, 32, 0.3, 3, 4, "float32", "pysbd")
    assert run.meta["layout"] == LAYOUT == json.loads((tmp_path / "run" / MARKER).read_text())["layout"]


def test_windowing_workers_change_nothing_and_stop_with_the_run(tmp_path, tiny_dir):
    corpus = _corpus(tmp_path, 24)  # far more windows than asked for: the run stops the workers early
    one = analyze(tiny_dir, str(corpus), windows=10, seq_len=32, batch_size=4, progress=False, workers=1)
    two = analyze(tiny_dir, str(corpus), windows=10, seq_len=32, batch_size=4, progress=False, workers=2)
    pd.testing.assert_frame_equal(one.heads, two.heads)
    for name in one.dataset.data_vars:
        np.testing.assert_array_equal(one.dataset[name].values, two.dataset[name].values, err_msg=name)


def test_sigkill_and_resume_give_identical_results(tmp_path, tiny_dir, capsys):
    # 400 windows (70 Lee documents hold 516): killed after its first checkpoint (8 windows), the run still has
    # ~390 windows to go, some hundred times the 10 ms it takes the test to see the checkpoint and kill it
    corpus = _corpus(tmp_path, 70)
    common = ["analyze", "--model", tiny_dir, "--corpus", str(corpus), "--seq-len", "32", "--batch-size", "4",
              "--checkpoint-every", "8", "--windows", "400"]
    assert run_app([*common, "--out", str(tmp_path / "whole")]) == 0, capsys.readouterr().err
    out = tmp_path / "killed"
    proc = spawn([*common, "--out", str(out)])  # the killed run is a child process; the others run in-process
    wait_for(out / "checkpoint" / "manifest.json", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "heads.parquet").exists()
    capsys.readouterr()
    refused = run_app([*common, "--out", str(out)])
    assert refused == 2 and "--resume" in capsys.readouterr().err
    assert run_app([*common, "--out", str(out), "--resume"]) == 0, capsys.readouterr().err
    a, b = pd.read_parquet(tmp_path / "whole" / "heads.parquet"), pd.read_parquet(out / "heads.parquet")
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    da = xr.open_dataset(tmp_path / "whole" / "stats.nc", engine="h5netcdf")
    db = xr.open_dataset(out / "stats.nc", engine="h5netcdf")
    xr.testing.assert_identical(da.load(), db.load())
    wa, wb = pd.read_parquet(tmp_path / "whole" / "windows.parquet"), pd.read_parquet(out / "windows.parquet")
    assert wa["input_ids"].map(list).tolist() == wb["input_ids"].map(list).tolist()


def test_merge_equals_one_run(tmp_path):
    a_txt, b_txt = tmp_path / "a.txt", tmp_path / "b.txt"
    from headsim.corpus import lee_documents

    docs = [d.text for d in lee_documents()[:8]]
    a_txt.write_text("\n\n".join(docs[:4]))
    b_txt.write_text("\n\n".join(docs[4:]))
    kw = dict(seq_len=32, batch_size=4, progress=False)
    ra = analyze(None, str(a_txt), out=tmp_path / "ra", **kw)
    rb = analyze(None, str(b_txt), out=tmp_path / "rb", **kw)
    merged = load_run(merge_runs([tmp_path / "ra", tmp_path / "rb"], tmp_path / "merged"))
    for name in ("n_pairs", "n_repeat", "distance_hist", "location_counts", "windows", "valid_pairs"):
        np.testing.assert_array_equal(merged.dataset[name].values, ra.dataset[name].values + rb.dataset[name].values)
    np.testing.assert_allclose(merged.dataset["attn_sum"].values, ra.dataset["attn_sum"].values + rb.dataset["attn_sum"].values)
    assert merged.meta["windows"] == ra.meta["windows"] + rb.meta["windows"]
    assert len(merged.windows) == merged.meta["windows"] == merged.spec.windows
    assert not merged.spec.differences(load_run(tmp_path / "ra").spec, merged.spec.NUMBERS)
    n = merged.heads["n_pairs"].to_numpy()
    np.testing.assert_array_equal(n, ra.heads["n_pairs"].to_numpy() + rb.heads["n_pairs"].to_numpy())


def _peak_rss(tmp_path: Path, model: str, corpus: Path, windows: int, tag: str) -> int:
    code = (
        "import resource, sys; from headsim.runs.analyze import analyze; "
        f"analyze({model!r}, {str(corpus)!r}, windows={windows}, out={str(tmp_path / tag)!r}, seq_len=32, batch_size=8, "
        "checkpoint_every=32, progress=False); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def test_peak_memory_does_not_grow_with_windows(tmp_path, tiny_dir):
    corpus = _corpus(tmp_path, 300)
    small = _peak_rss(tmp_path, tiny_dir, corpus, 256, "small")
    large = _peak_rss(tmp_path, tiny_dir, corpus, 2048, "large")
    assert large < small * 1.10 + 40_000, (small, large)  # KiB: 8× the windows: < 10 % (+40 MiB slack) more memory


@pytest.mark.parametrize("args, needle", [
    (["--corpus", "/no/such/corpus.txt"], "does not exist"),
    (["--threshold", "0"], "threshold"),
    (["--seq-len", "4"], "seq_len"),
    (["--windows", "0"], "windows"),
    (["--workers", "-1"], "workers -1"),
    (["--sentences", "bogus", "--workers", "2"], "unknown sentence splitter 'bogus'"),
    (["--backend", "bogus"], "unknown statistics backend 'bogus'"),
    (["--fused", "--backend", "triton"], "--fused contradicts --backend triton"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, args, needle):
    """In-process through run_app (what the console script calls; tests/test_cli.py checks the entry point)."""
    out = tmp_path / "run"
    capsys.readouterr()
    code = run_app(["analyze", *args, "--out", str(out)])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert needle in stderr and "Traceback" not in stderr
    assert not out.exists()


def test_too_many_windows_flag(tmp_path):
    corpus = _corpus(tmp_path, 2)
    with pytest.raises(HeadsimError, match="gives only"):
        analyze(None, str(corpus), windows=10_000, seq_len=32, allow_fewer=False, progress=False)
    with pytest.warns(UserWarning, match="gives only"):
        res = analyze(None, str(corpus), windows=10_000, seq_len=32, progress=False)
    assert res.meta["windows"] == res.meta["corpus"]["windows_available"]


def test_windows_beyond_an_uncounted_corpus(tmp_path, tiny_dir):
    """With --allow-fewer and --windows the corpus is not tokenised twice: counting stops at one window,
    and a corpus that runs out is found by the windowing (same windows, same warning as counting first)."""
    from headsim.runs.plan import count_windows
    from headsim.windows import token_counts
    from headsim.corpus import load_corpus
    from headsim.model.load import load_model

    corpus = _corpus(tmp_path, 12)
    corp, tok = load_corpus(str(corpus)), load_model(tiny_dir).tokenizer
    count = functools.partial(token_counts, tok)
    full, first = count_windows(corp, count, 30), count_windows(corp, count, 30, enough=1)
    assert full.complete and not first.complete and 1 <= first.windows < full.windows
    seen: list[tuple[int, int]] = []
    with pytest.warns(UserWarning, match=f"gives only {full.windows} windows"):
        res = analyze(tiny_dir, str(corpus), windows=10_000, out=tmp_path / "run", seq_len=32, batch_size=16,
                      progress=lambda done, total: seen.append((done, total)))
    assert seen[0][1] == 10_000 and seen[-1] == (full.windows, full.windows)  # the progress ends where the corpus did
    assert res.meta["windows"] == res.meta["corpus"]["windows_available"] == full.windows
    assert int(res.dataset["windows"]) == full.windows == len(load_run(tmp_path / "run").windows)
    strict = analyze(tiny_dir, str(corpus), windows=full.windows, seq_len=32, batch_size=16, allow_fewer=False,
                     progress=False)  # counted first: the same statistics
    for name in res.dataset.data_vars:
        np.testing.assert_array_equal(res.dataset[name].values, strict.dataset[name].values, err_msg=name)
    part = analyze(tiny_dir, str(corpus), windows=5, seq_len=32, progress=False)
    assert part.meta["windows"] == 5 and part.meta["corpus"]["windows_available"] is None


def test_corpus_shorter_than_one_window(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("Just a few words.")
    with pytest.raises(HeadsimError, match="less than one window"):
        analyze(None, str(short), seq_len=128, progress=False)


def test_refuses_other_run_and_overwrites_on_request(tmp_path):
    corpus = _corpus(tmp_path, 2)
    analyze(None, str(corpus), windows=4, out=tmp_path / "run", seq_len=32, progress=False)
    with pytest.raises(HeadsimError, match="already holds another run"):
        analyze(None, str(corpus), windows=4, out=tmp_path / "run", seq_len=32, progress=False)
    res = analyze(None, str(corpus), windows=4, out=tmp_path / "run", seq_len=32, overwrite=True, progress=False)
    assert res.meta["complete"]
    with pytest.raises(HeadsimError, match="other settings"):
        (tmp_path / "run" / "run.json").write_text(json.dumps({**res.meta, "complete": False}))
        analyze(None, str(corpus), windows=4, out=tmp_path / "run", seq_len=32, threshold=0.5, resume=True, progress=False)


def test_low_precision_run_reports_agreement_with_fp32(tmp_path):
    corpus = _corpus(tmp_path, 4)
    res = analyze(None, str(corpus), windows=8, seq_len=32, dtype="bf16", progress=False)
    share = res.meta["agreement_vs_fp32"]["identical_thresholded_elements"]
    assert 0.9 < share <= 1.0


def test_run_spec_round_trip_and_differences():
    from headsim.runs.spec import RunSpec, describe_changes, resume_flags

    spec = RunSpec("/models/x", "ab" * 32, 100, 128, 0.3, 3, 32, "float32", "pysbd")
    meta = {"corpus": {"name": "wiki", "spec": "corpus.txt"}, **spec.as_meta()}
    assert RunSpec.from_meta(json.loads(json.dumps(meta))) == spec
    assert meta["seq_len"] == 128 and meta["batch_size"] == 32  # the settings shown at the top level
    other = RunSpec("/models/x", "cd" * 32, 100, 64, 0.3, 3, 32, "bfloat16", "pysbd")
    changed = spec.differences(other)
    assert changed == {"corpus_sha256": ("ab" * 32, "cd" * 32), "seq_len": (128, 64), "dtype": ("float32", "bfloat16")}
    assert spec.differences(other, RunSpec.NUMBERS) == {"seq_len": (128, 64), "dtype": ("float32", "bfloat16")}
    assert describe_changes({"seq_len": (128, 64)}) == "--seq-len: run 128, now 64"
    assert resume_flags(changed, meta) == "--corpus corpus.txt --seq-len 128 --dtype float32"
    with pytest.raises(HeadsimError, match="no complete run spec"):
        RunSpec.from_meta({"spec": {"seq_len": 128}})


def test_resume_takes_every_setting_left_open_from_the_run(tmp_path):
    """One rule for the API and the CLI (headsim.runs.spec.resume_defaults): what a resumed call leaves open
    (None; in the CLI an option not typed) is the stored run's own setting; what it gives is compared."""
    from headsim.runs.rundir import RunDir
    from headsim.runs.spec import resume_defaults

    corpus = _corpus(tmp_path, 4)
    out = tmp_path / "run"
    first = analyze(None, str(corpus), out=out, seq_len=32, batch_size=4, shard="2/3", backend="eager", progress=False)
    stored = RunDir(out).settings()
    assert (stored["shard"], stored["batch_size"], stored["backend"], stored["seq_len"]) == ("2/3", 4, "eager", 32)
    assert "windows" not in stored  # a shard's windows are not the windows of the whole run
    given = {"shard": None, "batch_size": 8, "seq_len": 128, "threshold": 0.3}
    assert resume_defaults(stored, given) == {"shard": "2/3", "batch_size": 8, "seq_len": 128, "threshold": 0.3}
    typed = {"batch_size"}  # the CLI: every option not typed takes the run's
    assert resume_defaults(stored, given, lambda name, _: name not in typed) == {
        "shard": "2/3", "batch_size": 8, "seq_len": 32, "threshold": 0.3}
    with pytest.warns(UserWarning, match="already holds this run"):  # shard, batch size and backend from the run
        again = analyze(None, str(corpus), out=out, seq_len=32, resume=True, progress=False)
    assert again.meta["run_id"] == first.meta["run_id"] and again.meta["shard"]["index"] == 2
    with pytest.raises(HeadsimError, match="--batch-size: run 4, now 8"):
        analyze(None, str(corpus), out=out, seq_len=32, batch_size=8, resume=True, progress=False)


def test_windows_file_is_the_same_bytes_with_or_without_checkpoints(tmp_path, tiny_dir):
    """windows.parquet is written with one schema (headsim.windows.WINDOWS_SCHEMA), whether its rows come
    from checkpoint parts read back from Parquet or from memory."""
    corpus = _corpus(tmp_path, 4)
    kw = dict(windows=16, seq_len=32, batch_size=4, progress=False)
    analyze(tiny_dir, str(corpus), out=tmp_path / "saved", checkpoint_every=4, **kw)
    analyze(tiny_dir, str(corpus), out=tmp_path / "direct", **kw)  # far below 30 s: no checkpoint
    assert (tmp_path / "saved" / "windows.parquet").read_bytes() == (tmp_path / "direct" / "windows.parquet").read_bytes()


def test_a_run_windows_no_more_than_it_analyses(tmp_path, tiny_dir, monkeypatch):
    """The windowing of a run of ``--windows N`` reads, tokenises and sentence-splits only the text of
    those N windows, in batches of at most N, however large the corpus (a thread windowing text no
    batch will hold competes with the model for the interpreter and the cores)."""
    import headsim.runs.local as local

    made: dict[int, tuple[int, list[int]]] = {}
    real = local.iter_windows

    def counting(texts, *args, **kwargs):
        read, sizes = [0], []

        def counted():
            for text in texts:
                read[0] += 1
                yield text

        try:
            for batch in real(counted(), *args, **kwargs):
                sizes.append(len(batch))
                yield batch
        finally:
            made[n_docs] = (read[0], sizes)

    monkeypatch.setattr(local, "iter_windows", counting)
    for n_docs in (40, 160):  # beyond one tokenizer batch of texts (windows.iter_windows' tokenize_batch)
        (tmp_path / str(n_docs)).mkdir()
        corpus = _corpus(tmp_path / str(n_docs), n_docs)
        res = analyze(tiny_dir, str(corpus), windows=2, out=tmp_path / f"run{n_docs}", seq_len=32, progress=False)
        assert res.meta["windows"] == 2 and res.meta["batch_size"] <= 2
    assert made[40] == made[160] and made[40][1] == [2] and made[40][0] < 40
