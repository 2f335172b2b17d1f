"""Sizes of tiny random-weight models, per family: the tables :func:`headsim.model.verify.tiny_model`
builds from (tests/test_architectures.py and the coverage sweep, benchmarks/family_coverage.py).

Data only: a change here changes the tiny model of the families it names, and the coverage sweep
re-checks exactly those (``--resume``).
"""

from __future__ import annotations

VOCAB = 96
#: the small sizes every tiny model starts from (config classes ignore the names they do not know)
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, vocab_size=VOCAB,
             max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, num_key_value_heads=2,
             head_dim=8, encoder_attention_heads=4, decoder_attention_heads=4, encoder_layers=2, decoder_layers=2,
             encoder_ffn_dim=48, decoder_ffn_dim=48)

_BART = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 48, "decoder_ffn_dim": 48, "pad_token_id": 1}

_T5 = {"d_model": 32, "d_kv": 8, "num_layers": 2, "num_heads": 4, "d_ff": 48}

_GEMMA_MODULE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=8, vocab_size=96, sliding_window=5, query_pre_attn_scalar=8)

#: SeamlessM4T's speech encoder, text-to-unit model and vocoder, scaled down beside its text stacks
_SEAMLESS = dict(speech_encoder_layers=1, speech_encoder_attention_heads=4, speech_encoder_intermediate_size=48,
                 num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, conv_depthwise_kernel_size=3,
                 t2u_vocab_size=96, t2u_encoder_layers=1, t2u_encoder_ffn_dim=48, t2u_encoder_attention_heads=4,
                 t2u_decoder_layers=1, t2u_decoder_ffn_dim=48, t2u_decoder_attention_heads=4,
                 upsample_initial_channel=16, upsample_rates=[2], upsample_kernel_sizes=[4], resblock_kernel_sizes=[3],
                 resblock_dilation_sizes=[[1]], unit_hifi_gan_vocab_size=96, unit_embed_dim=16, lang_embed_dim=8,
                 spkr_embed_dim=8, vocoder_num_langs=2, vocoder_num_spkrs=2)

#: an override that removes a name of :data:`SMALL` (the family computes it)
DROP = object()

