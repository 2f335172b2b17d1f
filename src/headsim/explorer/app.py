"""The explorer's web server: a FastAPI app serving the page (``static/``) and the JSON API.

The model is loaded once, when the app is created, and never chosen by a client; a client can name
neither a model nor a file. The model runs in FastAPI's threadpool behind one lock (the
tokenizer too: a fast tokenizer must not be used from two threads at once), so concurrent
requests are safe. The last few windows analysed are cached by a hash of (text, seq_len), so
clicking through heads never reruns the model. Every user-fixable problem answers
``{"error": problem, "fix": fix}`` with :class:`~headsim.errors.HeadsimError`'s status, with
the same messages as the command line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Optional

from fastapi import FastAPI, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.datastructures import Headers
from starlette.middleware.trustedhost import TrustedHostMiddleware

from .. import __version__
from ..errors import HeadsimError, require
from ..model.load import LoadedModel, as_loaded
from ..views import TextView, check_window
from ..views.text_view import VIEW_RESOLUTION
from . import api

log = logging.getLogger("headsim.explorer")

STATIC = Path(__file__).parent / "static"
SHARED = Path(__file__).parent.parent / "views" / "html" / "assets"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ID_PATTERN = r"^[0-9a-f]{16}$"

CSP_PAGE = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
            "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# Swagger UI starts from an inline script; everything else it loads is vendored under /static
CSP_DOCS = CSP_PAGE.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")


# ---------------------------------------------------------------------------------------------
# request and error bodies (documented at /docs)


class ErrorBody(BaseModel):
    """Every error: what is wrong and how to fix it (the CLI prints the same two parts)."""

    error: str = Field(description="the problem, naming the offending value")
    fix: str = Field(description="what to do instead")


class AnalyzeRequest(BaseModel):
    """Analyse a text: cut it into windows and run the model on one of them."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="the text (UTF-8; the server refuses texts above its size limit with 413)",
                      examples=["The cat sat on the mat. The dog sat on the log."])
    seq_len: StrictInt = Field(api.DEFAULT_SEQ_LEN, description="tokens per window including [CLS] and [SEP] (the paper: 128)")
    window: StrictInt = Field(0, description="which window of a long text (0-based)")
    threshold: StrictFloat = Field(api.DEFAULT_THRESHOLD,
                                   description="high-similarity threshold for the per-head pair counts, in (0, 1]")


class HeadRef(BaseModel):
    """One head of an analysed text, by analysis id (from /api/analyze) or by text."""

    model_config = ConfigDict(extra="forbid")
    id: Optional[str] = Field(None, pattern=ID_PATTERN, description="analysis id returned by /api/analyze")
    text: Optional[str] = Field(None, description="the text, when no id is given (or the id has left the cache)")
    seq_len: StrictInt = Field(api.DEFAULT_SEQ_LEN, description="window length used with text")
    window: StrictInt = Field(0, description="which window (0-based)")
    layer: StrictInt = Field(description="layer, numbered from 1")
    head: StrictInt = Field(description="head, numbered from 1")


class HeadRequest(HeadRef):
    """One head of an analysed text, by analysis id (from /api/analyze) or by text."""

    sep_layer: Optional[StrictInt] = Field(None, description="layer whose summed attention columns mark separators "
                                                             "(numbered from 1; default the last, as in the paper's Fig 5)")
    sep_threshold: StrictFloat = Field(api.DEFAULT_SEP_THRESHOLD,
                                       description="separator threshold on normalised column attention, in (0, 1]")


class ZoomRequest(HeadRef):
    """An exact region of one head of an analysed window, by analysis id (from /api/analyze) or by text."""

    rows: tuple[StrictInt, StrictInt] = Field(description="query token positions [start, stop), from 0")
    cols: tuple[StrictInt, StrictInt] = Field(description="key token positions [start, stop), from 0")


