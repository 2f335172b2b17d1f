"""Encoder features for segmentation: one streamed encoder pass, unit vectors, sentence embeddings.

The two functions here that run the model are :func:`encoder_pass` (head outputs and column
attention of overlapping windows) and :func:`sentence_embeddings` (one mean-pooled, normalised
embedding per sentence, the sentence-transformers recipe of the embedded MiniLM). Everything else
in :mod:`headsim.segmentation` works on their outputs.

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

import numpy as np
import torch

from ..model.embed import embed_texts
from ..model.tap import Tap
from ..views import causal_chance
from ..errors import require
from ..model.load import LoadedModel

__all__ = ["PassSpec", "TokenBlock", "doc_unit_vectors", "encoder_pass", "sentence_embeddings", "unit_vectors"]

TOKENIZE_CHARS = 20_000  # characters tokenized at a time (a 10 MB text never goes to the tokenizer whole)
_WS = re.compile(r"\s")


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
                if loaded.arch.causal:  # early columns are seen by more rows: score against chance
                    colsum = colsum / (causal_chance(valid) * probs.shape[1]).clamp_min(1e-12).to(colsum.dtype)
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
# Unit features
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


def doc_unit_vectors(loaded: LoadedModel, units: Sequence[str], heads: Sequence[tuple[int, int]],
                     seq_len: int = 256, stride: int = 192, batch: int = 16) -> np.ndarray:
    """Mean (cosine-normalised) output vector of each unit for ``heads``: ``[n, len(heads) * d]``.

    The units are joined by single spaces (stripped sentences, as the benchmark gives them).
    """
    text = " ".join(units)
    starts = np.cumsum([0] + [len(u) + 1 for u in units[:-1]])
    spec = PassSpec(heads=tuple(heads), seq_len=seq_len, stride=stride, batch=batch, norm="cosine")
    return unit_vectors(encoder_pass(loaded, text, spec, starts), len(units), len(heads) * loaded.d_head)


def sentence_embeddings(loaded: LoadedModel, sentences: Sequence[str], *, batch: int = 32,
                        max_tokens: int = 256) -> np.ndarray:
    """One unit-length embedding per sentence: ``[n, hidden]`` float32.

    Each sentence is encoded alone ([CLS] sentence [SEP], cut at ``max_tokens``), its last hidden
    states are averaged over its tokens (mask-weighted) and scaled to unit length: the recipe of
    sentence-transformers' all-MiniLM-L6-v2 (mean pooling, then normalisation), so for the
    embedded model this equals ``SentenceTransformer.encode(..., normalize_embeddings=True)``.
    Sentences are batched by length (shortest first) and returned in the input order.
    """
    if len(sentences) == 0:
        return np.zeros((0, int(loaded.model.config.hidden_size)), dtype=np.float32)
    return embed_texts(loaded, list(sentences), batch_size=batch, max_tokens=max_tokens)
