"""Tokens per round trip: what each side's model reads when alice hands bob a question and
hears back.

Two teammates on a relay of their own, each with the real MCP server of this tree (the
default ``gitrelay mcp``: text answers) and the real session-start hook, play one round
trip as the agents of issue 44 did:

- the receiver (bob): the start context of his next session, ``check_inbox``,
  ``view_thread``, ``accept_handoff``, ``send_message`` (his answer), ``complete_handoff``;
- the sender (alice): ``list_teammates``, ``handoff_to_teammate``, then at her next
  session ``check_inbox`` (the default call; ``after: 0`` if that lists nothing, as the
  note says) and ``view_thread`` of the thread bob answered and completed.

Each answer is counted with the o200k tokenizer as the host gives it to the model: the
text, or ``JSON.stringify`` of the structured content when a server sends one. The
counts are deterministic but for the few tokens of each answer's random fence token and
its timestamps. Goals (issue 44): the receiver's side ≤ 1,100 tokens, the sender's
≤ 900.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench.kit import Figure, Log, client_for, gitrelay_home, hermetic_environment, run_async

SECTION = "tokens per round trip"
GOALS = {"receiver": 1_100, "sender": 900}
RECEIVER_STEPS = ("start context", "check_inbox", "view_thread", "accept_handoff",
                  "send_message", "complete_handoff")
SENDER_STEPS = ("list_teammates", "handoff_to_teammate", "check_inbox", "view_thread")
PEOPLE = {"alice@acme": ("Alice Martin", "backend"), "bob@acme": ("Bob Chen", "frontend")}
HANDOFF = {
    "to": "bob@acme", "intent": "ask_question",
    "summary": ("The nightly export of /users times out since the table passed 10k rows. "
                "I paginated the endpoint with a cursor (50 per page, ?limit up to 200); "
                "the admin list still asks for everything at once."),
    "question": "Can the admin list page through /users with the cursor, and its mocks too?",
    "artifacts": [{"type": "test_command", "command": "npm test -- admin-list"}],
    "metadata": {"ticket": "ENG-1234"},
}
ANSWER = "Yes: the list now follows next_cursor, 50 rows a page; the mocks return two pages."
RESULT = "The admin list pages through /users with the cursor; mocks and tests updated."


def model_text(result: Any) -> str:
    """A tool result as the host gives it to the model: ``JSON.stringify`` of its
    structured content when there is one, else its text."""
    if getattr(result, "structured_content", None) is not None:
        return json.dumps(result.structured_content, ensure_ascii=False,
                          separators=(",", ":"))
    return "".join(getattr(c, "text", "") for c in result.content)


def _trust(home: Path, other: str) -> Path:
    path = home / "trust.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"version: 1\nteammates:\n  {other}: {{auto_test: true, "
                    "auto_write_paths: [web/src/api/]}\n")
    return path


def _start_context(home: Path, trust: Path, session: str, work: Path) -> str:
    """The session-start hook's context for the user of ``home``, as Claude Code gets it."""
    import os

    from gitrelay.hosts.hookrun import run_hook

    old = os.environ.get("GITRELAY_TRUST")
    os.environ["GITRELAY_TRUST"] = str(trust)
    try:
        with gitrelay_home(home):
            out = run_hook("claude", "session-start", json.dumps({
                "session_id": session, "cwd": str(work), "hook_event_name": "SessionStart",
                "source": "startup", "transcript_path": "/dev/null"}))
    finally:
        if old is None:
            os.environ.pop("GITRELAY_TRUST", None)
        else:
            os.environ["GITRELAY_TRUST"] = old
    if out.exit_code != 0:
        raise RuntimeError(f"session-start failed: {out.stderr}")
    if not out.stdout:
        return ""
    return str(json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"])


def play(root: Path, log: Log = print) -> dict[str, dict[str, str]]:
    """One round trip on a fresh relay under ``root``: each side's texts, step by step,
    as its model read them; ``notes`` says how the sender heard back."""
    from mcp import Client

    from bench.registry_bench import make_relay
    from gitrelay.mcp.agentserver import build_server
    from gitrelay.mcp.inprocess import in_process
    from gitrelay.mcp.state import ServerState
    from gitrelay.relay import joining
    from gitrelay.store.config import UserConfig, save_user_config
    from gitrelay.trust.trust import TrustStore

    relay = root / "relay.git"
    make_relay(relay, name="acme", sharded=False)
    homes = {h: root / h.split("@")[0] for h in PEOPLE}
    trusts = {}
    for handle, home in homes.items():
        with gitrelay_home(home):
            joining.join(str(relay), handle, name=PEOPLE[handle][0], role=PEOPLE[handle][1],
                       save=False)
            save_user_config(UserConfig(relay=str(relay), handle=handle, writes="wait"))
        other = next(h for h in PEOPLE if h != handle)
        trusts[handle] = _trust(home, other)
    work = root / "work"
    (work / ".git").mkdir(parents=True)
    clients = {h: client_for(relay, homes[h], h, writes="wait") for h in PEOPLE}

    def server(handle: str, session: str) -> Any:
        def opener() -> ServerState:
            return ServerState(client=clients[handle],
                               trust=TrustStore(trusts[handle], watch=False), loop=None,
                               session_id=session)

        return build_server(opener, structured=False)

    sides: dict[str, dict[str, str]] = {"receiver": {}, "sender": {}, "notes": {}}

    async def call(c: Any, side: str, tool: str, args: dict[str, Any]) -> str:
        res = await c.call_tool(tool, args)
        text = model_text(res)
        if res.is_error:
            raise RuntimeError(f"{tool}: {text}")
        sides[side][tool] = text
        return text

    async def sender_first() -> str:
        with gitrelay_home(homes["alice@acme"]):
            async with Client(in_process(server("alice@acme", "alice-1"))) as c:
                await call(c, "sender", "list_teammates", {})
                sent = await call(c, "sender", "handoff_to_teammate", HANDOFF)
                return sent.split("thread_id=", 1)[1].split()[0]

    async def receiver() -> None:
        with gitrelay_home(homes["bob@acme"]):
            async with Client(in_process(server("bob@acme", "bob-1"))) as c:
                await call(c, "receiver", "check_inbox", {})
                await call(c, "receiver", "view_thread", {"thread_id": tid})
                await call(c, "receiver", "accept_handoff", {"thread_id": tid})
                await call(c, "receiver", "send_message", {"thread_id": tid, "body": ANSWER})
                await call(c, "receiver", "complete_handoff",
                           {"thread_id": tid, "result_summary": RESULT})

    async def sender_again() -> None:
        with gitrelay_home(homes["alice@acme"]):
            clients["alice@acme"].refresh(max_age=0)
            async with Client(in_process(server("alice@acme", "alice-2"))) as c:
                text = await call(c, "sender", "check_inbox", {})
                if tid[:6] not in text:
                    sides["notes"]["check_inbox"] = "the default call listed nothing: after 0"
                    await call(c, "sender", "check_inbox", {"after": 0})
                await call(c, "sender", "view_thread", {"thread_id": tid})

    for handle, client in clients.items():     # each knows the other's registration
        with gitrelay_home(homes[handle]):
            client.refresh(max_age=0)
    tid = run_async(sender_first)
    with gitrelay_home(homes["bob@acme"]):
        clients["bob@acme"].refresh(max_age=0)
    sides["receiver"]["start context"] = _start_context(homes["bob@acme"], trusts["bob@acme"],
                                                        "bob-1", work)
    run_async(receiver)
    run_async(sender_again)
    log(f"round trip played on {relay}")
    return sides


def count(sides: dict[str, dict[str, str]]) -> dict[str, dict[str, int]]:
    """Each side's o200k tokens per step, and its ``total``."""
    from bench.context import tokens

    out: dict[str, dict[str, int]] = {}
    for side, steps in (("receiver", RECEIVER_STEPS), ("sender", SENDER_STEPS)):
        got = {step: tokens(sides[side].get(step, "")) for step in steps}
        got["total"] = sum(got.values())
        out[side] = got
    return out


def figures(counted: dict[str, dict[str, int]], notes: dict[str, str]) -> list[Figure]:
    figs = []
    for side, who in (("receiver", "bob, receiving"), ("sender", "alice, sending")):
        steps = counted[side]
        figs.append(Figure(SECTION, f"{who}: one round trip", "tokens", float(steps["total"]),
                           None, goal=f"≤ {GOALS[side]:,} tokens", limit=GOALS[side],
                           note="; ".join(f"{k} {v}" for k, v in steps.items() if k != "total")
                                + (f"; {notes['check_inbox']}" if side == "sender"
                                   and "check_inbox" in notes else "")))
    return figs


def bench_round_trip(ws: Any, sizes: Any, log: Log, shared: dict[str, Any]) -> list[Figure]:
    from bench.kit import unavailable

    try:
        from bench.context import tokens

        tokens("probe")
    except ImportError as exc:
        return [unavailable(SECTION, "tokens", f"bpe-openai is not installed ({exc})")]
    sides = play(ws.fresh("round-trip"), log)
    counted = count(sides)
    shared["round_trip"] = counted
    return figures(counted, sides["notes"])


def main() -> None:
    """``python -m bench.round_trip``: each side's tokens per step, and the texts."""
    root = Path(tempfile.mkdtemp(prefix="gitrelay-round-trip-"))
    hermetic_environment(root)
    sides = play(root / "play")
    counted = count(sides)
    for side, steps in (("receiver", RECEIVER_STEPS), ("sender", SENDER_STEPS)):
        for step in steps:
            print(f"===== {side}: {step} ({counted[side][step]} tokens)")
            print(sides[side].get(step, ""))
        print(f"----- {side}: {counted[side]['total']} tokens (goal ≤ {GOALS[side]:,})\n")


if __name__ == "__main__":
    main()
