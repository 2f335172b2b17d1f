"""Segmentation from one encoder pass: separator columns cut sentences, head-output similarity groups them.

The paper (Halevi et al., §2 and Fig 5) observes that attention forms *columns* on separator
tokens and that the blocks those columns delineate on a head's context similarity matrix
``S = Z·Zᵀ`` group tokens that belong together. This module turns that into a segmenter:

* ``level="sentence"``: a token ends a sentence when the attention its column receives in one
  layer (summed over heads and query rows, divided by the largest non-special column of the
  window, [CLS]/[SEP] excluded) exceeds a threshold; the layer, the threshold and which tokens
  may be separators are chosen on development text (:mod:`headsim.segmentation.selection`).
  When the model shows no separator columns the fallback is pySBD.
* ``level="topic"``: adjacent sentence units are grouped by the block-averaged context
  similarity of a few heads chosen on development documents. The block average of ``S`` over
  the tokens of units ``a`` and ``b`` is exactly ``m_a·m_b``, the dot product of the units' mean
  head-output vectors, so a unit is represented by its mean vector per chosen head and a gap is
  scored TextTiling-style: similarity of the ``k`` units before and after it, then depth.

Long texts are cut into overlapping windows (stride below the window length); every token's
features are the centrality-weighted average over the windows that contain it (a token in the
middle of a window counts most), so boundaries agree across windows. Windows are streamed in
batches and tokens are finalised as soon as no later window can contain them: memory is bounded
by a batch of windows plus one float per unit gap, whatever the text's length. Each window is
encoded once, only up to the last layer the segmenter reads (the forward stops there).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..model.tap import Tap
from ..errors import HeadsimError, require
from ..models import LoadedModel, as_loaded
from .types import Segment, boundaries_to_segments

__all__ = [
    "LEVELS",
    "HeadsimSegmenter",
    "benchmark_method",
    "benchmark_sentence_method",
    "depth_scores",
    "encoder_pass",
    "gap_similarity",
    "pick_boundaries",
    "segment",
    "sentence_cuts",
]

LEVELS = ("topic", "sentence")
TOKENIZE_CHARS = 20_000  # characters tokenized at a time (a 10 MB text never goes to the tokenizer whole)
_WS = re.compile(r"\s")
_NEWLINE_RUN = re.compile(r"\n\s*")
_CLOSERS = set("\"'”’)]}»")


# --------------------------------------------------------------------------------------------
# One streamed encoder pass: tokens → overlapping windows → per-token features
# --------------------------------------------------------------------------------------------


@dataclass
class TokenBlock:
    """Finalised tokens, in text order, with their window-averaged features.

    Attributes:
        index: ``[m]`` global token index (0-based, special tokens not counted).
        ids: ``[m]`` token ids.
        start, end: ``[m]`` character span of each token in the text.
        unit: ``[m]`` unit index of each token (``-1`` when no units were given).
        vec: ``[m, F]`` the chosen heads' output vectors (per head ``d`` values, heads in the order
            asked), or ``None``.
        col: ``[m, C]`` normalised column attention in each asked layer, or ``None``.
    """

    index: np.ndarray
    ids: np.ndarray
    start: np.ndarray
    end: np.ndarray
    unit: np.ndarray
    vec: np.ndarray | None
    col: np.ndarray | None

    def __len__(self) -> int:
        return int(self.index.shape[0])


def _token_chunks(text: str, tokenizer, unit_starts: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(ids, offsets [m, 2], unit ids)`` of ``text``, tokenized a block of characters at a time.

    Blocks are cut at a whitespace character, which no wordpiece (nor a byte-level BPE token that
    carries its leading space) straddles; a 20,000-character run without whitespace is cut anyway.
    """
    a, n = 0, len(text)
    while a < n:
        b = n
        if n - a > TOKENIZE_CHARS:
            m = _WS.search(text, a + TOKENIZE_CHARS, a + 2 * TOKENIZE_CHARS)
            b = m.start() if m else a + TOKENIZE_CHARS  # no whitespace for 20k characters: cut anyway
        enc = tokenizer(text[a:b], add_special_tokens=False, return_offsets_mapping=True,
                        return_attention_mask=False, return_token_type_ids=False, verbose=False)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2) + a
        if unit_starts is None:
            units = np.full(ids.shape, -1, dtype=np.int64)
        else:
            units = np.searchsorted(unit_starts, offsets[:, 0], side="right").astype(np.int64) - 1
        if len(ids):
            yield ids, offsets, units
        a = b


