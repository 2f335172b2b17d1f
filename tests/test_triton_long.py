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
from headsim.stats.batch import kernel_tiles  # noqa: E402
from headsim.stats.tiled import AttentionTiles, Bins  # noqa: E402

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


def test_the_scores_kernels_recompute_the_softmax_of_each_mask():
    """Each row's log-sum-exp, then each block of keys' probabilities recomputed from it (grouped key heads,
    a padded window; causal, causal within a sliding window, and full attention): the reductions of the
    dense softmax's probabilities."""
    from headsim.model.scores import Scores
    from headsim.stats import triton_long
    from headsim.stats.batch import batch_tensors

    rng = np.random.default_rng(1)
    t, r = 48, 12
    bt = batch_tensors(to_info(random_batch_stats(rng, 2, 1, 4, t, attention=False), DEVICE), r)
    bins = Bins.build(t, r, DEVICE)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, t, 8, generator=gen).to(DEVICE), torch.randn(2, 2, t, 8, generator=gen).to(DEVICE)
    for causal, window in [(True, None), (True, 10), (False, None)]:
        scores = Scores(q, k, 8 ** -0.5, causal, window, bt.valid)
        want, got = AttentionTiles(bt, 4, bins), AttentionTiles(bt, 4, bins, kernel=True)
        want.add(slice(0, t), scores.probabilities(slice(0, t)))
        triton_long.attention_scores(q, k, scores.scale, causal, window, bt.valid, t // r, got.column_sums,
                                     got.per_query_bin, got.near)
        for name in ("column_sums", "per_query_bin", "near"):
            torch.testing.assert_close(getattr(got, name), getattr(want, name), rtol=1e-5, atol=1e-6,
                                       msg=f"{name} causal={causal} window={window}")


