"""Documents of one file in each format the corpus reads: ``.txt`` (blocks between blank lines),
``.jsonl`` (one JSON object a line, the text in a field) and ``.parquet`` (a text column, by row
group), each document's ``doc_id`` ``"<file name>#<i>"`` counting the file's records from 0; and the
one-line errors for text that is not UTF-8 or not in a known format (:func:`not_utf8`,
:func:`convert_hint`). Read by :mod:`headsim.corpus.parts` (a unit of a corpus) and
:mod:`headsim.corpus.readers`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from headsim.errors import HeadsimError, require

from .documents import Document


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


def _collect(records: Iterable[tuple[object, str]], path: Path, first: int = 0) -> list[Document]:
    """Documents from ``(text, description)`` records, indexed in order from ``first``, blanks dropped."""
    documents = (_document(text, path, i, where) for i, (text, where) in enumerate(records, start=first))
    return [doc for doc in documents if doc is not None]


def read_text(path: Path) -> str:
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


def txt_documents(path: Path) -> list[Document]:
    """Documents of a .txt file: blocks separated by one or more blank lines."""
    blocks = re.split(r"\n\s*\n", read_text(path).strip())
    return _collect(((block, f"block {i}") for i, block in enumerate(blocks)), path)


def jsonl_documents(path: Path, text_field: str) -> list[Document]:
    """Documents of a .jsonl file: one JSON object per non-blank line, text in ``text_field``."""

    def records() -> Iterator[tuple[object, str]]:
        for lineno, line in enumerate(read_text(path).split("\n"), start=1):
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


def parquet_records(values: list, path: Path, text_column: str, first: int = 0) -> list[Document]:
    """Documents of a .parquet file's rows ``values`` (its ``text_column``), the first being row ``first``."""
    return _collect(((v, f"column {text_column!r}, row {i}") for i, v in enumerate(values, start=first)), path, first)


def _names(names: Iterable[str]) -> str:
    """A readable list of field or column names."""
    listed = ", ".join(repr(n) for n in names)
    return listed or "(none)"


# --------------------------------------------------------------------------------------------
# The embedded default corpus
# --------------------------------------------------------------------------------------------