#: model_type → config overrides of :data:`SMALL` where a family names its sizes differently.
OVERRIDES: dict[str, dict] = {
    "roberta": {"pad_token_id": 1}, "xlm-roberta": {"pad_token_id": 1}, "camembert": {"pad_token_id": 1},
    "mpnet": {"pad_token_id": 1}, "electra": {"embedding_size": 16},
    "distilbert": {"dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 48},
    "albert": {"embedding_size": 16, "num_hidden_groups": 1},
    "deberta-v2": {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "max_relative_positions": 16},
    "modernbert": {"global_attn_every_n_layers": 2, "local_attention": 4, "cls_token_id": 1, "sep_token_id": 2},
    "t5": _T5, "mt5": _T5, "umt5": _T5, "longt5": dict(_T5, local_radius=3),
    "bart": _BART, "mbart": _BART, "marian": _BART,
    "gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16},
    "gptj": {"rotary_dim": 4}, "codegen": {"rotary_dim": 4},
    "falcon": {"head_dim": DROP, "num_kv_heads": DROP},
    "mpt": {"d_model": 32, "n_heads": 4, "n_layers": 2, "max_seq_len": 64},
    "xglm": {"d_model": 32, "num_layers": 2, "attention_heads": 4, "ffn_dim": 48},
    "deepseek_v3": {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
                    "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
                    "moe_intermediate_size": 16, "first_k_dense_replace": 1, "head_dim": DROP,
                    "num_key_value_heads": 4},
    "mistral": {"sliding_window": 5},
    # families whose defaults do not scale down with the names above (their own config class's sizes)
    "gemma4_text": {"global_head_dim": 8, "sliding_window": 5},
    "gemma4_unified_text": {"global_head_dim": 8, "sliding_window": 5},
    "gemma3n_text": {"num_kv_shared_layers": 0, "sliding_window": 5},
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
              "moe_intermediate_size": 16, "first_k_dense_replace": 1},
    "funnel": {"block_sizes": [1, 1], "n_head": 4, "d_head": 8, "d_model": 32, "d_inner": 48, "num_hidden_layers": DROP},
    "prophetnet": {"num_encoder_layers": 2, "num_decoder_layers": 2, "num_encoder_attention_heads": 4,
                   "num_decoder_attention_heads": 4, "num_hidden_layers": DROP},
    "squeezebert": {"embedding_size": 32},
    "xlnet": {"max_position_embeddings": DROP, "d_model": 32, "n_layer": 2, "n_head": 4, "d_inner": 48},
    "gpt_neo": {"num_layers": 2, "attention_types": [[["global", "local"], 1]], "num_heads": 4, "window_size": 5},
    "esmc": {"num_key_value_heads": 4},
    "xmod": {"default_language": "en_XX"},
    "t5gemma": {"encoder": dict(_GEMMA_MODULE), "decoder": dict(_GEMMA_MODULE), "vocab_size": VOCAB},
    "inkling_text": {"swa_num_attention_heads": 4, "swa_num_key_value_heads": 2, "swa_head_dim": 8, "sliding_window_size": 5},
    "mamba2": {"num_heads": 8, "head_dim": 8, "expand": 2, "n_groups": 1},
    "bamba": {"mamba_n_heads": 4, "mamba_d_head": 16}, "granitemoehybrid": {"mamba_n_heads": 4, "mamba_d_head": 16},
    "dbrx": {"d_model": 32, "n_heads": 4, "n_layers": 2, "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
             "ffn_config": {"ffn_hidden_size": 48, "moe_num_experts": 4, "moe_top_k": 2}},
    "gemma2": {"sliding_window": 5, "attn_logit_softcapping": 5.0, "query_pre_attn_scalar": 8},
    "gemma3_text": {"sliding_window": 5, "query_pre_attn_scalar": 8},
    "longcat_flash": {"num_hidden_layers": 4, "head_dim": 4, "ffn_hidden_size": 48, "expert_ffn_hidden_size": 16,
                      "moe_topk": 2, "zero_expert_num": 2, "n_routed_experts": 4},
    "bigbird_pegasus": dict(_BART, attention_type="original_full"),
    "seamless_m4t": _SEAMLESS, "seamless_m4t_v2": _SEAMLESS,
}


_TEXT = {k: v for k, v in SMALL.items() if k != "max_position_embeddings"}
_VISION = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4, image_size=16,
               patch_size=8)
_QWEN_VISION = dict(depth=1, embed_dim=32, hidden_size=32, num_heads=4, mlp_ratio=2, intermediate_size=48,
                    out_hidden_size=32, patch_size=4, temporal_patch_size=1, spatial_merge_size=1)
_MROPE = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]}}
#: multimodal language models: the whole config (a tiny text stack of the family's own kind and a
#: tiny vision tower); headsim analyses the text stack on text-only input
MULTIMODAL: dict[str, dict] = {
    "llava": dict(text_config=dict(_TEXT, model_type="llama"), vision_config=dict(_VISION, model_type="clip_vision_model"),
                  image_token_id=95),
    "qwen2_vl": dict(text_config=dict(_TEXT, **_MROPE), vision_config=_QWEN_VISION, image_token_id=95,
                     video_token_id=94),
    "qwen2_5_vl": dict(text_config=dict(_TEXT, **_MROPE), vision_config=dict(_QWEN_VISION, out_hidden_size=32,
                       fullatt_block_indexes=[0], window_size=8), image_token_id=95, video_token_id=94),
    "gemma3": dict(text_config=dict(_TEXT, sliding_window=5, query_pre_attn_scalar=8),
                   vision_config=dict(_VISION, model_type="siglip_vision_model"), mm_tokens_per_image=4,
                   image_token_index=95, boi_token_index=93, eoi_token_index=94),
}


