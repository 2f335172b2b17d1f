"""Shared set-up for tests that open pages in Debian's headless Chromium through Playwright."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--allow-file-access-from-files"]
MISSING = (f"{CHROMIUM} is absent: install Debian's Chromium (apt-get install -y chromium) to run the browser tests"
           if not Path(CHROMIUM).exists() else "")
