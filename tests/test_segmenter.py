"""headsim's own segmenter: exact offsets, counts, sentence and topic levels, long texts, errors."""

from __future__ import annotations

import json
import resource

import numpy as np
import pytest

import headsim.cli.segment_cmd  # noqa: F401  (registers `segment` until cli/__init__ imports it)
from headsim.cli import run_app
from headsim.errors import HeadsimError
from headsim.segmentation.segmenter import (
    HeadsimSegmenter,
    PassSpec,
    benchmark_method,
    benchmark_sentence_method,
    default_config,
    depth_scores,
    encoder_pass,
    gap_similarity,
    pick_boundaries,
    segment,
)
from headsim.segmentation.selection import (
    DEFAULT_CONFIG,
    fit_topic_from_vectors,
    prepare_units,
)

PARAGRAPH = ("The storm reached the coast on Monday night. Thousands of homes lost power within hours. "
             "Rescue teams worked until dawn to clear the roads! Did anyone expect the damage to be this bad? "
             "Officials said repairs would take weeks.")
PARAGRAPH_SENTENCES = 5

ODD_TEXTS = [
    "Hello world.",
    "  leading and trailing spaces.   ",
    "Tabs\tand\u00a0non-breaking\u2003spaces. Then\r\nWindows line ends.\r\n\r\nA new paragraph here.",
    "Ünïcödé façade — naïve café. 日本語のテキストです。 Emoji 🙂 are fine too! Last one.",
    "no separator at all just words running on and on without any punctuation",
    "\n\n\nStarts with newlines. Ends with them.\n\n\n",
    "Dr. Smith met Mrs. Jones at 3.5 p.m. in the U.S. office. They talked.",
]


def _joined(segments) -> str:
    return "".join(s.text for s in segments)


def _check_tiling(text: str, segments) -> None:
    assert _joined(segments) == text
    assert segments[0].start == 0 and segments[-1].end == len(text)
    for a, b in zip(segments, segments[1:]):
        assert a.end == b.start
    for s in segments:
        assert text[s.start:s.end] == s.text and s.end > s.start


# ---------------------------------------------------------------------------------------------
# Pure functions
# ---------------------------------------------------------------------------------------------


def test_depth_scores_peak_at_valley():
    sim = np.array([0.9, 0.8, 0.2, 0.85, 0.9])
    depth = depth_scores(sim)
    assert int(np.argmax(depth)) == 2
    assert depth[2] == pytest.approx((0.9 - 0.2) + (0.9 - 0.2))


def test_pick_boundaries_count_and_threshold():
    score = np.array([0.0, 1.0, 0.2, 0.1, 3.0, 0.1, 0.0, 2.0, 1.9])
    assert pick_boundaries(score, 2) == [4, 7]
    assert pick_boundaries(score, 0) == []
    assert len(pick_boundaries(score, 6)) == 6  # topped up beyond the local peaks
    assert pick_boundaries(score, None, threshold=1.0) == [4, 7]
    assert pick_boundaries(np.zeros(0), None, threshold=0.5) == []
    with pytest.raises(HeadsimError):
        pick_boundaries(score, 20)


def test_gap_similarity_separates_two_topics(rng):
    a, b = rng.normal(size=8), rng.normal(size=8)
    vectors = np.array([a + 0.1 * rng.normal(size=8) for _ in range(6)] + [b + 0.1 * rng.normal(size=8) for _ in range(6)])
    sim = gap_similarity(vectors, 1, 3)
    assert int(np.argmin(sim)) == 5
    prepared = prepare_units(vectors, 1)
    assert np.allclose(np.linalg.norm(prepared, axis=-1), 1.0)