def test_scores_probabilities_of_a_block_of_rows_and_its_keys_are_the_dense_softmax():
    """:meth:`Scores.probabilities` of a block of rows, over the keys :meth:`Scores.keys` says it may attend,
    equals a float64 softmax of the whole masked score matrix (grouped key heads, a padded window; causal,
    sliding and full); every column outside those keys is 0 there."""
    from headsim.model.scores import Scores

    gen = torch.Generator().manual_seed(2)
    b, h, kv, t, d = 2, 6, 2, 40, 8
    q, k = torch.randn(b, h, t, d, generator=gen), torch.randn(b, kv, t, d, generator=gen)
    valid = torch.ones(b, t, dtype=torch.bool)
    valid[1, 31:] = False
    pos = torch.arange(t)
    for causal, window in [(True, None), (True, 9), (False, None)]:
        scores = Scores(q, k, d ** -0.5, causal, window, valid)
        ok = valid[:, None, None, :].expand(b, 1, t, t).clone()
        if causal:
            ok &= pos[None, :] <= pos[:, None]
        if window:
            ok &= pos[:, None] - pos[None, :] < window
        dense = (q.double() @ k.double().repeat_interleave(h // kv, dim=1).transpose(-1, -2)) * d ** -0.5
        dense = dense.masked_fill(~ok, float("-inf")).softmax(dim=-1).nan_to_num(0.0)
        for rows in (slice(0, 7), slice(7, 23), slice(23, 40)):
            keys = scores.keys(rows)
            outside = torch.ones(t, dtype=torch.bool)
            outside[keys] = False
            assert not bool(dense[:, :, rows][..., outside].any()), (causal, window, rows)
            torch.testing.assert_close(scores.probabilities(rows, keys).double(), dense[:, :, rows, keys],
                                       rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(scores.probabilities(slice(0, t)).double(), dense, rtol=1e-5, atol=1e-6)


def _engine_run(family: str, backend, tile_bytes: int = 1 << 13, **config):
    """Two windows (one padded) of a tiny 2-layer ``family`` model through the engine, 32 tokens on 8 bins,
    tiles of ``tile_bytes``: the statistics and the layers whose attention arrived as scores."""
    import copy

    from headsim.model.load import from_pretrained_objects, load_model
    from headsim.model.verify import tiny_model
    from headsim.runs.engine import Engine
    from headsim.windows import Windows

    tok = copy.deepcopy(load_model().tokenizer)
    tok.bos_token = tok.cls_token
    model, _ = tiny_model(family, vocab_size=len(tok), max_position_embeddings=1024, num_hidden_layers=2, **config)
    loaded = from_pretrained_objects(model.to(DEVICE), tok, name=f"tiny {family}")
    t, r = 32, 8
    rng = np.random.default_rng(3)
    ids = rng.integers(1000, 1030, size=(2, t))
    ids[:, 0] = tok.cls_token_id
    valid = np.ones((2, t), np.int64)
    valid[1, 25:] = 0
    sentence = (np.arange(t) // 10)[None].repeat(2, 0)
    sentence[:, 0] = -1
    sentence[1, 25:] = -1
    w = Windows(ids * valid, valid, np.full((2, t, 2), -1), sentence, np.full((2, t), -1))
    fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, t, resolution=r, tile_bytes=tile_bytes, backend=backend,
                                device=DEVICE)
    stats, layers = fresh(), []
    add = stats.add_attention_scores
    stats.add_attention_scores = lambda layer, scores, info: (layers.append(layer), add(layer, scores, info))[1]
    Engine(loaded, stats, fresh, tile_bytes=tile_bytes, backoff=False).process(w)
    return stats, layers


def _assert_same_statistics(got: CorpusStats, want: CorpusStats) -> None:
    """Float sums to float rounding, counts equal (float32 models: no pair sits within rounding of 0.3 here)."""
    for name, value in want.acc.items():
        if value.is_floating_point():
            torch.testing.assert_close(got.acc[name], value, rtol=1e-5, atol=1e-5, msg=name)
        else:
            assert torch.equal(got.acc[name], value), name


@pytest.mark.parametrize("backend", ["triton", "numba"])
@pytest.mark.parametrize("family,config", [("llama", {}), ("mistral", {"sliding_window": 12})])
def test_a_decoders_attention_arrives_as_scores_and_equals_its_eager_blocks(family, config, backend):
    """Through the model tap: every layer of a Llama (causal) and a Mistral (a sliding window shorter than
    the window) hands its queries and keys, the model goes on with its own sdpa attention, and every
    statistic equals the eager probabilities' taken block by block (GPU kernels; on the CPU, torch's
    probabilities of each block's attended keys)."""
    if backend == "numba":
        pytest.importorskip("numba")
        if DEVICE != "cpu":
            pytest.skip("the Numba backend runs on the CPU")
    stats, layers = _engine_run(family, Choice("auto", backend), **config)
    assert layers == [0, 1] and stats.backend_record()["fallbacks"] == []
    eager, none = _engine_run(family, "eager", **config)
    assert none == []
    _assert_same_statistics(stats, eager)


def test_run_json_names_the_scores_route_where_the_statistics_take_it():
    """The engine's record of where the attention comes from (run.json's ``attention``) names the scores
    route where the statistics take a recomputable family's scores, and the eager function where not."""
    import copy

    from headsim.model.load import from_pretrained_objects, load_model
    from headsim.model.verify import tiny_model
    from headsim.runs.engine import Engine

    pytest.importorskip("numba")
    tok = copy.deepcopy(load_model().tokenizer)
    model, _ = tiny_model("llama", vocab_size=len(tok), max_position_embeddings=1024, num_hidden_layers=1)
    loaded = from_pretrained_objects(model, tok, name="tiny llama")
    for backend, resolution, route in [("numba", 8, "recomputed from each layer's queries and keys"),
                                       ("eager", 8, None), ("numba", 32, None)]:
        fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, 32, resolution=resolution, backend=backend)  # noqa: B023
        source = Engine(loaded, fresh(), fresh, backoff=False).attention_source()
        assert (route or "the model's own eager attention function") in source.split("; elsewhere")[0], (backend, resolution)


def test_a_mask_other_than_the_described_one_sends_blocks(monkeypatch):
    """Where the family's own mask is not the one the scores would assume, the layer's probabilities come in
    blocks as before (the check is the model's mask, block by block)."""
    from headsim.model import scores

    monkeypatch.setattr(scores.Scores, "allowed", lambda self, rows: self.valid[:, None, None, :].expand(
        -1, 1, rows.stop - rows.start, -1))  # as if the layer were not causal
    # the routing is the subject: whole-window blocks (tiles of a few rows cost minutes in Triton's interpreter)
    stats, layers = _engine_run("llama", Choice("auto", "triton"), tile_bytes=1 << 20)
    assert layers == []
    monkeypatch.undo()
    _assert_same_statistics(stats, _engine_run("llama", "eager", tile_bytes=1 << 20)[0])


def test_a_failing_scores_kernel_falls_back_to_torch_under_auto(monkeypatch):
    from headsim.stats import triton_long

    monkeypatch.setattr(triton_long, "attention_scores", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no kernel today")))
    with pytest.warns(UserWarning, match="statistics backend 'triton' failed .*no kernel today.*continuing with eager"):
        stats, layers = _engine_run("llama", Choice("auto", "triton"))
    assert layers == [0, 1] and stats.backend_record()["ran"] == "eager"  # layer 1 came as scores too: torch took them
    _assert_same_statistics(stats, _engine_run("llama", "eager")[0])
