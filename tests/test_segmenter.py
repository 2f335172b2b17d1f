"""headsim's own segmenter: exact offsets, counts, sentence and topic levels, long texts, errors."""

from __future__ import annotations

import json
import resource

import numpy as np
import pytest

import headsim.cli.segment_cmd  # noqa: F401  (registers `segment` until cli/__init__ imports it)
from headsim.cli import run_app
from headsim.errors import HeadsimError
import headsim
from headsim.segmentation.config import DEFAULT_CONFIG_PATH
from headsim.segmentation.features import sentence_embeddings
from headsim.segmentation.scoring import combined_similarity, content_scores, prepare_units
from headsim.segmentation.segmenter import (
    PassSpec,
    Segmenter,
    default_config,
    depth_scores,
    encoder_pass,
    gap_similarity,
    pick_boundaries,
    segment,
)
from headsim.segmentation.selection import fit_topic_from_features
from headsim.segmentation.units import sentence_units

PARAGRAPH = ("The storm reached the coast on Monday night. Thousands of homes lost power within hours. "
             "Rescue teams worked until dawn to clear the roads! Did anyone expect the damage to be this bad? "
             "Officials said repairs would take weeks.")

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
    # peaks 3.0, 2.0, 1.0 (gaps 4, 7, 1): the largest drop in the sorted depths is after 3.0
    assert pick_boundaries(score, None, rule="elbow") == [4]
    assert pick_boundaries(score, None, rule="relative", threshold=0.5) == [4, 7]
    even = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 0.9, 0.0, 0.1])
    assert pick_boundaries(even, None, rule="elbow") == [1, 3, 5]  # equal strong peaks: all kept
    with pytest.raises(HeadsimError, match="rule"):
        pick_boundaries(score, None, rule="median", threshold=1.0)
    with pytest.raises(HeadsimError):
        pick_boundaries(score, 20)


def test_gap_similarity_separates_two_topics(rng):
    a, b = rng.normal(size=8), rng.normal(size=8)
    vectors = np.array([a + 0.1 * rng.normal(size=8) for _ in range(6)] + [b + 0.1 * rng.normal(size=8) for _ in range(6)])
    sim = gap_similarity(vectors, 1, 3)
    assert int(np.argmin(sim)) == 5
    prepared = prepare_units(vectors, 1)
    assert np.allclose(np.linalg.norm(prepared, axis=-1), 1.0)


def _synthetic_docs(rng, n_docs=4, n_seg=3, seg_len=6, d=4):
    """Per document: [n, 2 heads, d] vectors (head 0 noise, head 1 topic) and [n, d] embeddings."""
    heads, embs, golds = [], [], []
    for _ in range(n_docs):
        topics = rng.normal(size=(n_seg, d))
        seg = np.repeat(np.arange(n_seg), seg_len)
        informative = topics[seg] + 0.2 * rng.normal(size=(len(seg), d))
        heads.append(np.stack([rng.normal(size=(len(seg), d)), informative], axis=1))
        embs.append(rng.normal(size=(len(seg), d)))  # uninformative embeddings
        golds.append([seg_len * (i + 1) - 1 for i in range(n_seg - 1)])
    return heads, embs, golds


@pytest.mark.parametrize("criterion", ["boundary", "content"])
def test_fit_topic_from_features_prefers_the_informative_head(rng, criterion):
    heads, embs, golds = _synthetic_docs(rng)
    config = fit_topic_from_features(heads, embs, golds, [(0, 0), (0, 1)], criterion=criterion)
    assert config["heads"][0] == [0, 1]
    assert config["embedding_weight"] < 1.0  # the embeddings carry nothing here
    assert config["fit"]["oracle_count_pk"] < 0.2
    json.dumps(config)  # serialisable


def test_content_scores_ignore_position_and_see_content(rng):
    n, d = 12, 8
    position = rng.normal(size=(n, d))  # the same in every document: a positional head
    docs = []
    for _ in range(5):
        topic = rng.normal(size=d)
        content = topic + 0.3 * rng.normal(size=(n, d))
        docs.append(np.stack([position + 0.05 * rng.normal(size=(n, d)), content], axis=1))
    scores = content_scores(docs)
    assert scores[1] > 0.9 and abs(scores[0] - 0.5) < 0.15


