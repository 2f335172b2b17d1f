"""Shared fixtures: the embedded model, a tiny random BERT, a random BERT-base, and reference maths.

Every model is built once per session. The random-weight models come in pairs that share their
weights: one runs the default attention kernel (SDPA, what headsim uses), the other ``eager`` (the
only kernel that returns ``output_attentions``). The helpers at the bottom recompute what headsim
extracts straight from the layer weights, in float64, without any headsim code.
"""

from __future__ import annotations

import os

# One thread per process: the suite runs many small tensor ops (and subprocesses inherit this), where
# OpenMP's thread hand-offs cost more than they give on a 2-core machine, and far more under load.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# No test touches the network: a hub id that is not cached is an offline-mode error, as in CI (the hub
# tests point HF_ENDPOINT at a loopback stand-in and set these variables per case, tests/test_hub.py).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

import headsim
from headsim.model.load import LoadedModel, from_pretrained_objects

SEED = 0

# what `headsim inspect` / Inspection.write must write, from the list (figures as PNG + SVG)
INSPECT_FILES = sorted(
    [f"{stem}.{ext}" for stem in ("fig04_attention", "fig05_blocks", "fig09_pairs", "similarity", "fig12_summed_similarity")
     for ext in ("png", "svg")]
    + [f"{stem}.{ext}" for stem in ("fig09_pairs", "tokens") for ext in ("csv", "parquet")]
    + ["inspect.json"]
)

#: Three sentences that pySBD splits cleanly (no abbreviations, no numbers).
SENTENCES = (
    "The red fox jumps over the fence. A small bird sings in the garden. "
    "Many people walked home after the long game."
)


def lee_texts(n: int) -> list[str]:
    """The first ``n`` Lee stories: gensim's, or the GPU kit's copy of them (``HEADSIM_CORPUS``, a JSON-lines
    corpus with ``lee/<line>`` ids: the device machine runs the CUDA tests without gensim)."""
    kit = os.environ.get("HEADSIM_CORPUS")
    if not kit:
        from headsim.corpus import lee_documents

        return [d.text for d in lee_documents()[:n]]
    with open(kit, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [r["text"] for r in rows if r["id"].startswith("lee/")][:n]


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def embedded() -> LoadedModel:
    """The embedded all-MiniLM-L6-v2 as headsim loads it (SDPA kernel)."""
    return headsim.load_model()


@pytest.fixture(scope="session")
def embedded_eager(embedded: LoadedModel) -> LoadedModel:
    """The same weights, loaded with the eager kernel (for ``output_attentions``)."""
    return headsim.load_model(device=embedded.device, attn_implementation="eager")


@pytest.fixture(scope="session")
def tokenizer(embedded: LoadedModel):
    """The embedded model's fast, uncased WordPiece tokenizer."""
    return embedded.tokenizer


def tiny_config(vocab_size: int, **overrides):
    from transformers import BertConfig

    kwargs = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                  vocab_size=vocab_size, max_position_embeddings=128)
    kwargs.update(overrides)
    return BertConfig(**kwargs)


def _pair(config, tokenizer, name: str) -> tuple[LoadedModel, LoadedModel]:
    """(default-kernel model, eager model) with identical random weights."""
    from transformers import BertModel

    torch.manual_seed(SEED)
    model = BertModel(copy.deepcopy(config)).eval()
    eager = copy.deepcopy(model)  # copies the config too, so the switch below stays on the copy
    eager.config._attn_implementation = "eager"
    assert model.config._attn_implementation != "eager"
    assert eager.config._attn_implementation == "eager"
    return (from_pretrained_objects(model, tokenizer, name=name),
            from_pretrained_objects(eager, tokenizer, name=f"{name}-eager"))


@pytest.fixture(scope="session")
def tiny_pair(tokenizer) -> tuple[LoadedModel, LoadedModel]:
    return _pair(tiny_config(len(tokenizer)), tokenizer, "tiny-bert")


@pytest.fixture(scope="session")
def tiny_bert(tiny_pair) -> LoadedModel:
    """Random-weight BERT: 2 layers × 4 heads, hidden 64 (d_head 16), the embedded tokenizer."""
    return tiny_pair[0]


@pytest.fixture(scope="session")
def tiny_bert_eager(tiny_pair) -> LoadedModel:
    return tiny_pair[1]


