"""Text → fixed-length token windows, framed as the model was trained ([CLS] … [SEP], BOS …, … EOS
or bare text; :class:`Framing`), padded only where text runs out.

Each token keeps its character span in the text it came from and the index of its sentence, so
every statistic can ask "same sentence?" and every view can point back into the text. Windows are
built either per text (a long text is cut into consecutive windows; its last window is padded) or
packed (running text of a whole corpus, windows full; only the very last one is padded).
"""

from __future__ import annotations

import warnings

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .errors import HeadsimError, require
from .sentences import check_splitter, sentence_index, sentence_starts
from .tokens import boundary_ids, token_texts

MIN_SEQ_LEN = 8
TOKENIZE_CHARS = 1 << 16  # characters tokenized together: about 120 windows of 128 tokens
SPECIAL = -1  # sentence id / text index / offset of framing tokens ([CLS], [SEP], BOS, EOS) and padding


@dataclass
class TokenStream:
    """The tokens of one text, without special tokens."""

    ids: np.ndarray  # [n] int64
    offsets: np.ndarray  # [n, 2] int64 character spans
    sentences: np.ndarray  # [n] int64 sentence index within the text
    text_index: int


@dataclass
class Windows:
    """A batch of windows; every array has the window axis first (W) and tokens second (T)."""

    input_ids: np.ndarray  # [W, T] int64
    attention_mask: np.ndarray  # [W, T] int64: 1 for [CLS], text tokens and [SEP]; 0 for padding
    offsets: np.ndarray  # [W, T, 2] int64 character span in texts[text_index]; -1 for special/pad
    sentence_ids: np.ndarray  # [W, T] int64 sentence number within the window (0, 1, …); -1 special/pad
    text_index: np.ndarray  # [W, T] int64 which input text the token came from; -1 special/pad
    tokens: list[list[str]] = field(default_factory=list)  # token strings, padding included

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[1])

    def select(self, index) -> "Windows":
        """Windows at ``index`` (a slice or integer array)."""
        idx = np.arange(len(self))[index]
        tokens = [self.tokens[i] for i in np.atleast_1d(idx)] if self.tokens else []
        return Windows(self.input_ids[idx], self.attention_mask[idx], self.offsets[idx],
                       self.sentence_ids[idx], self.text_index[idx], tokens)

    @staticmethod
    def concat(parts: list["Windows"]) -> "Windows":
        """One batch from several with the same ``seq_len``."""
        require(len(parts) > 0, "no windows to concatenate", "pass at least one batch")
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return Windows(cat("input_ids"), cat("attention_mask"), cat("offsets"), cat("sentence_ids"),
                       cat("text_index"), [t for p in parts for t in p.tokens])


@dataclass(frozen=True)
class Framing:
    """How a window is framed: an opening token (``None``: none), the text, a closing token
    (``None``: none), then padding with ``pad`` (never seen by a statistic: the mask hides it)."""

    open: int | None
    close: int | None
    pad: int

    @property
    def specials(self) -> int:
        """Framing tokens per window."""
        return int(self.open is not None) + int(self.close is not None)

    def content(self, seq_len: int) -> int:
        """Text tokens in a window of ``seq_len``."""
        return seq_len - self.specials

    @classmethod
    def of_tokenizer(cls, tokenizer) -> Framing:
        """[CLS] … [SEP] (or <s> … </s>): the encoder framing, from the tokenizer alone."""
        opening, closing = boundary_ids(tokenizer)
        require(opening is not None and closing is not None, "the tokenizer has no [CLS]/[SEP] (or <s>/</s>) tokens",
                "use an encoder tokenizer (BERT, RoBERTa) that defines them, or pass the model's framing")
        return cls(opening, closing, _pad_id(tokenizer, None))

    @classmethod
    def for_model(cls, arch, tokenizer) -> Framing:
        """The framing an architecture entry names (:attr:`headsim.model.arch.Arch.framing`)."""
        framing = arch.framing
        if framing == "auto":  # inferred entries: what the tokenizer offers, as the family trains
            opening, closing = boundary_ids(tokenizer)  # [CLS]/[SEP] where the tokenizer has them, else BOS/EOS
            framing = ("bos" if tokenizer.bos_token_id is not None else "none") if arch.causal else (
                "cls_sep" if opening is not None and closing is not None else "none")
        if framing == "cls_sep":
            return cls.of_tokenizer(tokenizer)
        if framing == "bos":
            bos = tokenizer.bos_token_id
            require(bos is not None, f"the {arch.family} tokenizer has no BOS token", "use the model's own tokenizer")
            return cls(int(bos), None, _pad_id(tokenizer, bos))
        if framing == "eos":
            eos = tokenizer.eos_token_id
            require(eos is not None, f"the {arch.family} tokenizer has no EOS token", "use the model's own tokenizer")
            return cls(None, int(eos), _pad_id(tokenizer, eos))
        return cls(None, None, _pad_id(tokenizer, 0))


