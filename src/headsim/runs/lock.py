"""``DIR/.headsim.lock``: one process writes a run directory at a time (:class:`RunLock`)."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

from ..errors import HeadsimError
from ..io import now, write_failed
from .layout import LOCK


# the lock


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), to tell a reused PID apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[19]


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _process_start(pid)
    return start is None or now is None or now == start


class RunLock:
    """``DIR/.headsim.lock``: one writing process per run directory.

    Taken by hard-linking a fully written file onto the lock's name (atomic, fails if it exists);
    a lock left by a process that is gone from this host (its PID not alive, or reused by a process
    started later) is taken over; one from another host is reported with the way to remove it by
    hand. (Two processes taking over the same stale lock within microseconds could both succeed.)
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK
        self.held = False

    def holder(self) -> dict | None:
        """The lock's contents; ``None`` when there is no lock, ``{}`` when it cannot be read."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def stale(self, holder: dict) -> bool:
        """Held by a process of this host that no longer runs."""
        pid = holder.get("pid")
        return (holder.get("host") == socket.gethostname() and isinstance(pid, int)
                and pid != os.getpid() and not _alive(pid, holder.get("start")))

    def check_free(self) -> None:
        """Refuse when a live process holds the lock."""
        holder = self.holder()
        if holder is None or self.held or (holder and self.stale(holder)):
            return
        directory = str(self.path.parent)
        if not holder:
            raise HeadsimError(f"run directory {directory!r} has an unreadable lock file {LOCK}",
                               f"if no headsim process is writing there, delete {str(self.path)!r}")
        raise HeadsimError(
            f"run directory {directory!r} is in use by headsim process {holder.get('pid')} on {holder.get('host')} "
            f"(since {holder.get('since')})",
            f"wait for that run to finish (or stop it), or pass another --out; if that process is gone, delete {str(self.path)!r}")

    def acquire(self) -> None:
        me = os.getpid()
        info = {"pid": me, "host": socket.gethostname(), "start": _process_start(me), "since": now()}
        for _ in range(3):
            self.check_free()
            holder = self.holder()
            if holder:  # stale: take it over
                self.path.unlink(missing_ok=True)
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{LOCK}.tmp-", dir=self.path.parent)
            except OSError as exc:
                raise write_failed(self.path.parent, exc) from exc
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(info, fh)
                os.link(tmp, self.path)
                self.held = True
                return
            except FileExistsError:
                continue
            except OSError as exc:
                raise write_failed(self.path, exc) from exc
            finally:
                os.unlink(tmp)
        self.check_free()
        raise HeadsimError(f"cannot lock run directory {str(self.path.parent)!r}: another process keeps taking it",
                           "run one headsim process per run directory")

    def release(self) -> None:
        if self.held:
            self.held = False
            holder = self.holder()
            if holder and holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
