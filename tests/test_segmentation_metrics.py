"""Segmentation metrics, boundary vectors and segments, checked against hand-computed cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headsim.errors import HeadsimError
from headsim.segmentation.metrics import (
    boundary_f1,
    boundary_similarity,
    bootstrap_ci,
    default_k,
    paired_comparison,
    pk,
    to_boundary_vector,
    windowdiff,
)
from headsim.segmentation.types import Segment, boundaries_to_segments
from headsim.segmentation.units import sentence_units
from headsim.sentences import MAX_BLOCK


def test_boundary_vector():
    assert to_boundary_vector(5, [1, 3]) == [0, 1, 0, 1]
    assert to_boundary_vector(5, [3, 1, 1]) == [0, 1, 0, 1]
    assert to_boundary_vector(1, []) == []
    with pytest.raises(HeadsimError, match="outside"):
        to_boundary_vector(5, [4])
    with pytest.raises(HeadsimError, match="outside"):
        to_boundary_vector(5, [-1])


def test_default_k_is_half_mean_segment_length():
    # 12 units, 2 segments -> mean 6 -> k 3; 12 units, 4 segments -> 1.5 -> rounds half up to 2
    assert default_k(to_boundary_vector(12, [5])) == 3
    assert default_k(to_boundary_vector(12, [2, 5, 8])) == 2
    # 6 units, 6 segments -> 0.5 -> 1, raised to the minimum of 2
    assert default_k([1] * 5) == 2


def test_pk_hand_computed():
    # ref = 0 1 0 0 0 (6 units: [0 1][2 3 4 5]), hyp = 0 0 0 1 0 ([0 1 2 3][4 5]), k = 2.
    # Windows of k = 2 gaps, i.e. unit pairs (i, i + 2), N - k + 1 = 4 of them:
    #   gaps 0-1: ref has a boundary (1), hyp none (0)  -> miss
    #   gaps 1-2: ref 1, hyp 0                           -> miss
    #   gaps 2-3: ref 0, hyp 1                           -> false alarm
    #   gaps 3-4: ref 0, hyp 1                           -> false alarm
    # Pk = 4 / 4 = 1.0
    ref, hyp = [0, 1, 0, 0, 0], [0, 0, 0, 1, 0]
    assert pk(ref, hyp, k=2) == pytest.approx(1.0)
    # hyp = 0 0 1 0 0: windows 0-1: 1 vs 0 miss; 1-2: 1 vs 1 ok; 2-3: 0 vs 1 fa; 3-4: 0 vs 0 ok -> 2/4
    assert pk(ref, [0, 0, 1, 0, 0], k=2) == pytest.approx(0.5)
    assert pk(ref, ref) == 0.0


def test_windowdiff_hand_computed():
    # ref = 1 0 1 0 0 0, hyp = 1 0 0 0 0 0, k = 3: windows of 3 gaps, N - k + 1 = 4:
    #   gaps 0-2: ref counts 2, hyp 1 -> differ
    #   gaps 1-3: ref 1, hyp 0         -> differ
    #   gaps 2-4: ref 1, hyp 0         -> differ
    #   gaps 3-5: ref 0, hyp 0         -> same
    # WindowDiff = 3 / 4; Pk only sees "any boundary": windows 0-2 agree (both have one) -> 2 / 4
    ref, hyp = [1, 0, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]
    assert windowdiff(ref, hyp, k=3) == pytest.approx(0.75)
    assert pk(ref, hyp, k=3) == pytest.approx(0.5)


def test_metrics_edge_cases():
    assert pk([], []) == 0.0 and windowdiff([], []) == 0.0
    assert pk([0], [1]) == 1.0  # one gap: k capped at 1, the only window disagrees
    assert windowdiff([0, 0], [0, 0], k=10) == 0.0  # k larger than the text is capped
    with pytest.raises(HeadsimError, match="gaps"):
        pk([0, 1], [0, 1, 0])
    with pytest.raises(HeadsimError, match="only 0 and 1"):
        windowdiff([0, 2], [0, 1])
    with pytest.raises(HeadsimError, match="at least 1"):
        pk([0, 1, 0], [0, 1, 0], k=0)


def test_boundary_f1():
    ref = to_boundary_vector(10, [2, 5])
    assert boundary_f1(ref, to_boundary_vector(10, [2, 5])) == (1.0, 1.0, 1.0)
    # one of two hypothesis boundaries is exact: P = 1/2, R = 1/2
    assert boundary_f1(ref, to_boundary_vector(10, [2, 6])) == pytest.approx((0.5, 0.5, 0.5))
    # with tolerance 1, 6 matches 5
    assert boundary_f1(ref, to_boundary_vector(10, [2, 6]), tolerance=1) == pytest.approx((1.0, 1.0, 1.0))
    # matches are one-to-one: 3 and 4 are both within 1 of 3 but only one can match it
    p, r, f = boundary_f1(to_boundary_vector(10, [3]), to_boundary_vector(10, [3, 4]), tolerance=1)
    assert (p, r) == pytest.approx((0.5, 1.0)) and f == pytest.approx(2 / 3)
    assert boundary_f1([0, 0], [0, 0]) == (1.0, 1.0, 1.0)
    assert boundary_f1([0, 1], [0, 0]) == (0.0, 0.0, 0.0)
    assert boundary_f1([0, 0], [1, 0]) == (0.0, 0.0, 0.0)


def test_boundaries_to_segments_whitespace_goes_to_preceding_segment():
    text = "  One.  Two.\n\nThree.  "
    spans = [(2, 6), (8, 12), (14, 20)]  # trimmed sentences
    segments = boundaries_to_segments(text, spans, [0, 1])
    assert [s.text for s in segments] == ["  One.  ", "Two.\n\n", "Three.  "]
    assert segments[0].start == 0 and segments[-1].end == len(text)
    assert [s.text for s in boundaries_to_segments(text, spans, [])] == [text]
    assert boundaries_to_segments("", [], []) == []
    assert boundaries_to_segments("   ", [], []) == [Segment(0, 3, "   ")]


def test_boundaries_to_segments_rejects_bad_input():
    with pytest.raises(HeadsimError):
        boundaries_to_segments("a b", [(0, 1), (2, 3)], [1])
    with pytest.raises(HeadsimError):
        boundaries_to_segments("a b", [(2, 3), (0, 1)], [])


@given(
    st.lists(
        st.tuples(st.sampled_from(["", " ", "\n", "\n\n  ", "\t"]), st.text("abc. !?", min_size=1, max_size=12)),
        max_size=8,
    ),
    st.sampled_from(["", " ", "\n"]),
    st.data(),
)
def test_boundaries_to_segments_round_trip(pieces, tail, data):
    text, spans = "", []
    for space, word in pieces:
        text += space
        spans.append((len(text), len(text) + len(word)))
        text += word
    text += tail
    gaps = data.draw(st.sets(st.integers(0, max(len(spans) - 2, 0))) if len(spans) > 1 else st.just(set()))
    segments = boundaries_to_segments(text, spans, gaps)
    assert "".join(s.text for s in segments) == text
    assert all(text[s.start : s.end] == s.text and s.end > s.start for s in segments)
    assert len(segments) == (len(gaps) + 1 if text else 0)


def test_sentence_units_cover_text():
    text = "  Dr. Smith went to Washington. He paid $3.50!\n\nNew paragraph here? Yes.\n"
    units = sentence_units(text)
    assert [u.text.strip() for u in units] == [
        "Dr. Smith went to Washington.",
        "He paid $3.50!",
        "New paragraph here?",
        "Yes.",
    ]
    assert "".join(u.text for u in units) == text and units[0].start == 0 and units[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(units, units[1:]))
    assert sentence_units("") == [] and sentence_units(" \n\t ") == []


def test_sentence_units_forced_breaks_and_long_paragraphs():
    text = "Alpha beta gamma delta. Epsilon zeta."
    units = sentence_units(text, breaks=[6])
    assert [u.text for u in units] == ["Alpha ", "beta gamma delta. ", "Epsilon zeta."]
    long = "word " * (3 * MAX_BLOCK // 5) + "end. " + "Another sentence here. " * 200
    units = sentence_units(long)
    assert "".join(u.text for u in units) == long
    assert max(len(u.text) for u in units) <= MAX_BLOCK + 1


# ---------------------------------------------------------------------------------------------
# Boundary similarity B, bootstrap intervals, paired comparison
# ---------------------------------------------------------------------------------------------


def _vec(n_units: int, gaps: list[int]) -> list[int]:
    return to_boundary_vector(n_units, gaps)


@pytest.mark.parametrize(
    "ref, hyp, expected",
    [
        # masses (3,2,4) vs (3,2,4): identical
        ([2, 4], [2, 4], 1.0),
        # (3,2,4) vs (3,3,3): one match, one near miss one unit off (weight 1/2): 1 - 0.5 / 2
        ([2, 4], [2, 5], 0.75),
        # (2,2,2,3) vs (3,3,3): match at 6, one near miss (0.5) and one addition: 1 - 1.5 / 3
        ([1, 3, 5], [2, 5], 0.5),
        # (5,4) vs (3,6): two units off is beyond n_t = 2: a miss and an addition: 1 - 2 / 2
        ([4], [2], 0.0),
        # a boundary found where there is none: 1 - 1 / 1
        ([], [3], 0.0),
        # nothing to find, nothing found
        ([], [], 1.0),
    ],
)
def test_boundary_similarity_hand_computed(ref, hyp, expected):
    assert boundary_similarity(_vec(9, ref), _vec(9, hyp)) == pytest.approx(expected)


@given(st.lists(st.integers(0, 1), min_size=1, max_size=30), st.lists(st.integers(0, 1), min_size=1, max_size=30))
def test_boundary_similarity_bounded_and_symmetric(a, b):
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    value = boundary_similarity(a, b)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(boundary_similarity(b, a))
    assert boundary_similarity(a, a) == 1.0


def test_bootstrap_ci_contains_the_mean_and_shrinks():
    import numpy as np

    rng = np.random.default_rng(1)
    small, large = rng.normal(0.3, 0.1, 20), rng.normal(0.3, 0.1, 2000)
    lo, hi = bootstrap_ci(small)
    assert lo < small.mean() < hi
    lo2, hi2 = bootstrap_ci(large)
    assert hi2 - lo2 < (hi - lo) / 4
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    with pytest.raises(HeadsimError):
        bootstrap_ci([])


def test_paired_comparison_counts_and_sign_test():
    result = paired_comparison([0.1, 0.2, 0.3, 0.4], [0.2, 0.2, 0.5, 0.6])
    assert (result["wins"], result["ties"], result["losses"]) == (3, 1, 0)
    assert result["mean_diff"] == pytest.approx(-0.125)
    assert result["ci_low"] <= result["mean_diff"] <= result["ci_high"] <= 0
    assert result["sign_p"] == pytest.approx(0.25)  # 3 of 3 untied: 2 * (1/2)^3
    with pytest.raises(HeadsimError):
        paired_comparison([0.1], [0.1, 0.2])


# ---------------------------------------------------------------------------------------------
# Benchmark sources
# ---------------------------------------------------------------------------------------------


def test_lee_source_regimes_and_disjoint_pools():
    from headsim.segmentation.datasets import CHOI_REGIMES, lee_source

    source = lee_source(docs_per_subset=1)
    regimes = [d for d in source.test + source.dev if source.subset[d.doc_id] in CHOI_REGIMES]
    assert len(regimes) == 2 * len(CHOI_REGIMES)
    for doc in regimes:
        assert len(doc.gold) == 9  # ten segments
        lo, hi = CHOI_REGIMES[source.subset[doc.doc_id]]
        lengths = [b - a for a, b in zip([-1, *doc.gold], [*doc.gold, len(doc.units) - 1])]
        assert all(lo - 1 <= n <= hi + 1 for n in lengths)  # pySBD may re-split a joined story
    dev_text = "\n".join(d.text for d in source.dev)
    for doc in source.test:
        for segment in doc.text.split("\n\n"):
            assert segment[:80] not in dev_text  # no story on both sides


SCENES_MD = """# A Play

