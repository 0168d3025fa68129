"""Answers written as they were encoded (gitrelay/wire.py, gitrelay/answers.py): what a
client reads is what the MCP SDK's own transport would have sent."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp.types import (
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from test_answers import RULES, page_of
from test_mcp_stdio import REPO, hermetic_env
from test_pipes import answers_of

from gitrelay.mcp.answers import MARK, AnswerMemo, RawJSON, answer_of, send_encoded
from gitrelay.mcp.pipes import stdio_pipes
from gitrelay.mcp.present import present_inbox_fenced
from gitrelay.mcp.tool_models import Person
from gitrelay.mcp.wire import encode, line_streams
from gitrelay.relay.client import RelayClient
from tests.answerkit import read_answer

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


def test_a_message_with_nothing_encoded_is_written_as_the_sdk_writes_it() -> None:
    messages: list[JSONRPCMessage] = [
        JSONRPCRequest(jsonrpc="2.0", id=3, method="ping"),
        JSONRPCNotification(jsonrpc="2.0", method="notifications/progress",
                            params={"progressToken": "t", "progress": 1}),
        JSONRPCResponse(jsonrpc="2.0", id="inbox", result={"content": [], "isError": False}),
        JSONRPCError(jsonrpc="2.0", id=7, error=ErrorData(code=-32602, message="bad \"x\"")),
    ]
    for message in messages:
        assert encode(message) == message.model_dump_json(by_alias=True, exclude_unset=True)


@given(members=st.dictionaries(st.text(), json_values, min_size=1, max_size=3),
       rest=st.dictionaries(st.text(), json_values, max_size=3),
       request_id=st.integers() | st.text())
def test_encoded_members_are_written_as_they_are_among_the_rest(
        members: dict[str, Any], rest: dict[str, Any], request_id: int | str) -> None:
    rest = {k: v for k, v in rest.items() if k not in members}
    raw = {k: RawJSON(json.dumps(v, ensure_ascii=False)) for k, v in members.items()}
    line = encode(JSONRPCResponse(jsonrpc="2.0", id=request_id, result={**raw, **rest}))
    assert "\n" not in line
    assert json.loads(line) == {"jsonrpc": "2.0", "id": request_id,
                                "result": {**members, **rest}}


def test_any_other_writer_refuses_encoded_members_instead_of_sending_something_else() -> None:
    message = JSONRPCResponse(jsonrpc="2.0", id=1, result={"content": RawJSON("[]")})
    with pytest.raises(Exception, match="RawJSON"):
        message.model_dump_json(by_alias=True, exclude_unset=True)


ALICE = Person(handle="alice@acme", name="Alice Martin", role="backend")


class Ctx:
    def __init__(self, method: str) -> None:
        self.method = method


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def sent(result: dict[str, Any]) -> dict[str, Any]:
    """A result as the line transport writes it, read back."""
    line: dict[str, Any] = json.loads(encode(JSONRPCResponse(jsonrpc="2.0", id=1,
                                                            result=result)))
    return dict(line["result"])


def fence(result: dict[str, Any]) -> str:
    return str(result["structuredContent"]["items"][0]["provenance"]["fence"])


def sdk_dump(answer: Any) -> dict[str, Any]:
    """A tool result as the SDK first dumps it (its runner, before the protocol check)."""
    dumped: dict[str, Any] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def test_a_tool_answer_leaves_as_built_and_equal_to_the_sdk_dump() -> None:
    rules = RULES
    page = page_of('Quote " and back\\slash', "caf\u00e9 \u65e5\u672c \U0001f680", "tab\there")
    memo = AnswerMemo()
    plain = sdk_dump(memo.answer((page, "bob@acme", rules),
                                 lambda: present_inbox_fenced(page, caller="bob@acme",
                                                              rules=rules)))
    memo.clear()
    stand_ins: list[Any] = []

    async def call_next(ctx: Any) -> dict[str, Any]:
        answer = memo.answer((page, "bob@acme", rules),
                             lambda: present_inbox_fenced(page, caller="bob@acme", rules=rules))
        stand_ins.append(answer)
        return sdk_dump(answer)

    first = sent(run(send_encoded(Ctx("tools/call"), call_next)))
    again = sent(run(send_encoded(Ctx("tools/call"), call_next)))
    assert [a.content for a in stand_ins] == [[], []]  # the SDK checked stand-ins
    # Built under a slot and given again from it: the plain answer, each under its token.
    tokens = [fence(plain), fence(first), fence(again)]
    assert len(set(tokens)) == 3
    for out, token in ((first, tokens[1]), (again, tokens[2])):
        assert json.loads(json.dumps(out).replace(token, tokens[0])) == plain
        read = read_answer(out["content"][0]["text"], out["structuredContent"])
        assert read.token == token
        assert [v.value for v in read.values if v.field.startswith("[")] == [
            i["summary_preview"] for i in out["structuredContent"]["items"]]


def test_only_the_answer_the_call_returned_is_sent_and_an_error_is_sent_as_it_is() -> None:
    async def two_answers(ctx: Any) -> dict[str, Any]:
        answer_of(Person(handle="alice@acme", name="first", role="dev"))
        return sdk_dump(answer_of(Person(handle="alice@acme", name="second", role="dev")))

    out = sent(run(send_encoded(Ctx("tools/call"), two_answers)))
    assert out["structuredContent"]["name"] == "second"
    assert "_meta" not in out

    error = {"content": [{"type": "text", "text": "thread_not_found (-32006): ..."}],
             "isError": True, "_meta": {"io.example/serverInfo": {"name": "gitrelay"}}}

    async def fails_after_building(ctx: Any) -> dict[str, Any]:
        answer_of(Person(handle="alice@acme", name="built, then failed", role="dev"))
        return error

    assert run(send_encoded(Ctx("tools/call"), fails_after_building)) == error

    async def listing(ctx: Any) -> dict[str, Any]:
        assert answer_of(ALICE).content  # no stand-in outside a tool call
        return {"tools": []}

    assert run(send_encoded(Ctx("tools/list"), listing)) == {"tools": []}


def test_other_meta_of_an_answer_is_kept() -> None:
    async def stamped(ctx: Any) -> dict[str, Any]:
        dumped = sdk_dump(answer_of(ALICE))
        dumped["_meta"]["io.example/serverInfo"] = {"name": "gitrelay"}
        return dumped

    out = sent(run(send_encoded(Ctx("tools/call"), stamped)))
    assert out["_meta"] == {"io.example/serverInfo": {"name": "gitrelay"}}
    assert MARK not in json.dumps(out)


TOKEN = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")


def joined(relay: Path, tmp_path: Path) -> dict[str, dict[str, str]]:
    """alice@acme and bob@acme joined to ``relay``, each with a home of their own."""
    env = {}
    for who in ("alice@acme", "bob@acme"):
        env[who] = hermetic_env(tmp_path / who.split("@")[0])
        subprocess.run([sys.executable, "-m", "gitrelay", "join", str(relay), "--as", who,
                        "--name", who.title(), "--role", "dev"], env=env[who], cwd=REPO,
                       check=True, capture_output=True, timeout=60)
    return env


def handshake(version: str) -> list[dict[str, Any]]:
    return [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": version, "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def tool_calls(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
             "params": {"name": name, "arguments": args}} for i, (name, args) in enumerate(calls)]


def serve(env: dict[str, str], script: list[dict[str, Any]], *flags: str
          ) -> dict[object, dict[str, Any]]:
    """The answers of a `gitrelay mcp` process to ``script``, by id: one request at a
    time, each answer read before the next request is written."""
    got: dict[object, dict[str, Any]] = {}
    with subprocess.Popen([sys.executable, "-m", "gitrelay", "mcp", *flags],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, env=env, cwd=REPO) as server:
        assert server.stdin is not None and server.stdout is not None
        for message in script:
            server.stdin.write(json.dumps(message).encode() + b"\n")
            server.stdin.flush()
            if "id" in message:
                line = server.stdout.readline()
                assert line, f"the server stopped before answering {message['id']}"
                got |= answers_of(line)
        server.stdin.close()
        server.wait(timeout=60)
    return got


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS)
def test_a_server_process_answers_every_call_as_on_the_sdk_transport(
        relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    # As a new user would: a teammate's handoffs with quotes, backslashes, tabs and
    # non-ASCII text in them, read by bob through `gitrelay mcp`; every answer equals
    # what the same server sends on the SDK's own stdio transport, fence tokens aside.
    env = joined(relay, tmp_path)
    monkeypatch.setenv("GITRELAY_HOME", env["alice@acme"]["GITRELAY_HOME"])
    alice = RelayClient(str(relay), "alice@acme")
    summaries = ['Review "users" \\ pagination', "caf\u00e9 \u65e5\u672c \U0001f680\tdone",
                 "Line one\nline two"]
    threads = [alice.handoff(to="bob@acme", intent="inform", summary=s, mode="wait").thread_id
               for s in summaries]
    monkeypatch.setenv("GITRELAY_HOME", env["bob@acme"]["GITRELAY_HOME"])
    RelayClient(str(relay), "bob@acme").refresh(max_age=0)  # both servers read one mirror
    calls: list[tuple[str, dict[str, Any]]] = [
        ("check_inbox", {}), ("check_inbox", {}), ("check_inbox", {"after": 1}),
        ("check_inbox", {"unread_only": True, "wait_seconds": 0.2}),
        ("view_thread", {"thread_id": threads[0]}), ("view_thread", {"thread_id": "nope"}),
        ("check_inbox", {"limit": "many"}), ("view_thread", {"thread_id": threads[1]}),
    ]
    script = [*handshake(version), *tool_calls(calls),
              {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}]

    def answers(**extra: str) -> dict[object, dict[str, Any]]:
        return serve({**env["bob@acme"], **extra}, script)

    ours, sdks = answers(), answers(GITRELAY_STDIO="sdk")
    for key, answer in ours.items():
        assert json.loads(TOKEN.sub("T", json.dumps(answer))) == \
            json.loads(TOKEN.sub("T", json.dumps(sdks[key]))), key
    result = {i: ours[i]["result"] for i in range(1, len(calls) + 1)}
    assert result[6]["isError"] and result[7]["isError"]
    for r in result.values():
        if not r["isError"]:
            text = r["content"][0]["text"]
            # A read's text is the compact text with its fence; any other answer's the JSON.
            read = read_answer(text, r["structuredContent"])
            assert read.token is not None or json.loads(text) == r["structuredContent"]
    assert len(result[1]["structuredContent"]["items"]) == 3
    assert TOKEN.findall(json.dumps(result[1])) != TOKEN.findall(json.dumps(result[2]))


def test_a_request_is_answered_on_the_wire_only_after_the_handshake() -> None:
    # The line transport offers a request to the server's direct answer only once
    # the initialize handshake is done, with the version the server answered; what
    # it declines, and everything before the handshake, reaches the SDK's side.
    offered: list[tuple[str, str]] = []

    async def direct(request: JSONRPCRequest, version: str) -> dict[str, Any] | ErrorData | None:
        offered.append((request.method, version))
        if request.method == "decline":
            return None
        if request.method == "fail":
            raise RuntimeError("a bug")
        if request.method == "refuse":
            return ErrorData(code=-32602, message="refused here")
        return {"content": RawJSON('[{"type":"text","text":"here"}]'), "isError": False}

    def request(rid: int, method: str) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                           "params": {"name": "check_inbox"}}).encode() + b"\n"

    initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'

    async def main() -> tuple[list[Any], list[dict[str, Any]]]:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        loop = asyncio.get_running_loop()
        answers = os.fdopen(out_r, "rb")
        reached: list[Any] = []
        wire: list[dict[str, Any]] = []
        try:
            async with stdio_pipes(in_r, out_w) as pipes:
                assert pipes is not None
                async with line_streams(pipes, direct) as (read, write):
                    async def sdk_gets(line: bytes) -> None:
                        os.write(in_w, line)
                        with anyio.fail_after(10):
                            reached.append((await read.receive()).message)  # type: ignore[union-attr]

                    async def from_wire() -> dict[str, Any]:
                        line = await loop.run_in_executor(None, answers.readline)
                        return dict(json.loads(line))

                    async def wire_answers(line: bytes) -> None:
                        os.write(in_w, line)
                        wire.append(await from_wire())

                    await sdk_gets(request(1, "tools/call"))  # before initialize
                    await sdk_gets(request(2, "initialize"))
                    await write.send(SessionMessage(JSONRPCResponse(
                        jsonrpc="2.0", id=2, result={"protocolVersion": "2025-11-25"})))
                    wire.append(await from_wire())
                    await sdk_gets(request(3, "tools/call"))  # before initialized
                    await sdk_gets(initialized)
                    for rid, method in ((4, "tools/call"), (6, "fail"), (7, "refuse")):
                        await wire_answers(request(rid, method))
                    await sdk_gets(request(5, "decline"))
                    for rid in (1, 3, 5):  # the SDK's side answers what reached it
                        await write.send(SessionMessage(JSONRPCResponse(
                            jsonrpc="2.0", id=rid, result={})))
                        await from_wire()
                    os.close(in_w)
                    await write.aclose()
                    await read.aclose()
        finally:
            answers.close()
        return reached, wire

    reached, wire = run(main())
    assert [(type(m).__name__, getattr(m, "id", None)) for m in reached] == [
        ("JSONRPCRequest", 1), ("JSONRPCRequest", 2), ("JSONRPCRequest", 3),
        ("JSONRPCNotification", None), ("JSONRPCRequest", 5)]
    assert offered == [(m, "2025-11-25") for m in ("tools/call", "fail", "refuse", "decline")]
    assert wire == [
        {"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": "2025-11-25"}},
        {"jsonrpc": "2.0", "id": 4,
         "result": {"content": [{"type": "text", "text": "here"}], "isError": False}},
        {"jsonrpc": "2.0", "id": 6, "error": {"code": -32603,
                                              "message": "internal error (RuntimeError)"}},
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "refused here"}}]


# What differs between two runs of the same calls: ids, times, keys, fence tokens.
RUN_SPECIFIC = [re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"),
                re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"),
                re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
                TOKEN]


def run_free(answer: dict[str, Any]) -> Any:
    text = json.dumps(answer)
    for pattern in RUN_SPECIFIC:
        text = pattern.sub("X", text)
    return json.loads(text)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_queued_writes_answered_on_the_wire_equal_the_sdk_transport(
        relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    # As a new user would: bob's agent hands work to alice, accepts her handoff,
    # posts, gets two refusals, cancels and completes, in queue mode; every answer, the
    # refusals included, is the same on the server's own pipes (where these calls
    # are answered on the wire) as on the SDK's transport, ids and times aside.
    env = joined(relay, tmp_path)
    subprocess.run([sys.executable, "-m", "gitrelay", "trust", "add", "alice@acme"],
                   env=env["bob@acme"], cwd=REPO, check=True, capture_output=True, timeout=60)

    def one_run(**extra: str) -> dict[object, dict[str, Any]]:
        monkeypatch.setenv("GITRELAY_HOME", env["alice@acme"]["GITRELAY_HOME"])
        tid = RelayClient(str(relay), "alice@acme").handoff(
            to="bob@acme", intent="ask_question", summary="Why is the export slow?",
            question="Is it the sort?", mode="wait").thread_id
        monkeypatch.setenv("GITRELAY_HOME", env["bob@acme"]["GITRELAY_HOME"])
        RelayClient(str(relay), "bob@acme").refresh(max_age=0)
        bob = {**env["bob@acme"], **extra}
        first = serve(bob, [*handshake(version), *tool_calls([("handoff_to_teammate", {
            "to": "alice@acme", "intent": "inform",
            "summary": "The sort dominates; profile attached."})])], "--writes", "queue")
        mine = first[1]["result"]["structuredContent"]["thread_id"]
        calls: list[tuple[str, dict[str, Any]]] = [
            ("accept_handoff", {"thread_id": tid}),
            ("send_message", {"thread_id": tid, "body": "It is the sort: \"quick\" \\ tab\t."}),
            ("complete_handoff", {"thread_id": mine, "result_summary": "Done."}),
            ("send_message", {"thread_id": tid, "body": "x", "colour": "red"}),
            ("send_message", {"thread_id": mine, "body": "One more number.",
                              "payload": {"p99_ms": 41}}),
            ("cancel_handoff", {"thread_id": mine, "reason": "Solved already."}),
            ("complete_handoff", {"thread_id": tid, "result_summary": "Answered."}),
        ]
        return serve(bob, [*handshake(version), *tool_calls(calls)], "--writes", "queue")

    ours, sdks = one_run(), one_run(GITRELAY_STDIO="sdk")
    assert ours.keys() == sdks.keys()
    for key in ours:
        assert run_free(ours[key]) == run_free(sdks[key]), key
    result = {i: ours[i]["result"] for i in range(1, 8)}
    assert not result[1]["isError"], result[1]
    assert [r["isError"] for r in result.values()] == [False, False, True, True, False, False,
                                                        False]
    assert "not_authorized_transition" in result[3]["content"][0]["text"]
    assert "colour" in result[4]["content"][0]["text"]
    assert {result[i]["structuredContent"]["delivery"] for i in (1, 2, 5, 6, 7)} == {"queued"}
