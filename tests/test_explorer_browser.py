"""The explorer page in a real browser: Debian's Chromium, headless, driven by Playwright.

Set-up (no ``playwright install``: the test uses the system Chromium):

    apt-get install -y chromium
    pip install playwright

Run with ``pytest -m browser tests/test_explorer_browser.py``. Screenshots go to
``$HEADSIM_SCREENSHOTS`` when set, else to pytest's temporary directory (the path is printed).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.browser

from browser_support import MISSING, cell_point, chromium, drag_cells, screenshot_dir, serving  # noqa: E402
SENTENCE = ("The old mill stands by the river, and the river turns the wheel of the old mill. "
            "Millers sold flour to the town across the river.")

if MISSING:
    pytest.skip(MISSING, allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is absent: pip install playwright")
uvicorn = pytest.importorskip("uvicorn")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fake_run(root: Path, n_layers: int, n_heads: int, tokenizer, name: str) -> Path:
    """A small finished run directory, so the corpus profile renders."""
    rng = np.random.default_rng(1)
    cols = ["p_repeat", "p_repeat_same_sentence", "p_same_sentence", "anchor_fraction_mean", "attn_cls", "attn_sep",
            "attn_punct", "attn_prev", "attn_next"]
    rows = [{"layer": l, "head": h, "n_pairs": int(rng.integers(100, 10_000)), "p_same_sentence_chance": 0.35,
             "mean_distance": float(rng.uniform(2, 30)), "median_distance": float(rng.uniform(1, 20)),
             **{c: float(rng.beta(2, 5)) for c in cols}}
            for l in range(1, n_layers + 1) for h in range(1, n_heads + 1)]
    import xarray as xr

    from fake_run import run_meta, write_run

    d = np.arange(1, 128)
    hist = np.stack([[1000 * np.exp(-d / rng.uniform(3, 40)) for _ in range(n_heads)] for _ in range(n_layers)])
    ds = xr.Dataset({"distance_hist": (("layer", "head", "distance"), hist.round())},
                    coords={"layer": np.arange(1, n_layers + 1), "head": np.arange(1, n_heads + 1), "distance": d})
    enc = tokenizer(["The Amazon is the largest river by discharge. It rises in the Andes."], padding="max_length",
                    max_length=32, truncation=True)
    windows = pd.DataFrame({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    return write_run(root, ds, windows, run_meta(n_layers, n_heads, 1, 32, 0.3, 3, name=name),
                     pd.DataFrame(rows), pd.DataFrame({"layer": np.arange(1, n_layers + 1)}))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The explorer with the embedded model and a fake run, on a free loopback port, in a thread."""
    from headsim.explorer.app import LOOPBACK_HOSTS, create_app
    from headsim.model.load import load_model

    model = load_model(device="cpu")
    run = _fake_run(tmp_path_factory.mktemp("run") / "demo-run", model.n_layers, model.n_heads, model.tokenizer, model.name)
    app = create_app(model, run, allowed_hosts=LOOPBACK_HOSTS)
    with serving(app) as origin:
        yield origin


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def shots(tmp_path) -> Path:
    return screenshot_dir(tmp_path)


class Watch:
    """Console errors, page errors and any request that leaves the server."""

    def __init__(self, page, origin: str) -> None:
        self.errors: list[str] = []
        self.external: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("request", lambda r: None if r.url.startswith((origin, "data:", "blob:")) else self.external.append(r.url))


def _wait_head(page, layer: int, head: int) -> None:
    page.wait_for_function(
        "([l, h]) => { const s = window.headsim.state; return s.head && s.head.layer === l && s.head.head === h"
        " && s.head.id === s.analysis.id && window.headsim.panels['attn-plot'] && window.headsim.panels['attn-plot'].spec; }",
        arg=[layer, head], timeout=20_000)


