"""CUDA paths (skipped without a GPU; run on a lent device, see benchmarks/README.md).

The same windows through the same random weights on the CPU and on the GPU give the same
statistics (up to threshold flips from the GPU's different float rounding), a real out-of-memory
error halves the batch and loses nothing, and bf16 keeps almost every thresholded element.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (run on a lent device: see benchmarks/README.md)")

SEQ = 128


@pytest.fixture(scope="module")
def cuda_tokenizer():
    import headsim

    path = os.environ.get("HEADSIM_TOKENIZER")  # the GPU kit carries it; the embedded model stays home
    if path:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)
    return headsim.load_model().tokenizer


@pytest.fixture(scope="module")
def models(cuda_tokenizer):
    """(cpu, cuda fp32, cuda bf16) copies of one random-weight 4-layer BERT."""
    from transformers import BertConfig, BertModel

    from headsim.models import from_pretrained_objects

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(cuda_tokenizer), hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                     intermediate_size=512, max_position_embeddings=SEQ)
    cpu = BertModel(cfg, add_pooling_layer=False).eval()
    gpu = copy.deepcopy(cpu).to("cuda")
    low = copy.deepcopy(cpu).to("cuda", torch.bfloat16)
    return tuple(from_pretrained_objects(m, cuda_tokenizer, name) for m, name in
                 ((cpu, "tiny-cpu"), (gpu, "tiny-cuda"), (low, "tiny-cuda-bf16")))


@pytest.fixture(scope="module")
def windows(cuda_tokenizer):
    from headsim.inspection import EXAMPLES, example_text
    from headsim.windows import make_windows

    texts = [example_text(name) for name in EXAMPLES] * 16
    return make_windows(texts, cuda_tokenizer, SEQ, pack=True)


def _run(loaded, windows, *, batch: int, backoff: bool | None = None):
    from headsim.analysis import Engine
    from headsim.stats import CorpusStats

    fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, SEQ, device=loaded.device)  # noqa: E731
    engine = Engine(loaded, fresh(), fresh, backoff=backoff)
    for start in range(0, len(windows), batch):
        engine.process_safely(windows.select(slice(start, start + batch)))
    return engine, engine.stats.to_dataset()


def _assert_close(a, b, count_rtol: float) -> None:
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        if np.issubdtype(x.dtype, np.integer):
            assert abs(int(x.sum()) - int(y.sum())) <= count_rtol * max(int(y.sum()), 1), name
        else:
            np.testing.assert_allclose(x, y, rtol=1e-3, atol=1e-3, err_msg=name)


def test_cuda_statistics_match_cpu(models, windows):
    cpu, gpu, _ = models
    assert len(windows) >= 16 and windows.attention_mask[-1].sum() < SEQ  # a padded last window
    _, on_cpu = _run(cpu, windows, batch=16)
    _, on_gpu = _run(gpu, windows, batch=16)
    assert int(on_gpu["windows"]) == len(windows) and int(on_gpu["n_pairs"].sum()) > 0
    _assert_close(on_gpu, on_cpu, count_rtol=1e-3)


def test_real_out_of_memory_halves_the_batch_and_loses_nothing(models, windows):
    _, gpu, _ = models
    _, whole = _run(gpu, windows, batch=len(windows))
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    cap = torch.cuda.memory_allocated() + (16 << 20)  # a few windows' T×T temporaries (~2.5 MB each), not 36
    torch.cuda.set_per_process_memory_fraction(cap / total)
    try:
        with pytest.warns(UserWarning, match="out of memory"):
            engine, halved = _run(gpu, windows, batch=len(windows), backoff=True)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert engine.max_windows is not None and engine.max_windows < len(windows)
    assert int(halved["windows"]) == len(windows)
    _assert_close(halved, whole, count_rtol=1e-3)


def test_bf16_keeps_the_thresholded_elements(models, windows):
    from headsim.analysis import mask_agreement

    _, gpu, low = models
    assert mask_agreement(low, gpu, windows.select(slice(0, 16)), 0.3) >= 0.98
