"""Where a running ``gitrelay web`` listens, so that ``inbox_url`` can point at it.

``gitrelay web`` writes ``web.json`` in the gitrelay home (``$GITRELAY_HOME``,
mode 0600) while it runs: its loopback address and port, its process id and the
relay and handle it shows. An answer's ``inbox_url`` points at
``http://127.X.Y.Z:PORT/threads/ID`` while that process is alive and shows the
same relay; otherwise at the relay's ``web_url_template``. The file holds no
secret: a link opens only in a browser signed in to that run (which has its
cookie).

Standard library only: the MCP server reads it on every handoff answer.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
from pathlib import Path
from typing import Any

from gitrelay.store.config import home

WEB_FILE = "web.json"


def web_file() -> Path:
    return home() / WEB_FILE


def record(host: str, port: int, relay: str, handle: str) -> Path:
    """Say that this process serves the web view of ``relay`` for ``handle`` on
    ``host``:``port``."""
    path = web_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{WEB_FILE}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps({"host": host, "port": port, "pid": os.getpid(), "relay": relay,
                              "handle": handle}, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def forget() -> None:
    """Remove the record if it is this process's own."""
    path = web_file()
    found = _read(path)
    if found is not None and found.get("pid") == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def _alive(pid: object) -> bool:
    """Whether process ``pid`` runs, on every OS (``os.kill(pid, 0)`` would send a
    Ctrl-C on Windows)."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    import psutil

    return bool(psutil.pid_exists(pid))


def _loopback(host: object) -> str | None:
    """``host`` when it is an IPv4 loopback address (a record without one: 127.0.0.1)."""
    if host is None:
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host) if isinstance(host, str) else None
    except ValueError:
        return None
    if not isinstance(address, ipaddress.IPv4Address) or not address.is_loopback:
        return None
    return str(address)


def running_base(relay: str) -> str | None:
    """``http://127.X.Y.Z:PORT`` of a live web view of ``relay``, or None."""
    found = _read(web_file())
    if found is None or found.get("relay") != relay or not _alive(found.get("pid")):
        return None
    port, host = found.get("port"), _loopback(found.get("host"))
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536 \
            or host is None:
        return None
    return f"http://{host}:{port}"


def thread_url(relay: str, thread_id: str) -> str | None:
    """The web view's page of a thread, when a web view of ``relay`` runs."""
    base = running_base(relay)
    return f"{base}/threads/{thread_id}" if base else None
