"""Corpus readers: the embedded default corpus and the user's own text files.

A :class:`Corpus` is a named, re-iterable sequence of :class:`Document` objects. :func:`load_corpus`
reads one from a spec:

* ``"default"``: the embedded corpus, real text shipped inside gensim's wheel
  (``gensim/test/test_data/``): the shortened English Wikipedia dump, turned into plain article text
  split at its section headings (:func:`wikipedia_documents`), followed by the Lee news corpus, one
  story per line (:func:`lee_documents`);
* a ``.txt`` file: documents separated by one or more blank lines;
* a directory: every ``*.txt`` file in it (not recursive), sorted by name, each read as above;
* a ``.jsonl`` file: one JSON object per line, the text in ``text_field``;
* a ``.parquet`` file: one row per document, the text in ``text_column``;
* any of these at a URL (``s3://``, ``gs://``, ``http(s)://``, ``file://``, …: :mod:`headsim.corpus.remote`).

Documents are stripped of surrounding whitespace and empty ones are dropped. A user document's
``doc_id`` is ``"<file name>#<i>"``, ``i`` counting the records of that file from 0 (a block of a
``.txt`` file, a non-blank line of a ``.jsonl`` file, a row of a ``.parquet`` file) before empty
ones are dropped, so an id always points back to the same record. Every problem with the input
raises :class:`~headsim.errors.HeadsimError` naming the problem and the fix.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from headsim.errors import HeadsimError, require

from .documents import Corpus, Document
from .embedded import gensim_test_data
from .remote import fetch, is_url
from .wikipedia import wikipedia_documents

_LEE_FILE = "lee_background.cor"
_SUPPORTED = "a .txt, .jsonl or .parquet file, a directory of .txt files, or 'default'"


def load_corpus(
    spec: str | os.PathLike[str] = "default",
    *,
    text_field: str = "text",
    text_column: str = "text",
) -> Corpus:
    """Read a corpus from ``spec``: ``"default"``, a .txt/.jsonl/.parquet file or a .txt directory.

    Args:
        spec: ``"default"`` for the embedded corpus, a URL (``scheme://…``), else a path (``"./default"``
            for a file named ``default``).
        text_field: the key holding the text in each object of a ``.jsonl`` file.
        text_column: the column holding the text in a ``.parquet`` file.

    Raises:
        HeadsimError: the path is missing, unreadable, binary, of an unsupported kind, malformed,
            lacks the text field/column, or holds no non-empty document.
    """
    if isinstance(spec, str) and spec == "default":
        return default_corpus()
    if is_url(spec):
        return load_url(spec, text_field=text_field, text_column=text_column)
    if not isinstance(spec, (str, os.PathLike)):
        raise HeadsimError(f"Corpus spec {spec!r} is not a path.", f"Give {_SUPPORTED}.")
    name = os.fspath(spec)
    path = Path(name).expanduser()
    if not path.exists():
        raise HeadsimError(f"Corpus path {name!r} does not exist.", f"Give {_SUPPORTED}.")
    if path.is_dir():
        documents = _directory_documents(path)
    else:
        readers: dict[str, Callable[[], list[Document]]] = {
            ".txt": lambda: _txt_documents(path),
            ".jsonl": lambda: _jsonl_documents(path, text_field),
            ".parquet": lambda: _parquet_documents(path, text_column),
        }
        reader = readers.get(path.suffix.lower())
        if reader is None:
            raise HeadsimError(
                f"Corpus file {name!r} has unsupported extension {path.suffix or '(none)'!r}.",
                f"Give {_SUPPORTED}.",
            )
        documents = reader()
    if not documents:
        raise HeadsimError(
            f"Empty corpus: {name!r} holds no non-empty document.",
            "Give a corpus with at least one document that is not blank.",
        )
    return Corpus(name, documents)


def load_url(url: str, *, text_field: str = "text", text_column: str = "text") -> Corpus:
    """The :class:`Corpus` at ``url`` (see :mod:`headsim.corpus.remote`), named by the URL, its documents' ``source``
    the URL (a folder: the URL of each file)."""
    with tempfile.TemporaryDirectory(prefix="headsim-corpus-") as tmp:
        local = fetch(url, Path(tmp))
        try:
            corpus = load_corpus(local, text_field=text_field, text_column=text_column)
        except HeadsimError as exc:  # name the URL, not the temporary copy
            raise HeadsimError(exc.problem.replace(str(local), url), exc.fix.replace(str(local), url)) from None
    base = url.rstrip("/")

    def source(doc) -> str:
        return base if doc.source == str(local) else f"{base}/{Path(doc.source).name}"

    return Corpus(url, [dataclasses.replace(d, source=source(d)) for d in corpus])


def _document(text: object, path: Path, index: int, where: str) -> Document | None:
    """A user document from one record, or None if it is blank; non-strings are an error."""
    if not isinstance(text, str):
        kind = "null" if text is None else type(text).__name__
        raise HeadsimError(
            f"The text of {where} in {str(path)!r} is {kind}, not a string.",
            "Store every document's text as a string.",
        )
    text = text.strip()
    if not text:
        return None
    return Document(text=text, doc_id=f"{path.name}#{index}", source=str(path))


def _collect(records: Iterable[tuple[object, str]], path: Path) -> list[Document]:
    """Documents from ``(text, description)`` records, indexed in order, blanks dropped."""
    documents = (_document(text, path, i, where) for i, (text, where) in enumerate(records))
    return [doc for doc in documents if doc is not None]


def _read_text(path: Path) -> str:
    """The file's text as UTF-8 with newlines normalised; unreadable or binary files are errors."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HeadsimError(
            f"Cannot read corpus file {str(path)!r}: {exc.strerror or exc}.",
            "Check that the file exists and that you have permission to read it.",
        ) from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise HeadsimError(
            f"Corpus file {str(path)!r} is binary, not UTF-8 text (a NUL byte at offset {nul}).",
            "Give a UTF-8 text file (.txt, .jsonl) or a .parquet file.",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HeadsimError(not_utf8(path, exc), convert_hint(path)) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text_file(path: Path) -> str:
    """One text to analyse, from a UTF-8 file exactly as written (no newline normalisation: character
    offsets stay the file's); a directory, a missing, unreadable, binary or non-UTF-8 file is a
    one-line :class:`HeadsimError`."""
    path = Path(path)
    require(not path.is_dir(), f"cannot read {str(path)!r}: it is a directory", "pass a text file")
    require(path.is_file(), f"cannot read {str(path)!r}: no such file", "check the path")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise HeadsimError(f"cannot read {str(path)!r}: {exc.strerror or exc}",
                           "check the file's permissions, or pass the text directly") from exc
    require(b"\x00" not in raw[:8192], f"{str(path)!r} is a binary file, not text", "pass a UTF-8 text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeadsimError(not_utf8(path, exc), convert_hint(path)) from None


def not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    """The problem of a text file that is not UTF-8 (headsim reads UTF-8 only)."""
    return (f"{str(path)!r} is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start} is not "
            "UTF-8 (perhaps Latin-1 or Windows-1252); headsim reads UTF-8")


def convert_hint(path: Path) -> str:
    """How to convert a text file to UTF-8."""
    return f"convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8 {str(path)!r} > converted.txt"


def _txt_documents(path: Path) -> list[Document]:
    """Documents of a .txt file: blocks separated by one or more blank lines."""
    blocks = re.split(r"\n\s*\n", _read_text(path).strip())
    return _collect(((block, f"block {i}") for i, block in enumerate(blocks)), path)


def _directory_documents(path: Path) -> list[Document]:
    """Documents of every .txt file directly in ``path``, files sorted by name."""
    try:
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".txt" and p.is_file())
    except OSError as exc:
        raise HeadsimError(
            f"Cannot list corpus directory {str(path)!r}: {exc.strerror or exc}.",
            "Check that you have permission to read the directory.",
        ) from None
    if not files:
        raise HeadsimError(
            f"Corpus directory {str(path)!r} holds no .txt file.",
            "Put the documents in .txt files directly inside the directory, or give a file.",
        )
    return [doc for file in files for doc in _txt_documents(file)]


def _jsonl_documents(path: Path, text_field: str) -> list[Document]:
    """Documents of a .jsonl file: one JSON object per non-blank line, text in ``text_field``."""

    def records() -> Iterator[tuple[object, str]]:
        for lineno, line in enumerate(_read_text(path).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HeadsimError(
                    f"Line {lineno} of {str(path)!r} is not valid JSON ({exc.msg}).",
                    "Write one JSON object per line.",
                ) from None
            if not isinstance(obj, dict):
                raise HeadsimError(
                    f"Line {lineno} of {str(path)!r} is {type(obj).__name__}, not a JSON object.",
                    f'Write one JSON object per line, like {{"{text_field}": "..."}}.',
                )
            if text_field not in obj:
                raise HeadsimError(
                    f"Line {lineno} of {str(path)!r} has no field {text_field!r}; "
                    f"its fields are: {_names(obj)}.",
                    "Pass text_field= naming the field that holds the text.",
                )
            yield obj[text_field], f"field {text_field!r} on line {lineno}"

    return _collect(records(), path)


def _parquet_documents(path: Path, text_column: str) -> list[Document]:
    """Documents of a .parquet file: one per row, text in ``text_column``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        columns = parquet.schema_arrow.names
        if text_column not in columns:
            raise HeadsimError(
                f"Parquet file {str(path)!r} has no column {text_column!r}; "
                f"its columns are: {_names(columns)}.",
                "Pass text_column= naming the column that holds the text.",
            )
        values = parquet.read(columns=[text_column]).column(0).to_pylist()
    except PermissionError as exc:
        raise HeadsimError(
            f"Cannot read corpus file {str(path)!r}: {exc.strerror or exc}.",
            "Check that you have permission to read the file.",
        ) from None
    except (OSError, pa.ArrowException) as exc:
        raise HeadsimError(
            f"Corpus file {str(path)!r} is not a readable Parquet file ({exc}).",
            "Give a valid Parquet file, e.g. written by pandas.DataFrame.to_parquet.",
        ) from None
    return _collect(((v, f"column {text_column!r}, row {i}") for i, v in enumerate(values)), path)


def _names(names: Iterable[str]) -> str:
    """A readable list of field or column names."""
    listed = ", ".join(repr(n) for n in names)
    return listed or "(none)"


# --------------------------------------------------------------------------------------------
# The embedded default corpus
# --------------------------------------------------------------------------------------------


def default_corpus() -> Corpus:
    """The embedded corpus: the Wikipedia articles followed by the Lee news stories."""
    return Corpus("default", wikipedia_documents() + lee_documents())


def lee_documents() -> list[Document]:
    """The Lee news corpus shipped with gensim: 300 stories, one per line, ids ``lee/<line>``."""
    lines = _read_text(gensim_test_data(_LEE_FILE)).split("\n")
    return [
        Document(text=line.strip(), doc_id=f"lee/{i}", source="lee")
        for i, line in enumerate(lines)
        if line.strip()
    ]