def _thumb_point(page, layer: int, head: int) -> tuple[float, float]:
    """Page coordinates of the centre of a head's thumbnail (1-based layer/head) on the shared canvas grid."""
    return tuple(page.evaluate(
        """([l, h]) => {
            const c = document.querySelector('#thumb-plot canvas.thumb-grid'), g = window.headsim.state.grid;
            const r = c.getBoundingClientRect();
            return [r.left + g.left + (h - 1) * g.step + g.tile / 2, r.top + g.top + (l - 1) * g.step + g.tile / 2];
        }""", [layer, head]))


_INKED = """(id) => { const v = window.headsim.panels[id], c = v.canvas;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let k = 0; for (let i = 0; i < d.length; i += 4) if (d[i + 3] && (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250)) k++;
    return [v.spec.n, k / (c.width * c.height)]; }"""
_MASK_SUM = """() => { const s = window.headsim.panels['mask-plot'].spec; let k = 0;
    for (let i = 0; i < s.n; i++) for (let j = 0; j < s.n; j++) k += s.value(i, j); return k; }"""


def _table(page) -> list[list[str]]:
    return page.eval_on_selector_all("#pair-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")


def test_explore_a_sentence(server, browser, shots):
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    watch = Watch(page, server)
    page.goto(server + "/")
    # the page opens on the first example, analysed
    page.wait_for_function("() => !!(window.headsim && window.headsim.state.head)", timeout=30_000)
    assert "numbered from 1" in page.inner_text("#numbering")
    assert "demo-run" in page.inner_text("#run-line")

    # type a sentence and analyse it
    page.fill("#text-input", SENTENCE)
    page.click("#analyze-btn")
    page.wait_for_function("(t) => { const s = window.headsim.state; return s.analysis && s.analysis.text === t"
                           " && s.head && s.head.id === s.analysis.id; }", arg=SENTENCE, timeout=20_000)
    words = page.inner_text("#token-text")
    assert "[CLS]" in words and "river" in words and "[SEP]" in words

    # open layer 3, head 5 by clicking its thumbnail in the model view
    x, y = _thumb_point(page, 3, 5)
    page.mouse.click(x, y)
    _wait_head(page, 3, 5)
    assert page.inner_text("#head-title").startswith("Layer 3, head 5")
    n = page.evaluate("() => window.headsim.state.head.n_tokens")
    for panel in ("attn-plot", "sim-plot", "mask-plot", "blocks-plot"):  # the shared canvas panels, drawn
        size, inked = page.evaluate(_INKED, panel)
        assert size == n and inked > (0.02 if panel == "mask-plot" else 0.2), (panel, size, inked)  # the mask: mostly white
    page.wait_for_function("() => document.getElementById('profile-sub').textContent.startsWith('layer 3, head 5')")

    # move the threshold slider: mask and pair table follow without a request
    before_table, before_note = _table(page), page.inner_text("#pair-note")
    before_mask = page.evaluate(_MASK_SUM)
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.focus("#threshold")
    for _ in range(12):
        page.keyboard.press("ArrowLeft")  # 0.30 → 0.18
    page.wait_for_function("() => document.getElementById('thr-value').textContent === '0.18'")
    page.wait_for_timeout(200)
    after_table, after_note = _table(page), page.inner_text("#pair-note")
    after_mask = page.evaluate(_MASK_SUM)
    assert after_note != before_note and after_table != before_table
    assert after_mask > before_mask
    assert not [u for u in requests if "/api/" in u], requests
    shown = int(page.inner_text("#pair-count2"))
    assert after_mask == 2 * shown  # the mask is symmetric; the table lists i < j

    # sort the table by similarity (descending) by clicking its header
    page.click("#pair-table th[data-key=similarity]")
    sims = [float(r[4]) for r in _table(page)]
    assert sims == sorted(sims, reverse=True) and len(sims) > 1

    # hovering a token highlights its row and column in the maps, the token and its table rows
    page.hover("#token-text .tok[data-i='4']")
    page.wait_for_function("() => document.querySelector('#token-text .tok[data-i=\"4\"]').classList.contains('hl-i')")
    crosses = page.evaluate("() => ['sim-plot', 'attn-plot'].map(id => window.headsim.panels[id].spec.cross)")
    assert crosses == [{"i": 4, "j": None}] * 2, crosses
    page.screenshot(path=str(shots / "explorer_hover.png"))
    page.mouse.move(5, 5)

    # hovering a map cell reads out its tokens and values; a dragged rectangle zooms every panel; reset shows all
    sim = page.locator("#sim-plot canvas")
    sim.scroll_into_view_if_needed()
    g = page.evaluate("() => window.headsim.panels['sim-plot'].geom")
    page.mouse.move(*cell_point(sim, g, 2, 5))
    tip = page.inner_text("#tooltip")
    assert page.is_visible("#tooltip") and tip.startswith("2:") and "→ 5:" in tip and "similarity" in tip, tip
    drag_cells(page, sim, g, (2, 1), (7, 6))
    ranges = page.evaluate("() => Object.values(window.headsim.panels).map(v => v.range)")
    assert ranges == [{"r0": 2, "r1": 8, "c0": 1, "c1": 7}] * 4, ranges
    zoomed = page.evaluate("() => window.headsim.panels['sim-plot'].geom")
    page.mouse.move(*cell_point(sim, zoomed, 0, 0))  # the first cell shown is (2, 1)
    assert page.inner_text("#tooltip").startswith("2:")
    page.screenshot(path=str(shots / "explorer_zoom.png"))
    page.click("#sim-plot .hs-reset")
    assert page.evaluate("() => Object.values(window.headsim.panels).every(v => v.range === null)")
    page.mouse.move(5, 5)

    # the separator threshold asks the server again (Fig 5)
    page.focus("#sep-threshold")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("() => window.headsim.state.head.separators.threshold === 0.45", timeout=20_000)

    # keyboard navigation between heads
    page.click("#head-title")
    page.keyboard.press("ArrowRight")
    _wait_head(page, 3, 6)

    # clicking a token pins its highlight until Esc
    page.click("#token-text .tok[data-i='2']")
    page.mouse.move(5, 5)
    page.wait_for_timeout(150)
    assert page.evaluate("() => document.querySelector('#token-text .tok[data-i=\"2\"]').classList.contains('hl-i')")
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.querySelector('#token-text .tok[data-i=\"2\"]').classList.contains('hl-i')")

    page.evaluate("() => window.scrollTo(0, 0)")
    page.wait_for_timeout(300)
    page.screenshot(path=str(shots / "explorer.png"), full_page=True)
    box = page.evaluate("() => { const r = document.getElementById('head-card').getBoundingClientRect();"
                        " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; }")
    page.screenshot(path=str(shots / "explorer_head.png"), full_page=True, clip=box)
    print(f"screenshots in {shots}")
    assert watch.errors == [], watch.errors
    assert watch.external == [], watch.external
    page.close()


