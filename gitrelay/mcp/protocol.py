"""MCP's wire: JSON-RPC 2.0 messages, one per line, as ``gitrelay mcp`` speaks it on stdio.

gitrelay speaks both eras of the protocol. In the handshake era (versions in
:data:`HANDSHAKE_VERSIONS`) a client sends ``initialize`` and then its requests;
that is what Claude Code, Codex, Cursor and the TypeScript SDK speak. In the
per-request era (:data:`MODERN_VERSIONS`, 2026-07-28) there is no handshake:
every request carries the protocol version and the client's capabilities in its
``params._meta`` (the envelope), a client learns what the server speaks from
``server/discover``, and each result says its ``resultType`` (and, for a list or
a read, how long it may be cached: ``ttlMs``, ``cacheScope``). The first request
a connection accepts decides its era, as the SDK's stdio server does: a request
with the envelope opens a per-request connection, ``initialize`` or any request
without it a handshake one; a request of the other era is refused after that.

The wire survives any line: one that is not JSON, nested deeper than
:data:`MAX_DEPTH`, longer than :data:`MAX_LINE_BYTES` (read in bounded pieces and
dropped to its newline, never held whole), with an id that is not a string or an
integer, or with a lone surrogate in a string (which no UTF-8 text can carry) is
answered with the JSON-RPC error it calls for, and the next line is read.

This module knows the wire and nothing of tools: :class:`Connection` takes one
decoded message at a time and routes each request to the handler
:mod:`gitrelay.mcp.agentserver` names for it, on the reading thread or, when the route
says the call may wait (a fetch, the gate, a long-poll), on a thread of its own
so that the next requests are read meanwhile. :func:`serve_lines` is the stdio
loop around it.

It imports neither the MCP SDK nor pydantic: starting a server is what an agent's
host waits for before it can show the model any tool (docs/performance.md).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any

__all__ = ["CACHEABLE_METHODS", "HANDSHAKE_VERSIONS", "INTERNAL_ERROR", "INVALID_PARAMS",
           "INVALID_REQUEST", "LATEST_HANDSHAKE_VERSION", "MAX_DEPTH", "MAX_LINE_BYTES",
           "METHOD_NOT_FOUND", "MODERN_VERSIONS", "PARSE_ERROR", "PROTOCOL_VERSIONS",
           "UNSUPPORTED_PROTOCOL_VERSION", "CacheHint", "Connection", "Handler", "Later",
           "LineRefused", "ProtocolError", "Route", "decode_line", "encode",
           "negotiated_version", "serve_lines"]

log = logging.getLogger("gitrelay.mcp")

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The versions an ``initialize`` handshake negotiates, oldest first."""
MODERN_VERSIONS = ("2026-07-28",)
"""The versions of the per-request era (the envelope in each request's ``_meta``)."""
PROTOCOL_VERSIONS = HANDSHAKE_VERSIONS + MODERN_VERSIONS
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line read (its newline aside); a longer one is refused unread."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a message may have."""
_DISCARD_CHUNK = 1 << 16

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

# Methods one era has and the other does not: asked in the wrong era, they do not exist.
_HANDSHAKE_ONLY = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                             "resources/unsubscribe"})
_MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen"})
CACHEABLE_METHODS = frozenset({"prompts/list", "resources/list", "resources/read",
                               "resources/templates/list", "server/discover", "tools/list"})
"""The methods whose per-request-era results say how long they may be cached."""

_HANDSHAKE, _MODERN = "handshake", "per-request"

# How long a closing connection lets calls still running write their answers.
CLOSE_GRACE_SECONDS = 2.0

