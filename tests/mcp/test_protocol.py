"""gitrelay's MCP wire (``gitrelay.mcp.protocol``) through its functions: every odd line is
answered as JSON-RPC says and the next one is still read, cancellation, and the
negotiation of both eras of the protocol. tests/mcp/test_protocol_stdio.py holds the same
against a real ``gitrelay mcp`` process and the SDKs' clients."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import mcp_types.version as sdk_versions
import pytest

from gitrelay.mcp import protocol
from gitrelay.mcp.protocol import (
    CAPABILITIES_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_DEPTH,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_INFO_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    VERSION_KEY,
    Connection,
    Handler,
    Later,
    LineRefused,
    ProtocolError,
    decode_line,
    encode,
    serve_lines,
)

MODERN = "2026-07-28"


def envelope(version: object = MODERN, **extra: Any) -> dict[str, Any]:
    return {"_meta": {VERSION_KEY: version, CAPABILITIES_KEY: {}}, **extra}


class Wire:
    """A connection to a handful of plain handlers, and every message it sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        handlers: dict[str, tuple[Handler, bool]] = {
            "initialize": (lambda p, later: {"protocolVersion": protocol.negotiated_version(
                p.get("protocolVersion"))}, False),
            "ping": (lambda p, later: {}, False),
            "tools/list": (lambda p, later: {"tools": []}, False),
            "tools/call": (lambda p, later: {"content": [], "echo": p.get("arguments")}, False),
            "server/discover": (lambda p, later: {"supportedVersions": [MODERN]}, False),
            "slow": (self._slow, True),
            "broken": (self._broken, False),
        }
        self.connection = Connection(lambda method, params: handlers.get(method), self.sent.append,
                                     server_info={"name": "gitrelay", "version": "9"},
                                     cache_hints={"tools/list": (5000, "private")})

    def _slow(self, params: dict[str, Any], later: Later) -> dict[str, Any]:
        self.started.set()
        assert self.release.wait(30)
        return {"done": True}

    def _broken(self, params: dict[str, Any], later: Later) -> dict[str, Any]:
        raise ProtocolError(INVALID_PARAMS, "no such thing", {"what": 1})

    def send(self, message: object) -> dict[str, Any] | None:
        """``message`` received; the one answer it got (None when it got none)."""
        before = len(self.sent)
        self.connection.receive(message)
        assert len(self.sent) - before <= 1
        return self.sent[-1] if len(self.sent) > before else None

    def request(self, method: str, params: dict[str, Any] | None = None,
                rid: object = 1) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        answer = self.send(message)
        assert answer is not None, f"{method} got no answer"
        return answer


def error_of(answer: dict[str, Any] | None) -> tuple[object, int]:
    assert answer is not None and "error" in answer, answer
    return answer["id"], answer["error"]["code"]


# --- a line as it is read ----------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


@pytest.mark.parametrize(("line", "code", "rid"), [
    (b"{not json", PARSE_ERROR, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', PARSE_ERROR, None),
    (b"\xff\xfe{}", PARSE_ERROR, None),  # not UTF-8
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', PARSE_ERROR, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}', PARSE_ERROR, None),
    (nested(100_000), PARSE_ERROR, None),  # the parser gives up: nothing can be echoed
    (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + nested(MAX_DEPTH) + b"}",
     INVALID_REQUEST, 7),
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', INVALID_REQUEST, None),
    (b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x\\udfff"}}',
     INVALID_REQUEST, 8),
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"\\udbff":1}}',
     INVALID_REQUEST, 9),
])
def test_a_line_that_cannot_be_served_is_refused_as_json_rpc_says(
        line: bytes, code: int, rid: object) -> None:
    with pytest.raises(LineRefused) as refused:
        decode_line(line)
    assert (refused.value.rid, refused.value.code) == (rid, code)
    answer = refused.value.answer()
    assert json.loads(encode(answer)) == answer  # the answer itself can be written


def test_nesting_up_to_the_limit_and_surrogate_pairs_are_served() -> None:
    deepest = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' \
              + nested(MAX_DEPTH - 1) + b"}"
    assert decode_line(deepest)["params"] == json.loads(nested(MAX_DEPTH - 1))  # type: ignore[index]
    paired = decode_line(b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"ping"}')
    assert paired == {"jsonrpc": "2.0", "id": "\U0001f600", "method": "ping"}
    escaped = decode_line(b'{"jsonrpc":"2.0","id":2,"method":"x","params":{"p":"\\\\ud800"}}')
    assert escaped["params"] == {"p": "\\ud800"}  # type: ignore[index]  # a backslash, not an escape


