"""The explorer and the standalone page at 1,024 heads, in headless Chromium (Debian's, through Playwright):
a random 32-layer × 32-head BERT of hidden size 64, served from the model a run recorded (``serve --run``
without ``--model``); a pasted text is analysed as pasted; every pixel of the head grid opens a head; the
mask panel's count is the pairs of the cells it shows at every zoom; a 2,048-token standalone page mounts on
loading, with words in its zoomed range and windows counted from 0 (its load time:
``benchmarks/explorer_load.py``).

Screenshots go to ``$HEADSIM_SCREENSHOTS`` when set, else to pytest's temporary directory."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from browser_support import MISSING, chromium, drag_cells, long_standalone_page, screenshot_dir, serving  # noqa: E402

if MISSING:
    pytest.skip(MISSING, allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="Playwright for Python is absent: pip install playwright")
uvicorn = pytest.importorskip("uvicorn")

L, H = 32, 32
PASTED = ("Pasted first: the lighthouse keeper counted ships. The ships counted nothing, and the keeper slept. "
          "Gulls circled the lighthouse.")
LONG_TEXT = " ".join(["The river turns the wheel of the old mill, and the miller sells flour in the town."] * 140)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer) -> Path:
    """A random 32 × 32-head BERT (hidden 64, d_head 2) saved with the embedded tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=L, num_attention_heads=H, intermediate_size=96,
                        vocab_size=len(tokenizer), max_position_embeddings=2048)
    out = tmp_path_factory.mktemp("model") / "tiny-32x32"
    BertModel(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, model_dir: Path, tokenizer) -> Path:
    """A finished run whose run.json records ``model_dir`` as its model."""
    import xarray as xr

    from fake_run import run_meta, write_run

    rng = np.random.default_rng(2)
    rows = [{"layer": l, "head": h, "n_pairs": int(rng.integers(10, 1000)), "p_repeat": float(rng.beta(2, 5)),
             "p_same_sentence": float(rng.beta(2, 5)), "p_same_sentence_chance": 0.3}
            for l in range(1, L + 1) for h in range(1, H + 1)]
    d = np.arange(1, 32)
    ds = xr.Dataset({"distance_hist": (("layer", "head", "distance"), np.ones((L, H, len(d))))},
                    coords={"layer": np.arange(1, L + 1), "head": np.arange(1, H + 1), "distance": d})
    enc = tokenizer(["A short window of the run."], padding="max_length", max_length=16, truncation=True)
    windows = pd.DataFrame({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    meta = run_meta(L, H, 1, 16, 0.3, 3, name="tiny-32x32", source=str(model_dir))
    return write_run(tmp_path_factory.mktemp("run") / "run-32x32", ds, windows, meta, pd.DataFrame(rows),
                     pd.DataFrame({"layer": np.arange(1, L + 1)}))


@pytest.fixture(scope="module")
def server(run_dir: Path):
    """The explorer started as `headsim serve --run RUN` starts it: no model given, the run's own."""
    from headsim.explorer.app import LOOPBACK_HOSTS, create_app

    app = create_app(None, run_dir, allowed_hosts=LOOPBACK_HOSTS, resolution=64)
    loaded = app.state.explorer.loaded
    assert (loaded.n_layers, loaded.n_heads) == (L, H) and not app.state.explorer.run.warnings
    with serving(app) as origin:
        yield origin


@pytest.fixture
def browser():
    """Chromium for one test (two tests here: one launch each)."""
    with chromium() as started:
        yield started


def _analysed(page, text: str, timeout: int = 120_000) -> None:
    try:
        _wait_analysed(page, text, timeout)
    except Exception:
        raise AssertionError(f"status {page.inner_text('#status')!r}, error {page.inner_text('#error')!r}") from None


def _wait_analysed(page, text: str, timeout: int) -> None:
    page.wait_for_function("(t) => { const s = window.headsim.state; return s.analysis && s.analysis.text === t"
                           " && s.head && s.head.id === s.analysis.id && window.headsim.panels['mask-plot']; }",
                           arg=text, timeout=timeout)


_SHOWN = """() => { const v = window.headsim.panels['mask-plot'], s = v.spec;
    const r = v.range || { r0: 0, r1: s.n, c0: 0, c1: s.n }; let k = 0;
    for (let i = r.r0; i < r.r1; i++) for (let j = Math.max(r.c0, i + 1); j < r.c1; j++) k += s.value(i, j) === 1 ? 1 : 0;
    return k; }"""


def test_pasted_text_grid_and_counts(server, browser, tmp_path):
    shots = screenshot_dir(tmp_path)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    gate = threading.Event()

    def slow_examples(route):  # the examples arrive after the user has pasted a text
        gate.wait(20)
        route.continue_()

    page.route("**/api/examples", slow_examples)
    page.goto(server + "/")
    page.wait_for_function("() => window.headsim && window.headsim.state.info", timeout=60_000)
    page.fill("#text-input", PASTED)
    gate.set()
    page.wait_for_function("() => window.headsim.state.examples.length > 0", timeout=20_000)
    assert page.input_value("#text-input") == PASTED  # not replaced by the first example
    page.click("#analyze-btn")
    _analysed(page, PASTED)
    assert "tiny-32x32" in page.inner_text("#model-line") and "32 layers × 32 heads" in page.inner_text("#model-line")
    assert page.evaluate("() => fetch('/api/status').then(r => r.json())") == {"busy": False, "stage": None, "seconds": None}

    # the grid fits the page and every pixel of it opens the head it belongs to
    g = page.evaluate("() => window.headsim.state.grid")
    box = page.locator("#thumb-plot canvas.thumb-grid").bounding_box()
    assert box["x"] + box["width"] <= 1400 and g["tile"] >= 8, (box, g)
    owners = page.evaluate("""() => { const g = window.headsim.state.grid, half = (g.step - g.tile) / 2, bad = [];
        for (let y = g.top - half; y < g.top + g.L * g.step - half; y += 1)
          for (let x = g.left - half; x < g.left + g.H * g.step - half; x += 1) {
            const t = window.headsim.tileAt(g, x + 0.5, y + 0.5);
            const l = Math.floor((y - g.top + half) / g.step), h = Math.floor((x - g.left + half) / g.step);
            if (!t || t.l !== l || t.h !== h) bad.push([x, y]); }
        return bad.length; }""")
    assert owners == 0
    for (l, h, dx, dy) in ((5, 7, 0, 0), (20, 31, g["tile"] - 1, g["tile"] - 1), (31, 0, g["tile"] + g["gap"] / 2 - 0.5, -0.5)):
        grid = page.locator("#thumb-plot canvas.thumb-grid")
        grid.scroll_into_view_if_needed()  # the Analyze click may have scrolled the page below the grid
        box = grid.bounding_box()  # where the grid is now, after the last head
        assert box["y"] >= 0 and box["y"] + box["height"] <= 1000, box
        page.mouse.click(box["x"] + g["left"] + h * g["step"] + dx + 0.5, box["y"] + g["top"] + l * g["step"] + dy + 0.5)
        try:
            page.wait_for_function("([l, h]) => { const s = window.headsim.state; return s.head && s.head.layer === l"
                                   " && s.head.head === h; }", arg=[l + 1, h + 1], timeout=20_000)
        except Exception:
            shown = page.evaluate("() => { const s = window.headsim.state.head; return s && [s.layer, s.head]; }")
            raise AssertionError(f"clicked layer {l + 1} head {h + 1} at {box}; head shown {shown}, "
                                 f"status {page.inner_text('#status')!r}, error {page.inner_text('#error')!r}") from None
    page.screenshot(path=str(shots / "explorer_32x32.png"), full_page=True)

    # a long window (above the server's 64 bins): the mask's count is the pairs of the cells it shows, in the
    # overview, zoomed into the overview (exact values) and zoomed again
    page.fill("#seq-len", "256")
    page.fill("#text-input", LONG_TEXT)
    page.click("#analyze-btn")
    page.wait_for_function("() => { const s = window.headsim.state; return s.analysis && s.analysis.seq_len === 256"
                           " && s.head && s.head.id === s.analysis.id && s.head.view.unit === 'bins'; }", timeout=120_000)
    page.eval_on_selector("#threshold", "e => { e.value = '0.05'; e.dispatchEvent(new Event('input')); }")
    page.wait_for_timeout(200)
    assert page.evaluate("() => window.headsim.state.head.view.unit") == "bins"
    shown = page.evaluate(_SHOWN)
    assert shown > 0 and int(page.inner_text("#pair-count2")) == shown and page.inner_text("#pair-unit") == "bin pairs"
    mask = page.locator("#mask-plot canvas")
    mask.scroll_into_view_if_needed()
    geom = page.evaluate("() => window.headsim.panels['mask-plot'].geom")
    drag_cells(page, mask, geom, (2, 10), (12, 30))
    page.wait_for_function("() => !!window.headsim.state.exact", timeout=30_000)
    page.wait_for_timeout(200)
    assert int(page.inner_text("#pair-count2")) == page.evaluate(_SHOWN) and page.inner_text("#pair-unit") == "pairs"
    geom = page.evaluate("() => window.headsim.panels['mask-plot'].geom")
    drag_cells(page, mask, geom, (1, 3), (9, 20))
    page.wait_for_timeout(200)
    assert int(page.inner_text("#pair-count2")) == page.evaluate(_SHOWN)
    assert "in the cells shown" in page.inner_text("#pair-where")
    page.screenshot(path=str(shots / "explorer_32x32_long_zoom.png"), full_page=True)
    page.close()
    assert not errors, errors


def test_long_standalone_page_mounts_and_zooms(browser, tmp_path):
    """A 2,048-token window's page as `headsim export` writes it (1,024 heads on 128 position bins; smooth random
    matrices stand in for a model, whose 2,048-token pass takes minutes here): it mounts without any input,
    without page errors, words in the zoomed range, the mask's count the pairs shown at every zoom. (How
    long it takes to become interactive is `benchmarks/explorer_load.py`'s measurement, not a test's.)"""
    shots = screenshot_dir(tmp_path)
    path = long_standalone_page(tmp_path / "long.html", LONG_TEXT.split(), L, H)
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_function("() => document.querySelector('.hsv-root').dataset.mounted === 'done'", timeout=30_000)
    root = page.locator(".hsv-root")
    grid = root.locator("canvas.hsv-grid").bounding_box()
    assert grid["x"] + grid["width"] <= 1000, grid  # the grid leaves the maps on screen
    g = page.evaluate("() => window.headsimViews.lastGrid(document.querySelector('canvas.hsv-grid'))")
    page.mouse.click(grid["x"] + g["left"] + 17 * g["step"] + g["tile"] - 0.5, grid["y"] + g["top"] + 9 * g["step"] + 0.5)
    page.wait_for_function("() => { const r = document.querySelector('.hsv-root'); return r.dataset.layer === '10'"
                           " && r.dataset.head === '18'; }", timeout=5_000)
    shown = """() => { const v = window.headsimViews.panels(document.querySelector('.hsv-root')).mask, s = v.spec;
        const r = v.range || { r0: 0, r1: s.n, c0: 0, c1: s.n }; let k = 0;
        for (let i = r.r0; i < r.r1; i++) for (let j = Math.max(r.c0, i + 1); j < r.c1; j++) k += s.value(i, j);
        return k; }"""
    page.eval_on_selector(".hsv-threshold", "e => { e.value = '0.1'; e.dispatchEvent(new Event('input')); }")
    assert int(root.get_attribute("data-count")) == page.evaluate(shown) > 0
    mask = root.locator(".hsv-mask canvas")
    mask.scroll_into_view_if_needed()
    geom = page.evaluate("() => window.headsimViews.panels(document.querySelector('.hsv-root')).mask.geom")
    drag_cells(page, mask, geom, (3, 5), (10, 20))
    assert page.evaluate("() => window.headsimViews.panels(document.querySelector('.hsv-root')).mask.range") \
        == {"r0": 3, "r1": 11, "c0": 5, "c1": 21}
    assert int(root.get_attribute("data-count")) == page.evaluate(shown)
    strip = page.eval_on_selector_all(".hsv-tok:not([hidden])", "els => els.map(e => e.textContent)")
    assert 0 < len(strip) < 2048 and "river" in strip  # the words of the zoomed range
    cells = page.eval_on_selector_all(".hsv-pairs tbody tr td:first-child", "els => els.map(e => e.textContent)")
    assert cells and any(c.strip() and not c[0].isdigit() for c in cells), cells[:3]  # words, not bin ranges
    page.screenshot(path=str(shots / "standalone_2048_zoom.png"), full_page=True)
    page.close()
    assert not errors, errors
