"""Bad input to every MCP tool and every CLI command: a coded error, and nothing written.

MCP: each case is one call through the SDK's in-process client on a real relay
with the gate. The answer must be a tool error whose text starts with
``name (code): `` (never ``internal_error``), and the relay's refs, every
teammate's mirror refs (outbox and inbox refs included) and their refused-
operation logs must be exactly as before the call.

CLI: each case runs the real entry point (``python -m gitrelay …``) in a
process against the same relay, as a new user would type it. It must exit
non-zero with exactly one line on stderr, ``gitrelay: name (code): …``, no
traceback, nothing on stdout, and again nothing written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gitrelay.core.schema import DEFAULT_LIMITS
from gitrelay.mcp.agentserver import build_server
from gitrelay.mcp.inprocess import in_process
from gitrelay.mcp.state import ServerState
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.store.gitstore import Store
from gitrelay.trust.trust import TrustStore
from tests.kit import git_out, in_fence, read_answer, set_hermetic

ALICE, BOB, CAROL = "alice@acme", "bob@acme", "carol@acme"
PEOPLE = {ALICE: ("Alice Martin", "backend"), BOB: ("Bob Chen", "frontend"),
          CAROL: ("Carol Diaz", "platform")}
TRUST = "version: 1\nteammates: {alice@acme: {}, bob@acme: {}, carol@acme: {}}\n"
CODED = re.compile(r"^(?P<name>[a-z_]+) \((?P<code>-\d+)\): \S")
CLI_CODED = re.compile(r"^gitrelay: (?P<name>[a-z_]+) \((?P<code>-\d+)\): \S")
NO_SUCH = "0123456789ABCDEFGHJKMNPQRS"   # a well-formed thread id nobody used
MAX_TEXT = DEFAULT_LIMITS["max_text_chars"]
THREAD_TOOLS = ("accept_handoff", "view_thread", "send_message", "complete_handoff",
                "cancel_handoff", "draft_proposed_action")
# Thread ids that try to leave the threads/ tree, hide a NUL, or are far too long.
TRICK_IDS = ["../", "../../etc/passwd", "%2e%2e", "..%2F..", "..\\..", "threads/AB",
             "a\x00b", "\x00\x00", "A" * 27, "A" * 5000, "０１２３", "-rf", "~", "..", ". ."]
BAD_HANDLES = ["bob", "bob@", "@acme", "bob@acme\n", "../x@acme", "-bob@acme", "bob..x@acme",
               "bob@acme.lock", "bob@acme.", "bob @acme", "bób@acme", "bob@acme/../x", "",
               "b" * 101 + "@acme", "bob@acme\x00"]


def rows(table: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A table of cases (typed loosely: each row mixes argument shapes)."""
    return table


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


# --- the relay ---------------------------------------------------------------------------------


@dataclass
class Bench:
    relay: Path
    homes: dict[str, Path]
    clients: dict[str, RelayClient]
    trust_path: Path
    ids: dict[str, str]          # pending, accepted, proposal, cursor

    servers: dict[str, Any] = field(default_factory=dict)

    def server(self, handle: str) -> Any:
        """One server per teammate for the module (building one costs more than a call)."""
        if handle not in self.servers:
            client = self.clients[handle]

            def opener() -> ServerState:
                return ServerState(client=client,
                                   trust=TrustStore(self.trust_path, watch=False), loop=None,
                                   session_id=f"session-{handle.split('@')[0]}")

            self.servers[handle] = build_server(opener, structured=True)  # reads typed data
        return self.servers[handle]

    def snapshot(self) -> dict[str, Any]:
        """Everything a write would change: the relay's refs, and each teammate's outbox
        (the commits between their copy of the relay and their main), inbox-state refs
        and refused log. A read may fetch, which moves only their copy of the relay."""
        snap: dict[str, Any] = {"relay": Store(self.relay).refs("refs/")}
        for handle, client in self.clients.items():
            mirror = client.mirror
            snap[handle] = ([c.oid for c in mirror.outbox()],
                            Store(mirror.path).refs("refs/gitrelay/"),
                            mirror.refused_path.read_text() if mirror.refused_path.exists()
                            else "")
        return snap

    def fill(self, value: Any) -> Any:
        """Placeholders like ``{pending}`` replaced by this relay's ids."""
        if isinstance(value, str):
            for key, real in self.ids.items():
                value = value.replace("{" + key + "}", real)
            return value
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        return value


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    base = tmp_path_factory.mktemp("bad-input")
    with pytest.MonkeyPatch.context() as mp:
        set_hermetic(mp, base, trust=base / "trust.yaml")
        relay = joining.init_relay(base / "relay.git", name="acme")
        homes, clients = {}, {}
        for handle, (name, role) in PEOPLE.items():
            home = base / handle.split("@")[0]
            mp.setenv("GITRELAY_HOME", str(home))
            joining.join(str(relay), handle, name=name, role=role)  # saves the CLI config
            homes[handle] = home
            clients[handle] = RelayClient(str(relay), handle, writes="wait", fresh_seconds=0)
        trust_path = base / "trust.yaml"
        trust_path.write_text(TRUST)
        alice, bob = clients[ALICE], clients[BOB]
        mp.setenv("GITRELAY_HOME", str(homes[ALICE]))
        pending = alice.handoff(to=BOB, intent="inform", summary="Typecheck is required now.")
        accepted = alice.handoff(to=BOB, intent="ask_question", summary="Search paging",
                                 question="Cursor or offset?")
        proposal = alice.handoff(to=BOB, intent="propose_action", summary="Paginate /users",
                                 proposed_action={"description": "Paginate /users",
                                                  "target_files": ["src/api/users.ts"],
                                                  "rationale": "The list grew."})
        mp.setenv("GITRELAY_HOME", str(homes[BOB]))
        bob.accept(str(accepted.thread_id), session_id="bob-1")
        ids = {"pending": str(pending.thread_id), "accepted": str(accepted.thread_id),
               "proposal": str(proposal.thread_id)}
        b = Bench(relay, homes, clients, trust_path, ids)

        async def cursor() -> str:
            async with Client(in_process(b.server(BOB))) as c:
                page = await c.call_tool("check_inbox", {"limit": 1})
                assert page.structured_content and page.structured_content["next_cursor"]
                return str(page.structured_content["next_cursor"])

        real = anyio.run(cursor)
        b.ids["cursor"] = real
        b.ids["tampered"] = real[:-1] + ("0" if real[-1] != "0" else "1")
        yield b


