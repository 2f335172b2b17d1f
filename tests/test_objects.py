"""Models already in memory (issue 45): every object ``headsim.load_model`` accepts reads as the model's own
eager attention (``output_attentions``) and head outputs (what the attention output projection receives), at
the valid positions of padded batches (:func:`headsim.model.verify.verify` against an eager copy of the base
model, in eval mode); a LoRA adapter changes the result and its merged eager reference matches it; nnsight's
LanguageModel and TransformerLens' TransformerBridge equal the model they wrap; a model in train mode is left
in train mode; the weights' fingerprint tells different weights apart and the same weights loaded twice
alike, so runs of different weights are refused by merge and resume; analyze returns the Run that load_run
returns, which compare and the report take directly."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import headsim
from headsim.errors import HeadsimError
from headsim.model.load import load_model
from headsim.model.objects import fingerprint
from headsim.model.tap import capture
from headsim.model.verify import random_batch, tiny_config, verify
from headsim.runs.merge import merge_runs
from headsim.runs.run import Run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning")
RUN = dict(windows=4, seq_len=32, batch_size=2, progress=False, sentence_splitter="newline")
TEXT = "The red fox jumps over the fence.\nA small bird sings in the garden.\nMany people walked home after the game.\n" * 20


@pytest.fixture(scope="module")
def tok(tokenizer):
    got = copy.deepcopy(tokenizer)
    got.bos_token = got.cls_token  # a BOS token for the Llama rows (BOS framing)
    return got


def _eager(base: torch.nn.Module) -> torch.nn.Module:
    """An eval-mode copy of a base model running eager attention: the reference."""
    ref = copy.deepcopy(base).eval()
    ref.config._attn_implementation = "eager"
    return ref


def _built(kind: str, tok):
    """(object, the eager reference of the base it holds, tolerance) for each accepted kind of object."""
    from transformers import BertForMaskedLM, BertModel, LlamaForCausalLM

    torch.manual_seed(0)
    if kind.startswith("bert"):
        obj = (BertModel if kind == "bert" else BertForMaskedLM)(tiny_config("bert", vocab_size=len(tok))).train()
        return obj, _eager(getattr(obj, "bert", obj)), 1e-5
    lm = LlamaForCausalLM(tiny_config("llama", vocab_size=len(tok))).train()
    if kind == "llama-bf16":
        lm = lm.to(torch.bfloat16)
        return lm, _eager(lm.model), 2e-2
    if kind.startswith("lora"):
        from peft import LoraConfig, get_peft_model

        peft = get_peft_model(lm, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                             init_lora_weights=False))  # random A and B: a non-zero update
        reference = _eager(copy.deepcopy(peft).merge_and_unload().model)
        if kind == "lora-merged":
            peft.merge_adapter()
        return peft, reference, 1e-5
    return lm, _eager(lm.model), 1e-5


KINDS = ["bert", "bert-masked-lm", "llama-causal-lm", "llama-bf16", "lora", "lora-merged"]


@pytest.mark.parametrize("kind", KINDS)
def test_each_object_reads_as_its_eager_model_and_keeps_its_mode(kind, tok):
    obj, reference, tol = _built(kind, tok)
    modes = [m.training for m in obj.modules()]
    loaded = load_model(obj, tokenizer=tok)
    got = verify(loaded, reference)
    assert got.exact(tol), (kind, got)
    assert got.projection <= tol  # Z is what the eager model's output projection receives
    assert [m.training for m in obj.modules()] == modes and obj.training  # found in train mode, left in it
    record = loaded.describe()["object"]
    assert record["class"].endswith(type(obj).__name__) and len(record["fingerprint"]["sha256"]) == 64
    json.dumps(record)


def test_a_lora_adapter_changes_the_result(tok):
    peft, reference, _ = _built("lora", tok)
    base = peft.get_base_model()
    ids, mask = random_batch(0, vocab=len(tok))
    adapted = capture(load_model(peft, tokenizer=tok), ids, mask)
    with peft.disable_adapter():  # the base alone: another result, recorded as inactive, other weights read
        off = load_model(peft, tokenizer=tok)
        plain = capture(off, ids, mask)
    assert not off.origin["adapters"][0]["active"] and off.fingerprint != load_model(peft, tokenizer=tok).fingerprint
    assert float((adapted["attention"] - plain["attention"]).abs().max()) > 1e-3
    assert float((adapted["head_outputs"] - plain["head_outputs"]).abs().max()) > 1e-3
    record = load_model(peft, tokenizer=tok).origin["adapters"]
    assert record == [{"name": "default", "type": "LORA", "target_modules": ["o_proj", "q_proj", "v_proj"], "rank": 4,
                       "alpha": 8, "base_model": None, "active": True, "merged": False}]
    assert base is peft.get_base_model()


def test_wrappers_equal_the_model_they_wrap(tok, tmp_path):
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    lm = LlamaForCausalLM(tiny_config("llama", vocab_size=len(tok))).eval()
    plain = load_model(copy.deepcopy(lm), tokenizer=tok)
    ids, mask = random_batch(0, vocab=len(tok))
    want = capture(plain, ids, mask)

    nnsight = pytest.importorskip("nnsight")
    wrapped = nnsight.LanguageModel(copy.deepcopy(lm), tokenizer=tok)
    lens = pytest.importorskip("transformer_lens.model_bridge")
    copy.deepcopy(lm).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    bridge = lens.TransformerBridge.boot_transformers(str(tmp_path), hf_model=copy.deepcopy(lm), tokenizer=tok)
    for obj, wrapper in ((wrapped, "nnsight LanguageModel"), (bridge, "TransformerLens TransformerBridge")):
        loaded = load_model(obj)  # the wrapper's own tokenizer
        got = capture(loaded, ids, mask)
        for role in want:
            torch.testing.assert_close(got[role], want[role], rtol=0, atol=0)
        assert loaded.origin["wrapper"] == wrapper and loaded.fingerprint == plain.fingerprint
        assert verify(loaded, _eager(lm.model)).exact(1e-5)
    assert type(bridge.original_model.model.layers[0]).__name__ == "BlockBridge"  # the bridge is left as it was
    assert bridge(torch.tensor([[1, 5, 6]])).shape[-1] == len(tok)


def test_a_model_placed_by_accelerate_with_disk_offload(tok, tmp_path):
    from accelerate.utils import compute_module_sizes
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config("bert", vocab_size=len(tok), num_hidden_layers=4)).eval()
    model.save_pretrained(tmp_path / "m")
    sizes = compute_module_sizes(model)
    limit = sizes[""] - 2 * sizes["bert.encoder.layer.0"]  # room for all but about two layers
    placed = BertForSequenceClassification.from_pretrained(tmp_path / "m", device_map="auto", max_memory={"cpu": limit},
                                             offload_folder=str(tmp_path / "offload"))
    assert "disk" in set(placed.hf_device_map.values())
    ids, mask = random_batch(0, vocab=len(tok))
    got = capture(load_model(placed, tokenizer=tok), ids, mask)
    want = capture(load_model(model, tokenizer=tok), ids, mask)
    for role in want:
        torch.testing.assert_close(got[role], want[role], rtol=0, atol=1e-6)
    record = load_model(placed, tokenizer=tok).origin
    assert record["fingerprint"]["offloaded"] > 0 and "disk" in record["device_map"].values()


def test_train_mode_is_restored_after_an_error(tok):
    from transformers import BertModel

    model = BertModel(tiny_config("bert", vocab_size=len(tok))).train()
    loaded = load_model(model, tokenizer=tok)

    def fail(module, args, output):
        assert not module.training  # read in eval mode
        raise RuntimeError("a failure inside the pass")

    handle = model.encoder.layer[0].register_forward_hook(fail)
    ids, mask = random_batch(0, vocab=len(tok))
    with pytest.raises(RuntimeError, match="inside the pass"):
        capture(loaded, ids, mask)
    handle.remove()
    assert all(m.training for m in model.modules())
    assert all(p.requires_grad for p in model.parameters())  # gradients untouched


def test_the_fingerprint_tells_weights_apart_and_the_same_weights_alike(tok):
    from transformers import BertModel

    torch.manual_seed(0)
    model = BertModel(tiny_config("bert", vocab_size=len(tok))).eval()
    first = fingerprint(model)["sha256"]
    assert fingerprint(copy.deepcopy(model))["sha256"] == first  # the same weights loaded twice
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed.encoder.layer[0].attention.self.query.weight[3, 5] += 1e-6
    swapped = copy.deepcopy(model)
    with torch.no_grad():
        w = swapped.encoder.layer[1].output.dense.weight
        w[0, 0], w[0, 1] = w[0, 1].clone(), w[0, 0].clone()
    half = copy.deepcopy(model).half()
    others = {fingerprint(m)["sha256"] for m in (changed, swapped, half)} | {fingerprint(model, [{"name": "x"}])["sha256"]}
    assert len(others) == 4 and first not in others


def test_anything_else_and_quantised_objects_are_refused_in_one_line(tok):
    from transformers import BertModel

    for obj in (42, "not a path/../x", torch.nn.Linear(2, 2)):
        with pytest.raises(HeadsimError) as err:
            load_model(obj, tokenizer=tok)
        assert "\n" not in str(err.value)
    with pytest.raises(HeadsimError, match="transformers model .* PEFT model; nnsight's LanguageModel"):
        load_model(torch.nn.Linear(2, 2))
    model = BertModel(tiny_config("bert", vocab_size=len(tok)))
    model.config.quantization_config = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    with pytest.raises(HeadsimError, match="quantised.*bitsandbytes, 4-bit"):
        load_model(model, tokenizer=tok)
    model = BertModel(tiny_config("bert", vocab_size=len(tok)))
    model.hf_quantizer = object()
    with pytest.raises(HeadsimError, match="holds quantised weights"):
        load_model(model, tokenizer=tok)
    with pytest.raises(HeadsimError, match="comes without a tokenizer.*no name_or_path"):
        load_model(BertModel(tiny_config("bert", vocab_size=len(tok))))
    with pytest.raises(HeadsimError, match="device_map= is given with a model object"):
        load_model(model, tokenizer=tok, device_map="auto")


def test_the_tokenizer_comes_from_name_or_path(tok, tmp_path):
    from transformers import BertModel

    model = BertModel(tiny_config("bert", vocab_size=len(tok)))
    tok.save_pretrained(tmp_path)
    model.config.name_or_path = str(tmp_path)
    loaded = load_model(model)
    assert loaded.tokenizer.get_vocab() == tok.get_vocab() and loaded.name == str(tmp_path)


def test_analyze_returns_the_run_load_run_returns(tok, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    peft, _, _ = _built("lora", tok)
    base = copy.deepcopy(peft.get_base_model())
    for layer in base.model.layers:  # the base without its adapter: LoRA layers unwrapped
        for name in ("q_proj", "v_proj"):
            setattr(layer.self_attn, name, getattr(layer.self_attn, name).base_layer)
        layer.self_attn.o_proj = layer.self_attn.o_proj.base_layer
    tuned = headsim.analyze(headsim.load_model(peft, tokenizer=tok), str(corpus), **RUN)
    plain = headsim.analyze(headsim.load_model(base, tokenizer=tok), str(corpus), out=tmp_path / "base", **RUN)
    assert type(tuned) is Run and tuned.path is None and len(tuned.windows) == 4
    assert type(plain) is type(headsim.load_run(plain.path)) and plain.path == tmp_path / "base"
    assert tuned.window_table(rows=2).num_rows == 2 and tuned.heads.shape == plain.heads.shape
    assert tuned.meta["model"]["object"]["adapters"][0]["rank"] == 4 and "in memory" in tuned._repr_html_()
    assert "weights fingerprint" in tuned._repr_html_() and "adapter default" in tuned._repr_html_()
    comparison = headsim.compare([plain, tuned])
    assert len(comparison.labels) == 2 and comparison.labels[1].endswith("+ LORA default")
    from headsim.report.build import build_report

    page = build_report(tuned, tmp_path / "report").read_text()
    assert "LORA default" in page and "kept in memory" in page


def test_runs_of_different_weights_refuse_to_merge_and_resume(tok, tmp_path):
    from transformers import BertModel

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    torch.manual_seed(0)
    model = BertModel(tiny_config("bert", vocab_size=len(tok))).eval()
    other = BertModel(tiny_config("bert", vocab_size=len(tok))).eval()
    settings = dict(RUN, windows=None, seq_len=16)
    for name, obj, shard in (("a", model, "1/2"), ("b", copy.deepcopy(model), "2/2"), ("c", other, "2/2")):
        headsim.analyze(headsim.load_model(obj, tokenizer=tok), str(corpus), out=tmp_path / name, shard=shard, **settings)
    merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "same")  # the same model loaded twice: accepted
    with pytest.raises(HeadsimError, match=r"the model's weights \(fingerprint\): first '[0-9a-f]{12}', this") as err:
        merge_runs([tmp_path / "a", tmp_path / "c"], tmp_path / "different")
    assert "\n" not in str(err.value)
    with pytest.raises(HeadsimError, match=r"--resume.*weights \(fingerprint\)"):
        headsim.analyze(headsim.load_model(other, tokenizer=tok), str(corpus), out=tmp_path / "a", shard="1/2",
                        resume=True, **settings)


@pytest.mark.parametrize("dtype, n", [(torch.float32, 5000), (torch.bfloat16, 3 * 1024), (torch.float16, 7),
                                      (torch.int64, 2100), (torch.bool, 1500)])
def test_the_checksums_are_their_definition(dtype, n, monkeypatch):
    """Σ x_i and Σ i·x_i (i from 1) of the bits read as integers, modulo 2^64, as Python's integers give them
    (several chunks, a partial last row)."""
    from headsim.model import objects

    monkeypatch.setattr(objects, "CHUNK", 2 * objects.WIDTH)
    t = torch.randn(n).to(dtype) if dtype != torch.int64 else torch.randint(-2**62, 2**62, (n,))
    if dtype == torch.bool:
        t = torch.rand(n) > 0.5
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    xs = (t.view(width) if dtype != torch.int64 else t).tolist()
    wrap = lambda v: (v + 2**63) % 2**64 - 2**63  # noqa: E731
    want = [wrap(sum(xs)), wrap(sum((i + 1) * x for i, x in enumerate(xs)))]
    assert objects._checksums(t).tolist() == want
