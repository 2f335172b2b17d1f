#!/usr/bin/env python
"""How long a standalone explorer page takes to become interactive in headless Chromium (Debian's, through
Playwright), at the sizes a user opens: a 2,048-token window of 32 × 32 heads on 128 position bins, and
MiniLM's 6 × 12 heads at 128 tokens.

    python benchmarks/explorer_load.py --json benchmarks/results/explorer-load-cpu.json

Each page is the one ``tests/browser_support.long_standalone_page`` writes (what ``headsim export`` writes,
seeded random matrices standing in for a model); it is loaded ``--loads`` times in fresh tabs of one
browser, and the time from navigation to the page's mount (``data-mounted="done"``, read from
``performance.now()``) is recorded with the page's size. A budget of 2 s at 1,024 heads was the explorer
issue's; this script measures it, no test asserts it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from browser_support import MISSING, chromium, long_standalone_page  # noqa: E402

WORDS = "The river turns the wheel of the old mill, and the miller sells flour in the town.".split()
#: (name, tokens, layers, heads, position bins: at most the tokens)
PAGES = (("32x32-2048", 2048, 32, 32, 128), ("6x12-128", 128, 6, 12, 128))

MOUNTED = "() => document.querySelector('.hsv-root').dataset.mounted === 'done'"


def mount_ms(browser, path: Path) -> float:
    """Milliseconds from navigation to ``path``'s mount, in a fresh tab (its errors raised)."""
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        page.wait_for_function(MOUNTED, timeout=120_000, polling=10)
        ms = page.evaluate("() => performance.now()")
    finally:
        page.close()
    if errors:
        raise RuntimeError(f"{path.name}: page errors: {errors}")
    return float(ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loads", type=int, default=7, help="loads of each page (default 7)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    if MISSING:
        print(f"error: {MISSING}", file=sys.stderr)
        return 2
    if args.loads < 1:
        print("error: --loads must be at least 1", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp, chromium() as browser:
        for name, n, layers, heads, bins in PAGES:
            path = long_standalone_page(Path(tmp) / f"{name}.html", WORDS, layers, heads, n=n, bins=bins)
            times = [mount_ms(browser, path) for _ in range(args.loads)]
            rows.append({"page": name, "tokens": n, "layers": layers, "heads": heads, "bins": bins,
                         "bytes": path.stat().st_size, "mount_ms": times, "median_ms": statistics.median(times)})
            print(f"{name}: {path.stat().st_size / 1e6:.1f} MB, mounted in {statistics.median(times):.0f} ms "
                  f"(median of {len(times)}; {min(times):.0f}-{max(times):.0f})")
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.processor()
              or platform.machine(), "browser": "Debian chromium, headless", "pages": rows}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