# --- MCP cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    tool: str
    args: dict[str, Any]
    expect: str = "invalid_argument"  # the error's name
    caller: str = ALICE
    mentions: str = ""                # a word the text must contain (the field, say)


def handoff(**extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"to": BOB, "intent": "inform", "summary": "Paginated /users."}
    args.update(extra)
    return {k: v for k, v in args.items() if v is not ...}


def _mcp_cases() -> list[Any]:
    cases: list[tuple[str, Case]] = []

    def add(name: str, case: Case) -> None:
        cases.append((name, case))

    # Missing required arguments.
    add("handoff-nothing", Case("handoff_to_teammate", {}, mentions="to"))
    add("handoff-no-summary", Case("handoff_to_teammate", handoff(summary=...), mentions="summary"))
    add("handoff-no-to", Case("handoff_to_teammate", handoff(to=...), mentions="to"))
    add("handoff-no-intent", Case("handoff_to_teammate", handoff(intent=...), mentions="intent"))
    add("claim-nothing", Case("claim_inbox_item", {}, mentions="item_id"))
    add("claim-no-worker", Case("claim_inbox_item", {"item_id": "ibx_x", "seq": 1},
                                mentions="worker"))
    for tool in THREAD_TOOLS:
        add(f"{tool}-nothing", Case(tool, {}, mentions="thread_id"))
    add("send-no-body", Case("send_message", {"thread_id": "{pending}"}, mentions="body"))
    add("complete-no-summary", Case("complete_handoff", {"thread_id": "{accepted}"},
                                    caller=BOB, mentions="result_summary"))
    add("draft-no-diff", Case("draft_proposed_action", {"thread_id": "{proposal}"},
                              caller=BOB, mentions="suggested_diff"))

    # Wrong types.
    for name, extra, named in rows([
        ("to-number", {"to": 5}, "to"), ("intent-list", {"intent": ["inform"]}, "intent"),
        ("summary-object", {"summary": {"a": 1}}, "summary"),
        ("artifacts-string", {"artifacts": "file_diff"}, "artifacts"),
        ("artifact-lines-words", {"artifacts": [{"type": "file_ref", "path": "x",
                                                 "lines": ["one"]}]}, "lines"),
        ("artifact-unknown-type", {"artifacts": [{"type": "screenshot", "url": "x"}]},
         "artifacts"),
        ("proposed-action-string", {"intent": "propose_action", "proposed_action": "do it"},
         "proposed_action"),
        ("metadata-list", {"metadata": [1, 2]}, "metadata"),
        ("metadata-text", {"metadata": "sprint 12"}, "metadata"),
        ("key-number", {"idempotency_key": 7}, "idempotency_key"),
        ("delivery-bool", {"delivery": True}, "delivery"),
        ("question-number", {"intent": "ask_question", "question": 5}, "question"),
    ]):
        add(f"handoff-{name}", Case("handoff_to_teammate", handoff(**extra), mentions=named))
    for name, args, named in rows([
        ("limit-word", {"limit": "ten"}, "limit"), ("limit-bool", {"limit": True}, "limit"),
        ("limit-fraction", {"limit": 5.5}, "limit"), ("status-string", {"status": "pending"},
                                                     "status"),
        ("status-number", {"status": [1]}, "status"), ("after-word", {"after": "x"}, "after"),
        ("unread-word", {"unread_only": "maybe"}, "unread_only"),
        ("ack-up-to-list", {"ack_up_to": [1]}, "ack_up_to"),
        ("ack-items-object", {"ack_items": {"item_id": "x"}}, "ack_items"),
        ("ack-item-no-seq", {"ack_items": [{"item_id": "x"}]}, "seq"),
        ("worker-number", {"worker": 5}, "worker"),
        ("wait-word", {"wait_seconds": "soon"}, "wait_seconds"),
        ("wait-bool", {"wait_seconds": True}, "wait_seconds"),
        ("since-number", {"since": 5}, "since"), ("cursor-number", {"cursor": 5}, "cursor"),
    ]):
        add(f"inbox-{name}", Case("check_inbox", args, mentions=named))
    for name, args, named in rows([
        ("seq-word", {"item_id": "ibx_x", "seq": "one", "worker": "w1"}, "seq"),
        ("lease-word", {"item_id": "ibx_x", "seq": 1, "worker": "w1", "lease_seconds": "x"},
         "lease_seconds"),
        ("item-number", {"item_id": 5, "seq": 1, "worker": "w1"}, "item_id"),
    ]):
        add(f"claim-{name}", Case("claim_inbox_item", args, mentions=named))
    for tool in THREAD_TOOLS:
        for name, value in (("number", 123), ("list", ["{pending}"]), ("null", None),
                            ("object", {"id": "{pending}"})):
            add(f"{tool}-thread-{name}", Case(tool, {"thread_id": value, "body": "x",
                                                     "result_summary": "x",
                                                     "suggested_diff": "x"}
                                              if tool in ("send_message", "complete_handoff",
                                                          "draft_proposed_action")
                                              else {"thread_id": value}, mentions="thread_id"))
    add("accept-session-number", Case("accept_handoff", {"thread_id": "{pending}",
                                                         "session_id": 5}, caller=BOB,
                                      mentions="session_id"))
    add("accept-delivery-word", Case("accept_handoff", {"thread_id": "{pending}",
                                                        "delivery": "now"}, caller=BOB,
                                     mentions="delivery"))
    add("send-body-null", Case("send_message", {"thread_id": "{pending}", "body": None},
                               mentions="body"))
    add("send-body-number", Case("send_message", {"thread_id": "{pending}", "body": 5},
                                 mentions="body"))
    add("send-payload-text", Case("send_message", {"thread_id": "{pending}", "body": "x",
                                                   "payload": "see above"}, mentions="payload"))
    add("send-payload-list", Case("send_message", {"thread_id": "{pending}", "body": "x",
                                                   "payload": [1, 2]}, mentions="payload"))
    add("complete-summary-number", Case("complete_handoff", {"thread_id": "{accepted}",
                                                             "result_summary": 5},
                                        caller=BOB, mentions="result_summary"))
    add("complete-artifacts-object", Case("complete_handoff", {
        "thread_id": "{accepted}", "result_summary": "done", "artifacts": {"type": "link"}},
        caller=BOB, mentions="artifacts"))
    add("cancel-reason-number", Case("cancel_handoff", {"thread_id": "{pending}", "reason": 5},
                                     mentions="reason"))
    add("draft-diff-list", Case("draft_proposed_action", {"thread_id": "{proposal}",
                                                          "suggested_diff": []},
                                caller=BOB, mentions="suggested_diff"))
    add("draft-note-number", Case("draft_proposed_action", {
        "thread_id": "{proposal}", "suggested_diff": "--- a\n+++ b\n", "note": 5},
        caller=BOB, mentions="note"))

    # Arguments no tool has: a misspelt name must not be dropped silently.
    add("teammates-unknown-arg", Case("list_teammates", {"bogus": 1}, mentions="bogus"))
    add("cancel-misspelt-reason", Case("cancel_handoff", {"thread_id": "{pending}",
                                                          "reasn": "Design moved"},
                                       mentions="reasn"))
    add("send-misspelt-delivery", Case("send_message", {"thread_id": "{pending}", "body": "x",
                                                        "delivry": "queue"}, mentions="delivry"))
    add("inbox-misspelt-limit", Case("check_inbox", {"limt": 5}, mentions="limt"))
    add("search-no-query", Case("search_threads", {}, mentions="query"))
    add("search-query-number", Case("search_threads", {"query": 5}, mentions="query"))
    add("search-unknown-filter", Case("search_threads", {"query": "x colour:blue"},
                                      mentions="colour:blue"))
    add("search-open-quote", Case("search_threads", {"query": '"paginate users'},
                                  mentions="quote"))
    add("search-limit-zero", Case("search_threads", {"query": "x", "limit": 0},
                                  mentions="limit"))
    add("search-foreign-cursor", Case("search_threads", {"query": "x", "cursor": "c1.e30.x"},
                                      expect="invalid_cursor", mentions="cursor"))

    # Over the relay's limits.
    over = "x" * (MAX_TEXT + 1)
    wide = "\U0001f600" * MAX_TEXT  # within the character limit, over the file size limit
    for name, extra, named in rows([
        ("summary-too-long", {"summary": over}, "summary"),
        ("summary-too-big-file", {"summary": wide}, "bytes"),
        ("question-too-long", {"intent": "ask_question", "question": over}, "question"),
        ("too-many-artifacts", {"artifacts": [{"type": "link", "url": f"https://x/{i}"}
                                              for i in range(DEFAULT_LIMITS["max_artifacts"]
                                                             + 1)]}, "artifacts"),
        ("metadata-too-deep", {"metadata": nested(DEFAULT_LIMITS["max_json_depth"] + 2)},
         "metadata"),
        ("too-many-target-files", {"intent": "propose_action", "proposed_action": {
            "description": "d", "rationale": "r",
            "target_files": [f"f{i}" for i in range(1001)]}}, "target_files"),
        ("description-too-long", {"intent": "propose_action", "proposed_action": {
            "description": over, "rationale": "r", "target_files": []}}, "description"),
        ("key-too-long", {"idempotency_key": "k" * 129}, "idempotency_key"),
        ("diff-path-too-long", {"artifacts": [{"type": "file_diff", "path": "p" * 1025,
                                               "diff": "d"}]}, "path"),
        ("link-title-too-long", {"artifacts": [{"type": "link", "url": "https://x",
                                                "title": "t" * 513}]}, "title"),
    ]):
        add(f"handoff-{name}", Case("handoff_to_teammate", handoff(**extra), mentions=named))
    add("send-body-too-long", Case("send_message", {"thread_id": "{pending}", "body": over},
                                   mentions="body"))
    add("send-payload-too-deep", Case("send_message", {
        "thread_id": "{pending}", "body": "x",
        "payload": nested(DEFAULT_LIMITS["max_json_depth"] + 2)}, mentions="payload"))
    add("send-payload-too-big", Case("send_message", {
        "thread_id": "{pending}", "body": "x", "payload": {"blob": "y" * 300_000}},
        mentions="bytes"))
    add("complete-summary-too-long", Case("complete_handoff", {
        "thread_id": "{accepted}", "result_summary": over}, caller=BOB,
        mentions="result_summary"))
    add("complete-too-many-artifacts", Case("complete_handoff", {
        "thread_id": "{accepted}", "result_summary": "done",
        "artifacts": [{"type": "link", "url": f"https://x/{i}"} for i in range(51)]},
        caller=BOB, mentions="artifacts"))
    add("cancel-reason-too-long", Case("cancel_handoff", {"thread_id": "{pending}",
                                                          "reason": over}, mentions="reason"))
    add("draft-diff-too-long", Case("draft_proposed_action", {
        "thread_id": "{proposal}", "suggested_diff": over}, caller=BOB,
        mentions="suggested_diff"))
    add("draft-note-too-long", Case("draft_proposed_action", {
        "thread_id": "{proposal}", "suggested_diff": "--- a\n+++ b\n", "note": over},
        caller=BOB, mentions="note"))
    add("accept-session-too-long", Case("accept_handoff", {"thread_id": "{pending}",
                                                           "session_id": "s" * 201},
                                        caller=BOB, mentions="session_id"))
    for name, args, named, expect in rows([
        ("limit-0", {"limit": 0}, "limit", "invalid_argument"),
        ("limit-201", {"limit": 201}, "limit", "invalid_argument"),
        ("limit-negative", {"limit": -1}, "limit", "invalid_argument"),
        ("limit-huge", {"limit": 10**30}, "limit", "invalid_argument"),
        ("wait-61", {"wait_seconds": 61}, "wait_seconds", "invalid_argument"),
        ("wait-negative", {"wait_seconds": -1}, "wait_seconds", "invalid_argument"),
        ("after-negative", {"after": -1}, "after", "invalid_argument"),
        ("after-beyond", {"after": 10**30}, "beyond", "invalid_cursor"),
        ("ack-up-to-beyond", {"ack_up_to": 10**30}, "ack_up_to", "invalid_argument"),
        ("ack-items-too-many", {"ack_items": [{"item_id": f"ibx_{i}", "seq": 1}
                                              for i in range(1001)]}, "ack_items",
         "invalid_argument"),
        ("worker-too-long", {"worker": "w" * 65}, "worker", "invalid_argument"),
        ("worker-path", {"worker": "../w"}, "worker", "invalid_argument"),
        ("since-garbage", {"since": "last tuesday"}, "since", "invalid_argument"),
        ("since-impossible-date", {"since": "2026-13-45T00:00:00Z"}, "since",
         "invalid_argument"),
        ("status-unknown", {"status": ["open"]}, "status", "invalid_argument"),
        ("cursor-empty", {"cursor": ""}, "cursor", "invalid_cursor"),
        ("cursor-garbage", {"cursor": "garbage"}, "cursor", "invalid_cursor"),
        ("cursor-forged-form", {"cursor": "c1.abc.def"}, "cursor", "invalid_cursor"),
        ("cursor-tampered", {"cursor": "{tampered}"}, "cursor", "invalid_cursor"),
        ("cursor-huge", {"cursor": "c1." + "A" * 100_000 + ".0123456789ab"}, "cursor",
         "invalid_cursor"),
        ("cursor-nul", {"cursor": "c1.\x00.\x00"}, "cursor", "invalid_cursor"),
    ]):
        add(f"inbox-{name}", Case("check_inbox", args, expect=expect, caller=BOB,
                                  mentions=named))
    for name, args, named in rows([
        ("seq-0", {"item_id": "ibx_x", "seq": 0, "worker": "w1"}, "seq"),
        ("item-too-long", {"item_id": "i" * 101, "seq": 1, "worker": "w1"}, "item_id"),
        ("lease-0", {"item_id": "ibx_x", "seq": 1, "worker": "w1", "lease_seconds": 0},
         "lease_seconds"),
        ("lease-too-long", {"item_id": "ibx_x", "seq": 1, "worker": "w1",
                            "lease_seconds": 86_401}, "lease_seconds"),
        ("worker-spaces", {"item_id": "ibx_x", "seq": 1, "worker": "my worker"}, "worker"),
        ("item-path", {"item_id": "../../inbox", "seq": 1, "worker": "w1"}, "item_id"),
    ]):
        add(f"claim-{name}", Case("claim_inbox_item", args, caller=BOB, mentions=named))

    # Unknown thread ids, and ids with path tricks.
    def thread_args(tool: str, tid: str) -> dict[str, Any]:
        extra = {"send_message": {"body": "x"}, "complete_handoff": {"result_summary": "x"},
                 "draft_proposed_action": {"suggested_diff": "--- a\n+++ b\n"}}
        return {"thread_id": tid, **extra.get(tool, {})}

    for tool in THREAD_TOOLS:
        add(f"{tool}-unknown-id", Case(tool, thread_args(tool, NO_SUCH),
                                       expect="thread_not_found", mentions=NO_SUCH))
        for i, trick in enumerate(TRICK_IDS):
            # The schema bounds an id (or prefix) to 2-26 characters; the rest must
            # not resolve to anything.
            schema_bad = not 2 <= len(trick) <= 26
            add(f"{tool}-trick-{i}", Case(tool, thread_args(tool, trick),
                                          expect="invalid_argument" if schema_bad
                                          else "thread_not_found",
                                          mentions="thread_id" if schema_bad else ""))

    # Invalid handles.
    for i, bad in enumerate(BAD_HANDLES):
        add(f"handoff-bad-handle-{i}", Case("handoff_to_teammate", handoff(to=bad),
                                            mentions="to"))
    add("handoff-unregistered", Case("handoff_to_teammate", handoff(to="zed@acme"),
                                     expect="recipient_not_found", mentions="zed@acme"))
    add("handoff-planted-key", Case("handoff_to_teammate", handoff(
        metadata={"client_idempotency_key": "../../x"}), mentions="client_idempotency_key"))

    # Legal arguments the rules refuse for this caller or this state.
    add("complete-pending", Case("complete_handoff", {"thread_id": "{pending}",
                                                      "result_summary": "done"},
                                 expect="invalid_transition", caller=BOB))
    add("cancel-by-recipient", Case("cancel_handoff", {"thread_id": "{pending}"},
                                    expect="not_authorized_transition", caller=BOB))
    add("accept-by-sender", Case("accept_handoff", {"thread_id": "{pending}"},
                                 expect="not_authorized_transition"))
    add("accept-accepted", Case("accept_handoff", {"thread_id": "{accepted}"},
                                expect="invalid_transition", caller=BOB))
    add("cancel-accepted", Case("cancel_handoff", {"thread_id": "{accepted}"},
                                expect="invalid_transition"))
    add("draft-by-sender", Case("draft_proposed_action", {"thread_id": "{proposal}",
                                                          "suggested_diff": "--- a\n+++ b\n"},
                                expect="forbidden"))
    add("draft-on-inform", Case("draft_proposed_action", {"thread_id": "{pending}",
                                                          "suggested_diff": "--- a\n+++ b\n"},
                                expect="invalid_intent_payload", caller=BOB))
    add("propose-without-action", Case("handoff_to_teammate", handoff(intent="propose_action"),
                                       expect="invalid_intent_payload"))
    add("question-with-inform", Case("handoff_to_teammate", handoff(question="Why?"),
                                     expect="invalid_intent_payload"))
    for tool in ("view_thread", "send_message", "accept_handoff", "cancel_handoff"):
        add(f"{tool}-by-outsider", Case(tool, thread_args(tool, "{pending}"),
                                        expect="not_a_participant", caller=CAROL))
    return [pytest.param(case, id=name) for name, case in cases]


