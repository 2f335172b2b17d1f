"""The GPU kernels of windows above the resolution (headsim.stats.triton_long) against the binned exact
statistics and the torch tiles.

On a GPU they run compiled; on a CPU in Triton's interpreter (``TRITON_INTERPRET=1``, set here before
Triton is imported). Skipped where Triton is not installed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from random_windows import assert_matches_reference, to_info  # noqa: E402
from random_windows import random_batch as random_batch_stats  # noqa: E402
from reference_stats import binned_reference  # noqa: E402
from test_long_inputs import _binned_run  # noqa: E402

from headsim.errors import HeadsimError  # noqa: E402
from headsim.stats import CorpusStats  # noqa: E402
from headsim.stats.backends import Choice, choose_backend  # noqa: E402
from headsim.stats.tiled import AttentionTiles, Bins, kernel_tiles  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("tile_bytes", [20000, 1 << 30])
def test_binned_statistics_equal_binning_the_exact_ones(tile_bytes):
    """32 tokens on 8 bins of 4: blocks of a few query rows or the whole window, every position-pair
    statistic the binned exact one, the rest exact (as the torch tiles and the CPU kernel give them)."""
    stats, ref, t = _binned_run(4, resolution=8, t=32, tile_bytes=tile_bytes, backend="triton", device=DEVICE)
    assert stats.binned and stats.backend == "triton" and stats.backend_record()["fallbacks"] == []
    assert_matches_reference(stats.to_dataset(), binned_reference(ref, t, 8))


@pytest.mark.parametrize("t,resolution", [(64, 16), (128, 8)])
def test_the_pairs_kernel_counts_what_the_torch_tiles_count(t, resolution):
    """Padding, repeats, sentences, a head whose outputs are all zero (no positive maximum), bins of 4
    (several per tile) and of 16 (a tile's side): every count equal, every sum to float rounding."""
    rng = np.random.default_rng(5)
    batch = random_batch_stats(rng, 3, 1, 3, t, attention=False)
    batch["head_outputs"][:, 0, 1] = 0.0
    info = to_info(batch, DEVICE)
    got = {}
    for backend in ("eager", "triton"):
        stats = CorpusStats(1, 3, t, resolution=resolution, backend=backend, device=DEVICE)
        stats.begin_batch(info)
        stats.update_layer(0, None, torch.as_tensor(batch["head_outputs"][:, 0], device=DEVICE), info)
        got[backend] = stats.acc
    for name, value in got["eager"].items():
        if value.is_floating_point():
            torch.testing.assert_close(got["triton"][name], value, rtol=1e-5, atol=1e-4, msg=name)
        else:
            assert torch.equal(got["triton"][name], value), name
    assert got["eager"]["location_upper"].sum() > 0 and got["eager"]["n_repeat"].sum() > 0


def test_the_attention_kernel_reads_blocks_as_the_model_hands_them():
    """bf16 blocks of odd sizes (rows across bin edges), their key columns trimmed, a padded window:
    column sums, per-query-bin sums and near-diagonal entries equal the torch reduction's."""
    rng = np.random.default_rng(3)
    t, r = 64, 16
    info = to_info(random_batch_stats(rng, 2, 1, 3, t, attention=False), DEVICE)
    from headsim.stats.batch import batch_tensors

    bt = batch_tensors(info, r)
    bins = Bins.build(t, r, DEVICE)
    probs = torch.as_tensor(rng.random((2, 3, t, t)), device=DEVICE).softmax(-1).to(torch.bfloat16)
    torch_tiles, kernel = AttentionTiles(bt, 3, bins), AttentionTiles(bt, 3, bins, kernel=True)
    for r0, r1, k0, k1 in [(0, 10, 0, 40), (10, 27, 3, 64), (27, 64, 20, 64)]:
        for tiles in (torch_tiles, kernel):
            tiles.add(slice(r0, r1), probs[:, :, r0:r1, k0:k1], slice(k0, k1))
    for name in ("column_sums", "per_query_bin", "near"):
        torch.testing.assert_close(getattr(kernel, name), getattr(torch_tiles, name), rtol=1e-6, atol=1e-6, msg=name)
    assert kernel.near.abs().sum() > 0


def test_the_kernels_run_where_the_bins_allow_and_are_refused_elsewhere():
    assert kernel_tiles(8192, 512) and kernel_tiles(32768, 512) and kernel_tiles(1024, 512)
    assert not kernel_tiles(1000, 512) and not kernel_tiles(1536, 512) and not kernel_tiles(512 * 256, 512)
    assert choose_backend("auto", "cuda", binned=True, kernel_tiles=False).chosen == "eager"
    assert choose_backend("triton", DEVICE, binned=True, kernel_tiles=True).chosen == "triton"
    with pytest.raises(HeadsimError, match="'triton' does not compute windows longer than the resolution .*on these bins"):
        CorpusStats(1, 2, 21, resolution=5, backend="triton", device=DEVICE)


@pytest.mark.parametrize("which", ["binned_pairs", "attention_block"])
def test_a_failing_kernel_falls_back_under_auto_and_stops_a_named_run(monkeypatch, which):
    """A kernel that fails under ``auto`` hands its layer to the torch tiles (a warning, recorded) and the
    run equals an eager run; a named ``--backend triton`` stops with a one-line error."""
    from headsim.stats import triton_long

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(triton_long, which, broken)
    with pytest.warns(UserWarning, match="statistics backend 'triton' failed .*no kernel today.*continuing with eager"):
        stats, _, _ = _binned_run(4, resolution=8, t=32, backend=Choice("auto", "triton"), device=DEVICE)
    record = stats.backend_record()
    assert record["ran"] == "eager" and "triton -> eager" in record["fallbacks"][0]
    eager, _, _ = _binned_run(4, resolution=8, t=32, backend="eager", device=DEVICE)
    for name, value in eager.acc.items():  # what the kernels added before they failed: equal to float rounding
        if value.is_floating_point():
            torch.testing.assert_close(stats.acc[name], value, rtol=1e-6, atol=1e-6, msg=name)
        else:
            assert torch.equal(stats.acc[name], value), name
    with pytest.raises(HeadsimError, match="statistics backend 'triton' failed after 0 windows: RuntimeError: no kernel today"):
        _binned_run(4, resolution=8, t=32, backend="triton", device=DEVICE)
