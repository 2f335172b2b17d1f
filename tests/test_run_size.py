"""The size of a run: statistics stored as compactly as their values allow exactly, read back equal;
the resolution chosen from the memory budget; the run's size said before it starts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from headsim.memory import RESOLUTIONS, accumulator_bytes, choose_resolution
from headsim.runs.analyze import analyze
from headsim.runs.rundir import load_run
from headsim.stats import schema


def _corpus(tmp_path: Path, n_docs: int = 6) -> Path:
    from headsim.corpus import lee_documents

    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(d.text for d in lee_documents()[:n_docs]), encoding="utf-8")
    return path


def _dataset(counts: dict[str, int], sums: dict[str, float]) -> xr.Dataset:
    """A fake run's Dataset with chosen largest count and one chosen sum value."""
    layout = schema.Layout(2, 3, 8)
    ds = schema.build_dataset({}, layout, threshold=0.3, top_k_columns=3, fill=np.random.default_rng(0))
    for name, top in counts.items():
        ds[name].values.flat[0] = top
    for name, value in sums.items():
        ds[name].values[...] = np.float32(0.25)
        ds[name].values.flat[0] = value
    return ds


def test_every_variable_is_stored_in_its_narrowest_exact_dtype():
    ds = _dataset({"location_counts": 255, "distance_hist": 256, "n_pairs": 70_000, "sim_value_hist": 2 ** 40},
                  {"attn_sum": 0.5, "sim_sum": 0.1})  # 0.5 is a float32 value, 0.1 (float64) is not
    enc = schema.encoding(ds)
    want = {"location_counts": np.uint8, "distance_hist": np.uint16, "n_pairs": np.uint32, "sim_value_hist": np.int64,
            "attn_sum": np.float32, "sim_sum": np.float64}
    for name, dtype in want.items():
        assert enc[name]["dtype"] == np.dtype(dtype), name
        assert enc[name]["zlib"] and enc[name]["shuffle"]
    for name, e in enc.items():  # whatever the dtype, every value survives it
        values = ds[name].values
        assert np.array_equal(values.astype(e["dtype"]).astype(values.dtype), values), name
    # negative counts never occur, but a signed type would still be chosen exactly
    ds["n_repeat"].values.flat[0] = -3
    assert schema.encoding(ds)["n_repeat"]["dtype"] == np.dtype(np.int8)


def test_stats_nc_round_trips_exactly(tmp_path):
    ds = _dataset({"location_counts": 255, "distance_hist": 256, "n_pairs": 70_000, "sim_value_hist": 2 ** 40},
                  {"attn_sum": 0.5, "sim_sum": 0.1})
    from headsim.io import open_dataset, write_dataset

    path = write_dataset(tmp_path / "stats.nc", ds, schema.encoding(ds))
    with open_dataset(path) as raw:
        assert raw["location_counts"].dtype == np.uint8  # stored narrow
        lazy = schema.decode(raw)
        one = lazy["location_counts"].isel(layer=1, head=2).values  # read lazily: one head, already int64
        assert one.dtype == np.int64 and np.array_equal(one, ds["location_counts"].isel(layer=1, head=2).values)
        back = lazy.load()
    xr.testing.assert_identical(back, ds)
    for name in ds.data_vars:
        assert back[name].dtype == ds[name].dtype, name


@pytest.mark.slow
def test_a_run_reads_back_equal_to_the_statistics_it_computed(tmp_path, monkeypatch):
    """Every statistic through load_run equals the in-memory result (values and dtypes); the file is
    smaller than the plain float64/int64 file; the size was said (on a terminal) before the run and recorded."""
    import io

    from rich.console import Console

    from headsim.runs import progress

    shown = io.StringIO()
    monkeypatch.setattr(progress, "_terminal", lambda: Console(file=shown, force_terminal=True, width=200))
    res = analyze(None, str(_corpus(tmp_path)), windows=8, out=tmp_path / "run", seq_len=32, batch_size=4,
                  progress=True)
    assert "run size: about" in shown.getvalue() and "on disk" in shown.getvalue()
    run = load_run(tmp_path / "run")
    xr.testing.assert_identical(run.dataset, res.dataset)
    for name in res.dataset.data_vars:
        assert run.dataset[name].dtype == res.dataset[name].dtype, name
    plain = len(bytes(res.dataset.to_netcdf(engine="h5netcdf")))
    assert (tmp_path / "run" / "stats.nc").stat().st_size < plain / 2
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["spec"]["resolution"] == 512 and meta["memory"]["resolution_from"] == "budget"
    assert meta["size"]["estimated_bytes"] > 0


@pytest.mark.slow
def test_runs_written_before_compact_storage_still_load(tmp_path):
    """A stats.nc of int64 counts and float64 sums, uncompressed (as runs were written before), reads the same."""
    from headsim.io import file_record

    res = analyze(None, str(_corpus(tmp_path)), windows=4, out=tmp_path / "run", seq_len=32, batch_size=4, progress=False)
    path = tmp_path / "run" / "stats.nc"
    path.write_bytes(bytes(res.dataset.to_netcdf(engine="h5netcdf")))
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    meta["files"]["stats.nc"] = file_record(path)
    (tmp_path / "run" / "run.json").write_text(json.dumps(meta))
    xr.testing.assert_identical(load_run(tmp_path / "run").dataset, res.dataset)


def test_resolution_is_the_largest_whose_statistics_fit_half_the_room():
    gib = 1 << 30
    # 32 x 32 heads: per position at 128 tokens (about 0.5 GiB) whenever 1 GiB is free
    assert choose_resolution(32, 32, 128, 2 * gib) == 512
    # 2,048 tokens: 512 bins would take about 10 GiB; a 6 GiB room takes 256 (2.5 GiB), 2 GiB 128
    assert accumulator_bytes(32, 32, 2048, 512) > 9 * gib
    assert choose_resolution(32, 32, 2048, 6 * gib) == 256
    assert choose_resolution(32, 32, 2048, 2 * gib) == 128
    for room in (gib // 4, gib, 4 * gib, 64 * gib):
        r = choose_resolution(32, 32, 2048, room)
        assert 2 * accumulator_bytes(32, 32, 2048, r) <= room or r == RESOLUTIONS[-1]
        bigger = [x for x in RESOLUTIONS if x > r]
        assert all(2 * accumulator_bytes(32, 32, 2048, x) > room for x in bigger)


def test_size_estimate_counts_the_structural_zeros_of_causal_attention():
    layout = schema.Layout(32, 32, 128)
    causal, full = schema.stored_bytes(layout, 64, True), schema.stored_bytes(layout, 64, False)
    assert causal < full
    raw = accumulator_bytes(32, 32, 128, 512)
    assert causal < raw / 2  # the compact file is well under half the float64 accumulators
