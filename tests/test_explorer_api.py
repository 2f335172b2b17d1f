"""The explorer's JSON API and server plumbing (FastAPI TestClient; a tiny random model)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # TestClient

from fastapi.testclient import TestClient  # noqa: E402

from headsim.errors import HeadsimError  # noqa: E402
from headsim.explorer import api  # noqa: E402
from headsim.explorer.app import STATIC, create_app  # noqa: E402
from headsim.extraction import extract  # noqa: E402
from headsim.context_similarity import similarity  # noqa: E402
from headsim.views import block_average, block_ids, column_scores, separator_columns  # noqa: E402

TEXT = ("The cat sat on the mat. The dog sat on the log. Cats and dogs are friends, "
        "and the cat likes the dog because the dog is kind.")
SEQ = 16  # several windows from a short text
BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def tiny():
    """A 2-layer, 4-head random BERT with the embedded model's tokenizer (plumbing only)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from headsim.model.load import default_model_dir, from_pretrained_objects

    tok = AutoTokenizer.from_pretrained(default_model_dir(), local_files_only=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128)
    return from_pretrained_objects(BertModel(cfg), tok, "tiny")


def make_run(root: Path, n_layers: int, n_heads: int, tokenizer=None, *, name: str = "tiny",
             source: str | None = None) -> Path:
    """A finished run directory (written through RunDir, as analyze writes one) with random head
    statistics, a distance histogram and two windows (of ``tokenizer``'s text, else fixed ids)."""
    import xarray as xr

    from fake_run import run_meta, write_run

    rng = np.random.default_rng(0)
    rows = []
    for layer in range(1, n_layers + 1):
        for head in range(1, n_heads + 1):
            rows.append({"layer": layer, "head": head, "n_pairs": int(rng.integers(10, 1000)),
                         "p_repeat": float(rng.random()), "p_repeat_same_sentence": float(rng.random()),
                         "p_same_sentence": float(rng.random()), "p_same_sentence_chance": 0.3,
                         "mean_distance": float(rng.uniform(1, 20)), "median_distance": float(rng.uniform(1, 20)),
                         "anchor_fraction_mean": float(rng.random()), "attn_cls": float(rng.random()),
                         "attn_sep": float(rng.random()), "attn_punct": float(rng.random()),
                         "attn_prev": float(rng.random()), "attn_next": float(rng.random())})
    heads = pd.DataFrame(rows)
    heads.loc[0, "p_repeat"] = np.nan  # a head with no pairs: NaN must become JSON null
    hist = rng.integers(0, 100, size=(n_layers, n_heads, 15)).astype(np.float64)
    ds = xr.Dataset({"distance_hist": (("layer", "head", "distance"), hist)},
                    coords={"layer": np.arange(1, n_layers + 1), "head": np.arange(1, n_heads + 1),
                            "distance": np.arange(1, 16)})
    if tokenizer is not None:
        enc = tokenizer(["the quick brown fox jumps over the lazy dog.", "a second window of the run."],
                        padding="max_length", max_length=16, truncation=True)
        windows = pd.DataFrame({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    else:
        windows = pd.DataFrame({"input_ids": [[101, 2000, 102, 0]] * 2, "attention_mask": [[1, 1, 1, 0]] * 2})
    layers = pd.DataFrame({"layer": np.arange(1, n_layers + 1)})
    meta = run_meta(n_layers, n_heads, len(windows), 16, 0.3, 3, name=name, source=source)
    return write_run(root, ds, windows, meta, heads, layers)


@pytest.fixture(scope="module")
def client(tiny):
    app = create_app(tiny, max_text_bytes=2000)
    with TestClient(app, base_url=BASE) as c:
        yield c


@pytest.fixture(scope="module")
def run_client(tiny, tmp_path_factory):
    root = make_run(tmp_path_factory.mktemp("run") / "wiki", 2, 4, tiny.tokenizer)
    with TestClient(create_app(tiny, root), base_url=BASE) as c:
        yield c


@pytest.fixture(scope="module")
def reference(tiny):
    return extract(TEXT, tiny, seq_len=SEQ)


def analyze(c, text=TEXT, **kw):
    r = c.post("/api/analyze", json={"text": text, "seq_len": SEQ, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def assert_error(r, status: int, pattern: str = ""):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) >= {"error", "fix"}, body
    if pattern:
        assert re.search(pattern, body["error"]), body
    return body


# ---------------------------------------------------------------------------------------------
# the happy path: analyse → heads → one head, equal to the core


def test_analyze_matches_extraction(client, tiny, reference):
    assert reference.n_windows >= 2
    for w in range(reference.n_windows):
        d = analyze(client, window=w)
        n = int(reference.attention_mask[w].sum())
        assert d["window"] == w and d["n_windows"] == reference.n_windows and d["n_tokens"] == n
        assert d["tokens"] == reference.tokens[w][:n]
        assert d["model"]["n_layers"] == 2 and d["model"]["n_heads"] == 4 and d["model"]["d_head"] == 8
        assert d["id"] == api.analysis_id(TEXT, SEQ)
        assert d["special"][0] and d["special"][n - 1] and not any(d["special"][1:n - 1])
        # offsets point into the returned window text
        for k in range(1, n - 1):
            s, e = d["offsets"][k]
            assert d["text"][s:e].lower() == d["tokens"][k].removeprefix("##")
        # per-head counts equal the core similarity mask at the threshold
        sim = similarity(reference.head_outputs[w][:, :, :n], 0.3)
        iu = np.triu_indices(n, k=1)
        expected = sim.mask[..., iu[0], iu[1]].sum(-1)
        np.testing.assert_array_equal(np.array(d["heads"]["n_high"]), expected)
        counts = np.array(d["heads"]["high_counts"])
        assert counts.shape == (2, 4, api.COUNT_STEPS + 1)
        np.testing.assert_array_equal(counts[..., 30], expected)
        assert (np.diff(counts, axis=-1) <= 0).all()
        thumbs = np.array(d["thumbnails"]["similarity"])
        assert thumbs.shape == (2, 4, min(n, api.THUMB_SIZE) ** 2) and thumbs.min() >= 0 and thumbs.max() <= 100
        assert np.array(d["heads"]["attn_prev"]).shape == (2, 4)


def test_head_payload_equals_core(client, tiny, reference):
    w, layer, head = 1, 2, 3  # 1-based layer and head
    d = analyze(client, window=w)
    r = client.post("/api/head", json={"id": d["id"], "window": w, "layer": layer, "head": head})
    assert r.status_code == 200, r.text
    h = r.json()
    n = int(reference.attention_mask[w].sum())
    attn = np.array(h["attention"])
    sim = np.array(h["similarity"])
    assert attn.shape == sim.shape == (n, n) and h["n_tokens"] == n and h["tokens"] == reference.tokens[w][:n]
    assert (h["layer"], h["head"], h["window"]) == (layer, head, w)
    np.testing.assert_allclose(attn, reference.attention[w, layer - 1, head - 1, :n, :n], atol=2e-4)
    expected = similarity(reference.head_outputs[w][:, :, :n], 0.3, kind="dot").normalized[layer - 1, head - 1]
    np.testing.assert_allclose(sim, expected, atol=2e-4)
    # separators and blocks: headsim.views on the same attention (last layer by default)
    sep = h["separators"]
    assert sep["layer"] == 2 and sep["threshold"] == 0.5
    special = np.zeros(n, dtype=bool)
    special[[0, n - 1]] = True
    valid = np.ones(n, dtype=bool)
    a_last = reference.attention[w, 1, :, :n, :n]
    np.testing.assert_allclose(sep["scores"], column_scores(a_last, valid, exclude=special), atol=2e-4)
    seps = separator_columns(a_last, valid, 0.5, exclude=special)
    assert sep["columns"] == seps.tolist()
    assert sep["blocks"] == block_ids(seps, valid).tolist()
    np.testing.assert_allclose(sep["block_average"], block_average(expected, block_ids(seps, valid)), atol=2e-4)


@pytest.fixture(scope="module", params=["bert", "llama"])
def any_model(request, tiny, tiny_llama_pair):
    """The explorer's tiny BERT, and a tiny causal Llama (BOS framing, no closing token)."""
    return tiny if request.param == "bert" else tiny_llama_pair[0]


def test_explorer_shows_what_inspect_shows(any_model):
    """The same text, window and head through the explorer's endpoints and through `inspect_text`: one
    TextView behind both, so every number agrees (to the payloads' rounding)."""
    from headsim.inspection import inspect_text

    layer, head, w = 2, 3, 1
    ins = inspect_text(TEXT, any_model, layer=layer, head=head, threshold=0.3, sep_layer=1, seq_len=SEQ, window=w)
    with TestClient(create_app(any_model), base_url=BASE) as c:
        d = analyze(c, window=w)
        h = c.post("/api/head", json={"id": d["id"], "window": w, "layer": layer, "head": head, "sep_layer": 1}).json()
    n = ins.valid_len
    assert d["tokens"] == h["tokens"] == ins.tokens and d["n_windows"] == ins.meta["windows"] and d["n_tokens"] == n
    assert d["special"] == ins.view.special.tolist() and d["special"][0] and not any(d["special"][1:-1])
    assert d["special"][-1] == (not any_model.arch.causal)  # [SEP] closes an encoder's window, nothing a decoder's
    zero = f"({any_model.tokenizer.convert_ids_to_tokens(int(any_model.framing.open))} = 0)"  # the model's own opener, not [CLS] by rule
    assert d["numbering"].endswith(zero) and h["numbering"].endswith(zero)
    np.testing.assert_array_equal(d["heads"]["n_high"], np.triu(ins.mask, 1).sum(axis=(-1, -2)))
    pairs = ins.pairs.groupby(["layer", "head"]).size()
    assert all(d["heads"]["n_high"][li - 1][hi - 1] == k for (li, hi), k in pairs.items())
    for key, value in ins.view.focus.items():
        np.testing.assert_allclose(d["heads"][key], value, atol=1e-4, err_msg=key)
    np.testing.assert_allclose(h["attention"], ins.attention[layer - 1, head - 1], atol=1e-4)
    np.testing.assert_allclose(h["similarity"], ins.normalized[layer - 1, head - 1], atol=1e-4)
    sep = h["separators"]
    np.testing.assert_allclose(sep["scores"], ins.column_scores, atol=1e-4)
    assert sep["columns"] == ins.meta["separators"] == ins.separators.tolist()
    assert sep["blocks"] == ins.blocks.tolist()
    if any_model.arch.causal:
        assert np.abs(np.triu(np.array(h["attention"]), 1)).max() == 0
        assert not any(map(any, d["heads"]["attn_next"]))


def test_head_by_get_text_and_options(client, reference):
    d = analyze(client)
    by_id = client.get("/api/head", params={"id": d["id"], "layer": 1, "head": 1}).json()
    by_text = client.post("/api/head", json={"text": TEXT, "seq_len": SEQ, "layer": 1, "head": 1}).json()
    assert by_id["similarity"] == by_text["similarity"] and by_id["attention"] == by_text["attention"]
    other = client.post("/api/head", json={"id": d["id"], "layer": 1, "head": 1, "sep_layer": 1, "sep_threshold": 0.2}).json()
    assert other["separators"]["layer"] == 1 and other["separators"]["threshold"] == 0.2


def test_cache_avoids_rerunning_the_model(tiny):
    app = create_app(tiny, cache_windows=2)
    state = app.state.explorer
    with TestClient(app, base_url=BASE) as c:
        d = analyze(c)
        assert state.model_runs == 1
        for layer in (1, 2):
            for head in (1, 2, 3, 4):
                assert c.post("/api/head", json={"id": d["id"], "layer": layer, "head": head}).status_code == 200
        analyze(c)
        assert state.model_runs == 1  # clicking heads and re-analysing the same text reuse the extraction
        analyze(c, window=1)
        analyze(c, window=2)
        assert state.model_runs == 3
        analyze(c)  # window 0 was evicted (cache of 2 windows)
        assert state.model_runs == 4
        assert len(state.results) == 2


def test_concurrent_requests(tiny):
    app = create_app(tiny)
    with TestClient(app, base_url=BASE) as c:
        texts = [f"Sentence number {i}. It talks about item {i} and item {i}." for i in range(6)]

        def go(t):
            d = c.post("/api/analyze", json={"text": t, "seq_len": SEQ}).json()
            h = c.post("/api/head", json={"id": d["id"], "layer": 2, "head": 1}).json()
            return d["tokens"], h["similarity"]

        with ThreadPoolExecutor(6) as pool:
            got = list(pool.map(go, texts * 2))
        for k, t in enumerate(texts):
            assert got[k] == got[k + len(texts)]
            ref = extract(t, tiny, seq_len=SEQ)
            assert got[k][0] == ref.tokens[0][: len(got[k][0])]


# ---------------------------------------------------------------------------------------------
# errors: 404, 413, 422, 500 — and the server keeps serving


def test_text_too_large_413(client):
    r = client.post("/api/analyze", json={"text": "word " * 500})  # 2,500 bytes > 2,000
    body = assert_error(r, 413, r"2,500 bytes, above this server's limit of 2,000")
    assert "--max-text-kb" in body["fix"]
    assert_error(client.post("/api/head", json={"text": "é" * 1500, "layer": 1, "head": 1}), 413)
    assert_error(client.get("/api/head", params={"text": "x" * 2500, "layer": 1, "head": 1}), 413)
    # a body far above the limit is refused before it is parsed
    r = client.post("/api/analyze", content=b'{"text": "' + b"a" * 200_000 + b'"}',
                    headers={"content-type": "application/json"})
    assert_error(r, 413, "request body")


@pytest.mark.parametrize("body, pattern", [
    ({}, r"text: Field required"),
    ({"text": 3}, r"text: Input should be a valid string"),
    ({"text": "hi", "seq_len": "long"}, r"seq_len"),
    ({"text": "hi", "model": "bert-base-uncased"}, r"model: Extra inputs are not permitted"),
    ({"text": "hi", "path": "/etc/passwd"}, r"path: Extra inputs"),
    ({"text": "   "}, r"^the text is empty or whitespace only$"),
    ({"text": "hi", "seq_len": 3}, r"^seq_len 3 is outside 8\.\.128$"),
    ({"text": "hi", "window": 5}, r"^window 5 does not exist$"),
    ({"text": "hi", "threshold": 0}, r"threshold 0"),
])
def test_analyze_422(client, body, pattern):
    assert_error(client.post("/api/analyze", json=body), 422, pattern)


def test_malformed_json_422(client):
    r = client.post("/api/analyze", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(r, 422, "malformed request")


def test_head_errors_match_cli(client):
    d = analyze(client)
    body = assert_error(client.post("/api/head", json={"id": d["id"], "layer": 3, "head": 1}), 422, r"^layer 3 is out of range$")
    assert body["fix"] == "this model has layers 1..2 (numbered from 1)"  # the CLI's message
    assert_error(client.post("/api/head", json={"id": d["id"], "layer": 1, "head": 0}), 422, r"^head 0 is out of range$")
    assert_error(client.post("/api/head", json={"id": d["id"], "layer": 1, "head": 1, "sep_threshold": 2}), 422,
                 r"separator threshold 2")
    assert_error(client.post("/api/head", json={"layer": 1, "head": 1}), 422, "neither id nor text")
    assert_error(client.post("/api/head", json={"id": "../../etc/passwd", "layer": 1, "head": 1}), 422, "id")
    body = assert_error(client.post("/api/head", json={"id": "0" * 16, "layer": 1, "head": 1}), 404, "not in the server's cache")
    assert "/api/analyze" in body["fix"]
    assert_error(client.get("/api/head", params={"layer": "x", "head": 1, "id": d["id"]}), 422, "layer")


def test_no_run_404(client):
    body = assert_error(client.get("/api/heads"), 404, "no run is loaded")
    assert "--run" in body["fix"]
    assert_error(client.get("/api/heads/1/1"), 404, "no run is loaded")
    assert_error(client.get("/api/nothing-here"), 404)


def test_server_survives_a_failing_request(tiny, monkeypatch):
    app = create_app(tiny)
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        calls = {"n": 0}
        real = api.compute_window

        def flaky(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("CUDA out of memory (simulated)")
            return real(*args, **kwargs)

        monkeypatch.setattr(api, "compute_window", flaky)
        r = c.post("/api/analyze", json={"text": TEXT, "seq_len": SEQ})
        body = assert_error(r, 500, "internal error")
        assert "simulated" in body["error"]
        assert not app.state.explorer.model_lock.locked()  # the lock was released
        assert c.post("/api/analyze", json={"text": "   "}).status_code == 422
        assert analyze(c)["n_tokens"] > 0  # and the next request works
        assert c.get("/api/info").status_code == 200


# ---------------------------------------------------------------------------------------------
# runs


def test_run_heads_profile_examples(run_client, tiny, tmp_path):
    heads = run_client.get("/api/heads").json()
    assert heads["n_layers"] == 2 and heads["n_heads"] == 4 and len(heads["rows"]) == 8
    assert heads["rows"][0]["p_repeat"] is None  # NaN → null
    assert "p_same_sentence_excess" in heads["columns"]
    for r in heads["rows"]:  # the heads-table column, as the ablation's same_sentence role reads it
        assert r["p_same_sentence_excess"] == pytest.approx(r["p_same_sentence"] - 0.3)
    prof = run_client.get("/api/heads/2/3").json()
    table = pd.read_parquet(Path(run_client.app.state.explorer.run.path) / "heads.parquet")
    row = table[(table["layer"] == 2) & (table["head"] == 3)].iloc[0]
    assert prof["stats"]["mean_distance"] == pytest.approx(row["mean_distance"])
    assert prof["distance_hist"]["distance"] == list(range(1, 16)) and len(prof["distance_hist"]["count"]) == 15
    import xarray as xr

    with xr.open_dataset(Path(run_client.app.state.explorer.run.path) / "stats.nc") as ds:
        np.testing.assert_array_equal(prof["distance_hist"]["count"], ds["distance_hist"].sel(layer=2, head=3).values)
    assert 1 <= prof["ranks"]["p_repeat_same_sentence"] <= 8
    assert_error(run_client.get("/api/heads/3/1"), 422, r"^layer 3 is out of range$")
    examples = run_client.get("/api/examples").json()["examples"]
    run_ex = [e for e in examples if e["source"] == "run"]
    assert [e["text"] for e in run_ex] == ["the quick brown fox jumps over the lazy dog.", "a second window of the run."]
    info = run_client.get("/api/info").json()
    assert info["run"]["name"] == "wiki" and "p_repeat" in info["run"]["stats"]


def test_run_json_warnings(tiny, tmp_path):
    root = make_run(tmp_path / "other-model", 2, 4, name="bert-base-uncased")
    with TestClient(create_app(tiny, root), base_url=BASE) as c:
        run = c.get("/api/info").json()["run"]
    assert run["model"] == "bert-base-uncased"
    assert any("'bert-base-uncased' but the server runs 'tiny'" in w for w in run["warnings"])


def test_serve_run_uses_the_runs_model(monkeypatch, tiny, tmp_path, capsys):
    """`headsim serve --run RUN` without --model loads the model the run recorded (run.json model.source);
    --model still overrides it."""
    from headsim.cli import run_app
    from headsim.explorer import app as explorer_app

    saved = tmp_path / "tiny-model"
    tiny.model.save_pretrained(saved)
    tiny.tokenizer.save_pretrained(saved)
    root = make_run(tmp_path / "run", 2, 4, name="tiny", source=str(saved))
    app = create_app(None, root)
    assert app.state.explorer.loaded.n_layers == 2 and str(app.state.explorer.loaded.source) == str(saved)
    assert not app.state.explorer.run.warnings
    seen = []
    monkeypatch.setattr(explorer_app, "create_app", lambda model, run, **kw: seen.append(model) or app)
    monkeypatch.setattr("uvicorn.run", lambda *a, **kw: None)
    assert run_app(["serve", "--run", str(root), "--port", "8765"]) == 0
    assert run_app(["serve", "--run", str(root), "--model", "default", "--port", "8765"]) == 0
    assert run_app(["serve", "--port", "8765"]) == 0
    assert seen == [None, "default", "default"]
    with pytest.raises(HeadsimError, match="no model given"):
        create_app(None)


def test_bad_runs_fail_at_start(tiny, tmp_path):
    with pytest.raises(HeadsimError, match="does not exist"):
        create_app(tiny, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HeadsimError, match="is not a headsim run"):
        create_app(tiny, tmp_path / "empty")
    with pytest.raises(HeadsimError, match=r"2 layers × 3 heads but model 'tiny' has 2 × 4"):
        create_app(tiny, make_run(tmp_path / "other", 2, 3))


# ---------------------------------------------------------------------------------------------
# the page, its assets, docs and headers


def test_page_is_offline(client):
    r = client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    html = r.text
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(ref.startswith("/") for ref in refs), refs
    for ref in refs:
        assert client.get(ref).status_code == 200, ref
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    # no script, style or font from elsewhere anywhere in the shipped page code
    modules = sorted(p.name for p in STATIC.glob("*.js"))
    assert "main.js" in modules and "plots.js" in modules, modules
    for name in ("index.html", "style.css", *modules):
        text = (STATIC / name).read_text(encoding="utf-8")
        assert not re.search(r"(?:src=|href=|url\(|import\s.*from\s|@import)\s*['\"]?(?:https?:)?//", text), name
        for dep in re.findall(r"from '\./([\w/.-]+)'", text):  # every module the page imports is served
            assert client.get(f"/static/{dep}").status_code == 200, (name, dep)
    vendor = (STATIC / "VENDOR.md").read_text(encoding="utf-8")
    assert "plotly.js-dist-min" in vendor and "MIT" in vendor
    assert (STATIC / "vendor" / "plotly.min.js").stat().st_size > 1_000_000


def test_docs_and_openapi_are_local(client):
    r = client.get("/docs")
    assert r.status_code == 200
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in r.text and "cdn.jsdelivr" not in r.text
    assert "https://" not in r.text and "http://" not in r.text and '"validatorUrl": null' in r.text
    spec = client.get("/openapi.json").json()
    paths = {"/api/analyze", "/api/head", "/api/heads", "/api/examples", "/api/info", "/api/heads/{layer}/{head}"}
    assert paths <= set(spec["paths"])
    assert set(spec["paths"]["/api/head"]) == {"get", "post"}
    assert "413" in spec["paths"]["/api/analyze"]["post"]["responses"]


def test_examples_builtin(client):
    from headsim.inspection import EXAMPLES, example_text

    ex = client.get("/api/examples").json()["examples"]
    assert [e["id"] for e in ex] == [f"example:{n}" for n in EXAMPLES]
    assert ex[0]["text"] == example_text(EXAMPLES[0])


def test_trusted_hosts(tiny):
    app = create_app(tiny, allowed_hosts=("127.0.0.1", "localhost"))
    with TestClient(app, base_url=BASE) as c:
        assert c.get("/api/info").status_code == 200
        assert c.get("/api/info", headers={"host": "attacker.example"}).status_code == 400


# ---------------------------------------------------------------------------------------------
# pure helpers


def test_pool_and_counts():
    m = np.arange(100, dtype=np.float32).reshape(10, 10)
    assert api.pool_max(m, 20) is m
    pooled = api.pool_max(m, 5)
    assert pooled.shape == (5, 5) and pooled[0, 0] == 11 and pooled[-1, -1] == 99
    norm = np.array([[[[0, 0.5, 0.25], [0.5, 0, 1.0], [0.25, 1.0, 0]]]], dtype=np.float32)
    counts = api.high_counts(norm, steps=4)  # edges 0, .25, .5, .75, 1
    assert counts.tolist() == [[[3, 2, 1, 1, 0]]]


def test_text_size_counts_bytes():
    api.check_text_size("é" * 50, 100)
    with pytest.raises(HeadsimError) as err:
        api.check_text_size("é" * 51, 100)
    assert err.value.status == 413


# ---------------------------------------------------------------------------------------------
# the command


def test_serve_command(monkeypatch, tiny, capsys):
    import headsim.cli.serve as serve_mod
    from headsim.cli import run_app
    from headsim.explorer import app as explorer_app

    assert run_app(["serve", "--port", "70000"]) == 2
    assert "outside 1..65535" in capsys.readouterr().err

    seen = {}
    real_create = explorer_app.create_app
    monkeypatch.setattr(explorer_app, "create_app", lambda model, run, **kw: seen.update(kw) or real_create(tiny, run, **kw))
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: seen.update(run=kw))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert run_app(["serve", "--port", str(port), "--max-text-kb", "7"]) == 0
    out = capsys.readouterr()
    assert f"http://127.0.0.1:{port}/" in out.out and "warning" not in out.err
    assert seen["run"]["host"] == "127.0.0.1" and seen["run"]["port"] == port
    assert seen["max_text_bytes"] == 7000 and seen["allowed_hosts"] == explorer_app.LOOPBACK_HOSTS

    assert run_app(["serve", "--host", "0.0.0.0", "--port", str(port)]) == 0
    out = capsys.readouterr()
    assert "warning" in out.err and "0.0.0.0" in out.err and seen["allowed_hosts"] is None
    assert serve_mod.page_url("::", 8000) == "http://[::1]:8000/"
    assert serve_mod.is_loopback("localhost") and serve_mod.is_loopback("::1") and not serve_mod.is_loopback("0.0.0.0")

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert run_app(["serve", "--port", str(taken)]) == 2
        assert "already in use" in capsys.readouterr().err
