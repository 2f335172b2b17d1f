"""Long inputs: attention captured in blocks of query rows equals the one-block capture (every
interface family of tests/test_architectures.py, in float64 so that a block's matrix products, which round
like any other shape's, cannot hide a wrong row or mask: 1e-6), blocks arrive in order, cover every row."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from random_windows import assert_matches_reference, to_info
from random_windows import random_batch as random_batch_stats
from reference_stats import binned_reference, log_distance_edges, reference_stats

from headsim.model.arch import ARCHS
from headsim.model.masks import full_keys
from headsim.model.tap import Tap
from headsim.model.verify import random_batch, tiny_model
from headsim.model.load import from_pretrained_objects
from headsim.stats import CorpusStats
from headsim.windows import check_seq_len

ROWS = sorted({a.model_types[0] for a in ARCHS})
FLOAT32_ONLY = {"gemma2", "gemma3_text", "mistral", "dory"}  # their float64 pass is NaN from layer 2 on (whole or tiled alike)


def tolerance(loaded) -> float:
    return 1e-6 if loaded.model.dtype == torch.float64 else 1e-5


@pytest.fixture(scope="module", params=ROWS)
def loaded(request):
    model, _ = tiny_model(request.param)
    if request.param not in FLOAT32_ONLY:
        model = model.double()
    return from_pretrained_objects(model, None, request.param)


def test_blocks_of_query_rows_equal_one_block(loaded):
    if not loaded.arch.interface:
        pytest.skip("attention read from output_attentions (one block)")
    ids, mask = random_batch(3, lengths=(23, 17, 9))
    whole = Tap(loaded, attention=True).run(ids, mask).layers
    tiled = Tap(loaded, attention=True, tile_rows=4).run(ids, mask).layers
    seen: dict[int, list] = {}

    def on_tile(layer, rows, probs, keys):
        assert probs.dtype == loaded.model.dtype  # as the model applied them
        seen.setdefault(layer, []).append((rows, full_keys(probs, keys, 23).float()))

    streamed = Tap(loaded, attention=True, tile_rows=5).run(ids, mask, on_tile=on_tile).layers
    rows = mask.bool()[:, None, :, None].expand(-1, loaded.n_heads, -1, 23)
    for li, cap in whole.items():
        torch.testing.assert_close(tiled[li].attention[rows], cap.attention[rows], rtol=0, atol=tolerance(loaded))
        valid = mask.bool()[:, None, :, None].expand_as(cap.head_outputs)  # padded rows are never read
        scale = float(cap.head_outputs[valid].abs().max())
        torch.testing.assert_close(tiled[li].head_outputs[valid], cap.head_outputs[valid], rtol=0, atol=tolerance(loaded) * scale)
        assert streamed[li].attention is None
        assert [r.start for r, _ in seen[li]] == list(range(0, 23, 5))
        joined = torch.cat([p for _, p in seen[li]], dim=2)
        torch.testing.assert_close(joined[rows], cap.attention[rows], rtol=0, atol=tolerance(loaded))


def test_a_window_past_the_position_limit():
    """An error naming both numbers; a warning naming them for a rotary family, which then runs."""
    from headsim.errors import HeadsimError
    from headsim.extraction import extract

    bert = from_pretrained_objects(tiny_model("bert")[0], None, "bert")
    with pytest.raises(HeadsimError, match=r"^seq_len 80 is longer than this model's position limit of 64 tokens"):
        extract("Some text here. " * 40, bert, seq_len=80)
    llama = from_pretrained_objects(tiny_model("llama")[0], None, "llama")
    assert llama.extrapolates and not bert.extrapolates
    with pytest.warns(UserWarning, match="seq_len 80 is longer than this model's position limit of 64 tokens"):
        assert check_seq_len(80, llama.max_seq_len, llama.extrapolates) == 80


def _binned_run(tile_rows: int | None, resolution: int, t: int = 21, device: str = "cpu", **kwargs):
    rng = np.random.default_rng(11)
    n_layers, n_heads = 2, 3
    batches = [random_batch_stats(rng, 4, n_layers, n_heads, t) for _ in range(3)]
    batches[1]["attention"] = None  # attention skipped for one batch
    settings = {"threshold": 0.3, "top_k_columns": 3, "sim_bins": 40, "sim_range": (-0.2, 1.0), "fraction_bins": 10}
    stats = CorpusStats(n_layers, n_heads, t, resolution=resolution, device=device, **settings, **kwargs)
    for batch in batches:
        info = to_info(batch, device)
        stats.begin_batch(info)
        for layer in range(n_layers):
            if batch["attention"] is not None:
                a = torch.as_tensor(batch["attention"][:, layer], device=device)
                step = t if tile_rows is None else tile_rows
                for start in range(0, t, step):
                    stats.add_attention_block(layer, slice(start, min(start + step, t)), a[:, :, start:start + step], info)
            stats.update_layer(layer, None, torch.as_tensor(batch["head_outputs"][:, layer], device=device), info)
    return stats, reference_stats(batches, n_layers, n_heads, t, **settings), t


@pytest.mark.parametrize("tile_rows", [None, 4])
def test_windows_within_the_resolution_equal_todays_statistics(tile_rows):
    """Blocks of a window that fits the resolution are joined and counted as one matrix: the reference."""
    stats, ref, _ = _binned_run(tile_rows, resolution=512)
    assert not stats.binned
    assert_matches_reference(stats.to_dataset(), ref)


@pytest.mark.parametrize("t,starts", [(21, [0, 5, 9, 13, 17]), (20, [0, 4, 8, 12, 16])])
@pytest.mark.parametrize("tile_bytes", [1, 20000, 1 << 30])
@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_binned_statistics_equal_binning_the_exact_ones(tile_bytes, t, starts, backend):
    """Above the resolution (21 tokens on 5 bins, or 20 on bins of 4 that tiles follow) every
    position-pair statistic is the binned exact one, the rest exact, whether the blocks are one row,
    a few, or the whole window, with the similarity tiles reduced by torch operations or the CPU kernel."""
    stats, ref, t = _binned_run(4, resolution=5, t=t, tile_bytes=tile_bytes, backend=backend)
    assert stats.binned and stats.backend == backend
    assert stats.rows_per_block(4) == {1: 1, 20000: 3, 1 << 30: t}[tile_bytes]
    ds = stats.to_dataset()
    assert ds.sizes["query"] == ds.sizes["key"] == ds.sizes["distance"] == 5
    assert list(ds["query"].values) == starts  # first position of each bin p·5//T
    assert_matches_reference(ds, binned_reference(ref, t, 5))


@pytest.mark.parametrize("t,tile_bytes", [(300, 40000), (256, 1 << 30), (300, 1 << 30)])
def test_the_cpu_kernel_counts_what_the_torch_tiles_count(t, tile_bytes):
    """The Numba tile kernel against the torch tiles on windows of padding, repeats and sentences, with
    a head whose outputs are all zero (no positive maximum) and bins the tiles do not follow (300 on 64):
    every count equal, every sum to float rounding. A window of one tile is read as blocks of 64 rows of
    its upper triangle, which bins cross at 300 tokens."""
    rng = np.random.default_rng(5)
    batch = random_batch_stats(rng, 3, 1, 3, t, attention=False)
    batch["head_outputs"][:, 0, 1] = 0.0
    info = to_info(batch)
    got = {}
    for backend in ("eager", "numba"):
        stats = CorpusStats(1, 3, t, resolution=64, tile_bytes=tile_bytes, backend=backend)
        stats.begin_batch(info)
        stats.update_layer(0, None, torch.as_tensor(batch["head_outputs"][:, 0]), info)
        got[backend] = stats.acc
    assert (stats.rows_per_block(3) == 1) == (tile_bytes == 40000)  # many small tiles, or one
    for name, value in got["eager"].items():
        if value.is_floating_point():
            torch.testing.assert_close(got["numba"][name], value, rtol=1e-5, atol=1e-4, msg=name)
        else:
            assert torch.equal(got["numba"][name], value), name
    assert got["eager"]["location_upper"].sum() > 0


def test_the_cpu_kernel_leaves_torchs_thread_count_as_it_was():
    """Numba's OpenMP pool, started by the first kernel of a process, sets the thread count torch
    shares: the kernel puts torch's back (a run on fewer threads than cores stays on them). In a
    fresh process, where the pool starts."""
    import subprocess
    import sys

    code = ("import torch; torch.set_num_threads(1)\n"
            "import numpy as np\n"
            "from headsim.stats import CorpusStats\n"
            "s = CorpusStats(1, 2, 16, resolution=8, backend='numba')\n"
            "from headsim.stats import cpu_kernels; cpu_kernels.set_threads(1)\n"
            "print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1"]


def test_a_failing_cpu_kernel_falls_back_under_auto_and_stops_a_named_run(monkeypatch):
    """A kernel failure adds nothing: under ``auto`` the step is redone by the torch tiles (warned,
    recorded) and equals an eager run; with ``--backend numba`` it is a one-line error naming the fix."""
    from headsim.errors import HeadsimError
    from headsim.stats import cpu_kernels

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(cpu_kernels, "reduce_tile", broken)
    with pytest.warns(UserWarning, match="statistics backend 'numba' failed .*no kernel today.*continuing with eager"):
        stats, _, _ = _binned_run(4, resolution=5)
    assert stats.backend_record()["ran"] == "eager" and "numba -> eager" in stats.backend_record()["fallbacks"][0]
    eager, _, _ = _binned_run(4, resolution=5, backend="eager")
    for name, value in eager.acc.items():
        assert torch.equal(stats.acc[name], value), name
    with pytest.raises(HeadsimError, match="statistics backend 'numba' failed after 0 windows: RuntimeError: no kernel today"):
        _binned_run(4, resolution=5, backend="numba")


def test_binned_state_round_trips_and_other_backends_are_refused():
    from headsim.errors import HeadsimError

    stats, _, t = _binned_run(7, resolution=8)
    assert stats.backend_record() == {"requested": "auto", "chosen": "numba", "ran": "numba", "fallbacks": []}
    assert CorpusStats(2, 3, t, resolution=t).backend == "numba"  # within the resolution: one tile
    again = CorpusStats.from_state_dict(stats.state_dict())
    assert again.binned and again.resolution == 8
    for name in stats.acc:
        assert torch.equal(again.acc[name], stats.acc[name]), name
    with pytest.raises(HeadsimError, match="statistics backend 'compiled' does not compute windows longer than the resolution"):
        CorpusStats(2, 3, t, resolution=8, backend="compiled")


def test_long_runs_hand_free_memory_back_after_every_layer(monkeypatch, tokenizer):
    """An engine of windows above the resolution hands the free arena memory back after every layer
    (the small blocks torch's and Numba's threads free stay in their arenas otherwise); one of windows
    within it leaves malloc alone. On glibc the call takes."""
    import platform

    from headsim.runs import engine as engine_module
    from headsim.windows import Windows

    trims = []
    monkeypatch.setattr(engine_module, "release_free_memory", lambda: trims.append(1) or True)
    model, _ = tiny_model("bert", vocab_size=len(tokenizer))
    loaded = from_pretrained_objects(model, tokenizer, "bert")
    t = 16
    ids = np.random.default_rng(0).integers(1000, 3000, size=(2, t))
    w = Windows(ids, np.ones((2, t), np.int64), np.full((2, t, 2), -1), np.zeros((2, t), np.int64), np.full((2, t), -1))
    for resolution, binned in ((16, False), (8, True)):
        trims.clear()
        fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, t, resolution=resolution)
        engine_module.Engine(loaded, fresh(), fresh).process(w)
        assert len(trims) == (loaded.n_layers if binned else 0)
    if platform.libc_ver()[0] == "glibc":
        from headsim.memory import _glibc, release_free_memory

        assert _glibc() is not None
        release_free_memory()  # returns whether memory was released: either answer is right


def test_the_default_budget_is_free_memory_on_top_of_what_the_process_holds(tiny_bert, monkeypatch):
    """A process that already holds much (a notebook, a test worker) still gets half the free memory
    for its run: the default budget adds it to the resident memory the plan counts."""
    import types

    import psutil

    from headsim.memory import default_max_memory, plan_memory

    held, free = 10 << 30, 2 << 30
    monkeypatch.setattr(psutil, "Process", lambda *a: types.SimpleNamespace(memory_info=lambda: types.SimpleNamespace(rss=held)))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=free))
    budget = default_max_memory(torch.device("cpu"))
    assert budget == held + free // 2
    plan = plan_memory(tiny_bert, 32, 512, budget)
    assert plan.fixed >= held and plan.batch_size >= 1


def test_a_budget_that_cannot_hold_one_window_stops_at_once(tiny_bert, tmp_path):
    from headsim.runs.analyze import analyze
    from headsim.errors import HeadsimError

    with pytest.raises(HeadsimError, match=r"^--max-memory 1 MiB cannot hold one window of 32 tokens"):
        analyze(tiny_bert, "default", seq_len=32, max_memory="1MB", out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(HeadsimError, match=r"^--max-memory 1 KiB cannot hold"):  # named as given, not "0 MiB"
        analyze(tiny_bert, "default", seq_len=32, max_memory="1KB", out=tmp_path / "run", progress=False)
    with pytest.raises(HeadsimError, match="--max-memory 'lots' is not an amount of memory"):
        analyze(tiny_bert, "default", seq_len=32, max_memory="lots", progress=False)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (run on a lent device: see benchmarks/README.md)"))])
def test_2048_tokens_of_a_grouped_query_decoder_equal_a_float64_recomputation(tokenizer, device):
    """One 2,048-token window of a tiny Llama (4 query heads on 2 key/value heads), binned on 256
    positions, its statistics taken on ``device``: attention statistics against the eager model's own
    probabilities in float64 on the CPU, pair statistics against S = Z·Zᵀ from Z = A·V in float64 (a
    pair may flip only within 2e-5 of the threshold, float32 against float64)."""
    import copy

    from headsim.runs.engine import Engine
    from headsim.model.verify import eager_attentions, values
    from headsim.windows import Windows

    tok = copy.deepcopy(tokenizer)
    tok.bos_token = tok.cls_token
    model, eager = tiny_model("llama", vocab_size=len(tok), max_position_embeddings=4096, num_hidden_layers=1)
    loaded = from_pretrained_objects(model, tok, name="tiny-llama")
    t, r = 2048, 256
    rng = np.random.default_rng(3)
    ids = rng.integers(1000, 3000, size=(1, t))  # repeated ids among 2,000
    ids[0, 0] = tok.cls_token_id
    sentence = (np.arange(t) // 50)[None].copy()
    sentence[0, 0] = -1
    w = Windows(ids, np.ones((1, t), np.int64), np.full((1, t, 2), -1), sentence, np.full((1, t), -1))
    on = loaded if device == "cpu" else from_pretrained_objects(copy.deepcopy(model).to(device), tok, name="tiny-llama")
    fresh = lambda: CorpusStats(on.n_layers, on.n_heads, t, resolution=r, tile_bytes=1 << 20, device=on.device)
    stats = fresh()
    engine = Engine(on, stats, fresh, tile_bytes=1 << 20, backoff=False)
    assert engine._tap.rows_per_tile(1, on.n_heads, t) < t  # the window really is cut into blocks
    engine.process(w)
    assert stats.backend == ("triton" if device == "cuda" else "numba")  # the GPU's tile kernels, the CPU's
    ds = stats.to_dataset()
    ids_t, mask_t = torch.as_tensor(ids), torch.ones(1, t, dtype=torch.long)
    attentions = eager_attentions(loaded, eager, ids_t, mask_t)
    vals = values(loaded, ids_t, mask_t)
    edges = log_distance_edges(t, r)
    distance_bin = torch.as_tensor(np.searchsorted(edges, np.arange(t), side="right") - 1)
    assert ds["distance"].values.tolist() == edges[:-1]
    upper = torch.ones(t, t, dtype=torch.bool).triu(1)
    group = loaded.n_heads // vals[0].shape[1]

    def binned(x):  # [H, T, T] → [H, R, R]: bins p·R//T are runs of T/R positions
        return x.reshape(x.shape[0], r, t // r, r, t // r).sum(dim=(2, 4))

    for layer in range(loaded.n_layers):
        a = attentions[layer][0]  # [H, T, T] float64
        np.testing.assert_allclose(ds["attn_sum"].values[layer], binned(a).numpy(), atol=2e-4)
        z = a @ vals[layer][0].repeat_interleave(group, dim=0)  # [H, T, d]
        s = z @ z.transpose(-1, -2)
        s.diagonal(dim1=-2, dim2=-1).zero_()
        s = s / s.amax(dim=(-1, -2), keepdim=True)
        high = (s > 0.3) & upper
        near = ((s - 0.3).abs() < 2e-5) & upper
        slack = near.sum(dim=(-1, -2)).numpy()
        got = ds["n_pairs"].values[layer]
        assert slack.sum() <= 0.01 * got.sum() + 2
        assert (np.abs(got - high.sum(dim=(-1, -2)).numpy()) <= slack).all()
        assert (got > 0).all()
        location = binned(high.double())
        np.testing.assert_array_less(np.abs(ds["location_counts"].values[layer] - (location + location.transpose(1, 2)).numpy()).sum(axis=(1, 2)),
                                     2 * slack + 1)
        d = torch.zeros(loaded.n_heads, r, dtype=torch.float64)
        hi, qi, ki = high.nonzero(as_tuple=True)
        d.index_put_((hi, distance_bin[ki - qi]), torch.ones(len(hi), dtype=torch.float64), accumulate=True)
        assert (np.abs(ds["distance_hist"].values[layer] - d.numpy()).sum(axis=1) <= slack).all()
        sums = torch.zeros(loaded.n_heads, dtype=torch.float64).index_add_(0, hi, (ki - qi).double()).numpy()
        assert (np.abs(ds["distance_sum"].values[layer] - sums) <= slack * t).all()
        same_id = torch.as_tensor(ids[0][:, None] == ids[0][None, :])
        assert (np.abs(ds["n_repeat"].values[layer] - (high & same_id).sum(dim=(-1, -2)).numpy()) <= slack).all()


@pytest.mark.parametrize("t,r", [(21, 5), (2048, 256), (8192, 512), (32768, 512), (600, 512), (64, 64), (40, 64)])
def test_distance_bins_keep_short_distances_exact_and_space_the_rest_logarithmically(t, r):
    """R bins covering 0..T−1, none empty; one per distance up to m, then a constant ratio between
    consecutive edges (within rounding), m the fewest exact distances that keep every bin a token wide;
    the same edges as the plain definition of the reference; one bin per distance when R ≥ T."""
    from headsim.stats.batch import distance_bins, distance_edges

    edges = distance_edges(t, r)
    width = np.diff(edges)
    assert edges[0] == 0 and edges[-1] == t and len(width) == min(r, t) and (width >= 1).all()
    assert edges.tolist() == log_distance_edges(t, r) if r < t else edges.tolist() == list(range(t + 1))
    bins = distance_bins(t, r)
    assert (np.diff(bins) >= 0).all() and bins[0] == 0 and bins[-1] == len(width) - 1
    assert all(edges[bins[d]] <= d < edges[bins[d] + 1] for d in range(t))
    if r < t:
        m = int(np.argmax(width > 1))
        assert (width[:m] == 1).all() and m < r
    if r < t and t >= 2048:  # geometric where rounding no longer shows
        q = edges[-1] / edges[-2]
        tail = edges[m + 1:] / edges[m:-1]
        assert np.allclose(tail[len(tail) // 2:], q, rtol=0.02)


@pytest.mark.parametrize("family", ["mistral", "gemma2"])
def test_blocks_trimmed_to_their_live_keys_equal_the_untrimmed_blocks(family, tokenizer):
    """Sliding window (5 tokens) + causal + right padding, blocks of 4 rows: each block the tap runs
    on its live key columns only equals the block run on every key, whose dropped columns are exactly
    0 (no live key dropped, no block mis-offset); head outputs agree; the binned corpus statistics of
    an engine with trimming equal those without."""
    import copy

    from headsim.runs.engine import Engine
    from headsim.windows import Windows

    tok = copy.deepcopy(tokenizer)
    tok.bos_token = tok.cls_token
    loaded = from_pretrained_objects(tiny_model(family, vocab_size=len(tok))[0], tok, family)
    ids, mask = random_batch(5, lengths=(23, 17, 9))
    t = ids.shape[1]
    got: dict[bool, dict] = {}
    for trim in (True, False):
        seen = got[trim] = {}
        tap = Tap(loaded, attention=True, tile_rows=4, trim_keys=trim)
        caps = tap.run(ids, mask, on_tile=lambda layer, rows, probs, keys: seen.setdefault(layer, []).append(
            (rows, keys, probs.clone()))).layers
        seen["z"] = {li: cap.head_outputs for li, cap in caps.items()}
    rows_valid = mask.bool()[:, None, :, None]
    for li in range(loaded.n_layers):
        trimmed, full = got[True][li], got[False][li]
        assert [r for r, _, _ in trimmed] == [r for r, _, _ in full]
        assert all((k.start, k.stop) == (0, t) for _, k, _ in full)
        assert any(k.stop < t for _, k, _ in trimmed)  # causal: later keys cut
        if li == 0:  # a sliding-window layer in both families: earlier keys cut too
            assert any(k.start > 0 for _, k, _ in trimmed)
        for (rows, keys, a), (_, _, b) in zip(trimmed, full):
            valid = rows_valid[:, :, rows].expand(-1, b.shape[1], -1, t)
            torch.testing.assert_close(full_keys(a, keys, t)[valid], b[valid], rtol=0, atol=1e-6)
            outside = torch.ones(t, dtype=torch.bool)
            outside[keys] = False
            assert bool((b[..., outside][valid[..., outside]] == 0).all())
        torch.testing.assert_close(got[True]["z"][li][rows_valid.expand_as(got[True]["z"][li])],
                                   got[False]["z"][li][rows_valid.expand_as(got[False]["z"][li])], rtol=0, atol=1e-5)

    n, r = 48, 8  # binned statistics (48 tokens on 8 bins), one window right-padded
    rng = np.random.default_rng(4)
    w_ids = rng.integers(3, 90, size=(2, n))
    w_mask = np.ones((2, n), np.int64)
    w_mask[1, 37:] = 0
    sentence = np.where(w_mask == 1, np.arange(n)[None] // 6, -1)
    w = Windows(w_ids * w_mask, w_mask, np.full((2, n, 2), -1), sentence, np.where(w_mask == 1, 0, -1))
    results = []
    for trim, rows in ((False, n), (True, 3), (True, 8)):  # one block; blocks within one bin of 6; across two
        fresh = lambda: CorpusStats(loaded.n_layers, loaded.n_heads, n, resolution=r)
        stats = fresh()
        engine = Engine(loaded, stats, fresh)
        engine._tap.trim_keys, engine._tap.tile_rows = trim, rows
        engine.process(w)
        assert stats.binned
        results.append(stats.to_dataset())
    for other in results[1:]:
        for name, var in results[0].data_vars.items():
            np.testing.assert_allclose(np.asarray(other[name].values, dtype=np.float64), np.asarray(var.values, dtype=np.float64),
                                       rtol=1e-5, atol=1e-5, err_msg=name)


def test_blocks_are_cache_sized_on_a_cpu_and_take_the_whole_budget_on_an_accelerator(tiny_bert, monkeypatch):
    """A block of attention rows holds at most BLOCK_CACHE_BYTES on a CPU, the whole block budget on an
    accelerator (fewer kernel launches); rows named by the caller win on both."""
    from headsim.model import tap as tap_module

    tap = Tap(tiny_bert, attention=True, tile_bytes=1 << 30)
    row = 8 * 4096 * 4  # one query row of 8 heads over 4,096 keys, float32
    assert tap.rows_per_tile(1, 8, 4096) == tap_module.BLOCK_CACHE_BYTES // row
    monkeypatch.setattr(type(tiny_bert), "device", property(lambda self: torch.device("cuda")))
    assert tap.rows_per_tile(1, 8, 4096) == (1 << 30) // row
    assert Tap(tiny_bert, attention=True, tile_rows=3).rows_per_tile(1, 8, 4096) == 3


def test_a_layers_masks_are_built_on_the_keys_the_first_layer_found_live(tokenizer, monkeypatch):
    """One mask serves every layer of a pass: its blocks are built on all keys once (the first layer
    finds the live ones), in every later layer on the live keys alone, so the mask's work follows the
    pairs attended and not ``rows × T`` per layer; the blocks equal those of an untrimmed pass."""
    import copy

    import transformers.masking_utils as masking

    tok = copy.deepcopy(tokenizer)
    tok.bos_token = tok.cls_token
    loaded = from_pretrained_objects(tiny_model("mistral", vocab_size=len(tok))[0], tok, "mistral")
    ids, mask = random_batch(5, lengths=(40, 33))
    t = ids.shape[1]
    built: list[int] = []
    real = masking.eager_mask
    monkeypatch.setattr(masking, "eager_mask", lambda **kw: built.append(kw["kv_length"]) or real(**kw))
    seen: dict[int, list] = {}
    Tap(loaded, attention=True, tile_rows=8).run(ids, mask, on_tile=lambda layer, rows, probs, keys: seen.setdefault(
        layer, []).append((rows, keys, probs.clone())))
    blocks = -(-t // 8)
    assert loaded.n_layers >= 2 and built[:blocks] == [t] * blocks  # the first layer: every key
    widths = [k.stop - k.start for _, k, _ in seen[1]]
    assert built[blocks:] == widths * (loaded.n_layers - 1) and sum(widths) < blocks * t / 2  # later: the live keys
    monkeypatch.setattr(masking, "eager_mask", real)
    full: dict[int, list] = {}
    Tap(loaded, attention=True, tile_rows=8, trim_keys=False).run(
        ids, mask, on_tile=lambda layer, rows, probs, keys: full.setdefault(layer, []).append(probs.clone()))
    for layer in seen:
        for (_, keys, a), b in zip(seen[layer], full[layer]):
            torch.testing.assert_close(full_keys(a, keys, t), b, rtol=0, atol=1e-6)
