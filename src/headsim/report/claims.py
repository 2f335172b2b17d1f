"""The paper's claims as measured checks on a finished run.

:func:`compute_claims` turns a run's statistics (``stats.nc``), its ``heads`` / ``layers`` tables and
``run.json`` into a list of :class:`Claim`: what the paper says (paraphrased, with its section and
figure), what was computed, the value, the criterion in words and a verdict. Nothing is hard-coded:
every value and verdict comes from the run. Where the data cannot say (no pairs, a missing
variable, too few layers), the verdict is "not applicable" and the value says why.

The criteria's cut-offs (``SEPARATOR_FACTOR`` …) are module constants, stated in each criterion.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from ..runs.layout import STATS_NC, WINDOWS

HOLDS, FAILS, NA = "holds", "does not hold", "not applicable"
VERDICTS = (HOLDS, FAILS, NA)

#: claim 1: attention on separators must exceed this multiple of their share of tokens
SEPARATOR_FACTOR = 2.0
#: claim 2: the leading head's p_repeat must be this multiple of the median head's, and this far above it
REPEAT_FACTOR, REPEAT_MARGIN = 2.0, 0.05
#: claim 4: relative drop of the mean distance from the first to the middle layer
DISTANCE_DROP = 0.10
#: claim 4, reported beside: the first→last drop that a summary of the paper quotes
SUMMARY_DROP = 0.30
#: claim 5: a layer counts when its median anchor fraction exceeds this
ANCHOR_FRACTION = 0.5
#: claim 7: share below 0.1 must exceed LOW_SHARE, share in [0.1, 0.6) must stay below MID_SHARE
LOW_CUT, HIGH_CUT, LOW_SHARE, MID_SHARE = 0.1, 0.6, 0.5, 0.10


@dataclass
class Claim:
    """One paper claim checked on a run.

    Attributes:
        id: short stable identifier (``"c1_separators"`` …).
        claim: the paper's statement, paraphrased, with section and figure.
        measure: what was computed, from which file.
        value: the result: a number or a short text.
        criterion: when the claim counts as holding, in words.
        verdict: ``"holds"``, ``"does not hold"`` or ``"not applicable"``.
        numbers: the numbers behind ``value`` (for tables, tests and comparisons).
    """

    id: str
    claim: str
    measure: str
    value: float | str
    criterion: str
    verdict: str
    numbers: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    return x


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def column(df: pd.DataFrame, *names: str) -> pd.Series:
    """The first of ``names`` that ``df`` has (tables have gained extra names over time)."""
    for name in names:
        if name in df.columns:
            return df[name]
    raise KeyError(f"none of {names} in table columns {list(df.columns)}")


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def head_name(layer: int, head: int) -> str:
    return f"L{int(layer)}H{int(head)}"


def middle_layer(n_layers: int) -> int:
    """1-based middle layer: 6 of 12 (the paper's Fig 12/13 middle panel), 3 of 6."""
    return (n_layers - 1) // 2 + 1


def histogram_share(hist: np.ndarray, edges: np.ndarray, low: float, high: float) -> float:
    """Share of a 1-d histogram in ``[low, high)``; a bin a cut falls into counts by overlap."""
    hist = np.asarray(hist, dtype=np.float64)
    e0, e1 = np.asarray(edges[:-1], dtype=np.float64), np.asarray(edges[1:], dtype=np.float64)
    part = np.clip((np.minimum(e1, high) - np.maximum(e0, low)) / (e1 - e0), 0.0, 1.0)
    part = np.where(np.abs(part) < 1e-9, 0.0, np.where(np.abs(part - 1.0) < 1e-9, 1.0, part))
    total = hist.sum()
    return float((hist * part).sum() / total) if total > 0 else math.nan


def sim_edges(ds: xr.Dataset) -> np.ndarray:
    from ..plots.corpus import sim_bin_edges

    return sim_bin_edges(ds)


def token_shares(windows: pd.DataFrame | None, tokenizer=None, ds: xr.Dataset | None = None, *,
                 framing: dict | None = None) -> dict:
    """Share of [CLS], [SEP] and punctuation tokens among the valid tokens of the analysed windows.

    With the model's ``tokenizer`` the ids in ``windows.parquet`` are classified exactly as the
    statistics classify attention targets: the window's opening and closing tokens (``framing``, as
    run.json's ``model.framing`` records them: ``{"open": id | None, "close": id | None}``; runs
    without it: the tokenizer's, :func:`headsim.stats.batch.target_ids`) and
    :func:`headsim.tokens.punctuation_lookup`. Without a tokenizer, the opening and closing tokens
    count one each per window (none where ``framing`` says the windows have none) and punctuation is
    unknown. Uniform attention over a window's valid keys would put exactly these shares on each kind.
    """
    opens, closes = ((True, True) if framing is None
                     else (framing.get("open") is not None, framing.get("close") is not None))
    if windows is not None and len(windows):
        mask = np.concatenate([np.asarray(m, dtype=bool) for m in windows["attention_mask"]])
        n_tokens = int(mask.sum())
        n_windows = len(windows)
        source = WINDOWS
    elif ds is not None:
        n_tokens, n_windows = int(ds["tokens"].values), int(ds["windows"].values)
        mask = None
        source = f"{STATS_NC} (windows, tokens)"
    else:
        return {"cls": math.nan, "sep": math.nan, "punct": None, "tokens": 0, "method": "no windows"}
    if n_tokens == 0:
        return {"cls": math.nan, "sep": math.nan, "punct": None, "tokens": 0, "method": "no valid tokens"}
    if tokenizer is not None and mask is not None:
        from ..stats.batch import target_ids
        from ..tokens import punctuation_lookup

        ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in windows["input_ids"]])[mask]
        cls, sep = (framing.get("open"), framing.get("close")) if framing is not None else target_ids(tokenizer)
        share = lambda target: 0.0 if target is None else float((ids == target).mean())  # noqa: E731
        lookup = punctuation_lookup(tokenizer)
        punct = lookup[np.clip(ids, 0, len(lookup) - 1)] & (ids < len(lookup))
        return {"cls": share(cls), "sep": share(sep), "punct": float(punct.mean()), "tokens": n_tokens,
                "method": f"token ids of {source} classified with the model's tokenizer, as the statistics do"}
    return {"cls": n_windows * opens / n_tokens, "sep": n_windows * closes / n_tokens, "punct": None, "tokens": n_tokens,
            "method": f"one opening and one closing token per window where the model frames windows with them "
                      f"({source}); punctuation not counted (tokenizer unavailable)"}


