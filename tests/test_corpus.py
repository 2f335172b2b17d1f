"""Tests for headsim.corpus: the file readers, their errors, hashing, and the embedded corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from headsim.corpus import wikipedia as corpus_module
from headsim.corpus import (
    Corpus,
    Document,
    Section,
    default_corpus,
    lee_documents,
    load_corpus,
    wikipedia_documents,
)
from headsim.errors import HeadsimError


def _error(spec: object, **kwargs: str) -> HeadsimError:
    """The HeadsimError that load_corpus raises for ``spec``."""
    with pytest.raises(HeadsimError) as info:
        load_corpus(spec, **kwargs)  # type: ignore[arg-type]
    assert info.value.problem and info.value.fix
    return info.value


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


def test_txt_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(
        "\n\nFirst doc,\nline two.\n\n\n  \nSecond doc.\r\n\r\nThird ünïcode doc.\n\n", "utf-8"
    )
    corpus = load_corpus(path)
    assert corpus.name == str(path)
    texts = ["First doc,\nline two.", "Second doc.", "Third ünïcode doc."]
    assert [d.text for d in corpus] == texts
    assert [d.doc_id for d in corpus] == ["notes.txt#0", "notes.txt#1", "notes.txt#2"]
    assert {d.source for d in corpus} == {str(path)}
    assert all(d.title is None and d.sections == () for d in corpus)


def test_directory_round_trip_sorted_by_name(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("B one.\n\nB two.", "utf-8")
    (tmp_path / "a.txt").write_text("A one.", "utf-8")
    (tmp_path / "ignored.md").write_text("not read", "utf-8")
    corpus = load_corpus(str(tmp_path))
    assert [d.text for d in corpus] == ["A one.", "B one.", "B two."]
    assert [d.doc_id for d in corpus] == ["a.txt#0", "b.txt#0", "b.txt#1"]
    assert corpus[1].source == str(tmp_path / "b.txt")


def test_jsonl_round_trip_and_text_field(tmp_path: Path) -> None:
    rows = [{"body": "x one", "n": 1}, {"body": "  "}, {"body": "x two"}]
    path = _write_jsonl(tmp_path / "d.jsonl", rows)
    corpus = load_corpus(path, text_field="body")
    assert [d.text for d in corpus] == ["x one", "x two"]
    assert [d.doc_id for d in corpus] == ["d.jsonl#0", "d.jsonl#2"]  # ids point back to records


def test_parquet_round_trip_and_text_column(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pd.DataFrame({"content": ["p one", "", "p two"], "k": [1, 2, 3]}).to_parquet(path)
    corpus = load_corpus(path, text_column="content")
    assert [d.text for d in corpus] == ["p one", "p two"]
    assert [d.doc_id for d in corpus] == ["d.parquet#0", "d.parquet#2"]


def test_corpus_is_a_reiterable_hashable_sequence(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("one\n\ntwo", "utf-8")
    corpus = load_corpus(path)
    assert list(corpus) == list(corpus) == corpus.documents
    assert len(corpus) == 2 and corpus[0].text == "one"
    assert corpus == load_corpus(path) and hash(corpus) == hash(load_corpus(path))
    corpus.documents.clear()  # a copy: the corpus is unchanged
    assert len(corpus) == 2
    with pytest.raises(HeadsimError, match="two documents with id"):
        Corpus("dup", [Document("a", "x", "s"), Document("b", "x", "s")])


# ---------------------------------------------------------------------------------------------
# sha256
# ---------------------------------------------------------------------------------------------


def test_sha256_stable_and_sensitive(tmp_path: Path) -> None:
    docs = [Document("alpha beta", "f#0", "f"), Document("gamma", "f#1", "f")]
    digest = Corpus("x", docs).sha256  # pinned below: the digest must not change across runs
    assert digest == "075d986b1c2ba3b169d64a5a18b30894e6bea28ac740b6d3b7047f3c2acf9878"
    assert Corpus("other name", list(docs)).sha256 == digest  # over ids and texts only
    changed = [Document("alpha betA", "f#0", "f"), docs[1]]
    assert Corpus("x", changed).sha256 != digest
    renamed = [Document("alpha beta", "f#9", "f"), docs[1]]
    assert Corpus("x", renamed).sha256 != digest
    shifted = [Document("alpha bet", "f#0", "f"), Document("agamma", "f#1", "f")]
    assert Corpus("x", shifted).sha256 != digest  # boundaries count, not just concatenation
    path = tmp_path / "s.txt"
    path.write_text("alpha beta\n\ngamma", "utf-8")
    assert load_corpus(path).sha256 == load_corpus(path).sha256


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    error = _error(tmp_path / "nope.txt")
    assert "does not exist" in error.problem and "nope.txt" in error.problem


def test_unsupported_extension(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("text\nhello", "utf-8")
    error = _error(path)
    assert "unsupported extension" in error.problem and "'.csv'" in error.problem
    assert ".jsonl" in error.fix


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "locked.txt"
    path.write_text("secret", "utf-8")

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    error = _error(path)
    assert "Cannot read" in error.problem and "Permission denied" in error.problem


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(b"GIF89a\xff\xfe\x00\x01binary")
    error = _error(path)
    assert "binary" in error.problem and "UTF-8" in error.problem


def test_nul_bytes_count_as_binary(tmp_path: Path) -> None:
    path = tmp_path / "nul.txt"
    path.write_bytes(b"valid ascii\x00but binary")
    assert "binary" in _error(path).problem


def test_jsonl_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "ok"}\n\n{"text": oops}\n', "utf-8")
    error = _error(path)
    assert "Line 3" in error.problem and "not valid JSON" in error.problem


def test_jsonl_line_not_an_object(tmp_path: Path) -> None:
    error = _error(_write_jsonl(tmp_path / "list.jsonl", [["a", "b"]]))
    assert "Line 1" in error.problem and "not a JSON object" in error.problem


def test_jsonl_missing_field_lists_fields(tmp_path: Path) -> None:
    error = _error(_write_jsonl(tmp_path / "f.jsonl", [{"body": "x", "id": 1}]))
    assert "no field 'text'" in error.problem
    assert "'body'" in error.problem and "'id'" in error.problem
    assert "text_field" in error.fix


def test_jsonl_non_string_value(tmp_path: Path) -> None:
    error = _error(_write_jsonl(tmp_path / "n.jsonl", [{"text": "ok"}, {"text": 42}]))
    assert "line 2" in error.problem and "int, not a string" in error.problem
    error = _error(_write_jsonl(tmp_path / "z.jsonl", [{"text": None}]))
    assert "null, not a string" in error.problem


def test_parquet_missing_column_lists_columns(tmp_path: Path) -> None:
    path = tmp_path / "m.parquet"
    pd.DataFrame({"body": ["x"], "label": [1]}).to_parquet(path)
    error = _error(path)
    assert "no column 'text'" in error.problem
    assert "'body'" in error.problem and "'label'" in error.problem
    assert "text_column" in error.fix


def test_parquet_non_string_values(tmp_path: Path) -> None:
    path = tmp_path / "i.parquet"
    pd.DataFrame({"text": [1, 2]}).to_parquet(path)
    error = _error(path)
    assert "row 0" in error.problem and "int, not a string" in error.problem


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"this is not parquet at all")
    assert "not a readable Parquet file" in _error(path).problem


@pytest.mark.parametrize(
    ("name", "content"),
    [("blank.txt", "\n  \n\t\n"), ("blank.jsonl", '{"text": "  "}\n'), ("nothing.txt", "")],
)
def test_empty_corpus(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content, "utf-8")
    assert "Empty corpus" in _error(path).problem


def test_directory_without_txt_files(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("hello", "utf-8")
    assert "holds no .txt, .jsonl or .parquet file" in _error(tmp_path).problem


# ---------------------------------------------------------------------------------------------
# Wikipedia cache (with a tiny stand-in dump, so it runs fast)
# ---------------------------------------------------------------------------------------------


def test_wiki_cache_is_written_reused_and_rebuilt_when_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    sections = (Section("", 0, 12), Section("H", 12, 17))
    fake = (Document("Lead text.\n\nBody.", "enwiki/1", "enwiki", "T", sections),)

    def parse(dump: Path) -> tuple[Document, ...]:
        calls.append(dump)
        return fake

    monkeypatch.setenv("HEADSIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(corpus_module, "_parse_wikipedia_dump", parse)
    monkeypatch.setattr(corpus_module, "_WIKI_MEMO", {})
    assert wikipedia_documents() == list(fake) and len(calls) == 1
    (cache_file,) = (tmp_path / "cache").glob("enwiki-sample-*.json")
    assert not list((tmp_path / "cache").glob("*.tmp"))

    monkeypatch.setattr(corpus_module, "_WIKI_MEMO", {})
    assert wikipedia_documents() == list(fake) and len(calls) == 1  # read back from disk

    cache_file.write_text('{"key": "truncated', "utf-8")
    monkeypatch.setattr(corpus_module, "_WIKI_MEMO", {})
    assert wikipedia_documents() == list(fake) and len(calls) == 2  # corrupt: rebuilt
    assert json.loads(cache_file.read_text("utf-8"))["documents"][0]["doc_id"] == "enwiki/1"


def test_wiki_markup_cleaning() -> None:
    wikitext = (
        "{{Infobox thing|name=X}}'''Foo''' is a [[bar (thing)|bar]] and a [[baz]]s.<ref>cite</ref>"
        " It is {{convert|5|km}} long [[File:x.jpg|thumb|a [[caption]]]].\n"
        "<!-- hidden -->\n\n== History ==\nOld  [http://x.org story]   here.\n"
        "{| class=\"wikitable\"\n| cell\n|}\n"
        "== See also ==\n* [[Other]]\n=== Sub of see also ===\nlist\n"
        "== Legacy ==\nLasting.[[Category:Things]] [[de:Foo]]\n"
    )
    doc = corpus_module._wiki_document("Foo", wikitext, "7")
    assert doc is not None and doc.doc_id == "enwiki/7" and doc.title == "Foo"
    assert doc.text == "Foo is a bar and a bazs. It is 5 km long.\n\nOld story here.\n\nLasting."
    assert [s.title for s in doc.sections] == ["", "History", "Legacy"]
    assert "".join(doc.text[s.start : s.end] for s in doc.sections) == doc.text
    assert corpus_module._wiki_document("R", "#REDIRECT [[Foo]]", "8") is None
    disambiguation = "'''D''' may refer to:\n{{disambiguation}}"
    assert corpus_module._wiki_document("D", disambiguation, "9") is None


# ---------------------------------------------------------------------------------------------
# The real embedded corpus
# ---------------------------------------------------------------------------------------------


def test_lee_documents() -> None:
    lee = lee_documents()
    assert len(lee) == 300
    assert [d.doc_id for d in lee[:2]] == ["lee/0", "lee/1"] and lee[0].source == "lee"
    assert lee[0].text.startswith("Hundreds of people have been forced to vacate their homes")
    assert all(d.text and "\n" not in d.text for d in lee)


def test_default_corpus_on_the_real_dump() -> None:
    """Parses the real dump (seconds when the cache is cold)."""
    wiki = wikipedia_documents()
    # The shortened dump has 206 pages: 99 redirects, 1 empty non-article page, 8 disambiguation
    # pages; the rest are articles.
    assert len(wiki) >= 95
    assert len({d.doc_id for d in wiki}) == len(wiki)
    for doc in wiki:
        assert doc.source == "enwiki" and doc.doc_id.startswith("enwiki/") and doc.title
        assert not doc.text.lower().startswith("#redirect")
        for markup in ("==", "{{", "}}", "[[", "]]", "<ref", "{|", "__TOC__"):
            assert markup not in doc.text, (doc.title, markup)
        assert doc.text == doc.text.strip() and "\n\n\n" not in doc.text
        assert doc.sections and doc.sections[0].start == 0 and doc.sections[-1].end == len(doc.text)
        for before, after in zip(doc.sections, doc.sections[1:]):
            assert before.end == after.start
        for section in doc.sections:
            assert section.end > section.start
            assert doc.text[section.start : section.end].strip()
            assert section.title.lower() not in {"see also", "references", "external links"}
    assert sum(len(d.sections) for d in wiki) > 1000
    corpus = default_corpus()
    assert corpus.name == "default" and load_corpus() == corpus
    assert len(corpus) == len(wiki) + 300
    assert corpus.documents[: len(wiki)] == wiki and corpus.documents[-1].doc_id == "lee/299"
    assert corpus.sha256 == load_corpus("default").sha256


def test_latin1_is_named_with_the_encoding_and_the_conversion(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("café crème brûlée".encode("latin-1"))
    error = _error(path)
    assert "binary" not in error.problem and "not UTF-8" in error.problem and "0xe9 at offset 3" in error.problem
    assert "iconv -f latin1 -t utf-8" in error.fix and str(path) in error.fix


# ---------------------------------------------------------------------------------------------
# a corpus in parts
# ---------------------------------------------------------------------------------------------


def _parts(root: Path) -> list[str]:
    """A .txt, a .jsonl and a .parquet of three row groups (blank records among them): 12 documents."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir()
    (root / "a.txt").write_text("one\n\ntwo two\n\n  \n\nthree", "utf-8")
    (root / "b.jsonl").write_text('{"text": "four"}\n\n{"text": ""}\n{"text": "five five"}\n', "utf-8")
    rows = [f"row {i}" if i != 4 else " " for i in range(8)]
    pq.write_table(pa.table({"text": rows}), root / "c.parquet", row_group_size=3)
    (root / "notes.md").write_text("not a part", "utf-8")
    return [str(root / n) for n in ("a.txt", "b.jsonl", "c.parquet")]


