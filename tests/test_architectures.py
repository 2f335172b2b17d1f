"""One row per model type users run most: a tiny random-weight model built from its transformers config class (no
download), read through the model tap and checked against the model itself
(:func:`headsim.model.verify.verify`): attention = the eager ``output_attentions`` (fp32, 1e-5);
Z = eager probabilities × values in float64 (grouped key/value heads expanded), 1e-5; a window's
numbers do not depend on its batch nor on the padding side; causal maps are triangular."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headsim.errors import HeadsimError
from headsim.model.arch import ARCHS
from headsim.model.plain import attention_probs
from headsim.model.tap import Tap, capture
from headsim.model.verify import random_batch as make_batch
from headsim.model.verify import tiny_config_kwargs, tiny_model, verify
from headsim.model.load import from_pretrained_objects

#: the model types users run most (issue 31), every family of the table among them; some are read
#: through an inferred entry, so each of them is checked here and not only by the coverage sweep
ROWS = ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2", "mpnet",
        "modernbert", "t5", "bart", "mbart", "marian", "gpt2", "gpt_neox", "gptj", "codegen", "opt", "bloom", "falcon",
        "mpt", "xglm", "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
        "gemma3_text", "phi", "phi3", "cohere", "olmo2", "starcoder2", "granite", "deepseek_v3", "emu3", "t5gemma2",
        "prophetnet"]


@pytest.fixture(scope="module", params=ROWS)
def family(request):
    model, eager = tiny_model(request.param)
    return request.param, from_pretrained_objects(model, None, request.param), eager


def test_rows_cover_every_family():
    assert [a.family for a in ARCHS if not set(a.model_types) & (set(ROWS) | set(MORE_ROWS) | set(LAYOUT_ROWS) | {"dory"})] == []


@pytest.mark.parametrize("layout, kv_heads", [(dict(new_decoder_architecture=True, num_kv_heads=2), 2),
                                              (dict(multi_query=False), 4), (dict(alibi=True), 1),
                                              (dict(alibi=True, multi_query=False, parallel_attn=False), 4)])
def test_every_falcon_layout_is_exact(layout, kv_heads):
    """Falcon's layouts: grouped (40B), multi-head, multi-query with ALiBi instead of rotary, sequential blocks."""
    model, eager = tiny_model("falcon", **layout)
    loaded = from_pretrained_objects(model, None, "falcon")
    assert verify(loaded, eager).exact(1e-5)
    assert loaded.n_kv_heads == kv_heads


@pytest.mark.parametrize("model_type", ["llava", "qwen2_vl", "qwen2_5_vl", "gemma3", "qwen2_audio"])
def test_a_multimodal_models_text_stack_is_read_on_text_only_input(model_type):
    """Llava, Qwen2-VL/2.5-VL, Gemma 3 and Qwen2-Audio (built from its composite config: a tiny text
    stack of its own family, scaled-down audio tower): the language model beside the other towers,
    as its own family."""
    model, eager = tiny_model(model_type)
    loaded = from_pretrained_objects(model, None, model_type)
    assert loaded.arch.stack == "language_model" and loaded.analysed.startswith("the text stack of")
    assert loaded.arch.causal and loaded.n_layers == model.config.text_config.num_hidden_layers
    assert verify(loaded, eager).exact(1e-5)