def _signed_pct(x: float) -> str:
    """``+12.3%`` / ``−4.5%`` (a true minus sign)."""
    return "n/a" if not _finite(x) else f"{x:+.1%}".replace("-", "\u2212")


def _fmt_pct(x: float) -> str:
    return "n/a" if not _finite(x) else f"{x:.0%}" if abs(x) >= 0.1 else f"{x:.1%}"


# ---------------------------------------------------------------------------------------------
# The claims
# ---------------------------------------------------------------------------------------------


def claim_separators(ds: xr.Dataset, heads: pd.DataFrame, shares: dict) -> Claim:
    L = int(ds.sizes["layer"])
    last = heads[heads["layer"] == L]

    def mean_of(target: str) -> float:
        values = column(last, f"attn_{target}").to_numpy(dtype=np.float64) if len(last) else np.array([])
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    sep, punct, cls = mean_of("sep"), mean_of("punct"), mean_of("cls")
    with_punct = shares.get("punct") is not None and _finite(shares.get("punct"))
    mass = sep + punct if with_punct else sep
    share = (shares["sep"] + shares["punct"]) if with_punct else shares.get("sep", math.nan)
    targets = "[SEP] + punctuation" if with_punct else "[SEP]"
    claim = Claim(
        "c1_separators",
        "§2, Fig 4 and abstract: in the last layers, attention concentrates on sentence separators "
        "([SEP] and punctuation such as '.' and ',').",
        f"Layer {L} (last): attention mass each query gives to {targets}, averaged over queries and heads "
        "(heads.parquet attn_sep + attn_punct = attn_focus / queries), against those tokens' share of the valid "
        f"tokens ({shares.get('method', '')}), i.e. what uniform attention would give. [CLS] reported beside.",
        "", f"holds if the attention mass on {targets} is at least {SEPARATOR_FACTOR:g}× their share of tokens",
        NA,
    )
    if not (_finite(mass) and _finite(share) and share > 0):
        claim.value = "no attention statistics or no token counts in this run"
        return claim
    r = mass / share
    cls_share = shares.get("cls", math.nan)
    claim.value = (f"{mass:.3f} of the attention vs {share:.3f} of the tokens ({r:.1f}×); "
                   f"[CLS]: {cls:.3f} vs {cls_share:.3f}")
    claim.verdict = HOLDS if r >= SEPARATOR_FACTOR else FAILS
    claim.numbers = {"layer": L, "mass": mass, "share": share, "ratio": r, "attn_sep": sep, "attn_punct": punct,
                     "attn_cls": cls, "share_sep": shares.get("sep"), "share_punct": shares.get("punct"),
                     "share_cls": cls_share, "punctuation_counted": with_punct}
    return claim


