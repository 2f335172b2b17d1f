"""Shared set-up for tests that open pages in Debian's headless Chromium through Playwright."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--allow-file-access-from-files"]
MISSING = (f"{CHROMIUM} is absent: install Debian's Chromium (apt-get install -y chromium) to run the browser tests"
           if not Path(CHROMIUM).exists() else "")


@contextmanager
def chromium():
    """Debian's headless Chromium through Playwright, closed afterwards (one session per test module)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def serving(app):
    """``app`` (an ASGI app) served by uvicorn on a free loopback port in a thread; yields its origin URL."""
    import socket
    import threading
    import time

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)


def screenshot_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``$HEADSIM_SCREENSHOTS`` when set, else ``tmp_path``."""
    out = Path(os.environ.get("HEADSIM_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def cell_point(canvas, geom: dict, i: int, j: int) -> tuple[float, float]:
    """Page coordinates of the centre of cell (i, j) of a draw.js matrix panel's ``canvas`` (a locator) as
    drawn with geometry ``geom`` (counted from its first row and column shown)."""
    box = canvas.bounding_box()
    return box["x"] + geom["x0"] + (j + 0.5) * geom["cw"], box["y"] + geom["y0"] + (i + 0.5) * geom["ch"]


def drag_cells(page, canvas, geom: dict, start: tuple[int, int], end: tuple[int, int]) -> None:
    """Drag a zoom rectangle on a matrix panel from cell ``start`` to cell ``end`` ((i, j) each)."""
    page.mouse.move(*cell_point(canvas, geom, *start))
    page.mouse.down()
    page.mouse.move(*cell_point(canvas, geom, *end), steps=4)
    page.mouse.up()


def check_standalone_page(browser, path: Path, screenshot: Path | None = None, *, layer: int = 2, head: int = 3) -> None:
    """Open a standalone headsim HTML file with every request that is not ``file:``/``data:``/``blob:``
    aborted, and check: no page or console error, no request attempted elsewhere, every head explorer
    mounted with its grid drawn, and clicking head (``layer``, ``head``) (1-based) of the first
    explorer updates its panels (title, similarity map, pair table)."""
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    try:
        page.goto(Path(path).resolve().as_uri())
        page.wait_for_function("() => { const r = [...document.querySelectorAll('.hsv-root')];"
                               " return r.length && r.every(e => e.dataset.mounted === 'done'); }", timeout=30_000)
        root = page.locator(".hsv-root").first
        drawn = root.locator("canvas.hsv-grid").evaluate(
            "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            " let k = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) k++; return [c.width, c.height, k]; }")
        assert drawn[0] > 100 and drawn[1] > 100 and drawn[2] > 0.3 * drawn[0] * drawn[1], f"head grid not drawn: {drawn}"
        assert not root.locator(".hsv-fallback").count(), "the static fallback is still shown"
        before = root.locator(".hsv-sim canvas").evaluate("c => c.toDataURL()")
        box = root.locator("canvas.hsv-grid").bounding_box()
        x, y = root.locator("canvas.hsv-grid").evaluate(
            "(c, [l, h]) => { const g = window.headsimViews.lastGrid(c); return [g.left + (h - 1) * g.step + g.tile / 2,"
            " g.top + (l - 1) * g.step + g.tile / 2]; }", [layer, head])
        page.mouse.click(box["x"] + x, box["y"] + y)
        page.wait_for_function("([l, h]) => { const r = document.querySelector('.hsv-root');"
                               " return r.dataset.layer === String(l) && r.dataset.head === String(h); }",
                               arg=[layer, head], timeout=5_000)
        assert f"Layer {layer}, head {head}" in root.locator(".hsv-title").inner_text()
        assert root.locator(".hsv-sim canvas").evaluate("c => c.toDataURL()") != before, "the similarity map did not change"
        assert f"layer {layer}, head {head}" in root.locator(".hsv-pair-note").inner_text()
        # the shared matrix panels: hover reads out a cell, a dragged rectangle zooms all three, double-click resets
        sim = root.locator(".hsv-sim canvas")
        geom = sim.evaluate("c => window.headsimViews.panels(c.closest('.hsv-root')).sim.geom")
        page.mouse.move(*cell_point(sim, geom, 1, 2))
        assert root.locator(".hsv-hover").inner_text().startswith("1:"), root.locator(".hsv-hover").inner_text()
        drag_cells(page, sim, geom, (1, 1), (4, 3))
        ranges = sim.evaluate("c => Object.values(window.headsimViews.panels(c.closest('.hsv-root'))).map(v => v.range)")
        assert ranges == [{"r0": 1, "r1": 5, "c0": 1, "c1": 4}] * 3, ranges
        if screenshot is not None:
            page.screenshot(path=str(screenshot.with_name(screenshot.stem + "_zoom.png")), full_page=True)
        page.mouse.dblclick(*cell_point(sim, geom, 0, 0))
        assert sim.evaluate("c => window.headsimViews.panels(c.closest('.hsv-root')).sim.range") is None
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
    finally:
        page.close()
    assert not errors, errors
    assert not outside, f"requests left the page: {outside}"


def long_standalone_page(path: Path, words: list[str], layers: int, heads: int, n: int = 2048, bins: int = 128) -> Path:
    """A standalone page as `headsim export` writes it for an ``n``-token window of ``layers`` × ``heads`` heads
    on ``bins`` position bins (tokens cycled from ``words``), written to ``path``: smooth random similarity and
    attention matrices stand in for a model, whose pass at such lengths takes minutes here (seeded: the same page
    every time). Shared by the browser tests and ``benchmarks/explorer_load.py``."""
    import numpy as np

    from headsim.views.html.heads import explorer_fragment, explorer_payload, grid_png
    from headsim.views.html.page import fragment, write_page

    rng = np.random.default_rng(0)
    tokens = ["[CLS]"] + [words[k % len(words)] for k in range(n - 2)] + ["[SEP]"]
    token_bins = np.arange(n) * bins // n
    x = np.linspace(0, 1, bins, dtype=np.float32)
    base = np.exp(-np.abs(x[:, None] - x[None, :]) * 8).astype(np.float32)
    sim = np.clip(base[None, None] * rng.uniform(0.2, 1.0, (layers, heads, 1, 1)).astype(np.float32)
                  + rng.normal(0, 0.05, (layers, heads, bins, bins)).astype(np.float32), -0.2, 1)
    sim = (sim + sim.transpose(0, 1, 3, 2)) / 2
    attn = rng.dirichlet(np.ones(bins), size=(layers, heads, bins)).astype(np.float32)
    labels = [f"{int(np.flatnonzero(token_bins == b)[0])}–{int(np.flatnonzero(token_bins == b)[-1])}" for b in range(bins)]
    payload = explorer_payload(labels, attn, sim, title=f"tiny: {layers} layers × {heads} heads", unit="bins",
                               tokens=tokens, token_bins=token_bins,
                               subtitle=f"window 0 · {n:,} tokens on {bins} position bins")
    return write_page(path, path.stem, fragment(explorer_fragment(payload, grid_png(sim))))
