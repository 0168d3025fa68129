"""Real ``gitrelay mcp`` processes driven by the TypeScript MCP SDK's client.

Agent hosts written in TypeScript embed ``@modelcontextprotocol/sdk``'s client:
it compiles every tool's output schema (Ajv) when it lists the tools and checks
each result against it, and refuses the call when a result does not match. So
this walks a handoff through the gate as those hosts see it, and every answer
here has passed that client's own schema check.

The client is installed from the npm registry into ``bench/.cache/ts-client``
on first use (:func:`bench.ts_host.ensure_sdk`). Without Node.js and npm, or
without the registry, these tests skip saying why, or fail when
``GITRELAY_REQUIRE_SERVERS=1`` (as in CI).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from bench.ts_host import TsClient
from gitrelay.relay import joining
from tests.kit import (
    ARTIFACTS,
    TRUST,
    hermetic_env,
    in_fence,
    read_answer,
    typescript_sdk,
    wait_until,
)

pytestmark = pytest.mark.slow  # real `gitrelay mcp` processes driven by the TypeScript SDK

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def sdk_dir() -> Path:
    return typescript_sdk()


def ts_server(sdk_dir: Path, home: Path, log: IO[str], *flags: str) -> TsClient:
    """``gitrelay mcp`` started and initialized by the TypeScript client."""
    return TsClient(sdk_dir, sys.executable, ["-m", "gitrelay", "mcp", *flags],
                    hermetic_env(home.parent / "home", gitrelay_home=home), REPO, log)


def ok(client: TsClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    out = client.request(tool, args)
    assert not out.get("client_error"), f"the TypeScript client refused {tool}: {out['text']}"
    assert not out["is_error"], out["text"]
    structured: dict[str, Any] = out["structured"]
    read_answer(out["text"], structured)
    return structured


def until(client: TsClient, tool: str, args: dict[str, Any],
          ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """``tool``'s answer once ``ready``: a server answers from its copy of the relay, and
    what the other side wrote arrives with its sync loop's next fetch."""
    answers: list[dict[str, Any]] = []

    def answered() -> bool:
        answers.append(ok(client, tool, args))
        return ready(answers[-1])

    wait_until(answered, lambda: f"{tool} shows it: {answers[-1]}", every=0.1)
    return answers[-1]


def fenced(value: str, token: str) -> str:
    """``value`` after checking that the answer with ``token`` had it in its fence."""
    out: str = in_fence(value, token)
    return out


@pytest.fixture
def servers(relay: Path, tmp_path: Path, sdk_dir: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[TsClient, TsClient]]:
    """alice's and bob's servers, each behind its own TypeScript client; wait mode, so
    each write has passed the gate when it answers."""
    with contextlib.ExitStack() as stack:
        log = stack.enter_context((tmp_path / "servers.log").open("w"))
        clients: list[TsClient] = []
        for handle, name, other in (("alice@acme", "Alice Martin", "bob@acme"),
                                    ("bob@acme", "Bob Chen", "alice@acme")):
            home = tmp_path / handle.split("@")[0]
            monkeypatch.setenv("GITRELAY_HOME", str(home))
            joining.join(str(relay), handle, name=name, role="backend", save=False)
            trust = tmp_path / f"{handle}-trust.yaml"
            trust.write_text(TRUST.format(who=other))
            # --structured: the client checks each typed answer against its output
            # schema; the last test reads the default, text alone, as a host does.
            clients.append(stack.enter_context(ts_server(
                sdk_dir, home, log, "--relay", str(relay), "--as", handle,
                "--trust", str(trust), "--writes", "wait", "--structured")))
        yield clients[0], clients[1]