def claim_repeat_spread(heads: pd.DataFrame) -> Claim:
    claim = Claim(
        "c2_repeat_spread",
        "§3, Fig 6a: heads differ in how strongly they detect repeated tokens; some specialise in "
        "token repetitions, others in connections between different tokens.",
        "p_repeat (share of a head's high-similarity pairs whose two tokens are equal, heads.parquet) over all "
        "heads that have pairs: min, median, max, interquartile range, and the three leading heads.",
        "", f"holds if the leading head's p_repeat is at least {REPEAT_FACTOR:g}× the median head's and at least "
        f"{REPEAT_MARGIN:g} above it", NA)
    h = heads[np.isfinite(heads["p_repeat"])]
    if len(h) < 2:
        claim.value = "fewer than two heads have high-similarity pairs"
        return claim
    p = h["p_repeat"].to_numpy(dtype=np.float64)
    q25, med, q75 = np.percentile(p, [25, 50, 75])
    top = h.sort_values("p_repeat", ascending=False).head(3)
    leaders = ", ".join(f"{head_name(r.layer, r.head)} {r.p_repeat:.2f}" for r in top.itertuples())
    mx, mn = float(p.max()), float(p.min())
    claim.value = f"min {mn:.3f}, median {med:.3f}, max {mx:.3f} (IQR {q75 - q25:.3f}); leading: {leaders}"
    claim.verdict = HOLDS if (mx >= REPEAT_FACTOR * med and mx - med >= REPEAT_MARGIN) else FAILS
    claim.numbers = {"min": mn, "median": float(med), "max": mx, "q25": float(q25), "q75": float(q75),
                     "iqr": float(q75 - q25), "heads": int(len(p)),
                     "leaders": [head_name(r.layer, r.head) for r in top.itertuples()]}
    return claim


def claim_same_sentence(ds: xr.Dataset, heads: pd.DataFrame) -> Claim:
    claim = Claim(
        "c3_same_sentence",
        "§3, Fig 8: heads prefer high-similarity pairs within one sentence, more than the 3–4 sentences of a "
        "window would give by chance.",
        "Per head: p_same_sentence (share of high-similarity pairs inside one sentence, heads.parquet) against "
        "the chance level p_same_sentence_chance (share of all valid pairs inside one sentence); heads above "
        "chance, overall and per layer.",
        "", "holds if more than half of the heads with pairs lie above chance", NA)
    h = heads[np.isfinite(heads["p_same_sentence"]) & np.isfinite(heads["p_same_sentence_chance"])]
    if not len(h):
        claim.value = "no head has high-similarity pairs, or no sentence information"
        return claim
    above = h["p_same_sentence"] > h["p_same_sentence_chance"]
    per_layer = {int(layer): (int(above[g.index].sum()), int(len(g))) for layer, g in h.groupby("layer")}
    chance = float(h["p_same_sentence_chance"].median())
    by_layer = ", ".join(f"L{k} {a}/{n}" for k, (a, n) in per_layer.items())
    claim.value = (f"{int(above.sum())} of {len(h)} heads above chance {chance:.3f} "
                   f"(median head {h['p_same_sentence'].median():.3f}); per layer: {by_layer}")
    claim.verdict = HOLDS if above.sum() > len(h) / 2 else FAILS
    claim.numbers = {"above": int(above.sum()), "heads": int(len(h)), "chance": chance,
                     "median_p_same_sentence": float(h["p_same_sentence"].median()),
                     "per_layer": {str(k): list(v) for k, v in per_layer.items()}}
    return claim