def _centrality(n: int) -> np.ndarray:
    """Weight of each of ``n`` window positions: distance to the nearer edge, at least 1."""
    p = np.arange(n)
    return np.minimum(p + 1, n - p).astype(np.float32)


@dataclass
class PassSpec:
    """What one encoder pass captures.

    Attributes:
        heads: ``(layer, head)`` pairs (0-based) whose output vectors become token features.
        col_layers: 0-based layers whose column attention is scored.
        seq_len: tokens per window including [CLS] and [SEP].
        stride: content tokens between the starts of consecutive windows (< ``seq_len - 2``).
        batch: windows per forward pass.
        norm: ``"cosine"``: each token's head vector is scaled to unit length before averaging
            (block averages of cosine similarity); ``"dot"``: raw vectors (the paper's ``Z·Zᵀ``).
    """

    heads: tuple[tuple[int, int], ...] = ()
    col_layers: tuple[int, ...] = ()
    seq_len: int = 256
    stride: int = 192
    batch: int = 16
    norm: str = "cosine"


def encoder_pass(loaded: LoadedModel, text: str, spec: PassSpec, unit_starts: Sequence[int] | None = None) -> Iterator[TokenBlock]:
    """Stream ``text`` through the encoder once and yield its tokens with features, in order.

    Args:
        loaded: the model.
        text: any text with at least one token.
        spec: what to capture, window geometry and batch size.
        unit_starts: sorted character offsets where units start (tokens get the unit index), or
            ``None``.
    """
    framing = loaded.framing
    content = framing.content(spec.seq_len)
    first = int(framing.open is not None)  # position of a window's first text token
    require(content >= 2, f"seq_len {spec.seq_len} is too short", "use a window of at least 4 tokens")
    require(spec.seq_len <= loaded.max_seq_len, f"seq_len {spec.seq_len} exceeds the model's {loaded.max_seq_len}",
            f"use a window of at most {loaded.max_seq_len} tokens")
    stride = int(min(max(spec.stride, 1), content))
    heads = [(int(l_), int(h)) for l_, h in spec.heads]
    col_layers = sorted({int(x) for x in spec.col_layers})
    head_layers = sorted({l_ for l_, _ in heads})
    for l_ in head_layers + col_layers:
        require(0 <= l_ < loaded.n_layers, f"layer {l_ + 1} is out of range", f"this model has layers 1..{loaded.n_layers}")
    for _, h in heads:
        require(0 <= h < loaded.n_heads, f"head {h + 1} is out of range", f"this model has heads 1..{loaded.n_heads}")
    tap = Tap(loaded, layers=head_layers + col_layers, attention=bool(col_layers), stop_early=True)
    d = loaded.d_head
    n_feat = len(heads) * d
    dev = loaded.device
    starts_arr = None if unit_starts is None else np.asarray(unit_starts, dtype=np.int64)

    # buffers of tokens not yet finalised (global indices base .. base + len - 1)
    base = 0
    b_ids = np.zeros(0, dtype=np.int64)
    b_off = np.zeros((0, 2), dtype=np.int64)
    b_unit = np.zeros(0, dtype=np.int64)
    acc_vec = torch.zeros((0, n_feat), dtype=torch.float32)
    acc_col = torch.zeros((0, len(col_layers)), dtype=torch.float32)
    acc_w = torch.zeros(0, dtype=torch.float32)

    def run(batch_starts: list[tuple[int, int]]) -> None:
        nonlocal acc_vec, acc_col, acc_w
        nb = len(batch_starts)
        width = max(n for _, n in batch_starts) + framing.specials
        ids = np.full((nb, width), framing.pad, dtype=np.int64)
        mask = np.zeros((nb, width), dtype=np.int64)
        for r, (s, n) in enumerate(batch_starts):
            if framing.open is not None:
                ids[r, 0] = framing.open
            ids[r, first: first + n] = b_ids[s - base: s - base + n]
            if framing.close is not None:
                ids[r, first + n] = framing.close
            mask[r, : n + framing.specials] = 1
        got = tap.run(ids, mask).layers
        # positions of content tokens
        rows, cols, glob, wts = [], [], [], []
        for r, (s, n) in enumerate(batch_starts):
            rows.append(np.full(n, r))
            cols.append(np.arange(first, first + n))
            glob.append(np.arange(s, s + n) - base)
            wts.append(_centrality(n))
        rows_t = torch.as_tensor(np.concatenate(rows), device=dev)
        cols_t = torch.as_tensor(np.concatenate(cols), device=dev)
        glob_t = torch.as_tensor(np.concatenate(glob))
        w_t = torch.as_tensor(np.concatenate(wts))
        acc_w.index_add_(0, glob_t, w_t)
        if heads:
            parts = []
            for l_ in head_layers:
                hs = [h for ll, h in heads if ll == l_]
                z = got[l_].head_outputs[:, hs].float()  # [B, h, T, d]
                if spec.norm == "cosine":
                    z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-6)
                parts.append((hs, z))
            # keep the order of ``heads``
            by_layer = {l_: (hs, z) for l_, (hs, z) in zip(head_layers, parts)}
            zs = [by_layer[l_][1][:, by_layer[l_][0].index(h)] for l_, h in heads]  # each [B, T, d]
            feat = torch.cat(zs, dim=-1)[rows_t, cols_t].cpu()  # [N, F]
            acc_vec.index_add_(0, glob_t, feat * w_t[:, None])
        if col_layers:
            valid = torch.as_tensor(mask, device=dev).bool()
            content_mask = torch.zeros_like(valid)
            for r, (_, n) in enumerate(batch_starts):
                content_mask[r, first: first + n] = True
            scores = []
            for l_ in col_layers:
                probs = got[l_].attention  # [B, H, T, T]
                colsum = (probs * valid[:, None, :, None]).sum(dim=(1, 2))  # [B, T]
                colsum = torch.where(content_mask, colsum, torch.zeros_like(colsum))
                peak = colsum.amax(dim=1, keepdim=True).clamp_min(1e-12)
                scores.append(colsum / peak)
            sc = torch.stack(scores, dim=-1)[rows_t, cols_t].float().cpu()  # [N, C]
            acc_col.index_add_(0, glob_t, sc * w_t[:, None])

    def finalise(upto: int) -> TokenBlock | None:
        """Hand out tokens with global index < ``upto`` and drop them from the buffers."""
        nonlocal base, b_ids, b_off, b_unit, acc_vec, acc_col, acc_w
        m = upto - base
        if m <= 0:
            return None
        w = acc_w[:m].clamp_min(1e-12)
        block = TokenBlock(
            index=np.arange(base, upto), ids=b_ids[:m], start=b_off[:m, 0], end=b_off[:m, 1], unit=b_unit[:m],
            vec=(acc_vec[:m] / w[:, None]).numpy() if heads else None,
            col=(acc_col[:m] / w[:, None]).numpy() if col_layers else None,
        )
        b_ids, b_off, b_unit = b_ids[m:], b_off[m:], b_unit[m:]
        acc_vec, acc_col, acc_w = acc_vec[m:].clone(), acc_col[m:].clone(), acc_w[m:].clone()
        base = upto
        return block

    total = 0  # tokens seen so far
    pos = 0  # start of the next regular window
    last_end = 0  # end of the last window run
    pending: list[tuple[int, int]] = []

    def flush(final: bool) -> Iterator[TokenBlock]:
        nonlocal pending, last_end
        if pending:
            run(pending)
            last_end = max(last_end, max(s + n for s, n in pending))
            pending = []
        if final:
            upto = total
        else:
            upto = min(pos, total - content)
        blk = finalise(upto)
        if blk is not None:
            yield blk

    for ids, offs, units in _token_chunks(text, loaded.tokenizer, starts_arr):
        b_ids = np.concatenate([b_ids, ids])
        b_off = np.concatenate([b_off, offs])
        b_unit = np.concatenate([b_unit, units])
        k = len(ids)
        acc_vec = torch.cat([acc_vec, torch.zeros((k, n_feat))])
        acc_col = torch.cat([acc_col, torch.zeros((k, len(col_layers)))])
        acc_w = torch.cat([acc_w, torch.zeros(k)])
        total += k
        while pos + content <= total:
            pending.append((pos, content))
            pos += stride
            if len(pending) == spec.batch:
                yield from flush(False)
    require(total > 0, "the text produced no tokens", "pass text the tokenizer can read")
    if last_end < total and not any(s + n >= total for s, n in pending):
        s = max(0, total - content)
        if not pending or pending[-1][0] != s:
            pending.append((s, total - s))
    yield from flush(True)