def test_the_cross_attention_heads_are_the_models_own(family):
    """Encoder-decoders: encoder layers, then per decoder layer its self- and cross-attention, each
    layer's map equal to the eager model's own (cross maps over decoder queries and encoder keys)."""
    model_type, loaded, eager = family
    if loaded.arch.decoder is None:
        pytest.skip("one stack")
    n, n_dec = loaded.arch.depths(loaded.model)
    assert loaded.stacks == ["encoder self"] * n + ["decoder self", "decoder cross"] * n_dec and n_dec > 0
    ids, mask = make_batch(4)
    got = Tap(loaded, attention=True).run(ids, mask).layers
    with torch.no_grad():
        out = eager(input_ids=ids, attention_mask=mask, decoder_input_ids=ids, decoder_attention_mask=mask,
                    output_attentions=True, use_cache=False)
    rows = mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :]
    for i, want in enumerate(out.cross_attentions):
        cross = got[n + 2 * i + 1].attention
        torch.testing.assert_close(cross[rows.expand_as(cross)], want[rows.expand_as(want)], rtol=0, atol=1e-5)
        assert not torch.allclose(cross, got[n + 2 * i].attention)  # not the decoder's self-attention again


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

    model = AutoModel.from_config(AutoConfig.for_model("fnet", hidden_size=32, num_hidden_layers=1, vocab_size=96))
    with pytest.raises(HeadsimError, match="FNetModel.*fnet.*llama"):
        from_pretrained_objects(model, None)


@pytest.mark.parametrize("model_type", ["olmo", "stablelm", "deepseek_v2", "deepseek_v32", "mt5"])
def test_an_unlisted_layout_is_read_off_its_modules_and_checked(model_type):
    """Families without an entry are inferred, then used only if the tap reproduces them exactly
    (DeepSeek-V2 at latent-attention sizes of its own config class; V3.2's sparse indexer reads the
    tap's mask whole; mT5, an entry's other type, at T5's sizes)."""
    model, eager = tiny_model(model_type)
    loaded = from_pretrained_objects(model, None, model_type)
    assert loaded.arch.inferred == (model_type != "mt5") and loaded.arch.family == {"mt5": "t5"}.get(model_type, model_type)
    assert verify(loaded, eager).exact(1e-5)


def test_a_gate_between_attention_and_projection_is_part_of_z():
    """AFMoE gates each head's output before the output projection: Z is what the projection
    receives (exact there), and the check against probabilities × values sees the gate."""
    model, eager = tiny_model("afmoe")
    got = verify(from_pretrained_objects(model, None, "afmoe"), eager)
    assert got.exact_at_projection(1e-5) and not got.exact(1e-5) and got.head_outputs > 1e-2


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


def test_an_encoder_decoders_tables_say_each_layers_stack():
    """The ``stack`` coordinate an encoder-decoder's run puts on ``layer`` survives the netCDF round
    trip and becomes the tables' ``stack`` column, row by row."""
    import io

    import xarray as xr

    from headsim.stats import CorpusStats, heads_table, layers_table

    stacks = ["encoder self"] * 2 + ["decoder self", "decoder cross"] * 2
    ds = CorpusStats(6, 4, 8).to_dataset().assign_coords(stack=("layer", stacks))
    back = xr.open_dataset(io.BytesIO(bytes(ds.to_netcdf(engine="h5netcdf"))), engine="h5netcdf")
    heads, layers = heads_table(back), layers_table(back)
    assert list(layers["stack"]) == stacks and list(heads.columns[:3]) == ["layer", "stack", "head"]
    assert list(heads["stack"]) == [s for s in stacks for _ in range(4)]
    assert "stack" not in heads_table(CorpusStats(6, 4, 8).to_dataset()).columns


@pytest.mark.slow
def test_an_encoder_decoder_run_labels_every_layer_with_its_stack(tmp_path):
    """A tiny BART analysed end to end: stats.nc, the tables and run.json say each layer's stack;
    decoder self-attention is causal, so its maps give fewer similar pairs than the encoder's."""
    import copy

    import headsim
    from transformers import AutoConfig, AutoModel

    tok = copy.deepcopy(headsim.load_model().tokenizer)
    config = AutoConfig.for_model("bart", **dict(tiny_config_kwargs("bart"), vocab_size=len(tok), pad_token_id=0,
                                                 max_position_embeddings=128))
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(tmp_path / "bart")
    tok.save_pretrained(tmp_path / "bart")
    (tmp_path / "c.txt").write_text(("The red fox jumps over the fence. A small bird sings in the garden. " * 6 + "\n\n") * 4)
    with pytest.warns(UserWarning, match="BartModel is an encoder-decoder"):
        res = headsim.analyze(str(tmp_path / "bart"), str(tmp_path / "c.txt"), windows=4, seq_len=32,
                              out=tmp_path / "run")
    stacks = ["encoder self"] * 2 + ["decoder self", "decoder cross"] * 2
    assert list(res.dataset["stack"].values) == stacks and res.meta["model"]["stacks"] == stacks
    assert list(res.layers["stack"]) == stacks
    attn = res.dataset["attn_sum"].sum("head").values  # [layer, query, key]
    upper = np.triu(np.ones(attn.shape[1:], dtype=bool), 1)
    assert attn[2][upper].max() == 0 and attn[3][upper].max() > 0  # decoder self causal, cross not


