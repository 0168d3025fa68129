"""``gitrelay mcp`` on stdio: the handshake answered at once, the server loaded meanwhile.

A coding host starts the server, sends ``initialize`` and then ``tools/list``, and
offers the model gitrelay's tools only once both are answered; some hosts wait for a
server only so long (docs/agents.md, "When the tools arrive"). Loading the server is
most of a start: pydantic, pygit2, the tools' models, the relay client, the trust
file and the sync loop. So :func:`serve` answers ``initialize`` and ``ping`` from
:mod:`gitrelay.mcp.handshake` on the reading thread, at once, while a thread of its
own loads :mod:`gitrelay.mcp.agentserver` and opens the session. Any other request waits
for that, then goes to the session's own routing (:meth:`Session.route
<gitrelay.mcp.agentserver.Session.route>`), in the order the requests came.

When the relay cannot be reached through the saved config (no identity, say), the
server still answers the handshake and lists its tools, so that a host which waits for
it (Codex's ``required``) starts; every tool call answers that error, which says what
to do, and at the end of the input it is raised where the command line reports it
(exit status 1). Any other failure to load is raised at the next request.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from gitrelay.mcp.handshake import (
    CACHE_HINTS,
    SERVER_INFO,
    discover_result,
    initialize_result,
)
from gitrelay.mcp.protocol import Connection, Handler, serve_lines

if TYPE_CHECKING:
    from gitrelay.mcp.agentserver import Session

__all__ = ["Loaded", "serve", "serve_loading"]

log = logging.getLogger("gitrelay.mcp")

Send = Callable[[dict[str, Any]], None]

# What is answered while the server is still loading: nothing here needs it.
_EARLY: dict[str, Handler] = {
    "initialize": lambda params, later: initialize_result(params),
    "server/discover": lambda params, later: discover_result(),
    "ping": lambda params, later: {},
}


Loaded = tuple["Session", BaseException | None]
"""What loading gives: the session, and an error to raise once the input has ended."""


class _Starting:
    """One stdio session while its server loads: the early answers, then the session."""

    def __init__(self, load: Callable[[Send], Loaded]) -> None:
        self._load = load
        self._ready = threading.Event()
        self._session: Session | None = None
        self._error: BaseException | None = None
        self._raised = False
        self.connection: Connection | None = None

    def connect(self, send: Send) -> Connection:
        """serve_lines' ``connection_of``: starts loading, returns the connection."""
        threading.Thread(target=self._run_load, args=(send,), name="gitrelay-mcp-load",
                         daemon=True).start()
        self.connection = Connection(self._route, send, cache_hints=CACHE_HINTS,
                                     server_info=SERVER_INFO)
        return self.connection

    def _run_load(self, send: Send) -> None:
        try:
            self._session, self._error = self._load(send)
        except BaseException as exc:  # handed to the reading thread, which raises it
            self._error = exc
        finally:
            self._ready.set()

    def _route(self, method: str, params: dict[str, Any]) -> tuple[Handler, bool] | None:
        if method in _EARLY and not self._ready.is_set():
            return _EARLY[method], False
        session = self.session()
        return session.route(method, params)

    def session(self) -> Session:
        """The session, once loaded; the loading's error, raised once, if it failed."""
        self._ready.wait()
        if self._session is None:
            # The request is answered with an error (the wire's), and the loading's error
            # is raised again when the input ends (close), so the command says why.
            assert self._error is not None
            raise self._error
        return self._session

    def close(self) -> None:
        """Lets calls still running answer, closes the session; raises the loading's
        error if nothing has yet."""
        if self.connection is not None:
            self.connection.close()
        self._ready.wait()
        if self._session is not None:
            self._session.close()
        if self._error is not None and not self._raised:
            self._raised = True
            raise self._error


def serve(relay: str | None, handle: str | None, trust: str | None, writes: str | None,
          structured: bool = False, *, instream: IO[bytes] | None = None,
          outstream: IO[bytes] | None = None) -> None:
    """``gitrelay mcp``: serve MCP on stdin and stdout until the client closes them. The
    identity and relay are resolved while ``initialize`` is being answered; what goes
    wrong later is logged (the command line sends the log to stderr), and stdout
    carries nothing but answers."""

    def load(send: Send) -> Loaded:
        from gitrelay.core.errors import RelayError
        from gitrelay.mcp.agentserver import build_server
        from gitrelay.mcp.state import ServerOptions, open_state

        options = ServerOptions(relay=relay, handle=handle, trust=trust, writes=writes)
        try:
            state = open_state(options)
        except RelayError as exc:  # listed tools, each call answering why
            log.error("gitrelay mcp cannot reach a relay: %s", exc.message)
            unavailable = build_server(lambda: None, structured=structured, unavailable=exc)
            return unavailable.session(send), exc
        try:
            return build_server(lambda: state, structured=structured).session(send), None
        except BaseException:
            state.close()
            raise

    serve_loading(load, instream or sys.stdin.buffer, outstream or sys.stdout.buffer)


def serve_loading(load: Callable[[Send], Loaded], instream: IO[bytes],
                  outstream: IO[bytes]) -> None:
    """Serves ``instream`` (until it ends) to ``outstream``: ``initialize`` and ``ping``
    at once, everything else by the session that ``load`` (run on a thread of its own,
    given the connection's ``send``) returns; the error it returns beside it is raised
    once the input has ended."""
    starting = _Starting(load)
    try:
        serve_lines(starting.connect, instream, outstream)
    finally:
        starting.close()
