"""headsim.runs.engine.Engine: out-of-memory back-off keeps the numbers and learns the batch size that fits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from agreement import RecordingStats, assert_statistics_agree, undecided

from headsim.runs.engine import Engine
from headsim.stats.backends import is_out_of_memory
from headsim.corpus import lee_documents
from headsim.errors import HeadsimError
from headsim.stats import CorpusStats
from headsim.windows import make_windows


def _engine(loaded, **kw) -> Engine:
    fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, 32, device=loaded.device)  # noqa: E731
    return Engine(loaded, fresh(), fresh, **kw)


def _fail_above(engine: Engine, limit: int) -> list[int]:
    """Make ``engine.process`` raise CUDA's out-of-memory error for more than ``limit`` windows."""
    tried, real = [], engine.process

    def process(w, stats=None):
        tried.append(len(w))
        if len(w) > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(w, stats)

    engine.process = process
    return tried


@pytest.fixture(scope="module")
def windows(tokenizer):
    texts = [d.text for d in lee_documents()[:6]]
    return make_windows(texts, tokenizer, 32, pack=True).select(slice(0, 16))


def test_backoff_gives_the_same_statistics_and_remembers_the_size(tiny_bert, windows):
    plain = _engine(tiny_bert, backoff=False)
    plain.process_safely(windows.select(slice(0, 8)))
    plain.process_safely(windows.select(slice(8, 16)))
    safe = _engine(tiny_bert, backoff=True)
    tried = _fail_above(safe, 3)
    with pytest.warns(UserWarning, match="out of memory"):
        safe.process_safely(windows.select(slice(0, 8)))
    assert tried == [8, 4, 2, 2, 2, 2] and safe.max_windows == 2
    safe.process_safely(windows.select(slice(8, 16)))  # cut to the learned size at once: no new failure
    assert tried[6:] == [2, 2, 2, 2]
    a, b = plain.stats.to_dataset(), safe.stats.to_dataset()
    for name in a.data_vars:
        if np.issubdtype(a[name].dtype, np.integer):
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
        else:
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-6, atol=1e-6, err_msg=name)
    assert int(b["windows"]) == 16


def test_backoff_gives_up_with_a_clear_error_at_one_window(tiny_bert, windows):
    safe = _engine(tiny_bert, backoff=True)
    _fail_above(safe, 0)
    with pytest.warns(UserWarning), pytest.raises(HeadsimError, match="single window"):
        safe.process_safely(windows.select(slice(0, 4)))
    assert int(safe.stats.to_dataset()["windows"]) == 0  # nothing half-added


def test_other_errors_are_not_mistaken_for_out_of_memory(tiny_bert, windows):
    safe = _engine(tiny_bert, backoff=True)

    def broken(w, stats=None):
        raise RuntimeError("shape mismatch")

    safe.process = broken
    with pytest.raises(RuntimeError, match="shape mismatch"):
        safe.process_safely(windows.select(slice(0, 4)))
    assert is_out_of_memory(RuntimeError("HIP out of memory")) and not is_out_of_memory(ValueError("out of memory"))


def test_own_attention_and_the_models_attention_give_the_same_statistics(tiny_bert, windows):
    """headsim computing a plain family's attention (one softmax for statistics and head outputs)
    equals the statistics of the model's own eager attention read through the tap, up to what the
    pairs within float rounding of the threshold (counted from both runs' head outputs:
    tests/agreement.py) can change."""
    def recording(log: list, own_attention) -> Engine:
        fresh = lambda: RecordingStats(tiny_bert.n_layers, tiny_bert.n_heads, 32,  # noqa: E731
                                       device=tiny_bert.device, log=log)
        return Engine(tiny_bert, fresh(), fresh, own_attention=own_attention)

    logs = [], []
    own, model = recording(logs[0], None), recording(logs[1], False)
    own.process_safely(windows)
    model.process_safely(windows)
    assert own.own_attention is True and model.own_attention is False
    assert "headsim" in own.attention_source() and "eager attention function" in model.attention_source()
    a, b = own.stats.to_dataset(), model.stats.to_dataset()
    assert int(a["n_pairs"].sum()) > 0
    und = undecided(*logs, tiny_bert.n_layers, b.attrs["threshold"], int(b.attrs["sim_bins"]),
                    tuple(b.attrs["sim_range"]))
    assert_statistics_agree(a, b, und, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernels", [True, False])
def test_automatic_cuda_batch_follows_free_memory(monkeypatch, kernels):
    """A quarter of free memory by the per-window estimate, between 8 windows and the cap (2,048 with
    the kernels, 512 for the eager statistics, whose ``T×T`` tensors the estimate counts)."""
    from types import SimpleNamespace

    from headsim.runs.engine import default_batch_size

    loaded = SimpleNamespace(device=torch.device("cuda"), n_heads=12)
    backend = "triton" if kernels else "eager"
    # 1 GiB free: a quarter is 256 MiB, 32 windows at 8 MiB each; the eager statistics add twelve
    # float32 [12, 128, 128] tensors (9 MiB) per window: 15 windows
    for free, want in ((80 << 30, 2048 if kernels else 512), (1 << 30, 32 if kernels else 15), (1 << 20, 8)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, free=free: (free, 80 << 30))
        assert default_batch_size(loaded, 128, backend) == want
    cpu = SimpleNamespace(device=torch.device("cpu"), n_heads=12)
    assert default_batch_size(cpu, 128, "eager") == 32


def test_a_statistics_backend_that_fails_is_recorded_never_silent(tiny_bert, windows, monkeypatch):
    """Under ``auto`` a compile failure switches to eager with a warning, and the run's record names the
    switch and why (run.json's statistics_backend), through the back-off's scratch statistics too."""
    from headsim.stats import fused
    from headsim.stats.backends import Choice

    def broken(fn):
        def fail(*args, **kwargs):
            raise RuntimeError("no compiler here")
        return fail

    monkeypatch.setattr(fused, "compiled", broken)
    fresh = lambda: CorpusStats(tiny_bert.n_layers, tiny_bert.n_heads, 32, backend=Choice("auto", "compiled"))  # noqa: E731
    engine = Engine(tiny_bert, fresh(), fresh, backoff=True)
    assert engine.backend_record() == {"requested": "auto", "chosen": "compiled", "ran": "compiled", "fallbacks": []}
    with pytest.warns(UserWarning, match="statistics backend 'compiled' failed"):
        engine.process_safely(windows)
    record = engine.backend_record()
    assert record["ran"] == "eager" and len(record["fallbacks"]) == 1
    assert record["fallbacks"][0].startswith("compiled -> eager after 0 windows") and "no compiler here" in record["fallbacks"][0]