def test_the_coverage_sweep_rechecks_a_changed_row_and_counts_only_text_attention(monkeypatch):
    """``benchmarks/family_coverage.py``: a row's fingerprint follows its own tiny config (``--resume``
    re-checks it alone), and the table counts the models that have a text self-attention stack."""
    import importlib.util
    from pathlib import Path

    from headsim.model.tiny import OVERRIDES

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "family_coverage.py"
    spec = importlib.util.spec_from_file_location("headsim_coverage_sweep", path)
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    code = sweep.code_fingerprint()
    llama, bert = sweep.row_fingerprint(code, "llama"), sweep.row_fingerprint(code, "bert")
    monkeypatch.setitem(OVERRIDES, "llama", {"sliding_window": 3})
    assert sweep.row_fingerprint(code, "llama") != llama and sweep.row_fingerprint(code, "bert") == bert
    refused = {"status": "refused", "reason": "could not be read off its modules"}
    assert sweep.category("mamba", dict(refused, kind="no attention"))[0] is False
    assert sweep.category("whisper", dict(refused, kind="MHA")) == (False, "not counted: reads `input_features`, not "
                                                                           "text (speech, vision or structure)")
    assert sweep.category("jamba", dict(refused, kind="no attention"))[1].startswith("refused, hybrid")
    assert sweep.category("flaubert", dict(refused, kind="MHA")) == (
        True, "refused: no entry and no layout headsim can read off its modules")


#: further families with an entry (issue 31): one tiny model each, checked exact (HRM-text gates each
#: head's output before its projection: Z is what the projection receives, checked there)
MORE_ROWS = ["openai-gpt", "xlm", "flaubert", "gpt_neox_japanese", "ibert", "hrm_text", "moshi", "longcat_flash",
             "bigbird_pegasus", "seamless_m4t", "seamless_m4t_v2", "modernvbert", "ultravbert"]


def _verified(model_type: str):
    """A tiny model of ``model_type``, loaded, and its :func:`verify` against its eager twin."""
    model, eager = tiny_model(model_type)
    loaded = from_pretrained_objects(model, None, model_type)
    return model, loaded, verify(loaded, eager)


@pytest.mark.parametrize("model_type", MORE_ROWS)
def test_more_families_are_exact(model_type):
    model, loaded, got = _verified(model_type)
    assert got.exact_at_projection(1e-5), (model_type, got)
    assert got.exact(1e-5) or (model_type == "hrm_text" and got.head_outputs > 1e-2)
    if model_type == "longcat_flash":  # two attentions per decoder layer, each an analysed layer
        assert loaded.n_layers == 2 * model.config.num_layers == 4
    if model_type == "hrm_text":  # its two stacks' layers, once per call of their cycles
        c = model.config
        assert loaded.n_layers == c.num_layers_per_stack * c.H_cycles * (c.L_cycles + 1) > 2 * c.num_layers_per_stack
    assert len(set(loaded.stacks)) == (3 if loaded.arch.decoder is not None else 1)


@pytest.mark.parametrize("model_type", ["led", "squeezebert", "cpmant", "xlnet", "jetmoe", "diffllama",
                                        "nystromformer", "deepseek_v4", "blt", "funnel", "reformer"])
