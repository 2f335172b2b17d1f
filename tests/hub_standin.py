"""A loopback stand-in of the Hugging Face Hub's file API, for the hub tests (selected with HF_ENDPOINT).

It answers what huggingface_hub (2.x) asks while it downloads a snapshot, as the Hub answers it:

- ``GET /api/models/{repo}/revision/{rev}``: the repository's info, with ``sha`` the commit ``rev`` names;
- ``GET /api/models/{repo}/tree/{rev}?recursive=...``: the file listing (``oid``, ``size``, ``lfs`` for
  weights), one page;
- ``HEAD`` / ``GET /{repo}/resolve/{rev}/{path}``: the file, with ``X-Repo-Commit``, ``ETag`` (the git
  blob id; for LFS files the sha256, also as ``X-Linked-Etag`` with ``X-Linked-Size``) and
  ``Content-Length``.

Refusals carry the Hub's ``X-Error-Code``: an unknown repository (or a private one without its token)
answers 401 ``RepoNotFound`` (404 when a valid token was sent); a gated repository lists its files
but refuses them with 401 ``GatedRepo`` without a token and 403 with a token that has no access; an
unknown revision is 404 ``RevisionNotFound``, an unknown file 404 ``EntryNotFound``; a token the
stand-in does not know is 401 "Invalid credentials in Authorization header". Every request is
recorded (method, path, token) so tests can tell what was fetched, and that nothing was.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".onnx", ".h5")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    """A model repository: commits (sha → files), refs (branch or tag → sha), who may read it."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    private: bool = False
    readers: frozenset[str] = frozenset()  # tokens with access (gated or private)

    def add_commit(self, files: dict[str, bytes], *refs: str) -> str:
        digest = hashlib.sha1(json.dumps(sorted((p, hashlib.sha256(b).hexdigest()) for p, b in files.items())).encode())
        sha = digest.hexdigest()
        self.commits[sha] = dict(files)
        for ref in refs:
            self.refs[ref] = sha
        return sha

    def resolve(self, rev: str) -> str | None:
        return rev if rev in self.commits else self.refs.get(rev)


class HubStandIn:
    """The server: ``with HubStandIn(repos) as hub: ... hub.endpoint ...``."""

    def __init__(self, repos: dict[str, Repo], tokens: frozenset[str] = frozenset()):
        self.repos = repos
        self.tokens = frozenset(tokens) | frozenset(t for r in repos.values() for t in r.readers)
        self.requests: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="hub-stand-in")

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "HubStandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fetched(self) -> list[str]:
        """Paths of the files downloaded (GET of ``resolve``), in order."""
        return [path.split("/resolve/", 1)[1].split("/", 1)[1] for method, path, _ in self.requests
                if method == "GET" and "/resolve/" in path]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    # ------------------------------------------------------------------ answers
    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def do_GET(self) -> None:
                hub._answer(self, body=True)

        return Handler

    def _answer(self, req: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlsplit(req.path).path)
        auth = req.headers.get("authorization") or ""
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        with self._lock:
            self.requests.append((req.command, path, token))
        if token is not None and token not in self.tokens:
            return self._send(req, 401, {"error": "Invalid credentials in Authorization header"}, body,
                              {"X-Error-Message": "Invalid credentials in Authorization header"})
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            return self._api(req, "/".join(parts[2:4]), parts[4], parts[5], token, body)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._file(req, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), token, body)
        return self._send(req, 404, {"error": "not found"}, body)

    def _repo_or_refusal(self, req, repo_id: str, token: str | None, body: bool) -> Repo | None:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and token not in repo.readers):
            code = 404 if token is not None else 401
            self._send(req, code, {"error": "Repository not found"}, body,
                       {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
            return None
        return repo

    def _commit_or_refusal(self, req, repo: Repo, rev: str, body: bool) -> str | None:
        sha = repo.resolve(rev)
        if sha is None:
            self._send(req, 404, {"error": f"Invalid rev id: {rev}"}, body,
                       {"X-Error-Code": "RevisionNotFound", "X-Error-Message": f"Invalid rev id: {rev}"})
        return sha

    def _api(self, req, repo_id: str, kind: str, rev: str, token: str | None, body: bool) -> None:
        repo = self._repo_or_refusal(req, repo_id, token, body)
        if repo is None:
            return
        sha = self._commit_or_refusal(req, repo, rev, body)
        if sha is None:
            return
        files = repo.commits[sha]
        if kind == "revision":
            info = {"_id": hashlib.md5(repo_id.encode()).hexdigest()[:24], "id": repo_id, "modelId": repo_id,
                    "sha": sha, "private": repo.private, "gated": "manual" if repo.gated else False, "disabled": False,
                    "tags": [], "downloads": 0, "likes": 0, "library_name": "transformers",
                    "lastModified": "2026-01-01T00:00:00.000Z", "siblings": [{"rfilename": p} for p in sorted(files)]}
            return self._send(req, 200, info, body)
        listing = []
        for p in sorted(files):
            data = files[p]
            entry = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": p}
            if p.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            listing.append(entry)
        return self._send(req, 200, listing, body)

    def _file(self, req, repo_id: str, rev: str, name: str, token: str | None, body: bool) -> None:
        repo = self._repo_or_refusal(req, repo_id, token, body)
        if repo is None:
            return
        if repo.gated and token not in repo.readers:
            message = f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
            return self._send(req, 401 if token is None else 403, {"error": message}, body,
                              {"X-Error-Code": "GatedRepo", "X-Error-Message": message})
        sha = self._commit_or_refusal(req, repo, rev, body)
        if sha is None:
            return
        data = repo.commits[sha].get(name)
        if data is None:
            return self._send(req, 404, {"error": "Entry not found"}, body,
                              {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found", "X-Repo-Commit": sha})
        headers = {"X-Repo-Commit": sha, "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        if name.endswith(LFS_SUFFIXES):
            digest = hashlib.sha256(data).hexdigest()
            headers.update({"ETag": f'"{digest}"', "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(data))})
        else:
            headers["ETag"] = f'"{git_blob_id(data)}"'
        self._send_bytes(req, 200, data, body, headers)

    def _send(self, req, code: int, payload, body: bool, headers: dict | None = None) -> None:
        self._send_bytes(req, code, json.dumps(payload).encode(), body, {"Content-Type": "application/json", **(headers or {})})

    @staticmethod
    def _send_bytes(req, code: int, data: bytes, body: bool, headers: dict) -> None:
        req.send_response(code)
        for k, v in headers.items():
            req.send_header(k, v)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if body:
            req.wfile.write(data)
