"""tests/agreement.py, the comparison of two runs' statistics up to float rounding, on two hand-made runs:
one pair one float32 step either side of the threshold (a rounding flip), everything else the same."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from agreement import RecordingStats, assert_statistics_agree, undecided

from headsim.stats import BatchInfo

T, D = 8, 4
BELOW, ABOVE = np.nextafter(np.float32(0.3), np.float32(0)), np.nextafter(np.float32(0.3), np.float32(1))


def _z(c: float) -> torch.Tensor:
    """``[2, 2, T, D]`` head outputs: window 0, head 0 has its peak 1 at the pair (0, 1) and the value
    ``c`` at (2, 3), exactly; small random vectors elsewhere (no other pair near 0.3), window 1 padded."""
    g = torch.Generator().manual_seed(0)
    z = 0.1 * torch.randn(2, 2, T, D, generator=g)
    z[1, 1, :3] += 3 * torch.randn(D, generator=g)  # a few high pairs in another head
    z[0, 0, :4] = 0.0
    z[0, 0, 0, 0] = z[0, 0, 1, 0] = z[0, 0, 2, 2] = 1.0
    z[0, 0, 3, 2] = float(c)
    return z


def _run(c: float):
    ids = torch.arange(10, 10 + 2 * T).view(2, T)
    valid = torch.ones(2, T, dtype=torch.bool)
    valid[1, 6:] = False
    no = torch.zeros(2, T, dtype=torch.bool)
    info = BatchInfo(ids, valid, torch.where(valid, 0, -1), no, no, no)
    log = []
    stats = RecordingStats(1, 2, T, log=log)
    stats.begin_batch(info)
    stats.update_layer(0, None, _z(c), info)
    return stats.to_dataset(), log


@pytest.fixture(scope="module")
def runs():
    (a, log_a), (b, log_b) = _run(BELOW), _run(ABOVE)
    return a, b, undecided(log_a, log_b, 1, 0.3, 120, (-0.2, 1.0))


def test_a_rounding_flip_is_found_and_allowed(runs):
    a, b, und = runs
    assert np.argwhere(und.pairs).tolist() == [[0, 0, 0, 2, 3]]  # layer, window, head, i, j
    assert und.high[0, 0, 0] == 1 and und.binned[0, 0] == 1  # (0, 1) high for certain; 0.3 is also a bin edge
    assert int(b["n_pairs"][0, 0]) == int(a["n_pairs"][0, 0]) + 1 and int(a["n_pairs"][0, 1]) > 0
    assert float(a["anchor_fraction_sum"][0, 0] - b["anchor_fraction_sum"][0, 0]) == 0.5  # window 0: 1/1 → 1/2
    assert_statistics_agree(b, a, und, rtol=1e-6, atol=1e-6, max_undecided=1.0)


@pytest.mark.parametrize("name, index, delta", [
    ("n_pairs", (0, 1), 1),  # a head without undecided pairs
    ("location_counts", (0, 0, 2, 4), 1),  # the right head, the wrong place
    ("distance_hist", (0, 0, 2), 1),
    ("sim_value_hist", (0, 0, 10), 1),  # totals change
    ("anchor_windows", (0, 0), 1),  # window 0 keeps a certain pair: it has pairs in both runs
    ("anchor_fraction_sum", (0, 1), 1e-3),
    ("anchor_kind_counts", (0, 1, 3), 1),
    ("anchor_distinct_hist", (0, 1), 1),
    ("sim_sum", (0, 1, 2, 3), 1e-3),
    ("tokens", (), 1),
])
def test_any_other_difference_fails(runs, name, index, delta):
    a, b, und = runs
    tampered = b.copy(deep=True)
    tampered[name].values[index] += delta
    with pytest.raises(AssertionError):
        assert_statistics_agree(tampered, a, und, rtol=1e-6, atol=1e-6, max_undecided=1.0)


def test_too_many_undecided_pairs_or_different_head_outputs_fail(runs):
    a, b, und = runs
    with pytest.raises(AssertionError):  # 1 undecided pair is too many for a tenth of a percent of the high pairs
        assert_statistics_agree(b, a, und, rtol=1e-6, atol=1e-6)
    (_, log_a), (_, log_b) = _run(0.1), _run(0.5)
    with pytest.raises(AssertionError, match="head outputs"):
        undecided(log_a, log_b, 1, 0.3, 120, (-0.2, 1.0))
