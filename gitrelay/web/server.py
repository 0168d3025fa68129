"""Running the web view: bind 127.0.0.1, record the port, serve until interrupted."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitrelay.core.errors import RelayError
from gitrelay.web import port as web_port
from gitrelay.web.app import Site, build_app


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 only (``port`` 0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def serve(client: Any, *, trust_path: Path, word: Callable[[RelayError], str], port: int = 0,
          write: bool = False, on_ready: Callable[[Site], None] | None = None) -> None:
    """Serve the web view of ``client``'s relay until interrupted; ``word`` says what a
    person does after an error (the command line's wording of its next step)."""
    import uvicorn

    sock = bind(port)
    site = Site(client=client, trust_path=trust_path, word=word, port=sock.getsockname()[1],
                write=write)
    app = build_app(site)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                            server_header=False, date_header=False)
    server = uvicorn.Server(config)
    web_port.record(site.port, client.relay_url, client.handle)
    try:
        if on_ready is not None:
            on_ready(site)
        server.run(sockets=[sock])
    finally:
        web_port.forget()
        sock.close()
        sys.stdout.flush()
