"""MCP's wire: JSON-RPC 2.0 messages, one per line, as ``gitrelay mcp`` speaks it on stdio.

gitrelay speaks the handshake era of the protocol (``initialize``, then requests;
versions in :data:`PROTOCOL_VERSIONS`), which Claude Code, Codex, Cursor and the
SDK clients all speak; an SDK client that first asks ``server/discover`` is told
the method does not exist and falls back to ``initialize``. This module knows the
wire and nothing of tools: :class:`Connection` takes one decoded message at a
time and routes each request to the handler :mod:`gitrelay.mcp.server` names for
it, on the reading thread or, when the route says the call may wait (a fetch, the
gate, a long-poll), on a thread of its own so that the next requests are read
meanwhile. :func:`serve_lines` is the stdio loop around it.

It imports neither the MCP SDK nor pydantic: starting a server is what an agent's
host waits for before it can show the model any tool (docs/performance.md).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import IO, Any

__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "LATEST_VERSION",
           "METHOD_NOT_FOUND", "PARSE_ERROR", "PROTOCOL_VERSIONS", "Connection", "Handler",
           "Later", "ProtocolError", "Route", "negotiated_version", "serve_lines"]

log = logging.getLogger("gitrelay.mcp")

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = PROTOCOL_VERSIONS[-1]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# How long a closing connection lets calls still running write their answers.
CLOSE_GRACE_SECONDS = 2.0

Later = Callable[[Callable[[], None]], None]
"""Given to a handler: runs a function once the handler's answer has been written."""
Handler = Callable[[dict[str, Any], Later], dict[str, Any]]
"""A request's handler: its params in, its result out; raises :class:`ProtocolError`."""
Route = Callable[[str, dict[str, Any]], "tuple[Handler, bool] | None"]
"""Names a request's handler and whether it runs on a thread of its own, or None when
there is no such method."""


class ProtocolError(Exception):
    """A request answered with a JSON-RPC error rather than a result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def error(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def negotiated_version(requested: object) -> str:
    """The version a session speaks: the client's when gitrelay speaks it, else the latest
    (the client then decides whether it can go on)."""
    return requested if isinstance(requested, str) and requested in PROTOCOL_VERSIONS \
        else LATEST_VERSION


class Connection:
    """One client's session: decoded messages in through :meth:`receive`, answers out
    through ``send`` (called from several threads, one message at a time)."""

    def __init__(self, route: Route, send: Callable[[dict[str, Any]], None]) -> None:
        self._route = route
        self._send_raw = send
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._running: dict[object, threading.Thread] = {}
        self._cancelled: set[object] = set()

    def receive(self, message: object) -> None:
        """Handles one decoded message: a request is answered (now, or by its thread), a
        notification acted on, anything else refused as JSON-RPC says."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._send({"jsonrpc": "2.0", "id": None, "error": {
                "code": INVALID_REQUEST, "message": "not a JSON-RPC 2.0 message"}})
            return
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/cancelled":
                self._cancel(message.get("params"))
            return  # other notifications, and answers to requests this server never sends
        rid = message["id"]
        if not isinstance(method, str):
            if "result" not in message and "error" not in message:
                self._send({"jsonrpc": "2.0", "id": rid, "error": {
                    "code": INVALID_REQUEST, "message": "a request needs a method"}})
            return
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self._answer(rid, error={"code": INVALID_PARAMS, "message": "params must be an object"})
            return
        routed = self._route(method, params)
        if routed is None:
            self._answer(rid, error={"code": METHOD_NOT_FOUND, "message": "Method not found",
                                     "data": method})
            return
        handler, on_thread = routed
        if not on_thread:
            self._run(rid, handler, params)
            return
        thread = threading.Thread(target=self._run, args=(rid, handler, params),
                                  name=f"mcp-{method}", daemon=True)
        with self._lock:
            self._running[rid] = thread
        thread.start()

    def close(self, grace: float = CLOSE_GRACE_SECONDS) -> None:
        """Lets calls still running finish and answer, for up to ``grace`` seconds in all."""
        with self._lock:
            threads = list(self._running.values())
        for thread in threads:
            thread.join(grace / max(len(threads), 1))

    def _run(self, rid: object, handler: Handler, params: dict[str, Any]) -> None:
        later: list[Callable[[], None]] = []
        try:
            result = handler(params, later.append)
        except ProtocolError as exc:
            self._answer(rid, error=exc.error())
        except Exception as exc:
            log.error("request failed unexpectedly", exc_info=exc)
            self._answer(rid, error={"code": INTERNAL_ERROR,
                                     "message": f"internal error ({type(exc).__name__}); "
                                                "the details are in the server's log"})
        else:
            self._answer(rid, result=result)
        finally:
            with self._lock:
                self._running.pop(rid, None)
        for fn in later:
            try:
                fn()
            except Exception as exc:
                log.error("work after an answer failed", exc_info=exc)

    def _cancel(self, params: object) -> None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        with self._lock:
            if rid in self._running:
                self._cancelled.add(rid)

    def _answer(self, rid: object, *, result: dict[str, Any] | None = None,
                error: dict[str, Any] | None = None) -> None:
        with self._lock:
            if rid in self._cancelled:  # the client gave up on it: it expects no answer
                self._cancelled.discard(rid)
                return
        if error is not None:
            self._send({"jsonrpc": "2.0", "id": rid, "error": error})
        else:
            self._send({"jsonrpc": "2.0", "id": rid, "result": result})

    def _send(self, message: dict[str, Any]) -> None:
        with self._send_lock:
            self._send_raw(message)


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line on the wire."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def serve_lines(connection_of: Callable[[Callable[[dict[str, Any]], None]], Connection],
                instream: IO[bytes], outstream: IO[bytes]) -> None:
    """Reads messages from ``instream`` until it ends (or the client is gone) and writes
    the answers to ``outstream``; a line that is not JSON is answered with a parse
    error. The caller closes the connection (:meth:`Connection.close`) once it returns."""
    broken = threading.Event()

    def send(message: dict[str, Any]) -> None:
        if broken.is_set():
            return
        try:
            outstream.write(encode(message))
            outstream.flush()
        except (BrokenPipeError, ValueError, OSError):
            broken.set()  # the client has gone; the input ends next

    connection = connection_of(send)
    while not broken.is_set():
        line = instream.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as exc:
            send({"jsonrpc": "2.0", "id": None,
                  "error": {"code": PARSE_ERROR, "message": f"not JSON: {exc}"}})
            continue
        connection.receive(message)
