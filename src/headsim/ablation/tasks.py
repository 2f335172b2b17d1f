"""Tasks that score a model's sentence embeddings, one interface each: name, loader, score.

Every task reads its data from gensim's bundled test data (``gensim/test/test_data``) and scores
the model *as it runs now*, so a score taken inside :func:`headsim.ablate` is the ablated model's.

================  =====================================================  =========================
task              data                                                   score (primary first)
================  =====================================================  =========================
``lee``           Lee, Pincombe & Welsh (2005): 50 news documents        Spearman (and Pearson) of
                  (``lee.cor``), mean human similarity of every pair     embedding cosine vs the
                  (``similarities0-1.txt``: upper triangle, 1225 pairs)  1225 mean ratings
``polarity``      Pang & Lee sentence polarity (``pang_lee_polarity``    accuracy of a logistic-
                  ``.cor``: 200 sentences, 100 per label)                regression probe, 5 fixed
                                                                         stratified folds
``wordsim353``    WordSim-353 word pairs with mean human ratings         Spearman of cosine of the
``simlex999``     SimLex-999 word pairs                                  words' embeddings vs rating
``drift``         48 documents spread evenly over the embedded corpus    mean cosine between the
                  (Wikipedia sample + Lee background stories)            embeddings and the full
                                                                         model's (1 = unchanged)
================  =====================================================  =========================

``lee`` and ``polarity`` also give a differentiable loss (:meth:`Task.losses`) for gradient
importance; the loss is fixed on the full model when the task is prepared.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import HeadsimError, require
from ..model.load import LoadedModel
from ..model.embed import Tokenized, embed, tokenize
from .intervention import is_ablated

LEE_DOCS, LEE_RATINGS, POLARITY = "lee.cor", "similarities0-1.txt", "pang_lee_polarity.cor"
WORD_PAIRS = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}


def gensim_data_file(name: str, task: str) -> Path:
    """A file of gensim's test data, or one clear error naming the task that needs it."""
    from ..corpus import gensim_test_data

    return gensim_test_data(name, f"task {task!r}")


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="latin-1").split("\n") if line.strip()]


def pair_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Upper-triangle pairs ``i < j`` of ``n`` items, row by row (the Lee protocol's order)."""
    return np.triu_indices(n, 1)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1])


# ---------------------------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------------------------


def load_lee() -> tuple[list[str], np.ndarray]:
    """The 50 Lee documents and their 1225 mean pair ratings (upper triangle of the 50×50 matrix)."""
    docs = _lines(gensim_data_file(LEE_DOCS, "lee"))
    ratings_path = gensim_data_file(LEE_RATINGS, "lee")
    try:
        matrix = np.loadtxt(ratings_path)
    except ValueError as exc:
        raise HeadsimError(f"cannot read {str(ratings_path)!r}: {exc}", "reinstall gensim from its wheel") from exc
    require(len(docs) == 50 and matrix.shape == (50, 50),
            f"Lee data has {len(docs)} documents and a {matrix.shape} rating matrix, expected 50 and (50, 50)",
            "reinstall gensim from its wheel")
    return docs, matrix[pair_indices(50)]


def load_polarity() -> tuple[list[str], np.ndarray]:
    """Pang & Lee sentences and labels (1 = positive), from ``__label__pos|neg sentence`` lines."""
    texts, labels = [], []
    for line in _lines(gensim_data_file(POLARITY, "polarity")):
        tag, _, text = line.partition(" ")
        require(tag in ("__label__pos", "__label__neg") and text.strip(),
                f"unexpected line in {POLARITY}: {line[:60]!r}", "reinstall gensim from its wheel")
        texts.append(text.strip())
        labels.append(int(tag == "__label__pos"))
    return texts, np.asarray(labels)


