"""Running the web view: bind a loopback address of the run's own, write the sign-in
file, record where it listens, serve until interrupted.

Browsers keep cookies per host, not per port: a cookie of ``127.0.0.1`` goes to
every server on ``127.0.0.1`` the browser is sent to. So each run listens on a
fresh random address of 127/8 (``127.X.Y.Z``, never ``127.0.0.1`` nor ``127.0.x.x``,
where other servers live), and its cookie's host is the run's alone. A system with
no loopback address but ``127.0.0.1`` (macOS unless an alias is added) gets
``127.0.0.1``, marked shared: the view then serves reads and says what that
costs, and writes only when ``--host 127.0.0.1`` asked for that address by name.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import secrets
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitrelay.core.errors import InvalidArgument, NextStep, RelayError
from gitrelay.store.config import home
from gitrelay.web import peer
from gitrelay.web import port as web_port
from gitrelay.web.app import Site, build_app
from gitrelay.web.signin import SignIn

SHARED = "127.0.0.1"
TRIES = 8


def random_loopback() -> str:
    """A random address of 127/8 outside 127.0.0.0/16 (127.0.0.1, and Debian's 127.0.1.1)."""
    return f"127.{1 + secrets.randbelow(254)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"


def loopback_host(value: str) -> str:
    """``value`` if it is an IPv4 loopback address; ``invalid_argument`` otherwise."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        address = None
    if not isinstance(address, ipaddress.IPv4Address) or not address.is_loopback:
        raise InvalidArgument(f"{value!r} is not an IPv4 loopback address (127.X.Y.Z)",
                              field="host", next_step=NextStep.FIX_ARGUMENT)
    return str(address)


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def bind(host: str | None, port: int, *, pick: Callable[[], str] = random_loopback
         ) -> tuple[socket.socket, bool]:
    """A listening socket on ``host`` (None: a random loopback address from ``pick``,
    or the shared 127.0.0.1 where the system has no other), and whether its address
    is the shared one. ``port`` 0: any free port."""
    if host is not None:
        return _listen_or_say(host, port), host == SHARED
    for _ in range(TRIES):
        try:
            return _listen(pick(), port), False
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                break   # EADDRNOTAVAIL (or the like): only 127.0.0.1 is configured
    return _listen_or_say(SHARED, port), True


def _listen_or_say(host: str, port: int) -> socket.socket:
    """:func:`_listen`, with ``invalid_argument`` naming the address or port it cannot
    take (in use, or an address this system does not have)."""
    try:
        return _listen(host, port)
    except OSError as exc:
        in_use = exc.errno == errno.EADDRINUSE
        raise InvalidArgument(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            + (" (another program has it; give another --port, or 0 for any free one)"
               if in_use else " (this system does not have that address; add it as a "
                              "loopback alias, or leave --host out)"),
            field="port" if in_use else "host", next_step=NextStep.FIX_ARGUMENT) from None


def sign_in_folder(run: str) -> Path:
    return home() / "web" / run


def serve(client: Any, *, trust_path: Path, word: Callable[[RelayError], str], port: int = 0,
          host: str | None = None, write: bool = False,
          on_ready: Callable[[Site], None] | None = None,
          pick: Callable[[], str] = random_loopback) -> None:
    """Serve the web view of ``client``'s relay until interrupted; ``word`` says what a
    person does after an error (the command line's wording of its next step); ``pick``
    draws the run's address (:func:`bind`)."""
    import uvicorn

    sock, shared = bind(host, port, pick=pick)
    try:
        if shared and write and host is None:
            raise InvalidArgument(
                "this system has no loopback address but 127.0.0.1, which every local "
                "server shares, and the browser would send the view's cookie to any of "
                "them: writes there need the address asked for by name (--host 127.0.0.1), "
                "or an address of the view's own (add one, then --host 127.X.Y.Z)",
                field="host", next_step=NextStep.FIX_ARGUMENT)
        address, bound = sock.getsockname()[:2]
        getuid = getattr(os, "getuid", None)
        site = Site(client=client, trust_path=trust_path, word=word, port=bound, host=address,
                    shared=shared, write=write,
                    owner_uid=getuid() if getuid is not None and peer.available() else None)
        site.signin = SignIn(sign_in_folder(site.run), site.base)
        app = build_app(site)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                server_header=False, date_header=False)
        server = uvicorn.Server(config)
        site.signin.write()
        web_port.record(site.host, site.port, client.relay_url, client.handle)
        try:
            if on_ready is not None:
                on_ready(site)
            server.run(sockets=[sock])
        finally:
            web_port.forget()
            site.signin.remove()
    finally:
        sock.close()
        sys.stdout.flush()
