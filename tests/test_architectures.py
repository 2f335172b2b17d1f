"""One row per family: a tiny random-weight model built from its transformers config class (no
download), read through the model tap and checked against the model itself
(:func:`headsim.model.verify.verify`): attention = the eager ``output_attentions`` (fp32, 1e-5);
Z = eager probabilities × values in float64 (grouped key/value heads expanded), 1e-5; a window's
numbers do not depend on its batch nor on the padding side; causal maps are triangular."""

from __future__ import annotations

import pytest
import torch

from headsim.errors import HeadsimError
from headsim.model.arch import ARCHS, arch_for
from headsim.model.plain import attention_probs
from headsim.model.tap import Tap
from headsim.model.verify import random_batch as make_batch
from headsim.model.verify import tiny_model, verify
from headsim.models import from_pretrained_objects

#: one model type per family (the table's first), plus Gemma 3's text model
ROWS = sorted({a.model_types[0] for a in ARCHS})


@pytest.fixture(scope="module", params=ROWS)
def family(request):
    model, eager = tiny_model(request.param)
    return request.param, from_pretrained_objects(model, None, request.param), eager


def test_rows_cover_every_family():
    assert {arch_for(tiny_model(t)[0]).family for t in ROWS} == {a.family for a in ARCHS}


def test_the_tap_is_exact(family):
    model_type, loaded, eager = family
    got = verify(loaded, eager)
    assert got.exact(1e-5), (model_type, got)


def test_the_checks_can_fail(family):
    """A model whose eager twin differs is caught: the checks are not vacuous."""
    model_type, loaded, eager = family
    _, other = tiny_model(model_type, seed=1)
    assert not verify(loaded, other).exact(1e-5)


def test_plain_families_equal_headsims_own_softmax(family):
    """``plain`` in the table is a claim: headsim's softmax over valid keys is the model's attention."""
    model_type, loaded, _ = family
    if not loaded.arch.plain:
        pytest.skip("not plain")
    ids, mask = make_batch(3)
    rows = mask.bool()[:, None, :].expand(-1, loaded.n_heads, -1)
    for cap in Tap(loaded, qkv=True, attention=True).run(ids, mask).layers.values():
        mine = attention_probs(cap.query, cap.key, mask)
        torch.testing.assert_close(mine[rows], cap.attention[rows], rtol=0, atol=1e-5)


def test_a_family_without_an_entry_is_refused_by_name():
    from transformers import AutoConfig, AutoModel

    model = AutoModel.from_config(AutoConfig.for_model("bloom", hidden_size=32, n_layer=1, n_head=4, vocab_size=96))
    with pytest.raises(HeadsimError, match="BloomModel.*bloom.*llama"):
        from_pretrained_objects(model, None)


@pytest.mark.parametrize("model_type", ["olmo", "stablelm"])
def test_an_unlisted_layout_is_read_off_its_modules_and_checked(model_type):
    """Families without an entry are inferred, then used only if the tap reproduces them exactly."""
    model, eager = tiny_model(model_type)
    loaded = from_pretrained_objects(model, None, model_type)
    assert loaded.arch.inferred and loaded.arch.family == model_type
    assert verify(loaded, eager).exact(1e-5)


def test_an_inferred_layout_that_is_not_exact_is_refused(monkeypatch):
    """The load-time self-check refuses an inferred entry whose capture does not match the model."""
    import headsim.model.tap as tap

    model, _ = tiny_model("olmo")
    real = tap._tap_attention

    def skewed(module, query, key, value, attention_mask, **kwargs):
        out, probs = real(module, query, key, value, attention_mask, **kwargs)
        return out * 1.01, probs  # the model continues with something else than the tap saw

    monkeypatch.setattr(tap, "_tap_attention", skewed)
    with pytest.raises(HeadsimError, match="does not reproduce its attention exactly"):
        from_pretrained_objects(model, None, "olmo")