# --------------------------------------------------------------------------------------------
# Topic level: unit vectors → gap similarity → depth → boundaries
# --------------------------------------------------------------------------------------------


def unit_vectors(blocks: Iterator[TokenBlock], n_units: int, n_feat: int) -> np.ndarray:
    """Mean feature vector of each unit ``[n_units, F]`` (zeros for a unit without tokens)."""
    sums = np.zeros((n_units, n_feat), dtype=np.float32)
    counts = np.zeros(n_units, dtype=np.float32)
    for b in blocks:
        keep = b.unit >= 0
        np.add.at(sums, b.unit[keep], b.vec[keep])
        np.add.at(counts, b.unit[keep], 1.0)
    return (sums / np.maximum(counts, 1.0)[:, None]).astype(np.float32)


def gap_similarity(vectors: np.ndarray, n_heads: int, k: int, head_weights: np.ndarray | None = None) -> np.ndarray:
    """Similarity across each of the ``n - 1`` gaps: per head, the cosine between the mean unit
    vectors of the ``k`` units before and the ``k`` after the gap (fewer at the text's ends),
    averaged over heads (optionally weighted). ``vectors`` is ``[n, n_heads * d]``."""
    n = len(vectors)
    if n < 2:
        return np.zeros(0)
    v = vectors.reshape(n, n_heads, -1).astype(np.float64)
    prefix = np.concatenate([np.zeros((1,) + v.shape[1:]), np.cumsum(v, axis=0)])
    g = np.arange(n - 1)
    lo, hi = np.maximum(g + 1 - k, 0), np.minimum(g + 1 + k, n)
    left = (prefix[g + 1] - prefix[lo]) / (g + 1 - lo)[:, None, None]
    right = (prefix[hi] - prefix[g + 1]) / (hi - g - 1)[:, None, None]
    num = (left * right).sum(-1)
    den = np.linalg.norm(left, axis=-1) * np.linalg.norm(right, axis=-1)
    cos = np.divide(num, den, out=np.zeros_like(num), where=den > 0)  # [n-1, heads]
    w = np.ones(n_heads) if head_weights is None else np.asarray(head_weights, dtype=np.float64)
    return cos @ (w / w.sum())


