"""Reports of finished runs: corpus figures, the paper's claims as checks, index.html, comparisons.

* :func:`build_report` (``headsim report``): one run → figures (PNG + SVG), ``claims.json`` /
  ``claims.csv`` and a self-contained ``index.html``.
* :func:`compare_runs` (``headsim compare``): several runs → per-layer curves on shared axes and
  the claims side by side.
* :func:`compute_claims`: the paper's claims checked on a run's statistics.
"""

from __future__ import annotations

from importlib import import_module

_LAZY = {
    "build_report": "headsim.report.build",
    "load_report_run": "headsim.report.build",
    "ReportRun": "headsim.report.build",
    "compare_runs": "headsim.report.compare",
    "compare": "headsim.report.compare",
    "Comparison": "headsim.report.compare",
    "compute_claims": "headsim.report.claims",
    "token_shares": "headsim.report.claims",
    "Claim": "headsim.report.claims",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'headsim.report' has no attribute {name!r}")
