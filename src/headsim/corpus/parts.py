"""A corpus in parts: its files listed without reading them (:func:`list_files`), each file cut into
*units* that are read on their own (:func:`units_of`: a ``.txt`` or ``.jsonl`` file whole, a
``.parquet`` file by row group), and a unit's documents (:func:`read_unit`).

A spec names the files: a directory (every ``.txt``, ``.jsonl`` and ``.parquet`` file directly in
it), a glob (``parts/*.parquet``), a file, a URL of any of these (``s3://``, ``gs://``, …, through
pyarrow's and fsspec's file systems: :mod:`headsim.corpus.remote`), or a list of them; the files in
the order listed, a directory's and a glob's sorted by name. :func:`headsim.corpus.load_corpus` reads
the units of such a spec in order; the Ray engine lists the files on the driver and has its workers
read the units, so the driver never opens a file: both give the same documents, ``doc_id`` values
(``"<file name>#<record>"``, the record counted from the file's start across its row groups) and
``sha256`` (:meth:`headsim.corpus.Corpus.sha256`: over the units' digests when there are several).
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from headsim.errors import HeadsimError, require

from .documents import Document, documents_sha256, parts_sha256
from .remote import call, fetch, filesystem, is_url, url_error

SUFFIXES = (".txt", ".jsonl", ".parquet")
_GLOB = set("*?[")

#: a corpus spec of parts: one path, URL or glob, or several
Spec = str | os.PathLike | Sequence[str | os.PathLike]


@dataclass(frozen=True)
class Unit:
    """What one reader reads on its own: a whole ``.txt``/``.jsonl`` file, or one row group of a
    ``.parquet`` file (``row_group``), whose first row is record ``first_record`` of the file."""

    path: str  # a local path or a URL
    row_group: int | None = None
    first_record: int = 0


@dataclass(frozen=True)
class Fields:
    """Where a record keeps its text: the ``.jsonl`` field and the ``.parquet`` column."""

    text_field: str = "text"
    text_column: str = "text"


def spec_name(spec: Spec) -> str:
    """The name a corpus of ``spec`` goes by (several specs joined by ``+``)."""
    if isinstance(spec, (str, os.PathLike)):
        return os.fspath(spec)
    return "+".join(os.fspath(s) for s in spec)


def list_files(spec: Spec) -> list[str]:
    """The files of ``spec`` in order (see the module), by listing only. Refuses a missing path, a
    file of another kind, a directory or glob without a corpus file, and two files of one name (their
    documents' ids would clash)."""
    specs = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    require(specs, "the corpus is an empty list of parts", "name at least one file, directory or glob")
    files = [f for s in specs for f in (_list_url(str(s)) if is_url(s) else _list_local(os.fspath(s)))]
    seen: dict[str, str] = {}
    for f in files:
        name = _name(f)
        require(name not in seen, f"two corpus parts are named {name!r} ({seen.get(name)!r} and {f!r}): their "
                f"documents' ids (\"{name}#<record>\") would clash", "rename one of them, or analyse them apart")
        seen[name] = f
    return files


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _kind(path: str) -> str:
    """The part's suffix, or a refusal naming the kinds read."""
    suffix = os.path.splitext(_name(path))[1].lower()
    require(suffix in SUFFIXES, f"corpus part {path!r} has unsupported extension {suffix or '(none)'!r}",
            "give .txt, .jsonl or .parquet files, a directory or a glob of them, or 'default'")
    return suffix


def _list_local(spec: str) -> list[str]:
    path = Path(spec).expanduser()
    if not path.exists() and _GLOB & set(spec):
        files = sorted(f for f in glob.glob(os.path.expanduser(spec)) if os.path.isfile(f))
        require(files, f"corpus glob {spec!r} matches no file", "check the pattern (quote it in the shell)")
        return [f for f in files if _kind(f)]
    require(path.exists(), f"Corpus path {spec!r} does not exist.",
            "Give a .txt, .jsonl or .parquet file, a directory or a glob of them, or 'default'.")
    if not path.is_dir():
        _kind(str(path))
        return [str(path)]
    try:
        files = sorted(str(p) for p in path.iterdir() if p.suffix.lower() in SUFFIXES and p.is_file())
    except OSError as exc:
        raise HeadsimError(f"Cannot list corpus directory {spec!r}: {exc.strerror or exc}.",
                           "Check that you have permission to read the directory.") from None
    require(files, f"Corpus directory {spec!r} holds no .txt, .jsonl or .parquet file.",
            "Put the documents in such files directly inside the directory, or give a file.")
    return files


def _list_url(url: str) -> list[str]:
    try:
        fs, path = call(filesystem, url)
        scheme = url.split("://", 1)[0]
        if _GLOB & set(path):
            found = [f"{scheme}://{p}" for p in sorted(call(fs.glob, path))]
            require(found, f"corpus glob {url!r} matches no file", "check the pattern")
            return [f for f in found if _kind(f)]
        if os.path.splitext(_name(path))[1].lower() in SUFFIXES:
            return [url]  # a file: read where it is used
        if call(fs.info, path).get("type") != "directory":
            _kind(url)
        items = sorted(i["name"] for i in call(fs.ls, path, True) if i.get("type") == "file"
                       and os.path.splitext(_name(i["name"]))[1].lower() in SUFFIXES)
    except HeadsimError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow, fsspec and OS errors alike
        raise url_error(url, exc) from None
    require(items, f"corpus folder {url!r} holds no .txt, .jsonl or .parquet file", "check the URL")
    base = url.rstrip("/")
    return [f"{base}/{_name(i)}" for i in items]


def units_of(file: str, fields: Fields = Fields()) -> list[Unit]:
    """The units of ``file``: itself, or one per row group of a ``.parquet`` file (its footer read)."""
    if _kind(file) != ".parquet":
        return [Unit(file)]
    with _parquet(file, fields) as parquet:
        rows = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
    starts = [sum(rows[:g]) for g in range(len(rows))]
    return [Unit(file, g, s) for g, s in enumerate(starts)] or [Unit(file)]


def read_unit(unit: Unit, fields: Fields = Fields()) -> list[Document]:
    """The non-empty documents of ``unit``, as :func:`headsim.corpus.load_corpus` reads them; a URL's
    documents have the URL as their ``source``."""
    from . import formats

    kind = _kind(unit.path)
    if kind == ".parquet":
        with _parquet(unit.path, fields) as parquet:
            table = (parquet.read(columns=[fields.text_column]) if unit.row_group is None
                     else parquet.read_row_group(unit.row_group, columns=[fields.text_column]))
        docs = formats.parquet_records(table.column(0).to_pylist(), Path(unit.path), fields.text_column, unit.first_record)
    else:
        with _local(unit.path) as local:
            docs = (formats.txt_documents(local) if kind == ".txt" else formats.jsonl_documents(local, fields.text_field))
    return [replace(d, source=unit.path) for d in docs] if is_url(unit.path) else docs


class _local:
    """A local path for ``path``: itself, or a URL copied into a temporary directory under its name."""

    def __init__(self, path: str) -> None:
        self.path, self.tmp = path, None

    def __enter__(self) -> Path:
        if not is_url(self.path):
            return Path(self.path)
        self.tmp = tempfile.TemporaryDirectory(prefix="headsim-part-")
        return fetch(self.path, Path(self.tmp.name))

    def __exit__(self, *exc) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


class _parquet:
    """``pyarrow.parquet.ParquetFile`` of a local path or URL with the text column checked; every problem one line."""

    def __init__(self, path: str, fields: Fields) -> None:
        self.path, self.fields, self.stream, self.local = path, fields, None, None

    def __enter__(self):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            if is_url(self.path) and self.path.split("://", 1)[0].lower() in ("http", "https"):
                self.local = _local(self.path)  # a web server need not serve byte ranges: the file is copied
                parquet = pq.ParquetFile(self.local.__enter__())
            elif is_url(self.path):  # object stores and file systems read the footer and row groups in ranges
                fs, inner = call(filesystem, self.path)
                self.stream = call(fs.open, inner, "rb")
                parquet = call(pq.ParquetFile, self.stream)
            else:
                parquet = pq.ParquetFile(self.path)
        except PermissionError as exc:
            raise HeadsimError(f"Cannot read corpus file {self.path!r}: {exc.strerror or exc}.",
                               "Check that you have permission to read the file.") from None
        except (OSError, pa.ArrowException) as exc:
            if is_url(self.path) and not isinstance(exc, pa.ArrowInvalid):
                raise url_error(self.path, exc) from None
            raise HeadsimError(f"Corpus file {self.path!r} is not a readable Parquet file ({exc}).",
                               "Give a valid Parquet file, e.g. written by pandas.DataFrame.to_parquet.") from None
        except HeadsimError:
            raise
        except Exception as exc:  # noqa: BLE001 - a remote store's own errors
            raise url_error(self.path, exc) from None
        columns = parquet.schema_arrow.names
        if self.fields.text_column not in columns:
            listed = ", ".join(repr(c) for c in columns) or "(none)"
            raise HeadsimError(f"Parquet file {self.path!r} has no column {self.fields.text_column!r}; its columns are: {listed}.",
                               "Pass text_column= naming the column that holds the text.")
        return parquet

    def __exit__(self, *exc) -> None:
        if self.local is not None:
            self.local.__exit__()
        if self.stream is not None:
            try:
                self.stream.close()
            except Exception:  # noqa: BLE001 - a stream that cannot close is left behind
                pass


def iter_units(spec: Spec, fields: Fields = Fields()) -> Iterator[Unit]:
    """Every unit of ``spec``, in order."""
    for f in list_files(spec):
        yield from units_of(f, fields)


# ------------------------------------------------------------------ a corpus in parts, counted where it is read


@dataclass(frozen=True)
class Counted:
    """A unit as counted where it was read: each document's tokens and the digest of its documents
    (:func:`headsim.corpus.documents.documents_sha256`)."""

    unit: Unit
    tokens: np.ndarray
    sha256: str


def count_unit(unit: Unit, fields: Fields, count_tokens: Callable[[list[str]], np.ndarray]) -> Counted:
    """Read ``unit`` and count its documents' tokens with ``count_tokens``."""
    docs = read_unit(unit, fields)
    tokens = np.asarray(count_tokens([d.text for d in docs]) if docs else [], dtype=np.int64)
    return Counted(unit, tokens, documents_sha256(docs))


@dataclass(frozen=True)
class Slice:
    """Documents ``[first, last)`` of a corpus in parts, and the units that hold them (each with the index
    of its first document): what a reader needs to read only those (:meth:`texts`)."""

    units: tuple[tuple[Unit, int], ...]
    first: int
    last: int
    fields: Fields

    def texts(self) -> list[str]:
        """The documents' texts, read from their units."""
        out: list[str] = []
        for unit, start in self.units:
            docs = read_unit(unit, self.fields)
            lo, hi = max(self.first - start, 0), min(self.last - start, len(docs))
            out.extend(d.text for d in docs[lo:hi])
        return out


class CountedCorpus:
    """A corpus in parts known by its units' counts alone (no text held): its ``name``, ``sha256``
    (:func:`headsim.corpus.documents.parts_sha256`), number of documents (``len``), every document's
    tokens (:attr:`counts`) and the units holding any range of documents (:meth:`slice`)."""

    def __init__(self, name: str, counted: Sequence[Counted], fields: Fields) -> None:
        self.name, self.fields = name, fields
        self.units = [c.unit for c in counted]
        self.counts = np.concatenate([c.tokens for c in counted]) if counted else np.zeros(0, np.int64)
        sizes = np.asarray([len(c.tokens) for c in counted], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.sha256 = parts_sha256([c.sha256 for c in counted])
        require(len(self.counts) > 0, f"Empty corpus: {name!r} holds no non-empty document.",
                "Give a corpus with at least one document that is not blank.")

    def __len__(self) -> int:
        return len(self.counts)

    def slice(self, first: int, last: int) -> Slice:
        """Documents ``[first, last)`` as a :class:`Slice` of the units holding them."""
        lo = int(np.searchsorted(self.starts, first, side="right")) - 1
        hi = int(np.searchsorted(self.starts, last, side="left"))
        units = tuple((self.units[i], int(self.starts[i])) for i in range(max(lo, 0), min(hi, len(self.units)))
                      if self.starts[i + 1] > self.starts[i])
        return Slice(units, first, last, self.fields)
