"""The embedded Wikipedia sample: gensim's shortened English Wikipedia dump as plain article text
split at its section headings.

Parsing the dump takes seconds, so the parsed articles are cached as JSON under
``$HEADSIM_CACHE`` (default ``~/.cache/headsim``), keyed by the dump's size and mtime and
:data:`WIKI_FORMAT_VERSION`; bump the version whenever the cleaning below changes its output.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .documents import Document, Section
from .embedded import gensim_test_data

#: Version of the parsed-Wikipedia cache format and cleaning rules; bump it to invalidate caches.
WIKI_FORMAT_VERSION = 1

_WIKI_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


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