def test_a_family_the_tap_cannot_read_exactly_is_refused_with_its_reason(model_type):
    from types import SimpleNamespace

    from headsim.model.arch import REFUSED
    from headsim.model.resolve import arch_for

    model = torch.nn.Module()
    model.config = SimpleNamespace(model_type=model_type)
    with pytest.raises(HeadsimError, match=f"model_type '{model_type}'"):
        arch_for(model)
    assert len(REFUSED[model_type]) > 40


@pytest.mark.parametrize("model_type, setting", [("ibert", dict(quant_mode=True)),
                                                 ("bigbird_pegasus", dict(attention_type="block_sparse"))])
def test_a_configuration_the_tap_cannot_read_is_refused(model_type, setting):
    """I-BERT's integer-only mode and BigBird-Pegasus's block-sparse attention are refused by name;
    the same families' other settings are exact (:func:`test_more_families_are_exact`)."""
    model, _ = tiny_model(model_type, **setting)
    (name, value), = setting.items()
    with pytest.raises(HeadsimError, match=f"{name}={value!r}"):
        from_pretrained_objects(model, None, model_type)


@pytest.mark.parametrize("model_type, gated", [("cohere_compass_text", False), ("zaya", False), ("phi4_multimodal", False),
                                               ("vibevoice_asr", False), ("dots3_note_text", True), ("neomme", True)])
def test_a_family_built_at_its_own_config_constraints_is_exact(model_type, gated):
    """Families whose config classes need sizes of their own (per-layer-type RoPE, one expert per
    token, towers of their own scaled down, per-layer latent attention with a sparse indexer, a
    partial rotary factor under M-RoPE): exact, and where the family gates each head's output before
    its output projection (Dots3, NeoMME), exact at the projection with the gate seen by the check
    against probabilities × values."""
    _, _, got = _verified(model_type)
    assert got.exact_at_projection(1e-5) and got.exact(1e-5) != gated, got
    assert not gated or got.head_outputs > 1e-2


#: families read through a layout of their own (issue 31): a module swapped at run time (BigBird), an
#: output tuple with entity outputs (LUKE), fairseq's [T, B, C] (FSMT), local attention stored as [T, T]
#: (Longformer's band, LongT5's blocks), a mask turned into a per-head bias (Doge), a text stack behind a
#: language-model head with chunked and NoPE layers (Llama 4)
LAYOUT_ROWS = ["big_bird", "luke", "fsmt", "longformer", "longt5", "doge", "llama4"]


@pytest.mark.parametrize("model_type", LAYOUT_ROWS)
def test_a_family_with_a_layout_of_its_own_is_exact(model_type):
    model, loaded, got = _verified(model_type)
    assert got.exact(1e-5), (model_type, got)
    if loaded.arch.layout != "dense" or loaded.arch.time_first:  # the reshaping is not vacuous: another model differs
        assert not verify(loaded, tiny_model(model_type, seed=1)[1]).exact(1e-5)
    if loaded.arch.layout != "dense":  # local attention: every valid row sums to 1 within the family's reach
        radius = model.config.attention_window[0] // 2 if model_type == "longformer" else model.config.local_radius
        ids, mask = make_batch(2)
        att = Tap(loaded, attention=True).run(ids, mask).layers[0].attention[0]  # window 0: all 12 tokens valid
        far = (torch.arange(12)[:, None] - torch.arange(12)[None, :]).abs() > radius
        assert float(att[:, far].abs().max()) == 0 and float(att[:, ~far].min()) > 0
        torch.testing.assert_close(att.sum(-1), torch.ones(att.shape[:2]), rtol=0, atol=1e-5)


