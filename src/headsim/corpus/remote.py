"""Corpora at URLs (``s3://``, ``gs://``, ``http(s)://``, ``hdfs://``, ``file://``, any fsspec protocol
whose package is installed): fetched here, read by :func:`headsim.corpus.load_corpus`, the one reader of
both engines.

A corpus URL is read part by part (:mod:`headsim.corpus.parts`): a folder or a glob is listed through
the store's file system, a ``.txt`` or ``.jsonl`` file is copied into a temporary directory under its
own name (:func:`fetch`) and read there, a ``.parquet`` file's footer and row groups are read in ranges
(a web server's file is copied whole), so a corpus gives the same documents, ``doc_id`` values and
``sha256`` wherever it lies; the :class:`~headsim.corpus.Corpus` is named by its URL.

Every remote call runs under a deadline (:func:`timeout`: ``$HEADSIM_URL_TIMEOUT``, 30 s by default,
for each call: listing, opening, every 1 MiB read) in a helper thread while this thread waits in
short steps, so SIGINT and SIGTERM stop it at once; a call that times out or cannot reach the store
is tried again up to :data:`RETRIES` times (1 s, 2 s apart), a missing file or a refusal of the
credentials is not. Every failure is one line naming the URL, the cause (no network, no credentials,
not found) and the fix.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from headsim.errors import HeadsimError, require

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
TIMEOUT_ENV = "HEADSIM_URL_TIMEOUT"
TIMEOUT_SECONDS = 30.0
RETRIES = 2  # further tries of a read that timed out or could not reach the store
CHUNK = 1 << 20
T = TypeVar("T")


def is_url(spec: object) -> bool:
    """``scheme://…`` (a local path or ``"default"`` is not)."""
    return isinstance(spec, str) and bool(_URL.match(spec))