def test_narrow_window_and_errors(server, browser, shots):
    page = browser.new_page(viewport={"width": 800, "height": 900})
    watch = Watch(page, server)
    page.goto(server + "/")
    page.wait_for_function("() => !!(window.headsim && window.headsim.state.head)", timeout=30_000)
    # one column: the sidebar sits above the maps
    side, main = page.locator("#sidebar").bounding_box(), page.locator("#model-card").bounding_box()
    assert main["y"] >= side["y"] + side["height"] - 1
    # the run's windows are offered as examples
    assert page.locator("#example-select option[value='run:0']").count() == 1
    # an empty text is refused in the page, without a request
    page.fill("#text-input", "   ")
    page.click("#analyze-btn")
    assert "empty" in page.inner_text("#error")
    page.screenshot(path=str(shots / "explorer_narrow.png"), full_page=True)
    assert watch.errors == [] and watch.external == [], (watch.errors, watch.external)
    page.close()


def test_api_docs_offline(server, browser):
    page = browser.new_page()
    watch = Watch(page, server)
    page.goto(server + "/docs")
    page.wait_for_selector(".opblock", timeout=20_000)
    assert "/api/analyze" in page.inner_text("body")
    assert watch.errors == [] and watch.external == [], (watch.errors, watch.external)
    page.close()


