"""Corpora: the embedded default corpus and the user's own files, local or at a URL.

* :mod:`.documents`: the data model (:class:`Corpus`, :class:`Document`, :class:`Section`);
* :mod:`.readers`: :func:`load_corpus` and the readers of the user's files, the embedded corpus;
* :mod:`.wikipedia`: the embedded Wikipedia sample, its wikitext cleaned to plain text with sections;
* :mod:`.remote`: fetching a corpus at a URL (deadlines, retries, one-line causes);
* :mod:`.embedded`: where gensim's bundled test data lies.
"""

from .documents import Corpus, Document, Section
from .embedded import gensim_test_data
from .formats import convert_hint, not_utf8, read_text_file
from .readers import default_corpus, lee_documents, load_corpus, load_url
from .wikipedia import WIKI_FORMAT_VERSION, wikipedia_documents

__all__ = [
    "Corpus",
    "Document",
    "Section",
    "WIKI_FORMAT_VERSION",
    "convert_hint",
    "default_corpus",
    "gensim_test_data",
    "lee_documents",
    "load_corpus",
    "load_url",
    "not_utf8",
    "read_text_file",
    "wikipedia_documents",
]
