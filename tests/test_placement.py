"""Models spread by accelerate (``device_map``, per-device memory, disk offload) and quantised checkpoints.

The offload test forces a tiny BERT to keep only its first layers in memory and the rest on disk,
and compares every statistic with the same model run whole on one device: they must be identical.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import headsim
from headsim.errors import HeadsimError
from headsim.model.load import load_model, parse_device_memory

TEXT = "The red fox jumps over the fence. A small bird sings in the garden. Many people walked home after the game. "


@pytest.fixture(scope="module")
def four_layers(tmp_path_factory, tokenizer):
    """A tiny random BERT with four layers, saved as safetensors, and its per-module sizes in bytes."""
    from accelerate.utils import compute_module_sizes
    from transformers import BertConfig, BertModel

    torch.manual_seed(3)
    model = BertModel(BertConfig(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
                                 vocab_size=len(tokenizer), max_position_embeddings=64)).eval()
    path = tmp_path_factory.mktemp("four-layers")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, compute_module_sizes(model)


def test_disk_offload_gives_identical_statistics(four_layers, tmp_path):
    path, sizes = four_layers
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT * 12)
    settings = dict(windows=6, seq_len=24, batch_size=3, progress=False, sentence_splitter="newline")
    whole = headsim.analyze(str(path), str(corpus), device="cpu", **settings)
    # memory for the embeddings and about three layers: accelerate keeps room for the largest layer too
    limit = sizes["embeddings"] + 3 * sizes["encoder.layer.0"]
    spread = headsim.analyze(str(path), str(corpus), device_map="auto", device_memory={"cpu": limit},
                             offload_folder=str(tmp_path / "offload"), **settings)
    placement = spread.meta["model"]["placement"]
    layers = {k: v for k, v in placement["modules"].items() if k.startswith("encoder.layer.")}
    assert set(layers.values()) == {"cpu", "disk"}, placement  # some layers in memory, some on disk
    assert placement["devices"] == ["cpu", "disk"] and placement["max_memory"] == {"cpu": limit}
    assert "placement" not in whole.meta["model"]
    json.dumps(spread.meta)
    assert set(whole.dataset.data_vars) == set(spread.dataset.data_vars)
    for name in whole.dataset.data_vars:
        np.testing.assert_array_equal(spread.dataset[name].values, whole.dataset[name].values, err_msg=name)
    assert whole.meta["windows"] == spread.meta["windows"] == 6
    assert any(np.abs(np.asarray(whole.dataset[n].values, dtype=float)).sum() > 0 for n in whole.dataset.data_vars)


@pytest.mark.parametrize("spec, words", [
    ("cpu", "is not DEVICE=SIZE"), ("cpu=lots", "is not a size"), ("gpu7=1GiB", "unknown device"),
    ("99=1GiB", "does not have"), ("cpu=0", "is not a size"),
])
def test_bad_device_memory(spec, words):
    with pytest.raises(HeadsimError, match=words):
        parse_device_memory(spec)


def test_device_memory_parses():
    assert parse_device_memory("cpu=64GiB, mps=1GB") == {"cpu": "64GiB", "mps": "1GB"}
    assert parse_device_memory("cpu=1000") == {"cpu": 1000}
    assert parse_device_memory(None) is None


@pytest.mark.parametrize("kwargs, words", [
    (dict(device="cpu", device_map="auto"), "both --device cpu and --device-map auto"),
    (dict(device_map="everywhere"), "unknown --device-map"),
    (dict(device_memory="cpu=1GiB"), "without --device-map"),
    (dict(offload_folder="x"), "without --device-map"),
])
def test_placement_arguments(four_layers, kwargs, words):
    with pytest.raises(HeadsimError, match=words):
        load_model(four_layers[0], **kwargs)


@pytest.mark.parametrize("quantization, words", [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "(bitsandbytes, 4-bit)"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "(bitsandbytes, 8-bit)"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "(gptq, 4-bit)"),
    ({"quant_method": "awq", "bits": 4}, "(awq, 4-bit)"),
])
def test_quantised_checkpoints_are_refused(four_layers, tmp_path, quantization, words):
    """Refused from config.json, before any weight is read or quantisation library imported."""
    import shutil

    target = tmp_path / "quantised"
    shutil.copytree(four_layers[0], target)
    config = json.loads((target / "config.json").read_text())
    config["quantization_config"] = quantization
    (target / "config.json").write_text(json.dumps(config))
    (target / "model.safetensors").write_bytes(b"\xff" * 16)  # never read
    with pytest.raises(HeadsimError) as info:
        load_model(target, device="cpu")
    assert words in info.value.problem and "quantised checkpoint" in info.value.problem
    assert "unquantised" in info.value.fix