CacheHint = tuple[int, str]
"""A cacheable method's ``ttlMs`` and ``cacheScope`` (``"private"`` or ``"public"``)."""
Later = Callable[[Callable[[], None]], None]
"""Given to a handler: runs a function once the handler's answer has been written."""
Handler = Callable[[dict[str, Any], Later], dict[str, Any]]
"""A request's handler: its params in, its result out; raises :class:`ProtocolError`."""
Route = Callable[[str, dict[str, Any]], "tuple[Handler, bool] | None"]
"""Names a request's handler and whether it runs on a thread of its own, or None when
there is no such method."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


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


class LineRefused(ProtocolError):
    """A line answered with an error before it reaches a connection; ``rid`` is the id
    the answer carries (None when the line's id cannot be echoed)."""

    def __init__(self, code: int, message: str, rid: object = None) -> None:
        super().__init__(code, message)
        self.rid = rid

    def answer(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.rid, "error": self.error()}


def negotiated_version(requested: object) -> str:
    """The version an ``initialize`` handshake settles on: the client's when gitrelay
    speaks it in that era, else the latest (the client then decides whether it can go on)."""
    return requested if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS \
        else LATEST_HANDSHAKE_VERSION


def is_request_id(value: object) -> bool:
    """Whether ``value`` is an id MCP allows: a string or an integer (not null, not a
    number with a fraction, not true or false), holding no lone surrogate."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is None
    return isinstance(value, int) and not isinstance(value, bool)


def _echoable_id(message: object) -> object:
    """The id an error about ``message`` carries: its own when it is a valid one, else null."""
    rid = message.get("id") if isinstance(message, dict) else None
    return rid if is_request_id(rid) else None


def _refusal(rid: object, code: int, text: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": ProtocolError(code, text, data).error()}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _shape_problem(message: object, *, depth: bool, strings: bool) -> str | None:
    """What makes a decoded message unfit to serve: nesting deeper than MAX_DEPTH, or a
    string (a value or a key) holding a lone surrogate. Walks without recursion."""
    stack: list[tuple[object, int]] = [(message, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            if depth and level > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if strings and isinstance(key, str) and _SURROGATE.search(key):
                    return _surrogate_problem(key)
                stack.append((item, level + 1))
        elif strings and isinstance(value, str) and _SURROGATE.search(value):
            return _surrogate_problem(value)
    return None


def _surrogate_problem(text: str) -> str:
    found = _SURROGATE.search(text)
    code = ord(found.group()) if found else 0
    return f"a string holds a lone surrogate (U+{code:04X}), which no UTF-8 text can carry"


def decode_line(line: bytes) -> object:
    """One line's message, or :class:`LineRefused` saying why it is not served: not UTF-8
    or not JSON (parse error, id null), nested deeper than :data:`MAX_DEPTH` or holding a
    lone surrogate (invalid request, with the message's id when it can be echoed)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LineRefused(PARSE_ERROR, f"not JSON: not UTF-8 (byte {exc.start})") from None
    try:
        message = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise LineRefused(PARSE_ERROR, f"not read: nested far deeper than {MAX_DEPTH} "
                                       "levels") from None
    except ValueError as exc:
        raise LineRefused(PARSE_ERROR, f"not JSON: {exc}") from None
    # Cheap tests first: a line with few brackets cannot be deep, one without a \uD8xx..
    # \uDFxx escape holds no lone surrogate (the UTF-8 decoding above refuses raw ones).
    deep = line.count(b"[") + line.count(b"{") > MAX_DEPTH
    odd = _ESCAPED_SURROGATE.search(line) is not None
    if deep or odd:
        problem = _shape_problem(message, depth=deep, strings=odd)
        if problem is not None:
            raise LineRefused(INVALID_REQUEST, problem, _echoable_id(message))
    return message


def _envelope(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A request's per-request-era envelope (its ``_meta``) when it claims one: the
    protocol-version key is the sign, as in the SDK (a bare ``_meta`` is not)."""
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) and VERSION_KEY in meta else None


class Connection:
    """One client's session: decoded messages in through :meth:`receive`, answers out
    through ``send`` (called from several threads, one message at a time).

    ``server_info`` (name, version) is stamped on per-request-era results;
    ``cache_hints`` gives the ``ttlMs`` and ``cacheScope`` of a cacheable method's
    results in that era (a method without one: 0 ms, private)."""

    def __init__(self, route: Route, send: Callable[[dict[str, Any]], None], *,
                 server_info: Mapping[str, Any] | None = None,
                 cache_hints: Mapping[str, CacheHint] | None = None) -> None:
        self._route = route
        self._send_raw = send
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._running: dict[object, threading.Thread] = {}
        self._cancelled: set[object] = set()
        self._server_info = dict(server_info) if server_info is not None else None
        self._cache_hints = dict(cache_hints or {})
        self._era: str | None = None

    @property
    def version_era(self) -> str | None:
        """``"handshake"`` or ``"per-request"`` once a request decided it, else None."""
        return self._era

    def receive(self, message: object) -> None:
        """Handles one decoded message: a request is answered (now, or by its thread), a
        notification acted on, anything else refused as JSON-RPC says."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            what = "a batch (MCP has none)" if isinstance(message, list) else \
                "not a JSON-RPC 2.0 message"
            self._send(_refusal(_echoable_id(message), INVALID_REQUEST, what))
            return
        method = message.get("method")
        if "method" not in message and ("result" in message or "error" in message):
            return  # an answer, to a request this server never sends
        if "id" not in message:
            if not isinstance(method, str):
                self._send(_refusal(None, INVALID_REQUEST, "a message names its method as a "
                                                           "string"))
            elif method == "notifications/cancelled":
                self._cancel(message.get("params"))
            return  # other notifications need nothing
        rid = message["id"]
        if not is_request_id(rid):
            self._send(_refusal(None, INVALID_REQUEST, "a request's id is a string or an "
                                                       "integer"))
            return
        if not isinstance(method, str):
            self._send(_refusal(rid, INVALID_REQUEST, "a request names its method as a string"))
            return
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self._answer(rid, error={"code": INVALID_PARAMS, "message": "params must be an object"})
            return
        try:
            modern = self._era_of(method, params)
        except ProtocolError as exc:
            self._answer(rid, error=exc.error())
            return
        routed = self._route(method, params)
        if routed is None:
            self._answer(rid, error={"code": METHOD_NOT_FOUND, "message": "Method not found",
                                     "data": method})
            return
        handler, on_thread = routed
        if not on_thread:
            self._run(rid, method, handler, params, modern)
            return
        thread = threading.Thread(target=self._run, args=(rid, method, handler, params, modern),
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

    # --- the eras ------------------------------------------------------------------------------

    def _era_of(self, method: str, params: dict[str, Any]) -> bool:
        """Whether this request is served in the per-request era (deciding the connection's
        era on its first request); raises the error a request of the wrong era, or with a
        bad envelope, gets."""
        envelope = _envelope(params)
        era = self._era
        if era is None:
            era = _MODERN if envelope is not None and method != "initialize" else _HANDSHAKE
        if era == _HANDSHAKE:
            if envelope is not None and method != "initialize":
                raise ProtocolError(INVALID_REQUEST, "this connection speaks the handshake era "
                                    "(it began with initialize or a request without the "
                                    f"envelope); a request carrying {VERSION_KEY} is refused "
                                    "on it")
            self._era = _HANDSHAKE
            if method in _MODERN_ONLY:
                raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
            return False
        if method == "initialize":
            requested = params.get("protocolVersion")
            raise ProtocolError(UNSUPPORTED_PROTOCOL_VERSION, "this connection speaks protocol "
                                f"{', '.join(MODERN_VERSIONS)}, which has no initialize "
                                "handshake", self._unsupported(requested))
        self._check_envelope(envelope)
        self._era = _MODERN
        if method in _HANDSHAKE_ONLY:
            raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
        return True

    def _check_envelope(self, envelope: Mapping[str, Any] | None) -> None:
        if envelope is None:
            raise ProtocolError(INVALID_PARAMS, f"params._meta must carry {VERSION_KEY} and "
                                f"{CAPABILITIES_KEY}: this connection speaks protocol "
                                f"{', '.join(MODERN_VERSIONS)}")
        if CAPABILITIES_KEY not in envelope:
            raise ProtocolError(INVALID_PARAMS, f"params._meta lacks {CAPABILITIES_KEY}")
        version = envelope[VERSION_KEY]
        if not isinstance(version, str):
            raise ProtocolError(INVALID_PARAMS, f"{VERSION_KEY} must be a string")
        if version not in MODERN_VERSIONS:
            raise ProtocolError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                                self._unsupported(version))

    def _unsupported(self, requested: object) -> dict[str, Any]:
        """The data of an unsupported-version error: what the client asked for, and the
        versions it can have here. Before a request decided the era the handshake's are
        listed too (a client falls back to ``initialize`` when it sees them)."""
        supported = MODERN_VERSIONS if self._era == _MODERN else PROTOCOL_VERSIONS
        out: dict[str, Any] = {"supported": list(supported)}
        if isinstance(requested, str):
            out["requested"] = requested
        return out

    def _modern_result(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result as the per-request era has it: its ``resultType``, the cache hints of
        a cacheable method, and the server's name and version in ``_meta``."""
        out = dict(result)
        if method in CACHEABLE_METHODS:
            ttl, scope = self._cache_hints.get(method, (0, "private"))
            out.setdefault("ttlMs", ttl)
            out.setdefault("cacheScope", scope)
        out.setdefault("resultType", "complete")
        if self._server_info is not None:
            meta = out.get("_meta")
            if meta is None:
                out["_meta"] = {SERVER_INFO_KEY: dict(self._server_info)}
            elif isinstance(meta, dict) and meta.get(SERVER_INFO_KEY) is None:
                out["_meta"] = {**meta, SERVER_INFO_KEY: dict(self._server_info)}
        return out

    # --- running and answering -----------------------------------------------------------------

    def _run(self, rid: object, method: str, handler: Handler, params: dict[str, Any],
             modern: bool) -> None:
        later: list[Callable[[], None]] = []
        try:
            result = handler(params, later.append)
            if modern:
                result = self._modern_result(method, result)
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
        """A ``notifications/cancelled``: a request still running is answered no more. One
        naming no valid id, or a request that has already answered, is ignored."""
        rid = params.get("requestId") if isinstance(params, dict) else None
        if not is_request_id(rid):
            return
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
    """One message as a line on the wire. Never fails: an answer that cannot be written
    as JSON becomes an internal error for the same id, and a lone surrogate from
    elsewhere (a file name read from disk) is written as U+FFFD."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        log.error("an answer could not be written as JSON", exc_info=exc)
        rid = message.get("id")
        text = json.dumps(_refusal(rid if is_request_id(rid) else None, INTERNAL_ERROR,
                                   "internal error (an answer that is not JSON); the details "
                                   "are in the server's log"), separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode() + b"\n"


def _read_line(instream: IO[bytes], limit: int) -> bytes | None:
    """The next line, at most ``limit`` bytes before its newline; None for a longer one,
    read on in bounded pieces and dropped up to its newline."""
    line = instream.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line
    while True:
        rest = instream.readline(_DISCARD_CHUNK)
        if not rest or rest.endswith(b"\n"):
            return None


def serve_lines(connection_of: Callable[[Callable[[dict[str, Any]], None]], Connection],
                instream: IO[bytes], outstream: IO[bytes], *,
                max_line: int = MAX_LINE_BYTES) -> None:
    """Reads messages from ``instream`` until it ends (or the client is gone) and writes
    the answers to ``outstream``. A line that cannot be served is answered with the
    error it calls for and the loop goes on (:func:`decode_line`; a line longer than
    ``max_line`` bytes is dropped unread). The caller closes the connection
    (:meth:`Connection.close`) once it returns."""
    broken = threading.Event()
    write_lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        data = encode(message)
        with write_lock:
            if broken.is_set():
                return
            try:
                outstream.write(data)
                outstream.flush()
            except (ValueError, OSError):
                broken.set()  # the client has gone; the input ends next

    connection = connection_of(send)
    while not broken.is_set():
        line = _read_line(instream, max_line)
        if line is None:
            send(_refusal(None, INVALID_REQUEST, f"a line is at most {max_line} bytes; a "
                                                 "longer one was dropped unread"))
            continue
        if not line:
            break
        if not line.strip():
            continue
        try:
            message = decode_line(line)
        except LineRefused as exc:
            send(exc.answer())
            continue
        try:
            connection.receive(message)
        except Exception as exc:  # a bug in routing: the next line is still read
            log.error("a message could not be handled", exc_info=exc)
            send(_refusal(_echoable_id(message), INTERNAL_ERROR, "internal error "
                          f"({type(exc).__name__}); the details are in the server's log"))