def _pad_id(tokenizer, fallback: int | None) -> int:
    """The tokenizer's padding id; decoders often have none, and any id does behind the mask."""
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else fallback
    if pad is None:
        raise HeadsimError("the tokenizer has no padding token", "use an encoder tokenizer (BERT, RoBERTa) that defines one")
    return int(pad)


def check_seq_len(seq_len: int, max_seq_len: int, extrapolates: bool = False) -> int:
    """Validate a window length against the model's position limit.

    A window longer than the limit is an error naming both numbers, or, for a family built to
    extrapolate (``extrapolates``: rotary positions), a warning naming them."""
    require(isinstance(seq_len, (int, np.integer)) and not isinstance(seq_len, bool) and seq_len >= MIN_SEQ_LEN,
            f"seq_len {seq_len} is outside {MIN_SEQ_LEN}..{max_seq_len}",
            f"choose a window length between {MIN_SEQ_LEN} and this model's maximum {max_seq_len} (the paper uses 128)")
    if seq_len > max_seq_len:
        if not extrapolates:
            raise HeadsimError(f"seq_len {seq_len} is longer than this model's position limit of {max_seq_len} tokens",
                               f"choose a window length of at most {max_seq_len} (the paper uses 128)")
        warnings.warn(f"seq_len {seq_len} is longer than this model's position limit of {max_seq_len} tokens; its "
                      "rotary positions extrapolate beyond what it was trained on", stacklevel=2)
    return int(seq_len)


def check_workers(workers: int) -> int:
    """Windowing processes: 0 (this thread) or more, or a clear error."""
    ok = isinstance(workers, (int, np.integer)) and not isinstance(workers, bool) and workers >= 0
    require(ok, f"workers {workers!r} must be 0 or more", "pass 0 (windowing in this thread) or a number of windowing processes")
    return int(workers)


def check_texts(texts: str | Iterable[str]) -> list[str]:
    """A list of non-empty texts, or a clear error."""
    items = [texts] if isinstance(texts, str) else list(texts)
    require(len(items) > 0, "no text given", "pass at least one non-empty text")
    for i, t in enumerate(items):
        which = "the text" if len(items) == 1 else f"text {i}"
        require(isinstance(t, str), f"{which} is a {type(t).__name__}, not a string", "pass str objects")
        require(t.strip() != "", f"{which} is empty or whitespace only", "pass text with at least one word")
    return items


