"""Rich notebook display and standalone HTML export for headsim's result objects, from one method.

A class mixes in :class:`HtmlDisplay` and defines ``_html_body()`` returning ``(title, body)``; the
HTML code itself lives in :mod:`headsim.views.html` and is imported only when a display is drawn.
"""

from __future__ import annotations

import os
from pathlib import Path


class HtmlDisplay:
    """``_repr_html_`` (Jupyter, VS Code) and :meth:`to_html` from the subclass's ``_html_body()``."""

    def _html_body(self) -> tuple[str, str]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _repr_html_(self) -> str:
        from .views.html.page import fragment

        return fragment(self._html_body()[1])

    def to_html(self, path: str | os.PathLike) -> Path:
        """Write this object's view as one standalone HTML file (inline script, style and figures:
        it opens offline, from a mail or a web page); returns its path."""
        from .views.html.page import fragment, write_page

        title, body = self._html_body()
        return write_page(path, title, fragment(body))