ERRORS = {
    404: {"model": ErrorBody, "description": "unknown analysis id, or no run loaded"},
    413: {"model": ErrorBody, "description": "text above the server's size limit"},
    422: {"model": ErrorBody, "description": "malformed request or a value out of range"},
}


# ---------------------------------------------------------------------------------------------
# the state behind the endpoints


class Explorer:
    """Model, run, limits and the extraction cache of one server."""

    def __init__(self, loaded: LoadedModel, run: api.ExplorerRun | None, max_text_bytes: int,
                 cache_windows: int = 8, cache_bytes: int = 1 << 30, resolution: int = VIEW_RESOLUTION) -> None:
        self.loaded = loaded
        self.resolution = int(resolution)
        self.run = run
        self.max_text_bytes = int(max_text_bytes)
        self.cache_windows = max(1, int(cache_windows))
        self.cache_bytes = int(cache_bytes)
        self.model_lock = threading.Lock()  # model and tokenizer
        self.cache_lock = threading.Lock()
        self.prepared: OrderedDict[str, api.Prepared] = OrderedDict()
        self.results: OrderedDict[tuple[str, int], TextView] = OrderedDict()
        self.model_runs = 0  # forward passes so far (the tests read it to check the cache)
        self.stage: tuple[str, float] | None = None  # what the latest analysis is doing, since when (/api/status)

    def working(self, stage: str | None) -> None:
        """Say what the analysis is doing now (``None``: done), for the page's live status."""
        self.stage = None if stage is None else (stage, time.monotonic())

    # -- cache -------------------------------------------------------------------------------

    def _remember(self, store: OrderedDict, key, value, keep: int) -> None:
        store[key] = value
        store.move_to_end(key)
        while len(store) > keep:
            store.popitem(last=False)

    def prepare(self, text: str, seq_len: int) -> api.Prepared:
        """Windows of ``text`` (cached by hash of text and seq_len)."""
        api.check_text_size(text, self.max_text_bytes)
        key = api.analysis_id(text, seq_len)
        with self.cache_lock:
            if key in self.prepared:
                self.prepared.move_to_end(key)
                return self.prepared[key]
        with self.model_lock:
            prepared = api.prepare(text, self.loaded, seq_len)
        with self.cache_lock:
            self._remember(self.prepared, prepared.id, prepared, 4 * self.cache_windows)
        return prepared

    def lookup(self, analysis: str) -> api.Prepared:
        with self.cache_lock:
            found = self.prepared.get(analysis)
        require(found is not None, f"analysis {analysis!r} is not in the server's cache "
                                   f"(it keeps the last {4 * self.cache_windows} texts)",
                "POST the text to /api/analyze again, or send the text with this request", status=404)
        return found

    def window(self, prepared: api.Prepared, window: int) -> TextView:
        """One window's tensors: from the cache, or by running the model under the lock."""
        window = check_window(window, prepared.n_windows)
        key = (prepared.id, window)
        with self.cache_lock:
            if key in self.results:
                self.results.move_to_end(key)
                return self.results[key]
        with self.model_lock:
            with self.cache_lock:  # another request may have computed it while we waited
                if key in self.results:
                    return self.results[key]
            data = api.compute_window(self.loaded, prepared, window, self.resolution)
            self.model_runs += 1
        with self.cache_lock:
            self.results[key] = data
            while len(self.results) > 1 and (len(self.results) > self.cache_windows or
                                             sum(d.nbytes for d in self.results.values()) > self.cache_bytes):
                self.results.popitem(last=False)
        return data

    def resolve(self, analysis: str | None, text: str | None, seq_len: int) -> api.Prepared:
        """An analysis by id (preferred) or by text."""
        require(analysis is not None or text is not None, "neither id nor text given",
                "pass the id returned by /api/analyze, or the text")
        if analysis is not None:
            try:
                return self.lookup(analysis)
            except HeadsimError:
                if text is None:
                    raise
        return self.prepare(text, seq_len)


# ---------------------------------------------------------------------------------------------
# middleware (pure ASGI)