MCP_CASES = _mcp_cases()


def call(bench: Bench, case: Case) -> tuple[bool, str]:
    async def body() -> tuple[bool, str]:
        async with Client(in_process(bench.server(case.caller))) as c:
            res = await c.call_tool(case.tool, bench.fill(case.args))
            text = res.content[0].text if res.content else ""  # type: ignore[union-attr]
            return bool(res.is_error), text

    return anyio.run(body)


@pytest.mark.parametrize("case", MCP_CASES)
def test_a_bad_tool_call_is_a_coded_error_and_writes_nothing(bench: Bench, case: Case) -> None:
    before = bench.snapshot()
    is_error, text = call(bench, case)
    assert is_error, f"{case.tool} accepted it: {text[:300]}"
    coded = CODED.match(text)
    assert coded, f"not a coded error: {text[:300]}"
    assert coded["name"] == case.expect, text[:300]
    assert case.mentions in text, f"{case.mentions!r} not named in: {text[:300]}"
    assert "Traceback" not in text and len(text) < 4000, text[:300]
    assert bench.snapshot() == before, "the refused call wrote something"


def test_the_mcp_corpus_covers_every_tool(bench: Bench,
                                          record_property: Any) -> None:
    async def names() -> set[str]:
        async with Client(in_process(bench.server(ALICE))) as c:
            return {t.name for t in (await c.list_tools()).tools}

    tools = anyio.run(names)
    covered = {p.values[0].tool for p in MCP_CASES}
    assert covered == tools, sorted(tools ^ covered)
    record_property("reliability", {"suite": "bad_input_mcp", "cases": len(MCP_CASES),
                                    "tools": len(tools)})