## ACT I

## SCENE I. A room.

_Enter A and B_

**A**
First words of the play.
Still the first speech.

**B**
A reply here.

### SCENE II. Elsewhere.

**C**
The second scene begins.

_Exeunt_

## ACT II

## SCENE I. Alone.

**A**
Only one scene in this act.
"""


def test_shakespeare_acts_keep_speech_and_cut_at_scenes():
    from headsim.segmentation.datasets import shakespeare_acts

    docs = shakespeare_acts("test/play", SCENES_MD)
    assert len(docs) == 1  # act II has a single scene
    doc = docs[0]
    assert doc.unit_texts == ["First words of the play.", "Still the first speech.", "A reply here.",
                              "The second scene begins."]
    assert doc.gold == [2]
    assert "Enter" not in doc.text and "**" not in doc.text and "SCENE" not in doc.text


def test_awscli_literal_blocks_become_one_line():
    from headsim.segmentation.datasets import CODE_CHARS, _collapse_literal_blocks

    rst = "The following example lists things. ::\n\n    aws thing list \\\n        --all\n\nOutput::\n\n    {\n        \"A\": 1\n    }\n\nDone."
    lines = _collapse_literal_blocks(rst).split("\n")
    assert "aws thing list \\ --all" in lines and '{ "A": 1 }' in lines and lines[-1] == "Done."
    long = "Intro::\n\n    " + "x " * 400
    assert max(len(line) for line in _collapse_literal_blocks(long).split("\n")) <= CODE_CHARS


RENDERED_MAN = """demo(7)                  Miscellaneous Information Manual                  demo(7)

