"""The report's figures at real head counts (fake runs of 32 × 32 and 32 × 64 heads): they fit the page,
their cells stay readable, values are printed only where legible, legends stay outside the data and
inside the figure; and, in headless Chromium, the page shows every figure at a size where a cell reads."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from fake_run import make_fake_run
from headsim.figures import fig06_repeat_probability, fig10_locations, fig11_anchors, sim_value_histogram
from headsim.figures.fig10 import busiest_share
from headsim.plots.style import MIN_ANNOTATION_PT, PAGE_WIDTH, fix_layout, smallest_cell
from headsim.report.reading import load_report_run

MIN_CELL_PX = 10  # a layer × head cell (or a map of Fig 10) shown at least this wide on the page


@pytest.fixture(scope="module")
def run_32x32(tmp_path_factory) -> Path:
    return make_fake_run(tmp_path_factory.mktemp("runs") / "r32x32", n_layers=32, n_heads=32, seq_len=12, n_windows=2)


@pytest.fixture(scope="module")
def run_32x64(tmp_path_factory) -> Path:
    return make_fake_run(tmp_path_factory.mktemp("runs") / "r32x64", n_layers=32, n_heads=64, seq_len=10, n_windows=1)


def _legends(fig) -> list:
    found = list(fig.legends)
    for sub in fig.subfigs:
        found += sub.legends
    return found + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0) * max(h, 0)


def test_legends_lie_inside_the_figure_and_off_the_data(run_32x32: Path) -> None:
    """The similarity-value figure's 32-entry legend and Fig 11b/c's: in columns under the data, inside the
    figure, covering no axes."""
    run = load_report_run(run_32x32)
    for fig in (sim_value_histogram(run.dataset, model="m"), fig11_anchors(run.dataset, run.heads, run.layers, model="m")):
        fix_layout(fig)
        renderer = fig.canvas.get_renderer()
        frame = fig.bbox
        legends = _legends(fig)
        assert legends
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert box.x0 >= frame.x0 - 1 and box.y0 >= frame.y0 - 1 and box.x1 <= frame.x1 + 1 and box.y1 <= frame.y1 + 1, \
                (fig.get_suptitle(), box, frame)
            assert legend._ncols > 1  # in columns
            for ax in fig.axes:
                if ax.get_label() == "<colorbar>":
                    continue
                assert _overlap(box, ax.get_window_extent(renderer)) < 1.0, (fig.get_suptitle(), ax.get_title())
        plt.close(fig)


def test_heatmaps_fit_the_page_at_64_heads(run_32x64: Path) -> None:
    """At 32 × 64 heads a layer × head heatmap fits the page's width with cells of at least MIN_CELL_PX at
    96 px an inch; numbers too small to read are left out; the head numbers are thinned, not overlapping."""
    run = load_report_run(run_32x64)
    fig = fix_layout(fig06_repeat_probability(run.heads, model="m"))
    assert fig.get_size_inches()[0] <= PAGE_WIDTH + 1e-9
    assert smallest_cell(fig) * 96 >= MIN_CELL_PX
    ax = fig.axes[0]
    assert not ax.texts  # 0.145-inch cells: no value would be legible
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    assert 1 < len(labels) < 64
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), "head numbers overlap"
    plt.close(fig)


def test_values_printed_where_they_are_legible(run_32x32: Path) -> None:
    run = load_report_run(run_32x32)
    fig = fix_layout(fig06_repeat_probability(run.heads, model="m"))
    texts = fig.axes[0].texts
    assert len(texts) == 32 * 32 and min(t.get_fontsize() for t in texts) >= MIN_ANNOTATION_PT
    plt.close(fig)


def test_fig10_switches_to_one_layer_and_a_heatmap(run_32x32: Path) -> None:
    """1,024 maps would not read: the last layer's 32 maps and a layer × head heatmap of the share of
    each head's pairs on its busiest position (checked against the counts)."""
    run = load_report_run(run_32x32)
    fig = fix_layout(fig10_locations(run.dataset, model="m"))
    maps = [ax for ax in fig.axes if ax.images and (ax.get_gid() or "") == "cells:1x1"]
    assert len(maps) == 32 and all(ax.get_title().startswith("L32 H") for ax in maps)
    assert smallest_cell(fig) * 96 >= MIN_CELL_PX
    plt.close(fig)
    counts = run.dataset["location_counts"].values.astype(float)
    share = busiest_share(counts)
    l, h = 4, 7
    c = counts[l, h]
    expected = max(c[i].sum() for i in range(c.shape[0])) / (c.sum() / 2) if c.sum() else float("nan")
    assert share[l, h] == pytest.approx(expected)
    assert ((share[counts.sum(axis=(-2, -1)) > 0] <= 1 + 1e-12)).all()


@pytest.mark.browser
def test_report_page_shows_cells_readably(run_32x32: Path, tmp_path: Path, monkeypatch) -> None:
    """The report page of a 32 × 32 run in headless Chromium at 1,280 px: every figure inside the page's
    column, and a cell of its layer × head grids (a map of Fig 10) rendered at least MIN_CELL_PX wide."""
    from browser_support import MISSING, chromium, screenshot_dir

    if MISSING:
        pytest.skip(MISSING)
    pytest.importorskip("playwright.sync_api")
    from headsim.figures import fig06, fig10, fig11, similarity_values
    from headsim.report import build

    monkeypatch.setattr(build, "FIGURES", [fig06.FIGURE, fig10.FIGURE, fig11.FIGURE, similarity_values.FIGURE])
    index = build.build_report(run_32x32, tmp_path / "report", None, dpi=40)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(index.resolve().as_uri())
        page.wait_for_function("() => [...document.querySelectorAll('img.fig')].every(i => { i.loading = 'eager';"
                               " return i.complete && i.naturalWidth > 0; })", timeout=30_000)
        shown = page.eval_on_selector_all(
            "img.fig", "imgs => imgs.map(i => [i.getAttribute('src'), i.getBoundingClientRect().right,"
            " i.clientWidth, i.naturalWidth, i.dataset.cellPx, document.body.clientWidth])")
        page.screenshot(path=str(screenshot_dir(tmp_path) / "report_32x32.png"), full_page=False)
        page.close()
    assert len(shown) == 4
    for src, right, width, natural, cell, body in shown:
        assert right <= body + 1, (src, right, body)
        if cell:
            assert float(cell) * width / natural >= MIN_CELL_PX, (src, cell, width, natural)
