"""The one schema of the corpus statistics: every Dataset variable, its storage and its meaning.

:data:`VARIABLES` is the only place a statistic is declared. From it come the accumulators
:class:`~headsim.stats.CorpusStats` allocates and checkpoints (:func:`accumulators`,
:func:`allocate`, :func:`check_state`), the labelled :class:`xarray.Dataset` (:func:`build_dataset`:
dims, coordinates, attributes), the variable table of ``docs/statistics.md``
(:mod:`headsim.stats.doctable`; a test fails when the doc and the schema differ) and the tests' fake
runs (``tests/fake_run.py``).

A row is either *stored* (its values are an accumulator, ``store``, allocated with the row's dims)
or *derived* when the Dataset is built (``derive`` from the accumulators named in ``sources``);
``location_counts`` is both (stored upper triangle, mirrored). Dataset dims name the sizes of
:meth:`Layout.sizes`; counts are int64 and sums float64, in the accumulators and the Dataset alike.

On disk (``stats.nc``) every variable is stored as compactly as its values allow exactly
(:func:`encoding`: counts in the narrowest integer type that holds their range, sums in float32 where
every value round-trips, else float64; zlib with byte shuffling, one chunk per head) and read back in
the Dataset's dtypes (:func:`decode`); :func:`stored_bytes` estimates the file before a run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..errors import HeadsimError, require
from .attention import TARGETS
from .batch import distance_edges, position_bins
from .pairs import ANCHOR_KINDS, SimBins

SCHEMA = "headsim.stats/1"
#: the settings a checkpoint stores under ``config.*``
CONFIG_KEYS = ("n_layers", "n_heads", "seq_len", "threshold", "top_k_columns", "sim_bins", "sim_range",
               "fraction_bins", "resolution")
#: the positional resolution of a run that does not name one (``resolution``)
DEFAULT_RESOLUTION = 512
#: who adds to a stored accumulator: ``batch`` (window-level counts of ``begin_batch``), ``attention``
#: (:func:`headsim.stats.attention.attention_batch` and the backends' attention steps), ``pairs``
#: (:func:`headsim.stats.pairs.pair_batch` / ``add_pairs``), ``layer`` (the per-layer counters of ``update_layer``)
GROUPS = ("batch", "attention", "pairs", "layer")
CONVENTIONS = ("layer and head 1-based; query, key, distance 0-based positions; pairs i < j of valid "
               "positions; padding excluded; sentence ids -1 for [CLS], [SEP] and padding")


@dataclass(frozen=True)
class Layout:
    """The sizes a run's statistics have: model geometry and histogram bins."""

    n_layers: int
    n_heads: int
    seq_len: int
    sim_bins: int = 120
    sim_range: tuple[float, float] = (-0.2, 1.0)
    fraction_bins: int = 20
    #: longest window whose position-pair statistics are kept per position; longer windows keep them
    #: on ``resolution`` position bins (and distance bins), so their size does not grow with T
    resolution: int = DEFAULT_RESOLUTION

    @property
    def binned(self) -> bool:
        """Position-pair statistics are kept on position bins (``seq_len > resolution``)."""
        return self.seq_len > self.resolution

    @property
    def positions(self) -> int:
        """Length of the ``query``, ``key`` and ``distance`` dims: T, or ``resolution`` bins."""
        return self.resolution if self.binned else self.seq_len

    def position_bins(self) -> np.ndarray:
        """Bin of every position (and distance) ``0..T−1``: ``p · positions // T`` (identity when not binned)."""
        return position_bins(self.seq_len, self.positions)

    def bin_starts(self) -> np.ndarray:
        """First position (distance) of every bin: the ``query``, ``key`` and ``distance`` coordinates."""
        t, r = self.seq_len, self.positions
        return (np.arange(r) * t + r - 1) // r

    def distance_edges(self) -> np.ndarray:
        """Edges of the ``distance`` bins (:func:`headsim.stats.batch.distance_edges`: one per distance
        when not binned; above the resolution exact short distances, then log-spaced bins)."""
        return distance_edges(self.seq_len, self.positions)

    @property
    def bins(self) -> SimBins:
        return SimBins(self.sim_bins, float(self.sim_range[0]), float(self.sim_range[1]))

    @property
    def fraction_edges(self) -> np.ndarray:
        return np.linspace(0.0, 1.0, self.fraction_bins + 1)

    def sizes(self) -> dict[str, int]:
        """Length of every Dataset dim."""
        h, t = self.n_heads, self.positions
        return {"layer": self.n_layers, "head": h, "query": t, "key": t, "distance": t, "target": len(TARGETS),
                "anchor_kind": len(ANCHOR_KINDS), "sim_bin": self.sim_bins, "fraction_bin": self.fraction_bins,
                "n_anchors": h + 1}

    def coords(self) -> dict[str, object]:
        """Coordinates of every Dataset dim."""
        t, f = self.bin_starts(), self.fraction_edges
        return {"layer": np.arange(1, self.n_layers + 1), "head": np.arange(1, self.n_heads + 1), "query": t,
                "key": t, "distance": self.distance_edges()[:-1], "target": list(TARGETS), "anchor_kind": list(ANCHOR_KINDS),
                "sim_bin": self.bins.centres, "fraction_bin": (f[:-1] + f[1:]) / 2,
                "n_anchors": np.arange(self.n_heads + 1)}

    def attrs(self, threshold: float, top_k_columns: int) -> dict[str, object]:
        """The Dataset's attributes."""
        return {"schema": SCHEMA, "threshold": threshold, "top_k_columns": top_k_columns, "seq_len": self.seq_len,
                "n_layers": self.n_layers, "n_heads": self.n_heads, "sim_bins": self.sim_bins,
                "sim_range": np.asarray([self.bins.lo, self.bins.hi]), "sim_bin_edges": self.bins.edges,
                "fraction_bins": self.fraction_bins, "fraction_bin_edges": self.fraction_edges,
                "resolution": self.resolution, "position_binned": int(self.binned), "conventions": CONVENTIONS}