NAME
       demo - a page to test the loader

DESCRIPTION
       The first paragraph of the description.  It has two sentences.

   A subsection
       Text after a subsection heading.

           int main(void) {
               return 0;
           }

NOTES
       A note.
       --flag
              What the flag does.

SEE ALSO
       other(7)

Linux man-pages 6.03              2022-12-04                             demo(7)
"""


def test_manpage_sections_drop_header_subsection_headings_and_fold_code():
    from headsim.segmentation.datasets import manpage_sections

    sections = manpage_sections(RENDERED_MAN)
    assert [h for h, _ in sections] == ["NAME", "DESCRIPTION", "NOTES", "SEE ALSO"]
    body = dict(sections)["DESCRIPTION"].split("\n")
    assert body == ["The first paragraph of the description. It has two sentences.",
                    "Text after a subsection heading.", "int main(void) { return 0; }"]
    assert dict(sections)["NOTES"].split("\n") == ["A note.", "--flag", "What the flag does."]


def test_leading_segments_cut_after_the_last_whole_segment():
    from headsim.segmentation.datasets import joined_segdoc, leading_segments

    doc = joined_segdoc("d", ["One. Two.", "Three. Four. Five.", "Six.", "Seven. Eight."])
    assert doc.gold == [1, 4, 5] and len(doc.units) == 8
    assert leading_segments(doc, 8) is doc
    cut = leading_segments(doc, 7)  # segments 1-3 end at unit 6
    assert cut.gold == [1, 4] and len(cut.units) == 6 and cut.text == doc.text[: doc.units[5].end]
    assert cut.units == doc.units[:6]
    assert leading_segments(doc, 4) is None  # only one whole segment fits


def test_leave_one_source_out_never_fits_on_the_held_out_source():
    from headsim.segmentation.datasets import Source, joined_segdoc, leave_one_source_out

    def source(name):
        docs = [joined_segdoc(f"{name}/{i}", ["A b.", "C d."]) for i in range(3)]
        return Source(name, docs[:1], docs[1:], {d.doc_id: "all" for d in docs})

    sources = {n: source(n) for n in ("x", "y", "z")}
    splits = leave_one_source_out(sources)
    for held, (train, scored) in splits.items():
        assert {d.doc_id.split("/")[0] for d in train} == set(sources) - {held}
        assert sorted(d.doc_id for d in scored) == [d.doc_id for d in sources[held].test] and all(d in [e for s in sources.values() for e in s.dev] for d in train)
    assert leave_one_source_out(sources, "dev")["x"][1] == sources["x"].dev
    everything = leave_one_source_out(sources, "all")["x"][1]
    assert everything[:1] == sources["x"].dev and sorted(d.doc_id for d in everything[1:]) == ["x/1", "x/2"]
    assert leave_one_source_out(sources, "all", max_scored=2)["x"][1] == everything[:2]
    with pytest.raises(HeadsimError):
        leave_one_source_out(sources, "train")
    sources["y"] = Source("y", sources["x"].dev, [], {})  # the same document in two sources
    with pytest.raises(HeadsimError):
        leave_one_source_out(sources)


def test_manpage_files_name_the_missing_package():
    import shutil

    from headsim.segmentation.datasets import manpage_files

    if shutil.which("dpkg") is None or shutil.which("man") is None:
        pytest.skip("not a Debian system")
    with pytest.raises(HeadsimError, match="apt-get install"):
        manpage_files("no-such-package-headsim")
