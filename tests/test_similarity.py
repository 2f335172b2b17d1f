"""Context similarity S = Z·Zᵀ: raw, normalised, thresholded, against numpy by the definition."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import reference_similarity
from headsim.errors import HeadsimError
from headsim.context_similarity import Similarity, similarity


def _mask(t: int, n_valid: int) -> np.ndarray:
    m = np.zeros(t, dtype=np.int64)
    m[:n_valid] = 1
    return m


def test_raw_is_z_zt(rng):
    z = rng.normal(size=(3, 5, 9, 7)).astype(np.float32)
    sim = similarity(z, 0.3)
    np.testing.assert_allclose(sim.raw, np.einsum("...id,...jd->...ij", z.astype(np.float64), z), rtol=1e-5, atol=1e-5)
    assert sim.raw.shape == sim.normalized.shape == sim.mask.shape == (3, 5, 9, 9)
    assert sim.threshold == 0.3 and sim.kind == "dot"


@settings(max_examples=40, deadline=None, derandomize=True)
@given(t=st.integers(1, 12), d=st.integers(1, 6), n_valid=st.integers(0, 12), seed=st.integers(0, 2**16),
       threshold=st.floats(0.01, 1.0), offset=st.floats(-2.0, 2.0))
def test_normalised_and_mask_match_definition(t, d, n_valid, seed, threshold, offset):
    n_valid = min(n_valid, t)
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(t, d)) + offset).astype(np.float32)
    m = _mask(t, n_valid)
    sim = similarity(z, threshold, m)
    raw, norm, high = reference_similarity(z, m.astype(bool), threshold)
    np.testing.assert_allclose(sim.raw, raw, rtol=1e-5, atol=1e-4)
    valid = m.astype(bool)
    off = ~np.eye(n_valid, dtype=bool)
    peak = float(np.max(raw[np.ix_(valid, valid)][off], initial=-np.inf))
    if peak > 1e-2 * max(1.0, np.abs(raw).max()):  # well conditioned: compare values
        np.testing.assert_allclose(sim.normalized, norm, rtol=1e-4, atol=1e-4)
    # the mask is exactly normalised > threshold (on headsim's own normalised values)
    np.testing.assert_array_equal(sim.mask, sim.normalized > threshold)
    assert not np.isnan(sim.normalized).any()
    assert (np.diag(sim.normalized) == 0).all() and not np.diag(sim.mask).any()
    pad = ~m.astype(bool)
    assert (sim.normalized[pad] == 0).all() and (sim.normalized[:, pad] == 0).all()
    assert not sim.mask[pad].any() and not sim.mask[:, pad].any()
    assert sim.normalized.max(initial=0.0) <= 1.0
    block = np.asarray(sim.raw)[np.ix_(valid, valid)][off]
    if block.size and block.max() > 0:
        assert sim.normalized[np.ix_(valid, valid)].max() == 1.0  # exactly
    else:
        assert (sim.normalized == 0).all() and not sim.mask.any()
    np.testing.assert_array_equal(sim.mask, sim.mask.T)


def test_mask_threshold_boundaries():
    z = np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.0], [0.0, 1.0]], dtype=np.float32)
    # raw off-diagonal: (0,1)=1, (0,2)=(1,2)=0.5, others 0 → normalised by 1
    sim = similarity(z, 0.5)
    expected = np.zeros((4, 4), dtype=bool)
    expected[0, 1] = expected[1, 0] = True  # 0.5 is not above 0.5
    np.testing.assert_array_equal(sim.mask, expected)
    assert similarity(z, 1.0).mask.sum() == 0  # nothing is above the maximum
    assert similarity(z, 0.49).mask.sum() == 6


@pytest.mark.parametrize("case", ["zeros", "one-valid", "negative", "all-padding"])
@pytest.mark.parametrize("kind", ["dot", "cosine"])
def test_degenerate_inputs(case, kind):
    if case == "zeros":
        z, m = np.zeros((5, 4), dtype=np.float32), None
    elif case == "one-valid":
        z, m = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32), _mask(5, 1)
    elif case == "negative":  # three unit vectors 120° apart: every off-diagonal dot is -0.5
        ang = np.array([0.0, 2 * np.pi / 3, 4 * np.pi / 3])
        z, m = np.stack([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32), None
    else:
        z, m = np.ones((4, 3), dtype=np.float32), _mask(4, 0)
    sim = similarity(z, 0.3, m, kind=kind)
    assert not np.isnan(sim.raw).any() and not np.isnan(sim.normalized).any()
    assert (sim.normalized == 0).all()
    assert not sim.mask.any()


def test_cosine_equals_numpy(rng):
    z = rng.normal(size=(2, 6, 5)) * rng.uniform(0.1, 10, size=(2, 6, 1))
    m = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    sim = similarity(z.astype(np.float32), 0.2, m, kind="cosine")
    unit = z / np.linalg.norm(z, axis=-1, keepdims=True)
    np.testing.assert_allclose(sim.raw, unit @ np.swapaxes(unit, -1, -2), atol=1e-5)
    for w in range(2):
        _, norm, _ = reference_similarity(z[w], m[w].astype(bool), 0.2, cosine=True)
        np.testing.assert_allclose(sim.normalized[w], norm, atol=1e-5)
    assert sim.kind == "cosine"


@pytest.mark.parametrize("threshold", [0, 0.0, -0.1, 1.0001, 1.5, float("nan"), float("inf"), "0.3", None])
def test_threshold_outside_range(threshold):
    with pytest.raises(HeadsimError, match="threshold"):
        similarity(np.ones((3, 2), dtype=np.float32), threshold)


@pytest.mark.parametrize("threshold", [1e-9, 0.3, 1, 1.0])
def test_threshold_inside_range(threshold):
    assert similarity(np.ones((3, 2), dtype=np.float32), threshold).threshold == float(threshold)


def test_bad_arguments():
    with pytest.raises(HeadsimError, match="kind"):
        similarity(np.ones((3, 2)), 0.3, kind="euclid")
    with pytest.raises(HeadsimError, match="attention_mask"):
        similarity(np.ones((3, 2)), 0.3, np.ones(4))
    with pytest.raises(HeadsimError, match="shape"):
        similarity(np.ones(3), 0.3)


def test_numpy_in_numpy_out_torch_in_torch_out(rng):
    z = rng.normal(size=(4, 6, 3)).astype(np.float32)
    m = np.array([1, 1, 1, 1, 0, 0])
    out_np = similarity(z, 0.3, m)
    assert isinstance(out_np, Similarity)
    for arr in (out_np.raw, out_np.normalized, out_np.mask):
        assert isinstance(arr, np.ndarray)
    assert out_np.mask.dtype == bool
    out_t = similarity(torch.from_numpy(z), 0.3, torch.from_numpy(m))
    for arr in (out_t.raw, out_t.normalized, out_t.mask):
        assert isinstance(arr, torch.Tensor)
    assert out_t.mask.dtype == torch.bool
    np.testing.assert_allclose(out_t.normalized.numpy(), out_np.normalized, atol=0)
    np.testing.assert_array_equal(out_t.mask.numpy(), out_np.mask)
    # a torch tensor with a numpy mask stays torch
    assert isinstance(similarity(torch.from_numpy(z), 0.3, m).normalized, torch.Tensor)


def test_batch_axes_broadcast(rng):
    w, l, h, t, d = 3, 2, 4, 7, 5
    z = rng.normal(size=(w, l, h, t, d)).astype(np.float32)
    m = np.ones((w, t), dtype=np.int64)
    m[1, 5:] = 0
    m[2, 2:] = 0
    sim = similarity(z, 0.3, m)
    assert sim.normalized.shape == (w, l, h, t, t)
    for a in range(w):
        for b in range(l):
            for c in range(h):
                one = similarity(z[a, b, c], 0.3, m[a])
                np.testing.assert_allclose(sim.raw[a, b, c], one.raw, atol=1e-6)
                np.testing.assert_allclose(sim.normalized[a, b, c], one.normalized, atol=1e-6)
                np.testing.assert_array_equal(sim.mask[a, b, c], one.mask)
                _, norm, _ = reference_similarity(z[a, b, c], m[a].astype(bool), 0.3)
                np.testing.assert_allclose(sim.normalized[a, b, c], norm, atol=1e-5)
    # a single [T] mask applies to every batch element
    shared = similarity(z, 0.3, m[1])
    for a in range(w):
        np.testing.assert_allclose(shared.normalized[a], similarity(z[a], 0.3, m[1]).normalized, atol=1e-6)


def test_on_extracted_head_outputs(tiny_bert):
    """End to end on real head outputs: the padded window's similarity ignores padding."""
    from headsim.extraction import extract

    ex = extract("The red fox jumps over the fence. A small bird sings in the garden.", tiny_bert, seq_len=12,
                 attention=False)
    sim = similarity(ex.head_outputs, 0.3, ex.attention_mask)
    for wi in range(ex.n_windows):
        valid = ex.attention_mask[wi].astype(bool)
        for li in range(tiny_bert.n_layers):
            for hi in range(tiny_bert.n_heads):
                _, norm, high = reference_similarity(ex.head_outputs[wi, li, hi], valid, 0.3)
                np.testing.assert_allclose(sim.normalized[wi, li, hi], norm, atol=1e-5)
                close = np.abs(norm - 0.3) < 1e-5
                np.testing.assert_array_equal(sim.mask[wi, li, hi][~close], high[~close])