def test_many_brackets_side_by_side_are_not_depth() -> None:
    wide = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"arguments": {"artifacts": [{"lines": [1, 2]}] * 500}}})
    assert len(decode_line(wide.encode())["params"]["arguments"]["artifacts"]) == 500  # type: ignore[index]


def test_an_answer_that_cannot_be_encoded_is_still_written() -> None:
    lone = json.loads(encode({"jsonrpc": "2.0", "id": 1, "result": {"text": "a\udc80b"}}))
    assert lone["result"]["text"] == "a\ufffdb"
    odd = json.loads(encode({"jsonrpc": "2.0", "id": 3, "result": {"x": object()}}))
    assert odd["id"] == 3 and odd["error"]["code"] == INTERNAL_ERROR
    nan = json.loads(encode({"jsonrpc": "2.0", "id": 4, "result": {"x": float("nan")}}))
    assert nan["error"]["code"] == INTERNAL_ERROR


# --- messages ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rid", [[1], {"a": 1}, 1.5, 2.0, True, False, None])
def test_a_request_id_must_be_a_string_or_an_integer(rid: object) -> None:
    wire = Wire()
    assert error_of(wire.request("ping", rid=rid)) == (None, INVALID_REQUEST)
    assert wire.request("ping", rid=2) == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.mark.parametrize("message", [
    [], [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "ping", 3, None,
    {"id": 1, "method": "ping"}, {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "method": 5}, {"jsonrpc": "2.0", "id": 1, "method": ["ping"]},
    {"jsonrpc": "2.0", "id": 1},
])
def test_what_is_not_a_request_is_refused(message: object) -> None:
    wire = Wire()
    rid, code = error_of(wire.send(message))
    assert code == INVALID_REQUEST
    assert rid == (1 if isinstance(message, dict) and message.get("id") == 1 else None)
    assert wire.request("ping", rid=2)["result"] == {}


def test_answers_and_notifications_get_no_answer() -> None:
    wire = Wire()
    for message in ({"jsonrpc": "2.0", "id": 1, "result": {}},
                    {"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": [1]}},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": {"a": 1}}},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]}):
        assert wire.send(message) is None


def test_params_must_be_an_object_and_a_method_must_exist() -> None:
    wire = Wire()
    assert error_of(wire.request("ping", params=[1])) == (1, INVALID_PARAMS)  # type: ignore[arg-type]
    answer = wire.request("no/such", rid="a")
    assert error_of(answer) == ("a", METHOD_NOT_FOUND) and answer["error"]["data"] == "no/such"
    broken = wire.request("broken", rid=4)
    assert broken["error"] == {"code": INVALID_PARAMS, "message": "no such thing",
                               "data": {"what": 1}}


def test_a_request_whose_handling_breaks_does_not_end_the_loop() -> None:
    def route(method: str, params: dict[str, Any]) -> tuple[Handler, bool] | None:
        if method == "explode":
            raise KeyError("a bug in routing")
        return (lambda p, later: {}), False

    out = io.BytesIO()
    lines = [b'{"jsonrpc":"2.0","id":1,"method":"explode"}', b'{"jsonrpc":"2.0","id":2,'
             b'"method":"ping"}']
    serve_lines(lambda send: Connection(route, send), io.BytesIO(b"\n".join(lines) + b"\n"), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == \
        [(1, INTERNAL_ERROR), (2, None)]


# --- the stdio loop ----------------------------------------------------------------------------


class LongLine(io.RawIOBase):
    """A stream of one line of ``size`` bytes of JSON-ish filler, then ``tail``; made as it
    is read, so that the test never holds the long line either. ``largest`` is the most
    the reader asked for at once."""

    def __init__(self, size: int, tail: bytes) -> None:
        self.left = size
        self.tail = tail
        self.largest = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.largest = max(self.largest, len(buffer))
        if self.left > 0:
            n = min(self.left, len(buffer))
            buffer[:n] = b"x" * n
            self.left -= n
            return n
        n = min(len(self.tail), len(buffer))
        buffer[:n] = self.tail[:n]
        self.tail = self.tail[n:]
        return n


def serve(data: bytes | io.RawIOBase, **kwargs: Any) -> list[dict[str, Any]]:
    wire = Wire()
    out = io.BytesIO()
    stream = io.BufferedReader(data) if isinstance(data, io.RawIOBase) else io.BytesIO(data)
    serve_lines(lambda send: Connection(wire.connection._route, send), stream, out, **kwargs)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_over_the_limit_is_dropped_unread_and_the_next_one_served() -> None:
    ping = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    source = LongLine(5_000_000, b"\n" + ping)
    answers = serve(source, max_line=1_000_000)
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == \
        [(None, INVALID_REQUEST), (2, None)]
    assert "at most 1000000 bytes" in answers[0]["error"]["message"]
    assert source.largest <= 1_000_000 + 1  # never asked for the whole line


def test_a_line_of_exactly_the_limit_is_read() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":"'
    line = body + b"y" * (1000 - len(body) - 3) + b'"}}'
    assert len(line) == 1000
    answers = serve(line + b"\n" + line + b"x\n" + line, max_line=1000)
    assert [(a["id"], "result" in a) for a in answers] == [(1, True), (None, False), (1, True)]


def test_the_loop_answers_every_odd_line_and_lives_on() -> None:
    lines = [b"{nope", nested(5000), b'{"jsonrpc":"2.0","id":[1],"method":"ping"}',
             b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
             b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}',
             b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}', b"   ",
             b'{"jsonrpc":"2.0","id":"last","method":"ping"}']
    answers = serve(b"\n".join(lines) + b"\n")
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        (None, PARSE_ERROR), (None, PARSE_ERROR), (None, INVALID_REQUEST),
        (None, INVALID_REQUEST), (None, INVALID_REQUEST), ("last", None)]


