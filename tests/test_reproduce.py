"""`headsim reproduce` end to end on a small run: figures, claims, the page in Chromium, report, compare.

The reproduction runs as a child process, as a user runs it; the commands on its output (report, compare)
run in-process through :func:`headsim.cli.run_app`, what the console script calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from browser_support import ARGS, CHROMIUM, MISSING
from headsim.cli import run_app

pytestmark = pytest.mark.slow

CORPUS_FIGURES = ["fig02_summed_attention", "fig03_zeroed_attention", "fig06_repeat_probability",
                  "fig07_distance_histograms", "fig08_same_sentence", "fig10_locations", "fig11_anchors",
                  "fig12_summed_similarity", "fig13_layer_distances", "sim_value_histogram"]
TEXT_FIGURES = ["fig04_attention", "fig05_blocks", "fig09_pairs"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "headsim.cli", *args], capture_output=True, text=True, env=env)


def _app(capsys, *args: str) -> tuple[int, str]:
    """A command in-process through run_app (what the console script calls): its exit code and stderr."""
    capsys.readouterr()
    code = run_app(list(args))
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("repro") / "report"
    res = _cli("reproduce", "--windows", "24", "--seq-len", "48", "--window-lengths", "48,96", "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out


def test_every_figure_exists(report):
    for stem in CORPUS_FIGURES:
        for ext in ("png", "svg"):
            assert (report / f"{stem}.{ext}").stat().st_size > 1000, stem
    for stem in TEXT_FIGURES:
        for ext in ("png", "svg"):
            assert (report / "example" / f"{stem}.{ext}").stat().st_size > 1000, stem


def test_claims_are_computed_from_the_run(report):
    data = json.loads((report / "claims.json").read_text())
    claims = {c["id"]: c for c in data["claims"]}
    assert len(claims) >= 7
    assert all(c["verdict"] in ("holds", "does not hold", "not applicable") for c in claims.values())
    heads = pd.read_parquet(report / "run" / "heads.parquet")
    layers = pd.read_parquet(report / "run" / "layers.parquet")
    assert data["windows"] == 24
    # recompute two claims independently from the tables
    same = claims["c3_same_sentence"]["numbers"]
    valid = heads[heads["n_pairs"] > 0]
    assert same["above"] == int((valid["p_same_sentence"] > valid["p_same_sentence_chance"]).sum())
    assert same["heads"] == len(valid)
    means = layers.sort_values("layer")["mean_distance"].to_numpy()
    dist = claims["c4_distances"]["numbers"]
    assert dist["first"] == pytest.approx(means[0]) and dist["last"] == pytest.approx(means[-1])
    verdict = claims["c4_distances"]["verdict"]
    assert (verdict == "holds") == (dist["drop_middle"] >= 0.10) or verdict == "not applicable"
    import html

    page = html.unescape((report / "index.html").read_text())
    assert "all-MiniLM-L6-v2" in page and "not the paper's BERT-base" in page


def test_window_lengths_over_the_same_text(report):
    """--window-lengths 48,96: the main run is the 48-token one; 96 tokens cover the same text (24 × 46 / 94 → 12
    windows) in OUT/run-96, and the report compares them, naming the model."""
    meta = json.loads((report / "run-96" / "run.json").read_text())
    assert meta["seq_len"] == 96 and meta["windows"] == 12 and not (report / "run-48").exists()
    table = pd.read_csv(report / "window_lengths.csv")
    assert set(table["seq_len"]) == {48, 96}
    layers = pd.read_parquet(report / "run-96" / "layers.parquet")
    got = table[(table["seq_len"] == 96) & (table["statistic"] == "mean_distance")].dropna(subset=["layer"])
    assert got.sort_values("layer")["value"].to_numpy() == pytest.approx(layers.sort_values("layer")["mean_distance"].to_numpy())
    page = (report / "index.html").read_text()
    assert "Window length: all-MiniLM-L6-v2" in page and "12 windows of 96 tokens" in page


@pytest.mark.browser
def test_page_loads_in_chromium(report, tmp_path):
    if MISSING:
        pytest.skip(MISSING)
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((report / "index.html").as_uri())
        page.wait_for_load_state("load")
        for img in page.query_selector_all("img"):  # lazy images load once scrolled to
            img.scroll_into_view_if_needed()
        page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=30_000)
        images = page.eval_on_selector_all("img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
        browser.close()
    assert len(images) >= len(CORPUS_FIGURES) + len(TEXT_FIGURES)
    broken = [src for src, ok in images if not ok]
    assert not broken, broken
    assert not errors, errors


def test_compare_two_runs(report, tmp_path, capsys):
    other = report / "run-96"  # the second run reproduce made (12 windows of 96 tokens): no third analysis needed
    code, err = _app(capsys, "compare", str(report / "run"), str(other), "--out", str(tmp_path / "cmp"))
    assert code == 0, err
    assert (tmp_path / "cmp" / "index.html").exists() and (tmp_path / "cmp" / "compare_layers.png").exists()


def test_report_of_missing_run_is_a_clear_error(tmp_path, capsys):
    code, err = _app(capsys, "report", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in err and "Traceback" not in err
