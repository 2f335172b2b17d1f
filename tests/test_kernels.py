"""headsim's Triton kernels (headsim.stats.triton_kernels) against the eager statistics.

On a GPU the kernels run compiled; on a CPU in Triton's interpreter (``TRITON_INTERPRET=1``, set
here before Triton is imported). Skipped where Triton is not installed.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

import xarray as xr  # noqa: E402
from agreement import (RecordingStats, assert_statistics_agree, at_risk, rounding_interval,  # noqa: E402
                       undecided)

from headsim.runs.engine import Engine  # noqa: E402
from headsim.model.plain import attention_probs  # noqa: E402
from headsim.stats import CorpusStats  # noqa: E402
from headsim.windows import make_windows  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SEQ = 48  # not a power of two: the kernels' padded tiles and masks are exercised


@pytest.fixture(scope="module")
def pretrained():
    """The embedded MiniLM, or ``HEADSIM_MODEL`` (a local directory: the GPU kit carries MiniLM's weights)."""
    from headsim.model.load import load_model

    return load_model(os.environ.get("HEADSIM_MODEL", "default"), device=DEVICE)


@pytest.fixture(scope="module")
def tiny(pretrained):
    """A tiny random BERT (4 heads of 16 dimensions: the kernels' padded head dimension) with the same tokenizer."""
    from conftest import tiny_config
    from transformers import BertModel

    from headsim.model.load import from_pretrained_objects

    torch.manual_seed(0)
    config = tiny_config(len(pretrained.tokenizer))
    return from_pretrained_objects(BertModel(config, add_pooling_layer=False).to(DEVICE).eval(), pretrained.tokenizer,
                                   name="tiny random bert")


@pytest.fixture(scope="module")
def windows(pretrained):
    from conftest import lee_texts

    texts = lee_texts(4)
    w = make_windows(texts, pretrained.tokenizer, SEQ, pack=True)
    return w.select(slice(len(w) - 3, len(w)))  # two full windows, then a padded one


def _run(loaded, windows, backend: str):
    """The statistics, and the log of the head outputs they used (:class:`agreement.RecordingStats`)."""
    log = []
    fresh = lambda: RecordingStats(loaded.n_layers, loaded.n_heads, SEQ, device=loaded.device,  # noqa: E731
                                   backend=backend, log=log)
    engine = Engine(loaded, fresh(), fresh, backoff=False)
    engine.process(windows)
    assert engine.stats.backend == backend, "the kernels fell back to eager"
    return engine.stats.to_dataset(), log


@pytest.mark.parametrize("model", ["pretrained", "tiny"])
def test_kernels_equal_the_eager_statistics(model, windows, request):
    """Every accumulator equals the eager one up to what the pairs within float rounding of the
    threshold (or of a histogram bin edge), counted here from both runs' head outputs, can change;
    everything else: counts exactly, sums to float32 rounding."""
    loaded = request.getfixturevalue(model)
    assert windows.attention_mask[-1].sum() < SEQ
    (fast, fast_log), (eager, eager_log) = _run(loaded, windows, "triton"), _run(loaded, windows, "eager")
    assert int(eager["n_pairs"].sum()) > 0 and int(eager["n_repeat"].sum()) > 0
    und = undecided(fast_log, eager_log, loaded.n_layers, eager.attrs["threshold"], int(eager.attrs["sim_bins"]),
                    tuple(eager.attrs["sim_range"]))
    assert_statistics_agree(fast, eager, und, rtol=1e-4, atol=2e-5)


def test_attention_pass_gives_the_model_head_outputs():
    """The head outputs the kernel writes are softmax(QKᵀ/√d)·V over valid keys, as the model's own kernels compute."""
    from headsim.stats import triton_kernels as tk

    g = torch.Generator().manual_seed(0)
    b, h, t, d = 3, 2, 40, 24
    q, k, v = (torch.randn(b, t, h, d, generator=g).transpose(1, 2).to(DEVICE) for _ in range(3))  # strided, as models pass them
    valid = torch.ones(b, t, dtype=torch.bool)
    valid[1, 30:] = False
    valid = valid.to(DEVICE)
    out = torch.empty(b, h, t, d, device=DEVICE)
    ap = tk.attention_pass(q, k, v, valid, None, out)
    bias = torch.zeros(b, 1, 1, t, device=DEVICE).masked_fill(~valid[:, None, None, :], -torch.inf)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    probs = attention_probs(q, k, valid) * valid[:, None, :, None]
    torch.testing.assert_close(ap.column_sums, probs.sum(dim=-2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ap.plain_sum, probs.sum(dim=0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ap.diagonals[0], probs.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, 2)))


def test_deferred_attention_steps_are_settled_by_every_read():
    """A kernel step finishes its attention (top columns, near-ties re-ranked exactly) one layer later;
    every read in between (dataset, state, merge) and the batch's end settle it, giving the eager numbers."""
    from headsim.stats import BatchInfo

    g = torch.Generator().manual_seed(2)
    b, h, t, d = 3, 2, 40, 24
    valid = torch.ones(b, t, dtype=torch.bool)
    valid[1, 31:] = False
    ids = torch.randint(5, 50, (b, t), generator=g)
    info = BatchInfo(ids.to(DEVICE), valid.to(DEVICE), torch.where(valid, torch.arange(t) // 10, -1).to(DEVICE),
                     *(torch.zeros(b, t, dtype=torch.bool, device=DEVICE) for _ in range(3)))
    layers = []
    for _ in range(2):
        q, k, v = (torch.randn(b, h, t, d, generator=g) for _ in range(3))
        q[:, 0] = 0.0  # head 0 attends uniformly: every column sum tied, settled from exact sums
        layers.append(tuple(x.to(DEVICE) for x in (q, k, v)))

    def pair():
        """(kernel, eager) statistics recording their head outputs, and the two logs."""
        logs = [], []
        return (*(RecordingStats(2, h, t, device=DEVICE, backend=backend, log=log)
                  for backend, log in zip(("triton", "eager"), logs)), logs)

    def same(x: xr.Dataset, y: xr.Dataset, logs):
        """Equal up to the pairs within float rounding of the threshold (a bin edge) in the head outputs
        (the kernel's P·V and the eager one)."""
        assert_statistics_agree(x, y, undecided(*logs, 2, 0.3, 120, (-0.2, 1.0)), rtol=1e-4, atol=2e-5)

    def dataset(state: dict) -> xr.Dataset:
        return CorpusStats.from_state_dict(state, device=DEVICE).to_dataset()

    fast, eager, logs = pair()
    for stats in (fast, eager):
        stats.begin_batch(info)
        stats.update_qkv(0, *layers[0], info)
    assert fast.impl.pending is not None  # layer 0's attention waits for the next step
    assert bool(fast.impl.pending[0].close.any())  # with near-ties to settle from exact sums
    same(fast.to_dataset(), eager.to_dataset(), logs)
    assert fast.impl.pending is None and eager.to_dataset()["attn_sum_top_zeroed"].sum() > 0
    for stats in (fast, eager):
        stats.update_qkv(1, *layers[1], info)
    assert fast.impl.pending is None  # the batch's last layer is settled at once
    same(dataset(fast.state_dict()), dataset(eager.state_dict()), logs)
    fast, eager, logs = pair()  # a merge settles the step the merged statistics left pending
    for stats in (fast, eager):
        stats.begin_batch(info)
        stats.update_qkv(0, *layers[0], info)
    assert fast.impl.pending is not None
    same(*(dataset(CorpusStats(2, h, t, device=DEVICE).merge(stats).state_dict()) for stats in (fast, eager)), logs)


def test_launch_configurations_agree():
    """Other row blocks, warps and pipeline stages give the same reductions as the defaults (counts
    exactly, sums to float32 rounding), the last run of windows shorter than the others included."""
    from headsim.stats import triton_kernels as tk

    g = torch.Generator().manual_seed(1)
    b, h, t, d = 5, 2, 40, 24  # 40 rows: 2 blocks of 32, 3 of 16; 5 windows: runs of 3 and 2
    q, k, z = (torch.randn(b, h, t, d, generator=g).to(DEVICE) for _ in range(3))
    z[:, :, :8] += 3 * torch.randn(h, 1, d, generator=g).to(DEVICE)  # a few strongly similar rows: high pairs
    valid = torch.ones(b, t, dtype=torch.bool)
    valid[2, 25:] = False
    ids = torch.randint(0, 6, (b, t), generator=g)
    sentences = torch.where(valid, torch.arange(t) // 10, -1)
    valid, ids, sentences = valid.to(DEVICE), ids.to(DEVICE), sentences.to(DEVICE)
    other = tk.Launch(block_rows=16, num_warps=2, num_stages=1)
    a0, a1 = tk.attention_pass(q, k, None, valid), tk.attention_pass(q, k, None, valid, launch=other)
    for x, y in zip((a0.plain_sum, a0.column_sums, *a0.diagonals, a0.row_max, a0.row_sum),
                    (a1.plain_sum, a1.column_sums, *a1.diagonals, a1.row_max, a1.row_sum)):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    # no pair lies within float32 rounding of the threshold or a bin edge: every launch must decide each alike
    flip, _, edge = at_risk(*rounding_interval(z.cpu(), valid.cpu()), valid.cpu(), 0.3, 10, (0.0, 1.0))
    assert not flip.any() and not edge.any()
    args = (z, valid, ids, sentences, 0.3, 10.0, 0.0, 10)  # SimBins(10, 0.0, 1.0)
    p0 = tk.similarity_pass(*args)
    assert p0.location.sum() > 0 and p0.repeat.sum() > 0 and p0.same_sentence.sum() > 0
    assert torch.equal(p0.repeat, p0.inner.sum(dim=(0, 2)))
    # upper-triangle tiles: 2 row blocks of 32 (3 tiles) or 3 of 16 (6 tiles), the last block partly outside
    for launch in (other, tk.Launch(16, 2, 1, "triangle"), tk.Launch(32, 4, 2, "triangle")):
        p1 = tk.similarity_pass(*args, launch=launch)
        for name in ("hist", "location", "rows", "cols", "inner", "same_sentence", "repeat", "repeat_same_sentence"):
            assert torch.equal(getattr(p0, name), getattr(p1, name)), (launch, name)
        torch.testing.assert_close(p0.sim_sum, p1.sim_sum, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="row tiles only"):
        tk.attention_pass(q, k, None, valid, launch=tk.Launch(tiles="triangle"))


@pytest.mark.parametrize("launch", [dict(block_rows=24), dict(block_rows=8), dict(num_warps=3), dict(num_stages=0),
                                    dict(tiles="cols")])
def test_launch_rejects_unusable_settings(launch):
    from headsim.stats import triton_kernels as tk

    with pytest.raises(ValueError, match="Launch"):
        tk.Launch(**launch)


def test_launch_parses_its_text_form():
    from headsim.stats import triton_kernels as tk

    assert tk.Launch.parse("16,8,2") == tk.Launch(16, 8, 2)
    assert tk.Launch.parse("32,4,1,triangle") == tk.Launch(32, 4, 1, "triangle")
    for bad in ("16,8", "16,8,2,triangle,9", "a,8,2", "16,8,2,cols"):
        with pytest.raises(ValueError):
            tk.Launch.parse(bad)


def test_a_pipelined_build_too_big_for_shared_memory_is_rerun_with_one_stage():
    """Long sequences can need more shared memory for two stages than the GPU has: the launch is
    retried with one stage, and later launches go straight to one stage."""
    from triton.runtime.errors import OutOfResources

    from headsim.stats import triton_kernels as tk

    calls = []

    class Kernel:  # stands in for a compiled kernel whose pipelined build does not fit
        def __getitem__(self, grid):
            def run(*args, num_warps, num_stages, **constexprs):
                calls.append(num_stages)
                if num_stages > 1:
                    raise OutOfResources(233472, 232448, "shared memory")
            return run

    kernel, launch = Kernel(), tk.Launch(32, 4, 2)
    tk._launch(kernel, (1,), launch, (), dict(TP=512), torch.bfloat16)
    tk._launch(kernel, (1,), launch, (), dict(TP=512), torch.bfloat16)
    assert calls == [2, 1, 1]

    class Threads(Kernel):  # any other shortage is not papered over
        def __getitem__(self, grid):
            def run(*args, num_warps, num_stages, **constexprs):
                raise OutOfResources(2048, 1024, "threads")
            return run

    with pytest.raises(OutOfResources):
        tk._launch(Threads(), (1,), tk.Launch(16, 4, 2), (), dict(TP=128), torch.bfloat16)