def test_a_handoff_walks_through_the_gate_as_a_typescript_host_sees_it(servers):
    alice, bob = servers
    assert {"handoff_to_teammate", "check_inbox", "accept_handoff", "view_thread",
            "send_message", "complete_handoff", "cancel_handoff", "list_teammates",
            "draft_proposed_action", "claim_inbox_item", "search_threads"} == set(alice.tools)
    assert alice.server_info.get("name") == "gitrelay"

    sent = ok(alice, "handoff_to_teammate", {
        "to": "bob@acme", "intent": "ask_question", "artifacts": ARTIFACTS,
        "summary": "The /users endpoint now returns pages.", "question": "Cursor or offset?"})
    assert sent["delivery"] == "delivered" and sent["status"] == "pending"
    tid = sent["thread_id"]

    page = until(bob, "check_inbox", {}, lambda p: any(i["thread_id"] == tid
                                                       for i in p["items"]))
    (item,) = [i for i in page["items"] if i["thread_id"] == tid]
    assert item["kind"] == "assignment" and item["unread"] is True
    assert fenced(item["summary_preview"], item["provenance"]["fence"]) == \
        "The /users endpoint now returns pages."

    seen = ok(bob, "view_thread", {"thread_id": tid})
    token = seen["provenance"]["fence"]
    assert fenced(seen["question"], token) == "Cursor or offset?"
    assert [a["type"] for a in seen["artifacts"]] == [a["type"] for a in ARTIFACTS]

    accepted = ok(bob, "accept_handoff", {"thread_id": tid})
    assert accepted["status"] == "accepted" and accepted["trust_reason"] == "listed"
    reply = ok(bob, "send_message", {"thread_id": tid, "body": "Cursor."})
    assert reply["sequence_no"] == 1
    done = ok(bob, "complete_handoff", {"thread_id": tid, "result_summary": "Answered."})
    assert done["status"] == "completed"

    closed = until(alice, "view_thread", {"thread_id": tid},
                   lambda t: t["status"] == "completed")
    (msg,) = closed["messages"]
    assert fenced(msg["body"], closed["provenance"]["fence"]) == "Cursor."
    news = ok(alice, "check_inbox", {"after": 0})
    assert {i["kind"] for i in news["items"] if i["thread_id"] == tid} == \
        {"task_update", "reply"}
    assert [t["handle"] for t in ok(alice, "list_teammates", {})["teammates"]] == \
        ["alice@acme", "bob@acme"]


def test_a_refusal_reaches_a_typescript_host_as_a_coded_tool_error(servers):
    alice, _bob = servers
    out = alice.request("view_thread", {"thread_id": "0" * 26})
    assert out["is_error"] and not out.get("client_error")
    assert out["text"].startswith("thread_not_found (-32006): "), out["text"]
    out = alice.request("handoff_to_teammate", {"to": "bob@acme", "intent": "inform"})
    assert out["is_error"] and not out.get("client_error")
    assert out["text"].startswith("invalid_argument (-32602): "), out["text"]
    assert "summary" in out["text"]


def test_a_typescript_host_gets_the_default_answers_as_text_alone(
        relay: Path, tmp_path: Path, sdk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "carol"
    monkeypatch.setenv("GITRELAY_HOME", str(home))
    joining.join(str(relay), "carol@acme", name="Carol Diaz", role="platform", save=False)
    with (tmp_path / "carol.log").open("w") as log, \
            ts_server(sdk_dir, home, log, "--relay", str(relay), "--as", "carol@acme",
                      "--writes", "wait") as carol:
        sent = carol.request("handoff_to_teammate", {
            "to": "carol@acme", "intent": "inform", "summary": "a note to self"})
        assert not sent["is_error"] and not sent.get("client_error"), sent["text"]
        assert sent["structured"] is None
        assert sent["text"].startswith("handoff_to_teammate thread_id=")
        page = carol.request("list_teammates", {})
        assert page["structured"] is None and not page.get("client_error"), page["text"]
        assert page["text"].startswith("teammates you=carol@acme")
        assert read_answer(page["text"], None).token is None  # her own profile: no fence