@pytest.mark.parametrize("uri", [f"gitrelay://threads/{NO_SUCH}", "gitrelay://threads/-rf",
                                 "gitrelay://threads/" + "A" * 5000, "gitrelay://threads/~~",
                                 "gitrelay://threads/%2e%2e", "gitrelay://threads/..%2F..%2Fetc",
                                 "gitrelay://threads/../../etc"])
def test_a_bad_thread_resource_is_a_clear_error_and_writes_nothing(bench: Bench,
                                                                   uri: str) -> None:
    """An id reaching the thread resource gets a coded error; a URI the template cannot
    match (encoded or real slashes and dots) is refused by the SDK as unknown."""
    before = bench.snapshot()

    async def body() -> str:
        async with Client(in_process(bench.server(BOB))) as c:
            with pytest.raises(Exception) as caught:
                await c.read_resource(uri)
            return str(caught.value)

    text = anyio.run(body)
    assert (CODED.match(text) and not text.startswith("internal_error")) or \
        text == f"Unknown resource: {uri}", text[:300]
    assert bench.snapshot() == before


@pytest.mark.slow
def test_text_that_looks_like_json_is_kept_as_sent(bench: Bench) -> None:
    """A reason of ``null`` or a question of ``{"a": 1}`` is text, not JSON to decode."""
    texts = ["null", '{"a": 1}', "[1, 2]", "true", "12"]
    queue = {"delivery": "queue"}
    alice, bob = bench.clients[ALICE], bench.clients[BOB]

    async def answer(c: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        res = await c.call_tool(tool, args)
        assert not res.is_error, res.content
        out: dict[str, Any] | None = res.structured_content
        assert out is not None
        read_answer(res.content[0].text, out)  # type: ignore[union-attr]
        return out

    async def body() -> None:
        async with Client(in_process(bench.server(ALICE))) as a, \
                Client(in_process(bench.server(BOB))) as b:
            asked, proposed = [], []
            for text in texts:
                asked.append((await answer(a, "handoff_to_teammate", handoff(
                    intent="ask_question", question=text, **queue)))["thread_id"])
                proposed.append((await answer(a, "handoff_to_teammate", handoff(
                    intent="propose_action", proposed_action={
                        "description": "d", "rationale": "r", "target_files": ["f"]},
                    **queue)))["thread_id"])
            assert not alice.deliver().refused
            for text, tid, ptid in zip(texts, asked, proposed, strict=True):
                got = await answer(b, "accept_handoff", {"thread_id": tid, "session_id": text,
                                                         **queue})
                assert got["accepted_by_session"] == text
                # Kept as is, and inside the answer's fence as that text (a JSON string).
                assert got["question"] == text
                assert in_fence(got["question"], got["provenance"]["fence"]) == text
                await answer(b, "draft_proposed_action", {
                    "thread_id": ptid, "suggested_diff": "--- a\n+++ b\n", "note": text,
                    **queue})
            assert not bob.deliver().refused
            for text, ptid in zip(texts, proposed, strict=True):
                await answer(a, "cancel_handoff", {"thread_id": ptid, "reason": text, **queue})
                seen = await answer(a, "view_thread", {"thread_id": ptid})
                assert seen["cancellation"]["reason"] == text  # alice's own: not fenced
                note = seen["messages"][0]["body"]
                assert note == text and "Drafted a diff" not in note
                assert in_fence(note, seen["provenance"]["fence"]) == text
            assert not alice.deliver().refused

    anyio.run(body)


# --- the command line --------------------------------------------------------------------------


@dataclass(frozen=True)
class CliCase:
    argv: tuple[str, ...]
    expect: str = "invalid_argument"
    who: str = ALICE
    stdin: str = ""
    mentions: str = ""


def _cli_cases() -> list[tuple[str, CliCase]]:
    c: list[tuple[str, CliCase]] = []

    def add(name: str, *argv: str, expect: str = "invalid_argument", who: str = ALICE,
            stdin: str = "", mentions: str = "") -> None:
        c.append((name, CliCase(tuple(argv), expect, who, stdin, mentions)))

    commands = ["init", "join", "verify", "mcp", "demo", "inbox", "show", "log", "teammates",
                "whoami", "send", "reply", "accept", "complete", "cancel", "archive", "status",
                "doctor", "reindex", "trust", "draft", "setup", "hook", "web", "search", "docs"]
    # Each with its required arguments, so that the unknown option is the one problem.
    required = {"init": ["{base}/new-relay.git"], "join": ["{relay}", "--as", "dave@acme",
                                                           "--name", "Dave", "--role", "qa"],
                "show": ["{pending}"], "send": [BOB, "--intent", "inform", "--summary", "x"],
                "reply": ["{pending}", "hello"], "accept": ["{pending}"],
                "draft": ["{pending}", "-"],
                "complete": ["{accepted}", "--summary", "done"], "cancel": ["{pending}"],
                "setup": ["claude", "--dry-run"], "hook": ["pre-tool-use"],
                "search": ["paginate"]}
    for command in commands:
        add(f"{command}-unknown-option", command, *required.get(command, []), "--bogus",
            mentions="--bogus")
    add("no-command")
    add("unknown-command", "frobnicate", mentions="frobnicate")
    # missing arguments
    add("init-no-path", "init", mentions="path")
    add("join-no-identity", "join", "{relay}", mentions="--as")
    add("join-no-name", "join", "{relay}", "--as", "dave@acme", "--role", "qa",
        mentions="--name")
    add("show-no-thread", "show", mentions="thread")
    add("send-nothing", "send", mentions="TO")
    add("send-no-summary", "send", BOB, "--intent", "inform", mentions="--summary")
    add("reply-no-text", "reply", "{pending}", mentions="text")
    add("accept-no-thread", "accept", mentions="thread")
    add("complete-no-summary", "complete", "{accepted}", who=BOB, mentions="--summary")
    add("cancel-no-thread", "cancel", mentions="thread")
    add("setup-no-host", "setup", mentions="host")
    add("setup-unknown-host", "setup", "vim", mentions="vim")
    add("hook-unknown-event", "hook", "pre-commit", mentions="pre-commit")
    # bad values
    add("init-not-empty", "init", "{relay}", mentions="neither empty")
    add("docs-unknown-topic", "docs", "trsut", mentions="trust")
    add("join-bad-handle", "join", "{relay}", "--as", "not a handle", "--name", "D",
        "--role", "qa", mentions="--as")
    add("join-path-handle", "join", "{relay}", "--as", "../../x@acme", "--name", "D",
        "--role", "qa", mentions="--as")
    add("join-blank-name", "join", "{relay}", "--as", "dave@acme", "--name", " ",
        "--role", "qa", mentions="--name")
    add("mcp-bad-writes", "mcp", "--writes", "later", mentions="--writes")
    add("search-unknown-filter", "search", "paginate", "colour:blue", mentions="colour:blue")
    add("search-open-quote", "search", '"paginate users', mentions="quote")
    add("search-limit-0", "search", "x", "--limit", "0", mentions="limit")
    add("search-bad-cursor", "search", "x", "--cursor", "s1.e30.000000000000",
        expect="invalid_cursor", mentions="cursor")
    add("profile-blank-name", "profile", "--name", " ", mentions="--name")
    add("profile-blank-role", "profile", "--role", "", mentions="--role")
    add("web-port-negative", "web", "--port", "-1", mentions="--port")
    add("web-port-too-big", "web", "--port", "65536", mentions="--port")
    add("web-port-word", "web", "--port", "any", mentions="--port")
    add("inbox-limit-0", "inbox", "--limit", "0", mentions="limit")
    add("inbox-limit-201", "inbox", "--limit", "201", mentions="limit")
    add("inbox-limit-word", "inbox", "--limit", "ten", mentions="--limit")
    add("inbox-wait-0", "inbox", "--wait", "0", mentions="--wait")
    add("inbox-wait-61", "inbox", "--wait", "61", mentions="--wait")
    add("inbox-wait-word", "inbox", "--wait", "soon", mentions="--wait")
    add("inbox-status-unknown", "inbox", "--status", "open", mentions="open")
    add("log-limit-word", "log", "-n", "many", mentions="--limit")
    add("log-limit-negative", "log", "-n", "-1", mentions="--limit")
    add("archive-older-than-negative", "archive", "--older-than", "-1",
        mentions="--older-than")
    add("archive-limit-0", "archive", "--limit", "0", mentions="--limit")
    add("status-refused-word", "status", "--refused", "many", mentions="--refused")
    add("status-refused-negative", "status", "--refused", "-3", mentions="--refused")
    add("send-bad-handle", "send", "not a handle", "--intent", "inform", "--summary", "x",
        mentions="to")
    add("send-path-handle", "send", "../bob@acme", "--intent", "inform", "--summary", "x",
        mentions="to")
    add("send-unregistered", "send", "zed@acme", "--intent", "inform", "--summary", "x",
        expect="recipient_not_found", mentions="zed@acme")
    add("send-bad-intent", "send", BOB, "--intent", "demand", "--summary", "x",
        mentions="--intent")
    add("send-empty-summary", "send", BOB, "--intent", "inform", "--summary", "",
        mentions="--summary")
    add("send-summary-too-long", "send", BOB, "--intent", "inform", "--summary", "-",
        stdin="x" * (MAX_TEXT + 1), mentions="summary")
    add("send-summary-too-big-file", "send", BOB, "--intent", "inform", "--summary", "-",
        stdin="\U0001f600" * MAX_TEXT, mentions="bytes")
    add("send-question-with-inform", "send", BOB, "--intent", "inform", "--summary", "x",
        "--question", "why?", expect="invalid_intent_payload", mentions="question")
    add("send-bad-meta", "send", BOB, "--intent", "inform", "--summary", "x", "--meta",
        "novalue", mentions="--meta")
    add("send-bad-key", "send", BOB, "--intent", "inform", "--summary", "x", "--key",
        "no spaces allowed", mentions="idempotency_key")
    add("send-missing-action-file", "send", BOB, "--intent", "propose_action", "--summary", "x",
        "--proposed-action-file", "/nonexistent/action.json",
        mentions="--proposed-action-file")
    add("send-bad-file-ref", "send", BOB, "--intent", "inform", "--summary", "x", "--file",
        "src/a.py:ten", mentions="--file")
    add("send-bad-artifact-json", "send", BOB, "--intent", "inform", "--summary", "x",
        "--artifact", "link:{bad json", mentions="--artifact")
    add("send-artifact-unknown-type", "send", BOB, "--intent", "inform", "--summary", "x",
        "--artifact", '{"type": "screenshot"}', mentions="type")
    add("send-missing-contract", "send", BOB, "--intent", "inform", "--summary", "x",
        "--contract", "/nonexistent/openapi.json", mentions="--contract")
    add("send-missing-diff", "send", BOB, "--intent", "inform", "--summary", "x", "--diff",
        "/nonexistent/change.patch", mentions="--diff")
    add("send-too-many-artifacts", "send", BOB, "--intent", "inform", "--summary", "x",
        *[arg for i in range(51) for arg in ("--link", f"https://x/{i}")],
        mentions="artifacts")
    add("reply-bad-payload", "reply", "{pending}", "hello", "--payload", "{bad",
        mentions="--payload")
    add("reply-payload-not-object", "reply", "{pending}", "hello", "--payload", "[1]",
        mentions="--payload")
    add("reply-empty-text", "reply", "{pending}", "", mentions="TEXT")
    add("complete-pending", "complete", "{pending}", "--summary", "done", who=BOB,
        expect="invalid_transition")
    add("cancel-by-recipient", "cancel", "{pending}", who=BOB,
        expect="not_authorized_transition")
    add("accept-by-sender", "accept", "{pending}", expect="not_authorized_transition")
    add("show-unknown-id", "show", NO_SUCH, expect="thread_not_found", mentions=NO_SUCH)
    add("reply-unknown-id", "reply", NO_SUCH, "hello", expect="thread_not_found",
        mentions=NO_SUCH)
    tricks = ["../../etc/passwd", "%2e%2e", "..\\..", "A" * 5000, "０１２３"]
    for i, trick in enumerate(tricks):
        for command in ("show", "accept", "cancel", "log", "reply"):
            extra = ("hello",) if command == "reply" else ()
            add(f"{command}-trick-{i}", command, trick, *extra, expect="thread_not_found")
    add("verify-missing-relay", "verify", "/nonexistent/relay.git", expect="relay_unavailable",
        mentions="/nonexistent/relay.git")
    add("join-missing-relay", "join", "/nonexistent/relay.git", "--as", "dave@acme", "--name",
        "Dave", "--role", "qa", expect="relay_unavailable", mentions="not appear to be a git")
    add("draft-no-diff", "draft", "{pending}", mentions="DIFF")
    add("draft-missing-file", "draft", "{pending}", "/nonexistent/fix.patch", who=BOB,
        mentions="/nonexistent/fix.patch")
    add("draft-empty-diff", "draft", "{pending}", "-", who=BOB, mentions="DIFF")
    add("draft-on-inform", "draft", "{pending}", "-", who=BOB, stdin="--- a/x\n+++ b/x\n",
        expect="invalid_intent_payload", mentions="propose_action")
    add("draft-by-the-sender", "draft", "{proposal}", "-", stdin="--- a/x\n+++ b/x\n",
        expect="forbidden", mentions="recipient")
    add("trust-unknown-action", "trust", "allow", "dave@acme", mentions="allow")
    add("trust-add-no-handle", "trust", "add", mentions="handle")
    add("trust-add-bad-handle", "trust", "add", "not a handle", mentions="not a handle")
    add("trust-add-bad-write", "trust", "add", "dave@acme", "--write", "../etc/",
        mentions="--write")
    add("trust-show-with-handle", "trust", "show", "dave@acme", mentions="handle")
    add("trust-block-with-add-flags", "trust", "block", "dave@acme", "--auto-test",
        mentions="--auto-test")
    add("trust-invalid-file", "trust", "add", "dave@acme", "--trust", "{base}/bad-trust.yaml",
        expect="config_error", mentions="bad-trust.yaml")
    add("as-bad-handle", "inbox", "--as", "not a handle", mentions="not a handle")
    # A relay never reached: the error, and no empty mirror left in the home.
    add("inbox-missing-relay", "inbox", "--relay", "/nonexistent/relay.git",
        expect="relay_unavailable", mentions="/nonexistent/relay.git")
    return c


CLI_CASES = _cli_cases()
BAD_TRUST = "version: 1\nteammates: [dave@acme]\n"  # what trust-invalid-file edits


def home_snapshot(home: Path) -> dict[str, Any]:
    """A teammate's home as a write would change it: the mirror's refs (outbox, inbox
    state; not the copy of the relay a fetch refreshes), refused log, and the files."""
    snap: dict[str, Any] = {"files": sorted(
        str(p.relative_to(home)) for p in home.rglob("*")
        if not {"objects", "logs"} & set(p.parts))}
    for mirror in sorted((home / "mirrors").glob("*.git")):
        refs = Store(mirror).refs("refs/")
        snap[mirror.name] = (
            {k: v for k, v in refs.items() if not k.startswith(("refs/relay/", "refs/fetched/"))},
            refs.get("refs/heads/main") == refs.get("refs/relay/main"),
            (mirror / "gitrelay-refused.jsonl").read_text()
            if (mirror / "gitrelay-refused.jsonl").exists() else "")
    return snap


def run_cli(bench: Bench, case: CliCase, root: Path, name: str) -> str | None:
    """Run one case in a copy of the teammate's home; what is wrong with the result."""
    home = root / name / "home"
    cwd = root / name / "cwd"
    shutil.copytree(bench.homes[case.who], home, symlinks=True)
    cwd.mkdir()
    argv = [a.replace("{relay}", str(bench.relay)).replace("{base}", str(root / name))
            for a in bench.fill(list(case.argv))]
    env = dict(os.environ, GITRELAY_HOME=str(home), GITRELAY_TRUST=str(bench.trust_path))
    env.pop("GITRELAY_DEBUG", None)
    before = home_snapshot(home)
    trust_before = bench.trust_path.read_bytes()
    bad_trust = root / name / "bad-trust.yaml"
    bad_trust.write_text(BAD_TRUST)
    proc = subprocess.run([sys.executable, "-m", "gitrelay", *argv], env=env,
                          input=case.stdin, capture_output=True, text=True, timeout=120,
                          cwd=cwd)
    lines = proc.stderr.splitlines()
    coded = CLI_CODED.match(lines[0]) if len(lines) == 1 else None
    if proc.returncode == 0:
        return f"exit 0: {proc.stdout[:200]!r}"
    if coded is None:
        return f"not one coded error line: {proc.stderr[:500]!r}"
    if coded["name"] != case.expect:
        return f"{coded['name']}, expected {case.expect}: {lines[0][:300]}"
    if case.mentions not in lines[0]:
        return f"{case.mentions!r} not named: {lines[0][:300]}"
    if proc.stdout:
        return f"wrote to stdout: {proc.stdout[:200]!r}"
    if home_snapshot(home) != before:
        return "wrote to the teammate's home"
    if bench.trust_path.read_bytes() != trust_before or bad_trust.read_text() != BAD_TRUST:
        return "changed a trust file"
    if list(cwd.iterdir()):
        return f"left files in the working directory: {list(cwd.iterdir())}"
    return None


@pytest.fixture(scope="module")
def warmed(bench: Bench) -> Bench:
    """Every derived file (index, sync state) exists before the homes are copied."""
    for handle, home in bench.homes.items():
        for argv in (["inbox"], ["status"]):
            proc = subprocess.run([sys.executable, "-m", "gitrelay", *argv],
                                  env=dict(os.environ, GITRELAY_HOME=str(home)),
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, (handle, proc.stderr)
    return bench


def relay_log(relay: Path) -> list[str]:
    return git_out(relay, "log", "--format=%H %s", "--all").splitlines()


@pytest.mark.slow
def test_every_bad_command_line_is_one_coded_error_line_and_writes_nothing(
        warmed: Bench, tmp_path: Path, record_property: Any) -> None:
    """The cases run four at a time, each in its own copy of the teammate's home (so a
    write is pinned on its case); the relay must not move at all."""
    relay_before = Store(warmed.relay).refs("refs/")
    log_before = relay_log(warmed.relay)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda nc: (nc[0], run_cli(warmed, nc[1], tmp_path, nc[0])),
                                CLI_CASES))
    problems = [f"{name}: {problem}" for name, problem in results if problem]
    assert not problems, "\n".join(problems)
    new = [line for line in relay_log(warmed.relay) if line not in log_before]
    assert Store(warmed.relay).refs("refs/") == relay_before, f"the relay moved: {new}"
    record_property("reliability", {"suite": "bad_input_cli", "cases": len(CLI_CASES)})


def test_every_cli_command_is_tried() -> None:
    from gitrelay.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    tried = {case.argv[0] for _, case in CLI_CASES if case.argv}
    assert commands <= tried, sorted(commands - tried)
