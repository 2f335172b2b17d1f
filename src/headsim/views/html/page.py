"""The page parts every display shares: the inlined script bundle and style sheet, figures as inline
SVG or PNG, a fragment (what a notebook shows) and a standalone page (what ``to_html`` writes)."""

from __future__ import annotations

import base64
import html
import io
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ...errors import HeadsimError

ASSETS = "views/html/assets"
_EXPORT = re.compile(r"^export (?:async )?(?:const|function|class) (\w+)", re.MULTILINE)


def asset(name: str) -> str:
    """The text of ``assets/<name>``."""
    return resources.files("headsim").joinpath(f"{ASSETS}/{name}").read_text(encoding="utf-8")


def _as_namespace(source: str, imports: dict[str, str]) -> str:
    """An ES module's source as an expression returning an object of its exports: ``export`` dropped,
    each ``import * as X from './m.js'`` (or ``import { a, b } from './m.js'``) bound to the already built
    namespace ``imports[m]``."""
    names = _EXPORT.findall(source)

    def bind(m: re.Match) -> str:
        return f"const {m.group(1)} = {imports[m.group(2)]};"

    def pick(m: re.Match) -> str:
        return f"const {{ {m.group(1)} }} = {imports[m.group(2)]};"

    body = re.sub(r"^import \* as (\w+) from '\./(\w+)\.js';$", bind, source, flags=re.MULTILINE)
    body = re.sub(r"^import \{ ([\w, ]+) \} from '\./(\w+)\.js';$", pick, body, flags=re.MULTILINE)
    body = re.sub(r"^export ", "", body, flags=re.MULTILINE)
    return f"(function () {{\n{body}\nreturn {{ {', '.join(names)} }};\n}})()"


@lru_cache(maxsize=1)
def script_bundle() -> str:
    """The drawing code (common.js, draw.js: ``headsimViews.draw`` holds both) and the head explorer as one
    classic script defining ``window.headsimViews`` once (a page or notebook may hold many displays)."""
    common = _as_namespace(asset("common.js"), {})
    draw = _as_namespace(asset("draw.js"), {"common": "common"})
    widget = _as_namespace(asset("widget.js"), {"common": "common", "draw": "draw"})
    return ("(function () {\nif (window.headsimViews) return;\n"
            f"const common = {common};\nconst draw = Object.assign({{}}, common, {draw});\nconst widget = {widget};\n"
            "window.headsimViews = Object.assign({ draw }, widget);\n})();")


def script_tag(code: str) -> str:
    return "<script>" + code.replace("</", "<\\/") + "</script>"


def fragment(body: str) -> str:
    """``body`` in a ``div.hsv`` with the style sheet: what a notebook display shows."""
    return f'<div class="hsv"><style>{asset("style.css")}</style>{body}</div>'


def page(title: str, body: str) -> str:
    """A standalone HTML document of a fragment (opens offline; nothing to fetch)."""
    return ("<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title></head>\n<body>\n{body}\n</body>\n</html>\n")


def write_page(path: str | os.PathLike, title: str, body: str) -> Path:
    """Write :func:`page` to ``path`` (replaced whole; a one-line error when it cannot be written)."""
    from ...io import write_bytes

    path = Path(path)
    if path.is_dir():
        raise HeadsimError(f"{str(path)!r} is a directory", "pass the path of the .html file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes(path, page(title, body).encode("utf-8"))


def figure_svg(fig) -> str:
    """A matplotlib figure as an inline ``<svg>`` element (closed afterwards)."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    try:
        fig.savefig(buf, format="svg", bbox_inches="tight")
    finally:
        plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def figure_png_uri(fig, dpi: int = 90) -> str:
    """A matplotlib figure as a ``data:image/png`` URI (closed afterwards)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