def claim_distances(ds: xr.Dataset, layers: pd.DataFrame) -> Claim:
    L = int(len(layers))
    mid = middle_layer(L)
    claim = Claim(
        "c4_distances",
        "§4, Figs 12–13: high-similarity pairs span long distances in the first layers and short ones in the "
        "middle layers; the last layers are slightly longer again (a summary of the paper puts the drop from "
        f"the first to the last layer near {SUMMARY_DROP:.0%}).",
        f"Mean distance |i − j| of high-similarity pairs per layer (layers.parquet mean_distance); relative drop "
        f"from layer 1 to the middle layer {mid} and to the last layer {L}.",
        "", f"holds if the middle layer's mean distance is at least {DISTANCE_DROP:.0%} below layer 1's "
        "(the first→last drop is reported beside)", NA)
    d = column(layers, "mean_distance").to_numpy(dtype=np.float64)
    if L < 3:
        claim.value = f"the model has {L} layer(s); first, middle and last need at least 3"
        return claim
    first, middle, last = d[0], d[mid - 1], d[L - 1]
    if not (_finite(first) and _finite(middle) and first > 0):
        claim.value = "no high-similarity pairs in the first or the middle layer"
        return claim
    drop_mid = 1.0 - middle / first
    drop_last = 1.0 - last / first if _finite(last) else math.nan
    from ..plots.corpus import random_pair_distance

    random_mean = random_pair_distance(ds)
    per = ", ".join(f"L{k + 1} {x:.1f}" for k, x in enumerate(d))
    claim.value = (f"layer 1 {first:.1f} → layer {mid} {middle:.1f} ({_signed_pct(-drop_mid)}) → layer {L} {last:.1f} "
                   f"({_signed_pct(-drop_last)} vs layer 1); random pairs {random_mean:.1f}; per layer: {per}")
    claim.verdict = HOLDS if drop_mid >= DISTANCE_DROP else FAILS
    claim.numbers = {"first": first, "middle": middle, "last": last, "middle_layer": mid, "drop_middle": drop_mid,
                     "drop_last": drop_last, "random_pairs_mean": random_mean, "per_layer": d.tolist()}
    return claim


def claim_anchor_fraction(layers: pd.DataFrame) -> Claim:
    claim = Claim(
        "c5_anchor_fraction",
        "§3, Fig 11a: each head builds its high-similarity pairs around one token: most of a head's pairs "
        "contain its most common (anchor) token.",
        "Per window and head, the share of high-similarity pairs that contain the most common token; the "
        "median of that share over windows and heads, per layer (layers.parquet median_anchor_fraction).",
        "", f"holds if the median anchor fraction exceeds {ANCHOR_FRACTION:g} in more than half of the layers", NA)
    m = column(layers, "median_anchor_fraction").to_numpy(dtype=np.float64)
    ok = np.isfinite(m)
    if not ok.any():
        claim.value = "no window has high-similarity pairs"
        return claim
    n_above = int((m[ok] > ANCHOR_FRACTION).sum())
    per = ", ".join(f"L{k + 1} {x:.2f}" for k, x in enumerate(m) if np.isfinite(x))
    claim.value = f"{n_above} of {int(ok.sum())} layers above {ANCHOR_FRACTION:g}; per layer: {per}"
    claim.verdict = HOLDS if n_above > ok.sum() / 2 else FAILS
    claim.numbers = {"layers_above": n_above, "layers": int(ok.sum()), "per_layer": m.tolist()}
    return claim


