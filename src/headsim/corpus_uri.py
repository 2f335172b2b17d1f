"""Corpora at URLs that pyarrow or fsspec resolve (``s3://``, ``gs://``, ``hdfs://``, ``file://``, …).

:func:`load_corpus_any` reads a URL by copying the file (or a directory's ``*.txt`` files) into a
temporary directory under its own name and handing that to :func:`headsim.corpus.load_corpus`, so a
corpus gives the same documents, ``doc_id`` values and ``sha256`` wherever it lies; the
:class:`~headsim.corpus.Corpus` is named by its URL. Anything else goes to ``load_corpus`` as it is.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from pathlib import Path

from .corpus import Corpus, load_corpus
from .errors import HeadsimError, require

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(spec: object) -> bool:
    """``scheme://…`` (a local path or ``"default"`` is not)."""
    return isinstance(spec, str) and bool(_URL.match(spec))


def filesystem(url: str):
    """``(pyarrow FileSystem, path inside it)`` for ``url``: pyarrow's own filesystems (local, S3, GCS,
    HDFS), else any fsspec protocol whose package is installed (wrapped for pyarrow)."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as arrow_error:
        reason = str(arrow_error).splitlines()[0]
    try:
        import fsspec.core

        fs, path = fsspec.core.url_to_fs(url)
    except Exception as exc:  # unknown protocol, missing package (s3fs, gcsfs, …), bad credentials
        raise HeadsimError(f"cannot open corpus URL {url!r}: {reason}; fsspec: {str(exc).splitlines()[0]}",
                           "check the URL, install the filesystem's package (e.g. s3fs, gcsfs) or copy the corpus to a local path") from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def _copy(fs, src: str, dst: Path) -> None:
    with fs.open_input_stream(src) as fin, open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout, length=1 << 20)


def _fetch(url: str, into: Path) -> Path:
    """Copy what ``url`` names into the directory ``into``; the local path that stands for it."""
    import pyarrow.fs as pafs

    fs, path = filesystem(url)
    try:
        info = fs.get_file_info(path)
        require(info.type != pafs.FileType.NotFound, f"corpus URL {url!r} does not exist",
                "check the URL (a .txt, .jsonl or .parquet file, or a directory of .txt files)")
        local = into / (info.base_name or "corpus")
        if info.type == pafs.FileType.File:
            _copy(fs, path, local)
            return local
        local.mkdir()
        for item in fs.get_file_info(pafs.FileSelector(path, recursive=False)):
            if item.type == pafs.FileType.File and item.base_name.lower().endswith(".txt"):
                _copy(fs, item.path, local / item.base_name)
        return local
    except OSError as exc:
        raise HeadsimError(f"cannot read corpus URL {url!r}: {str(exc).splitlines()[0]}",
                           "check the URL and your credentials for that storage") from None


def load_corpus_any(spec: str | os.PathLike | Corpus = "default", *, text_field: str = "text",
                    text_column: str = "text") -> Corpus:
    """A :class:`Corpus` from a Corpus, a :func:`~headsim.corpus.load_corpus` spec, or a URL (see module)."""
    if isinstance(spec, Corpus):
        return spec
    if not is_url(spec):
        return load_corpus(spec, text_field=text_field, text_column=text_column)
    url = str(spec)
    with tempfile.TemporaryDirectory(prefix="headsim-corpus-") as tmp:
        local = _fetch(url, Path(tmp))
        try:
            corpus = load_corpus(local, text_field=text_field, text_column=text_column)
        except HeadsimError as exc:  # name the URL, not the temporary copy
            raise HeadsimError(exc.problem.replace(str(local), url), exc.fix) from None
    base = url.rstrip("/")

    def source(doc) -> str:
        return base if doc.source == str(local) else f"{base}/{Path(doc.source).name}"

    return Corpus(url, [dataclasses.replace(d, source=source(d)) for d in corpus])
