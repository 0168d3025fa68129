"""gitrelay's MCP wire as a real ``gitrelay mcp`` process speaks it on stdio: odd lines
written raw, each answered as JSON-RPC says while the server lives on; a line over the
limit refused without being held; cancellation; and both eras of the protocol through
the pinned Python SDK's client (in each of its modes) and the TypeScript SDK's client.
tests/mcp/test_protocol.py holds the same through the functions."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types.version as sdk_versions
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.ts_host import TsClient
from gitrelay.mcp import protocol
from gitrelay.mcp.handshake import LIST_TTL_MS
from gitrelay.mcp.protocol import (
    CAPABILITIES_KEY,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    VERSION_KEY,
)
from tests.kit import hermetic_env, typescript_sdk

pytestmark = pytest.mark.slow  # real `gitrelay mcp` processes on stdio

REPO = Path(__file__).resolve().parent.parent.parent
ANSWER_TIMEOUT_S = 60.0
ARGS = ["-m", "gitrelay", "mcp", "--as", "dana@acme"]  # the embedded relay: no team needed


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dana's gitrelay home; its embedded relay is made by the first server started."""
    return tmp_path_factory.mktemp("dana") / "gitrelay"


def env_of(home: Path) -> dict[str, str]:
    return hermetic_env(home.parent / "home", gitrelay_home=home)


