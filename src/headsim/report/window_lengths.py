"""Window length as a variable: runs of one model and corpus at several ``--seq-len``, side by side.

The paper fixes windows of 128 tokens. :func:`compare_window_lengths` takes finished runs that differ
only in their window length (same model, corpus, threshold and every other setting that changes the
numbers; the number of windows may differ) and returns a :class:`WindowLengths`: the key statistics
per layer and over all layers at each length (a tidy table) and every claim of
:mod:`headsim.report.claims` evaluated at each length, with the claims whose verdict changes flagged.
It reads the runs and computes; it writes nothing (:mod:`headsim.report.window_section` draws and
writes the report's section).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import HeadsimError, require
from ..runs.run import Run
from ..runs.spec import RunSpec, describe_changes
from ..stats.tables import (HIGH_CUT, LOW_CUT, distance_summary, histogram_median, histogram_share, random_pair_distance,
                            ratio, same_sentence_chance)
from .reading import ReportRun
from .claims import compute_claims
from .html import model_label

#: the settings that must agree: every field that changes the numbers, and the corpus, but the window length
SAME = tuple(n for n in RunSpec.NUMBERS if n != "seq_len") + ("corpus_sha256",)

#: every statistic of the table, in order, with what it is (``all`` rows pool the layers)
STATISTICS = {
    "p_repeat": "P(a high-similarity pair is two equal tokens)",
    "p_same_sentence": "P(a high-similarity pair lies inside one sentence)",
    "p_same_sentence_chance": "chance: share of all valid pairs inside one sentence",
    "heads_above_chance": "share of heads whose P(same sentence) exceeds chance",
    "mean_distance": "mean distance |i − j| of high-similarity pairs (tokens)",
    "distance_vs_random": "mean distance of high-similarity pairs / that of random valid pairs",
    "distance_change_from_layer_1": "mean distance relative to layer 1 (−0.10: 10 % shorter)",
    "random_pair_distance": "mean distance |i − j| of random valid pairs (tokens)",
    "median_anchor_fraction": "median share of a head's pairs that contain its anchor token",
    "mean_distinct_anchors": "distinct anchor tokens across a layer's heads, mean per window",
    "attn_framing": "attention per query on the window's framing tokens ([CLS] + [SEP]), mean over heads",
    "framing_share": "share of the valid tokens that are framing tokens (uniform attention's value)",
    "share_sim_gap": f"share of normalised S values in [{LOW_CUT:g}, {HIGH_CUT:g})",
    "share_sim_below": f"share of normalised S values below {LOW_CUT:g}",
}
COLUMNS = ["statistic", "layer", "seq_len", "value"]


@dataclass
class WindowLengths:
    """Runs of one model and corpus compared across window lengths (:func:`compare_window_lengths`).

    Attributes:
        model: the model's label (names the embedded default as all-MiniLM-L6-v2).
        corpus: the corpus name.
        lengths: the window lengths, ascending.
        windows: windows analysed at each length.
        statistics: tidy table, columns :data:`COLUMNS`: one row per statistic (:data:`STATISTICS`),
            layer (1-based; ``<NA>`` for the row pooling all layers) and window length.
        claims: tidy table, columns ``id``, ``seq_len``, ``verdict``, ``value``: every claim at every length.
        claim_text: each claim's id → the paper's statement as :mod:`~headsim.report.claims` words it.
    """

    model: str
    corpus: str
    lengths: list[int]
    windows: dict[int, int]
    statistics: pd.DataFrame
    claims: pd.DataFrame
    claim_text: dict[str, str]

    def table(self, layer: int | None = None) -> pd.DataFrame:
        """The statistics side by side: one row per statistic, one column per window length (``layer``
        ``None``: the rows pooling all layers)."""
        s = self.statistics
        rows = s[s["layer"].isna()] if layer is None else s[s["layer"] == layer]
        wide = rows.pivot(index="statistic", columns="seq_len", values="value")
        return wide.reindex([k for k in STATISTICS if k in wide.index])

    def verdicts(self) -> pd.DataFrame:
        """One row per claim (index: its id), the verdict at each window length, and ``changes``: whether
        the verdict differs between lengths."""
        wide = self.claims.pivot(index="id", columns="seq_len", values="verdict")
        wide = wide.reindex(list(self.claim_text))
        wide["changes"] = wide[self.lengths].nunique(axis=1) > 1
        return wide

    @property
    def changed(self) -> list[str]:
        """Ids of the claims whose verdict changes with the window length."""
        v = self.verdicts()
        return v.index[v["changes"]].tolist()


def check_window_runs(runs: Sequence[Run]) -> None:
    """Refuse runs that cannot be compared across window lengths, in one line: fewer than two, two at
    the same length, or any difference but the window length in :data:`SAME`."""
    require(len(runs) >= 2, f"a window-length comparison needs at least two runs, got {len(runs)}",
            "pass runs of one model and corpus made with different --seq-len")
    first = runs[0]
    spec = first.spec
    seen: dict[int, Run] = {}
    for run in runs:
        changed = spec.differences(run.spec, SAME)
        if changed:
            raise HeadsimError(f"runs {str(first.path)!r} and {str(run.path)!r} differ in more than the window length "
                               f"({describe_changes(changed, 'first', 'other')})",
                               "compare runs of one model and corpus whose settings differ only in --seq-len "
                               "(headsim compare puts any runs side by side)")
        length = int(run.spec.seq_len)
        if length in seen:
            raise HeadsimError(f"runs {str(seen[length].path)!r} and {str(run.path)!r} both have windows of {length} tokens",
                               "pass one run per window length")
        seen[length] = run


def _pooled(run: ReportRun) -> dict[str, float]:
    """The statistics with all layers and heads pooled."""
    ds, heads, shares = run.dataset, run.heads, run.shares
    v = lambda name: ds[name].values.astype(np.float64)  # noqa: E731
    n_pairs = v("n_pairs").sum()
    chance = same_sentence_chance(ds)
    ok = heads["p_same_sentence"].notna()
    mean_d = float(distance_summary(ds, ("layer", "head"))[0])
    random_d = random_pair_distance(ds)
    distinct = v("anchor_distinct_hist").sum(axis=0)
    sim = v("sim_value_hist").sum(axis=(0, 1))
    sim_edges = np.asarray(ds.attrs["sim_bin_edges"], dtype=np.float64)
    framing = [shares.get(k) for k in ("cls", "sep")]
    return {
        "p_repeat": float(ratio(v("n_repeat").sum(), n_pairs)),
        "p_same_sentence": float(ratio(v("n_same_sentence").sum(), n_pairs)),
        "p_same_sentence_chance": chance,
        "heads_above_chance": float((heads.loc[ok, "p_same_sentence"] > chance).mean()) if ok.any() else math.nan,
        "mean_distance": mean_d,
        "distance_vs_random": float(ratio(mean_d, random_d)),
        "random_pair_distance": random_d,
        "median_anchor_fraction": float(histogram_median(v("anchor_fraction_hist").sum(axis=(0, 1)),
                                                         np.asarray(ds.attrs["fraction_bin_edges"], dtype=np.float64))),
        "mean_distinct_anchors": float(ratio((distinct * np.arange(len(distinct))).sum(), distinct.sum())),
        "attn_framing": float((heads["attn_cls"] + heads["attn_sep"]).mean()),
        "framing_share": (float(sum(framing)) if all(x is not None for x in framing) else math.nan),
        "share_sim_gap": float(histogram_share(sim, sim_edges, LOW_CUT, HIGH_CUT)),
        "share_sim_below": float(histogram_share(sim, sim_edges, -np.inf, LOW_CUT)),
    }


def _per_layer(run: ReportRun) -> pd.DataFrame:
    """The statistics of each layer (index: layer), from the run's own ``layers`` and ``heads`` tables."""
    layers, heads = run.layers.set_index("layer"), run.heads
    chance = layers["p_same_sentence_chance"]
    above = (heads["p_same_sentence"] > heads["p_same_sentence_chance"]).where(heads["p_same_sentence"].notna())
    d = layers["mean_distance"]
    return pd.DataFrame({
        "p_repeat": layers["p_repeat"],
        "p_same_sentence": layers["p_same_sentence"],
        "p_same_sentence_chance": chance,
        "heads_above_chance": above.groupby(heads["layer"]).mean(),
        "mean_distance": d,
        "distance_vs_random": d / random_pair_distance(run.dataset),
        "distance_change_from_layer_1": d / d.iloc[0] - 1.0,
        "median_anchor_fraction": layers["median_anchor_fraction"],
        "mean_distinct_anchors": layers["mean_distinct_anchors"],
        "attn_framing": (heads["attn_cls"] + heads["attn_sep"]).groupby(heads["layer"]).mean(),
        "share_sim_gap": layers["share_sim_0_1_to_0_6"],
        "share_sim_below": layers["share_sim_below_0_1"],
    })


