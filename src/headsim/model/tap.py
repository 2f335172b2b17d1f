"""The model tap: the only code in headsim that runs a model.

One forward pass of the analysed stack (an encoder, a decoder, or an encoder-decoder's encoder)
hands each consumer, per layer, what it asked for (:class:`LayerCapture`):

- ``attention``: the probabilities exactly as the model applies them. Where the family computes
  attention through transformers' ``AttentionInterface``, the tap calls that module's own eager
  attention function with the queries and keys the model passes (rotated, grouped), the model's own
  mask (causal, sliding window, padding, position bias) and its own kwargs (scaling, softcap,
  sinks); headsim never re-implements positions or masks. Families outside the interface
  (ALiBi families, Falcon, XGLM, DeBERTa, MPNet, BigBird, LUKE, FSMT, Longformer, LongT5) return them
  from their attention modules, read by a forward hook; their passes run the family's eager path, so
  the probabilities and Z come from the one computation. Local attention that a family lays out as
  a band or as blocks (Longformer, LongT5) is stored as ``[T, T]`` with zeros outside its reach
  (:func:`local_to_dense`).
- ``head_outputs``: each query head's output vectors Z, read as the input of the attention output
  projection (so whatever the module does between attention and projection is included), split
  into heads: ``[batch, head, seq, d_head]``.
- ``query`` / ``key`` / ``value``: as the attention function receives them (interface families).

Attention is computed in blocks of query rows (:class:`Tap`'s ``tile_rows``): the model's mask is
built a block of rows at a time (:class:`RowMask`, the family's own mask function: causal, sliding
window, padding), the family's eager function runs on those query rows against every key, and the
blocks' outputs are written into one output for the model to continue with (nothing of a block
outlives it, so a layer's blocks of growing size reuse the same heap). Nothing of size
``[heads, T, T]`` for a whole layer exists unless a consumer asks for the whole matrix (``on_tile``
not given); a short window is the one-block case. On a CPU a block holds at most
:data:`BLOCK_CACHE_BYTES` of probabilities (a block that stays in cache runs several times faster),
fewer where the memory budget says so; on an accelerator the budget alone decides.

Each block runs only on the key columns some of its rows may attend (:func:`~headsim.model.masks.live_keys`): where the
mask is a :class:`RowMask`, the columns before the first and after the last one that any row of the
block leaves unmasked (eager's minimum value) are cut from the keys, values, mask and per-pair
kwargs before the family's eager function runs. Softmax gives such columns exactly 0, so the kept
probabilities are the whole row's up to float summation order, and a causal block skips the keys
after its last row, a sliding-window or local block all but its band. Consumers receive the block
with its key columns (``on_tile``'s ``keys``); the whole-matrix capture has zeros outside them.
Blocks with a row that no key is left to are run on every key, as are families whose mask is not a
:class:`RowMask`. A mask serves every layer of a pass that shares it: the first builds each block's
mask on every key to find the live ones, the others build it on those columns alone
(:meth:`RowMask.block`).

Layers are numbered by the order the stack calls them (0-based), which also covers shared layers
(ALBERT). Batches may be padded on either side: the tap right-aligns rows before the pass and
shifts every captured tensor back, so the numbers never depend on the padding side.

For families marked ``plain`` in :mod:`headsim.model.arch` (attention is exactly softmax of scaled
dot products over valid keys), :meth:`Tap.run_computing` lets a consumer compute each layer's
attention itself and hand the model its outputs, so the statistics pay for attention once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import HeadsimError, require
from ..memory import BLOCK_CACHE_BYTES
from .arch import Arch, eager_function_of
from .masks import RowMask, block_kwargs
from .scores import Scores, scores_of

_TAP = "headsim_tap"  # attention through the tap; masks built as for eager attention
_PLAIN = "headsim_plain"  # attention computed by a consumer (plain families); no mask built
_ACTIVE = threading.local()
#: default block budget: float32 attention probabilities of one block of query rows
TILE_BYTES = 64 << 20


def tile_rows_for(budget: int, batch: int, heads: int, keys: int) -> int:
    """Query rows per block so that one block's float32 probabilities ``[batch, heads, rows, keys]``
    stay within ``budget`` bytes (at least one row)."""
    return max(1, int(budget) // max(1, batch * heads * keys * 4))


@dataclass
class LayerCapture:
    """What one layer of one pass gave (tensors on the model's device; ``None`` where not asked for).

    ``attention`` is ``[B, H, T, T]`` float32 (``None`` when the pass hands it out in blocks of
    query rows, :meth:`Tap.run`'s ``on_tile``); ``head_outputs`` ``[B, H, T, d]`` and ``query``
    ``[B, H, T, d]`` in the model's dtype; ``key`` / ``value`` ``[B, H_kv, T, d]`` (grouped-query
    families have fewer key/value heads than query heads).
    """

    layer: int
    head_outputs: torch.Tensor | None = None
    attention: torch.Tensor | None = None
    query: torch.Tensor | None = None
    key: torch.Tensor | None = None
    value: torch.Tensor | None = None


@dataclass
class TapOutput:
    """A pass's result: the stack's last hidden state ``[B, T, hidden]`` (``None`` when the pass
    stopped after the last layer asked for) and the captures not handed to a callback."""

    hidden: torch.Tensor | None
    layers: dict[int, LayerCapture] = field(default_factory=dict)


class _Stop(Exception):
    """Raised once the last layer asked for is captured: the rest of the pass is skipped."""


def _eager_function(module: nn.Module) -> Callable:
    fn = eager_function_of(module)
    if fn is None:
        raise HeadsimError(f"{type(module).__name__} has no eager attention function to read probabilities from",
                           "report this model class; its attention cannot be captured exactly")
    return fn


_REGISTERED: list[bool] = []


def _register() -> None:
    """Register headsim's attention functions (and the tap's mask) with transformers, once."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    # looked up at call time, so the module's functions stay the ones that run (and can be patched in tests)
    AttentionInterface.register(_TAP, lambda *args, **kwargs: _tap_attention(*args, **kwargs))
    AttentionInterface.register(_PLAIN, lambda *args, **kwargs: _plain_attention(*args, **kwargs))
    AttentionMaskInterface.register(_TAP, lambda **kwargs: RowMask(kwargs))