class RawServer:
    """``gitrelay mcp`` written to and read from line by line."""

    def __init__(self, home: Path, errlog: IO[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, *ARGS], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=errlog, env=env_of(home),
                                     cwd=str(REPO))

    def write(self, *lines: bytes) -> None:
        assert self.proc.stdin is not None
        for line in lines:
            self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode())

    def read(self) -> dict[str, Any]:
        """The next answer; a server silent for ANSWER_TIMEOUT_S is killed."""
        assert self.proc.stdout is not None
        watchdog = threading.Timer(ANSWER_TIMEOUT_S, self.proc.kill)
        watchdog.start()
        try:
            line = self.proc.stdout.readline()
        finally:
            watchdog.cancel()
        assert line, f"the server ended (rc {self.proc.poll()}) instead of answering"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, method: str, params: dict[str, Any] | None = None,
            rid: object = "q") -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.read()

    def status(self, key: str) -> int:
        """A ``/proc/<pid>/status`` figure in kB (Linux)."""
        for row in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if row.startswith(f"{key}:"):
                return int(row.split()[1])
        raise AssertionError(f"no {key} in /proc/{self.proc.pid}/status")

    def finish(self) -> list[dict[str, Any]]:
        """End of input: the answers still to come, and the server's exit (0)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        rest = [json.loads(line) for line in self.proc.stdout.read().splitlines()]
        assert self.proc.wait(timeout=ANSWER_TIMEOUT_S) == 0
        return rest

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=ANSWER_TIMEOUT_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def raw(home: Path, tmp_path: Path) -> Iterator[RawServer]:
    with (tmp_path / "server.log").open("w") as errlog:
        server = RawServer(home, errlog)
        try:
            yield server
        finally:
            server.kill()


def code_of(answer: dict[str, Any]) -> tuple[object, int | None]:
    return answer["id"], answer.get("error", {}).get("code")


def nested(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


# --- odd lines ---------------------------------------------------------------------------------


def test_every_odd_line_is_answered_and_the_server_lives_on(raw: RawServer) -> None:
    assert "result" in raw.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "t", "version": "1"}})
    odd: list[tuple[bytes, tuple[object, int]]] = [
        (b"{not json", (None, PARSE_ERROR)),
        (nested(1_000), (None, PARSE_ERROR)),  # too deep for the parser
        (nested(100_000), (None, PARSE_ERROR)),
        (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"check_inbox",'
         b'"arguments":{"x":' + nested(100) + b"}}}", (5, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":[1],"method":"tools/list"}', (None, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', (None, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', (None, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', (None, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', (None, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', (None, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"\\udfff"}}',
         (6, INVALID_REQUEST)),
        (b'{"jsonrpc":"2.0","id":7,"method":"\\ud800"}', (7, INVALID_REQUEST)),
        (b'[{"jsonrpc":"2.0","id":8,"method":"ping"}]', (None, INVALID_REQUEST)),
        (b"\xc3\x28", (None, PARSE_ERROR)),
    ]
    for line, expected in odd:
        raw.write(line)
        assert code_of(raw.read()) == expected, line[:80]
    # a cancel naming an unhashable id has no answer, and ends nothing
    raw.write(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}',
              b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}')
    listed = raw.ask("tools/list", rid="after")
    assert listed["id"] == "after" and "check_inbox" in {t["name"] for t in
                                                          listed["result"]["tools"]}
    assert raw.finish() == []


def test_a_line_over_the_limit_is_refused_without_being_held(raw: RawServer) -> None:
    if not Path(f"/proc/{raw.proc.pid}/status").exists():
        pytest.skip("reads the server's peak memory from /proc, which this system lacks")
    assert "result" in raw.ask("tools/list")
    before = raw.status("VmHWM")
    size = 64 * 1024 * 1024
    assert raw.proc.stdin is not None
    chunk = b"x" * (1024 * 1024)
    raw.proc.stdin.write(b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"a":"')
    for _ in range(size // len(chunk)):
        raw.proc.stdin.write(chunk)
    raw.write(b'"}}')
    refused = raw.read()
    assert code_of(refused) == (None, INVALID_REQUEST)
    assert f"at most {protocol.MAX_LINE_BYTES} bytes" in refused["error"]["message"]
    assert raw.ask("tools/list", rid="next")["id"] == "next"
    grown_mib = (raw.status("VmHWM") - before) / 1024
    # The line is 64 MiB; the server reads at most 16 MiB of it at once (about twice that
    # while its reader joins the pieces), so its peak grows by far less than the line.
    assert grown_mib < 0.75 * size / 2**20, f"the peak grew by {grown_mib:.0f} MiB"


def test_a_cancelled_call_is_never_answered(raw: RawServer) -> None:
    """Two long-polls of one second: the first cancelled, the second not. The second's
    answer shows that such calls answer; the first's never comes, to the end of output."""
    wait = {"name": "check_inbox", "arguments": {"wait_seconds": 1}}
    raw.send({"jsonrpc": "2.0", "id": "first", "method": "tools/call", "params": wait})
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": "first", "reason": "the user moved on"}})
    raw.send({"jsonrpc": "2.0", "id": "second", "method": "tools/call", "params": wait})
    seen = [raw.read()]
    while seen[-1]["id"] != "second":
        seen.append(raw.read())
    assert not seen[-1]["result"]["isError"]
    assert raw.ask("tools/list", rid="third")["id"] == "third"
    seen += raw.finish()
    assert "first" not in [a["id"] for a in seen]


# --- versions ----------------------------------------------------------------------------------


def envelope(version: str) -> dict[str, Any]:
    return {"_meta": {VERSION_KEY: version, CAPABILITIES_KEY: {}}}


def test_each_handshake_version_is_settled_on(raw: RawServer) -> None:
    for version in protocol.HANDSHAKE_VERSIONS:
        got = raw.ask("initialize", {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "t", "version": "1"}})
        assert got["result"]["protocolVersion"] == version
    newer = raw.ask("initialize", {"protocolVersion": "2099-01-01", "capabilities": {}})
    assert newer["result"]["protocolVersion"] == protocol.LATEST_HANDSHAKE_VERSION
    assert code_of(raw.ask("server/discover", envelope("2026-07-28"))) == ("q", INVALID_REQUEST)
    assert "resultType" not in raw.ask("tools/list")["result"]


