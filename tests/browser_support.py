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


def screenshot_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``$HEADSIM_SCREENSHOTS`` when set, else ``tmp_path``."""
    out = Path(os.environ.get("HEADSIM_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


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
        before = root.locator("canvas.hsv-sim").evaluate("c => c.toDataURL()")
        box = root.locator("canvas.hsv-grid").bounding_box()
        x, y = root.locator("canvas.hsv-grid").evaluate(
            "(c, [l, h]) => { const g = window.headsimViews.lastGrid(c); return [g.left + (h - 1) * g.step + g.tile / 2,"
            " g.top + (l - 1) * g.step + g.tile / 2]; }", [layer, head])
        page.mouse.click(box["x"] + x, box["y"] + y)
        page.wait_for_function("([l, h]) => { const r = document.querySelector('.hsv-root');"
                               " return r.dataset.layer === String(l) && r.dataset.head === String(h); }",
                               arg=[layer, head], timeout=5_000)
        assert f"Layer {layer}, head {head}" in root.locator(".hsv-title").inner_text()
        assert root.locator("canvas.hsv-sim").evaluate("c => c.toDataURL()") != before, "the similarity map did not change"
        assert f"layer {layer}, head {head}" in root.locator(".hsv-pair-note").inner_text()
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
    finally:
        page.close()
    assert not errors, errors
    assert not outside, f"requests left the page: {outside}"