def depth_scores(sim: np.ndarray) -> np.ndarray:
    """TextTiling depth of each gap: climb to the highest similarity on each side, sum the drops."""
    s = np.asarray(sim, dtype=np.float64)
    n = len(s)
    if n == 0:
        return s
    # climb while the similarity keeps rising (Hearst 1997): the peak reached from gap i
    left = s.copy()
    for i in range(1, n):
        if s[i - 1] >= s[i]:
            left[i] = left[i - 1]
    right = s.copy()
    for i in range(n - 2, -1, -1):
        if s[i + 1] >= s[i]:
            right[i] = right[i + 1]
    return (left - s) + (right - s)


def _local_peaks(score: np.ndarray, radius: int) -> np.ndarray:
    """Gaps whose score is the largest within ``radius`` gaps on either side (first of ties)."""
    n = len(score)
    out = []
    for i in range(n):
        lo, hi = max(0, i - radius), min(n, i + radius + 1)
        window = score[lo:hi]
        if score[i] > 0 and score[i] >= window.max() and int(np.argmax(window)) + lo == i:
            out.append(i)
    return np.asarray(out, dtype=np.int64)


def pick_boundaries(score: np.ndarray, n_boundaries: int | None, *, threshold: float | None = None,
                    radius: int = 1, mean_segment_units: float | None = None) -> list[int]:
    """Gaps to cut at from a gap score (higher = stronger boundary).

    With ``n_boundaries``: the strongest local peaks (ties: earlier first), topped up with the
    strongest remaining gaps if there are too few peaks. Without: peaks whose score standardised
    within the text, ``(score - mean) / std``, exceeds ``threshold``; when ``threshold`` is ``None``
    the count comes from ``mean_segment_units`` (units per segment).
    """
    score = np.asarray(score, dtype=np.float64)
    n_gaps = len(score)
    if n_gaps == 0:
        return []
    peaks = _local_peaks(score, radius)
    if n_boundaries is None:
        if threshold is None:
            require(mean_segment_units is not None, "no threshold and no segment length to decide the count",
                    "pass n_segments, or use a fitted configuration")
            n_boundaries = max(0, min(n_gaps, round((n_gaps + 1) / mean_segment_units) - 1))
        else:
            sd = score.std()
            if sd <= 0:
                return []
            z = (score - score.mean()) / sd
            return sorted(int(i) for i in peaks if z[i] > threshold)
    n_boundaries = int(n_boundaries)
    require(0 <= n_boundaries <= n_gaps, f"cannot place {n_boundaries} boundaries between {n_gaps + 1} units",
            f"ask for at most {n_gaps + 1} segments")
    ranked = [int(i) for i in peaks[np.argsort(-score[peaks], kind="stable")]]
    chosen = ranked[:n_boundaries]
    if len(chosen) < n_boundaries:
        taken = set(chosen)
        for i in np.argsort(-score, kind="stable"):
            if len(chosen) >= n_boundaries:
                break
            if int(i) not in taken:
                chosen.append(int(i))
                taken.add(int(i))
    return sorted(chosen)


