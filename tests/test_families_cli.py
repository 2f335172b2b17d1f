"""Every command end to end on saved tiny random models of two families the BERT layout never
covered: a Llama decoder (causal, grouped-query, RoPE, BOS framing) and a DeBERTa-v2 encoder
(relative positions, attention only through ``output_attentions``). Plumbing, never results."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from headsim.cli import run_app

pytestmark = pytest.mark.slow

TEXT = ("The red fox jumps over the fence. A small bird sings in the garden. Many people walked home after the "
        "long game. The river rose after the rain. Farmers moved their cattle to higher ground.\n\n"
        "Stock markets fell on Monday. Investors sold shares of banks and airlines. Analysts expect more losses "
        "this week as rates climb.")


def _save(tmp_path_factory, name: str, config, bos: bool) -> Path:
    from transformers import AutoModel

    import headsim

    tok = copy.deepcopy(headsim.load_model().tokenizer)
    if bos:
        tok.bos_token = tok.cls_token  # the embedded WordPiece vocabulary, with [CLS] as the BOS token
    path = tmp_path_factory.mktemp(name) / name
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module", params=["llama", "deberta-v2"])
def model_dir(request, tmp_path_factory) -> Path:
    from transformers import AutoConfig

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, vocab_size=30522,
                 max_position_embeddings=512)
    if request.param == "llama":
        config = AutoConfig.for_model("llama", num_key_value_heads=2, bos_token_id=101, pad_token_id=0, **small)
    else:
        config = AutoConfig.for_model("deberta-v2", relative_attention=True, pos_att_type=["p2c", "c2p"],
                                      max_relative_positions=32, **small)
    return _save(tmp_path_factory, request.param, config, bos=request.param == "llama")


def _ok(*args: str) -> None:
    assert run_app(list(args)) == 0, args


@pytest.fixture(scope="module")
def run(model_dir, tmp_path_factory) -> Path:
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text(TEXT * 3, encoding="utf-8")
    out = tmp_path_factory.mktemp("runs") / "run"
    _ok("analyze", "--model", str(model_dir), "--corpus", str(corpus), "--windows", "8", "--seq-len", "32",
        "--batch-size", "4", "--out", str(out))
    return out


def test_analyze_writes_a_run_of_that_family(run, model_dir):
    meta = json.loads((run / "run.json").read_text())
    family = "llama" if "llama" in model_dir.name else "deberta-v2"
    assert meta["complete"] and meta["model"]["family"] == family
    assert meta["statistics_backend"] == {"requested": "auto", "chosen": "numba", "ran": "numba", "fallbacks": []}
    assert ("eager attention function" if family == "llama" else "output_attentions") in meta["attention"]
    heads = pd.read_parquet(run / "heads.parquet")
    assert len(heads) == 2 * 4 and heads["n_pairs"].sum() > 0


def test_inspect_compare_reproduce(run, model_dir, tmp_path):
    _ok("inspect", TEXT, "--model", str(model_dir), "--seq-len", "32", "--layer", "2", "--head", "1",
        "--out", str(tmp_path / "inspect"))
    assert (tmp_path / "inspect" / "fig05_blocks.png").stat().st_size > 1000
    _ok("compare", str(run), str(run), "--out", str(tmp_path / "compare"))
    _ok("reproduce", "--model", str(model_dir), "--windows", "8", "--seq-len", "32", "--out", str(tmp_path / "repro"))
    assert (tmp_path / "repro" / "index.html").exists()


def test_segment(model_dir, tmp_path):
    text = tmp_path / "doc.txt"
    text.write_text(TEXT, encoding="utf-8")
    _ok("segment", str(text), "--model", str(model_dir), "-k", "2", "--out", str(tmp_path / "segments.jsonl"))
    segments = [json.loads(x) for x in (tmp_path / "segments.jsonl").read_text().splitlines()]
    assert len(segments) == 2 and " ".join(s["text"] for s in segments).split() == TEXT.split()


def test_serve_answers_for_that_family(run, model_dir):
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "headsim.cli", "serve", "--model", str(model_dir), "--run", str(run),
                             "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):
            try:
                if httpx.get(f"{url}/api/info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("the explorer did not start")
        got = httpx.post(f"{url}/api/analyze", json={"text": TEXT, "seq_len": 32}, timeout=120)
        assert got.status_code == 200, got.text
        assert got.json()["model"]["n_layers"] == 2 and len(got.json()["tokens"]) > 10
    finally:
        proc.terminate()
        proc.wait(timeout=30)
