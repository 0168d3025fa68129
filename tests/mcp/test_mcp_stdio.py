"""Real ``gitrelay mcp`` processes for alice and bob on one relay, driven through the
SDK's stdio client: the whole lifecycle of each intent, through the gate."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gitrelay.core import layout
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from tests.kit import (
    ARTIFACTS,
    ROOT,
    TRUST,
    Bench,
    await_until,
    git,
    hermetic_env,
    in_fence,
    log_subjects,
    read_answer,
)

pytestmark = pytest.mark.slow  # real `gitrelay mcp` processes on stdio


def mcp_command(home: Path, *flags: str, **env: str) -> StdioServerParameters:
    """``gitrelay mcp`` with structured answers: these tests read the typed data
    (tests/mcp/test_mcp_text_answers.py reads what a coding host shows the model)."""
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "gitrelay", "mcp", "--structured", *flags],
                                 env=hermetic_env(home.parent / "home", gitrelay_home=home,
                                                  **env), cwd=str(ROOT))


@asynccontextmanager
async def connect(params: StdioServerParameters, errlog: TextIO) -> AsyncIterator[ClientSession]:
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write, read_timeout_seconds=60) as session:
        await session.initialize()
        yield session


class Agent:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def ok(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.session.call_tool(tool, args or {})
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        assert not result.is_error, text
        content: dict[str, Any] | None = result.structured_content
        assert content is not None
        read_answer(text, content)
        return content

    async def fails(self, tool: str, args: dict[str, Any]) -> str:
        result = await self.session.call_tool(tool, args)
        assert result.is_error, result.structured_content
        text: str = result.content[0].text  # type: ignore[union-attr]
        return text

    async def view_until(self, tid: str, ready: Callable[[dict[str, Any]], bool]
                         ) -> dict[str, Any]:
        """view_thread until ``ready``: the other side's change arrives with the next fetch."""
        async def viewed() -> dict[str, Any] | None:
            result = await self.session.call_tool("view_thread", {"thread_id": tid})
            seen: dict[str, Any] | None = result.structured_content
            if result.is_error:  # a queued handoff not delivered yet
                text = result.content[0].text  # type: ignore[union-attr]
                assert text.startswith("thread_not_found (-32006): "), text
            elif seen is not None and ready(seen):
                read_answer(result.content[0].text, seen)  # type: ignore[union-attr]
                return seen
            return None

        return await await_until(viewed, f"thread {tid} as awaited", every=0.1)


def fenced(value: str, token: str) -> str:
    """``value`` after checking that the answer with ``token`` had it in its fence."""
    out: str = in_fence(value, token)
    return out


Homes = tuple[Path, Path, Path, Path]