#: sizes for what a family's own config class says it has (an attribute of its defaults): multi-head
#: latent attention (DeepSeek-V2/V3 and the families built like them), mixtures of experts
RULES: tuple[tuple[tuple[str, ...], dict], ...] = (
    (("kv_lora_rank",), {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
                         "v_head_dim": 8, "head_dim": DROP, "num_key_value_heads": 4}),
    (("n_routed_experts", "num_experts", "num_local_experts"),
     {"n_routed_experts": 4, "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "n_group": 1,
      "topk_group": 1, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16}),
)


#: a tower beside a composite model's language model (vision, audio, patcher ...), scaled down: its
#: own defaults with these sizes wherever it has the name
TOWER = dict(hidden_size=32, embed_dim=32, d_model=32, intermediate_size=48, encoder_ffn_dim=48, num_hidden_layers=1,
             encoder_layers=1, num_layers=1, depth=1, num_attention_heads=4, encoder_attention_heads=4, num_heads=4,
             num_key_value_heads=4, head_dim=8, out_hidden_size=32, output_dim=32, projector_hidden_size=32)

#: models whose sub-configs (other than a ``text_config``) are scaled at :data:`TOWER` sizes though
#: they have no ``text_config``: a byte-level model's patcher and local / global stacks (BLT), a
#: language model's own vision and audio towers (Phi-4 multimodal), an encoder-decoder's stacks (T5Gemma 2)
TOWERED = {"blt", "phi4_multimodal", "t5gemma2"}

