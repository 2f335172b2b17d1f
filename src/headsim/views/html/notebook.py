"""Exporting an executed notebook to HTML that opens offline: nbconvert's own page loads MathJax,
require.js and mermaid from a CDN; :func:`offline_exporter` points those at empty inline scripts (headsim's
displays need none of them)."""

from __future__ import annotations

EMPTY_SCRIPT = "data:text/javascript,"
CDN_SETTINGS = ("mathjax_url", "require_js_url", "jquery_url", "mermaid_js_url", "mermaid_layout_elk_js_url")


def offline_exporter(**kwargs):
    """An ``nbconvert.HTMLExporter`` whose page requests nothing from the network (``kwargs`` go to it);
    from the shell: ``jupyter nbconvert --to html --HTMLExporter.mathjax_url=data:text/javascript, …``."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(**kwargs)
    for name in CDN_SETTINGS:
        if exporter.has_trait(name):
            setattr(exporter, name, EMPTY_SCRIPT)
    return exporter
