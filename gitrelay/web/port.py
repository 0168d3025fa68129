"""Where a running ``gitrelay web`` listens, so that ``inbox_url`` can point at it.

``gitrelay web`` writes ``web.json`` in the gitrelay home (``$GITRELAY_HOME``)
while it runs: its port, its process id and the relay and handle it shows. An
answer's ``inbox_url`` points at ``http://127.0.0.1:PORT/threads/ID`` while that
process is alive and shows the same relay; otherwise at the relay's
``web_url_template``. The file never holds the view's token: a link without it
opens only in the browser the view was opened in (which has the cookie).

Standard library only: the MCP server reads it on every handoff answer.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from gitrelay.store.config import home

WEB_FILE = "web.json"


def web_file() -> Path:
    return home() / WEB_FILE


def record(port: int, relay: str, handle: str) -> Path:
    """Say that this process serves the web view of ``relay`` for ``handle`` on ``port``."""
    path = web_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"port": port, "pid": os.getpid(), "relay": relay,
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


def running_base(relay: str) -> str | None:
    """``http://127.0.0.1:PORT`` of a live web view of ``relay``, or None."""
    found = _read(web_file())
    if found is None or found.get("relay") != relay or not _alive(found.get("pid")):
        return None
    port = found.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        return None
    return f"http://127.0.0.1:{port}"


def thread_url(relay: str, thread_id: str) -> str | None:
    """The web view's page of a thread, when a web view of ``relay`` runs."""
    base = running_base(relay)
    return f"{base}/threads/{thread_id}" if base else None
