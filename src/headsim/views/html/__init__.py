"""Self-contained HTML of headsim's objects: notebook displays (``_repr_html_``) and standalone pages.

Everything a display needs travels inside it: the drawing code (``assets/common.js`` and ``assets/draw.js``,
shared with the explorer, which loads them under ``/static/shared/``) and the head explorer (``assets/widget.js``)
inlined as one script, the style sheet, the data, and a static PNG or SVG that shows where scripts do
not run (untrusted notebooks, e-mail). Nothing is fetched from anywhere.
"""

from __future__ import annotations

from .heads import explorer_fragment, explorer_payload, text_view_html
from .page import figure_png_uri, figure_svg, fragment, page, script_bundle, write_page

__all__ = [
    "explorer_fragment",
    "explorer_payload",
    "figure_png_uri",
    "figure_svg",
    "fragment",
    "page",
    "script_bundle",
    "text_view_html",
    "write_page",
]
