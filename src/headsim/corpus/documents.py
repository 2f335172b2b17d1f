"""The corpus data model: a :class:`Corpus` is a named, hashable, re-iterable sequence of
:class:`Document` objects, a document's structure its :class:`Section` spans."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from headsim.errors import HeadsimError


@dataclass(frozen=True)
class Section:
    """A titled span ``[start, end)`` of a :class:`Document`'s text.

    The sections of a document tile its text: the first starts at 0, each starts where the
    previous one ends, the last ends at ``len(text)``; a section's span includes the ``"\\n\\n"``
    separating it from the next one, so ``text[start:end].strip()`` is its body.
    """

    title: str
    start: int
    end: int


@dataclass(frozen=True)
class Document:
    """One document: its text, a corpus-unique id, where it came from, and optional structure."""

    text: str
    doc_id: str
    source: str
    title: str | None = None
    sections: tuple[Section, ...] = ()


def documents_sha256(documents: Iterable[Document]) -> str:
    """Hex digest over every document's ``doc_id`` and ``text``, in order (each length-prefixed)."""
    digest = hashlib.sha256()
    for doc in documents:
        for field in (doc.doc_id, doc.text):
            data = field.encode("utf-8")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    return digest.hexdigest()


def parts_sha256(digests: Sequence[str]) -> str:
    """The digest of a corpus whose parts have ``digests`` (:func:`documents_sha256` of each, in order):
    the one part's own, else the sha256 of them all, so a corpus read part by part anywhere gets it."""
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256(b"".join(bytes.fromhex(d) for d in digests)).hexdigest()


class Corpus:
    """A named, hashable, re-iterable sequence of :class:`Document` objects.

    Args:
        name: ``"default"`` or the path the corpus was read from.
        documents: the documents, in order; their ``doc_id`` values must be unique.
        parts: how many documents each part of the corpus holds, in order (a file, or a row group of a
            ``.parquet`` file: :mod:`headsim.corpus.parts`); the digest is then over the parts' digests.
    """

    def __init__(self, name: str, documents: Iterable[Document], parts: Sequence[int] | None = None) -> None:
        self._name = str(name)
        self._documents = tuple(documents)
        self._sha256: str | None = None
        self._parts = tuple(int(n) for n in parts) if parts is not None else (len(self._documents),)
        if sum(self._parts) != len(self._documents):
            raise HeadsimError(f"Corpus {self._name!r}: parts of {sum(self._parts)} documents given for {len(self._documents)}.",
                               "Give the number of documents of every part.")
        seen: set[str] = set()
        for doc in self._documents:
            if doc.doc_id in seen:
                raise HeadsimError(
                    f"Corpus {self._name!r} has two documents with id {doc.doc_id!r}.",
                    "Give every document a unique doc_id.",
                )
            seen.add(doc.doc_id)

    @property
    def name(self) -> str:
        """``"default"`` or the path the corpus was read from."""
        return self._name

    @property
    def documents(self) -> list[Document]:
        """The documents, in order (a fresh list each call)."""
        return list(self._documents)

    @property
    def sha256(self) -> str:
        """Hex digest over every document's ``doc_id`` and ``text``, in order (:func:`documents_sha256`);
        of a corpus in several parts, over the parts' digests (:func:`parts_sha256`)."""
        if self._sha256 is None:
            ends = [sum(self._parts[:i + 1]) for i in range(len(self._parts))]
            self._sha256 = parts_sha256([documents_sha256(self._documents[e - n:e]) for e, n in zip(ends, self._parts)])
        return self._sha256

    def __iter__(self) -> Iterator[Document]:
        return iter(self._documents)

    def __len__(self) -> int:
        return len(self._documents)

    def __getitem__(self, index: int) -> Document:
        return self._documents[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Corpus):
            return NotImplemented
        return self._name == other._name and self._documents == other._documents

    def __hash__(self) -> int:
        return hash((self._name, self.sha256))

    def __repr__(self) -> str:
        return f"Corpus(name={self._name!r}, documents={len(self)}, sha256={self.sha256[:12]}…)"
