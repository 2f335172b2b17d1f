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
* any of these at a URL (``s3://``, ``gs://``, ``http(s)://``, ``file://``, …: :mod:`headsim.corpus_uri`).

Documents are stripped of surrounding whitespace and empty ones are dropped. A user document's
``doc_id`` is ``"<file name>#<i>"``, ``i`` counting the records of that file from 0 (a block of a
``.txt`` file, a non-blank line of a ``.jsonl`` file, a row of a ``.parquet`` file) before empty
ones are dropped, so an id always points back to the same record. Every problem with the input
raises :class:`~headsim.errors.HeadsimError` naming the problem and the fix.

Parsing the Wikipedia dump takes seconds, so the parsed articles are cached as JSON under
``$HEADSIM_CACHE`` (default ``~/.cache/headsim``), keyed by the dump's size and mtime and
:data:`WIKI_FORMAT_VERSION`; bump the version whenever the cleaning below changes its output.
"""

from __future__ import annotations

import bz2
import hashlib
import importlib.util
import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headsim.errors import HeadsimError, require

__all__ = [
    "Corpus",
    "Document",
    "Section",
    "WIKI_FORMAT_VERSION",
    "default_corpus",
    "lee_documents",
    "load_corpus",
    "wikipedia_documents",
]

#: Version of the parsed-Wikipedia cache format and cleaning rules; bump it to invalidate caches.
WIKI_FORMAT_VERSION = 1

_WIKI_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_LEE_FILE = "lee_background.cor"
_SUPPORTED = "a .txt, .jsonl or .parquet file, a directory of .txt files, or 'default'"


# --------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------


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


class Corpus:
    """A named, hashable, re-iterable sequence of :class:`Document` objects.

    Args:
        name: ``"default"`` or the path the corpus was read from.
        documents: the documents, in order; their ``doc_id`` values must be unique.
    """

    def __init__(self, name: str, documents: Iterable[Document]) -> None:
        self._name = str(name)
        self._documents = tuple(documents)
        self._sha256: str | None = None
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
        """Hex digest over every document's ``doc_id`` and ``text``, in order."""
        if self._sha256 is None:
            digest = hashlib.sha256()
            for doc in self._documents:
                for field in (doc.doc_id, doc.text):
                    data = field.encode("utf-8")
                    digest.update(len(data).to_bytes(8, "big"))
                    digest.update(data)
            self._sha256 = digest.hexdigest()
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


# --------------------------------------------------------------------------------------------
# load_corpus and the user-file readers
# --------------------------------------------------------------------------------------------


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
    if isinstance(spec, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", spec):
        from .corpus_uri import load_url  # remote reads: deadlines, retries, one-line causes

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


_WIKI_MEMO: dict[str, tuple[Document, ...]] = {}  # cache key -> parsed documents, per process


def wikipedia_documents() -> list[Document]:
    """The Wikipedia sample shipped with gensim as plain article text, ids ``enwiki/<page id>``.

    Redirects, disambiguation pages and pages without prose are skipped. Each article's text is
    its sections' prose (headings removed) and ``sections`` gives the heading of every span.
    Cached on disk (see the module docstring) and in memory.
    """
    dump = gensim_test_data(_WIKI_DUMP)
    stat = dump.stat()
    key = f"{WIKI_FORMAT_VERSION}:{_WIKI_DUMP}:{stat.st_size}:{stat.st_mtime_ns}"
    if key not in _WIKI_MEMO:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        cache_file = _cache_dir() / f"enwiki-sample-{digest}.json"
        documents = _read_wiki_cache(cache_file, key)
        if documents is None:
            documents = tuple(_parse_wikipedia_dump(dump))
            _write_wiki_cache(cache_file, key, documents)
        _WIKI_MEMO[key] = documents
    return list(_WIKI_MEMO[key])


def gensim_test_data(name: str, needed_by: str = "the embedded corpus") -> Path:
    """A file of gensim's bundled test data (located without importing gensim, which is slow), or one
    clear error saying what needs it (``needed_by``) when gensim or the file is missing."""
    spec = importlib.util.find_spec("gensim")
    require(spec is not None and spec.origin is not None,
            f"{needed_by} needs gensim's test data, but gensim is not installed", "pip install 'gensim>=4.3'")
    path = Path(spec.origin).parent / "test" / "test_data" / name
    require(path.is_file(), f"{needed_by} needs {name!r}, which is missing from {str(path.parent)!r}",
            "reinstall gensim from its wheel (pip install --force-reinstall gensim)")
    return path


def _cache_dir() -> Path:
    """``$HEADSIM_CACHE`` if set, else ``~/.cache/headsim``."""
    return Path(os.environ.get("HEADSIM_CACHE") or Path.home() / ".cache" / "headsim").expanduser()


def _read_wiki_cache(path: Path, key: str) -> tuple[Document, ...] | None:
    """The cached documents if ``path`` holds a valid cache for ``key``, else None."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if payload["key"] != key:
            return None
        documents = tuple(
            Document(
                text=d["text"],
                doc_id=d["doc_id"],
                source=d["source"],
                title=d["title"],
                sections=tuple(Section(str(t), int(s), int(e)) for t, s, e in d["sections"]),
            )
            for d in payload["documents"]
        )
        valid = bool(documents) and all(
            isinstance(doc.text, str) and _sections_tile(doc) for doc in documents
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return documents if valid else None


def _write_wiki_cache(path: Path, key: str, documents: tuple[Document, ...]) -> None:
    """Write the cache atomically (temp file + rename); warn instead of failing if it cannot."""
    payload = {
        "key": key,
        "documents": [
            {
                "text": d.text,
                "doc_id": d.doc_id,
                "source": d.source,
                "title": d.title,
                "sections": [[s.title, s.start, s.end] for s in d.sections],
            }
            for d in documents
        ],
    }
    tmp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False
        ) as tmp:
            tmp_name = tmp.name
            json.dump(payload, tmp, ensure_ascii=False)
        os.replace(tmp_name, path)
    except OSError as exc:
        if tmp_name is not None:
            Path(tmp_name).unlink(missing_ok=True)
        warnings.warn(
            f"headsim: could not cache the parsed Wikipedia sample at {path}: {exc}",
            RuntimeWarning,
            stacklevel=3,
        )


def _sections_tile(doc: Document) -> bool:
    """Whether ``doc.sections`` are non-empty spans tiling ``doc.text`` in order."""
    position = 0
    for section in doc.sections:
        if section.start != position or section.end <= section.start:
            return False
        position = section.end
    return position == len(doc.text) and bool(doc.sections)


# --------------------------------------------------------------------------------------------
# Wikipedia: wikitext -> plain text with sections
# --------------------------------------------------------------------------------------------

#: Sections that are lists of links or citations rather than prose (compared case-insensitively).
_DROPPED_SECTIONS = frozenset(
    {
        "see also",
        "references",
        "external links",
        "external link",
        "further reading",
        "notes",
        "bibliography",
        "sources",
        "footnotes",
        "citations",
        "works cited",
        "notes and references",
        "references and notes",
        "references and further reading",
        "general references",
        "gallery",
    }
)
_DROPPED_LINK_NAMESPACES = frozenset({"file", "image", "media", "category"})
_INTERLANGUAGE = re.compile(r"^(?:[a-z]{2,3}(?:-[a-z0-9]{2,8})*|simple)$")
_DISAMBIGUATION_TEMPLATE = re.compile(r"^(?:disambig\w*|dab|disamb|geodis|hndis)$", re.IGNORECASE)
_REDIRECT = re.compile(r"^\s*#redirect", re.IGNORECASE)
#: HTML/extension tags whose content is not prose (citations, tables, formulas, code, media).
_DROPPED_TAGS = frozenset(
    {
        "ref", "references", "table", "gallery", "math", "chem", "ce", "timeline", "imagemap",
        "score", "graph", "templatedata", "categorytree", "inputbox", "syntaxhighlight", "source",
        "code", "hiero",
    }
)  # fmt: skip

_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_REF = re.compile(r"<ref\b[^>]*/>|<ref\b[^>]*>.*?</ref\s*>", re.DOTALL | re.IGNORECASE)
_FILE_LINK = (re.compile(r"\[\[\s*(?:file|image)\s*:", re.IGNORECASE), r"\[\[", r"\]\]")
_TABLE = (re.compile(r"^[ \t]*\{\|", re.MULTILINE), r"^[ \t]*\{\|", r"^[ \t]*\|\}")


def _parse_wikipedia_dump(dump: Path) -> Iterator[Document]:
    """Parse the article namespace of a bz2 MediaWiki dump into documents."""
    from gensim.corpora.wikicorpus import extract_pages

    with bz2.open(dump, "rb") as stream:
        for title, wikitext, page_id in extract_pages(stream, filter_namespaces=("0",)):
            document = _wiki_document(title, wikitext, page_id)
            if document is not None:
                yield document


def _wiki_document(title: str, wikitext: str, page_id: str) -> Document | None:
    """One article as a :class:`Document`, or None for redirects and pages without prose."""
    import mwparserfromhell

    if not wikitext.strip() or _REDIRECT.match(wikitext) or title.endswith("(disambiguation)"):
        return None
    code = mwparserfromhell.parse(_precut(wikitext))
    templates = code.filter_templates(recursive=False)
    if any(_DISAMBIGUATION_TEMPLATE.match(str(t.name).strip()) for t in templates):
        return None
    bodies = list(_wiki_sections(code))
    if not bodies:
        return None
    sections = []
    start = 0
    for i, (heading, body) in enumerate(bodies):
        end = start + len(body) + (2 if i < len(bodies) - 1 else 0)
        sections.append(Section(heading, start, end))
        start = end
    text = "\n\n".join(body for _, body in bodies)
    return Document(
        text=text,
        doc_id=f"enwiki/{page_id}",
        source="enwiki",
        title=title,
        sections=tuple(sections),
    )


def _precut(wikitext: str) -> str:
    """Cut comments, refs, file links and tables from raw wikitext.

    mwparserfromhell keeps a construct as plain text when anything inside it is malformed (an
    unbalanced ``''`` in a reference, a stray quote in a table's style), which would leak markup
    into the text; these constructs never hold article prose, so they are cut before parsing.
    """
    wikitext = _REF.sub("", _COMMENT.sub("", wikitext))
    for start, opener, closer in (_FILE_LINK, _TABLE):
        wikitext = _cut_balanced(wikitext, start, opener, closer)
    return wikitext


def _cut_balanced(text: str, start: re.Pattern[str], opener: str, closer: str) -> str:
    """Remove every span that begins at a match of ``start`` and ends at its balancing closer.

    An unclosed span is cut to the end of its line only, so one typo cannot swallow an article.
    """
    tokens = re.compile(f"(?P<open>{opener})|(?P<close>{closer})", re.MULTILINE)
    pieces, position = [], 0
    while (match := start.search(text, position)) is not None:
        pieces.append(text[position : match.start()])
        depth, end = 0, None
        for token in tokens.finditer(text, match.start()):
            depth += 1 if token.group("open") is not None else -1
            if depth == 0:
                end = token.end()
                break
        if end is None:
            line_end = text.find("\n", match.end())
            end = len(text) if line_end < 0 else line_end
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _wiki_sections(code: Any) -> Iterator[tuple[str, str]]:
    """``(heading, plain text)`` of each kept section, in order; the lead's heading is ``""``."""
    from mwparserfromhell.nodes import Heading
    from mwparserfromhell.wikicode import Wikicode

    dropped_level: int | None = None  # while set, skip subsections deeper than this level
    for section in code.get_sections(flat=True, include_lead=True):
        nodes = list(section.nodes)
        heading = ""
        if nodes and isinstance(nodes[0], Heading):
            level = nodes[0].level
            heading = _paragraphs(_plain(nodes[0].title)).replace("\n\n", " ")
            if dropped_level is not None and level > dropped_level:
                continue
            dropped_level = level if heading.lower() in _DROPPED_SECTIONS else None
            if dropped_level is not None:
                continue
            nodes = nodes[1:]
        body = _paragraphs(_plain(Wikicode(nodes)))
        if body:
            yield heading, body


def _plain(code: Any) -> str:
    """The visible text of a wikicode tree: links become their display text, the rest is dropped."""
    from mwparserfromhell.nodes import ExternalLink, HTMLEntity, Tag, Template, Text, Wikilink

    parts: list[str] = []
    for node in code.nodes:
        if isinstance(node, Text):
            parts.append(node.value)
        elif isinstance(node, Wikilink):
            if _visible_link(str(node.title), node.text is not None):
                has_text = node.text is not None and str(node.text).strip()
                shown = node.text if has_text else node.title
                parts.append(_plain(shown).lstrip(":"))
        elif isinstance(node, ExternalLink):
            if node.brackets and node.title is not None:
                parts.append(_plain(node.title))
        elif isinstance(node, Tag):
            tag = str(node.tag).strip().lower()
            if tag in ("br", "hr"):
                parts.append("\n" if tag == "br" else "\n\n")
            elif tag not in _DROPPED_TAGS and node.contents is not None:
                parts.append(_plain(node.contents))
            if tag in ("p", "div", "blockquote", "li", "dd", "dt") and not node.wiki_markup:
                parts.append("\n")
        elif isinstance(node, HTMLEntity):
            parts.append(node.normalize())
        elif isinstance(node, Template):
            parts.append(_template_text(node))
        # Comments, template arguments and nested headings are dropped.
    return "".join(parts)


#: Inline templates that render prose, and the parameter holding it (-1: the last positional).
_TEXT_TEMPLATES: dict[str, str | int] = {
    "lang": "2", "transl": -1, "nihongo": "1", "nowrap": "1", "nobr": "1", "small": "1",
    "smaller": "1", "big": "1", "sc": "1", "smallcaps": "1", "vanchor": "1", "angbr": "1",
    "quote": "1", "blockquote": "1", "quotation": "1",
}  # fmt: skip
_CONVERT_RANGES = frozenset({"-", "–", "to", "and", "or", "by", "x", "×", "+/-", "to(-)"})


def _template_text(template: Any) -> str:
    """The visible text of the few inline templates that render prose; "" for all others."""
    name = str(template.name).strip()
    key = name.lower()
    if key.startswith("formatnum:"):
        return name.partition(":")[2].strip()
    positional = [_plain(p.value).strip() for p in template.params if not p.showkey]
    if key in ("convert", "cvt"):  # {{convert|1300|mi|km}}, {{convert|2|to|3|m}}
        count = 4 if len(positional) > 3 and positional[1] in _CONVERT_RANGES else 2
        return " ".join(positional[:count])
    if key == "as of" and positional:
        return f"as of {positional[0]}"
    source = "1" if key.startswith("lang-") else _TEXT_TEMPLATES.get(key)
    if source == -1:
        return positional[-1] if positional else ""
    for param in () if source is None else (str(source), "text", "quote"):
        if template.has(param):
            return _plain(template.get(param).value)
    return ""


def _visible_link(title: str, has_text: bool) -> bool:
    """Whether a wikilink shows text: not a file, category or interlanguage link."""
    title = title.strip()
    if title.startswith(":"):  # [[:Category:X]] is a visible link to the category page
        return True
    prefix, colon, _ = title.partition(":")
    if not colon:
        return True
    prefix = prefix.strip().lower()
    if prefix in _DROPPED_LINK_NAMESPACES:
        return False
    return has_text or not _INTERLANGUAGE.match(prefix)


def _paragraphs(text: str) -> str:
    """Paragraphs of ``text`` with whitespace normalised, separated by one blank line."""
    cleaned = (_tidy(re.sub(r"\s+", " ", block)) for block in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in cleaned if any(c.isalnum() for c in p))


def _tidy(paragraph: str) -> str:
    """Remove traces of markup: stray brackets, quote marks and magic words, empty parentheses."""
    paragraph = re.sub(r"\{\{[^{}]*\}\}|\{\{|\}\}|\[\[|\]\]|\{\||\|\}|__[A-Z]+__", "", paragraph)
    paragraph = re.sub(r"'{2,}", lambda m: "'" * (len(m.group()) % 2), paragraph)  # Iliad'''s
    paragraph = re.sub(r"\(\s*(?:[,;:]\s*)*\)", "", paragraph)
    paragraph = re.sub(r"\(\s*(?:[,;:]\s*)*", "(", paragraph)
    paragraph = re.sub(r"\s+([,.;:)])", r"\1", paragraph)
    return re.sub(r"\s{2,}", " ", paragraph).strip()