@pytest.fixture(scope="session")
def base_pair(tokenizer) -> tuple[LoadedModel, LoadedModel]:
    """Random-weight BERT-base (12 layers × 12 heads, hidden 768), fp32, both kernels."""
    from transformers import BertConfig

    return _pair(BertConfig(vocab_size=len(tokenizer)), tokenizer, "random-bert-base")


@pytest.fixture(scope="session")
def tiny_llama_pair(tokenizer) -> tuple[LoadedModel, torch.nn.Module]:
    """A tiny random Llama decoder (causal, grouped-query, BOS framing with [CLS] as its BOS token, the
    embedded vocabulary) and the same weights as a plain model running eager attention (for
    :func:`headsim.model.verify.eager_attentions`)."""
    from headsim.model.verify import tiny_model

    tok = copy.deepcopy(tokenizer)
    tok.bos_token = tok.cls_token
    model, eager = tiny_model("llama", vocab_size=len(tok))
    return from_pretrained_objects(model, tok, name="tiny-llama"), eager


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory, tiny_bert: LoadedModel) -> Path:
    """The tiny BERT and the embedded tokenizer written with ``save_pretrained``."""
    path = tmp_path_factory.mktemp("tiny-bert")
    tiny_bert.model.save_pretrained(path)
    tiny_bert.tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


# ---------------------------------------------------------------------------------------------
# Reference computations (no headsim code)
# ---------------------------------------------------------------------------------------------


def reference_forward(loaded: LoadedModel, input_ids: np.ndarray, attention_mask: np.ndarray):
    """Run the Hugging Face model itself; returns its output with hidden states."""
    model = loaded.model
    device = next(model.parameters()).device
    with torch.no_grad():
        return model(input_ids=torch.as_tensor(input_ids, device=device),
                     attention_mask=torch.as_tensor(attention_mask, device=device),
                     output_hidden_states=True,
                     output_attentions=model.config._attn_implementation == "eager")


def reference_head_outputs(loaded: LoadedModel, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """softmax(QKᵀ/√d + mask)·V per head from each layer's weights and input hidden states.

    Computed in float64 with torch from the hidden states the model itself produces
    (``output_hidden_states``): Q = x Wqᵀ + bq etc. Returns ``[W, L, H, T, d]``.
    """
    out = reference_forward(loaded, input_ids, attention_mask)
    model = loaded.model
    n_heads = model.config.num_attention_heads
    valid_keys = torch.as_tensor(attention_mask).bool()[:, None, None, :]
    result = []
    for li, layer in enumerate(model.encoder.layer):
        x = out.hidden_states[li].double().cpu()
        sa = layer.attention.self

        def project(lin: torch.nn.Linear) -> torch.Tensor:
            y = x @ lin.weight.double().cpu().T + lin.bias.double().cpu()
            b, t, hd = y.shape
            return y.reshape(b, t, n_heads, hd // n_heads).permute(0, 2, 1, 3)

        q, k, v = project(sa.query), project(sa.key), project(sa.value)
        scores = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
        scores = torch.where(valid_keys, scores, torch.tensor(-np.inf, dtype=torch.float64))
        result.append(torch.softmax(scores, dim=-1) @ v)
    return torch.stack(result, dim=1).numpy()


def reference_attentions(eager: LoadedModel, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """``output_attentions`` of an eager model, ``[W, L, H, T, T]``."""
    out = reference_forward(eager, input_ids, attention_mask)
    assert out.attentions is not None
    return torch.stack([a.float().cpu() for a in out.attentions], dim=1).numpy()


def valid_rows(array: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Rows of ``[W, L, H, T, …]`` whose query position is valid, as ``[n_valid, L, H, …]``."""
    return np.moveaxis(array, 3, 1)[np.asarray(attention_mask, dtype=bool)]


def reference_similarity(z: np.ndarray, valid: np.ndarray, threshold: float, cosine: bool = False):
    """(raw, normalised, mask) of one ``[T, d]`` block by the definition, with numpy loops."""
    z = np.asarray(z, dtype=np.float64)
    if cosine:
        norms = np.linalg.norm(z, axis=-1, keepdims=True)
        z = np.divide(z, norms, out=np.zeros_like(z), where=norms > 0)
    raw = z @ z.T
    t = z.shape[0]
    pairs = [(i, j) for i in range(t) for j in range(t) if i != j and valid[i] and valid[j]]
    norm = np.zeros((t, t))
    peak = max((raw[i, j] for i, j in pairs), default=0.0)
    if peak > 0:
        for i, j in pairs:
            norm[i, j] = raw[i, j] / peak
    return raw, norm, norm > threshold
