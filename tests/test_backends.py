"""Every statistics backend (headsim.stats.backends) against the naive reference, and how one is chosen.

The same random windows (padding, sentences, repeated tokens, heads with exactly tied attention
columns) go through each backend, by captured queries and keys (the attention computed in the
backend) and, for one batch, by head outputs alone. Counts must equal the reference's up to what the
pairs within float32 rounding of the threshold or a bin edge can change (counted from the head
outputs, tests/agreement.py: none for these windows), sums agree to float tolerance. The Triton
kernels run in Triton's interpreter on a CPU (``TRITON_INTERPRET=1``, set before Triton is imported);
with CUDA every backend runs on the GPU.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

from conftest import lee_texts  # noqa: E402
from agreement import RecordingStats, assert_statistics_agree, undecided  # noqa: E402
from random_windows import assert_matches_reference, random_batch, to_info  # noqa: E402
from reference_stats import reference_stats  # noqa: E402

from headsim.errors import HeadsimError  # noqa: E402
from headsim.model.plain import attention_probs  # noqa: E402
from headsim.stats import CorpusStats, schema  # noqa: E402
from headsim.stats.backends import BACKENDS, Choice, choose_backend  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
L, H, T = 2, 4, 20  # 20 positions: not a power of two, so the kernels' masks are exercised
SETTINGS = {"threshold": 0.3, "top_k_columns": 3, "sim_bins": 40, "sim_range": (-0.2, 1.0), "fraction_bins": 10}


def _available(name: str) -> None:
    ok, reason = BACKENDS[name].available(torch.device(DEVICE))
    if not ok:
        pytest.skip(f"backend {name} cannot run here: {reason}")


@pytest.fixture(scope="module")
def windows():
    """Three batches of 6 windows with captured queries and keys; the last one without attention."""
    rng = np.random.default_rng(11)
    batches = [random_batch(rng, 6, L, H, T, attention=False) for _ in range(3)]
    for i, batch in enumerate(batches):
        q, k = (torch.as_tensor(rng.normal(size=(6, L, H, T, 8)), dtype=torch.float32) for _ in range(2))
        q[:, :, 0] = 0.0  # head 1 attends uniformly: every column sum tied, settled from exact sums
        if i < 2:
            valid = torch.as_tensor(batch["valid"])
            batch["qk"] = q, k
            batch["attention"] = torch.stack([attention_probs(q[:, l], k[:, l], valid) for l in range(L)], dim=1).numpy()
    ref = reference_stats(batches, L, H, T, **SETTINGS)
    layout = schema.Layout(L, H, T, SETTINGS["sim_bins"], SETTINGS["sim_range"], SETTINGS["fraction_bins"])
    ref_ds = schema.build_dataset({v.name: ref[v.name] for v in schema.VARIABLES}, layout,
                                  threshold=SETTINGS["threshold"], top_k_columns=SETTINGS["top_k_columns"])
    return batches, ref, ref_ds


def run(batches, backend, log: list | None = None, chunk_windows: int = 4) -> CorpusStats:
    """Feed ``batches`` through statistics on ``backend`` in steps of ``chunk_windows`` windows (a shorter last step)."""
    stats = RecordingStats(L, H, T, chunk_windows=chunk_windows, backend=backend, device=DEVICE, log=[] if log is None else log,
                           **SETTINGS)
    for batch in batches:
        info = to_info(batch, DEVICE)
        stats.begin_batch(info)
        for layer in range(L):
            z = torch.as_tensor(batch["head_outputs"][:, layer], device=DEVICE)
            if "qk" in batch:
                q, k = (x[:, layer].to(DEVICE) for x in batch["qk"])
                stats.update_captured(layer, q, k, z, info)
            else:
                stats.update_layer(layer, None, z, info)
    return stats


def check(stats: CorpusStats, log: list, windows) -> None:
    """``stats`` agree with the reference up to what float rounding of the head outputs' similarity
    can change; eager on the CPU (the reference's own float32 similarity) exactly in every count."""
    _, ref, ref_ds = windows
    ds = stats.to_dataset()
    und = undecided(log, log, L, SETTINGS["threshold"], SETTINGS["sim_bins"], SETTINGS["sim_range"])
    assert int(ref_ds["n_pairs"].sum()) > 0 and int(ref_ds["n_repeat"].sum()) > 0 and ref["_column_ties"] > 0
    assert_statistics_agree(ds, ref_ds, und, rtol=1e-5, atol=1e-6, max_undecided=0.01)
    if stats.backend in ("eager", "numba") and DEVICE == "cpu":
        assert_matches_reference(ds, ref)


def test_numba_float32_sums_moved_to_float64_mid_batch_match_the_reference(windows, monkeypatch):
    """The Numba backend's per-position sums (similarity, attention) held in float32 for a few windows
    and moved to float64 in the middle of a batch (a step of 4 windows, then one of 2) agree with the
    reference as the unmoved ones do."""
    from headsim.stats import sums

    _available("numba")
    moved = []
    spill = sums.WindowSum.adding

    def adding(self, n):
        wide = self._wide is not None
        out = spill(self, n)
        moved.append(not wide and self._wide is not None)
        return out

    monkeypatch.setattr(sums, "SPILL_WINDOWS", 3)
    monkeypatch.setattr(sums.WindowSum, "adding", adding)
    log: list = []
    stats = run(windows[0], "numba", log)
    assert any(moved)
    check(stats, log, windows)


def test_window_sum_moves_to_float64_before_it_holds_too_many_windows(monkeypatch):
    """A WindowSum is float32 for at most SPILL_WINDOWS windows at a time (one larger step alone), its
    total the float64 sum of what was added."""
    from headsim.stats import sums

    monkeypatch.setattr(sums, "SPILL_WINDOWS", 4)
    total, want = sums.WindowSum(np.zeros(3, np.float32)), np.zeros(3)
    rng = np.random.default_rng(0)
    for n in (1, 2, 1, 5, 1, 3):
        x = rng.random((n, 3)).astype(np.float32)
        total.adding(n)
        assert total._held <= max(4, n)
        total.narrow += x.sum(axis=0)
        want += x.astype(np.float64).sum(axis=0)
    assert total.total().dtype == torch.float64
    np.testing.assert_allclose(total.total().numpy(), want, rtol=1e-6)
    assert sums.WindowSum(np.zeros(3, np.float32)).total().dtype == torch.float32
    assert sums.WindowSum(np.zeros(3)).adding(100).dtype == np.float64


@pytest.mark.parametrize("name", list(BACKENDS))
def test_backend_matches_the_reference(windows, name):
    _available(name)
    log: list = []
    stats = run(windows[0], name, log)
    assert stats.backend_record() == {"requested": name, "chosen": name, "ran": name, "fallbacks": []}
    check(stats, log, windows)


def test_numba_upper_triangle_in_uneven_row_blocks_matches_the_reference(windows, monkeypatch):
    """The Numba backend builds a window's ``S`` as blocks of rows of its upper triangle: blocks of 8
    rows (20 positions: 8, 8 and 4) give every statistic the whole matrix gives."""
    from headsim.stats import tiled

    _available("numba")
    monkeypatch.setattr(tiled, "UPPER_ROWS", 8)
    built = []
    upper = tiled._upper_blocks
    monkeypatch.setattr(tiled, "_upper_blocks", lambda zf, buffer: built.append(upper(zf, buffer)) or built[-1])
    log: list = []
    stats = run(windows[0], "numba", log)
    assert built and all([(a, tuple(s.shape[2:])) for a, s in blocks] == [(0, (8, 20)), (8, (8, 12)), (16, (4, 4))]
                         for blocks in built)
    check(stats, log, windows)


def test_numba_reduces_short_steps_together_and_matches_the_reference(windows, monkeypatch):
    """Steps of one window each: the Numba backend reduces the pairs of consecutive steps together (groups
    of 3 of a batch's 6 windows, at most ``PAIR_GROUP_WINDOWS`` = 4), from the layer's own head outputs
    (captured queries and keys) and from head outputs handed in (the last batch), with every statistic the
    reference's."""
    from headsim.stats import tiled
    from headsim.stats.backends import numba_cpu

    _available("numba")
    monkeypatch.setattr(numba_cpu, "PAIR_GROUP_WINDOWS", 4)
    windows_per_call = []
    add = tiled.FusedPairs.add
    monkeypatch.setattr(tiled.FusedPairs, "add",
                        lambda self, z, bt, start: windows_per_call.append((start, z.shape[0], bt.valid.shape[0]))
                        or add(self, z, bt, start))
    log: list = []
    stats = run(windows[0], "numba", log, chunk_windows=1)
    assert windows_per_call == [(0, 3, 3), (3, 3, 3)] * (L * len(windows[0]))
    check(stats, log, windows)


def test_joined_views_adjacent_parts_and_copies_others():
    """``joined``: parts that lie one after another in one buffer come back as a view of it; any others
    as a copy; either way equal to their concatenation."""
    from headsim.stats.backends.numba_cpu import joined

    whole = torch.arange(5 * 3 * 2, dtype=torch.float32).view(5, 3, 2)
    parts = [whole[0:2], whole[2:3], whole[3:5]]
    view = joined(parts)
    assert torch.equal(view, whole) and view.data_ptr() == whole.data_ptr()
    for others in ([whole[0:2], whole[3:5]], [whole[2:3], whole[0:2]], [whole[:, :2][0:2], whole[:, :2][2:4]]):
        out = joined(others)
        assert torch.equal(out, torch.cat(others))
        out.zero_()
        assert whole.flatten()[1:].ne(0).all()  # a copy: the buffer is untouched


def test_pair_groups_cover_the_steps_in_order_in_equal_runs():
    """``_groups`` runs consecutive steps together, every step once and in order, each run at most the
    windows asked for unless it is one longer step, the runs about equal."""
    from headsim.stats.backends.numba_cpu import _groups

    def steps(sizes):
        starts = np.cumsum([0, *sizes])
        return [(slice(int(a), int(b)),) for a, b in zip(starts, starts[1:])]

    for sizes, windows, expected in (([1] * 32, 9, [8, 8, 8, 8]), ([11, 11, 10], 8, [11, 11, 10]),
                                     ([1] * 5, 2, [2, 2, 1]), ([1] * 6, 64, [6]), ([2, 1, 1, 3, 1], 4, [4, 4])):
        got = _groups(steps(sizes), windows)
        assert [s for g in got for s in g] == steps(sizes)
        lengths = [g[-1][0].stop - g[0][0].start for g in got]
        assert lengths == expected, (sizes, windows, lengths)
        assert all(n <= windows or len(g) == 1 for n, g in zip(lengths, got))


def _break(monkeypatch, name: str) -> None:
    """Make every step of backend ``name`` fail as a compiler or kernel failure would (``numba:KERNEL``:
    that one of the Numba backend's kernels)."""
    def fail(*args, **kwargs):
        raise RuntimeError("injected failure")

    if name == "compiled":
        from headsim.stats import fused

        monkeypatch.setattr(fused, "compiled", lambda fn: fail)
    elif name.startswith("numba"):
        from headsim.stats import cpu_kernels

        monkeypatch.setattr(cpu_kernels, name.partition(":")[2] or "reduce_tile", fail)
    else:
        from headsim.stats import triton_kernels

        monkeypatch.setattr(triton_kernels, "similarity_pass", fail)


@pytest.mark.parametrize("kernel", ["numba:reduce_upper", "numba:reduce_attention", "compiled", "triton"])
def test_a_named_backend_that_fails_is_an_error(windows, kernel, monkeypatch):
    name = kernel.partition(":")[0]
    _available(name)
    _break(monkeypatch, kernel)
    with pytest.raises(HeadsimError, match=f"statistics backend '{name}' failed after 0 windows") as err:
        run(windows[0], name)
    assert "--backend eager" in err.value.fix and "injected failure" in err.value.problem


@pytest.mark.parametrize("kernel", ["numba:reduce_upper", "numba:reduce_attention", "compiled", "triton"])
def test_auto_falls_back_to_eager_and_records_it(windows, kernel, monkeypatch):
    """Under ``auto`` a failing backend hands the step to eager (the failed step added nothing):
    the numbers are the eager ones, and the switch is recorded with its reason."""
    name = kernel.partition(":")[0]
    _available(name)
    _break(monkeypatch, kernel)
    log: list = []
    with pytest.warns(UserWarning, match=f"statistics backend '{name}' failed"):
        stats = run(windows[0], Choice("auto", name), log)
    record = stats.backend_record()
    assert record["requested"] == "auto" and record["chosen"] == name and record["ran"] == "eager"
    assert len(record["fallbacks"]) == 1 and record["fallbacks"][0].startswith(f"{name} -> eager after 0 windows")
    assert "injected failure" in record["fallbacks"][0]
    check(stats, log, windows)


def test_auto_chooses_triton_on_cuda_where_it_runs_and_numba_on_a_cpu_where_it_is_installed(monkeypatch):
    from headsim.stats import cpu_kernels
    from headsim.stats.backends import kernels

    assert choose_backend("auto", "cpu") == Choice("auto", "numba")  # even where Triton's interpreter could run
    assert choose_backend("auto", "cpu", binned=True) == Choice("auto", "numba")
    for works, want in ((True, "triton"), (False, "eager")):
        monkeypatch.setattr(kernels.Triton, "available", classmethod(lambda cls, device, ok=works: (ok, "no")))
        assert choose_backend("auto", torch.device("cuda")) == Choice("auto", want)
    assert choose_backend("auto", torch.device("cuda"), binned=True) == Choice("auto", "eager")
    assert choose_backend("eager", torch.device("cuda")) == Choice("eager", "eager")
    with pytest.raises(HeadsimError, match="'numba' cannot run on cuda: the Numba kernel runs on the CPU"):
        choose_backend("numba", torch.device("cuda"))
    monkeypatch.setattr(cpu_kernels, "AVAILABLE", False)
    monkeypatch.setattr(cpu_kernels, "MISSING", "numba is not installed (pip install numba)")
    assert choose_backend("auto", "cpu") == Choice("auto", "eager")
    with pytest.raises(HeadsimError, match=r"'numba' cannot run on cpu: numba is not installed \(pip install numba\)"):
        choose_backend("numba", "cpu")


def test_a_named_backend_that_cannot_run_is_refused_at_once(monkeypatch):
    from headsim.stats.backends import kernels

    monkeypatch.setattr(kernels.Triton, "available", classmethod(lambda cls, device: (False, "Triton is not installed")))
    with pytest.raises(HeadsimError, match="'triton' cannot run on cpu: Triton is not installed") as err:
        CorpusStats(1, 2, 8, backend="triton")
    assert "--backend auto" in err.value.fix
    with pytest.raises(HeadsimError, match="unknown statistics backend 'fast'"):
        CorpusStats(1, 2, 8, backend="fast")


def test_analyze_records_the_backend_and_refuses_one_that_cannot_run(tiny_bert, tmp_path, monkeypatch):
    import headsim.runs.analyze
    from headsim.runs.spec import requested_backend
    from headsim.stats.backends import kernels

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(lee_texts(2)), encoding="utf-8")
    meta = headsim.runs.analyze.analyze(tiny_bert, str(corpus), windows=4, seq_len=32, backend="eager", progress=False).meta
    assert meta["statistics_backend"] == {"requested": "eager", "chosen": "eager", "ran": "eager", "fallbacks": []}
    assert "fused" not in meta
    # --resume takes the backend the run asked for (older runs: fused → compiled)
    assert requested_backend(meta) == "eager"
    assert requested_backend({"fused": True}) == "compiled" and requested_backend({}) == "auto"
    monkeypatch.setattr(kernels.Triton, "available", classmethod(lambda cls, device: (False, "no Triton")))
    with pytest.raises(HeadsimError, match="'triton' cannot run"):
        headsim.runs.analyze.analyze(tiny_bert, str(corpus), windows=4, seq_len=32, backend="triton", out=tmp_path / "run",
                                 progress=False)
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_resume_keeps_the_backend_the_run_asked_for(tiny_bert, tmp_path):
    import json

    from headsim.runs.analyze import analyze

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(lee_texts(4)), encoding="utf-8")
    run_dir = tmp_path / "run"

    def stop(done, total):
        if done >= 8:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        analyze(tiny_bert, str(corpus), windows=12, out=run_dir, seq_len=32, batch_size=4, checkpoint_every=4,
                backend="eager", progress=stop)
    started = json.loads((run_dir / "run.json").read_text())
    assert not started["complete"] and started["statistics_backend"] == {"requested": "eager", "chosen": "eager"}
    meta = analyze(tiny_bert, str(corpus), out=run_dir, seq_len=32, resume=True, progress=False).meta
    assert meta["complete"] and meta["windows"] == 12
    assert meta["statistics_backend"] == {"requested": "eager", "chosen": "eager", "ran": "eager", "fallbacks": []}


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("k", [0, 3, 7, 9])
def test_the_numba_attention_reduction_equals_torchs(k, parallel, monkeypatch):
    """The Numba backend's reduction of a step's attention gives what the torch reduction gives: column
    sums (to float32 rounding of another order), the same top columns among the valid keys (exact ties,
    in uniform heads, to the smaller key; near-ties ranked from float64 sums), the zeroed sum (exact zeros
    where every window's column was zeroed), the top columns' attention summed at their positions and
    the diagonal sums; a second call adds to the first."""
    from headsim.stats import cpu_kernels
    from headsim.stats.attention import reduce_attention
    from headsim.stats.batch import batch_tensors

    _available("numba")
    monkeypatch.setattr(cpu_kernels, "PARALLEL_ENTRIES", 0 if parallel else 1 << 40)
    g = torch.Generator().manual_seed(k)
    b, h, t = 5, 3, 9
    batch = random_batch(np.random.default_rng(k), b, 1, h, t, min_len=t)
    batch["valid"][1, 6:] = False  # a padded window (k = 7 reaches past its valid keys)
    bt = batch_tensors(to_info(batch))
    a = torch.softmax(torch.randn(b, h, t, t, generator=g), dim=-1)
    a[:, 0] = 1.0 / t  # head 0 attends uniformly: every column sum tied
    a[2, 1, :, 4] = a[2, 1, :, 5]  # two equal columns elsewhere
    want = reduce_attention(a.clone(), bt, k)
    zeroed, removed = np.zeros((h, t, t), np.float32), np.zeros((h, t, t), np.float32)
    first, rest = (reduce_attention(a[w].clone(), bt.select(w), k, kernel=lambda x, valid, top_k: cpu_kernels.reduce_attention(
        x, valid, top_k, zeroed, removed)) for w in (slice(0, 2), slice(2, b)))
    got_sums, got_top = torch.cat([first.column_sums, rest.column_sums]), torch.cat([first.top, rest.top])
    torch.testing.assert_close(got_sums, want.column_sums, rtol=1e-6, atol=1e-7)
    valid = bt.valid[:, None, :].expand(b, h, t)
    for w in range(b):
        for head in range(h):
            mine, theirs = (set(x[w, head].tolist()) & set(valid[w, head].nonzero()[:, 0].tolist()) for x in (got_top, want.top))
            assert mine == theirs, (w, head)
    assert set(got_top[0, 0].tolist()) == set(range(min(k, t)))  # exact ties: the smaller keys
    want_removed = torch.zeros(h, t, t)
    for w in range(b):
        for head in range(h):
            want_removed[head][:, want.top[w, head]] += want.columns[w, head]
    torch.testing.assert_close(torch.from_numpy(zeroed), want.zeroed_sum, rtol=1e-6, atol=1e-6)
    assert torch.equal(torch.from_numpy(zeroed)[0, :, :k], torch.zeros(t, min(k, t)))
    torch.testing.assert_close(torch.from_numpy(removed), want_removed, rtol=1e-6, atol=1e-6)
    for mine, other, theirs in zip(first.diagonals, rest.diagonals, want.diagonals):
        assert mine.dtype == torch.float64
        torch.testing.assert_close(mine + other, theirs, rtol=1e-12, atol=1e-12)


