"""Corpus readers: the embedded default corpus and the user's own text files.

A :class:`Corpus` is a named, re-iterable sequence of :class:`Document` objects. :func:`load_corpus`
reads one from a spec:

* ``"default"``: the embedded corpus, real text shipped inside gensim's wheel
  (``gensim/test/test_data/``): the shortened English Wikipedia dump, turned into plain article text
  split at its section headings (:func:`wikipedia_documents`), followed by the Lee news corpus, one
  story per line (:func:`lee_documents`);
* a ``.txt`` file: documents separated by one or more blank lines;
* a ``.jsonl`` file: one JSON object per line, the text in ``text_field``;
* a ``.parquet`` file: one row per document, the text in ``text_column`` (read by row group);
* a corpus in parts (:mod:`headsim.corpus.parts`): a directory (every ``.txt``, ``.jsonl`` and
  ``.parquet`` file in it, not recursive, sorted by name), a glob, or a list of any of these;
* any of these at a URL (``s3://``, ``gs://``, ``http(s)://``, ``file://``, …: :mod:`headsim.corpus.remote`).

Documents are stripped of surrounding whitespace and empty ones are dropped. A user document's
``doc_id`` is ``"<file name>#<i>"``, ``i`` counting the records of that file from 0 (a block of a
``.txt`` file, a non-blank line of a ``.jsonl`` file, a row of a ``.parquet`` file) before empty
ones are dropped, so an id always points back to the same record. Every problem with the input
raises :class:`~headsim.errors.HeadsimError` naming the problem and the fix.
"""

from __future__ import annotations

import os

from headsim.errors import HeadsimError, require

from .documents import Corpus, Document
from .embedded import gensim_test_data
from .formats import read_text
from .parts import Fields, iter_units, read_unit, spec_name
from .wikipedia import wikipedia_documents

_LEE_FILE = "lee_background.cor"
_SUPPORTED = "a .txt, .jsonl or .parquet file, a directory or a glob of them, a list of them, or 'default'"


def load_corpus(
    spec: str | os.PathLike[str] | list = "default",
    *,
    text_field: str = "text",
    text_column: str = "text",
) -> Corpus:
    """Read a corpus from ``spec``: ``"default"``, a .txt/.jsonl/.parquet file, or a corpus in parts.

    Args:
        spec: ``"default"`` for the embedded corpus, else a path, a URL (``scheme://…``), a directory, a
            glob, or a list of them (:mod:`headsim.corpus.parts`; ``"./default"`` for a file named ``default``).
        text_field: the key holding the text in each object of a ``.jsonl`` file.
        text_column: the column holding the text in a ``.parquet`` file.

    Raises:
        HeadsimError: the path is missing, unreadable, binary, of an unsupported kind, malformed,
            lacks the text field/column, or holds no non-empty document.
    """
    if isinstance(spec, str) and spec == "default":
        return default_corpus()
    require(isinstance(spec, (str, os.PathLike, list, tuple)), f"Corpus spec {spec!r} is not a path.", f"Give {_SUPPORTED}.")
    fields = Fields(text_field, text_column)
    units = [read_unit(u, fields) for u in iter_units(spec, fields)]
    documents = [d for docs in units for d in docs]
    name = spec_name(spec)
    if not documents:
        raise HeadsimError(
            f"Empty corpus: {name!r} holds no non-empty document.",
            "Give a corpus with at least one document that is not blank.",
        )
    return Corpus(name, documents, parts=[len(docs) for docs in units])


def load_url(url: str, *, text_field: str = "text", text_column: str = "text") -> Corpus:
    """The :class:`Corpus` at ``url`` (see :mod:`headsim.corpus.remote`), named by the URL, its documents' ``source``
    the URL of their file."""
    return load_corpus(url, text_field=text_field, text_column=text_column)


def default_corpus() -> Corpus:
    """The embedded corpus: the Wikipedia articles followed by the Lee news stories."""
    return Corpus("default", wikipedia_documents() + lee_documents())


def lee_documents() -> list[Document]:
    """The Lee news corpus shipped with gensim: 300 stories, one per line, ids ``lee/<line>``."""
    lines = read_text(gensim_test_data(_LEE_FILE)).split("\n")
    return [
        Document(text=line.strip(), doc_id=f"lee/{i}", source="lee")
        for i, line in enumerate(lines)
        if line.strip()
    ]