def test_combined_similarity_mixes_standardised_curves(rng):
    heads = rng.normal(size=(10, 2, 4))
    emb = rng.normal(size=(10, 6))
    only_heads = combined_similarity(heads, None, 2, 0.0)
    only_emb = combined_similarity(None, emb, 2, 1.0)
    both = combined_similarity(heads, emb, 2, 0.25)
    assert np.allclose(both, 0.75 * only_heads + 0.25 * only_emb)
    assert abs(only_heads.mean()) < 1e-9 and only_heads.std() == pytest.approx(1.0)
    with pytest.raises(HeadsimError):
        combined_similarity(heads, None, 2, 0.5)


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


def test_default_config_is_package_data_json():
    config = default_config()
    assert config == json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    assert config["topic"]["k"] > 0 and 0 <= config["topic"]["embedding_weight"] <= 1
    assert "layer" in config["sentence"]
    config["topic"]["k"] = -1  # a copy: the shipped one is untouched
    assert default_config()["topic"]["k"] > 0


def test_default_document_records_the_command_that_wrote_it():
    from headsim.segmentation.selection import default_document

    topic = default_config()["topic"]
    doc = default_document(topic, 7, command="python benchmarks/segmentation.py --write-default")
    assert doc["produced_by"].startswith("python benchmarks/segmentation.py --write-default: ")
    assert "(7 documents)" in doc["produced_by"] and doc["topic"] == topic
    assert doc["sentence"] == default_config()["sentence"]
    shipped = default_config()["produced_by"]
    assert shipped.split(":")[0] in ("python benchmarks/segmentation.py --write-default",
                                     "python -m headsim.segmentation.selection --write",
                                     "python -m headsim.segmentation.selection --write --topic-only")


def test_segment_and_segmenter_are_top_level():
    assert headsim.segment is segment and headsim.Segmenter is Segmenter
    assert "segment" in headsim.__all__ and "Segmenter" in headsim.__all__


def test_segmenter_init_is_light_and_unfitted_use_is_an_error():
    s = Segmenter("no/such/model", k=3)
    assert s.model == "no/such/model" and s.k == 3  # nothing loaded, nothing checked yet
    assert not hasattr(s, "config_") and not hasattr(s, "heads_")
    with pytest.raises(HeadsimError, match="not fitted"):
        s.predict(["a.", "b."])
    with pytest.raises(HeadsimError, match="list of documents"):
        s.fit("one string")


def test_sentence_embeddings_match_sentence_transformers(embedded):
    from headsim.segmentation.baselines import embedded_encoder

    texts = ["The storm reached the coast.", "Officials said repairs would take weeks and cost millions.", "Hi"]
    ours = sentence_embeddings(embedded, texts, batch=2)
    reference = embedded_encoder().encode(texts, normalize_embeddings=True)
    assert np.allclose(ours, reference, atol=1e-5)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_segmenter_fit_predict_save_round_trip(embedded, tmp_path):
    first, second = _two_stories()
    from headsim.corpus import lee_documents

    stories = [d.text.strip() for d in lee_documents()[10:16]]
    docs = [[stories[0], stories[1], stories[2]], [stories[3], stories[4], stories[5]]]
    seg = Segmenter(embedded, n_heads=2, k=3, embedding_weight=0.5)
    assert seg.fit(docs) is seg
    assert len(seg.heads_) == 2 and seg.k_ == 3 and seg.embedding_weight_ == 0.5
    units = [u.text.strip() for u in sentence_units(first + "\n\n" + second)]
    gaps = seg.predict(units, n_boundaries=1)
    assert len(gaps) == 1 and 0 <= gaps[0] < len(units) - 1
    path = seg.save(tmp_path / "seg.json")
    again = Segmenter.from_config(path, embedded)
    assert again.config_ == seg.config_
    assert again.predict(units, n_boundaries=1) == gaps
    assert np.allclose(again.gap_scores(units), seg.gap_scores(units))
    text = first + "\n\n" + second
    _check_tiling(text, again.segment(text, n_segments=2))


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
    bad = default_config()
    bad["topic"].update(heads=[], embedding_weight=0.5)
    with pytest.raises(HeadsimError, match="no heads"):
        segment(PARAGRAPH, embedded, config=bad)
    del bad["topic"]["k"]
    with pytest.raises(HeadsimError, match="topic section"):
        segment(PARAGRAPH, embedded, config=bad)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


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
        "topic": {"heads": [[1, 0], [1, 2]], "k": 5, "embedding_weight": 0.0, "threshold": 1.0,
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
