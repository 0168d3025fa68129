"""``gitrelay mcp``'s start: ``initialize`` is answered while the server is still loading.

A coding host offers gitrelay's tools only once the server has answered ``initialize``
and ``tools/list``, and Codex waits for a server only so long; loading the server is
most of a start (docs/agents.md, "When the tools arrive"). These tests hold the order
with the loading held back by the test itself, so no time is measured: the handshake is
answered while it is held, and every other request waits for it, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from gitrelay.core.errors import ConfigError
from gitrelay.mcp.agentserver import build_server
from gitrelay.mcp.handshake import INSTRUCTIONS
from gitrelay.mcp.protocol import LATEST_HANDSHAKE_VERSION as LATEST_VERSION
from gitrelay.mcp.stdio import Loaded, Send, serve_loading
from tests.kit import hermetic_env

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}


class Wire:
    """The server's stdin and stdout as two pipes, served by ``serve_loading`` on a
    thread; the test writes requests and reads answers line by line."""

    def __init__(self, load: Any) -> None:
        rin, self._win = os.pipe()
        self._rout, wout = os.pipe()
        self.instream: IO[bytes] = os.fdopen(rin, "rb")
        self.outstream: IO[bytes] = os.fdopen(wout, "wb")
        self.reader: IO[bytes] = os.fdopen(self._rout, "rb")
        self.writer: IO[bytes] = os.fdopen(self._win, "wb")
        self.error: list[BaseException] = []

        def run() -> None:
            try:
                serve_loading(load, self.instream, self.outstream)
            except BaseException as exc:
                self.error.append(exc)
            finally:
                self.outstream.close()
                self.instream.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(json.dumps(message).encode() + b"\n")
        self.writer.flush()

    def answer(self) -> dict[str, Any]:
        line = self.reader.readline()
        assert line, "the server closed its output"
        value: dict[str, Any] = json.loads(line)
        return value

    def end(self) -> None:
        self.writer.close()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        self.reader.close()


@pytest.fixture
def held() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


def test_initialize_is_answered_while_the_server_is_loading(held: threading.Event) -> None:
    loaded: list[str] = []

    def load(send: Send) -> Loaded:
        assert held.wait(60), "the test never let the server load"
        loaded.append("server")
        return build_server(lambda: None).session(send), None

    wire = Wire(load)
    wire.send(INIT)
    first = wire.answer()  # while the loading is held back
    assert loaded == []
    assert first["id"] == 1
    assert first["result"]["protocolVersion"] == "2025-06-18"
    assert first["result"]["serverInfo"]["name"] == "gitrelay"
    assert first["result"]["instructions"] == INSTRUCTIONS
    wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    wire.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert wire.answer() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    # tools/list needs the server: it is answered once the loading is let through, and
    # the ping sent after it is answered after it.
    wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    wire.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
    held.set()
    listed = wire.answer()
    assert listed["id"] == 3 and loaded == ["server"]
    assert "check_inbox" in {t["name"] for t in listed["result"]["tools"]}
    assert wire.answer()["id"] == 4
    # The session answers initialize the same way once it is up.
    wire.send({**INIT, "id": 5, "params": {**INIT["params"], "protocolVersion": "1999-01-01"}})
    again = wire.answer()["result"]
    assert again == {**first["result"], "protocolVersion": LATEST_VERSION}
    wire.end()
    assert wire.error == []


def test_a_session_that_cannot_open_fails_at_the_next_request(held: threading.Event) -> None:
    def load(send: Send) -> Loaded:
        assert held.wait(60), "the test never let the server load"
        raise ConfigError("no identity: pass --as HANDLE or run `gitrelay join`")

    wire = Wire(load)
    wire.send(INIT)
    assert wire.answer()["result"]["serverInfo"]["name"] == "gitrelay"
    wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    held.set()
    failed = wire.answer()  # the request is answered with an error; the server lives on
    assert failed["id"] == 2 and "error" in failed
    wire.writer.close()  # at the end of the input the loading's error is raised
    wire.thread.join(timeout=30)
    assert [type(e) for e in wire.error] == [ConfigError]
    assert wire.reader.readline() == b""  # nothing more was written
    wire.reader.close()


def test_gitrelay_mcp_answers_initialize_before_it_has_loaded_the_server(
        tmp_path: Path) -> None:
    """The real command: the import of gitrelay's server is held back (an import hook of
    the probe's own) until the first answer is written, so a command that loaded the
    server before it answered would never answer and would say so."""
    probe = (
        "import sys, threading\n"
        "import gitrelay.mcp.protocol as protocol\n"
        "answered = threading.Event()\n"
        "encode = protocol.encode\n"
        "def spying(message):\n"
        "    answered.set()\n"
        "    return encode(message)\n"
        "protocol.encode = spying\n"
        "class Hold:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'gitrelay.mcp.agentserver' and not answered.wait(60):\n"
        "            sys.stderr.write('LOADED BEFORE ANSWERING\\n')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hold())\n"
        "sys.argv = ['gitrelay', 'mcp']\n"
        "from gitrelay.cli.main import main\n"
        "sys.exit(main())\n")
    home = tmp_path / "home"
    env = hermetic_env(home, gitrelay_home=home / ".gitrelay")
    proc = subprocess.run([sys.executable, "-c", probe], input=json.dumps(INIT) + "\n",
                          capture_output=True, text=True, env=env, timeout=180)
    assert "LOADED BEFORE ANSWERING" not in proc.stderr
    assert json.loads(proc.stdout.splitlines()[0])["id"] == 1, proc.stderr


def test_without_an_identity_the_tools_are_listed_and_each_call_says_what_to_do(
        tmp_path: Path) -> None:
    """A host that waits for the server (Codex's `required`) still starts: the server
    lists its tools, answers each call with the error, and at the end exits with it."""
    home = tmp_path / "home"
    requests = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "check_inbox", "arguments": {}}}]
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "mcp"],
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, timeout=180,
                          env=hermetic_env(home, gitrelay_home=home / ".gitrelay"))
    answers = {a["id"]: a for a in map(json.loads, proc.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3], proc.stderr
    assert "check_inbox" in {t["name"] for t in answers[2]["result"]["tools"]}
    called = answers[3]["result"]
    assert called["isError"] is True
    text = called["content"][0]["text"]
    assert text.startswith("config_error (-32023): no identity") and "gitrelay join" in text
    assert proc.returncode == 1
    assert "gitrelay: config_error (-32023): no identity" in proc.stderr
