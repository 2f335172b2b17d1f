"""`inspect` and `export` at the command line: head options checked before the model loads, the window
taken said, tokens shown as text, decoders described in their own terms, progress on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from headsim.cli import run_app

TEXT = "The cat sat on the mat. The dog sat on the log. A bird sang in the tree by the old house."


def _run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run_app([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


@pytest.fixture(scope="module")
def byte_level_decoder(tmp_path_factory) -> Path:
    """A tiny random Llama with a byte-level BPE tokenizer (``Ġ`` word prefixes, ``<s>`` as BOS), saved
    with save_pretrained; and beside it the same config without weights."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    from headsim.corpus import lee_documents

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([d.text for d in lee_documents()[:20]] + [TEXT], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    root = tmp_path_factory.mktemp("decoder")
    LlamaModel(cfg).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    cfg.save_pretrained(root / "config-only")  # a valid config, no weights: loading it fails
    return root


@pytest.mark.parametrize("command", ["inspect", "export"])
@pytest.mark.parametrize("option, value, needle", [("--layer", 3, "layers 1..2"), ("--head", 5, "heads 1..4"),
                                                   ("--layer", 0, "layers 1..2")])
def test_head_options_are_checked_before_the_model_loads(byte_level_decoder, capsys, tmp_path, command, option, value,
                                                         needle):
    """The config alone decides: a model directory without weights gets the index error, not a load error."""
    model = byte_level_decoder / "config-only"
    out = ["--out", tmp_path / ("out" if command == "inspect" else "page.html")]
    code, _, err = _run(capsys, command, TEXT, "--model", model, option, value, *out)
    assert code == 2, err
    assert f"{option} {value} is out of range" in err and needle in err
    assert "cannot load" not in err
    # the same directory with a valid index fails at the load: the check above ran before any load
    code, _, err = _run(capsys, command, TEXT, "--model", model, *out)
    assert code == 2 and "cannot load model" in err


def test_a_decoder_is_described_in_its_own_terms_and_tokens_read_as_text(byte_level_decoder, capsys, tmp_path):
    model = byte_level_decoder / "model"
    code, out, err = _run(capsys, "inspect", TEXT, "--model", model, "--out", tmp_path / "out", "--rows", "400",
                          "--threshold", "0.05")
    assert code == 0, err
    meta = json.loads((tmp_path / "out" / "inspect.json").read_text())
    assert meta["position_0"] == "<s> = 0" and "[CLS]" not in meta["numbering"]
    assert "[CLS]" not in out + err
    tokens = [t for t in (tmp_path / "out" / "tokens.csv").read_text(encoding="utf-8").splitlines()[1:]]
    assert not any("Ġ" in t for t in tokens)
    assert "\u0120" not in out  # the pair table in the terminal shows words, not byte-level prefixes
    from headsim.views import text_view

    view = text_view(TEXT, str(model))
    assert view.tokens[0] == "<s>" and any(t.startswith(" ") for t in view.tokens) and "".join(view.tokens[1:]) == TEXT


def test_export_says_which_window_it_took_and_takes_window_and_resolution(embedded, capsys, tmp_path):
    long_text = " ".join([TEXT] * 12)
    code, out, err = _run(capsys, "export", long_text, "--seq-len", "64", "--out", tmp_path / "a.html")
    assert code == 0, err
    assert "analysed window 0 only" in err and "--window N" in err
    code, out, err = _run(capsys, "export", long_text, "--seq-len", "64", "--window", "1", "--resolution", "16",
                          "--out", tmp_path / "b.html")
    assert code == 0, err
    assert "analysed window 1 only" in err
    assert "position bins" in (tmp_path / "b.html").read_text(encoding="utf-8")  # 62 tokens above 16 bins: the overview


@pytest.fixture
def terminal(monkeypatch) -> io.StringIO:
    """Standard error as a terminal (rich's bars draw there), captured."""
    import importlib

    app = importlib.import_module("headsim.cli.app")
    buffer = io.StringIO()
    monkeypatch.setattr(app, "err_console", Console(file=buffer, force_terminal=True, width=120))
    return buffer


def test_inspect_shows_progress_on_a_terminal_only(embedded, capsys, tmp_path, terminal):
    code, _, err = _run(capsys, "inspect", TEXT, "--out", tmp_path / "out")
    assert code == 0
    shown = terminal.getvalue()
    assert "running the model (layers)" in shown and "figures and tables" in shown and "8/8" in shown
    assert "━" in shown  # a bar


def test_no_progress_where_standard_error_is_not_a_terminal(embedded, capsys, tmp_path):
    code, _, err = _run(capsys, "inspect", TEXT, "--out", tmp_path / "out")
    assert code == 0 and "running the model" not in err


def test_report_draws_a_finished_run_with_progress_on_a_terminal(capsys, tmp_path, terminal):
    from headsim.runs.analyze import analyze
    from headsim.corpus import lee_documents

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(d.text for d in lee_documents()[:4]), encoding="utf-8")
    analyze(None, str(corpus), windows=4, out=tmp_path / "run", seq_len=32, batch_size=4, progress=False)
    stats = tmp_path / "run" / "stats.nc"
    before = stats.stat().st_mtime_ns
    code, _, err = _run(capsys, "report", tmp_path / "run", "--no-example", "--out", tmp_path / "again")
    assert code == 0, err
    assert "figures, claims and page" in terminal.getvalue()
    # drawn from the finished run, nothing recomputed
    assert stats.stat().st_mtime_ns == before
    assert (tmp_path / "again" / "index.html").exists() and (tmp_path / "again" / "fig07_distance_histograms.png").exists()