def test_bigbird_is_read_at_full_attention_and_refused_block_sparse():
    """BigBird switches itself to full attention on windows of up to (5 + 2·num_random_blocks)·block_size
    tokens (14 here): the capture equals that of a model built at full attention; a longer window, which it
    runs block-sparse, is refused."""
    sparse, _ = tiny_model("big_bird", attention_type="block_sparse")
    full, _ = tiny_model("big_bird")
    ids, mask = make_batch(5, lengths=(14, 9))
    got = [capture(from_pretrained_objects(m, None, "big_bird"), ids, mask) for m in (sparse, full)]
    for role in ("attention", "head_outputs"):
        torch.testing.assert_close(got[0][role], got[1][role], rtol=0, atol=1e-6)
    sparse, _ = tiny_model("big_bird", attention_type="block_sparse")
    ids, mask = make_batch(5, lengths=(16, 9))
    with pytest.raises(HeadsimError, match="ran its block_sparse attention on this window"):
        capture(from_pretrained_objects(sparse, None, "big_bird"), ids, mask)


@pytest.mark.parametrize("model_type, overrides, reason", [
    ("yoso", {}, "approximation of softmax attention"), ("convbert", {}, "padding of its batch"),
    ("pegasus_x", {}, "learned global tokens"), ("longt5", {"encoder_attention_type": "transient-global"},
                                                 "summaries of blocks")])
def test_a_family_headsim_cannot_read_is_refused_with_its_reason(model_type, overrides, reason):
    model, _ = tiny_model(model_type, **overrides)
    with pytest.raises(HeadsimError, match=f"{type(model).__name__}.*{reason}"):
        from_pretrained_objects(model, None, model_type)


def test_a_looped_family_is_read_at_every_attention_call():
    """Dory runs its recurrent block twice a pass: six analysed layers over four layers' weights, each
    call's map the eager model's own; Z is what the output projection receives (after Dory's gate and
    norm, so it differs from probabilities × values)."""
    model, eager = tiny_model("dory")
    loaded = from_pretrained_objects(model, None, "dory")
    layers = loaded.arch.layer_modules(model, loaded.n_layers)
    assert loaded.n_layers == 6 and [list(model.layers).index(x) for x in layers] == [0, 1, 2, 1, 2, 3]
    got = verify(loaded, eager)
    assert got.exact_at_projection(1e-5) and got.head_outputs > 1e-2
    ids, mask = make_batch(1)
    caps = Tap(loaded, attention=True).run(ids, mask).layers
    assert not torch.allclose(caps[1].attention, caps[3].attention)  # same weights, another input: another map


def test_scores_read_as_probabilities_are_caught():
    """ProphetNet's module hands out pre-softmax scores: read as probabilities by the tap and the eager
    reference alike, the two agree, but the rows are no probability distributions, so the check fails."""
    from dataclasses import replace

    model, eager = tiny_model("prophetnet")
    loaded = from_pretrained_objects(model, None, "prophetnet")
    assert verify(loaded, eager).exact_at_projection(1e-5)
    loaded.arch = replace(loaded.arch, scores=False)
    got = verify(loaded, eager)
    assert got.attention <= 1e-5 and got.distribution > 1e-2 and not got.exact_at_projection(1e-5)


#: hybrid stacks (issue 31): softmax attention at some layers only, between Mamba (Bamba, Granite-MoE-hybrid,
#: Nemotron-H, Zamba), lightning-attention (MiniMax), convolution (LFM3) or recurrent (RecurrentGemma) layers;
#: Jamba, Qwen3-Next/3.5, Kimi-Linear and the others of the coverage sweep are built the same way but slower
HYBRID_ROWS = ["granitemoehybrid", "lfm3", "minimax", "nemotron_h", "recurrent_gemma", "zamba"]
_SOFTMAX_KINDS = ("full_attention", "sliding_attention", "attention", "hybrid", "*")


def _attending_by_config(config) -> list[int]:
    """1-based numbers of the layers the config says attend with softmax (independent of the modules)."""
    if getattr(config, "hybrid_override_pattern", None):
        kinds = list(config.hybrid_override_pattern)
    elif getattr(config, "block_types", None):
        kinds = [config.block_types[i % len(config.block_types)] for i in range(config.num_hidden_layers)]
    else:
        kinds = getattr(config, "layers_block_type", None) or config.layer_types
    return [i + 1 for i, k in enumerate(kinds) if k in _SOFTMAX_KINDS]


