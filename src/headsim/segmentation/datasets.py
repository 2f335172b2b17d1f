"""Segmentation benchmark data: documents cut into sentence units with gold topic boundaries.

* Data A, :func:`wikipedia_topic_docs`: the embedded Wikipedia articles, gold = section starts.
* Data B, :func:`choi_lee_docs`: Choi-style concatenations of random Lee news stories, gold =
  story starts (Choi 2000 built his data the same way from the Brown corpus).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import require
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


def wikipedia_topic_docs() -> list[SegDoc]:
    """Data A: every embedded Wikipedia article with at least two sections; gold = section starts."""
    from ..corpus import wikipedia_documents

    docs = (
        segdoc(d.doc_id, d.text, [s.start for s in d.sections[1:]])
        for d in wikipedia_documents()
        if len(d.sections) >= 2
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
        starts, position = [], 0
        for story in picked:
            starts.append(position)
            position += len(story) + 2
        docs.append(segdoc(f"choi-lee/{seed}/{i}", "\n\n".join(picked), starts[1:]))
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