#: coordinate of each dim, as the doc states it
DIM_NOTES = {"layer": "1..L", "head": "1..H", "query": "0..T−1, or the first position of each bin",
             "key": "0..T−1, or the first position of each bin", "distance": "0..T−1, or the first distance of each distance bin",
             "target": "cls, sep, punct, prev, next", "anchor_kind": "cls, sep, punct, other",
             "sim_bin": "bin centres", "fraction_bin": "bin centres", "n_anchors": "0..H"}

Derive = Callable[[Mapping[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class Variable:
    """One Dataset variable.

    Attributes:
        name: the Dataset variable.
        dims: its Dataset dims (also the shape of its stored accumulator).
        kind: ``"count"`` (int64) or ``"sum"`` (float64).
        figure: paper figure(s); with ``description`` written as the variable's attributes.
        description: one line (the ``description`` attribute).
        definition: the doc's definition (markdown); ``description`` where empty.
        group: who adds to the stored accumulator (:data:`GROUPS`); ``None`` for a derived variable.
        store: the accumulator holding a stored variable (default: ``name``).
        sources: the accumulators a derived value is computed from.
        derive: accumulators → Dataset values (``None``: the stored accumulator itself).
        note: extra words for the doc's "computed by" column.
        binned: what the variable holds when its position dims are bins (windows longer than the
            resolution; the doc's "binned" column); empty: the same as unbinned.
        binned_group: where set, in a binned layout the variable is a stored accumulator added by this
            group (its derivation needs single positions).
    """

    name: str
    dims: tuple[str, ...]
    kind: str
    figure: str
    description: str
    definition: str = ""
    group: str | None = None
    store: str = ""
    sources: tuple[str, ...] = ()
    derive: Derive | None = None
    note: str = ""
    binned: str = ""
    binned_group: str | None = None

    @property
    def accumulator(self) -> str | None:
        """The accumulator this variable is stored in, if any."""
        if self.group is None:
            return None
        return self.store or self.name

    def stored_in(self, binned: bool) -> tuple[str | None, str | None]:
        """(accumulator, group) of the variable in a binned or unbinned layout."""
        if binned and self.binned_group is not None:
            return self.name, self.binned_group
        return self.accumulator, self.group

    @property
    def count(self) -> bool:
        return self.kind == "count"

    @property
    def dtype(self) -> type:
        return np.int64 if self.count else np.float64

    def computed_by(self) -> str:
        """The doc's "computed by" column."""
        parts = []
        if self.group is not None:
            own = "update_layer" if self.group == "layer" else self.group
            parts.append(own + (f" (`{self.accumulator}`)" if self.accumulator != self.name else ""))
        if self.derive is not None:
            parts.append("to_dataset" + (f" (from `{'`, `'.join(self.sources)}`)" if self.group is None else ""))
        return ", ".join(parts) + (f" ({self.note})" if self.note else "")


def _distances(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    up = acc["location_upper"]
    t = up.shape[-1]
    out = np.zeros(up.shape[:2] + (t,), dtype=np.int64)
    for d in range(1, t):
        out[..., d] = up.diagonal(offset=d, axis1=2, axis2=3).sum(axis=-1)
    return out


def _distance_sums(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    up = acc["location_upper"]
    t = up.shape[-1]
    return np.einsum("lhd,d->lh", _distances(acc), np.arange(t, dtype=np.int64))


def _valid_pairs_by_distance(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    pcv = acc["pair_count_valid"]
    t = pcv.shape[-1]
    out = np.zeros(t, dtype=np.int64)
    for d in range(1, t):
        out[d] = np.trace(pcv, offset=d)
    return out


def _off_near_diagonal(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    a = acc["attn_sum_top_zeroed"]
    t = a.shape[-1]
    near = np.abs(np.arange(t)[:, None] - np.arange(t)[None, :]) <= 1
    return np.where(near, 0.0, a)


_LHQK = ("layer", "head", "query", "key")
_LH = ("layer", "head")

#: every statistic, in the Dataset's order
VARIABLES: tuple[Variable, ...] = (
    Variable("attn_sum", _LHQK, "sum", "2, 3 left", "sum over windows of attention probabilities at valid (query, key)",
             "Σ over windows of `A[q, k]` at valid (q, k)", group="attention",
             binned="Σ of `attn_sum` over the (query, key) positions of each bin pair"),
    Variable("attn_sum_top_zeroed", _LHQK, "sum", "3 middle",
             "attn_sum with each window's and head's top_k_columns largest key columns zeroed",
             "as `attn_sum`, but in each window and head the `top_k_columns` valid key columns with the largest column "
             "sums `Σ_q A[q, k]` (valid q) are zeroed first; ties → smaller key position", group="attention",
             note="`top_columns`", binned="Σ of `attn_sum_top_zeroed` over each bin pair (the top columns chosen from exact column sums, as unbinned)"),
    Variable("attn_sum_top_diag_zeroed", _LHQK, "sum", "3 right", "attn_sum_top_zeroed with |query - key| <= 1 zeroed",
             "`attn_sum_top_zeroed` with `|query − key| ≤ 1` set to 0", sources=("attn_sum_top_zeroed",),
             derive=_off_near_diagonal, binned="Σ of `attn_sum_top_diag_zeroed` over each bin pair (stored: near-diagonal entries are removed per position before binning)",
             binned_group="attention"),
    Variable("pair_count_valid", ("query", "key"), "count", "2, 3",
             "windows in which both positions are valid (denominator for averages)",
             "windows in which both positions are valid (diagonal: windows where the position is valid); mean "
             "attention map = `attn_sum / pair_count_valid`", group="batch",
             binned="Σ over each bin pair: valid (query, key) position pairs summed over windows; mean attention per bin = `attn_sum / pair_count_valid`"),
    Variable("attn_pair_count", ("layer", "query", "key"), "count", "2, 3",
             "windows whose attention entered the layer with both positions valid",
             "the same, over the windows whose attention entered that layer (equals `pair_count_valid` when attention "
             "is given for every batch)", group="layer", binned="the same, summed over each bin pair"),
    Variable("attn_windows", ("layer",), "count", "2, 3", "windows whose attention entered the layer", group="layer"),
    Variable("attn_focus", ("layer", "head", "target"), "sum", "4, §2",
             "sum over valid query rows of the attention mass on [CLS], [SEP], punctuation, key i-1, key i+1",
             "Σ over valid query rows `q` of the attention mass on [CLS] keys, [SEP] keys, punctuation keys, key "
             "`q − 1`, key `q + 1` (`target` = cls, sep, punct, prev, next; only valid keys)", group="attention"),
    Variable("attn_queries", (), "count", "4, §2", "valid query rows summed into attn_focus (largest over layers)",
             "valid query rows summed into `attn_focus` (the largest over layers; equal for all layers when attention "
             "is given every time)", sources=("attn_queries_layer",),
             derive=lambda acc: np.int64(acc["attn_queries_layer"].max() if acc["attn_queries_layer"].size else 0)),
    Variable("attn_queries_layer", ("layer",), "count", "4, §2", "valid query rows summed into attn_focus, per layer",
             "valid query rows summed into `attn_focus`, per layer; share = `attn_focus / attn_queries_layer`",
             group="layer"),
    Variable("n_pairs", _LH, "count", "6, 7, 8", "high-similarity pairs i < j", "high-similarity pairs `i < j`",
             sources=("location_upper",), derive=lambda acc: acc["location_upper"].sum(axis=(2, 3))),
    Variable("n_repeat", _LH, "count", "6a", "high-similarity pairs with equal token ids", group="pairs"),
    Variable("n_same_sentence", _LH, "count", "6b, 8",
             "high-similarity pairs inside one sentence (sentence ids >= 0 and equal)",
             "high-similarity pairs inside one sentence", group="pairs"),
    Variable("n_repeat_same_sentence", _LH, "count", "6b", "high-similarity pairs with equal token ids inside one sentence",
             "high-similarity pairs with equal ids inside one sentence", group="pairs"),
    Variable("distance_hist", ("layer", "head", "distance"), "count", "7, 13", "high-similarity pairs by distance j - i",
             "high-similarity pairs by `j − i` (1..T−1; distance 0 stays 0); per layer = sum over heads",
             sources=("location_upper",), derive=_distances, binned="high-similarity pairs by distance bin (bin of `j − i`: one per distance up to a few dozen, then log-spaced; stored, counted per pair before binning)",
             binned_group="pairs"),
    Variable("distance_sum", _LH, "count", "7, 13", "sum of the distances j - i of the high-similarity pairs",
             "Σ of `j − i` over high-similarity pairs `i < j`; mean distance = `distance_sum / n_pairs`",
             sources=("location_upper",), derive=_distance_sums,
             binned="the same, exact (stored: each pair's distance is added before binning)", binned_group="pairs"),
    Variable("valid_pairs_distance", ("distance",), "count", "7, 13 chance",
             "valid pairs i < j by distance j - i over all windows (the chance distribution of distances)",
             "valid pairs `i < j` by `j − i` over all windows (distance 0 stays 0): the distances random pairs "
             "would have", sources=("pair_count_valid",), derive=_valid_pairs_by_distance,
             binned="valid pairs by distance bin (stored: counted per pair before binning)", binned_group="batch"),
    Variable("valid_pairs", (), "count", "8 chance", "valid pairs i < j over all windows",
             "valid pairs `i < j` over all windows (`Σ n(n−1)/2`, `n` valid tokens)", group="batch"),
    Variable("valid_pairs_same_sentence", (), "count", "8 chance", "valid pairs i < j inside one sentence over all windows",
             "valid pairs `i < j` inside one sentence; chance level = `valid_pairs_same_sentence / valid_pairs`",
             group="batch"),
    Variable("location_counts", _LHQK, "count", "10", "windows with a high-similarity pair at (query, key), symmetric",
             "windows with a high-similarity pair at (i, j), added at both (i, j) and (j, i): symmetric, zero "
             "diagonal, total `2 · n_pairs`", group="pairs", store="location_upper", sources=("location_upper",),
             derive=lambda acc: acc["location_upper"] + acc["location_upper"].transpose(0, 1, 3, 2),
             note="mirrored", binned="Σ of `location_counts` over each bin pair (symmetric; bins on the diagonal hold pairs inside one bin twice)"),
    Variable("sim_sum", _LHQK, "sum", "12", "sum over windows of normalised similarity matrices",
             "Σ over windows of the normalised similarity matrix; per layer = sum over heads", group="pairs", binned="Σ of `sim_sum` over each bin pair (each window normalised by its exact off-diagonal maximum)"),
    Variable("sim_value_hist", ("layer", "head", "sim_bin"), "count", "§3",
             "normalised similarity values of valid pairs i < j by bin",
             "normalised values of valid pairs `i < j` by bin (below)", group="pairs"),
    Variable("anchor_fraction_hist", ("layer", "head", "fraction_bin"), "count", "11a",
             "windows by the fraction of high-similarity pairs containing the anchor token",
             "windows (with ≥ 1 pair for the head) by anchor fraction (below)", group="pairs"),
    Variable("anchor_fraction_sum", _LH, "sum", "11a", "sum over windows with pairs of the anchor fraction",
             "Σ of anchor fractions over those windows", group="pairs"),
    Variable("anchor_windows", _LH, "count", "11a", "windows with at least one high-similarity pair",
             "windows with ≥ 1 high-similarity pair for the head", group="pairs"),
    Variable("anchor_kind_counts", ("layer", "head", "anchor_kind"), "count", "11a",
             "windows whose anchor token is [CLS], [SEP], punctuation or other",
             "those windows by the kind of their anchor token: cls, sep, punct, other (first matching, in that order)",
             group="pairs", store="anchor_kind"),
    Variable("anchor_distinct_hist", ("layer", "n_anchors"), "count", "11b",
             "windows by the number of distinct anchor token ids across the layer's heads",
             "windows by the number of distinct anchor token ids across the layer's heads that have an anchor "
             "(`n_anchors` = 0..H)", group="pairs"),
    Variable("layer_windows", ("layer",), "count", "6-13", "windows whose head outputs entered the layer",
             group="layer"),
    Variable("windows", (), "count", "all", "windows seen (begin_batch)", "windows seen", group="batch"),
    Variable("tokens", (), "count", "all", "valid tokens seen", group="batch"),
)
BY_NAME = {v.name: v for v in VARIABLES}


def accumulators(group: str | None = None, binned: bool = False) -> dict[str, Variable]:
    """Stored accumulator name → its variable (only ``group``'s where given), in schema order, for a
    binned or unbinned layout."""
    out = {}
    for v in VARIABLES:
        name, owner = v.stored_in(binned)
        if name is not None and group in (None, owner):
            out[name] = v
    return out


def allocate(layout: Layout, device) -> dict:
    """Zeroed accumulators (torch tensors on ``device``): int64 counts, float64 sums."""
    import torch

    sizes = layout.sizes()
    return {name: torch.zeros(tuple(sizes[d] for d in v.dims), dtype=torch.int64 if v.count else torch.float64,
                              device=device)
            for name, v in accumulators(binned=layout.binned).items()}


def state_resolution(state: Mapping[str, object]) -> int:
    """A checkpoint's resolution (states written before there was one hold windows up to 512 tokens,
    whose statistics were never binned)."""
    return int(np.asarray(state["config.resolution"])) if "config.resolution" in state else DEFAULT_RESOLUTION


def check_state(state: Mapping[str, object]) -> None:
    """A checkpoint holds the settings, this schema's version and exactly this schema's accumulators."""
    config = [f"config.{k}" for k in CONFIG_KEYS if k != "resolution"]
    binned = "config.seq_len" in state and int(np.asarray(state["config.seq_len"])) > state_resolution(state)
    expected = accumulators(binned=binned)
    missing = [k for k in (*config, *expected) if k not in state]
    require(not missing, f"checkpoint state lacks {', '.join(missing[:5])}",
            "resume from a state written by CorpusStats.state_dict of this headsim version")
    schema = str(np.asarray(state["config.schema"])) if "config.schema" in state else SCHEMA
    require(schema == SCHEMA, f"checkpoint schema {schema!r} is not {SCHEMA!r}", "start the run again")
    extra = sorted(k for k in state if k not in expected and not k.startswith("config."))
    require(not extra, f"checkpoint state holds arrays this headsim version does not know: {', '.join(extra[:5])}",
            "resume it with the headsim version that wrote it, or start the run again")


def check_array(name: str, value: np.ndarray, shape: tuple[int, ...]) -> None:
    """One checkpoint array has its accumulator's shape and kind (int or float)."""
    known = {**accumulators(), **accumulators(binned=True)}
    count = known[name].count
    if tuple(value.shape) != tuple(shape) or value.dtype.kind != ("i" if count else "f"):
        raise HeadsimError(f"checkpoint array {name!r} has shape {value.shape} {value.dtype}, expected {tuple(shape)}",
                           "resume from a matching checkpoint")


def derived_values(acc: Mapping[str, np.ndarray], binned: bool = False) -> dict[str, np.ndarray]:
    """Every Dataset variable's values from the accumulators (numpy arrays) of a binned or unbinned layout."""
    out = {}
    for v in VARIABLES:
        name, _ = v.stored_in(binned)
        stored_here = binned and v.binned_group is not None
        out[v.name] = acc[name] if stored_here or v.derive is None else v.derive(acc)
    return out


def build_dataset(values: Mapping[str, np.ndarray], layout: Layout, *, threshold: float, top_k_columns: int,
                  fill: np.random.Generator | None = None) -> xr.Dataset:
    """The labelled Dataset of every variable's ``values`` (Dataset dims, coordinates, attributes).

    Every variable must be given with its dims' sizes, unless ``fill`` is given: missing ones then get
    random values of the right dims and dtype (for fake runs of the tests)."""
    sizes = layout.sizes()
    data = {}
    for v in VARIABLES:
        shape = tuple(sizes[d] for d in v.dims)
        if v.name not in values:
            require(fill is not None, f"statistics variable {v.name!r} is missing", "give every schema variable")
            values = {**values, v.name: random_values(v, shape, fill)}
        array = np.asarray(values[v.name])
        require(array.shape == shape, f"statistics variable {v.name!r} has shape {array.shape}, expected {shape}",
                f"give it the dims {v.dims}")
        data[v.name] = xr.Variable(v.dims, array.astype(v.dtype, copy=False),
                                   attrs={"figure": v.figure, "description": v.description})
    return xr.Dataset(data, coords=layout.coords(), attrs=layout.attrs(threshold, top_k_columns))


def _narrow_dtype(v: Variable, array: np.ndarray) -> np.dtype:
    """The smallest dtype that holds every value of ``array`` exactly: for a count held in integers the
    narrowest integer type whose range holds ``[min, max]``; for a float64 sum float32 where every value
    round-trips through it; anything else its own dtype (what :func:`decode` widens is exactly this)."""
    if array.size == 0:
        return array.dtype
    if v.count and array.dtype.kind in "iu":
        lo, hi = int(array.min()), int(array.max())
        for dt in (np.uint8, np.uint16, np.uint32) if lo >= 0 else (np.int8, np.int16, np.int32):
            if np.iinfo(dt).min <= lo and hi <= np.iinfo(dt).max:
                return np.dtype(dt)
        return np.dtype(np.int64)
    if v.count or array.dtype != np.float64:
        return array.dtype
    exact = np.array_equal(array.astype(np.float32).astype(np.float64), array, equal_nan=True)
    return np.dtype(np.float32 if exact else np.float64)


#: zlib level of ``stats.nc`` (level 1: within a few per cent of level 4's size at a fraction of its time)
COMPLEVEL = 1


def encoding(ds: xr.Dataset) -> dict[str, dict]:
    """The netCDF encoding of every schema variable of ``ds`` (:func:`xarray.Dataset.to_netcdf`): its
    narrowest exact dtype (chosen from the values, so nothing is rounded), zlib with shuffling, and
    chunks of one (layer, head) so that reading one head decompresses only its own."""
    out = {}
    for name, var in ds.data_vars.items():
        v = BY_NAME.get(name)
        if v is None or var.ndim == 0:
            continue
        values = np.asarray(var.values)
        enc = {"dtype": _narrow_dtype(v, values), "zlib": True, "complevel": COMPLEVEL, "shuffle": True,
               "chunksizes": tuple(1 if d in ("layer", "head") else n for d, n in zip(var.dims, var.shape))}
        if enc["dtype"].kind == "f":
            enc["_FillValue"] = None  # statistics are never missing
        out[name] = enc
    return out


def decode(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` as read from ``stats.nc`` with every schema variable in the Dataset's dtype again (int64
    counts, float64 sums): the values are the exact ones :func:`encoding` stored (runs written before it
    already hold these dtypes). A lazily opened file stays lazy: values are cast as they are read."""
    cast = {}
    for name, var in ds.data_vars.items():
        v = BY_NAME.get(name)
        if v is None or var.dtype == v.dtype:
            continue
        if not (var.dtype.kind in "iu" if v.count else var.dtype == np.float32):
            continue  # only what encoding() narrows (an integer count, a float32 sum) is widened
        dtype = np.dtype(v.dtype)
        data = var.variable._data
        if not isinstance(data, np.ndarray):  # not read yet: cast each slice as it is read
            from xarray.coding.variables import lazy_elemwise_func

            data = lazy_elemwise_func(data, functools.partial(np.asarray, dtype=dtype), dtype)
        cast[name] = xr.Variable(var.dims, data if data.dtype == dtype else data.astype(dtype), var.attrs, var.encoding)
    return ds.assign(cast) if cast else ds


def _sum_bytes(windows: int) -> float:
    """Bytes per float64 sum after zlib with shuffling: a sum of ``windows`` float32 values carries about
    24 + log2(windows) significant bits, the rest of its mantissa compresses away (3.7 bytes measured
    at 64 windows on a random-weight 32 x 32 Llama)."""
    return float(np.clip(3.7 + 0.2 * (np.log2(max(windows, 1)) - 6), 2.5, 8.0))


def stored_bytes(layout: Layout, windows: int, causal: bool) -> int:
    """An estimate of ``stats.nc``'s size for ``windows`` windows of ``layout``: counts at the width their
    largest possible value needs, compressed about tenfold; sums at :func:`_sum_bytes` per value that is
    not structurally zero (above the diagonal of a causal model's attention maps)."""
    sizes, total = layout.sizes(), 0.0
    t = layout.positions
    upper = (t - 1) / (2 * t) if causal else 0.0
    for v in VARIABLES:
        n = int(np.prod([sizes[d] for d in v.dims])) if v.dims else 1
        if v.count:
            per_cell = v.dims[-2:] == ("query", "key") and not layout.binned
            bound = windows if per_cell else windows * layout.seq_len ** 2
            width = next(w for w in (1, 2, 4, 8) if bound < 2 ** (8 * w) or w == 8)
            total += n * width * 0.1
        else:
            zero = upper if v.name.startswith("attn_sum") else 0.0
            total += n * (1 - zero) * _sum_bytes(windows)
    return int(total) + (64 << 10)


def random_values(v: Variable, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random non-negative values of ``v``'s dtype."""
    return rng.integers(0, 100, size=shape, dtype=np.int64) if v.count else rng.random(shape)