class BodyLimit:
    """Refuse request bodies above ``limit`` bytes with 413 before they are parsed."""

    def __init__(self, app, limit: int) -> None:
        self.app = app
        self.limit = int(limit)

    async def _reject(self, scope, receive, send, size: str) -> None:
        err = HeadsimError(f"the request body is {size} bytes, above this server's limit of {self.limit:,} bytes",
                           "send a shorter text, or restart the server with a larger --max-text-kb", status=413)
        await error_response(err)(scope, receive, send)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.limit:
                    await self._reject(scope, receive, send, f"{declared:,}")
                    return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await self._reject(scope, receive, send, f"more than {self.limit:,}")
                return
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class HostCheck(TrustedHostMiddleware):
    """Refuse requests for other ``Host`` names (DNS rebinding) with the API's error shape."""

    async def __call__(self, scope, receive, send) -> None:
        if self.allow_any or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "").split(":")[0]
        if any(host == p or (p.startswith("*") and host.endswith(p[1:])) for p in self.allowed_hosts):
            await self.app(scope, receive, send)
            return
        err = HeadsimError(f"requests for host {host!r} are refused: this server answers only to {', '.join(self.allowed_hosts)}",
                           "open the page through the address headsim serve printed (e.g. http://127.0.0.1:8000/)", status=400)
        await error_response(err)(scope, receive, send)