@pytest.fixture
def two_homes(relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Homes:
    """alice joined with a saved config (her server needs no flags); bob joined
    without one (his server gets --relay/--as/--trust)."""
    alice_home, bob_home = tmp_path / "alice", tmp_path / "bob"
    monkeypatch.setenv("GITRELAY_HOME", str(alice_home))
    joining.join(str(relay), "alice@acme", name="Alice Martin", role="backend")
    monkeypatch.setenv("GITRELAY_HOME", str(bob_home))
    joining.join(str(relay), "bob@acme", name="Bob Chen", role="frontend", save=False)
    alice_trust, bob_trust = tmp_path / "alice-trust.yaml", tmp_path / "bob-trust.yaml"
    alice_trust.write_text(TRUST.format(who="bob@acme"))
    bob_trust.write_text(TRUST.format(who="alice@acme"))
    return alice_home, bob_home, alice_trust, bob_trust


def test_two_server_processes_walk_every_intent_through_the_gate(
        relay: Path, two_homes: Homes, tmp_path: Path) -> None:
    alice_home, bob_home, alice_trust, bob_trust = two_homes
    alice_cmd = mcp_command(alice_home, GITRELAY_TRUST=str(alice_trust))
    bob_cmd = mcp_command(bob_home, "--relay", str(relay), "--as", "bob@acme",
                          "--trust", str(bob_trust), "--writes", "wait")

    async def body(alice_err: TextIO, bob_err: TextIO) -> None:
        async with connect(alice_cmd, alice_err) as a_session, \
                connect(bob_cmd, bob_err) as b_session:
            alice, bob = Agent(a_session), Agent(b_session)
            tools = {t.name for t in (await a_session.list_tools()).tools}
            assert {"handoff_to_teammate", "check_inbox", "accept_handoff", "view_thread",
                    "send_message", "complete_handoff", "cancel_handoff", "list_teammates",
                    "draft_proposed_action", "claim_inbox_item", "search_threads"} == tools

            # inform, with all five artifact types; alice's config says queue, so the
            # answer comes before delivery and her server's sync loop delivers it.
            sent = await alice.ok("handoff_to_teammate", {
                "to": "bob@acme", "intent": "inform", "artifacts": ARTIFACTS,
                "summary": "The /users endpoint now returns pages."})
            assert sent["status"] == "pending" and sent["delivery"] == "queued"
            inform = sent["thread_id"]
            seen = await bob.view_until(inform, lambda t: True)
            token = seen["provenance"]["fence"]
            assert fenced(seen["summary"], token) == "The /users endpoint now returns pages."
            assert [x["type"] for x in seen["artifacts"]] == [x["type"] for x in ARTIFACTS]
            assert json.loads(fenced(seen["artifacts"][3]["inline"], token)) == \
                ARTIFACTS[3]["inline"]
            accepted = await bob.ok("accept_handoff", {"thread_id": inform})
            assert accepted["delivery"] == "delivered" and accepted["trust_reason"] == "listed"
            assert accepted["trust_overlay"]["auto_test"] is True
            await bob.ok("complete_handoff", {"thread_id": inform,
                                              "result_summary": "Frontend reads pages now.",
                                              "artifacts": [ARTIFACTS[0]]})
            done = await alice.view_until(inform, lambda t: t["status"] == "completed")
            assert fenced(done["completion"]["result_summary"],
                          done["provenance"]["fence"]) == \
                "Frontend reads pages now."

            # ask_question: a question, an answer, a thank-you, done.
            asked = await alice.ok("handoff_to_teammate", {
                "to": "bob@acme", "intent": "ask_question", "summary": "Search paging",
                "question": "Cursor or offset?", "delivery": "wait"})
            assert asked["delivery"] == "delivered"
            question = asked["thread_id"]
            got = await bob.ok("accept_handoff", {"thread_id": question})
            assert fenced(got["question"], got["provenance"]["fence"]) == "Cursor or offset?"
            answer = await bob.ok("send_message", {"thread_id": question, "body": "Cursor."})
            assert answer["sequence_no"] == 1
            heard = await alice.view_until(question, lambda t: len(t["messages"]) == 1)
            (msg,) = heard["messages"]
            assert msg["from"] == "bob@acme"
            assert fenced(msg["body"], heard["provenance"]["fence"]) == "Cursor."
            await alice.ok("send_message", {"thread_id": question, "body": "Thanks!",
                                            "delivery": "wait"})
            thread = await bob.view_until(question, lambda t: len(t["messages"]) == 2)
            assert [m["sequence_no"] for m in thread["messages"]] == [1, 2]
            await bob.ok("complete_handoff", {"thread_id": question,
                                              "result_summary": "Answered: cursor."})

            # propose_action without a diff: bob drafts one, alice reviews it.
            proposed = (await alice.ok("handoff_to_teammate", {
                "to": "bob@acme", "intent": "propose_action", "summary": "Paginate /users",
                "proposed_action": {"description": "Add paging", "rationale": "10k rows",
                                    "target_files": ["src/api/users.ts"]},
                "delivery": "wait"}))["thread_id"]
            await bob.ok("accept_handoff", {"thread_id": proposed})
            draft = await bob.ok("draft_proposed_action", {
                "thread_id": proposed, "suggested_diff": "+paginate(users)"})
            assert draft["type"] == "draft"
            review = await alice.view_until(proposed, lambda t: len(t["messages"]) == 1)
            (drafted,) = review["messages"]
            assert drafted["type"] == "draft"
            assert fenced(drafted["suggested_diff"], review["provenance"]["fence"]) == \
                "+paginate(users)"
            await alice.ok("send_message", {"thread_id": proposed, "body": "Ship it.",
                                            "delivery": "wait"})
            await bob.ok("complete_handoff", {"thread_id": proposed,
                                              "result_summary": "Applied the draft."})
            await alice.view_until(proposed, lambda t: t["status"] == "completed")

            # propose_action with a diff; then a cancelled handoff bob can no longer take.
            with_diff = (await alice.ok("handoff_to_teammate", {
                "to": "bob@acme", "intent": "propose_action", "summary": "Rename a field",
                "proposed_action": {"description": "Rename", "rationale": "Clarity",
                                    "target_files": ["a.py"], "suggested_diff": "-a\n+b"},
                "delivery": "wait"}))["thread_id"]
            got = await bob.ok("accept_handoff", {"thread_id": with_diff})
            action = got["proposed_action"]
            assert fenced(action["suggested_diff"], got["provenance"]["fence"]) == "-a\n+b"
            await bob.ok("complete_handoff", {"thread_id": with_diff, "result_summary": "Done"})
            dropped = (await alice.ok("handoff_to_teammate", {
                "to": "bob@acme", "intent": "inform", "summary": "never mind",
                "delivery": "wait"}))["thread_id"]
            await alice.ok("cancel_handoff", {"thread_id": dropped, "delivery": "wait"})
            await bob.view_until(dropped, lambda t: t["status"] == "cancelled")
            late = await bob.fails("accept_handoff", {"thread_id": dropped})
            assert late.startswith("thread_terminal (-32007): ")
            nobody = await alice.fails("handoff_to_teammate", {
                "to": "frank@acme", "intent": "inform", "summary": "hello"})
            assert nobody.startswith("recipient_not_found (-32004): ")

    with (tmp_path / "alice.err").open("w") as alice_err, \
            (tmp_path / "bob.err").open("w") as bob_err:
        anyio.run(body, alice_err, bob_err)
    log = log_subjects(relay)
    assert sum(s.startswith("handoff") for s in log) == 5
    assert sum(s.startswith("complete") for s in log) == 4
    assert sum(s.startswith("cancel") for s in log) == 1


def test_check_inbox_through_a_server_process(
        relay: Path, two_homes: Homes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alice_home, bob_home, _, bob_trust = two_homes
    bob_cmd = mcp_command(bob_home, "--relay", str(relay), "--as", "bob@acme",
                          "--trust", str(bob_trust))

    async def body(err: TextIO) -> None:
        async with connect(bob_cmd, err) as session:
            bob = Agent(session)
            empty = await bob.ok("check_inbox")
            assert empty["items"] == [] and empty["next_cursor"] is None
            monkeypatch.setenv("GITRELAY_HOME", str(alice_home))
            sent = RelayClient(str(relay), "alice@acme").handoff(
                to="bob@acme", intent="inform", summary="for your inbox", mode="wait")
            async def inbox_items() -> list[dict[str, Any]]:
                items: list[dict[str, Any]] = (await bob.ok("check_inbox"))["items"]
                return items

            items = await await_until(inbox_items, "the handoff in bob's inbox", every=0.1)
            assert [i["thread_id"] for i in items] == [sent.thread_id]

    with (tmp_path / "bob.err").open("w") as err:
        anyio.run(body, err)


def test_a_server_without_an_identity_exits_saying_what_to_do(tmp_path: Path) -> None:
    home = tmp_path / "nobody"
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "mcp"],
                          env=hermetic_env(home.parent / "home", gitrelay_home=home),
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert proc.stdout == ""  # stdout is the protocol channel: nothing else goes there
    assert "config_error (-32023): no identity: no handle was given" in proc.stderr
    assert "`gitrelay join RELAY --as HANDLE" in proc.stderr


def test_the_embedded_relay_lets_one_person_try_it_alone(tmp_path: Path) -> None:
    home = tmp_path / "solo"

    async def body(err: TextIO) -> None:
        async with connect(mcp_command(home, "--as", "dana@acme"), err) as session:
            dana = Agent(session)
            team = await dana.ok("list_teammates")
            assert [t["handle"] for t in team["teammates"]] == ["dana@acme"]
            assert team["teammates"][0]["you"] is True
            sent = await dana.ok("handoff_to_teammate", {
                "to": "dana@acme", "intent": "inform", "summary": "a note to self",
                "delivery": "wait"})
            assert sent["inbox_url"] == f"gitrelay://local/threads/{sent['thread_id']}"
            assert sent["delivery"] == "delivered"

    with (tmp_path / "solo.err").open("w") as err:
        anyio.run(body, err)
    assert (home / "local-relay.git" / "hooks" / "pre-receive").exists()


PEOPLE = ("carol@acme", "alice@acme", "bob@acme")


def _join(relay: Path, home: Path, handle: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "join", str(relay), "--as", handle,
                           "--name", handle.split("@")[0].title(), "--role", "engineer"],
                          env=hermetic_env(home.parent / "home", gitrelay_home=home), cwd=ROOT,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "flat"])
