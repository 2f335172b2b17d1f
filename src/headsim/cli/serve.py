"""``headsim serve``: the interactive explorer (a local web page and its JSON API)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Optional

import typer

from .app import app, console, err_console
from .options import Device, Model, Revision

DEFAULT_HOST = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def page_url(host: str, port: int) -> str:
    """The URL to open: wildcard binds are reached through the loopback address."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def check_bind(host: str, port: int) -> None:
    """Fail early, with the fix, when the address cannot be bound (port in use, unknown host)."""
    from ..errors import HeadsimError, require

    require(1 <= port <= 65535, f"port {port} is outside 1..65535", "pass --port with a free port, e.g. --port 8000")
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise HeadsimError(f"cannot bind to host {host!r}: {exc.strerror}",
                           "pass --host 127.0.0.1 (this machine only) or an address of this machine") from exc
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(addr)
        except OSError as exc:
            in_use = "in use" in str(exc).lower() or getattr(exc, "errno", None) in (98, 48, 10048)
            raise HeadsimError(
                f"cannot listen on {host}:{port}: " + ("the port is already in use" if in_use else exc.strerror or str(exc)),
                f"pass another --port (e.g. --port {port + 1}), or stop the program using it" if in_use
                else "pass --host 127.0.0.1, or an address of this machine",
            ) from exc


@app.command()
def serve(
    model: Optional[str] = typer.Option(None, "--model", "-m", help=Model.help + " Default: the model the --run "
                                        "was made with, else 'default'."),
    revision: Optional[str] = Revision,
    run: Optional[Path] = typer.Option(None, "--run", help="A finished run directory (from headsim analyze): "
                                                           "colours heads by corpus statistics and shows each head's profile."),
    host: str = typer.Option(DEFAULT_HOST, "--host", help="Address to listen on (default: this machine only). "
                                                          "Anything else lets other machines run the model."),
    port: int = typer.Option(8000, "--port", "-p", help="Port to listen on."),
    device: Optional[str] = Device,
    max_text_kb: int = typer.Option(100, "--max-text-kb", help="Largest text accepted, in kB (larger → HTTP 413)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default web browser."),
) -> None:
    """Start the interactive explorer: browse heads, attention and context similarity in a web page."""
    from ..errors import require

    require(max_text_kb >= 1, f"--max-text-kb {max_text_kb} is not positive", "pass a limit of at least 1 (kB)")
    check_bind(host, port)
    import uvicorn

    from ..explorer import app as explorer_app

    loopback = is_loopback(host)
    with console.status("loading the model…"):
        web = explorer_app.create_app(model if model is not None or run is not None else "default", run, max_text_bytes=max_text_kb * 1000, device=device,
                                      allowed_hosts=explorer_app.LOOPBACK_HOSTS if loopback else None, revision=revision)
    state = web.state.explorer
    url = page_url(host, port)
    if not loopback:
        err_console.print(f"[bold yellow]warning:[/] listening on {host}, not on this machine only: anyone who can reach "
                          f"port {port} can use the page and run the model here. Use --host 127.0.0.1 unless you mean it.",
                          highlight=False, soft_wrap=True)
    what = f"model {state.loaded.name} ({state.loaded.n_layers} layers × {state.loaded.n_heads} heads)"
    if state.run is not None:
        what += f", run {state.run.path}"
    console.print(f"headsim explorer: [bold]{url}[/]  ({what}; API docs at {url}docs) — Ctrl+C to stop",
                  highlight=False, soft_wrap=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    uvicorn.run(web, host=host.strip("[]"), port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=3)