class _Pass:
    """Bookkeeping of one forward pass (layer counters, what each layer still waits for)."""

    def __init__(self, tap: Tap, on_layer, shift: torch.Tensor | None, original: dict[int, str], on_tile=None,
                 on_scores=None, valid: torch.Tensor | None = None):
        self.tap, self.on_layer, self.shift, self.original = tap, on_layer, shift, original
        self.on_tile = on_tile
        self.on_scores = on_scores if shift is None and tap.arch.recomputable else None
        self.valid = valid  # [B, T] bool: the batch's valid positions (as the model sees them)
        self.checked: dict = {}  # masks checked for Scores in this pass (headsim.model.scores.scores_of)
        self.attention_calls = 0
        self.projection_calls = 0
        self.pending: dict[int, LayerCapture] = {}
        self.out: dict[int, LayerCapture] = {}
        self.compute = None
        self.t = 0  # the window's length (a family may pad it inside its own forward)

    def capture_of(self, layer: int) -> LayerCapture:
        return self.pending.setdefault(layer, LayerCapture(layer))

    def unshift(self, x: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
        """Undo the right-alignment along ``dims`` (sequence axes) of ``x`` [B, ...]."""
        if self.shift is None:
            return x
        for d in dims:
            x = _roll_rows(x, self.shift, d)
        return x

    def deliver(self, layer: int) -> None:
        """Hand layer ``layer`` on once it holds everything asked for (head outputs and attention
        arrive from different hooks, in an order that depends on the family)."""
        cap = self.pending[layer]
        tap = self.tap
        whole_attention = tap.attention and self.on_tile is None and self.on_scores is None
        if (tap.head_outputs and cap.head_outputs is None) or (whole_attention and cap.attention is None):
            return
        del self.pending[layer]
        if self.on_layer is None:
            self.out[layer] = cap
        else:
            self.on_layer(cap)
        if self.tap.stop_early and layer == self.tap.last_layer:
            raise _Stop


def _roll_rows(x: torch.Tensor, shift: torch.Tensor, dim: int) -> torch.Tensor:
    """Roll each row ``b`` of ``x`` by ``shift[b]`` positions along ``dim`` (a sequence axis)."""
    t = x.shape[dim]
    index = (torch.arange(t, device=x.device)[None, :] - shift[:, None]) % t  # [B, T]
    shape = [x.shape[0]] + [1] * (x.ndim - 1)
    shape[dim] = t
    index = index.view(shape).expand(x.shape)
    return torch.gather(x, dim, index)


def _tap_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function the model calls during a tapped pass (interface families): the
    family's eager function, one block of query rows at a time (see the module docstring)."""
    run: _Pass = _ACTIVE.run
    layer = run.attention_calls
    run.attention_calls += 1
    tap = run.tap
    wanted = layer in tap.layer_set
    eager = _eager_function(module)
    impl = run.original.get(id(module.config), "sdpa")
    scores = None
    if wanted and tap.attention and run.on_scores is not None and impl != "eager":  # the model's own attention, not eager
        scores = scores_of(module, query, key, value, attention_mask, scaling, dropout, kwargs, run.valid,
                           tap.rows_per_tile(query.shape[0], 1, key.shape[2]), run.checked)
    computed = None if scores is None else run.on_scores(layer, scores)  # [B, H, T, d], where the consumer made them
    if computed is not None:
        out, probs = computed.to(value.device, value.dtype).transpose(1, 2).contiguous(), None  # as eager returns them
    elif scores is not None or (not (wanted and tap.attention) and impl != "eager"):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        mask = attention_mask.for_sdpa() if isinstance(attention_mask, RowMask) else attention_mask
        fn = ALL_ATTENTION_FUNCTIONS.get_interface(impl, eager)
        out, probs = fn(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)
        probs = None if scores is not None else probs
    else:
        t, n = query.shape[2], key.shape[2]
        step = t if run.shift is not None else tap.rows_per_tile(query.shape[0], query.shape[1], n)
        joined, whole = None, None  # the blocks' outputs, written into one tensor (no per-block leftovers)
        for start in range(0, t, step):
            stop = min(start + step, t)
            keys = slice(0, n)
            if isinstance(attention_mask, RowMask):  # the mask on the block's live keys
                keys, mask = attention_mask.block(start, stop, n, trim=tap.trim_keys)
            else:
                mask = None if attention_mask is None else attention_mask[:, :, start:stop]
            q, k, v, kw = query, key, value, kwargs
            if (start, stop) != (0, t):
                q = query[:, :, start:stop]
            if (keys.start, keys.stop) != (0, n):
                k, v = key[:, :, keys], value[:, :, keys]
            if (start, stop, keys.start, keys.stop) != (0, t, 0, n):
                kw = block_kwargs(kwargs, t, n, slice(start, stop), keys)
            out, probs = eager(module, q, k, v, mask, scaling=scaling, dropout=dropout, **kw)
            if (start, stop) == (0, t):
                joined = out
            else:  # [B, rows, H, d]
                if joined is None:
                    joined = out.new_empty(out.shape[0], t, *out.shape[2:])
                joined[:, start:stop] = out
            del out
            if wanted and tap.attention:
                if run.on_tile is not None:  # in the dtype the model applied them (a float32 copy is a pass of its own)
                    run.on_tile(layer, slice(start, stop), probs, keys)
                elif (start, stop, keys.start, keys.stop) == (0, t, 0, n):
                    whole = probs.float()
                else:
                    if whole is None:
                        whole = probs.new_zeros(*probs.shape[:2], t, n, dtype=torch.float32)
                    whole[:, :, start:stop, keys] = probs
            del probs, mask
        out = joined
        probs = None
        if whole is not None:
            run.capture_of(layer).attention = run.unshift(whole, (2, 3))
    if wanted and tap.qkv:
        cap = run.capture_of(layer)
        cap.query, cap.key, cap.value = (run.unshift(x, (2,)) for x in (query, key, value))
    return out, probs


def _plain_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function of :meth:`Tap.run_computing`: the consumer computes it."""
    run: _Pass = _ACTIVE.run
    layer = run.attention_calls
    run.attention_calls += 1
    out = run.compute(layer, query, key, value, scaling)  # [B, H, T, d]
    return out.transpose(1, 2).contiguous(), None


def _configs(model: nn.Module) -> list:
    """Every distinct config object the model's modules read (encoder stacks may hold copies)."""
    seen: dict[int, object] = {id(model.config): model.config}
    for m in model.modules():
        c = getattr(m, "config", None)
        if c is not None and hasattr(c, "_attn_implementation"):
            seen.setdefault(id(c), c)
    return list(seen.values())


@contextmanager
def _implementation(model: nn.Module, name: str | None, configs: list | None = None):
    """Switch every config of ``model`` (``configs``, when the caller has them) to attention
    implementation ``name`` for one pass (``None``: leave them as they are)."""
    configs = [] if name is None else (_configs(model) if configs is None else configs)
    previous = {id(c): c._attn_implementation for c in configs}
    for c in configs:
        c._attn_implementation_internal = name  # no propagation: each config is switched itself
    try:
        yield {k: (v or "eager") for k, v in previous.items()}
    finally:
        for c in configs:
            c._attn_implementation_internal = previous[id(c)]


def _right_align(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Rows whose valid tokens do not start at position 0 are rolled so they do; ``shift`` undoes it."""
    valid = mask.bool()
    lengths = valid.sum(-1)
    first = torch.where(valid.any(-1), valid.float().argmax(-1), torch.zeros_like(lengths))
    t = mask.shape[-1]
    positions = torch.arange(t, device=mask.device)[None, :]
    contiguous = (valid == ((positions >= first[:, None]) & (positions < (first + lengths)[:, None]))).all()
    require(bool(contiguous), "attention_mask marks more than one run of tokens in a row",
            "pass one contiguous run of valid tokens per row (left or right padding)")
    if not bool((first > 0).any()):
        return ids, mask, None
    shift = first
    return _roll_rows(ids, -shift, 1), _roll_rows(mask, -shift, 1), shift


def check_layers(layers: Sequence[int] | None, n_layers: int) -> list[int]:
    """0-based layer indices, validated and sorted without repeats; ``None`` → all."""
    if layers is None:
        return list(range(n_layers))
    out = sorted({int(x) for x in layers})
    for x in out:
        require(0 <= x < n_layers, f"layer {x + 1} is out of range", f"this model has layers 1..{n_layers} (1-based)")
    return out


class Tap:
    """Capture of chosen layers of one loaded model (see the module docstring).

    Args:
        loaded: the model (:class:`headsim.model.load.LoadedModel`).
        layers: 0-based layers to capture (default: all).
        attention: capture attention probabilities.
        head_outputs: capture each head's output vectors.
        qkv: capture queries, keys and values (interface families only).
        stop_early: end the pass once the last layer asked for is captured (no hidden state then).
        tile_rows: query rows per block of attention (``None``: as many as ``tile_bytes`` (default
            :data:`TILE_BYTES`), on a CPU at most :data:`BLOCK_CACHE_BYTES`, of float32 probabilities
            ``[B, H, rows, T]`` hold; a window that fits is one block).
        trim_keys: run each block only on the key columns its mask leaves to some row (see the
            module docstring); ``False`` runs every block on every key.
    """

    def __init__(self, loaded, *, layers: Sequence[int] | None = None, attention: bool = False,
                 head_outputs: bool = True, qkv: bool = False, stop_early: bool = False,
                 tile_rows: int | None = None, tile_bytes: int | None = None, trim_keys: bool = True) -> None:
        self.loaded = loaded
        self.arch: Arch = loaded.arch
        chosen = check_layers(layers, loaded.n_layers)
        require(not qkv or self.arch.interface, f"{self.arch.family} does not expose queries and keys to headsim",
                "capture attention and head outputs instead")
        self.layer_set = frozenset(chosen)
        self.last_layer = max(chosen) if chosen else -1
        self.attention, self.head_outputs, self.qkv = bool(attention), bool(head_outputs), bool(qkv)
        self.stop_early = bool(stop_early) and bool(chosen)
        self._configs = _configs(loaded.model)
        self.n_own = self.arch.depths(loaded.model)[0]  # an encoder-decoder's encoder layers (run alone when enough)
        require(tile_rows is None or int(tile_rows) >= 1, f"tile_rows {tile_rows!r} must be 1 or more",
                "pass a positive number of query rows per block (or None)")
        self.tile_rows = None if tile_rows is None else int(tile_rows)
        self.tile_bytes = TILE_BYTES if tile_bytes is None else int(tile_bytes)
        self.trim_keys = bool(trim_keys)

    def rows_per_tile(self, batch: int, heads: int, keys: int) -> int:
        """Query rows per block of attention for ``batch`` windows of ``heads`` heads over ``keys`` keys."""
        if self.tile_rows is not None:
            return self.tile_rows
        cpu = self.loaded.device.type == "cpu"  # caches are a CPU's concern
        return tile_rows_for(min(self.tile_bytes, BLOCK_CACHE_BYTES) if cpu else self.tile_bytes, batch, heads, keys)

    # ------------------------------------------------------------------ passes
    def run(self, input_ids, attention_mask, on_layer: Callable[[LayerCapture], None] | None = None, *,
            grad: bool = False, right_padded: bool = False,
            on_tile: Callable[[int, slice, torch.Tensor, slice], None] | None = None,
            on_scores: Callable[[int, Scores], torch.Tensor | None] | None = None) -> TapOutput:
        """One forward pass; each captured layer goes to ``on_layer`` as soon as it is complete (or
        into the returned :class:`TapOutput`). ``grad=True`` keeps the autograd graph (ablation).
        ``right_padded=True`` (the caller built the rows so) skips the padding check, which would make
        the host wait for an accelerator once per pass.

        ``on_tile(layer, rows, probs, keys)``, where given, receives each block of attention
        probabilities ``[B, H, rows, keys]`` in the dtype the model applied them (query rows ``rows``, in order; key columns
        ``keys``, a slice of ``0..T``: every probability outside it is 0, see the module docstring;
        :func:`~headsim.model.masks.full_keys` widens a block to all ``T`` keys) as it is computed, before the layer's
        capture (whose ``attention`` is then ``None``); the block is released afterwards.
        Interface families only; rows of left-padded batches come as one block.

        ``on_scores(layer, scores)``, where given, receives instead a layer's queries, keys and mask as
        :class:`~headsim.model.scores.Scores` wherever they are its attention (``recomputable`` families,
        right-aligned rows, the family's mask as described: :func:`~headsim.model.scores.scores_of`). Where it
        returns the layer's head outputs ``[B, H, T, d]`` (computed from the same probabilities,
        :meth:`~headsim.model.scores.Scores.outputs`) the model goes on with them; where it returns ``None`` the
        model goes on with its own attention function. No eager attention runs for that layer. Other layers
        come through ``on_tile``, which must be given with it."""
        require(on_tile is None or self.arch.interface, f"{self.arch.family} attention is not computed through the tap",
                "capture whole attention matrices (no on_tile)")
        require(on_scores is None or on_tile is not None, "on_scores was given without on_tile",
                "pass on_tile too: layers whose attention is not their scores come in blocks")
        return self._pass(input_ids, attention_mask, on_layer, grad=grad, right_padded=right_padded, on_tile=on_tile,
                          on_scores=on_scores)

    def run_computing(self, input_ids, attention_mask,
                      compute: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor, float | None], torch.Tensor]) -> None:
        """One pass in which ``compute(layer, query, key, value, scale)`` computes every layer's
        attention output ``[B, H, T, d]`` (softmax over the valid keys of the batch's mask) that the
        model continues with. Only for ``plain`` families, and right-padded batches (not checked: the
        consumer's softmax masks the keys the batch's mask marks)."""
        require(self.arch.plain, f"{self.arch.family} attention is not plain softmax(QK^T) over valid keys",
                "use Tap.run, which reads the model's own attention")
        self._pass(input_ids, attention_mask, None, compute=compute, right_padded=True)

    def _pass(self, input_ids, attention_mask, on_layer, *, grad: bool = False, compute=None,
              right_padded: bool = False, on_tile=None, on_scores=None) -> TapOutput:
        loaded = self.loaded
        ids = torch.as_tensor(input_ids, device=loaded.device)
        mask = torch.as_tensor(attention_mask, device=loaded.device)
        require(ids.ndim == 2 and ids.shape == mask.shape, f"input_ids {tuple(ids.shape)} and attention_mask "
                f"{tuple(mask.shape)} must both be [batch, seq]", "pass two matching 2-D arrays")
        ids, mask, shift = (ids, mask, None) if right_padded else _right_align(ids, mask)
        model = loaded.model
        stack = self.arch.stack_of(model)
        through_decoder = self.last_layer >= self.n_own  # an encoder-decoder's decoder layers are asked for
        name = _PLAIN if compute is not None else _TAP
        _register()
        # outside the interface the family's own module computes attention; asked for its probabilities
        # every pass runs its eager path (Falcon's others add a boolean mask, or ALiBi once instead of twice)
        impl = name if self.arch.interface else "eager"
        with loaded.reading(), _implementation(model, impl, self._configs) as original:  # eval mode for the pass
            run = _Pass(self, on_layer, shift, original, on_tile, on_scores, mask.bool())
            run.compute = compute
            run.t = ids.shape[1]
            handles = self._hooks(run, stack)
            previous = getattr(_ACTIVE, "run", None)
            _ACTIVE.run = run
            hidden = None
            try:
                with torch.enable_grad() if grad else torch.inference_mode():
                    kwargs = {"output_attentions": True} if (self.attention and not self.arch.interface) else {}
                    kwargs.update(self.arch.forward_kwargs())
                    if through_decoder:
                        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids,
                                    decoder_attention_mask=mask, **dict(kwargs, use_cache=False))
                        hidden = out.encoder_last_hidden_state
                    else:
                        out = stack(input_ids=ids, attention_mask=mask, **kwargs)
                        hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
                hidden = run.unshift(hidden, (1,))
            except _Stop:
                pass
            finally:
                _ACTIVE.run = previous
                for h in handles:
                    h.remove()
        calls = run.attention_calls if compute is not None else run.projection_calls
        if hidden is not None:
            ran = loaded.n_layers if through_decoder else self.n_own
            require(calls == ran, f"{type(model).__name__} ran {calls} attention layers through the tap for "
                    f"{ran} layers", "report this model; its layers cannot be captured")
        return TapOutput(hidden, run.out)

    def _hooks(self, run: _Pass, stack: nn.Module) -> list:
        """Pre-hooks on the output projections (head outputs) and, outside the interface, forward hooks
        on the attention modules (probabilities); each registered once per distinct module."""
        arch, loaded = self.arch, self.loaded
        n_heads = loaded.n_heads
        handles = []

        def on_projection(_module, args):
            layer = run.projection_calls
            run.projection_calls += 1
            if layer not in self.layer_set:
                return
            cap = run.capture_of(layer)
            if self.head_outputs:
                z = args[0].transpose(0, 1) if arch.time_first else args[0]
                z = z[:, :run.t]  # a family that pads the window to whole bands (Longformer): the window's rows
                cap.head_outputs = run.unshift(z.view(*z.shape[:-1], n_heads, z.shape[-1] // n_heads).transpose(1, 2), (2,))
            run.deliver(layer)

        def on_attention(module, _args, output):
            layer = run.attention_calls
            run.attention_calls += 1
            check_full_attention(module, arch.family)
            if layer in self.layer_set and self.attention:
                probs = output
                for i in arch.probabilities:
                    probs = probs[i]
                probs = probs.float().softmax(-1) if arch.scores else probs.float()
                if arch.layout != "dense":  # Longformer's module gives its band as [B, T, H, 2w + 1]
                    probs = local_to_dense(probs.transpose(1, 2) if arch.layout == "band" else probs, arch.layout, run.t)
                run.capture_of(layer).attention = run.unshift(probs, (2, 3))
                run.deliver(layer)

        if run.compute is None:
            for module in arch.output_projections(loaded.model, loaded.n_layers):
                handles.append(module.register_forward_pre_hook(on_projection))
        if not arch.interface and run.compute is None:
            for module in arch.attention_modules(loaded.model, loaded.n_layers):
                handles.append(module.register_forward_hook(on_attention))
        return handles


def local_to_dense(probs: torch.Tensor, layout: str, t: int) -> torch.Tensor:
    """Probabilities laid out as a family computes local attention, as ``[B, H, t, t]`` with zeros
    outside what it attends to (keys past the window, where the family pads it, are dropped):

    - ``"band"``: ``[B, H, T', 2w + 1]`` over a band of keys around each query (column ``w`` is the
      query's own position; Longformer, ``T' ≥ t``);
    - ``"blocks"``: ``[B, T'/L, H, L, 3L]``, each block of ``L`` queries over its own and the two
      neighbouring blocks (key ``k`` of block ``b`` is position ``(b - 1)·L + k``; LongT5).
    """
    if layout == "blocks":
        b, n_blocks, h, size, width = probs.shape
        probs = probs.transpose(1, 2).reshape(b, h, n_blocks * size, width)  # query i = block·L + q
        offset = torch.arange(n_blocks * size, device=probs.device)[:, None] // size * size - size
    else:
        width = probs.shape[-1]
        offset = torch.arange(probs.shape[2], device=probs.device)[:, None] - (width - 1) // 2
    rows = torch.arange(t, device=probs.device)[:, None].expand(t, width)
    cols = offset[:t] + torch.arange(width, device=probs.device)[None, :]
    inside = (cols >= 0) & (cols < t)
    dense = probs.new_zeros(*probs.shape[:2], t, t)
    dense[:, :, rows[inside], cols[inside]] = probs[:, :, :t][:, :, inside]
    return dense


def check_full_attention(module: nn.Module, family: str) -> None:
    """Refuse a pass in which a family that switches between full and block-sparse attention by window
    length (BigBird: its ``attention_type``) ran block-sparse: headsim reads its full softmax attention."""
    kind = getattr(module, "attention_type", None)
    if kind == "block_sparse":  # (GPT-Neo's modules also have an attention_type: "global" / "local")
        config = getattr(module, "config", None)
        limit = (5 + 2 * int(getattr(config, "num_random_blocks", 0))) * int(getattr(config, "block_size", 0))
        raise HeadsimError(f"{family} ran its {kind} attention on this window (longer than {limit} tokens): headsim "
                           "reads its full softmax attention only", f"use windows of at most {limit} tokens")


def capture(loaded, input_ids, attention_mask, *, layers: Sequence[int] | None = None, attention: bool = True,
            head_outputs: bool = True, qkv: bool = False) -> dict[str, torch.Tensor]:
    """One pass; every captured role stacked over the chosen layers: ``[batch, layer, head, seq, …]``."""
    tap = Tap(loaded, layers=layers, attention=attention, head_outputs=head_outputs, qkv=qkv, stop_early=True)
    got = tap.run(input_ids, attention_mask).layers
    order = sorted(got)
    roles = [r for r, on in (("attention", attention), ("head_outputs", head_outputs), ("query", qkv),
                             ("key", qkv), ("value", qkv)) if on]
    return {r: torch.stack([getattr(got[li], r) for li in order], dim=1) for r in roles}


def hidden_states(loaded, input_ids, attention_mask, *, grad: bool = False) -> torch.Tensor:
    """The stack's last hidden state ``[batch, seq, hidden]`` (nothing captured)."""
    return Tap(loaded, layers=[], head_outputs=False).run(input_ids, attention_mask, grad=grad).hidden


@contextmanager
def edit_head_outputs(loaded, edits: dict[int, Callable[[torch.Tensor], torch.Tensor]]):
    """Within the block, every pass gives layer ``l``'s attention output projection ``edits[l](z)``
    instead of ``z`` (``[B, T, H·d_head]``: every query head's output vectors side by side); layers
    without an edit pass through. Layers are counted per pass, so shared layers (ALBERT) are edited
    at their own depth; a tap capturing the same pass sees the edited Z (head ablation, gates)."""
    arch = loaded.arch
    count = [0]

    def reset(_module, _args):
        count[0] = 0

    def edit(_module, args):
        layer = count[0]
        count[0] += 1
        fn = edits.get(layer)
        if fn is None:
            return None
        if arch.time_first:  # [T, B, …] in the family's own layout
            return (fn(args[0].transpose(0, 1)).transpose(0, 1), *args[1:])
        return (fn(args[0]), *args[1:])

    handles = [arch.stack_of(loaded.model).register_forward_pre_hook(reset)]
    try:
        for module in arch.output_projections(loaded.model, loaded.n_layers):
            handles.append(module.register_forward_pre_hook(edit))
        yield
    finally:
        for h in handles:
            h.remove()

