"""The statistics schema (headsim.stats.schema): one declaration, and what is generated from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from headsim.errors import HeadsimError
from headsim.stats import CorpusStats, heads_table, layers_table, schema
from headsim.stats.doctable import REGENERATE, markdown_table, with_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "statistics.md"


def test_the_doc_table_is_the_schema():
    doc = DOC.read_text(encoding="utf-8")
    assert with_table(doc) == doc, f"docs/statistics.md's variable table differs from headsim.stats.schema: run {REGENERATE}"
    for v in schema.VARIABLES:  # the table is not vacuous: every variable, its dims and its figure
        assert f"| `{v.name}` | {', '.join(v.dims) or '—'}; " in markdown_table()
    with pytest.raises(HeadsimError, match="markers"):
        with_table("# a doc without the markers\n")


def test_accumulators_and_dataset_follow_the_schema():
    """Every stored accumulator is allocated with its row's dims and dtype, every variable lands in the
    Dataset with its dims, dtype and attributes, and a derived variable is computed from its sources."""
    stats = CorpusStats(2, 3, 7, sim_bins=11, fraction_bins=5)
    sizes = stats.layout.sizes()
    assert set(stats.acc) == set(schema.accumulators())
    for name, v in schema.accumulators().items():
        assert tuple(stats.acc[name].shape) == tuple(sizes[d] for d in v.dims), name
        assert stats.acc[name].dtype == (torch.int64 if v.count else torch.float64), name
    assert {"location_upper", "anchor_kind"} <= set(stats.acc) and "n_pairs" not in stats.acc
    ds = stats.to_dataset()
    assert list(ds.data_vars) == [v.name for v in schema.VARIABLES]
    for v in schema.VARIABLES:
        assert ds[v.name].dims == v.dims and ds[v.name].dtype == v.dtype, v.name
        assert ds[v.name].attrs == {"figure": v.figure, "description": v.description}
        assert all(s in stats.acc for s in v.sources), v.name
    # derived values from planted accumulators
    up = np.zeros((2, 3, 7, 7), dtype=np.int64)
    up[1, 2, 0, 3] = 5
    up[1, 2, 2, 3] = 1
    stats.acc["location_upper"] = torch.from_numpy(up)
    stats.acc["attn_queries_layer"] = torch.tensor([4, 9])
    ds = stats.to_dataset()
    assert int(ds["n_pairs"].sel(layer=2, head=3)) == 6 and int(ds["attn_queries"]) == 9
    assert ds["distance_hist"].sel(layer=2, head=3).values.tolist() == [0, 1, 0, 5, 0, 0, 0]
    assert int(ds["location_counts"].sel(layer=2, head=3, query=3, key=0)) == 5


def test_checkpoints_are_checked_against_the_schema():
    state = CorpusStats(1, 2, 6).state_dict()
    assert CorpusStats.from_state_dict(state).windows == 0
    for bad, needle in (({k: v for k, v in state.items() if k != "sim_sum"}, "lacks sim_sum"),
                        ({**state, "sim_total": np.zeros(3)}, "does not know: sim_total"),
                        ({**state, "n_repeat": np.zeros((1, 2))}, "'n_repeat' has shape"),
                        ({**state, "config.schema": np.asarray("headsim.stats/0")}, "schema")):
        with pytest.raises(HeadsimError, match=needle):
            CorpusStats.from_state_dict(bad)


def test_a_fake_dataset_is_generated_from_the_schema():
    """Variables not given are filled with random values of their dims and dtype; the result is a
    Dataset the summary tables read; without ``fill`` a missing or misshapen variable is an error."""
    layout = schema.Layout(2, 3, 8, 12, (-0.2, 1.0), 4)
    rng = np.random.default_rng(0)
    ds = schema.build_dataset({"windows": 5}, layout, threshold=0.3, top_k_columns=2, fill=rng)
    real = CorpusStats(2, 3, 8, sim_bins=12, fraction_bins=4, top_k_columns=2).to_dataset()
    assert int(ds["windows"]) == 5 and ds["sim_sum"].dtype == np.float64 and ds["n_pairs"].dtype == np.int64
    assert {k: (ds[k].dims, ds[k].dtype) for k in ds.data_vars} == {k: (real[k].dims, real[k].dtype) for k in real.data_vars}
    assert set(ds.attrs) == set(real.attrs) and set(ds.coords) == set(real.coords)
    assert len(heads_table(ds)) == 6 and len(layers_table(ds)) == 2
    with pytest.raises(HeadsimError, match="'attn_sum' is missing"):
        schema.build_dataset({}, layout, threshold=0.3, top_k_columns=2)
    with pytest.raises(HeadsimError, match="'tokens' has shape"):
        schema.build_dataset({"tokens": np.zeros(2)}, layout, threshold=0.3, top_k_columns=2, fill=rng)


def test_every_row_is_well_formed():
    for v in schema.VARIABLES:
        assert v.kind in ("count", "sum") and v.group in (*schema.GROUPS, None), v.name
        assert (v.group is not None) or (v.derive is not None and v.sources), f"{v.name} is neither stored nor derived"
        assert set(v.dims) <= set(schema.DIM_NOTES), v.name
    assert len(schema.BY_NAME) == len(schema.VARIABLES)