def timeout() -> float:
    """Seconds one remote call may take: ``$HEADSIM_URL_TIMEOUT``, else :data:`TIMEOUT_SECONDS`."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        seconds = float(value) if value else TIMEOUT_SECONDS
    except ValueError:
        seconds = -1.0
    require(seconds > 0, f"{TIMEOUT_ENV}={value!r} is not a positive number of seconds",
            f"set {TIMEOUT_ENV} to the seconds a remote read may take, e.g. 30, or unset it")
    return seconds


class _Late(TimeoutError):
    """A remote call that did not answer within the deadline."""


def call(fn: Callable[..., T], *args, seconds: float | None = None) -> T:
    """``fn(*args)`` in a daemon thread, waited for at most ``seconds`` (:func:`timeout`) in short steps
    (signal handlers run between them); a call still running then is left behind and :class:`_Late`
    raised. A call blocked in a library's C code can neither hang this thread nor delay the exit."""
    seconds = timeout() if seconds is None else seconds
    done, box = threading.Event(), {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="headsim-url").start()
    deadline = time.monotonic() + seconds
    while not done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            raise _Late(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


# ------------------------------------------------------------------ what went wrong, in one line

_NETWORK = ("serverdisconnected", "clientconnectorerror", "clientoserror", "resolve host", "could not resolve", "couldn't resolve", "name or service not known", "temporary failure in name",
            "connection refused", "couldn't connect", "cannot connect", "network is unreachable", "no route to host",
            "network_connection", "timed out", "connection reset", "server disconnected", "curl error", "curlcode")
_CREDENTIALS = ("credential", "oauth2", "access token", "accessdenied", "access denied", "forbidden", "unauthorized",
                "unauthenticated", "invalidaccesskeyid", "signaturedoesnotmatch", "permission", "401", "403")
_MISSING = ("not found", "nosuchkey", "nosuchbucket", "does not exist", "no such file", "404")


def cause(exc: BaseException) -> str:
    """``"no network"``, ``"no credentials"``, ``"not found"`` or ``"failed"`` for a remote read's error."""
    chain, seen = [], exc
    while seen is not None and len(chain) < 8:  # fsspec's http raises FileNotFoundError from the real cause
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    text = " | ".join(f"{type(e).__name__}: {e}" for e in chain).lower()
    if any(isinstance(e, (_Late, ConnectionError)) for e in chain) or any(k in text for k in _NETWORK):
        return "no network"
    if isinstance(exc, FileNotFoundError) or any(k in text for k in _MISSING):
        return "not found"
    if isinstance(exc, PermissionError) or any(k in text for k in _CREDENTIALS):
        return "no credentials"
    return "failed"


def _fix(url: str, why: str) -> str:
    scheme = url.split("://", 1)[0].lower()
    if why == "not found":
        return "check the URL (a .txt, .jsonl or .parquet file, or a folder or glob of them)"
    if why == "no credentials":
        return {"s3": "set AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) for that bucket",
                "gs": "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file (or run gcloud auth "
                      "application-default login) with access to that bucket",
                "gcs": "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file with access to that bucket",
                }.get(scheme, "check that you may read that URL (credentials, access rights)")
    if why == "no network":
        return (f"check the network and the host, or copy the corpus to a local path; a slow store may need "
                f"{TIMEOUT_ENV}=SECONDS (now {timeout():g})")
    return "check the URL, or copy the corpus to a local path"


def url_error(url: str, exc: BaseException) -> HeadsimError:
    """The one line for a failed read of ``url``: the cause, the library's first line, the fix."""
    why = cause(exc)
    detail = re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
    detail = detail if len(detail) <= 240 else detail[:240] + "…"
    return HeadsimError(f"cannot read corpus URL {url!r}: {why} ({detail})", _fix(url, why))


def _transient(exc: BaseException) -> bool:
    return cause(exc) == "no network"


# ------------------------------------------------------------------ the file systems


def filesystem(url: str):
    """``(fsspec file system, path inside it)`` for ``url``, each with bounded retries of its own:
    Google Cloud Storage (pyarrow's) with a retry limit inside :func:`timeout`, http(s) through fsspec
    with connect and read timeouts, everything else by pyarrow (S3: the AWS SDK's own connect and
    request timeouts) or else fsspec. The caller runs this under :func:`call`."""
    import datetime

    import pyarrow as pa
    import pyarrow.fs as pafs
    from fsspec.implementations.arrow import ArrowFSWrapper

    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("gs", "gcs") and "?" not in rest:
        limit = datetime.timedelta(seconds=max(1.0, timeout() / 2))
        return ArrowFSWrapper(pafs.GcsFileSystem(retry_time_limit=limit)), rest
    if scheme in ("http", "https"):
        return _fsspec(url, client_kwargs=_http_timeouts())
    try:
        fs, path = pafs.FileSystem.from_uri(url)
        return ArrowFSWrapper(fs), path
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as arrow_error:
        reason = str(arrow_error).splitlines()[0]
    try:
        return _fsspec(url)
    except HeadsimError as exc:
        raise HeadsimError(f"{exc.problem}; pyarrow: {reason}", exc.fix) from None


def _http_timeouts() -> dict:
    try:
        import aiohttp
    except ImportError:
        return {}  # fsspec's own error names the missing package
    seconds = timeout()
    return {"timeout": aiohttp.ClientTimeout(total=None, connect=seconds, sock_connect=seconds, sock_read=seconds)}


def _fsspec(url: str, **options):
    try:
        import fsspec.core

        return fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:  # the protocol's package (s3fs, gcsfs, aiohttp, …) is not installed
        raise HeadsimError(f"cannot open corpus URL {url!r}: {str(exc).splitlines()[0]}",
                           "install the file system's package (e.g. pip install aiohttp for http(s) URLs, s3fs, gcsfs) "
                           "or copy the corpus to a local path") from None
    except Exception as exc:  # unknown protocol, a malformed URL
        raise HeadsimError(f"cannot open corpus URL {url!r}: {str(exc).splitlines()[0]}",
                           "check the URL, install the file system's package (e.g. s3fs, gcsfs) or copy the corpus "
                           "to a local path") from None


def _copy(fs, src: str, dst: Path) -> None:
    stream = call(fs.open, src, "rb")
    try:
        with open(dst, "wb") as fout:
            while block := call(stream.read, CHUNK):
                fout.write(block)
    finally:
        try:
            call(stream.close, seconds=5)
        except BaseException:  # noqa: BLE001 - a stream that cannot close is left behind
            pass


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _fetch_once(url: str, into: Path) -> Path:
    fs, path = call(filesystem, url)
    call(fs.info, path)  # FileNotFoundError: not found
    local = into / (_name(path) or "corpus")
    _copy(fs, path, local)
    return local


def fetch(url: str, into: Path) -> Path:
    """Copy the file ``url`` names into the directory ``into``; the local path that stands for it. A try
    that timed out or could not reach the store is made again (:data:`RETRIES`), from scratch."""
    for attempt in range(RETRIES + 1):
        work = Path(tempfile.mkdtemp(dir=into))
        try:
            return _fetch_once(url, work)
        except HeadsimError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyarrow, fsspec, aiohttp and OS errors alike
            shutil.rmtree(work, ignore_errors=True)
            if attempt == RETRIES or not _transient(exc):
                raise url_error(url, exc) from None
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")