# --- cancellation ------------------------------------------------------------------------------


@pytest.fixture
def wire() -> Iterator[Wire]:
    made = Wire()
    yield made
    made.release.set()
    made.connection.close()


def test_a_cancelled_request_is_not_answered(wire: Wire) -> None:
    assert wire.send({"jsonrpc": "2.0", "id": "s1", "method": "slow"}) is None
    assert wire.started.wait(30)
    wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": "s1", "reason": "the user moved on"}})
    assert wire.request("ping", rid=2)["result"] == {}  # answered meanwhile
    wire.release.set()
    wire.connection.close(grace=30)
    assert [a["id"] for a in wire.sent] == [2]


def test_a_request_not_cancelled_answers_when_done(wire: Wire) -> None:
    wire.send({"jsonrpc": "2.0", "id": "s1", "method": "slow"})
    assert wire.started.wait(30)
    # a cancel naming another id, one of the same value but another type, or a finished one
    for other in ("s2", 1, True, "2"):
        wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": other}})
    wire.request("ping", rid=2)
    wire.release.set()
    wire.connection.close(grace=30)
    assert [a["id"] for a in wire.sent] == [2, "s1"]
    assert wire.sent[-1]["result"] == {"done": True}


# --- the eras and their versions ---------------------------------------------------------------


def test_gitrelay_speaks_the_versions_of_the_pinned_sdk() -> None:
    """An SDK upgrade that learns a version fails here until gitrelay decides to speak it."""
    assert protocol.HANDSHAKE_VERSIONS == sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS
    assert protocol.MODERN_VERSIONS == sdk_versions.MODERN_PROTOCOL_VERSIONS
    assert protocol.PROTOCOL_VERSIONS == sdk_versions.KNOWN_PROTOCOL_VERSIONS


@pytest.mark.parametrize("version", protocol.HANDSHAKE_VERSIONS)
def test_initialize_settles_on_the_clients_handshake_version(version: str) -> None:
    wire = Wire()
    assert wire.request("initialize", {"protocolVersion": version})["result"] == \
        {"protocolVersion": version}
    assert wire.connection.version_era == "handshake"
    assert wire.request("tools/list", rid=2)["result"] == {"tools": []}  # no resultType


@pytest.mark.parametrize("asked", ["2024-10-07", "2099-01-01", MODERN, None, 20241105])
def test_initialize_with_another_version_gets_the_latest_handshake(asked: object) -> None:
    assert Wire().request("initialize", {"protocolVersion": asked})["result"] == \
        {"protocolVersion": protocol.LATEST_HANDSHAKE_VERSION}