# --------------------------------------------------------------------------------------------
# Sentence level: separator columns → cut positions
# --------------------------------------------------------------------------------------------

_NON_SPACE = re.compile(r"\S")
_PUNCT_CACHE: dict[tuple[int, str], tuple[Any, np.ndarray]] = {}


CANDIDATES = ("terminal", "punctuation", "any")
_TERMINAL = set(".!?…。！？")


def _candidates(tokenizer, kind: str) -> np.ndarray:
    """Boolean lookup over the vocabulary: tokens that may end a sentence.

    ``"punctuation"``: punctuation-only tokens; ``"terminal"``: tokens made only of sentence-final
    marks (. ! ? … and their CJK forms); ``"any"`` is handled by the caller (every token).
    """
    require(kind in CANDIDATES, f"unknown separator candidates {kind!r}", f"use one of {', '.join(CANDIDATES)}")
    key = (id(tokenizer), kind)
    hit = _PUNCT_CACHE.get(key)
    if hit is None or hit[0] is not tokenizer:
        from ..tokens import punctuation_lookup, token_body

        lookup = punctuation_lookup(tokenizer)
        if kind == "terminal":
            terminal = np.zeros_like(lookup)
            for token, i in tokenizer.get_vocab().items():
                bare = token_body(token)
                if i < len(terminal) and bare and set(bare) <= _TERMINAL:
                    terminal[i] = True
            lookup = terminal & lookup
        hit = (tokenizer, lookup)
        _PUNCT_CACHE[key] = hit
    return hit[1]


def _cut_after(text: str, end: int) -> int | None:
    """Where the next sentence starts if a sentence ends with the token ending at ``end``.

    Closing quotes and brackets (and further . ! ?) after the token stay with the sentence; a cut
    needs whitespace next (never inside "U.S." or "3.5"), and text after it.
    """
    n = len(text)
    while end < n and (text[end] in _CLOSERS or text[end] in ".!?…"):
        end += 1
    if end >= n or not text[end].isspace():
        return None
    m = _NON_SPACE.search(text, end)
    return m.start() if m else None


def newline_cuts(text: str) -> Iterator[int]:
    """Sentence starts forced by newline runs (after the first non-space character), streamed."""
    first = _NON_SPACE.search(text)
    if first is None:
        return
    for m in _NEWLINE_RUN.finditer(text, first.start()):
        if first.start() < m.end() < len(text):
            yield m.end()


def sentence_cuts(text: str, block: TokenBlock, col: int, threshold: float, candidates: str, tokenizer) -> list[int]:
    """Character offsets where a sentence starts after a separator column in ``block``.

    A token is a separator when its normalised column attention in column layer ``col`` exceeds
    ``threshold`` and it is one of the ``candidates`` (:func:`_candidates`; ``"any"``: every token,
    the paper's rule). Newline runs are
    :func:`newline_cuts`.
    """
    hit = block.col[:, col] > threshold
    if candidates != "any":
        lookup = _candidates(tokenizer, candidates)
        ids = np.minimum(block.ids, len(lookup) - 1)
        hit &= lookup[ids]
    cuts = []
    for i in np.flatnonzero(hit):
        c = _cut_after(text, int(block.end[i]))
        if c is not None:
            cuts.append(c)
    return cuts