def statistics_table(run: ReportRun) -> pd.DataFrame:
    """One run's key statistics as tidy rows (:data:`COLUMNS`): per layer, and pooled (layer ``<NA>``)."""
    length = int(run.spec.seq_len)
    per = _per_layer(run).reset_index(names="layer").melt(id_vars="layer", var_name="statistic", value_name="value")
    pooled = pd.DataFrame({"statistic": list(p := _pooled(run)), "layer": pd.NA, "value": list(p.values())})
    out = pd.concat([per, pooled], ignore_index=True).assign(seq_len=length)
    out["layer"] = out["layer"].astype("Int64")
    out["value"] = out["value"].astype(np.float64)
    return out[COLUMNS]


def compare_window_lengths(runs: Sequence[ReportRun]) -> WindowLengths:
    """Compare finished runs that differ only in window length (:func:`check_window_runs` refuses
    others); returns their statistics and claims, ordered by window length."""
    runs = list(runs)
    check_window_runs(runs)
    runs.sort(key=lambda r: int(r.spec.seq_len))
    stats, claims, text = [], [], {}
    order = {k: i for i, k in enumerate(STATISTICS)}
    for run in runs:
        length = int(run.spec.seq_len)
        stats.append(statistics_table(run))
        for c in compute_claims(run.dataset, run.heads, run.layers, run.meta, shares=run.shares):
            claims.append({"id": c.id, "seq_len": length, "verdict": c.verdict, "value": str(c.value)})
            text.setdefault(c.id, c.claim)
    table = pd.concat(stats, ignore_index=True)
    table = (table.assign(_order=table["statistic"].map(order), _layer=table["layer"].fillna(0))
             .sort_values(["_order", "_layer", "seq_len"], kind="stable").drop(columns=["_order", "_layer"])
             .reset_index(drop=True))
    first = runs[0]
    return WindowLengths(model=model_label(first.model), corpus=str(first.meta.get("corpus", {}).get("name", "?")),
                         lengths=[int(r.spec.seq_len) for r in runs], windows={int(r.spec.seq_len): r.n_windows for r in runs},
                         statistics=table, claims=pd.DataFrame(claims, columns=["id", "seq_len", "verdict", "value"]),
                         claim_text=text)