@pytest.mark.parametrize("model_type", HYBRID_ROWS)
def test_a_hybrid_stack_is_read_at_its_softmax_attention_layers_exactly(model_type):
    """The analysed layers are exactly those the config says attend (a lightning-attention layer of
    MiniMax is not one), in order, each exact at its own depth (Zamba's one shared block at two)."""
    model, eager = tiny_model(model_type)
    with pytest.warns(UserWarning, match=r"is a hybrid stack: headsim is analysing \d of \d+ layers"):
        loaded = from_pretrained_objects(model, None, model_type)
    want = _attending_by_config(model.config)
    assert loaded.arch.mixed and loaded.model_layers == want and loaded.n_layers == len(want) >= 2
    assert loaded.arch.stack_depth(model) == model.config.num_hidden_layers > len(want)
    got = verify(loaded, eager)
    assert got.exact_at_projection(1e-5), (model_type, got)


def test_a_hybrid_stacks_layers_are_told_apart_and_the_checks_can_fail():
    """Zamba calls one shared attention block at layers 3 and 8: the tap tells the two calls apart
    (their maps differ), and an eager twin with other weights is not found exact."""
    model, eager = tiny_model("zamba")
    loaded = from_pretrained_objects(model, None, "zamba")
    assert loaded.model_layers == [3, 8] and "the other 6 are" in loaded.hybrid_note
    ids, mask = make_batch(2)
    got = Tap(loaded, attention=True).run(ids, mask).layers
    assert sorted(got) == [0, 1] and not torch.allclose(got[0].attention, got[1].attention)
    _, other = tiny_model("zamba", seed=1)
    assert not verify(loaded, other).exact_at_projection(1e-5)


@pytest.mark.slow
def test_a_hybrid_run_records_each_layers_own_number(tmp_path):
    """A tiny Granite-MoE-hybrid analysed end to end: run.json, the Dataset and the tables give each
    analysed layer its number in the model (layers 2 and 4 of 4; 1 and 3 are Mamba layers)."""
    import copy

    import headsim
    from transformers import AutoConfig, AutoModel

    tok = copy.deepcopy(headsim.load_model().tokenizer)
    config = AutoConfig.for_model("granitemoehybrid", **dict(tiny_config_kwargs("granitemoehybrid"), vocab_size=len(tok),
                                                             max_position_embeddings=128))
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    (tmp_path / "c.txt").write_text(("The red fox jumps over the fence. A small bird sings in the garden. " * 6 + "\n\n") * 4)
    with pytest.warns(UserWarning, match=r"analysing 2 of 4 layers \(the softmax-attention ones: 2, 4\)"):
        res = headsim.analyze(str(tmp_path / "m"), str(tmp_path / "c.txt"), windows=4, seq_len=32, out=tmp_path / "run")
    model = res.meta["model"]
    assert model["model_layers"] == [2, 4] and model["stack_layers"] == 4 and model["n_layers"] == 2
    assert "analysing 2 of 4 layers" in model["analysed"]
    assert list(res.dataset["model_layer"].values) == [2, 4] and list(res.layers["model_layer"]) == [2, 4]
    assert list(res.heads["model_layer"]) == [2] * 4 + [4] * 4
    import json

    from headsim.report.html import model_description
    assert json.loads((tmp_path / "run" / "run.json").read_text())["model"]["model_layers"] == [2, 4]
    assert "2 layers (the softmax-attention layers 2, 4 of its 4;" in model_description(model)


def test_an_inferred_family_with_an_attention_type_of_its_own_is_read():
    """GPT-Neo's modules name their local / global attention ``attention_type``, as BigBird names its
    switch to block-sparse: only BigBird's block-sparse passes are refused."""
    _, loaded, got = _verified("gpt_neo")
    assert loaded.arch.inferred and got.exact(1e-5)
