"""Loading encoders: the embedded default, local directories, refused architectures, bad arguments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import headsim
from headsim.model import load
from headsim.model.resolve import arch_for
from headsim.errors import HeadsimError
from headsim.extraction import extract
from headsim.model.load import load_model

TEXT = "The red fox jumps over the fence. A small bird sings in the garden."


def _error(*args, **kwargs) -> HeadsimError:
    with pytest.raises(HeadsimError) as info:
        load_model(*args, **kwargs)
    assert info.value.problem and info.value.fix
    return info.value


# ---------------------------------------------------------------------------------------------
# The embedded model
# ---------------------------------------------------------------------------------------------


def test_default_model_shape(embedded):
    assert (embedded.n_layers, embedded.n_heads, embedded.d_head) == (6, 12, 32)
    assert embedded.name == "default"
    assert type(embedded.model).__name__ == "BertModel"
    assert embedded.dtype == torch.float32
    assert embedded.max_seq_len == 512
    assert getattr(embedded.tokenizer, "is_fast", False)
    d = embedded.describe()
    assert (d["n_layers"], d["n_heads"], d["d_head"], d["dtype"]) == (6, 12, 32, "float32")
    json.dumps(d)


def test_default_name_is_cached_same_object(embedded):
    assert load_model("default", device=embedded.device) is embedded
    assert load_model(None, device=embedded.device, dtype="fp32") is embedded
    assert load_model(device=embedded.device) is embedded
    assert not embedded.model.training
    assert not any(p.requires_grad for p in embedded.model.parameters())


# ---------------------------------------------------------------------------------------------
# Local directories
# ---------------------------------------------------------------------------------------------


def test_local_directory_matches_object(tiny_bert, tiny_bert_dir):
    loaded = load_model(tiny_bert_dir, device="cpu")
    assert load_model(str(tiny_bert_dir), device="cpu") is loaded
    assert type(loaded.model).__name__ == "BertModel"
    assert (loaded.n_layers, loaded.n_heads, loaded.d_head) == (2, 4, 16)
    assert loaded.max_seq_len == 128
    assert loaded.name == str(tiny_bert_dir)
    for name, p in tiny_bert.model.state_dict().items():
        torch.testing.assert_close(loaded.model.state_dict()[name], p, rtol=0, atol=0)
    a = extract(TEXT, loaded, seq_len=16)
    b = extract(TEXT, tiny_bert, seq_len=16)
    np.testing.assert_array_equal(a.input_ids, b.input_ids)
    np.testing.assert_allclose(a.head_outputs, b.head_outputs, atol=1e-6, rtol=0)
    np.testing.assert_allclose(a.attention, b.attention, atol=1e-6, rtol=0)


def test_local_directory_bf16(tiny_bert_dir, tiny_bert):
    loaded = load_model(tiny_bert_dir, device="cpu", dtype="bf16")
    assert loaded.dtype == torch.bfloat16
    got = extract(TEXT, loaded, seq_len=16)
    ref = extract(TEXT, tiny_bert, seq_len=16)
    assert got.head_outputs.dtype == np.float32 and np.isfinite(got.head_outputs).all()
    np.testing.assert_allclose(got.head_outputs, ref.head_outputs, atol=0.1)


def test_roberta_directory(tmp_path, tokenizer):
    from transformers import RobertaConfig, RobertaModel

    config = RobertaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           vocab_size=len(tokenizer), max_position_embeddings=40, pad_token_id=1)
    torch.manual_seed(0)
    model = RobertaModel(config).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert arch_for(model).family == "roberta"

    loaded = load_model(tmp_path, device="cpu")
    assert type(loaded.model).__name__ == "RobertaModel"
    assert loaded.arch.family == "roberta"
    # positions start at padding_idx + 1, so only max_position_embeddings - 2 tokens fit
    assert loaded.max_seq_len == 40 - 2

    long_text = " ".join(["word"] * 100)
    ex = extract(long_text, loaded, seq_len=loaded.max_seq_len)
    assert ex.head_outputs.shape[1:] == (2, 2, 38, 16)
    with pytest.raises(HeadsimError, match="seq_len 39"):
        extract(long_text, loaded, seq_len=loaded.max_seq_len + 1)
    # the limit is real: the model itself fails one token beyond it
    ids = torch.full((1, loaded.max_seq_len + 1), 2000)
    with pytest.raises((IndexError, RuntimeError)):
        loaded.model(input_ids=ids)


# ---------------------------------------------------------------------------------------------
# Refused models and bad arguments
# ---------------------------------------------------------------------------------------------


def _fnet(path: Path) -> None:
    """A family without attention: no entry, and no layout to read."""
    from transformers import FNetConfig, FNetModel

    FNetModel(FNetConfig(hidden_size=32, num_hidden_layers=1, intermediate_size=48, vocab_size=64)).save_pretrained(path)


def _remote_code(path: Path) -> None:
    """A config that names its own modelling code: refused before anything is imported."""
    import json

    _fnet(path)
    config = json.loads((path / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
    (path / "config.json").write_text(json.dumps(config))
    (path / "modeling_evil.py").write_text("raise SystemExit('remote code executed')\n")


@pytest.mark.parametrize("build, words", [(_fnet, "not supported: FNetModel (model_type 'fnet')"),
                                          (_remote_code, "needs its own remote code")])
def test_unsupported_architecture_or_remote_code(tmp_path, build, words):
    build(tmp_path)
    err = _error(tmp_path, device="cpu")
    assert words in str(err)
    assert "llama" in err.fix or "remote code" in str(err)


def test_nonexistent_path(tmp_path):
    err = _error(str(tmp_path / "nope" / "model"))
    assert "does not exist" in err.problem
    assert "does not exist" in _error("./no-such-model-dir").problem


def test_file_instead_of_directory(tmp_path):
    f = tmp_path / "config.json"
    f.write_text("{}")
    assert "is a file" in _error(f).problem


def test_directory_without_config(tmp_path):
    assert "config.json" in _error(tmp_path).problem


@pytest.mark.parametrize("device", ["tpu", "banana", "meta", "cuda:99"])
def test_unknown_device(device):
    if device == "cuda:99" and torch.cuda.device_count() > 99:  # pragma: no cover
        pytest.skip("really has 100 GPUs")
    _error(device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_gpu():
    assert "CUDA is not available" in _error(device="cuda").problem


@pytest.mark.parametrize("dtype", ["fp64", "int8", torch.float64, "half-ish"])
def test_unknown_dtype(dtype):
    _error(device="cpu", dtype=dtype)


def test_never_trusts_remote_code(tiny_bert_dir, tmp_path, monkeypatch):
    """A model that names its own code (config auto_map) is refused, the code never imported, and
    every from_pretrained call made says trust_remote_code=False (or leaves its False default)."""
    import shutil

    import transformers

    target = tmp_path / "remote-code"
    shutil.copytree(tiny_bert_dir, target)
    config = json.loads((target / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}
    (target / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "evil-ran"
    (target / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\n"
        "from transformers import BertConfig as EvilConfig, BertModel as EvilModel\n"
    )

    calls: list[tuple[str, dict]] = []  # headsim's own calls (not transformers' nested ones)
    depth = [0]
    for cls_name in ("AutoConfig", "AutoModel", "AutoTokenizer"):
        cls = getattr(transformers, cls_name)
        original = cls.from_pretrained

        def recorder(*args, _original=original, _name=cls_name, **kwargs):
            if depth[0] == 0:
                calls.append((_name, dict(kwargs)))
            depth[0] += 1
            try:
                return _original(*args, **kwargs)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(cls, "from_pretrained", recorder)
    monkeypatch.setattr(load, "_LOADED", {})

    with pytest.raises(HeadsimError, match="needs its own remote code"):
        load_model(target, device="cpu")
    assert not marker.exists()
    assert {name for name, _ in calls} >= {"AutoConfig"}
    for name, kwargs in calls:
        assert kwargs.get("trust_remote_code", False) is False, (name, kwargs)
        assert kwargs.get("local_files_only") is True, (name, kwargs)


def test_lazy_top_level_api_names():
    """``headsim.load_model`` and friends resolve lazily to the real objects."""
    assert headsim.load_model is load_model
    assert issubclass(headsim.HeadsimError, ValueError)


def test_top_level_functions_stay_callable():
    import headsim.context_similarity  # noqa: F401
    import headsim.extraction  # noqa: F401

    for _ in range(2):  # the second access must not find a submodule under the function's name
        assert callable(headsim.extract) and callable(headsim.similarity)


def test_an_encoder_decoder_is_read_at_its_three_stacks_and_says_so(tmp_path, tokenizer):
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model("t5", d_model=32, d_kv=8, num_layers=2, num_decoder_layers=3, num_heads=4,
                                  d_ff=48, vocab_size=len(tokenizer))
    AutoModel.from_config(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match=r"T5Model is an encoder-decoder: headsim analyses its encoder \(2 layers\), "
                      r"then per decoder layer its self- and cross-attention \(3 x 2 layers\)"):
        loaded = load_model(tmp_path, device="cpu")
    described = loaded.describe()
    assert described["analysed"].endswith("cross-attention of T5Model") and loaded.n_layers == 2 + 3 * 2
    assert described["stacks"] == ["encoder self"] * 2 + ["decoder self", "decoder cross"] * 3