def test_fit_topic_from_vectors_prefers_the_informative_head(rng):
    vectors, golds = [], []
    for _ in range(4):
        topics = rng.normal(size=(3, 4))
        seg = np.repeat(np.arange(3), 6)
        informative = topics[seg] + 0.2 * rng.normal(size=(18, 4))
        noise = rng.normal(size=(18, 4))
        vectors.append(np.concatenate([noise, informative], axis=1))
        golds.append([5, 11])
    config = fit_topic_from_vectors(vectors, golds, [(0, 0), (0, 1)])
    assert config["heads"][0] == [0, 1]
    assert config["dev"]["oracle_k_pk"] < 0.2
    json.dumps(config)  # serialisable


# ---------------------------------------------------------------------------------------------
# The encoder pass (windows)
# ---------------------------------------------------------------------------------------------


def test_encoder_pass_covers_every_token_once_and_is_batch_independent(embedded):
    text = " ".join([PARAGRAPH] * 12)
    spec = PassSpec(heads=((2, 1), (3, 1)), col_layers=(3,), seq_len=64, stride=40, batch=3)
    blocks = list(encoder_pass(embedded, text, spec))
    index = np.concatenate([b.index for b in blocks])
    n = len(embedded.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert np.array_equal(index, np.arange(n))
    other = list(encoder_pass(embedded, text, PassSpec(heads=spec.heads, col_layers=spec.col_layers, seq_len=64, stride=40, batch=7)))
    vec_a = np.concatenate([b.vec for b in blocks])
    vec_b = np.concatenate([b.vec for b in other])
    assert np.allclose(vec_a, vec_b, atol=1e-5)
    col = np.concatenate([b.col for b in blocks])
    assert col.shape == (n, 1) and (col >= 0).all() and (col <= 1 + 1e-6).all()


# ---------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------


def test_default_config_is_shipped_and_serialisable():
    config = default_config()
    assert config is DEFAULT_CONFIG
    assert config["topic"]["heads"] and config["topic"]["k"] >= 1
    assert "layer" in config["sentence"]
    json.loads(json.dumps(config))


@pytest.mark.parametrize("text", ODD_TEXTS)
@pytest.mark.parametrize("level", ["topic", "sentence"])
def test_segments_reproduce_the_text_exactly(embedded, text, level):
    segments = segment(text, embedded, level=level)
    _check_tiling(text, segments)


def test_sentence_level_finds_the_sentences(embedded):
    segments = segment(PARAGRAPH, embedded, level="sentence")
    _check_tiling(PARAGRAPH, segments)
    assert [s.text.strip() for s in segments] == [
        "The storm reached the coast on Monday night.",
        "Thousands of homes lost power within hours.",
        "Rescue teams worked until dawn to clear the roads!",
        "Did anyone expect the damage to be this bad?",
        "Officials said repairs would take weeks.",
    ]


def test_single_sentence_and_no_separator_give_one_segment(embedded):
    for text in ("Just one sentence here.", "no separator at all just words"):
        for level in ("topic", "sentence"):
            segments = segment(text, embedded, level=level)
            assert len(segments) == 1 and segments[0].text == text


@pytest.mark.parametrize("level", ["topic", "sentence"])
def test_n_segments_is_honoured(embedded, level):
    text = " ".join([PARAGRAPH] * 4)
    for k in (1, 2, 3, 5):
        segments = segment(text, embedded, level=level, n_segments=k)
        assert len(segments) == k
        _check_tiling(text, segments)


def _two_stories():
    from headsim.corpus import lee_documents

    stories = [d.text.strip() for d in lee_documents()]
    return stories[0], stories[5]


def test_topic_level_finds_the_boundary_between_two_lee_stories(embedded):
    from headsim.segmentation.units import sentence_units

    first, second = _two_stories()
    text = first + "\n\n" + second
    units = sentence_units(text)
    boundary_unit = next(i for i, u in enumerate(units) if u.start >= len(first) + 2)
    for units_from in ("pysbd", "model"):
        segments = segment(text, embedded, level="topic", n_segments=2, units=units_from)
        assert len(segments) == 2
        _check_tiling(text, segments)
        cut = segments[1].start
        cut_unit = next(i for i, u in enumerate(units) if u.start >= cut)
        assert abs(cut_unit - boundary_unit) <= 1, (cut, len(first))


def test_units_from_model_keep_exact_offsets(embedded):
    text = " ".join(ODD_TEXTS)
    _check_tiling(text, segment(text, embedded, level="topic", units="model"))


@pytest.mark.parametrize("bad", ["", "   ", "\n\t \n"])
def test_empty_text_is_an_error(embedded, bad):
    with pytest.raises(HeadsimError, match="empty"):
        segment(bad, embedded)


def test_bad_arguments_are_errors(embedded):
    with pytest.raises(HeadsimError):
        segment(123, embedded)  # type: ignore[arg-type]
    with pytest.raises(HeadsimError, match="level"):
        segment(PARAGRAPH, embedded, level="paragraph")
    with pytest.raises(HeadsimError, match="n_segments"):
        segment(PARAGRAPH, embedded, n_segments=0)
    with pytest.raises(HeadsimError, match="segments"):
        segment(PARAGRAPH, embedded, n_segments=50)
    with pytest.raises(HeadsimError, match="units"):
        segment(PARAGRAPH, embedded, units="spacy")
    with pytest.raises(HeadsimError, match="configuration"):
        segment(PARAGRAPH, embedded, config="/nonexistent/config.json")


# ---------------------------------------------------------------------------------------------
# Benchmark hooks and CLI
# ---------------------------------------------------------------------------------------------


def test_benchmark_hooks(embedded):
    method = benchmark_method()
    assert isinstance(method, HeadsimSegmenter) and method.name == "headsim"
    units = [u.strip() for u in PARAGRAPH.replace("! ", "!|").replace("? ", "?|").replace(". ", ".|").split("|")] * 3
    assert len(method.predict(units, 2)) == 2
    assert all(0 <= g < len(units) - 1 for g in method.predict(units, None))
    assert method.predict(["one unit"], None) == []
    split = benchmark_sentence_method()
    assert len(split(PARAGRAPH)) == PARAGRAPH_SENTENCES


def test_cli_segment_writes_jsonl(embedded, tmp_path, capsys):
    src = tmp_path / "doc.txt"
    text = " ".join([PARAGRAPH] * 3)
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "segments.jsonl"
    code = run_app(["segment", str(src), "--n-segments", "2", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 and "".join(r["text"] for r in rows) == text
    code = run_app(["segment", str(src), "--level", "sentence"])
    assert code == 0
    assert "sentence segments" in capsys.readouterr().out


def test_cli_segment_bad_input_exits_2(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n", encoding="utf-8")
    assert run_app(["segment", str(empty)]) == 2
    assert run_app(["segment", str(tmp_path / "missing.txt")]) == 2
    assert run_app(["segment", str(empty), "--level", "chapter"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# A 10 MB text in bounded memory (tiny random BERT: the streaming, not the model, is under test)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ten_megabytes_stream_in_bounded_memory(tiny_bert):
    from headsim.corpus import lee_documents

    stories = " ".join(d.text.strip() for d in lee_documents())
    text = (stories + "\n\n") * (10_000_000 // (len(stories) + 2) + 1)
    config = {
        "topic": {"heads": [[1, 0], [1, 2]], "k": 5, "threshold": 1.0, "mean_segment_units": 10.0,
                  "seq_len": 128, "stride": 96},
        "sentence": {"layer": 1, "candidates": "punctuation", "threshold": 0.3, "fallback": False},
    }
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    segments = segment(text, tiny_bert, level="topic", units="model", config=config, batch=64)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert sum(len(s.text) for s in segments) == len(text)
    assert segments[0].start == 0 and segments[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(segments, segments[1:]))
    assert len(segments) > 10
    assert grown_mb < 1500, f"peak memory grew by {grown_mb:.0f} MB"
