"""Corpora at URLs through the one reader (:func:`headsim.corpus.load_corpus`), on both engines: an
http server on 127.0.0.1 stands for the store; a closed port, a listener that never answers (the
network cut) and gs:// / s3:// without network or credentials each end in one line naming the URL,
the cause and the fix, within their deadline, and SIGTERM stops a read that waits."""

from __future__ import annotations

import functools
import http.server
import signal
import socket
import threading

import pytest

import headsim.corpus.remote as corpus_uri
from cli_processes import spawn
from headsim.cli import run_app
from headsim.corpus import lee_documents, load_corpus
from headsim.errors import HeadsimError

pytest.importorskip("aiohttp")  # fsspec's http file system


class _Handler(http.server.SimpleHTTPRequestHandler):
    drops: list  # requests still to be cut off (a flaky store)

    def _dropped(self) -> bool:
        if self.drops:
            self.drops.pop()
            self.connection.shutdown(socket.SHUT_RDWR)  # the connection drops without an answer
            return True
        return False

    def do_GET(self):  # noqa: N802 - http.server's name
        if not self._dropped():
            super().do_GET()

    def do_HEAD(self):  # noqa: N802
        if not self._dropped():
            super().do_HEAD()

    def log_message(self, *args):
        pass


@pytest.fixture
def store(tmp_path):
    """``(base URL, folder served, drops)``: a threaded http server on 127.0.0.1."""
    root = tmp_path / "store"
    root.mkdir()
    handler = type("Handler", (_Handler,), {"drops": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root, handler.drops
    server.shutdown()
    server.server_close()


@pytest.fixture
def blackhole():
    """``(port, accepted)``: a listener that takes connections and never answers (a cut network)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    accepted, held = threading.Event(), []

    def accept():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            held.append(conn)
            accepted.set()

    threading.Thread(target=accept, daemon=True).start()
    yield sock.getsockname()[1], accepted
    for conn in held:
        conn.close()
    sock.close()


def one_line(exc: HeadsimError, url: str, cause: str) -> str:
    text = str(exc)
    assert "\n" not in text and f"cannot read corpus URL {url!r}: {cause}" in text, text
    assert " — " in text  # a fix follows
    return text


def test_http_corpus_reads_like_the_local_file_and_retries_a_dropped_connection(store, tmp_path, monkeypatch):
    base, root, drops = store
    text = "\n\n".join(d.text for d in lee_documents()[:5])
    (root / "c.txt").write_text(text, encoding="utf-8")
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    want = load_corpus(tmp_path / "c.txt")
    monkeypatch.setattr(corpus_uri.time, "sleep", lambda s: None)  # the back-off between tries
    drops.extend([1, 1])  # the first two requests are cut off: a later try reads it
    got = load_corpus(f"{base}/c.txt")
    assert not drops and got.name == f"{base}/c.txt" and got.sha256 == want.sha256 and len(got) == len(want) == 5
    drops.extend([1] * 100)  # every request dropped: the read stops after its last try, naming the cause
    with pytest.raises(HeadsimError) as e:
        load_corpus(f"{base}/c.txt")
    one_line(e.value, f"{base}/c.txt", "no network")
    assert 100 - len(drops) >= corpus_uri.RETRIES + 1  # each try asked again
    drops.clear()
    with pytest.raises(HeadsimError) as e:
        load_corpus(f"{base}/missing.txt")
    assert "check the URL" in one_line(e.value, f"{base}/missing.txt", "not found")


def test_a_closed_port_and_a_cut_network_end_in_one_line(blackhole, monkeypatch):
    port, accepted = blackhole
    monkeypatch.setattr(corpus_uri, "RETRIES", 0)
    monkeypatch.setenv("HEADSIM_URL_TIMEOUT", "1")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    url = f"http://127.0.0.1:{closed}/c.txt"
    with pytest.raises(HeadsimError) as e:
        load_corpus(url)
    assert "check the network" in one_line(e.value, url, "no network")
    url = f"http://127.0.0.1:{port}/c.txt"
    with pytest.raises(HeadsimError) as e:
        load_corpus(url)
    assert accepted.is_set() and "no answer within 1 s" in one_line(e.value, url, "no network")


@pytest.mark.parametrize("url", ["gs://headsim-test-bucket/corpus.txt", "s3://headsim-test-bucket/corpus.txt"])
def test_cloud_stores_without_network_or_credentials_end_in_one_line(url, monkeypatch):
    """No test reaches the network: here the store is unreachable (or refuses the missing
    credentials); either way one line, by the deadline."""
    monkeypatch.setattr(corpus_uri, "RETRIES", 0)
    monkeypatch.setenv("HEADSIM_URL_TIMEOUT", "3")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(HeadsimError) as e:
        load_corpus(url)
    text = str(e.value)
    assert "\n" not in text and f"cannot read corpus URL {url!r}: " in text
    assert any(f": {cause} (" in text for cause in ("no network", "no credentials")), text


def test_the_local_engine_reads_a_url_corpus(store, tiny_bert_dir, tmp_path, capsys):
    base, root, _ = store
    (root / "c.txt").write_text("\n\n".join(d.text for d in lee_documents()[:8]), encoding="utf-8")
    code = run_app(["analyze", "--model", str(tiny_bert_dir), "--corpus", f"{base}/c.txt", "--seq-len", "32",
                    "--windows", "4", "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "run.json").read_text().count(f"{base}/c.txt") >= 1
    code = run_app(["analyze", "--model", str(tiny_bert_dir), "--corpus", f"{base}/gone.txt", "--seq-len", "32",
                    "--out", str(tmp_path / "run2")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "not found" in err and "Traceback" not in err


def test_sigterm_stops_a_read_that_waits(blackhole, tiny_bert_dir, tmp_path, monkeypatch):
    port, accepted = blackhole
    monkeypatch.setenv("HEADSIM_URL_TIMEOUT", "120")  # the deadline is far: only the signal can end it soon
    proc = spawn(["analyze", "--model", tiny_bert_dir, "--corpus", f"http://127.0.0.1:{port}/c.txt", "--seq-len", "32",
                  "--out", tmp_path / "run"])
    try:
        assert accepted.wait(120), "the run never asked the store"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 143 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