def test_the_per_request_era_over_raw_lines(raw: RawServer) -> None:
    version = protocol.MODERN_VERSIONS[-1]
    found = raw.ask("server/discover", envelope(version))["result"]
    assert found["supportedVersions"] == list(protocol.MODERN_VERSIONS)
    assert (found["resultType"], found["cacheScope"], found["ttlMs"]) == \
        ("complete", "private", LIST_TTL_MS)
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "gitrelay"
    assert code_of(raw.ask("tools/list")) == ("q", -32602)  # no envelope
    assert code_of(raw.ask("ping", envelope(version))) == ("q", METHOD_NOT_FOUND)
    refused = raw.ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    assert code_of(refused) == ("q", UNSUPPORTED_PROTOCOL_VERSION)
    assert refused["error"]["data"]["supported"] == list(protocol.MODERN_VERSIONS)
    read = raw.ask("resources/read", {**envelope(version), "uri": "gitrelay://inbox"})
    assert (read["result"]["ttlMs"], read["result"]["resultType"]) == (0, "complete")


# --- the SDKs' clients -------------------------------------------------------------------------


MODES = ["legacy", "auto", *sdk_versions.MODERN_PROTOCOL_VERSIONS]


@pytest.mark.parametrize("mode", MODES)
def test_the_python_sdk_client_in_each_of_its_modes(mode: str, home: Path, tmp_path: Path
                                                    ) -> None:
    """legacy: the handshake at the client's newest handshake version; auto: discovery,
    which gitrelay answers, so the newest per-request version; a version: that one, no
    discovery at all. Every kind of request goes through, each result checked by the client."""
    expected = {"legacy": sdk_versions.LATEST_HANDSHAKE_VERSION,
                "auto": sdk_versions.LATEST_MODERN_VERSION}.get(mode, mode)
    params = StdioServerParameters(command=sys.executable, args=ARGS, env=env_of(home),
                                   cwd=str(REPO))

    async def body(errlog: IO[str]) -> None:
        async with Client(stdio_client(params, errlog=errlog), mode=mode,
                          read_timeout_seconds=ANSWER_TIMEOUT_S) as client:
            assert client.protocol_version == expected
            if mode != expected:  # negotiated, so the server said who it is
                assert client.server_info is not None and client.server_info.name == "gitrelay"
            tools = await client.list_tools()
            assert {"check_inbox", "handoff_to_teammate"} <= {t.name for t in tools.tools}
            team = await client.call_tool("list_teammates", {})
            assert not team.is_error and "dana@acme" in team.content[0].text  # type: ignore[union-attr]
            wrong = await client.call_tool("check_inbox", {"limit": "many"})
            assert wrong.is_error
            assert wrong.content[0].text.startswith("invalid_argument (-32602): ")  # type: ignore[union-attr]
            prompts = await client.list_prompts()
            name = prompts.prompts[0].name
            got = await client.get_prompt(name, {a.name: "x" for a in
                                                 prompts.prompts[0].arguments or [] if a.required})
            assert got.messages
            resources = await client.list_resources()
            inbox = await client.read_resource(resources.resources[0].uri)
            assert inbox.contents
            templates = await client.list_resource_templates()
            assert templates.resource_templates
            if expected in protocol.MODERN_VERSIONS:  # the cache hints reach the client
                assert (tools.ttl_ms, tools.cache_scope) == (LIST_TTL_MS, "private")
                assert inbox.ttl_ms == 0

    with (tmp_path / "server.log").open("w") as errlog:
        anyio.run(body, errlog)


@pytest.fixture(scope="module")
def ts_sdk() -> Path:
    return typescript_sdk()


def test_the_typescript_sdk_client_speaks_the_handshake_era(ts_sdk: Path, home: Path,
                                                            tmp_path: Path) -> None:
    """The pinned TypeScript client knows only the handshake: it offers its newest version,
    which gitrelay speaks, and goes on at that version."""
    with contextlib.ExitStack() as stack:
        errlog = stack.enter_context((tmp_path / "ts.log").open("w"))
        client = stack.enter_context(TsClient(ts_sdk, sys.executable, ARGS, env_of(home),
                                              REPO, errlog))
        assert client.protocol == protocol.LATEST_HANDSHAKE_VERSION
        assert client.protocol in protocol.HANDSHAKE_VERSIONS
        assert "check_inbox" in client.tools and client.server_info["name"] == "gitrelay"
        team = client.request("list_teammates", {})
        assert not team.get("client_error") and not team["is_error"], team
        assert "dana@acme" in team["text"]