def load_word_pairs(name: str) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Word pairs and their mean human ratings (``#`` lines are comments)."""
    require(name in WORD_PAIRS, f"unknown word-pair set {name!r}", f"use one of {', '.join(WORD_PAIRS)}")
    pairs, ratings = [], []
    for line in _lines(gensim_data_file(WORD_PAIRS[name], name)):
        if line.startswith("#"):
            continue
        parts = line.split("\t")
        require(len(parts) == 3, f"unexpected line in {WORD_PAIRS[name]}: {line[:60]!r}", "reinstall gensim from its wheel")
        pairs.append((parts[0].lower(), parts[1].lower()))
        ratings.append(float(parts[2]))
    return pairs, np.asarray(ratings)


def load_drift_texts(n: int = 48) -> list[str]:
    """``n`` documents spread evenly over the embedded default corpus (Wikipedia sample + Lee)."""
    from ..corpus import default_corpus

    docs = default_corpus().documents
    require(1 <= n <= len(docs), f"drift needs 1..{len(docs)} documents, got {n}", "pass a smaller number")
    return [docs[i].text for i in np.linspace(0, len(docs) - 1, n).round().astype(int)]


# ---------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------


@dataclass
class Task:
    """One scored task. Subclasses set ``name``, ``metrics`` and implement ``_load``/``_evaluate``.

    ``score(model)`` is the first metric; ``evaluate(model)`` gives all of them. ``prepare(model)``
    (called by both, once per model) tokenises and fixes whatever depends on the full model; it
    must run outside any ablation.
    """

    name: str = ""
    metrics: tuple[str, ...] = ()
    batch_size: int = 16
    _prepared: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._data = None

    @property
    def data(self):
        """The task's data, read once (:class:`~headsim.errors.HeadsimError` when a file is missing)."""
        if self._data is None:
            self._data = self._load()
        return self._data

    def prepare(self, model: LoadedModel) -> dict:
        key = id(model)
        if key not in self._prepared:
            require(not is_ablated(model), f"task {self.name!r} must be prepared on the full model",
                    "call task.prepare(model) before entering headsim.ablate")
            self._prepared = {key: self._prepare(model)}
        return self._prepared[key]

    def embeddings(self, model: LoadedModel, tokens: Tokenized, *, grad: bool = False) -> torch.Tensor:
        return embed(model, tokens, batch_size=self.batch_size, grad=grad)

    def evaluate(self, model: LoadedModel) -> dict[str, float]:
        """Every metric of the task on the model as it runs now."""
        return dict(zip(self.metrics, self._evaluate(model, self.prepare(model))))

    def score(self, model: LoadedModel) -> float:
        """The task's primary metric (higher is better)."""
        return self.evaluate(model)[self.metrics[0]]

    def losses(self, model: LoadedModel) -> Iterator[torch.Tensor] | None:
        """Differentiable losses, one per example batch, for gradient importance (``None``: none)."""
        return None

    def _load(self):
        raise NotImplementedError

    def _prepare(self, model: LoadedModel) -> dict:
        raise NotImplementedError

    def _evaluate(self, model: LoadedModel, prep: dict) -> tuple[float, ...]:
        raise NotImplementedError


@dataclass
class LeeSimilarity(Task):
    """Lee document similarity: correlation of embedding cosine with the mean human rating.

    Loss (gradient importance): per document i, the squared error of the calibrated cosine
    ``a·cos(e_i, e_j) + b`` against the rating of pair (i, j), averaged over the other 49
    documents, whose embeddings are held fixed; ``a, b`` is the least-squares fit on the full model.
    """

    name: str = "lee"
    metrics: tuple[str, ...] = ("lee_spearman", "lee_pearson")

    def _load(self):
        return load_lee()

    def _prepare(self, model):
        docs, ratings = self.data
        tokens = tokenize(model, docs)
        emb = self.embeddings(model, tokens)
        cos = (emb @ emb.T).cpu().numpy()[pair_indices(len(docs))]
        a, b = np.polyfit(cos, ratings, 1)
        full = np.zeros((len(docs), len(docs)))
        full[pair_indices(len(docs))] = ratings
        return {"tokens": tokens, "emb": emb, "a": float(a), "b": float(b), "ratings": full + full.T}

    def _evaluate(self, model, prep):
        emb = self.embeddings(model, prep["tokens"]).double()
        cos = (emb @ emb.T).cpu().numpy()[pair_indices(len(prep["tokens"]))]
        ratings = self.data[1]
        return spearman(cos, ratings), pearson(cos, ratings)

    def losses(self, model):
        prep = self.prepare(model)
        n = len(prep["tokens"])
        ratings = torch.as_tensor(prep["ratings"], dtype=torch.float32)
        for i in range(n):
            e_i = embed(model, Tokenized(prep["tokens"].ids[i:i + 1]), grad=True)[0]
            others = torch.cat([prep["emb"][:i], prep["emb"][i + 1:]]).to(e_i.device)
            target = torch.cat([ratings[i, :i], ratings[i, i + 1:]]).to(e_i.device)
            yield ((prep["a"] * (others @ e_i) + prep["b"] - target) ** 2).mean()


@dataclass
class Polarity(Task):
    """Pang & Lee polarity: accuracy of a logistic-regression probe, 5 fixed stratified folds.

    Loss: cross-entropy of a probe fitted on all 200 full-model embeddings, per batch of 8 sentences.
    """

    name: str = "polarity"
    metrics: tuple[str, ...] = ("polarity_accuracy",)
    folds: int = 5
    c: float = 10.0
    seed: int = 0

    def _load(self):
        return load_polarity()

    def _probe(self):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=self.c, max_iter=2000)

    def _prepare(self, model):
        from sklearn.model_selection import StratifiedKFold

        texts, labels = self.data
        tokens = tokenize(model, texts)
        folds = list(StratifiedKFold(self.folds, shuffle=True, random_state=self.seed).split(np.zeros(len(labels)), labels))
        probe = self._probe().fit(self.embeddings(model, tokens).cpu().numpy(), labels)
        return {"tokens": tokens, "folds": folds, "w": torch.as_tensor(probe.coef_[0], dtype=torch.float32),
                "b": float(probe.intercept_[0])}

    def _evaluate(self, model, prep):
        x, y = self.embeddings(model, prep["tokens"]).cpu().numpy(), self.data[1]
        hits = sum(int((self._probe().fit(x[tr], y[tr]).predict(x[te]) == y[te]).sum()) for tr, te in prep["folds"])
        return (hits / len(y),)

    def losses(self, model, batch: int = 8):
        prep = self.prepare(model)
        y = torch.as_tensor(self.data[1], dtype=torch.float32)
        for s in range(0, len(y), batch):
            e = embed(model, Tokenized(prep["tokens"].ids[s:s + batch]), grad=True)
            logits = e @ prep["w"].to(e.device) + prep["b"]
            yield torch.nn.functional.binary_cross_entropy_with_logits(logits, y[s:s + batch].to(e.device))