def claim_distinct_anchors(ds: xr.Dataset, layers: pd.DataFrame) -> Claim:
    H = int(ds.sizes["head"])
    claim = Claim(
        "c6_distinct_anchors",
        "§3, Fig 11b: the anchors are unique: the heads of a layer centre on different tokens rather than "
        "all on one common token.",
        f"Per window, the number of distinct anchor tokens across the layer's {H} heads, averaged over windows "
        "(layers.parquet mean_distinct_anchors); 1 would mean all heads share one anchor.",
        "", f"holds if the mean number of distinct anchors is at least half the heads ({H / 2:g} of {H}) in more "
        "than half of the layers", NA)
    m = column(layers, "mean_distinct_anchors").to_numpy(dtype=np.float64)
    ok = np.isfinite(m)
    if not ok.any():
        claim.value = "no window has high-similarity pairs"
        return claim
    n_ok = int((m[ok] >= H / 2).sum())
    per = ", ".join(f"L{k + 1} {x:.1f}" for k, x in enumerate(m) if np.isfinite(x))
    claim.value = f"{n_ok} of {int(ok.sum())} layers with ≥ {H / 2:g} of {H}; per layer: {per}"
    claim.verdict = HOLDS if n_ok > ok.sum() / 2 else FAILS
    claim.numbers = {"layers_ok": n_ok, "layers": int(ok.sum()), "n_heads": H, "per_layer": m.tolist()}
    return claim


def claim_similarity_gap(ds: xr.Dataset) -> Claim:
    claim = Claim(
        "c7_similarity_gap",
        f"§3: most normalised similarity values lie below {LOW_CUT:g}, and few lie between {LOW_CUT:g} and "
        f"{HIGH_CUT:g}, which is why a threshold of 0.3 separates the high-similarity elements.",
        "Histogram of the normalised similarity values S / max S of all valid pairs i < j, all layers and heads "
        f"pooled (stats.nc sim_value_hist): share below {LOW_CUT:g} and share in [{LOW_CUT:g}, {HIGH_CUT:g}).",
        "", f"holds if more than {LOW_SHARE:.0%} of the values lie below {LOW_CUT:g} and fewer than "
        f"{MID_SHARE:.0%} lie in [{LOW_CUT:g}, {HIGH_CUT:g})", NA)
    if "sim_value_hist" not in ds:
        claim.value = "this run has no similarity-value histogram"
        return claim
    hist = ds["sim_value_hist"].values.astype(np.float64)
    edges = sim_edges(ds)
    pooled = hist.sum(axis=tuple(range(hist.ndim - 1)))
    if pooled.sum() <= 0:
        claim.value = "no similarity values were recorded"
        return claim
    below = histogram_share(pooled, edges, -np.inf, LOW_CUT)
    mid = histogram_share(pooled, edges, LOW_CUT, HIGH_CUT)
    above = histogram_share(pooled, edges, HIGH_CUT, np.inf)
    per_layer = [(histogram_share(h, edges, -np.inf, LOW_CUT), histogram_share(h, edges, LOW_CUT, HIGH_CUT))
                 for h in hist.reshape(hist.shape[0], -1, hist.shape[-1]).sum(axis=1)]
    per = ", ".join(f"L{k + 1} {_fmt_pct(b)}/{_fmt_pct(m)}" for k, (b, m) in enumerate(per_layer))
    claim.value = (f"{_fmt_pct(below)} below {LOW_CUT:g}, {_fmt_pct(mid)} in {LOW_CUT:g}–{HIGH_CUT:g}, "
                   f"{_fmt_pct(above)} at or above {HIGH_CUT:g}; per layer (below / between): {per}")
    claim.verdict = HOLDS if (below > LOW_SHARE and mid < MID_SHARE) else FAILS
    claim.numbers = {"below": below, "between": mid, "above": above,
                     "per_layer_below": [b for b, _ in per_layer], "per_layer_between": [m for _, m in per_layer]}
    return claim