# families whose own config classes need sizes of their own names (their constraints at tiny sizes)
OVERRIDES.update({
    "cohere_compass_text": {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 5,
                            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "dots3_note_text": {"swa_num_attention_heads": 4, "swa_num_key_value_heads": 4, "swa_q_lora_rank": 16,
                        "swa_kv_lora_rank": 8, "swa_head_dim": 8, "swa_qk_nope_head_dim": 4, "swa_v_head_dim": 8,
                        "index_topk": 64, "index_head_dim": 8, "index_n_heads": 2, "sliding_window": 5, "num_hidden_layers": 3,
                        "shared_experts_intermediate_size": 16},
    "emu3": {"vocabulary_map": {"<image>": 95, "<|extra_200|>": 94},
             "vq_config": {"base_channels": 32, "num_res_blocks": 1, "codebook_size": 64}},
    "funnel": dict(OVERRIDES["funnel"], architectures=["FunnelModel"]),
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    "neomme": {"head_dim": 16, "embedding_rank": 16, "sliding_window": 5},
    "reformer": {"attn_layers": ["local", "local"], "axial_pos_shape": [8, 8], "axial_pos_embds_dim": [16, 16],
                 "attention_head_size": 8, "feed_forward_size": 48, "local_attn_chunk_length": 4,
                 "lsh_attn_chunk_length": 4, "num_buckets": 2, "num_hidden_layers": DROP},
    "zaya": {"num_experts_per_tok": 1, "router_hidden_size": 16},
    "prophetnet": dict(OVERRIDES["prophetnet"], encoder_layers=DROP, decoder_layers=DROP),
    "blt": {"encoder_hash_byte_group_vocab": 64, "local_attention_window_len": 5},
    "vibevoice_asr": {name: {"num_filters": 8, "downsampling_ratios": [2, 2], "depths": [1, 1, 1]}
                      for name in ("semantic_tokenizer_encoder_config", "acoustic_tokenizer_encoder_config")},
    "dots3_note": {"vision_config": {"adapter_in_dim": 32, "adapter_out_dim": 32},
                   "audio_config": {"adapter_input_size": 32, "adapter_out_dim": 32}},
    "nemo_speechlm": {"audio_config": {"diarization_config": {"head_config": {"audio_hidden_size": 32}}}},
})
# Llama 4's text stack at sizes where its chunked attention splits a window (chunks of 5 tokens) and
# its second layer is a full-attention NoPE layer (no rotary positions, temperature-tuned queries)
OVERRIDES["llama4_text"] = {"attention_chunk_size": 5, "no_rope_layers": [1, 0]}

# BigBird at its full attention (what it computes itself at windows of up to (5 + 2·num_random_blocks)·block_size
# tokens), small blocks so that tests/test_architectures.py can also run it block-sparse on a short window
OVERRIDES["big_bird"] = {"attention_type": "original_full", "block_size": 2, "num_random_blocks": 1}

# Longformer with a band of 2 keys either side (windows of the tests are longer than one band)
OVERRIDES["longformer"] = {"attention_window": 4}

# LUKE without its half-million-entry entity table (headsim reads it on text alone)
OVERRIDES["luke"] = {"entity_vocab_size": 8, "entity_emb_size": 16}

# Dory: one input layer, a recurrent block of two layers run twice, one output layer (six attention calls a
# pass over four layers' weights); a window longer than its sliding window
OVERRIDES["dory"] = {"num_hidden_layers": 4, "n_input_layers": 1, "n_output_layers": 1, "n_recurrent_loops": 2,
                     "sliding_window": 5}



#: hybrid stacks (softmax attention at some layers, state-space / linear-attention / convolution /
#: recurrent layers at the others): four layers or so, attention at two of them
_HYBRID = ["linear_attention", "full_attention", "linear_attention", "full_attention"]
_DELTA = dict(num_hidden_layers=4, layer_types=_HYBRID, linear_key_head_dim=8, linear_value_head_dim=8,
              linear_num_key_heads=2, linear_num_value_heads=4)  # gated delta-rule layers (Qwen3-Next and kin)
_MAMBA = dict(num_hidden_layers=4, mamba_d_state=16, mamba_chunk_size=8)
OVERRIDES.update({
    "jamba": {"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
              "expert_layer_offset": 1},
    "bamba": dict(OVERRIDES["bamba"], **_MAMBA, attn_layer_indices=[1, 3]),
    "granitemoehybrid": dict(OVERRIDES["granitemoehybrid"], **_MAMBA, layer_types=_HYBRID, shared_intermediate_size=48),
    "qwen3_next": _DELTA, "qwen3_5_text": _DELTA, "qwen3_5_moe_text": _DELTA,
    "qwen4_exp_text": {**_DELTA, "layer_types": ["linear_attention", "indexed_attention"] * 2,
                       "indexer_budget": 4, "indexer_compress_ratio": 2, "indexer_n_heads": 2, "indexer_kv_heads": 1,
                       "indexer_head_dim": 8},
    "lara_mini": {**_DELTA, "layer_types": ["linear_attention", "sliding_attention", "linear_attention",
                                             "full_attention"], "sliding_window": 5},
    "kimi_linear": {"num_hidden_layers": 4, "layer_types": _HYBRID, "linear_head_dim": 8, "linear_num_heads": 4},
    "olmo_hybrid": {"num_hidden_layers": 4, "layer_types": _HYBRID},
    "minimax": {"num_hidden_layers": 4, "layer_types": _HYBRID},
    "bailing_hybrid": {"num_hidden_layers": 4, "layer_types": _HYBRID, "linear_head_dim": 8},
    "lfm3": {"num_hidden_layers": 4, "layer_types": ["conv", "full_attention", "conv", "full_attention"]},
    "nemotron_h": {"num_hidden_layers": 4, "hybrid_override_pattern": "M*M*", "ssm_state_size": 16, "mamba_num_heads": 4,
                   "mamba_head_dim": 8, "n_groups": 1, "chunk_size": 8, "moe_shared_expert_intermediate_size": 48},
    "recurrent_gemma": {"num_hidden_layers": 6},
    # Zamba: one shared attention block, called at layers 2 and 7 (the first at 2 is what its tied weights name)
    "zamba": {"num_hidden_layers": 8},
    "zamba2": {"num_hidden_layers": 4, "hybrid_layer_ids": [1, 3], "mamba_d_state": 16, "chunk_size": 8, "adapter_rank": 8,
               "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]},
})
_ASR = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4)
#: NeMo SpeechLM: a Nemotron-H language model beside an audio tower whose own sub-configs (ASR encoder,
#: diarization model) the tower sizes do not reach
OVERRIDES["nemo_speechlm"] = {"audio_config": {"asr_config": _ASR, "diarization_config": {
    "audio_config": _ASR, "head_config": {"hidden_size": 32, "audio_hidden_size": 32}}}}