# --------------------------------------------------------------------------------------------
# The public API
# --------------------------------------------------------------------------------------------


def default_config() -> dict[str, Any]:
    """The shipped configuration (see :mod:`headsim.segmentation.selection`)."""
    from .selection import DEFAULT_CONFIG

    require(bool(DEFAULT_CONFIG), "no fitted default configuration is shipped",
            "run python -m headsim.segmentation.selection --write, or pass config=")
    return DEFAULT_CONFIG


def _load_config(config: dict[str, Any] | str | None) -> dict[str, Any]:
    if config is None:
        return default_config()
    if isinstance(config, dict):
        return config
    import json
    from pathlib import Path

    path = Path(config)
    require(path.is_file(), f"configuration file {str(path)!r} does not exist", "pass a JSON file written by fit")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HeadsimError(f"cannot read configuration {str(path)!r}: {exc}", "pass a JSON file written by fit") from exc


def _check_text(text: Any) -> str:
    require(isinstance(text, str), f"text is a {type(text).__name__}, not a string", "pass a str")
    return text


def sentence_segments(text: str, loaded: LoadedModel, config: dict[str, Any], *, batch: int = 16) -> list[Segment]:
    """Sentences of ``text`` cut at separator columns (or by pySBD where the config says so)."""
    sent = config["sentence"]
    if sent.get("fallback"):
        from .units import sentence_units

        return sentence_units(text)
    spec = PassSpec(col_layers=(int(sent["layer"]),), seq_len=int(config["topic"].get("seq_len", 256)),
                    stride=int(config["topic"].get("stride", 192)), batch=batch)
    cuts: set[int] = set(newline_cuts(text))
    for block in encoder_pass(loaded, text, spec):
        cuts.update(sentence_cuts(text, block, 0, float(sent["threshold"]), sent["candidates"], loaded.tokenizer))
    edges = [0, *sorted(c for c in cuts if 0 < c < len(text)), len(text)]
    return [Segment(a, b, text[a:b]) for a, b in zip(edges, edges[1:]) if b > a]


def topic_gap_scores(text: str, unit_spans: Sequence[tuple[int, int]], loaded: LoadedModel, config: dict[str, Any],
                     *, batch: int = 16) -> np.ndarray:
    """Depth score of each gap between the given units (higher = stronger topic boundary)."""
    from .selection import prepare_units, topic_scores

    topic = config["topic"]
    heads = [tuple(h) for h in topic["heads"]]
    spec = PassSpec(heads=tuple(heads), seq_len=int(topic.get("seq_len", 256)), stride=int(topic.get("stride", 192)),
                    batch=batch, norm="cosine")
    starts = np.asarray([s for s, _ in unit_spans], dtype=np.int64)
    vectors = unit_vectors(encoder_pass(loaded, text, spec, starts), len(unit_spans), len(heads) * loaded.d_head)
    return topic_scores(prepare_units(vectors, len(heads)), int(topic["k"]))