def test_a_long_window_overview_zooms_into_exact_values(browser, shots):
    """With a view resolution of 16 a 40-odd-token window is a binned overview; a dragged rectangle asks
    /api/zoom for its tokens and every map then shows exact values over token positions."""
    from headsim.explorer.app import LOOPBACK_HOSTS, create_app
    from headsim.model.load import load_model

    app = create_app(load_model(device="cpu"), allowed_hosts=LOOPBACK_HOSTS, resolution=16)
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        assert thread.is_alive()
        time.sleep(0.05)
    origin = f"http://127.0.0.1:{port}"
    try:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        watch = Watch(page, origin)
        page.goto(origin + "/")
        page.wait_for_function("() => !!(window.headsim && window.headsim.state.head)", timeout=30_000)
        page.fill("#text-input", SENTENCE)
        page.click("#analyze-btn")
        page.wait_for_function("(t) => { const s = window.headsim.state; return s.analysis && s.analysis.text === t"
                               " && s.head && s.head.id === s.analysis.id; }", arg=SENTENCE, timeout=20_000)
        n = page.evaluate("() => window.headsim.state.head.n_tokens")
        assert n > 16 and page.evaluate("() => window.headsim.state.head.view.unit") == "bins"
        assert page.evaluate(_INKED, "sim-plot")[0] == 16  # the overview: 16 bins a side
        assert "bins" in page.inner_text("#pair-note")
        sim = page.locator("#sim-plot canvas")
        sim.scroll_into_view_if_needed()
        g = page.evaluate("() => window.headsim.panels['sim-plot'].geom")
        drag_cells(page, sim, g, (2, 3), (9, 12))
        page.wait_for_function("() => !!window.headsim.state.exact", timeout=20_000)
        state = page.evaluate("() => { const s = window.headsim.state; return {e: s.exact, r: s.ranges, layer: s.head.layer,"
                              " head: s.head.head, bins: s.head.view.bins}; }")
        e, bins = state["e"], state["bins"]
        assert e["rows"] == [bins[2][0], bins[9][1]] and e["cols"] == [bins[3][0], bins[12][1]]
        assert state["r"] == {"r0": e["rows"][0], "r1": e["rows"][1], "c0": e["cols"][0], "c1": e["cols"][1]}
        for panel in ("attn-plot", "sim-plot", "mask-plot", "blocks-plot"):
            size, inked = page.evaluate(_INKED, panel)
            assert size == n and inked > 0.02, (panel, size, inked)
        # the values drawn are the exact ones the API gives for that region
        body = {"text": SENTENCE, "layer": state["layer"], "head": state["head"], "rows": e["rows"], "cols": e["cols"]}
        want = page.evaluate("(b) => fetch('/api/zoom', {method: 'POST', headers: {'Content-Type': 'application/json'},"
                             " body: JSON.stringify(b)}).then(r => r.json())", body)
        got = page.evaluate("([i, j]) => window.headsim.panels['sim-plot'].spec.value(i, j)", [e["rows"][0] + 1, e["cols"][0] + 2])
        assert got == pytest.approx(want["similarity"][1][2])
        assert "in tokens" in page.inner_text("#pair-note")
        page.screenshot(path=str(shots / "explorer_long_zoom.png"))
        page.dblclick("#sim-plot canvas")  # back to the overview
        page.wait_for_function("() => !window.headsim.state.exact && window.headsim.panels['sim-plot'].spec.n === 16")
        assert not watch.errors, watch.errors
    finally:
        srv.should_exit = True
        thread.join(10)
