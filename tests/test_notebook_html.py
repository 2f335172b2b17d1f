"""Notebook displays and standalone HTML (issue: rich displays, export): every display is
self-contained, the head explorer's payload round-trips to the view's numbers, the example notebook
executes and its nbconvert page works offline in headless Chromium, as does ``headsim export``."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

import headsim
from fake_run import make_fake_run
from headsim.cli import run_app
from headsim.segmentation import Segment, Segmentation
from headsim.views.html.heads import SIMILARITY_STEPS, explorer_payload, similarity_levels

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "examples" / "quickstart.ipynb"
TEXT = "The cat sat on the mat. The dog sat on the cat. Then the dog ran away."


def assert_self_contained(html: str) -> None:
    """Nothing in ``html`` makes the browser load anything: no src/href other than data: or a fragment,
    no <link>, no CSS import or url() of a file, no http(s) URL in a loading position."""
    loads = re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]+)""", html)
    assert all(u.startswith(("data:", "#")) for u in loads), [u[:80] for u in loads if not u.startswith(("data:", "#"))]
    assert not re.search(r"<link\b", html, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(?!data:|#)", html)
    assert not re.search(r"""(?:fetch|import)\s*\(\s*['"`]https?:""", html)
    assert "<script src" not in html


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return make_fake_run(root / "a"), make_fake_run(root / "b", n_layers=4, seed=1)


def test_run_comparison_ablation_segmentation_displays(runs, tmp_path):
    run = headsim.load_run(runs[0])
    run.meta["model"]["revision"] = "0123abcd" * 5  # as run.json records the exact revision where known
    objects = {
        "run": run,
        "comparison": headsim.compare(list(runs)),
        "ablation": headsim.load_ablation(ROOT / "docs" / "ablation-minilm"),
        "segmentation": Segmentation([Segment(0, 12, "One. Two.\n\n"), Segment(12, 18, "Three.")], "One. Two.\n\nThree.",
                                     unit_spans=[(0, 4), (5, 9), (12, 18)], scores=np.array([0.1, 0.9]), level="topic"),
    }
    shown = {name: obj._repr_html_() for name, obj in objects.items()}
    for name, html in shown.items():
        assert_self_contained(html)
        assert "<svg" in html, name  # its figures inline
    page = objects["segmentation"].to_html(tmp_path / "segmentation.html").read_text()  # the same fragment, in a page
    assert page.startswith("<!doctype html>") and shown["segmentation"].split("<svg")[0] in page and "<svg" in page
    assert "0123abcd" * 5 in shown["run"]
    assert shown["segmentation"].count('class="hsv-seg-mark"') == 2 and "Three." in shown["segmentation"]
    assert ">a<" in shown["comparison"] and ">b<" in shown["comparison"]


def _unpack(b64: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(b64)), dtype=np.uint8)


def _levels(payload: dict) -> np.ndarray:
    """``[L, H, n(n-1)/2]`` similarity levels of a payload (one zlib chunk a head)."""
    return np.stack([_unpack(c) for c in payload["similarity"]["heads"]]).reshape(payload["L"], payload["H"], -1)


def _attention(payload: dict) -> np.ndarray:
    """``[L, H, n, n]`` √attention levels of a payload (nibbles, one chunk a head)."""
    L, H, n = payload["L"], payload["H"], payload["n"]
    heads = []
    for c in payload["attention"]["heads"]:
        packed = _unpack(c)
        heads.append(np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[:n * n])
    return np.stack(heads).reshape(L, H, n, n)


def test_similarity_levels_give_every_slider_mask_exactly():
    s = np.random.default_rng(0).uniform(-0.5, 1, size=(2, 3, 40, 40)).astype(np.float32)
    s[0, 0, 1, 2] = 1.0
    q = similarity_levels(s)
    for k in range(1, SIMILARITY_STEPS + 1):
        assert np.array_equal(q >= k, s > np.float32(k / SIMILARITY_STEPS)), k


def test_text_view_and_inspection_displays(embedded, tmp_path):
    view = headsim.text_view(TEXT, embedded)
    html = view._repr_html_()
    assert_self_contained(html)
    payload = json.loads(re.search(r'class="hsv-data">(.*?)</script>', html, re.S).group(1).replace("<\\/", "</"))
    L, H, n = view.n_layers, view.n_heads, view.n
    assert (payload["L"], payload["H"], payload["n"], payload["labels"]) == (L, H, n, view.tokens)
    attn = _attention(payload) / payload["attention"]["levels"]
    assert np.abs(attn ** 2 - view.attention).max() <= 1 / payload["attention"]["levels"]  # √ steps
    iu = np.triu_indices(n, 1)
    q = _levels(payload)
    steps = payload["similarity"]["steps"]
    counts = np.frombuffer(base64.b64decode(payload["similarity"]["counts"]), dtype="<i4").reshape(L, H, steps + 2)
    for t in (0.3, 0.5):
        k = round(t * steps)
        assert np.array_equal(q >= k, view.mask(t)[:, :, iu[0], iu[1]])  # the masks the page draws
        assert np.array_equal(counts[..., k], view.mask(t)[:, :, iu[0], iu[1]].sum(-1))  # the pair counts it shows
    assert payload["stats"]["attn_cls"]["grid"] == np.round(view.focus["attn_cls"], 4).tolist()
    assert len(html) < 400_000  # 22 tokens
    ins = headsim.inspect_text(TEXT, embedded, layer=2, head=3)
    assert '"init":{"layer":1,"head":2,"threshold":0.3' in ins._repr_html_()
    assert_self_contained(ins.to_html(tmp_path / "ins.html").read_text())


def test_128_token_example_page_is_small_and_its_masks_exact(embedded):
    from headsim.inspection import example_text

    view = headsim.text_view(example_text(), embedded)  # the page `headsim export` writes by default
    assert view.n == 128
    html = view._repr_html_()
    assert len(html.encode()) < 700_000  # with every head's thumbnails and pair counts precomputed (ready at once)
    payload = json.loads(re.search(r'class="hsv-data">(.*?)</script>', html, re.S).group(1).replace("<\\/", "</"))
    L, H, n, steps = view.n_layers, view.n_heads, view.n, payload["similarity"]["steps"]
    q = _levels(payload)
    iu = np.triu_indices(n, 1)
    for t in (0.1, 0.3, 0.62):  # slider positions: the page's pairs (i < j, level ≥ t·steps) are TextView.pairs
        k = round(t * steps)
        assert k / steps == pytest.approx(t)
        pairs = view.pairs(t, limit=None)
        counts = np.zeros((L, H), dtype=int)
        np.add.at(counts, (pairs["layer"] - 1, pairs["head"] - 1), 1)
        assert np.array_equal((q >= k).sum(-1), counts), t
        li, hi = int(pairs["layer"].iloc[0]) - 1, int(pairs["head"].iloc[0]) - 1
        head = pairs[(pairs["layer"] == li + 1) & (pairs["head"] == hi + 1)]
        page = np.flatnonzero(q[li, hi] >= k)
        assert sorted(zip(head["index_i"], head["index_j"])) == sorted(zip(iu[0][page], iu[1][page]))


def test_export_errors(tmp_path, capsys):
    assert run_app(["export", TEXT, "--format", "gif", "--out", str(tmp_path / "x.gif")]) == 2
    assert "unknown format 'gif'" in capsys.readouterr().err.replace("\n", " ")
    assert run_app(["export", TEXT, "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_export_run_figure(runs, tmp_path):
    assert run_app(["export", str(runs[0]), "--format", "svg", "--out", str(tmp_path / "run.svg")]) == 0
    assert (tmp_path / "run.svg").read_text().lstrip().startswith("<?xml")
    assert run_app(["export", str(runs[0]), "--format", "png", "--out", str(tmp_path / "run.png")]) == 0
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------
# In a real browser: one Chromium session for the notebook page and the exported page
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    from browser_support import MISSING, chromium

    if MISSING:
        pytest.skip(MISSING)
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is absent: pip install playwright")
    with chromium() as b:
        yield b


@pytest.fixture
def shots(tmp_path) -> Path:
    from browser_support import screenshot_dir

    return screenshot_dir(tmp_path)


@pytest.mark.slow
@pytest.mark.browser
def test_quickstart_notebook_executes_and_its_html_works_offline(browser, shots, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("nbconvert")
    from browser_support import check_standalone_page
    from headsim.views.html.notebook import offline_exporter

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",  # the kernel inherits PYTHONPATH
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"], "the notebook's outputs hold warnings or progress bars"
    html_outputs = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(html_outputs) == 3  # the view, the inspection, the segmentation
    for h in html_outputs:
        assert_self_contained(h)
    page, _ = offline_exporter().from_notebook_node(nb)
    path = tmp_path / "quickstart.html"
    path.write_text(page, encoding="utf-8")
    check_standalone_page(browser, path, shots / "quickstart.png")


@pytest.mark.slow
@pytest.mark.browser
def test_headsim_export_html_works_offline(browser, shots, tmp_path):
    from browser_support import check_standalone_page

    out = tmp_path / "export.html"
    assert run_app(["export", TEXT, "--out", str(out), "--layer", "4", "--head", "7"]) == 0
    assert_self_contained(out.read_text())
    check_standalone_page(browser, out, shots / "export.png")


@pytest.mark.slow
def test_analyze_displays_in_a_notebook_as_load_run_does(tmp_path):
    """``headsim.analyze(model_object, …)`` in a notebook shows the same rich run card as ``headsim.load_run``,
    for a run kept in memory and for one on disk (executed by nbclient, as the quick start is)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\nThe dog sat on the cat.\nThen the dog ran away.\n" * 12)
    cells = [
        "import headsim\nfrom transformers import BertModel\nfrom headsim.model.load import default_model_dir\n"
        "from headsim.model.verify import tiny_config\n\n"
        "model = BertModel(tiny_config('bert', vocab_size=30522))  # a model already in memory, in train mode\n"
        "model.config.name_or_path = str(default_model_dir())  # whose tokenizer is on disk\n"
        "settings = dict(windows=2, seq_len=16, batch_size=2, progress=False, sentence_splitter='newline')",
        f"run = headsim.analyze(model, {str(corpus)!r}, **settings)\nrun",
        f"headsim.load_run(headsim.analyze(model, {str(corpus)!r}, out={str(tmp_path / 'run')!r}, **settings).path)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"], outputs
    shown = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(shown) == 2
    for html in shown:
        assert_self_contained(html)
        assert "<h3>headsim run" in html and "weights fingerprint" in html and "<svg" in html
    assert "in memory" in shown[0] and "run directory" in shown[1]