@dataclass
class WordPairs(Task):
    """Word-pair similarity: Spearman of the cosine between the two words' embeddings and the rating."""

    name: str = "wordsim353"
    metrics: tuple[str, ...] = ()
    batch_size: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.metrics:
            self.metrics = (f"{self.name}_spearman",)

    def _load(self):
        return load_word_pairs(self.name)

    def _prepare(self, model):
        pairs, _ = self.data
        words = sorted({w for p in pairs for w in p})
        index = {w: i for i, w in enumerate(words)}
        return {"tokens": tokenize(model, words),
                "left": np.asarray([index[a] for a, _ in pairs]), "right": np.asarray([index[b] for _, b in pairs])}

    def _evaluate(self, model, prep):
        emb = self.embeddings(model, prep["tokens"]).double().cpu().numpy()
        cos = (emb[prep["left"]] * emb[prep["right"]]).sum(-1)
        return (spearman(cos, self.data[1]),)


@dataclass
class EmbeddingDrift(Task):
    """Label-free: how far the embeddings of corpus documents move from the full model's.

    ``drift_cosine`` is the mean cosine between each document's embedding and its full-model
    embedding (1 = unchanged); ``drift_cka`` is linear CKA between the two embedding matrices.
    """

    name: str = "drift"
    metrics: tuple[str, ...] = ("drift_cosine", "drift_cka")
    n_texts: int = 48

    def _load(self):
        return load_drift_texts(self.n_texts)

    def _prepare(self, model):
        tokens = tokenize(model, self.data)
        return {"tokens": tokens, "emb": self.embeddings(model, tokens)}

    def _evaluate(self, model, prep):
        emb = self.embeddings(model, prep["tokens"])
        return float((emb * prep["emb"]).sum(-1).mean()), linear_cka(emb, prep["emb"])


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA (Kornblith et al. 2019) of two ``[N, D]`` representations of the same N items."""
    x = (x - x.mean(0)).double()
    y = (y - y.mean(0)).double()
    cross = (x.T @ y).pow(2).sum()
    return float(cross / ((x.T @ x).pow(2).sum().sqrt() * (y.T @ y).pow(2).sum().sqrt()))


TASKS = {"lee": LeeSimilarity, "polarity": Polarity, "wordsim353": lambda: WordPairs(name="wordsim353"),
         "simlex999": lambda: WordPairs(name="simlex999"), "drift": EmbeddingDrift}


def get_tasks(names: list[str] | tuple[str, ...]) -> list[Task]:
    """Task objects by name, with a clear error for an unknown one."""
    out = []
    for name in names:
        require(name in TASKS, f"unknown task {name!r}", f"use one or more of {', '.join(TASKS)}")
        out.append(TASKS[name]())
    require(len(out) > 0, "no task given", f"use one or more of {', '.join(TASKS)}")
    return out
