"""Head ablation (headsim.ablation): the intervention against hand computations, tasks, the CLI.

The tiny random BERT (2 layers × 4 heads, d_head 16) is recomputed layer by layer from its weights in
float64, without headsim code, to check what an ablated head does to the layer's output.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from fake_run import make_fake_run
from headsim.ablation import ablate, gates, get_tasks, head_means
from headsim.ablation.curves import curve_points, removable
from headsim.model.embed import embed, tokenize
from headsim.ablation.importance import descending, role_scores
from headsim.ablation.tasks import gensim_data_file, linear_cka, load_lee, load_polarity, load_word_pairs
from headsim.cli import run_app
from headsim.errors import HeadsimError

TEXTS = ["The red fox jumps over the fence.", "A small bird sings in the garden near the old house.", "Rain."]


def _batch(loaded, texts=TEXTS):
    enc = loaded.tokenizer(texts, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def _run(loaded, ids, mask, **kwargs):
    with torch.no_grad():
        return loaded.model(input_ids=ids, attention_mask=mask, output_hidden_states=True, **kwargs)


def _layer_by_hand(layer, x: torch.Tensor, mask: torch.Tensor, n_heads: int, edit) -> tuple[torch.Tensor, torch.Tensor]:
    """(attention block output, layer output) of one BERT layer in float64; ``edit`` changes Z [B, H, T, d]."""
    x = x.double()
    sa, so = layer.attention.self, layer.attention.output

    def lin(module, v):
        return v @ module.weight.double().T + module.bias.double()

    def heads(v):
        b, t, hd = v.shape
        return v.view(b, t, n_heads, hd // n_heads).transpose(1, 2)

    q, k, v = heads(lin(sa.query, x)), heads(lin(sa.key, x)), heads(lin(sa.value, x))
    scores = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask.bool()[:, None, None, :], float("-inf"))
    z = edit(torch.softmax(scores, -1) @ v)
    z = z.transpose(1, 2).reshape(x.shape)

    def norm(module, v):
        return torch.nn.functional.layer_norm(v, v.shape[-1:], module.weight.double(), module.bias.double(), module.eps)

    attn = norm(so.LayerNorm, lin(so.dense, z) + x)
    inner = torch.nn.functional.gelu(lin(layer.intermediate.dense, attn))
    return attn, norm(layer.output.LayerNorm, lin(layer.output.dense, inner) + attn)


# ---------------------------------------------------------------------------------------------
# The intervention
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablating_nothing_changes_nothing_bit_for_bit(tiny_bert, mode):
    ids, mask = _batch(tiny_bert)
    means = torch.randn(2, 4, 16)
    plain = _run(tiny_bert, ids, mask).last_hidden_state
    with ablate(tiny_bert, [], mode=mode, means=means if mode == "mean" else None):
        inside = _run(tiny_bert, ids, mask).last_hidden_state
    after = _run(tiny_bert, ids, mask).last_hidden_state
    assert torch.equal(plain, inside) and torch.equal(plain, after)


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("layer,head", [(0, 1), (1, 3)])
def test_ablating_a_head_equals_editing_the_output_projection_input_by_hand(tiny_bert, mode, layer, head):
    ids, mask = _batch(tiny_bert)
    means = torch.randn(2, 4, 16)
    fill = torch.zeros(16, dtype=torch.float64) if mode == "zero" else means[layer, head].double()

    def edit(z):
        z = z.clone()
        z[:, head] = fill
        return z

    plain = _run(tiny_bert, ids, mask)
    with ablate(tiny_bert, [(layer, head)], mode=mode, means=means if mode == "mean" else None):
        ablated = _run(tiny_bert, ids, mask)
    _, expected = _layer_by_hand(tiny_bert.model.encoder.layer[layer], plain.hidden_states[layer], mask, 4, edit)
    valid = mask.bool()
    got = ablated.hidden_states[layer + 1].double()
    assert torch.allclose(got[valid], expected[valid], atol=1e-5)
    assert not torch.allclose(got[valid], plain.hidden_states[layer + 1].double()[valid], atol=1e-3)
    for earlier in range(layer + 1):  # layers before the ablated one are untouched, bit for bit
        assert torch.equal(ablated.hidden_states[earlier], plain.hidden_states[earlier])


@pytest.mark.parametrize("layer", [0, 1])
def test_ablating_every_head_of_a_layer_leaves_only_the_residual_path(tiny_bert, layer):
    ids, mask = _batch(tiny_bert)
    block = tiny_bert.model.encoder.layer[layer].attention.output
    got = {}
    handle = block.register_forward_hook(lambda _m, _i, out: got.__setitem__("out", out))
    try:
        with ablate(tiny_bert, [(layer, h) for h in range(4)]):
            ablated = _run(tiny_bert, ids, mask)
    finally:
        handle.remove()
    x = ablated.hidden_states[layer].double()
    # the attention contribution is the output projection's bias alone: LayerNorm(x + bias)
    expected = torch.nn.functional.layer_norm(x + block.dense.bias.double(), x.shape[-1:], block.LayerNorm.weight.double(),
                                              block.LayerNorm.bias.double(), block.LayerNorm.eps)
    assert torch.allclose(got["out"].double(), expected, atol=1e-5)


def test_gate_gradients_match_finite_differences(tiny_bert):
    import copy

    from headsim.model.load import from_pretrained_objects

    ids, mask = _batch(tiny_bert)
    target = torch.randn(tiny_bert.model.config.hidden_size, dtype=torch.float64)
    tiny64 = from_pretrained_objects(copy.deepcopy(tiny_bert.model).double(), tiny_bert.tokenizer, "tiny64")

    def loss():
        out = tiny64.model(input_ids=ids, attention_mask=mask).last_hidden_state
        return ((out.mean((0, 1)) - target) ** 2).sum()

    with gates(tiny64) as xi:
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(loss(), xi)
        eps = 1e-4
        for layer, head in [(0, 0), (1, 2)]:
            with torch.no_grad():
                xi[layer, head] += eps
                up = float(loss())
                xi[layer, head] -= 2 * eps
                down = float(loss())
                xi[layer, head] += eps
            assert float(grad[layer, head]) == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-9)


def test_gates_at_one_and_mean_of_a_constant_head(tiny_bert):
    ids, mask = _batch(tiny_bert)
    plain = _run(tiny_bert, ids, mask).last_hidden_state
    with gates(tiny_bert):
        gated = _run(tiny_bert, ids, mask).last_hidden_state
    assert torch.allclose(gated, plain, atol=1e-6)
    means = head_means(tiny_bert, TEXTS)
    assert means.shape == (2, 4, 16)
    # independent: the mean of the captured Z over valid tokens, for layer 0 (its input is the embeddings)
    ref = []
    handle = tiny_bert.model.encoder.layer[0].attention.output.dense.register_forward_pre_hook(
        lambda _m, args: ref.append(args[0]))
    try:
        for text in TEXTS:
            ids1, mask1 = _batch(tiny_bert, [text])
            _run(tiny_bert, ids1, mask1)
    finally:
        handle.remove()
    z = torch.cat([r[0] for r in ref]).double().mean(0).view(4, 16)
    assert torch.allclose(means[0].double(), z, atol=1e-5)


def test_headsim_ablate_is_the_package_function():
    import headsim
    import headsim.ablation

    assert headsim.ablate is headsim.ablation.ablate


def test_bad_heads_and_modes_are_one_line_errors(tiny_bert):
    with pytest.raises(HeadsimError, match="layer 3, head 1"):
        with ablate(tiny_bert, [(2, 0)]):
            pass
    with pytest.raises(HeadsimError, match="mode 'mean' needs means"):
        with ablate(tiny_bert, [(0, 0)], mode="mean"):
            pass
    with pytest.raises(HeadsimError, match="unknown ablation mode"):
        with ablate(tiny_bert, [(0, 0)], mode="drop"):
            pass
    with pytest.raises(HeadsimError, match="not a \\(layer, head\\) pair"):
        with ablate(tiny_bert, [3]):
            pass


# ---------------------------------------------------------------------------------------------
# Embeddings and tasks
# ---------------------------------------------------------------------------------------------


def test_embedding_is_sentence_transformers_mean_pooling(tiny_bert_dir):
    from sentence_transformers import SentenceTransformer

    from headsim.model.load import load_model

    loaded = load_model(tiny_bert_dir, device="cpu")
    texts = TEXTS + ["A much longer sentence " * 5]
    ours = embed(loaded, tokenize(loaded, texts), batch_size=2)
    st = SentenceTransformer(str(tiny_bert_dir), device="cpu")  # no modules.json: Transformer + mean pooling
    theirs = torch.nn.functional.normalize(st.encode(texts, convert_to_tensor=True), dim=-1)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_loaders_read_the_files_in_the_standard_protocol():
    docs, ratings = load_lee()
    matrix = np.loadtxt(gensim_data_file("similarities0-1.txt", "lee"))
    assert len(docs) == 50 and ratings.shape == (1225,)
    assert ratings[0] == matrix[0, 1] and ratings[49] == matrix[1, 2] and ratings[-1] == matrix[48, 49]
    assert ratings.min() >= 0 and ratings.max() <= 1
    texts, labels = load_polarity()
    assert len(texts) == 200 and labels.sum() == 100 and not any(t.startswith("__label__") for t in texts)
    pairs, scores = load_word_pairs("wordsim353")
    assert len(pairs) == len(scores) == 353 and ("tiger", "cat") in pairs


def test_missing_data_file_is_one_clear_error():
    with pytest.raises(HeadsimError, match="task 'lee' needs 'nope.txt'") as err:
        gensim_data_file("nope.txt", "lee")
    assert "\n" not in str(err.value)
    with pytest.raises(HeadsimError, match="unknown task"):
        get_tasks(["lee", "sts"])


def test_tasks_score_the_model_as_it_runs(tiny_bert):
    from scipy.stats import spearmanr

    lee, drift = get_tasks(["lee", "drift"])
    drift.n_texts = 6
    full = lee.evaluate(tiny_bert)
    docs, ratings = load_lee()
    emb = embed(tiny_bert, tokenize(tiny_bert, docs)).double().numpy()
    cos = np.array([emb[i] @ emb[j] for i in range(50) for j in range(i + 1, 50)])
    assert full["lee_spearman"] == pytest.approx(spearmanr(cos, ratings).statistic, abs=1e-6)
    assert drift.score(tiny_bert) == pytest.approx(1.0, abs=1e-6)
    with ablate(tiny_bert, [(0, 0), (1, 1)]):
        assert lee.score(tiny_bert) != full["lee_spearman"]
        assert drift.score(tiny_bert) < 1 - 1e-6
    assert lee.score(tiny_bert) == full["lee_spearman"]


def test_a_task_refuses_to_prepare_inside_an_ablation(tiny_bert):
    (task,) = get_tasks(["lee"])
    with ablate(tiny_bert, [(0, 0)]):
        with pytest.raises(HeadsimError, match="prepared on the full model"):
            task.score(tiny_bert)


def test_linear_cka_invariances(rng):
    x = torch.as_tensor(rng.normal(size=(40, 8)))
    q, _ = torch.linalg.qr(torch.as_tensor(rng.normal(size=(8, 8))))
    assert linear_cka(x, x) == pytest.approx(1.0)
    assert linear_cka(x, 3 * x @ q + 1) == pytest.approx(1.0)  # rotation, scale and shift invariant
    assert linear_cka(x, torch.as_tensor(rng.normal(size=(40, 8)))) < 0.6


def test_curve_helpers():
    assert curve_points(72, 6, (18,)) == list(range(0, 73, 6))
    assert curve_points(8, 3, (2,)) == [0, 2, 3, 6, 8]
    points, scores = np.array([0, 2, 4, 6]), np.array([0.5, 0.49, 0.46, 0.48])
    assert removable(points, scores, 0.5, 0.02) == 2  # the curve falls below at 4: 6 does not count
    assert removable(points, scores, 0.5, 0.05) == 6
    assert list(descending(np.array([[0.1, np.nan], [0.3, 0.3]]))) == [2, 3, 0, 1]


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_bert_dir):
    run = make_fake_run(tmp_path_factory.mktemp("abl") / "run", n_layers=2, n_heads=4)
    meta = json.loads((run / "run.json").read_text())
    meta["model"]["source"] = str(tiny_bert_dir)
    (run / "run.json").write_text(json.dumps(meta))
    return run


def test_cli_ablate_on_a_tiny_model(tiny_bert_dir, tiny_run, tmp_path, capsys):
    from headsim.model.load import load_model

    out = tiny_run / "ablation"  # where the report looks for a study
    code = run_app(["ablate", "--model", str(tiny_bert_dir), "--run", str(tiny_run), "--out", str(out),
                    "--tasks", "lee", "--draws", "6", "--curve-orders", "2", "--step", "2"])
    assert code == 0, capsys.readouterr()
    meta = json.loads((out / "ablation.json").read_text())
    assert {p.name for p in out.iterdir()} >= {"ablation.json", "heads.parquet", "groups.parquet", "curves.parquet",
                                               "ablation_heads.png", "ablation_groups.png", "ablation_curves.png"}
    heads, groups, curves = (pd.read_parquet(out / f) for f in ("heads.parquet", "groups.parquet", "curves.parquet"))
    assert meta["group_size"] == 2 and meta["curve_points"] == [0, 2, 4, 6, 8]
    assert list(zip(heads["layer"], heads["head"])) == [(layer, h) for layer in (1, 2) for h in (1, 2, 3, 4)]
    assert groups["kind"].value_counts().to_dict() == {"head": 8, "random": 6, "layer": 2, "role": 4, "full": 1}

    # every number is the task's score under the same ablation, recomputed here
    loaded = load_model(tiny_bert_dir, device="cpu")
    (lee,) = get_tasks(["lee"])
    full = lee.score(loaded)
    assert meta["summary"]["full"]["lee_spearman"] == pytest.approx(full, abs=1e-9)
    with ablate(loaded, [(1, h) for h in range(4)]):
        assert groups.set_index("group").loc["layer 2", "lee_spearman"] == pytest.approx(lee.score(loaded), abs=1e-9)
    with ablate(loaded, [(0, 2)]):
        assert heads["delta_lee_spearman"][2] == pytest.approx(lee.score(loaded) - full, abs=1e-9)

    # the role group is the top of heads.parquet's measure; curves start at the full model and end with no head
    roles = role_scores(pd.read_parquet(tiny_run / "heads.parquet"), 2, 4)
    top = sorted(descending(roles["repetition"])[:2])
    assert groups.set_index("group").loc["repetition", "heads"] == " ".join(f"{i // 4 + 1}.{i % 4 + 1}" for i in top)
    for _, curve in curves.groupby(["criterion", "draw"]):
        assert curve["lee_spearman"].iloc[0] == pytest.approx(full, abs=1e-9)
        assert curve["heads"].iloc[-1].count(".") == 8
    assert set(curves["criterion"]) == {"single-head ablation", "gradient importance", "random",
                                        "role: repetition", "role: same_sentence", "role: long_range", "role: anchor"}
    s = meta["summary"]
    assert s["random"]["draws"] == 6 and s["random"]["p2.5"] <= s["random"]["mean"] <= s["random"]["p97.5"]
    assert "results:" in capsys.readouterr().out
    from headsim.ablation.study import resummarize  # the summary and figures again from the tables alone

    resummarize(out)
    assert json.loads((out / "ablation.json").read_text())["summary"] == meta["summary"]


def test_report_shows_the_study_of_a_run(tiny_run, tmp_path):
    from headsim.report.build import build_report

    if not (tiny_run / "ablation" / "ablation.json").is_file():
        pytest.skip("needs the study written by test_cli_ablate_on_a_tiny_model")
    page = build_report(tiny_run, tmp_path / "report", dpi=40).read_text()
    assert 'id="ablation"' in page and "random groups (6 draws)" in page
    assert (tmp_path / "report" / "ablation" / "ablation_curves.png").is_file()
    from headsim.ablation.report import report_section

    assert report_section(make_fake_run(tmp_path / "bare", n_layers=2, n_heads=4), tmp_path / "bare-report") is None


def test_cli_ablate_refuses_bad_input(tiny_bert_dir, tiny_run, tmp_path, capsys):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    assert run_app(["ablate", "--model", str(tiny_bert_dir), "--out", str(occupied), "--tasks", "lee"]) == 2
    assert "not an ablation study" in capsys.readouterr().err and (occupied / "keep.txt").exists()
    other = make_fake_run(tmp_path / "other-run", n_layers=2, n_heads=4)  # made with another model
    assert run_app(["ablate", "--model", str(tiny_bert_dir), "--run", str(other), "--out", str(tmp_path / "o"),
                    "--tasks", "lee"]) == 2
    assert "was made with model" in capsys.readouterr().err
    assert run_app(["ablate", "--model", str(tiny_bert_dir), "--out", str(tmp_path / "o"), "--draws", "0"]) == 2
    assert "draws 0" in capsys.readouterr().err


@pytest.mark.parametrize("model_type", ["llama", "albert"])
def test_ablation_acts_at_its_own_layer_in_any_family(model_type):
    """Through the tap, in a grouped-query decoder and in ALBERT (one layer module reused at every
    depth): the ablated heads' Z is zero at the ablated depth only, other heads and depths untouched,
    and nothing ablated changes nothing bit for bit."""
    from headsim.model.tap import capture, hidden_states
    from headsim.model.verify import random_batch, tiny_model
    from headsim.model.load import from_pretrained_objects

    loaded = from_pretrained_objects(tiny_model(model_type)[0], None, model_type)
    ids, mask = random_batch()
    base = capture(loaded, ids, mask, attention=False)["head_outputs"]
    with ablate(loaded, heads=[]):
        assert torch.equal(capture(loaded, ids, mask, attention=False)["head_outputs"], base)
    with ablate(loaded, heads=[(0, 1), (0, 3)]):
        got = capture(loaded, ids, mask, attention=False)["head_outputs"]
        changed = hidden_states(loaded, ids, mask)
    assert float(got[:, 0, [1, 3]].abs().max()) == 0.0
    torch.testing.assert_close(got[:, 0, [0, 2]], base[:, 0, [0, 2]], rtol=0, atol=0)
    assert float((got[:, 1] - base[:, 1]).abs().max()) > 1e-4  # the next layer sees the change
    assert float(base[:, 1].abs().max()) > 0 and float(got[:, 1].abs().max()) > 0
    assert not torch.allclose(changed, hidden_states(loaded, ids, mask))


def test_an_encoder_decoders_study_ablates_its_encoder_and_says_why():
    """The tasks score the encoder's output, which no decoder head reaches (ablating every decoder
    head leaves it bit for bit): the study ablates the encoder's heads alone and names what it left out."""
    from headsim.ablation.study import ablated_stacks
    from headsim.model.tap import hidden_states
    from headsim.model.verify import random_batch, tiny_model
    from headsim.model.load import from_pretrained_objects

    with pytest.warns(UserWarning, match="encoder-decoder"):
        loaded = from_pretrained_objects(tiny_model("bart")[0], None, "bart")
    view, why = ablated_stacks(loaded)
    assert loaded.n_layers == 6 and view.n_layers == 2 and view.analysed.startswith("the encoder of")
    assert why.startswith("BartModel (bart) is an encoder-decoder") and "2 decoder layers are left out" in why
    ids, mask = random_batch()
    base = hidden_states(view, ids, mask)
    with ablate(loaded, [(layer, h) for layer in range(2, 6) for h in range(4)]):
        assert torch.equal(hidden_states(loaded, ids, mask), base)
    with ablate(view, [(1, 2)]):
        assert float((hidden_states(view, ids, mask) - base).abs().max()) > 1e-4
    bert = from_pretrained_objects(tiny_model("bert")[0], None, "bert")
    assert ablated_stacks(bert) == (bert, None)


def test_same_sentence_role_is_the_heads_table_excess():
    """The same_sentence role ranks heads by the one heads-table column the explorer shows too
    (p_same_sentence - p_same_sentence_chance), NaN kept where a head has no pairs."""
    from headsim.stats.tables import same_sentence_excess

    rng = np.random.default_rng(3)
    heads = pd.DataFrame({"layer": np.repeat([1, 2], 3), "head": np.tile([1, 2, 3], 2), "p_repeat": rng.random(6),
                          "p_same_sentence": rng.random(6), "p_same_sentence_chance": 0.25,
                          "mean_distance": rng.random(6), "anchor_fraction_mean": rng.random(6)})
    heads.loc[4, "p_same_sentence"] = np.nan
    want = np.array([v - 0.25 for v in heads["p_same_sentence"]]).reshape(2, 3)
    np.testing.assert_array_equal(role_scores(heads.iloc[::-1], 2, 3)["same_sentence"], want)
    np.testing.assert_array_equal(same_sentence_excess(heads).to_numpy().reshape(2, 3), want)