def segment(text: str, model: LoadedModel | str | None = None, level: str = "topic", n_segments: int | None = None,
            *, config: dict[str, Any] | str | None = None, units: str = "pysbd", device: str | None = None,
            batch: int = 16) -> list[Segment]:
    """Cut ``text`` into segments whose concatenation is exactly ``text``.

    Args:
        text: any string; empty or whitespace-only text has no segments to find (``HeadsimError``).
        model: a loaded model or a name for :func:`headsim.load_model` (default: embedded MiniLM).
        level: ``"topic"`` (groups of sentences) or ``"sentence"``.
        n_segments: how many segments to return (at most one per unit); ``None``: the fitted
            threshold decides (topic level) or every separator cuts (sentence level).
        config: a fitted configuration (dict or JSON path); default: the shipped one.
        units: topic level only: ``"pysbd"`` sentences (default) or ``"model"``: the sentence level's
            own separator-column sentences, from the same encoder pass.
        device: ``"cpu"`` / ``"cuda"`` (default: CUDA when available).
        batch: windows per forward pass.

    Returns:
        :class:`~headsim.segmentation.types.Segment` objects (``start``, ``end``, ``text``).
    """
    _check_text(text)
    require(level in LEVELS, f"unknown level {level!r}", f"use one of {', '.join(LEVELS)}")
    require(units in ("pysbd", "model"), f"unknown units {units!r}", "use 'pysbd' or 'model'")
    require(text.strip() != "", "the text is empty or whitespace only", "pass text with at least one word")
    if n_segments is not None:
        require(isinstance(n_segments, (int, np.integer)) and not isinstance(n_segments, bool) and n_segments >= 1,
                f"n_segments {n_segments!r} must be a positive integer", "pass 1 or more, or leave it out")
    require(isinstance(batch, (int, np.integer)) and batch >= 1, f"batch {batch!r} must be a positive integer", "pass e.g. 16")
    cfg = _load_config(config)
    loaded = as_loaded(model, device=device)
    if level == "sentence":
        sentences = sentence_segments(text, loaded, cfg, batch=batch)
        if n_segments is None or n_segments >= len(sentences):
            return sentences
        # keep the n_segments - 1 cuts whose separators are strongest: merge the weakest gaps
        return _merge_to(text, sentences, n_segments)
    if units == "model" and not cfg["sentence"].get("fallback"):
        spans, score = _topic_on_model_units(text, loaded, cfg, batch=batch)
        if len(spans) > 1 and n_segments is not None:
            require(n_segments <= len(spans), f"cannot cut {len(spans)} sentence units into {n_segments} segments",
                    f"ask for at most {len(spans)} segments")
        topic = cfg["topic"]
        gaps = [] if len(spans) <= 1 else pick_boundaries(
            score, None if n_segments is None else n_segments - 1, threshold=topic.get("threshold"),
            mean_segment_units=topic.get("mean_segment_units"))
        return boundaries_to_segments(text, spans, gaps)
    if units == "model":
        unit_segs = sentence_segments(text, loaded, cfg, batch=batch)
    else:
        from .units import sentence_units

        unit_segs = sentence_units(text)
    spans = [(u.start, u.end) for u in unit_segs]
    if len(spans) <= 1:
        return boundaries_to_segments(text, spans, [])
    if n_segments is not None:
        require(n_segments <= len(spans), f"cannot cut {len(spans)} sentence units into {n_segments} segments",
                f"ask for at most {len(spans)} segments")
    score = topic_gap_scores(text, spans, loaded, cfg, batch=batch)
    topic = cfg["topic"]
    gaps = pick_boundaries(score, None if n_segments is None else n_segments - 1, threshold=topic.get("threshold"),
                           mean_segment_units=topic.get("mean_segment_units"))
    return boundaries_to_segments(text, spans, gaps)


