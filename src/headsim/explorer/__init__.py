"""Interactive explorer: a local web page (and JSON API) to browse heads, attention and context similarity.

Start it with ``headsim serve`` or build the app yourself::

    from headsim.explorer import create_app
    app = create_app("default", run_dir="runs/wiki")   # serve with uvicorn

Payload builders live in :mod:`headsim.explorer.api` (no HTTP); the page is plain HTML/CSS/JS in
``static/`` with Plotly.js vendored, so it works offline.
"""

from __future__ import annotations


def create_app(*args, **kwargs):
    """See :func:`headsim.explorer.app.create_app` (imported lazily: FastAPI loads only when serving)."""
    from .app import create_app as _create_app

    return _create_app(*args, **kwargs)


__all__ = ["create_app"]