def test_the_handshake_era_has_no_discovery_and_refuses_the_envelope() -> None:
    wire = Wire()
    wire.request("initialize", {"protocolVersion": "2025-06-18"})
    assert error_of(wire.request("server/discover", envelope(), rid=2)) == (2, INVALID_REQUEST)
    assert error_of(wire.request("server/discover", rid=3)) == (3, METHOD_NOT_FOUND)
    assert error_of(wire.request("tools/list", envelope(), rid=4)) == (4, INVALID_REQUEST)
    assert wire.request("ping", {"_meta": {"progressToken": 1}}, rid=5)["result"] == {}


def test_server_discover_without_the_envelope_opens_the_handshake_era() -> None:
    wire = Wire()  # how an SDK client finds out a server speaks only the handshake
    assert error_of(wire.request("server/discover")) == (1, METHOD_NOT_FOUND)
    assert wire.connection.version_era == "handshake"


@pytest.mark.parametrize("method", ["tools/list", "tools/call", "server/discover", "no/such"])
def test_the_first_enveloped_request_opens_the_per_request_era(method: str) -> None:
    wire = Wire()
    answer = wire.request(method, envelope(name="t", arguments={"a": 1}))
    assert wire.connection.version_era == "per-request"
    if method == "no/such":
        assert error_of(answer) == (1, METHOD_NOT_FOUND)
    else:
        assert answer["result"]["resultType"] == "complete"
        assert answer["result"]["_meta"] == {SERVER_INFO_KEY: {"name": "gitrelay", "version": "9"}}
    assert error_of(wire.request("initialize", {"protocolVersion": "2025-11-25"}, rid=2)) == \
        (2, UNSUPPORTED_PROTOCOL_VERSION)


def test_per_request_results_carry_their_type_cache_hints_and_server() -> None:
    wire = Wire()
    found = wire.request("server/discover", envelope())["result"]
    assert found == {"supportedVersions": [MODERN], "resultType": "complete", "ttlMs": 0,
                     "cacheScope": "private",
                     "_meta": {SERVER_INFO_KEY: {"name": "gitrelay", "version": "9"}}}
    listed = wire.request("tools/list", envelope(), rid=2)["result"]
    assert (listed["ttlMs"], listed["cacheScope"], listed["resultType"]) == \
        (5000, "private", "complete")
    called = wire.request("tools/call", envelope(arguments={"x": 1}), rid=3)["result"]
    assert called["resultType"] == "complete" and "ttlMs" not in called
    assert called["echo"] == {"x": 1}


def test_the_per_request_era_checks_every_envelope() -> None:
    wire = Wire()
    wire.request("server/discover", envelope())
    assert error_of(wire.request("tools/list", rid=2)) == (2, INVALID_PARAMS)
    assert error_of(wire.request("tools/list", {"_meta": {VERSION_KEY: MODERN}}, rid=3)) == \
        (3, INVALID_PARAMS)
    assert error_of(wire.request("tools/list", envelope(version=5), rid=4)) == (4, INVALID_PARAMS)
    wrong = wire.request("tools/list", envelope(version="2025-11-25"), rid=5)
    assert error_of(wrong) == (5, UNSUPPORTED_PROTOCOL_VERSION)
    assert wrong["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
    again = wire.request("initialize", {"protocolVersion": "2025-11-25"}, rid=6)
    assert error_of(again) == (6, UNSUPPORTED_PROTOCOL_VERSION)
    assert again["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
    assert error_of(wire.request("ping", envelope(), rid=7)) == (7, METHOD_NOT_FOUND)
    assert error_of(wire.request("no/such", envelope(), rid=8)) == (8, METHOD_NOT_FOUND)
    assert wire.request("tools/list", envelope(), rid=9)["result"]["tools"] == []


def test_an_unsupported_opening_version_leaves_the_handshake_open() -> None:
    """A client told every version gitrelay speaks, the handshake's among them, falls back
    to initialize, which is still accepted."""
    wire = Wire()
    first = wire.request("server/discover", envelope(version="2099-01-01"))
    assert error_of(first) == (1, UNSUPPORTED_PROTOCOL_VERSION)
    assert first["error"]["data"] == {"supported": list(protocol.PROTOCOL_VERSIONS),
                                      "requested": "2099-01-01"}
    assert wire.connection.version_era is None
    assert wire.request("initialize", {"protocolVersion": "2025-11-25"}, rid=2)["result"] == \
        {"protocolVersion": "2025-11-25"}


def test_an_enveloped_initialize_is_still_the_handshake() -> None:
    wire = Wire()
    wire.request("initialize", envelope(protocolVersion="2025-03-26"))
    assert wire.connection.version_era == "handshake"