def _topic_on_model_units(text: str, loaded: LoadedModel, config: dict[str, Any], *, batch: int = 16
                          ) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Sentence units from separator columns and their topic gap scores, from one encoder pass.

    The pass captures the separator layer's column attention and the topic heads' outputs; tokens
    arrive in order, so each token's sentence is known when it arrives (the cuts before it are).
    """
    import bisect

    from .selection import prepare_units, topic_scores

    topic, sent = config["topic"], config["sentence"]
    heads = [tuple(h) for h in topic["heads"]]
    spec = PassSpec(heads=tuple(heads), col_layers=(int(sent["layer"]),), seq_len=int(topic.get("seq_len", 256)),
                    stride=int(topic.get("stride", 192)), batch=batch, norm="cosine")
    cuts = list(newline_cuts(text))
    seen = set(cuts)
    n_feat = len(heads) * loaded.d_head
    sums: list[np.ndarray] = []
    counts: list[float] = []
    for block in encoder_pass(loaded, text, spec):
        for c in sentence_cuts(text, block, 0, float(sent["threshold"]), sent["candidates"], loaded.tokenizer):
            if c not in seen:
                seen.add(c)
                bisect.insort(cuts, c)
        unit = np.searchsorted(np.asarray(cuts, dtype=np.int64), block.start, side="right")
        top = int(unit.max()) + 1
        while len(sums) < top:
            sums.append(np.zeros(n_feat, dtype=np.float32))
            counts.append(0.0)
        for u in np.unique(unit):
            sel = unit == u
            sums[u] += block.vec[sel].sum(axis=0)
            counts[u] += float(sel.sum())
    edges = [0, *(c for c in cuts if 0 < c < len(text)), len(text)]
    spans = list(zip(edges, edges[1:]))
    while len(sums) < len(spans):
        sums.append(np.zeros(n_feat, dtype=np.float32))
        counts.append(0.0)
    vectors = np.stack(sums) / np.maximum(np.asarray(counts, dtype=np.float32), 1.0)[:, None]
    if len(spans) < 2:
        return spans, np.zeros(0)
    return spans, topic_scores(prepare_units(vectors, len(heads)), int(topic["k"]))


def _merge_to(text: str, sentences: list[Segment], n_segments: int) -> list[Segment]:
    """Merge sentences into ``n_segments`` pieces of nearly equal sentence counts (no scores kept)."""
    from .baselines import even_gaps

    gaps = even_gaps(len(sentences), n_segments - 1)
    return boundaries_to_segments(text, [(s.start, s.end) for s in sentences], gaps)


# --------------------------------------------------------------------------------------------
# Benchmark hooks
# --------------------------------------------------------------------------------------------


class HeadsimSegmenter:
    """Topic segmentation by block-averaged head-output similarity (for the benchmark harness).

    ``fit(dev_docs)`` runs :func:`headsim.segmentation.selection.fit_topic` on the development
    documents only; ``predict(units, n_boundaries)`` encodes the units joined by spaces once
    (overlapping windows, the chosen heads only, the forward stopped after their layer).
    """

    name = "headsim"

    def __init__(self, model: LoadedModel | str | None = None, device: str | None = "cpu", config: dict[str, Any] | None = None) -> None:
        self._loaded = as_loaded(model, device=device)
        if config is None:
            from .selection import DEFAULT_CONFIG

            config = {"topic": dict(DEFAULT_CONFIG["topic"])} if DEFAULT_CONFIG else None
        self._config = config
        if config is not None:
            self._sync()

    def _sync(self) -> None:
        topic = self._config["topic"]
        self.heads = ",".join(f"L{l_ + 1}H{h + 1}" for l_, h in topic["heads"])
        self.k = int(topic["k"])
        self.threshold = "mean-length" if topic.get("threshold") is None else float(topic["threshold"])
        self.seq_len, self.stride = int(topic.get("seq_len", 256)), int(topic.get("stride", 192))

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    def fit(self, dev_docs) -> HeadsimSegmenter:
        from .selection import fit_topic

        self._config = {"topic": fit_topic(list(dev_docs), self._loaded)}
        self._sync()
        return self

    def scores(self, units: list[str]) -> np.ndarray:
        """Depth score of each gap between ``units`` (joined by single spaces)."""
        from .selection import doc_unit_vectors, prepare_units, topic_scores

        topic = self._config["topic"]
        heads = [tuple(h) for h in topic["heads"]]
        vectors = doc_unit_vectors(self._loaded, units, heads, self.seq_len, self.stride)
        return topic_scores(prepare_units(vectors, len(heads)), self.k)

    def predict(self, units: list[str], n_boundaries: int | None = None) -> list[int]:
        from .baselines import check_count

        check_count(len(units), n_boundaries)
        require(self._config is not None, "the segmenter has no configuration", "call fit(dev_docs) first")
        if len(units) < 2:
            return []
        topic = self._config["topic"]
        return pick_boundaries(self.scores(units), n_boundaries, threshold=topic.get("threshold"),
                               mean_segment_units=topic.get("mean_segment_units"))


def benchmark_method() -> HeadsimSegmenter:
    """The topic segmenter the benchmark harness runs (embedded MiniLM on CPU, like the baselines)."""
    return HeadsimSegmenter(device="cpu")


def benchmark_sentence_method():
    """``text -> list[str]``: the sentence level (separator columns, or its documented fallback)."""
    loaded = as_loaded(None, device="cpu")

    def split(text: str) -> list[str]:
        if not text.strip():
            return [text] if text else []
        return [s.text for s in segment(text, loaded, level="sentence")]

    return split