def encode(tokenizer, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Token ids and character offsets of ``texts`` without special tokens.

    ``tokenizer`` is a fast Hugging Face tokenizer or its Rust ``tokenizers.Tokenizer`` (what the
    windowing workers hold); both give the same encodings.
    """
    return [(e.ids, e.offsets) for e in _whole_texts(tokenizer).encode_batch(texts, add_special_tokens=False)]


def token_counts(tokenizer, texts: list[str]) -> list[int]:
    """Tokens in each of ``texts`` without special tokens (as :func:`encode`, without building its lists)."""
    return [len(e) for e in _whole_texts(tokenizer).encode_batch(texts, add_special_tokens=False)]


def _whole_texts(tokenizer):
    """The Rust tokenizer behind ``tokenizer``, set to neither truncate nor pad."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if backend.truncation is not None:  # whole texts: windows are cut here, never by the tokenizer
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    return backend


def tokenize(texts: list[str], tokenizer, *, first_index: int = 0, sentence_splitter: str = "pysbd") -> list[TokenStream]:
    """Tokenize texts without special tokens, keeping offsets and sentence indices."""
    streams = []
    for i, ((ids, offs), text) in enumerate(zip(encode(tokenizer, texts), texts)):
        offsets = np.asarray(offs, dtype=np.int64).reshape(-1, 2)
        starts = sentence_starts(text, sentence_splitter)
        streams.append(TokenStream(np.asarray(ids, dtype=np.int64), offsets,
                                   sentence_index(offsets[:, 0], starts), first_index + i))
    return streams


_WORKER: dict = {}


def _start_worker(tokenizer_json: str, sentence_splitter: str) -> None:
    from tokenizers import Tokenizer

    from .sentences import import_punkt_alone

    if sentence_splitter == "punkt":
        import_punkt_alone()  # a worker needs only Punkt of NLTK (its whole import takes seconds)
    _WORKER.update(tokenizer=Tokenizer.from_str(tokenizer_json), splitter=sentence_splitter)


def _tokenize_in_worker(texts: list[str], first_index: int) -> list[TokenStream]:
    return tokenize(texts, _WORKER["tokenizer"], first_index=first_index, sentence_splitter=_WORKER["splitter"])


def _parallel_streams(batches: Iterator[tuple[list[str], int]], tokenizer, sentence_splitter: str,
                      workers: int) -> Iterator[TokenStream]:
    """:func:`tokenize` of each batch in ``workers`` processes, in order, a bounded number in flight."""
    from .workpool import OrderedPool

    backend = getattr(tokenizer, "backend_tokenizer", None)
    require(backend is not None, "parallel windowing needs a fast (Rust) tokenizer",
            "load the model's fast tokenizer, or use one windowing worker")
    with OrderedPool(workers, _start_worker, (backend.to_str(), sentence_splitter)) as pool:
        for streams in pool.map(_tokenize_in_worker, batches):
            yield from streams


def _chunks(streams: Iterable[TokenStream], content: int, pack: bool) -> Iterator[list[tuple[TokenStream, int, int]]]:
    """Pieces (stream, start, stop) that fill one window each."""
    pending: list[tuple[TokenStream, int, int]] = []
    room = content
    for s in streams:
        pos, n = 0, len(s.ids)
        while pos < n:
            take = min(room, n - pos)
            pending.append((s, pos, pos + take))
            pos += take
            room -= take
            if room == 0:
                yield pending
                pending, room = [], content
        if not pack and pending:
            yield pending
            pending, room = [], content
    if pending:
        yield pending


def _assemble(pieces: list[list[tuple[TokenStream, int, int]]], seq_len: int, tokenizer, framing: Framing,
              token_strings: bool = True) -> Windows:
    w = len(pieces)
    start = int(framing.open is not None)
    ids = np.full((w, seq_len), framing.pad, dtype=np.int64)
    offsets = np.full((w, seq_len, 2), SPECIAL, dtype=np.int64)
    sent = np.full((w, seq_len), SPECIAL, dtype=np.int64)
    tidx = np.full((w, seq_len), SPECIAL, dtype=np.int64)
    lengths = np.empty(w, dtype=np.int64)
    for r, window in enumerate(pieces):
        pos = start
        for s, a, b in window:
            k = b - a
            ids[r, pos: pos + k] = s.ids[a:b]
            offsets[r, pos: pos + k] = s.offsets[a:b]
            sent[r, pos: pos + k] = s.sentences[a:b]
            tidx[r, pos: pos + k] = s.text_index
            pos += k
        lengths[r] = pos - start
    rows = np.arange(w)
    if framing.open is not None:
        ids[:, 0] = framing.open
    if framing.close is not None:
        ids[rows, lengths + start] = framing.close
    column = np.arange(seq_len)
    mask = (column < lengths[:, None] + framing.specials).astype(np.int64)
    body = (column >= start) & (column < lengths[:, None] + start)
    # renumber (text, sentence) pairs 0, 1, … within each window in reading order: along a window the
    # pieces come in stream order and a stream's sentence indices never decrease, so the pair's key
    # never decreases and its rank is the count of changes so far
    key = tidx * (1 << 32) + sent
    change = np.zeros((w, seq_len), dtype=bool)
    change[:, 1:] = (key[:, 1:] != key[:, :-1]) & body[:, :-1]
    sent[body] = np.cumsum(change & body, axis=1)[body]
    tokens = [token_texts(tokenizer, row.tolist()) for row in ids] if token_strings else []
    return Windows(ids, mask, offsets, sent, tidx, tokens)


def iter_windows(
    texts: Iterable[str],
    tokenizer,
    seq_len: int = 128,
    *,
    pack: bool = False,
    batch_windows: int = 64,
    sentence_splitter: str = "pysbd",
    tokenize_batch: int = 32,
    workers: int = 0,
    token_strings: bool = True,
    framing: Framing | None = None,
    limit: int | None = None,
) -> Iterator[Windows]:
    """Stream windows in batches of ``batch_windows`` from an iterable of texts.

    Args:
        texts: the texts (any iterable; read lazily).
        tokenizer: a fast Hugging Face tokenizer.
        seq_len: tokens per window including its framing tokens ([CLS] and [SEP] for encoders).
        pack: ``False``: each text starts a new window (its last one padded); ``True``: running
            text across texts, every window full except the last of the stream.
        batch_windows: windows per yielded batch (the last batch may be smaller).
        sentence_splitter: see :func:`headsim.sentences.sentence_starts`.
        tokenize_batch: texts tokenized (and sentence-split) together (fewer when they reach
            :data:`TOKENIZE_CHARS` characters).
        workers: processes that tokenize and split sentences (the slow part: pySBD); 0 does it in
            the calling thread. A process keeps pure-Python sentence splitting off the interpreter
            lock the model's thread needs. Windows are the same for any number of workers.
        token_strings: fill :attr:`Windows.tokens` with each token as text (:func:`headsim.tokens.token_texts`;
            views need them; corpus statistics do not).
        framing: how windows are framed (``None``: [CLS] … [SEP] from the tokenizer; pass
            ``loaded.framing`` for a model of any family).
        limit: the most windows to yield (``None``: all); the texts are read, tokenized and
            sentence-split no further than those windows need, and no batch holds more.
    """
    require(isinstance(seq_len, (int, np.integer)) and seq_len >= MIN_SEQ_LEN,
            f"seq_len {seq_len} is below {MIN_SEQ_LEN}",
            f"choose a window length of at least {MIN_SEQ_LEN} tokens (the paper uses 128)")
    framing = Framing.of_tokenizer(tokenizer) if framing is None else framing
    check_workers(workers)
    check_splitter(sentence_splitter)  # here, not first inside a worker process

    def text_batches() -> Iterator[tuple[list[str], int]]:
        buf: list[str] = []
        index = chars = 0
        for text in texts:
            buf.append(text)
            chars += len(text)
            if len(buf) == tokenize_batch or chars >= TOKENIZE_CHARS:  # little work ahead of the model
                yield buf, index
                index += len(buf)
                buf, chars = [], 0
        if buf:
            yield buf, index

    if workers >= 1:
        streams = _parallel_streams(text_batches(), tokenizer, sentence_splitter, int(workers))
    else:
        streams = (s for buf, first in text_batches()
                   for s in tokenize(buf, tokenizer, first_index=first, sentence_splitter=sentence_splitter))
    yield from pack_windows(streams, seq_len, tokenizer, framing, pack=pack, batch_windows=batch_windows,
                            token_strings=token_strings, limit=limit)


def _clip(streams: Iterable[TokenStream], skip: int, take: int | None) -> Iterator[TokenStream]:
    """The ``take`` tokens (``None``: all) of ``streams`` after the first ``skip``, as (partial) streams."""
    for s in streams:
        if take == 0:
            return
        n = len(s.ids)
        a = min(skip, n)
        b = n if take is None else min(n, a + take)
        skip -= a
        if b > a:
            yield s if (a, b) == (0, n) else TokenStream(s.ids[a:b], s.offsets[a:b], s.sentences[a:b], s.text_index)
        if take is not None:
            take -= b - a


def pack_windows(streams: Iterable[TokenStream], seq_len: int, tokenizer, framing: Framing, *, pack: bool = True,
                 batch_windows: int = 64, skip: int = 0, take: int | None = None,
                 token_strings: bool = True, limit: int | None = None) -> Iterator[Windows]:
    """Token streams → framed windows in batches of ``batch_windows`` (the one cutting path of
    :func:`iter_windows`).

    ``skip`` and ``take`` cut the running text first: the ``take`` tokens (``None``: all) after the
    first ``skip``. With ``pack=True`` and ``skip`` a multiple of ``framing.content(seq_len)``, the
    windows are exactly those of the whole stream from window ``skip // content`` on (how a share of a
    packed corpus is windowed on its own, :mod:`headsim.runs.ray`). ``limit``: the most windows in
    all; no stream after the one that completes the last of them is read.
    """
    if limit is not None:
        require(int(limit) >= 1, f"limit {limit!r} must be 1 or more", "pass the number of windows wanted (or None)")
        batch_windows = min(batch_windows, int(limit))
    batch: list = []
    made = 0
    for window in _chunks(_clip(streams, skip, take), framing.content(seq_len), pack):
        batch.append(window)
        made += 1
        if len(batch) == batch_windows or made == limit:
            yield _assemble(batch, seq_len, tokenizer, framing, token_strings)
            batch = []
        if made == limit:
            return
    if batch:
        yield _assemble(batch, seq_len, tokenizer, framing, token_strings)


def make_windows(texts: str | Iterable[str], tokenizer, seq_len: int = 128, *, pack: bool = False,
                 sentence_splitter: str = "pysbd", framing: Framing | None = None) -> Windows:
    """All windows of ``texts`` in one batch (see :func:`iter_windows`)."""
    items = check_texts(texts)
    parts = list(iter_windows(items, tokenizer, seq_len, pack=pack, batch_windows=1 << 30,
                              sentence_splitter=sentence_splitter, framing=framing))
    require(len(parts) > 0, "the text produced no tokens", "pass text the tokenizer can read")
    return Windows.concat(parts)


#: the rows of a run's ``windows.parquet`` (:func:`windows_table`); every part of the file is written with it,
#: so the file's bytes do not depend on whether its rows went through a checkpoint (read back from Parquet,
#: a list column's item is named ``element``)
WINDOWS_SCHEMA = pa.schema([("window", pa.int64()), ("input_ids", pa.list_(pa.int32())),
                            ("attention_mask", pa.list_(pa.int8())), ("sentence_ids", pa.list_(pa.int32()))])


def windows_table(start: int, input_ids: np.ndarray, attention_mask: np.ndarray, sentence_ids: np.ndarray) -> pa.Table:
    """Rows for a run's ``windows.parquet`` (:data:`WINDOWS_SCHEMA`), numbered from ``start``."""
    n = input_ids.shape[0]

    def lists(a: np.ndarray, t: type) -> pa.ListArray:  # one list per row, over the array's own buffer
        a = np.ascontiguousarray(a, dtype=t)
        return pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * a.shape[1]), pa.array(a.reshape(-1)))

    return pa.table({
        "window": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "input_ids": lists(input_ids, np.int32),
        "attention_mask": lists(attention_mask, np.int8),
        "sentence_ids": lists(sentence_ids, np.int32),
    }, schema=WINDOWS_SCHEMA)
