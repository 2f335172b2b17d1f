"""Where each transformers family keeps its attention: one declarative entry per family.

An :class:`Arch` names, for one family, the module paths the tap needs (the analysed stack, its
layers, each layer's attention module and attention output projection), how the family computes
attention (through transformers' attention interface or only through ``output_attentions``),
whether it is causal, how windows are framed, and what plays the separator / sink role. The core
(:mod:`headsim.model.tap`, :mod:`headsim.windows`) reads only these fields: adding a family is one
entry in :data:`ARCHS` plus one row in ``tests/test_architectures.py``. Which entry reads a given model
(the table's, or one inferred from its modules) is :mod:`headsim.model.resolve`'s concern.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from torch import nn

FRAMINGS = ("cls_sep", "bos", "eos", "none", "auto")
#: how a family outside the interface lays out its probabilities (:attr:`Arch.layout`)
LAYOUTS = ("dense", "band", "blocks")
#: what a layer of the analysed model is: one self-attention stack (encoders, decoders), or one of an
#: encoder-decoder's three (its decoder's layers each give a self- and a cross-attention layer)
STACKS = ("self", "encoder self", "decoder self", "decoder cross")


@dataclass(frozen=True)
class Decoder:
    """An encoder-decoder's decoder, analysed after its encoder.

    Attributes:
        layers: path from the loaded model to the decoder's ``nn.ModuleList`` of layers.
        self_attention / cross_attention: path from one decoder layer to the module that calls the
            attention function (self-attention over decoder positions; cross-attention of decoder
            queries over encoder keys).
        self_projection / cross_projection: path from one decoder layer to each one's output projection.
        n_layers_attr: config names of the decoder's depth (the first that exists).
    """

    layers: str
    self_attention: str
    self_projection: str
    cross_attention: str
    cross_projection: str
    n_layers_attr: tuple[str, ...] = ("num_decoder_layers", "decoder_layers")


@dataclass(frozen=True)
class Arch:
    """One family's layout and attention semantics.

    Attributes:
        family: name shown to users (``headsim models``).
        model_types: the ``config.model_type`` values this entry reads.
        layers: path from the analysed stack to its ``nn.ModuleList`` of layers; for shared layers
            (ALBERT) the path to the one layer every position of the stack reuses.
        attention: path from one layer to the module that calls the attention function (or, without
            the interface, returns ``(context, probabilities)`` under ``output_attentions``).
        output_projection: path from one layer to the attention output projection; its input is every
            query head's output vectors side by side (the paper's head outputs Z).
        stack: path from the loaded model to the analysed stack (``""``: the model; ``"encoder"``
            for encoder-decoders, whose encoder is analysed).
        interface: attention runs through transformers' ``AttentionInterface`` (else the family's own
            attention module returns its probabilities, read by a forward hook; the tap then runs the
            family's eager path: BLOOM, MPT, Falcon, XGLM, DeBERTa, DeBERTa-v2, MPNet).
        causal: decoder-only (each query sees earlier keys only).
        plain: attention is exactly ``softmax(Q·Kᵀ·scale)`` over the window's valid keys (absolute
            positions, no bias, no cap, no window): headsim may compute it itself, once, for both the
            statistics and the model (:meth:`headsim.model.tap.Tap.run_computing`).
        recomputable: the eager attention is ``softmax(Q·Kᵀ·scaling + mask)`` in float32 over each query head's
            key group and nothing else (no cap, sinks or bias; the mask causal, sliding-window and padding
            as transformers builds them): a consumer may take the layer's queries and keys instead of its
            probabilities (:class:`headsim.model.tap.Scores`), the model going on with its own attention.
        framing: how a window is framed: ``"cls_sep"`` ([CLS] … [SEP], <s> … </s>), ``"bos"`` (a
            BOS token, then text), ``"eos"`` (text, then EOS: T5), ``"none"`` (text only), ``"auto"``
            (inferred entries: [CLS] … [SEP] for encoders whose tokenizer has them, BOS … for decoders
            whose tokenizer has one, else text only).
        shared_layers: one set of layer weights reused at every depth (ALBERT).
        position_offset: positions the embedding table reserves before the first token (RoBERTa:
            ``pad_token_id + 1``); ``-1`` reads ``pad_token_id + 1`` from the config.
        n_heads_attr, n_kv_heads_attr, head_dim_attr, hidden_attr, n_layers_attr: config names of
            the sizes (the first that exists of a tuple; a head's output vectors have the value size,
            ``v_head_dim`` under multi-head latent attention).
        sinks: what plays the separator / sink role of the paper's Figs 2–5 in this family.
        decoder: an encoder-decoder's decoder (:class:`Decoder`): its self- and cross-attention
            layers follow the encoder's (``stack`` is then ``"encoder"``); ``None``: one stack.
        inferred: not in the table: read off the model's modules by :func:`infer_arch` (the coverage
            sweep, ``benchmarks/family_coverage.py``, says which inferred families it found exact).
        mixed: a hybrid stack: softmax self-attention at some of its layers, state-space, linear-attention,
            convolution or recurrent layers at the others (Jamba, Qwen3-Next, Zamba ...). The analysed
            layers are exactly those whose ``attention`` path exists and is softmax attention
            (:meth:`attends`), in the stack's order; :meth:`model_layers` gives their own indices.
        probabilities: outside the interface, where the attention module's output holds the
            probabilities under ``output_attentions`` (index path: ``(1,)`` is ``output[1]``; I-BERT nests
            them in ``output[0]``; LUKE puts them after its word and entity outputs, ``(2,)``).
        other_layers: paths from the analysed stack to further ``nn.ModuleList``s of layers that the
            stack calls besides ``layers`` (HRM's high-level stack, called in cycles with its low-level
            one): each call is one analysed layer, numbered by call order as shared layers are.
        causal_attr: a config flag that makes the family causal (XLM's ``causal`` language models).
        attentions_per_layer: attention modules each layer calls in turn (LongCat-Flash: two, each one
            analysed layer); ``attention`` and ``output_projection`` then say where the ``{i}``-th is.
        scores: outside the interface, the attention module returns its masked pre-softmax scores
            (ProphetNet): the probabilities are their softmax over keys, as the module computes them.
        time_first: the family's attention modules take and give ``[T, B, …]`` (FSMT, fairseq's
            layout): the output projection's input and the value projection's output are transposed
            to ``[B, T, …]`` where they are read.
        layout: how the family lays out its probabilities (:data:`LAYOUTS`): ``"dense"`` ``[B, H, T,
            T]``; ``"band"``: over a band of ``2w + 1`` keys around each query, ``[B, T, H, 2w + 1]``
            from its attention module (Longformer's sliding window); ``"blocks"``: per block of ``L``
            queries over the three blocks around it, ``[B, T/L, H, L, 3L]`` (LongT5's local attention).
            headsim stores them as ``[B, H, T, T]`` with zeros outside what the family attends to
            (:func:`headsim.model.tap.local_to_dense`), and keeps the window's own rows where the
            family pads it to whole bands or blocks.
        refuse: ``config → reason`` for configurations of the family headsim does not read
            (``None``: read it).
        call_order: ``config → [module layer index of each attention call of a pass]`` where a family
            re-runs some of its layers within one pass (Dory's recurrent loops): the analysed layers
            are the calls, numbered in that order (like ALBERT's shared layers, weights repeat).
    """

    family: str
    model_types: tuple[str, ...]
    layers: str
    attention: str
    output_projection: str
    stack: str = ""
    interface: bool = True
    causal: bool = False
    plain: bool = False
    recomputable: bool = False
    framing: str = "cls_sep"
    shared_layers: bool = False
    position_offset: int = 0
    n_heads_attr: tuple[str, ...] = ("num_attention_heads", "n_head", "n_heads", "num_heads")
    n_kv_heads_attr: tuple[str, ...] = ("num_key_value_heads",)
    head_dim_attr: tuple[str, ...] = ("v_head_dim", "head_dim", "d_kv")
    hidden_attr: tuple[str, ...] = ("hidden_size", "n_embd", "dim", "d_model")
    n_layers_attr: tuple[str, ...] = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers")
    sinks: str = "[CLS] and [SEP], sentence-final punctuation"
    decoder: Decoder | None = None
    inferred: bool = False
    mixed: bool = False
    probabilities: tuple[int, ...] = (1,)
    other_layers: tuple[str, ...] = ()
    causal_attr: str | None = None
    attentions_per_layer: int = 1
    scores: bool = False
    time_first: bool = False
    layout: str = "dense"
    refuse: Callable[[object], str | None] | None = None
    call_order: Callable[[object], list[int]] | None = None

    def __post_init__(self) -> None:
        assert self.framing in FRAMINGS, self.framing
        assert self.layout in LAYOUTS, self.layout

    def attends(self, layer: nn.Module) -> bool:
        """Whether a layer of the stack has this family's softmax attention: its ``attention`` path
        exists and (interface families) calls transformers' attention interface, not a linear,
        lightning or delta-rule attention of its own."""
        try:
            module = layer.get_submodule(self.attention)
        except AttributeError:
            return False
        return _uses_attention_interface(module) if self.interface else True

    def model_layers(self, model: nn.Module) -> list[int]:
        """The stack's own 0-based index (``layers[i]``) of each analysed layer of the stack, in order:
        every layer, for a :attr:`mixed` stack the layers that :meth:`attends`, with :attr:`call_order`
        the layer of each call."""
        if not self.mixed:
            config = getattr(self.stack_of(model), "config", model.config)
            if self.call_order is not None:
                return list(self.call_order(config))
            return list(range(int(config_value(config, self.n_layers_attr))))
        return [i for i, layer in enumerate(self.stack_of(model).get_submodule(self.layers)) if self.attends(layer)]

    def stack_depth(self, model: nn.Module) -> int:
        """Every layer of the analysed stack, attending or not."""
        if self.mixed:
            return len(self.stack_of(model).get_submodule(self.layers))
        return self.depths(model)[0]

    def forward_kwargs(self) -> dict:
        """Arguments every pass of the stack adds: hybrid stacks run without a cache (transformers'
        caches of linear-attention layers cannot be asked for a sequence length)."""
        return {"use_cache": False} if self.mixed else {}

    def depths(self, model: nn.Module) -> tuple[int, int]:
        """Layers of the analysed stack and of the decoder (0 without one)."""
        config = getattr(self.stack_of(model), "config", model.config)
        if self.mixed:
            n = len(self.model_layers(model))
        else:
            n = len(self.call_order(config)) if self.call_order else int(config_value(config, self.n_layers_attr))
        if self.decoder is None:
            return n, 0
        return n, int(config_value(model.config, self.decoder.n_layers_attr, n))

    def stacks(self, model: nn.Module) -> list[str]:
        """Each analysed layer's stack (:data:`STACKS`), in the order the model calls them: the
        encoder's layers, then per decoder layer its self-attention and its cross-attention."""
        n, n_dec = self.depths(model)
        if self.decoder is None:
            return ["self"] * n
        return ["encoder self"] * n + ["decoder self", "decoder cross"] * n_dec

    def stack_of(self, model: nn.Module) -> nn.Module:
        """The analysed stack (the model itself, or an encoder-decoder's encoder)."""
        return model.get_submodule(self.stack) if self.stack else model

    def layer_modules(self, model: nn.Module, n_layers: int) -> list[nn.Module]:
        """Layer ``i`` of the stack for ``i`` in ``0..n_layers-1`` (the same module repeated for shared layers;
        with :attr:`other_layers`, each distinct layer once, in the order of the paths)."""
        got = self.stack_of(model).get_submodule(self.layers)
        if self.mixed:
            return [got[i] for i in self.model_layers(model)]
        if self.call_order is not None:
            return [got[i] for i in self.call_order(getattr(self.stack_of(model), "config", model.config))]
        others = [m for path in self.other_layers for m in self.stack_of(model).get_submodule(path)]
        return [got] * n_layers if self.shared_layers else list(got) + others

    def _paths(self, path: str) -> list[str]:
        return [path.format(i=i) for i in range(self.attentions_per_layer)]

    def attention_of(self, layer: nn.Module) -> nn.Module:
        return layer.get_submodule(self._paths(self.attention)[0])

    def output_projection_of(self, layer: nn.Module) -> nn.Module:
        return layer.get_submodule(self._paths(self.output_projection)[0])

    def output_projections(self, model: nn.Module, n_layers: int) -> list[nn.Module]:
        """Every distinct attention output projection, in layer order (one for shared layers; an
        encoder-decoder's decoder self- and cross-attention projections after the encoder's)."""
        own = [x.get_submodule(p) for x in self.layer_modules(model, self.depths(model)[0])
               for p in self._paths(self.output_projection)]
        return _distinct(own + self._decoder_modules(model, "self_projection", "cross_projection"))

    def attention_modules(self, model: nn.Module, n_layers: int) -> list[nn.Module]:
        """Every distinct attention module, in layer order (as :meth:`output_projections`)."""
        own = [x.get_submodule(p) for x in self.layer_modules(model, self.depths(model)[0])
               for p in self._paths(self.attention)]
        return _distinct(own + self._decoder_modules(model, "self_attention", "cross_attention"))

    def _decoder_modules(self, model: nn.Module, own: str, cross: str) -> list[nn.Module]:
        if self.decoder is None:
            return []
        paths = (getattr(self.decoder, own), getattr(self.decoder, cross))
        return [layer.get_submodule(p) for layer in model.get_submodule(self.decoder.layers) for p in paths]


def _distinct(modules: Iterable[nn.Module]) -> list[nn.Module]:
    return list({id(m): m for m in modules}.values())


_BERT = dict(layers="encoder.layer", attention="attention.self", output_projection="attention.output.dense")
_DECODER = dict(layers="layers", attention="self_attn", output_projection="self_attn.o_proj", causal=True,
                framing="bos", sinks="the BOS token (the attention sink of decoders); sentence-final punctuation")

_T5_DECODER = Decoder("decoder.block", "layer.0.SelfAttention", "layer.0.SelfAttention.o", "layer.1.EncDecAttention",
                      "layer.1.EncDecAttention.o")
_BART = dict(stack="encoder", layers="layers", attention="self_attn", output_projection="self_attn.out_proj",
             decoder=Decoder("decoder.layers", "self_attn", "self_attn.out_proj", "encoder_attn", "encoder_attn.out_proj"))

#: Every supported family, encoders first. ``plain`` is set only where tests show headsim's own
#: softmax equals the model's eager attention.
def _refused_when(name: str, value: object, why: str) -> Callable[[object], str | None]:
    """An :attr:`Arch.refuse` for one configuration of a family: ``config.name == value``, with the reason."""
    return lambda config: f"{name}={value!r}: {why}" if getattr(config, name, None) == value else None


ARCHS: tuple[Arch, ...] = (
    Arch("bert", ("bert",), **_BERT, plain=True),
    Arch("roberta", ("roberta", "camembert", "data2vec-text"), **_BERT, plain=True, position_offset=-1,
         sinks="<s> and </s>, sentence-final punctuation"),
    Arch("xlm-roberta", ("xlm-roberta",), **_BERT, plain=True, position_offset=-1,
         sinks="<s> and </s>, sentence-final punctuation"),
    Arch("electra", ("electra",), **_BERT, plain=True),
    Arch("distilbert", ("distilbert",), layers="transformer.layer", attention="attention",
         output_projection="attention.out_lin", plain=True),
    Arch("albert", ("albert",), layers="encoder.albert_layer_groups.0.albert_layers.0", attention="attention",
         output_projection="attention.dense", shared_layers=True, plain=True),
    Arch("deberta-v2", ("deberta-v2",), layers="encoder.layer", attention="attention.self",
         output_projection="attention.output.dense", interface=False),
    Arch("deberta", ("deberta",), layers="encoder.layer", attention="attention.self",
         output_projection="attention.output.dense", interface=False),
    Arch("modernbert", ("modernbert",), layers="layers", attention="attn", output_projection="attn.Wo"),
    Arch("mpnet", ("mpnet",), layers="encoder.layer", attention="attention.attn",
         output_projection="attention.attn.o", interface=False,
         sinks="<s> and </s>, sentence-final punctuation"),
    Arch("t5", ("t5", "mt5", "umt5"), stack="encoder", layers="block", attention="layer.0.SelfAttention",
         output_projection="layer.0.SelfAttention.o", framing="eos", decoder=_T5_DECODER,
         sinks="</s> and sentence-final punctuation (T5 windows have no opening token)"),
    Arch("bart", ("bart", "mbart"), **_BART, sinks="<s> and </s>, sentence-final punctuation"),
    Arch("marian", ("marian",), **_BART, framing="eos",
         sinks="</s> and sentence-final punctuation (Marian windows have no opening token)"),
    Arch("gpt2", ("gpt2",), layers="h", attention="attn", output_projection="attn.c_proj", causal=True,
         framing="bos", sinks="the BOS token (<|endoftext|>); sentence-final punctuation"),
    Arch("llama", ("llama",), **_DECODER, recomputable=True),
    Arch("mistral", ("mistral",), **_DECODER, recomputable=True),
    Arch("qwen2", ("qwen2",), **dict(_DECODER, framing="none", sinks="the first token (Qwen is trained without BOS); sentence-final punctuation"),
         recomputable=True),
    Arch("qwen3", ("qwen3",), **dict(_DECODER, framing="none", sinks="the first token (Qwen is trained without BOS); sentence-final punctuation"),
         recomputable=True),
    Arch("bloom", ("bloom",), layers="h", attention="self_attention", output_projection="self_attention.dense",
         interface=False, causal=True, framing="auto", sinks=_DECODER["sinks"]),
    Arch("mpt", ("mpt",), layers="blocks", attention="attn", output_projection="attn.out_proj", interface=False,
         causal=True, framing="auto", sinks=_DECODER["sinks"]),
    Arch("falcon", ("falcon",), layers="h", attention="self_attention", output_projection="self_attention.dense",
         interface=False, causal=True, framing="auto", n_kv_heads_attr=("num_kv_heads",), sinks=_DECODER["sinks"]),
    Arch("xglm", ("xglm",), layers="layers", attention="self_attn", output_projection="self_attn.out_proj",
         interface=False, causal=True, framing="auto", sinks="</s> (XGLM opens every text with it); sentence-final punctuation"),
    Arch("gemma2", ("gemma2",), **_DECODER),
    Arch("gemma3-text", ("gemma3_text",), **_DECODER),
    Arch("phi3", ("phi3",), **_DECODER),
    Arch("openai-gpt", ("openai-gpt",), layers="h", attention="attn", output_projection="attn.c_proj",
         interface=False, causal=True, framing="auto",
         sinks="the first token (GPT has no BOS token); sentence-final punctuation"),
    Arch("xlm", ("xlm", "flaubert"), layers="attentions", attention="", output_projection="out_lin", interface=False,
         hidden_attr=("emb_dim",), causal_attr="causal", sinks="</s> (XLM opens and closes every text with it), sentence-final punctuation"),
    Arch("gpt-neox-japanese", ("gpt_neox_japanese",), layers="layers", attention="attention",
         output_projection="attention.dense", interface=False, causal=True, framing="auto", sinks=_DECODER["sinks"]),
    Arch("ibert", ("ibert",), **_BERT, interface=False, position_offset=-1, probabilities=(0, 1),
         refuse=_refused_when("quant_mode", True, "its integer-only kernels do not give a window the same numbers alone "
                              "and inside a padded batch (a tiny model differs by 6e-2), so no capture of it can be exact"),
         sinks="<s> and </s>, sentence-final punctuation"),
    Arch("hrm-text", ("hrm_text",), **dict(_DECODER, layers="L_module.layers", other_layers=("H_module.layers",))),
    Arch("moshi", ("moshi",), **_DECODER),
    Arch("longcat-flash", ("longcat_flash",), **dict(_DECODER, attention="self_attn.{i}",
                                                     output_projection="self_attn.{i}.o_proj"), attentions_per_layer=2),
    Arch("bigbird-pegasus", ("bigbird_pegasus",), **dict(_BART, attention="self_attn.self",
                                                         output_projection="self_attn.output"), interface=False,
         refuse=_refused_when("attention_type", "block_sparse", "block-sparse attention (random, window and global blocks) "
                              "is not read; the model itself runs full attention on windows of up to (5 + 2 x "
                              "num_random_blocks) x block_size tokens: load it with attention_type='original_full'"),
         sinks="</s> and sentence-final punctuation (Pegasus windows have no opening token)", framing="eos"),
    Arch("seamless-m4t", ("seamless_m4t", "seamless_m4t_v2"), stack="text_encoder", layers="layers", attention="self_attn",
         output_projection="self_attn.out_proj", n_heads_attr=("encoder_attention_heads",),
         decoder=Decoder("text_decoder.layers", "self_attn", "self_attn.out_proj", "cross_attention",
                         "cross_attention.out_proj"),
         framing="auto", sinks="</s> and the language token that open its texts; sentence-final punctuation"),
    # its Llama-like text stack (``text_model``) beside the VQ-VAE that turns images into tokens
    Arch("emu3", ("emu3",), stack="text_model", **dict(_DECODER, framing="auto")),
    # its encoder alone: the decoder's self-attention runs n-gram predicting streams beside the main one
    Arch("prophetnet", ("prophetnet",), stack="encoder", layers="layers", attention="self_attn",
         output_projection="self_attn.out_proj", interface=False, scores=True, n_layers_attr=("num_encoder_layers",),
         framing="auto", sinks="[SEP] (ProphetNet's text ends with it); sentence-final punctuation"),
    # its encoder's text stack alone: the decoder merges self- and cross-attention into one softmax
    Arch("t5gemma2", ("t5gemma2",), stack="encoder.text_model", layers="layers", attention="self_attn",
         output_projection="self_attn.o_proj", framing="auto",
         sinks="read off the module layout: see the family's own [CLS]/BOS and punctuation"),
)

def _dory_calls(config) -> list[int]:
    """Dory's layers in the order one pass runs them: its input layers, its recurrent block
    ``n_recurrent_loops`` times, its output layers."""
    start, n = int(config.n_input_layers), int(config.n_recurrent_layers)
    loop = list(range(start, start + n))
    return list(range(start)) + loop * int(config.n_recurrent_loops) + list(range(start + n, int(config.num_hidden_layers)))


#: families read through a layout of their own (appended after the main table; each has a row in
#: ``tests/test_architectures.py``)
ARCHS += (
    # BigBird swaps its attention module (``attention.self``) between block-sparse and full at run time:
    # read at the parent that returns the same (output, probabilities); windows it runs block-sparse
    # are refused by the tap (:func:`headsim.model.tap.check_full_attention`)
    Arch("big_bird", ("big_bird",), layers="encoder.layer", attention="attention",
         output_projection="attention.output.dense", interface=False),
    # LUKE on text alone (no entity inputs): BERT attention over the words
    Arch("luke", ("luke",), **_BERT, interface=False, probabilities=(2,), position_offset=-1,
         sinks="<s> and </s>, sentence-final punctuation"),
    # FSMT (fairseq's [T, B, C] layout) at its encoder only: its decoder reads another vocabulary than its
    # encoder, so the window's ids cannot be fed to both as headsim does for BART, T5 and Marian
    Arch("fsmt", ("fsmt",), stack="encoder", layers="layers", attention="self_attn",
         output_projection="self_attn.out_proj", interface=False, time_first=True, framing="eos",
         sinks="</s> and sentence-final punctuation (FSMT windows have no opening token)"),
    # Longformer on headsim's windows (no global tokens: the mask is 0 / 1): softmax over a band of keys
    Arch("longformer", ("longformer",), **_BERT, interface=False, layout="band", position_offset=-1,
         sinks="<s> and </s>, sentence-final punctuation"),
    # LongT5's local attention (each block of local_radius + 1 queries over its own and the two neighbouring
    # blocks, keys within local_radius), at its encoder: its decoder's attention runs through the attention
    # interface while the encoder's does not, and an entry reads one kind
    Arch("longt5", ("longt5",), stack="encoder", layers="block", attention="layer.0.LocalSelfAttention",
         output_projection="layer.0.LocalSelfAttention.o", interface=False, probabilities=(2,), layout="blocks",
         framing="eos", refuse=lambda c: None if c.encoder_attention_type == "local" else (
             "its transient-global attention also attends to summaries of blocks of tokens, which are not positions "
             "of the window"),
         sinks="</s> and sentence-final punctuation (LongT5 windows have no opening token)"),
    # Dory (looped depth): every attention call is an analysed layer, its recurrent block's weights repeated
    Arch("dory", ("dory",), **dict(_DECODER, framing="auto"), call_order=_dory_calls),
)

#: model types refused by name, with the reason (their attention or head outputs are not a softmax
#: map and vectors headsim can read exactly, or their stack does not run on text alone), checked
#: before any layout is inferred
REFUSED: dict[str, str] = {
    "yoso": "its attention replaces softmax by the collision probability of locality-sensitive hashes (an "
            "approximation of softmax attention), with no probability map to read (output_attentions returns its outputs)",
    "mra": "its attention is a multi-resolution block approximation of softmax attention (MRA, a kernel of its own; "
           "without it, on CPU, the family returns zeros), with no probability map to read",
    "voxtral_realtime": "its text stack runs only inside the streaming speech model, conditioned on audio frames "
                        "and a delay-time embedding added to every token (no text-only pass)",
    "convbert": "half of each layer's mixing is a span-based dynamic convolution over neighbouring positions, padding "
                "included, so a window's numbers depend on the padding of its batch",
    "blt": "a byte-level model: local stacks over bytes around a global stack over patches of bytes, so no stack "
           "attends over the window's tokens",
    "funnel": "its blocks pool the sequence between them, so later layers attend over fewer positions than the "
              "window's tokens (and its attention adds relative-position and token-type terms of its own)",
    "reformer": "its attention is computed in chunks (local layers: a chunk and the one before it; LSH layers: "
                "buckets of hashed keys), which headsim does not lay out as a map over the window's tokens",
    "pegasus_x": "its block-local attention also attends to learned global tokens, which are not positions of the "
                 "window (a map over the window's tokens is not its whole attention)",
    "led": "its encoder attends through Longformer's sliding-window chunks (a local window plus global tokens) and "
           "its output_attentions come in that banded form ([query, window + 1] per head), not as a map over keys",
    "squeezebert": "its output_attentions are the masked pre-softmax scores, not probabilities, and its output "
                   "projection (a grouped Conv1d) receives the heads channels-first",
    "cpmant": "it prepends learned prompt positions that every token attends to and drops them from its "
              "output_attentions, so its maps over the window are not its whole attention (padding is read from token id 0)",
    "xlnet": "its attention output projection is a bare weight applied by einsum (no module receives the heads' output "
             "vectors), after two-stream relative attention over time-major tensors",
    "jetmoe": "mixture of attention heads: a router picks, per token, the experts whose query and output projections "
              "fill each head slot, so a head index is not one set of weights across positions",
    "diffllama": "differential attention: each output head applies the difference of two softmax maps (A1 - lambda A2, "
                 "not a probability distribution) and a group norm; its output_attentions are the single softmax maps, "
                 "which no head's output follows",
    "nystromformer": "Nystrom approximation: queries attend to segment means of the keys (landmarks) through a "
                     "pseudo-inverse, plus a convolution of the values, so no head has a softmax map over keys",
    "deepseek_v4": "its attention reaches, beyond the window's tokens, compressed key/value blocks appended after them "
                   "(CSA/HCA compressors), so a head's probabilities are not a map over the window's tokens",
}

_BY_TYPE: dict[str, Arch] = {t: a for a in ARCHS for t in a.model_types}


def families() -> list[str]:
    return [a.family for a in ARCHS]


def eager_function_of(module: nn.Module) -> Callable | None:
    """The ``eager_attention_forward`` of the module's own modelling file (transformers' per-family
    eager attention), or ``None``."""
    import sys

    return getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)


def _uses_attention_interface(module: nn.Module) -> bool:
    return eager_function_of(module) is not None and _forward_calls_interface(type(module))


@lru_cache(maxsize=None)
def _forward_calls_interface(cls: type) -> bool:
    """Whether a module class's ``forward`` looks its attention up in transformers' interface (read once
    per class: hybrid stacks ask it of every layer whenever their depth is needed)."""
    import inspect

    try:
        return "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False


def config_value(config, names: tuple[str, ...], default=None):
    """The first of ``names`` that the config defines (not ``None``)."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default