def test_the_numba_anchor_counts_equal_torchs():
    """The Numba backend's anchor counts (Fig 11) of a step equal the torch ones: the anchor is the token id in
    most high-similarity pairs, ties to the smaller id (a small vocabulary ties often), windows and heads
    without a pair are left out, padded positions never count, and the distinct anchors are counted over the
    heads that have one."""
    from headsim.stats import cpu_kernels
    from headsim.stats.batch import batch_tensors
    from headsim.stats.pairs import anchor_counts

    _available("numba")
    rng = np.random.default_rng(5)
    b, h, t, bins = 7, 5, 16, 10
    batch = random_batch(rng, b, 1, h, t, vocab=3)
    bt = batch_tensors(to_info(batch))
    rows = torch.as_tensor(rng.integers(0, 3, size=(b, h, t)) * (rng.random((b, h, t)) < 0.4), dtype=torch.float32)
    cols = torch.as_tensor(rng.integers(0, 3, size=(b, h, t)) * (rng.random((b, h, t)) < 0.4), dtype=torch.float32)
    inner = torch.minimum(rows, torch.as_tensor(rng.integers(0, 2, size=(b, h, t)), dtype=torch.float32))
    rows[2], cols[2] = 1.0, 1.0  # every position in pairs: ties between ids broken by the smaller id
    inner[2] = 0.0
    rows[:, 1], cols[:, 1], inner[:, 1] = 0.0, 0.0, 0.0  # a head without pairs
    want = anchor_counts(rows, cols, inner, bt, bins)
    # inner as the pair reductions hold it: a [B, T, H] tensor seen as [B, H, T]
    got = cpu_kernels.anchor_counts(rows, cols, inner.transpose(1, 2).contiguous().transpose(1, 2), bt, bins)
    for name in ("fraction_hist", "windows", "kind", "distinct"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    torch.testing.assert_close(got.fraction_sum, want.fraction_sum, rtol=1e-12, atol=0)
    assert int(want.windows[1]) == 0 and int(want.windows.sum()) > 0 and int(want.distinct.sum()) == b
    assert int(want.distinct[2:].sum()) > 0  # some window's heads name different anchors


def test_the_numba_upper_kernel_equals_the_blocks_reduced_one_by_one():
    """``reduce_upper`` (each window's and head's maximum found by the kernel from a one-tile window's upper
    blocks) gives every output bit for bit as torch's maximum of the blocks (``_tile_peak``: diagonal zeroed,
    NaN kept) and ``reduce_tile`` per block: heads whose entries are all negative (maximum 0), a NaN, an
    infinity, padded positions, and blocks of several heights (``T`` not a multiple of the block rows)."""
    import functools

    from headsim.stats import cpu_kernels, tiled
    from headsim.stats.batch import batch_tensors
    from headsim.stats.pairs import SimBins

    _available("numba")
    rng = np.random.default_rng(11)
    b, h, t, d = 5, 4, 150, 8
    batch = random_batch(rng, b, 1, h, t, vocab=40)
    bt = batch_tensors(to_info(batch))
    z = torch.as_tensor(rng.normal(size=(b, h, t, d)), dtype=torch.float32) + 0.4
    z[1, 2] = torch.as_tensor(rng.normal(size=(t, d)), dtype=torch.float32) * 1e-3  # small entries of both signs
    zf = tiled._similarity_input(z, bt)
    bins, sim_bins = tiled.Bins.build(t, t, z.device), SimBins(120, -0.2, 1.0)
    built = tiled._upper_blocks(zf, lambda r, c: torch.empty(b, h, r, c))
    assert [block.shape[2] for _, block in built] == [64, 64, 22]
    for _, block in built:
        block[3, 1] = -block[3, 1].abs() - 1  # every entry negative: the maximum is the zeroed diagonal's 0
    built[1][1][0, 3, 5, 40] = float("nan")
    built[0][1].view(torch.int32)[2, 2, 1, 90] = -(1 << 22)  # a NaN with the sign bit (0xFFC00000)
    built[2][1][4, 0, 2, 9] = float("inf")
    outputs = []
    for fused in (False, True):
        blocks = [(a, block.clone()) for a, block in built]
        out = {"hist": np.zeros((h, 120), np.int64), "upper_sum": np.zeros((h, t, t), np.float32),
               "location": np.zeros((h, t, t), np.float32), "distance": np.zeros((h, t)),
               "distance_sum": np.zeros(h, np.int64), "row_count": np.zeros((b, h, t), np.float32),
               "col_count": np.zeros((b, h, t), np.float32), "same": np.zeros(h, np.int64)}
        rest = (np.float32(0.3), sim_bins.scale, sim_bins.offset, bins.index.numpy(), bins.ends(), bins.distance.numpy(),
                bt.valid.numpy(), bt.sentences.numpy())
        if fused:
            divisor, keep = np.empty((b, h), np.float32), np.empty((b, h), np.float32)
            cpu_kernels.reduce_upper([x.numpy() for _, x in blocks], [a for a, _ in blocks], divisor, keep, *rest, out)
        else:
            peak = functools.reduce(torch.maximum, (tiled._tile_peak(x, True) for _, x in blocks))
            divisor, positive = tiled._normaliser(peak)
            divisor, keep = divisor.numpy(), positive.float().numpy()
            for a, x in blocks:
                cpu_kernels.reduce_tile(x.numpy(), a, a, True, divisor, keep, *rest, out)
        outputs.append((divisor, keep, out))
    (d0, k0, want), (d1, k1, got) = outputs
    np.testing.assert_array_equal(d1, d0)
    np.testing.assert_array_equal(k1, k0)
    assert d0[0, 3] == d0[2, 2] == 1 and k0[0, 3] == k0[2, 2] == 0  # a NaN maximum is not positive: NaN values, never above
    assert d0[3, 1] == 1 and k0[3, 1] == 0 and np.isinf(d0[4, 0]) and k0.sum() == b * h - 3
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert want["hist"].sum() > 0 and want["location"].sum() > 0 and want["same"].sum() > 0


_CACHE_SCRIPT = """
import json
import numpy as np, torch
from headsim.stats import BatchInfo, CorpusStats, cpu_kernels

b, t, h, d = 2, 16, 2, 4
rng = np.random.default_rng(0)
ids = torch.as_tensor(rng.integers(1000, 1010, size=(b, t)))
info = BatchInfo(ids, torch.ones(b, t, dtype=torch.bool), torch.as_tensor(np.arange(t) // 5).expand(b, t).contiguous(),
                 ids == 101, ids == 102, ids % 3 == 0)
q, k, v = (torch.randn(b, h, t, d, generator=torch.Generator().manual_seed(i)) for i in range(3))
for entries in (1 << 62, 0):  # every call on one thread, then every call on the pool
    cpu_kernels.PARALLEL_ENTRIES = entries
    for resolution in (t, 4):  # a bin per position (the upper kernel), then bins of 4 positions (the tile kernel)
        stats = CorpusStats(1, h, t, device="cpu", backend="numba", resolution=resolution)
        stats.begin_batch(info)
        stats.update_qkv(0, q, k, v, info, scale=d ** -0.5)
kernels = {"attention": cpu_kernels._attention_kernels, "upper": cpu_kernels._upper_kernels, "tile": cpu_kernels._kernel}
print(json.dumps({f"{name} {kind}": [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
                  for name, pair in kernels.items() for kind, f in zip(("parallel", "serial"), pair)}))
"""


@pytest.mark.slow
def test_no_kernel_is_compiled_again_in_a_later_process():
    """Numba's disk cache holds every kernel, the serial versions too (they share the parallel ones' name and
    signatures; uncached, a process's first small step compiled for about 15 s): a process after one that
    ran them loads each from the cache and compiles none."""
    import json
    import subprocess
    import sys

    _available("numba")
    runs = []
    for _ in range(2):  # the package's own cache, wherever Numba keeps it (the first process may fill it)
        proc = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert set(second) == {f"{n} {k}" for n in ("attention", "upper", "tile") for k in ("parallel", "serial")}
    for kernel, (hits, misses) in second.items():
        assert misses == 0 and hits >= 1, (kernel, first[kernel], (hits, misses))