def test_join_and_list_teammates_through_mcp_on_either_teammates_layout(
        tmp_path: Path, sharded: bool) -> None:
    """`gitrelay join` and `list_teammates` on a sharded relay and on a flat one (made
    before sharding): the profiles lie at the relay's own paths, the pages list everyone
    once, in order, and a handoff reaches a teammate found in the registry."""
    if sharded:
        relay = joining.init_relay(tmp_path / "relay.git", name="acme")
    else:
        relay = Bench.create(tmp_path / "flat", config={"teammates_layout": None}).relay
    homes = {h: tmp_path / h.split("@")[0] for h in PEOPLE}
    for handle in PEOPLE:
        _join(relay, homes[handle], handle)
    stored = git("ls-tree", "-r", "--name-only", layout.MAIN_REF, layout.TEAMMATES_DIR,
                 git_dir=relay).stdout.decode().split()
    assert sorted(stored) == sorted(layout.profile_path(h, sharded) for h in PEOPLE)
    bob_cmd = mcp_command(homes["bob@acme"], "--relay", str(relay), "--as", "bob@acme")

    async def body(err: TextIO) -> None:
        async with connect(bob_cmd, err) as session:
            bob = Agent(session)
            seen: list[dict[str, Any]] = []
            page = await bob.ok("list_teammates", {"limit": 2})
            seen += page["teammates"]
            assert page["next_cursor"]
            page = await bob.ok("list_teammates", {"limit": 2, "cursor": page["next_cursor"]})
            seen += page["teammates"]
            assert page["next_cursor"] is None
            assert [t["handle"] for t in seen] == sorted(PEOPLE)
            assert [t["handle"] for t in seen if t.get("you")] == ["bob@acme"]
            sent = await bob.ok("handoff_to_teammate", {
                "to": "CAROL@acme", "intent": "inform", "summary": "the nightly export",
                "delivery": "wait"})
            assert sent["delivery"] == "delivered"
            missing = await bob.fails("handoff_to_teammate", {
                "to": "dave@acme", "intent": "inform", "summary": "nobody there"})
            assert "recipient_not_found" in missing

    with (tmp_path / "bob.err").open("w") as err:
        anyio.run(body, err)