def test_a_corpus_in_parts_reads_every_part_and_row_group_in_order(tmp_path: Path) -> None:
    from headsim.corpus.documents import documents_sha256, parts_sha256
    from headsim.corpus.parts import CountedCorpus, Fields, count_unit, iter_units, read_unit

    files = _parts(tmp_path / "parts")
    whole = load_corpus(tmp_path / "parts")
    ids = [d.doc_id for d in whole]
    assert ids == ["a.txt#0", "a.txt#1", "a.txt#2", "b.jsonl#0", "b.jsonl#2"] + [f"c.parquet#{i}" for i in (0, 1, 2, 3, 5, 6, 7)]
    assert [d.text for d in whole][-3:] == ["row 5", "row 6", "row 7"]
    units = list(iter_units(tmp_path / "parts"))
    assert [(Path(u.path).name, u.row_group, u.first_record) for u in units] == [
        ("a.txt", None, 0), ("b.jsonl", None, 0), ("c.parquet", 0, 0), ("c.parquet", 1, 3), ("c.parquet", 2, 6)]
    # the digest: over the units' digests, however the parts are named
    assert whole.sha256 == parts_sha256([documents_sha256(read_unit(u)) for u in units])
    for spec in (files, str(tmp_path / "parts" / "[abc].*"), (tmp_path / "parts").as_uri(),
                 (tmp_path / "parts").as_uri() + "/[abc].*"):  # a folder and a glob at a URL: listed by its file system
        again = load_corpus(spec)
        assert [d.doc_id for d in again] == ids and again.sha256 == whole.sha256
    one = load_corpus(files[0])  # a corpus of one unit keeps the digest of its documents
    assert one.sha256 == Corpus("x", one.documents).sha256
    # counted where read, a slice of documents reads only its units
    counted = CountedCorpus("parts", [count_unit(u, Fields(), lambda ts: [len(t) for t in ts]) for u in units], Fields())
    assert len(counted) == len(whole) and counted.sha256 == whole.sha256
    assert counted.counts.tolist() == [len(d.text) for d in whole]
    texts = [d.text for d in whole]
    for first, last in ((0, 12), (2, 4), (5, 11), (8, 9), (11, 12)):
        piece = counted.slice(first, last)
        assert piece.texts() == texts[first:last]
        assert len(piece.units) == len({(u.path, u.row_group) for u, _ in piece.units})
    assert [u.row_group for u, _ in counted.slice(8, 10).units] == [1]  # rows 3 and 5 of c.parquet: one row group


def test_parts_that_cannot_be_read_together_are_refused(tmp_path: Path) -> None:
    files = _parts(tmp_path / "parts")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.txt").write_text("again", "utf-8")
    with pytest.raises(HeadsimError, match="two corpus parts are named 'a.txt'"):
        load_corpus([*files, str(tmp_path / "other" / "a.txt")])
    with pytest.raises(HeadsimError, match="matches no file"):
        load_corpus(str(tmp_path / "parts" / "*.csv"))
    with pytest.raises(HeadsimError, match="unsupported extension '.md'"):
        load_corpus(str(tmp_path / "parts" / "*"))
    with pytest.raises(HeadsimError, match="empty list"):
        load_corpus([])