def diagonal_profile(attn: np.ndarray, pairs: np.ndarray, max_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean attention per valid cell on each diagonal offset ``j − i`` in ``[-max_offset, max_offset]``.

    ``attn`` is ``[..., T, T]`` summed over windows; ``pairs`` ``[T, T]`` counts windows with both
    positions valid. Returns ``(offsets, means [..., offsets])``.
    """
    offsets = np.arange(-max_offset, max_offset + 1)
    means = []
    for d in offsets:
        num = np.diagonal(attn, offset=int(d), axis1=-2, axis2=-1).sum(axis=-1)
        den = np.diagonal(pairs, offset=int(d)).sum()
        means.append(num / den if den > 0 else np.full(num.shape, np.nan))
    return offsets, np.stack(means, axis=-1)


def claim_diagonal(ds: xr.Dataset) -> Claim:
    name = "attn_sum_top_zeroed"
    claim = Claim(
        "c8_diagonal",
        "§2, Figs 2–3: summed over many inputs, each head's attention is centred on the diagonal; some heads "
        "peak one step off it (the previous or the next token). The most attended columns hide this until they "
        "are zeroed (Fig 3).",
        f"Per head of every layer: attention summed over windows with each window's {ds.attrs.get('top_k_columns', 'top-k')} "
        "most attended columns zeroed (stats.nc attn_sum_top_zeroed), averaged per valid cell along each "
        "diagonal offset j − i with |j − i| ≤ T/4; the offset with the highest mean.",
        "", "holds if more than half of the heads peak at offset −1, 0 or +1", NA)
    if name not in ds or "pair_count_valid" not in ds:
        claim.value = f"this run has no {name}"
        return claim
    a = ds[name]
    if "head" not in a.dims:
        a = a.expand_dims("head")
    if "layer" not in a.dims:
        a = a.expand_dims("layer")
    arr = a.transpose("layer", "head", "query", "key").values.astype(np.float64)
    t = arr.shape[-1]
    offsets, means = diagonal_profile(arr, ds["pair_count_valid"].values.astype(np.float64), max(1, t // 4))
    valid = np.isfinite(means).any(axis=-1) & (np.nan_to_num(means).max(axis=-1) > 0)
    if not valid.any():
        claim.value = "no attention was recorded"
        return claim
    peak = offsets[np.nanargmax(np.where(np.isfinite(means), means, -np.inf), axis=-1)]
    peak_valid = peak[valid]
    near = np.isin(peak_valid, [-1, 0, 1])
    counts = {int(d): int((peak_valid == d).sum()) for d in (-1, 0, 1)}
    others = sorted(set(peak_valid.tolist()) - {-1, 0, 1})
    other_text = ", ".join(f"{int(d):+d} ({int((peak_valid == d).sum())})".replace("-", "\u2212") for d in others)
    claim.value = (f"{int(near.sum())} of {int(valid.sum())} heads peak within ±1 "
                   f"(offset −1: {counts[-1]}, 0: {counts[0]}, +1: {counts[1]}); other peaks, offset (heads): "
                   + (other_text or "none"))
    claim.verdict = HOLDS if near.sum() > valid.sum() / 2 else FAILS
    claim.numbers = {"near": int(near.sum()), "heads": int(valid.sum()), "offset_counts": counts,
                     "peaks": np.where(valid, peak, 0).tolist()}
    return claim


def compute_claims(ds: xr.Dataset, heads: pd.DataFrame, layers: pd.DataFrame, run_meta: dict, *,
                   shares: dict | None = None) -> list[Claim]:
    """Every claim of the paper checked on one run (see the module docstring).

    Args:
        ds: the run's ``stats.nc``.
        heads, layers: ``heads.parquet`` and ``layers.parquet``.
        run_meta: ``run.json`` (model and corpus, for context).
        shares: token shares from :func:`token_shares` (windows + tokenizer); default: one [CLS]
            and one [SEP] per window from ``ds``, punctuation not counted.
    """
    shares = shares if shares is not None else token_shares(None, None, ds)
    return [
        claim_separators(ds, heads, shares),
        claim_repeat_spread(heads),
        claim_same_sentence(ds, heads),
        claim_distances(ds, layers),
        claim_anchor_fraction(layers),
        claim_distinct_anchors(ds, layers),
        claim_similarity_gap(ds),
        claim_diagonal(ds),
    ]


def claims_frame(claims: list[Claim]) -> pd.DataFrame:
    """The claims as a table (the ``numbers`` left out)."""
    return pd.DataFrame([{k: v for k, v in c.to_dict().items() if k != "numbers"} for c in claims],
                        columns=["id", "claim", "measure", "value", "criterion", "verdict"])