class SecurityHeaders:
    """Content-Security-Policy (everything from this server only) and friends on every response."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = CSP_DOCS if scope.get("path") == "/docs" else CSP_PAGE

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", csp.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def error_response(err: HeadsimError) -> JSONResponse:
    return JSONResponse({"error": err.problem, "fix": err.fix}, status_code=err.status)


def _validation_message(errors: list[dict]) -> str:
    parts = []
    for e in errors[:5]:
        where = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body", "query"))
        parts.append(f"{where or 'request'}: {e.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "malformed request: " + "; ".join(parts) + more


# ---------------------------------------------------------------------------------------------


def create_app(model: LoadedModel | str | None = "default", run_dir: str | Path | None = None, *,
               max_text_bytes: int = 100_000, device: str | None = None, cache_windows: int = 8,
               cache_bytes: int = 1 << 30, allowed_hosts: list[str] | tuple[str, ...] | None = None,
               revision: str | None = None, resolution: int = VIEW_RESOLUTION) -> FastAPI:
    """Build the explorer app; the model (and run) are loaded now and fixed for the server's life.

    Args:
        model: ``"default"`` (embedded all-MiniLM-L6-v2), a hub id, a local directory, or a
            :class:`~headsim.model.load.LoadedModel`; ``None`` with ``run_dir``: the model the run
            recorded (its source, at its commit). Never loaded with remote code.
        revision: a hub model's branch, tag or commit (default: the commit the run was made with, when
            ``model`` is the run's model; else ``main``).
        run_dir: a finished run directory (``headsim analyze``) whose head statistics colour the model
            view and fill the corpus profile.
        max_text_bytes: largest text accepted (UTF-8 bytes); larger → 413.
        device: ``cpu`` or ``cuda`` (default: CUDA when available).
        cache_windows: analysed windows kept (LRU), also bounded by ``cache_bytes``.
        allowed_hosts: accepted ``Host`` headers (``headsim serve`` passes the loopback names when
            bound to loopback, which stops DNS-rebinding pages); ``None`` accepts any.
        resolution: a window of more tokens is given as a binned overview on this many position bins
            (exact regions from ``/api/zoom``).
    """
    require(isinstance(max_text_bytes, int) and max_text_bytes >= 1, f"max_text_bytes {max_text_bytes!r} is not positive",
            "pass a size limit of at least 1 byte (e.g. 100000)")
    run = api.ExplorerRun(run_dir) if run_dir is not None else None  # check the run before the slow model load
    if model is None:
        require(run is not None, "no model given", "pass a model, or a run directory whose model to use")
        model = run.model_source
    if revision is None and run is not None and run.commit and str(model) in (run.model_name, run.model_source):
        revision = run.commit
    loaded = as_loaded(model, device=device, **({"revision": revision} if revision else {}))
    if run is not None:
        run.check_model(loaded)
    state = Explorer(loaded, run, max_text_bytes, cache_windows, cache_bytes, resolution)

    app = FastAPI(
        title="headsim explorer",
        version=__version__,
        summary="Browse attention heads by their attention maps and context similarity of their output vectors.",
        description=(
            "JSON API behind the headsim explorer page (`/`). The model is fixed at server start "
            f"(**{loaded.name}**, {loaded.n_layers} layers × {loaded.n_heads} heads). {api.NUMBERING}. "
            "Errors answer `{\"error\": problem, \"fix\": fix}`: 404 unknown analysis id or no run loaded, "
            "413 text above the size limit, 422 malformed request or value out of range."
        ),
        docs_url=None,
        redoc_url=None,
    )
    app.state.explorer = state

    # -- errors ------------------------------------------------------------------------------

    @app.exception_handler(HeadsimError)
    async def _headsim_error(_request: Request, exc: HeadsimError):
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError):
        errors = exc.errors()
        detail = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors]
        body = {"error": _validation_message(errors), "fix": "see the request schema at /docs",
                "detail": jsonable_encoder(detail)}
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException):
        fix = "see the API at /docs" if exc.status_code in (404, 405) else "send a well-formed request (the API is described at /docs)"
        return JSONResponse({"error": str(exc.detail), "fix": fix}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception):
        log.exception("request %s %s failed", request.method, request.url.path)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}: {str(exc)[:300]})",
                             "fix": "this is a bug in headsim, not in your input; the server keeps running — "
                                    "please report it with the text that caused it"},
                            status_code=500)

    # -- page and docs -----------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    @app.get("/docs", include_in_schema=False)
    def docs():
        return get_swagger_ui_html(
            openapi_url=app.openapi_url, title="headsim explorer API",
            swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None, "defaultModelsExpandDepth": 0},  # no external badge
        )

    app.mount("/static/shared", StaticFiles(directory=SHARED), name="shared")  # drawing code shared with notebooks
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # -- API ---------------------------------------------------------------------------------

    @app.get("/api/info", tags=["explorer"])
    def info() -> dict:
        """Model dimensions, run summary, limits, defaults and the names of the head statistics."""
        return api.info_payload(state.loaded, state.run, state.max_text_bytes)

    @app.get("/api/examples", tags=["explorer"])
    def examples() -> dict:
        """Built-in example paragraphs (the inputs of the paper's Figs 4 and 9) and, with a run,
        a few of its windows decoded back to text."""
        return api.examples_payload(state.loaded, state.run)

    @app.post("/api/analyze", tags=["explorer"], responses=ERRORS)
    def analyze(req: AnalyzeRequest) -> dict:
        """Tokenise the text into windows, run the model on one window and summarise every head.

        Returns the analysis `id` (use it with /api/head), the window's tokens with character
        offsets (into the returned `text`) and sentence numbers, the model dimensions, and per head
        (`[layer-1][head-1]`): `n_high` pairs above `threshold`, `high_counts[k]` pairs above k/100
        (for any threshold on the page), attention fractions, and max-pooled thumbnails (0..100)
        of the normalised similarity and the attention map.
        """
        try:
            state.working("splitting the text into windows")
            prepared = state.prepare(req.text, req.seq_len)
            window = check_window(req.window, prepared.n_windows)
            n = int(prepared.windows.attention_mask[window].sum())
            m = state.loaded
            state.working(f"running the model on window {window} of 0–{prepared.n_windows - 1}: {n:,} tokens through "
                          f"{m.n_layers} layers × {m.n_heads} heads")
            wd = state.window(prepared, window)
            state.working(f"summarising {m.n_layers * m.n_heads:,} heads of {n:,} tokens")
            return api.analyze_payload(prepared, wd, state.loaded, req.threshold)
        finally:
            state.working(None)

    @app.get("/api/status", tags=["explorer"])
    def status() -> dict:
        """What the analysis in progress is doing (``busy``, ``stage``, ``seconds`` since it began), for a
        live status while a long window runs."""
        now = state.stage
        return {"busy": now is not None, "stage": now[0] if now else None,
                "seconds": round(time.monotonic() - now[1], 1) if now else None}

    def _head(req: HeadRequest) -> dict:
        if req.text is not None:
            api.check_text_size(req.text, state.max_text_bytes)
        prepared = state.resolve(req.id, req.text, req.seq_len)
        wd = state.window(prepared, req.window)
        return api.head_payload(prepared, wd, state.loaded, req.layer, req.head,
                                sep_layer=req.sep_layer, sep_threshold=req.sep_threshold)

    @app.post("/api/head", tags=["explorer"], responses=ERRORS)
    def head_post(req: HeadRequest) -> dict:
        """One head of one window: attention map and normalised similarity over the valid tokens
        (rounded to 4 decimals), and the separator columns with the block-averaged similarity
        (paper Fig 5). The high-similarity mask is `similarity > threshold`, left to the client."""
        return _head(req)

    @app.get("/api/head", tags=["explorer"], responses=ERRORS)
    def head_get(
        layer: Annotated[int, Query(description="layer, numbered from 1")],
        head: Annotated[int, Query(description="head, numbered from 1")],
        id: Annotated[Optional[str], Query(pattern=ID_PATTERN, description="analysis id from /api/analyze")] = None,
        text: Annotated[Optional[str], Query(description="the text, when no id is given")] = None,
        seq_len: int = api.DEFAULT_SEQ_LEN,
        window: int = 0,
        sep_layer: Annotated[Optional[int], Query(description="separator layer, from 1 (default last)")] = None,
        sep_threshold: float = api.DEFAULT_SEP_THRESHOLD,
    ) -> dict:
        """The same as POST /api/head, with query parameters."""
        return _head(HeadRequest(id=id, text=text, seq_len=seq_len, window=window, layer=layer, head=head,
                                 sep_layer=sep_layer, sep_threshold=sep_threshold))

    @app.post("/api/zoom", tags=["explorer"], responses=ERRORS)
    def zoom(req: ZoomRequest) -> dict:
        """Exact attention and normalised similarity of one head over a region of query rows × key
        columns (at most 512 × 512 tokens): what a drag-select on a long window's binned overview
        asks for. S is divided by the head's maximum over the whole window, as in the overview."""
        if req.text is not None:
            api.check_text_size(req.text, state.max_text_bytes)
        prepared = state.resolve(req.id, req.text, req.seq_len)
        wd = state.window(prepared, req.window)
        return api.zoom_payload(prepared, wd, req.layer, req.head, req.rows, req.cols)

    @app.get("/api/heads", tags=["run"], responses={404: ERRORS[404]})
    def heads() -> dict:
        """The loaded run's statistics of every head (rows of heads.parquet; 404 without a run)."""
        return api.heads_payload(state.run)

    @app.get("/api/heads/{layer}/{head}", tags=["run"], responses=ERRORS)
    def profile(layer: int, head: int) -> dict:
        """One head's corpus profile: statistics with their rank among all heads, the layer's means,
        and its histogram of high-similarity pair distances (from stats.nc)."""
        return api.profile_payload(state.run, layer, head)

    # -- middleware (last added runs first) ----------------------------------------------------
    app.add_middleware(GZipMiddleware, minimum_size=2048)
    app.add_middleware(BodyLimit, limit=6 * max_text_bytes + 65536)  # JSON may escape each character
    app.add_middleware(SecurityHeaders)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed_hosts=list(allowed_hosts))
    return app
