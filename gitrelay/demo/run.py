"""``gitrelay demo``: the whole product on a throw-away relay, in seconds.

It creates the embedded default relay under a temporary GITRELAY_HOME,
registers the three teammates of ``example-repo/``, starts a real
``gitrelay mcp`` process for two of them (each with its own home, as on two
laptops) and drives both with a scripted MCP client over stdio through a
working day: an inform handoff with a diff and a test command, a question
answered with a reply, a proposed action with a drafted diff, a handoff from
a blocked teammate refused at accept, and a cancel. The third teammate works
from the command line. It prints what each agent called and got back
(teammate text inside its provenance fence, as the agent sees it) and ends
with the relay's ``git log``. Everything it starts is stopped before it
returns, and the temporary directory is removed unless ``keep``.

This module is an MCP *client* (the only one in the package); the server is
:mod:`gitrelay.mcp.server`, reached only through real processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

from gitrelay.core.errors import RelayError
from gitrelay.demo.example import Example, load_example
from gitrelay.relay.admin import ensure_default_relay, join
from gitrelay.relay.render import clean, clip, one_line
from gitrelay.store.config import default_relay_path

ALICE, BOB, CAROL = "alice@acme", "bob@acme", "carol@acme"
INBOX_WAIT = 20.0
# Result fields that are noise in a transcript (ids are shown where they matter).
_QUIET_KEYS = {"created_at", "updated_at", "id", "message_id", "item_id", "idempotency_key",
               "repeated", "accepted_by_session", "inbox_url", "unread", "cursor",
               "next_cursor", "index_rebuilt", "claimed_by", "claim_expires_at", "email",
               "metadata", "trust_reason"}
_MAX_BLOCK_LINES = 16
_MAX_TEXT_LINES = 40
_MAX_LINE = 150


class DemoError(RelayError):
    """A step of the demo did not go as scripted."""

    code = -32030
    name = "demo_failed"


# --- printing -------------------------------------------------------------------


class Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def section(self, number: int, title: str) -> None:
        head = f"── {number}. {title} "
        self.line()
        self.line(head + "─" * max(78 - len(head), 3))

    def say(self, text: str) -> None:
        self.line(f"   {text}")

    def call(self, who: str, tool: str, args: dict[str, Any]) -> None:
        self.line(f"\n   {who}'s agent → {tool}")
        for text in _fields(args, 6):
            self.line(text)

    def result(self, value: Any, *, error: bool = False) -> None:
        if error:
            self.line("   ← is_error: true")
            for text in str(value).splitlines() or [""]:
                self.line(f"      {clean(text)}")
            return
        self.line("   ← " + ("(nothing)" if not value else ""))
        for text in _fields(value, 6):
            self.line(text)

    def text(self, text: str) -> None:
        """A read's text content as the agent reads it: gitrelay's lines, then the one
        fence of teammate values (long lines clipped, a long answer's middle elided)."""
        self.line("   ← (text content)")
        lines = [clip(one_line(ln), _MAX_LINE) for ln in text.rstrip("\n").split("\n")]
        if len(lines) > _MAX_TEXT_LINES:
            hidden = len(lines) - (_MAX_TEXT_LINES - 2)
            lines = [*lines[:_MAX_TEXT_LINES - 3], f"⋮ ({hidden} more lines)", *lines[-2:]]
        for ln in lines:
            self.line(f"      {ln}")


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return one_line(value, 110)
    return json.dumps(value)


def _block(text: str, pad: str) -> list[str]:
    lines = clean(text).rstrip("\n").split("\n")
    if len(lines) > _MAX_BLOCK_LINES:
        hidden = len(lines) - (_MAX_BLOCK_LINES - 2)
        lines = [*lines[:_MAX_BLOCK_LINES - 3], f"⋮ ({hidden} more lines)", *lines[-2:]]
    return [pad + ln for ln in lines]


def _fields(value: Any, indent: int) -> Iterator[str]:
    """A readable, YAML-like view of a tool's arguments or structured result."""
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _QUIET_KEYS or item is None or item == [] or item == {}:
                continue
            if key == "provenance" and isinstance(item, dict):
                yield (f"{pad}provenance: {{origin: {item.get('origin')}, sender: "
                       f"{one_line(item.get('sender', ''))}, trust: {item.get('trust')}, "
                       f"policy: {item.get('policy')}, fence: {str(item.get('fence'))[:8]}…}}")
            elif isinstance(item, str) and "\n" in item:
                yield f"{pad}{key}:"
                yield from _block(item, pad + "  ")
            elif isinstance(item, (dict, list)):
                yield f"{pad}{key}:"
                yield from _fields(item, indent + 2)
            else:
                yield f"{pad}{key}: {_scalar(item)}"
    elif isinstance(value, list):
        for item in value:
            lines = list(_fields(item, indent + 2))
            if lines:
                yield pad + "- " + lines[0][indent + 2:]
                yield from lines[1:]
            else:
                yield f"{pad}- {_scalar(item)}"
    elif isinstance(value, str) and "\n" in value:
        yield from _block(value, pad)
    else:
        yield pad + _scalar(value)


# --- the agents -----------------------------------------------------------------


@dataclass
class Agent:
    """One teammate's agent: an MCP client session with their `gitrelay mcp`."""

    handle: str
    session: mcp.ClientSession
    transcript: Transcript

    @property
    def who(self) -> str:
        return self.handle.split("@")[0]

    async def call(self, tool: str, args: dict[str, Any], *, expect_error: str | None = None
                   ) -> dict[str, Any]:
        self.transcript.call(self.who, tool, args)
        try:
            result = await self.session.call_tool(tool, args)
        except Exception as exc:
            raise DemoError(f"{self.who}'s {tool} call failed: {type(exc).__name__}: "
                            f"{one_line(str(exc), 300)}") from exc
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            self.transcript.result(text, error=True)
            if expect_error is None or not text.startswith(expect_error):
                raise DemoError(f"{self.who}'s {tool} failed: {one_line(text, 300)}")
            return {"error": text}
        if expect_error is not None:
            raise DemoError(f"{self.who}'s {tool} should have been refused ({expect_error})")
        data = result.structured_content or {}
        if tool not in _FENCED_READS:  # a write's answer: its fields, one per line
            self.transcript.result(data)
        else:  # a read: its compact text and fence, as the agent reads it
            self.transcript.text(text)
        return dict(data)

    async def wait_for(self, after: int, want: Callable[[dict[str, Any]], bool],
                       what: str) -> int:
        """Long-poll the inbox (items after the cursor ``after``) until an item ``want``s;
        the new cursor."""
        cursor = after
        deadline = anyio.current_time() + INBOX_WAIT
        while anyio.current_time() < deadline:
            page = await self.call("check_inbox", {"after": cursor, "wait_seconds": INBOX_WAIT})
            cursor = int(page.get("cursor", cursor))
            if any(want(item) for item in page.get("items", [])):
                return cursor
        raise DemoError(f"{what} did not reach {self.handle}'s inbox in {INBOX_WAIT:.0f} s")


# The tools whose text holds a fence: the transcript shows it as the agent reads it.
_FENCED_READS = frozenset({"check_inbox", "view_thread", "accept_handoff", "list_teammates"})


def _mcp_params(relay: str, handle: str, trust: Path, home: Path) -> StdioServerParameters:
    env = dict(os.environ, GITRELAY_HOME=str(home), GITRELAY_TRUST=str(trust))
    return StdioServerParameters(
        command=sys.executable,
        # --structured: the demo reads the typed data of each answer; its transcript shows
        # the text, which is the same as a coding agent's.
        args=["-m", "gitrelay", "mcp", "--relay", relay, "--as", handle, "--trust", str(trust),
              "--structured"],
        env=env, cwd=str(home.parent))


@contextmanager
def _env(**values: str) -> Iterator[None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --- the day --------------------------------------------------------------------


class Day:
    def __init__(self, root: Path, example: Example, transcript: Transcript) -> None:
        self.root = root
        self.example = example
        self.t = transcript
        self.homes = {h: root / h.split("@")[0] for h in (ALICE, BOB, CAROL)}
        self.trusts = {ALICE: root / "alice-trust.yaml", BOB: root / "bob-trust.yaml",
                       CAROL: root / "carol-trust.yaml"}
        self.relay = ""

    def setup(self) -> None:
        t = self.t
        t.line("gitrelay demo: two agents and a person hand work to each other through a "
               "git relay.")
        with _env(GITRELAY_HOME=str(self.root / "relay-host")):
            self.relay = str(ensure_default_relay(default_relay_path()))
        t.section(0, "Setting up")
        t.say(f"relay: {self.relay}")
        t.say("       (a bare git repository; its pre-receive hook is the gate)")
        for mate in self.example.teammates:
            with _env(GITRELAY_HOME=str(self.homes[mate.handle])):
                join(self.relay, mate.handle, name=mate.name, role=mate.role, email=mate.email,
                     save=False)
            t.say(f"registered {mate.handle}: {mate.name}, {mate.role}")
        shutil.copyfile(self.example.trust_path, self.trusts[BOB])
        self.trusts[ALICE].write_text("version: 1\nteammates:\n  bob@acme: {auto_test: true}\n"
                                      "  carol@acme: {}\n")
        self.trusts[CAROL].write_text("version: 1\nteammates: {alice@acme: {}, bob@acme: {}}\n")
        t.say("bob's trust file (example-repo/trust.yaml): alice@acme listed, carol@acme "
              "blocked")
        t.say("starting `gitrelay mcp` for alice and for bob (two processes, two homes)")

    async def run(self) -> None:
        async with AsyncExitStack() as stack:
            sessions = {}
            for handle in (ALICE, BOB):
                log = self.root / f"{handle.split('@')[0]}-mcp.log"
                errlog = stack.enter_context(log.open("w"))
                read, write = await stack.enter_async_context(stdio_client(
                    _mcp_params(self.relay, handle, self.trusts[handle], self.homes[handle]),
                    errlog=errlog))
                sessions[handle] = await stack.enter_async_context(
                    mcp.ClientSession(read, write))
            async with anyio.create_task_group() as tg:
                for s in sessions.values():
                    tg.start_soon(s.initialize)
            alice = Agent(ALICE, sessions[ALICE], self.t)
            bob = Agent(BOB, sessions[BOB], self.t)
            await self.day(alice, bob)
            await self.delivered()

    async def delivered(self) -> None:
        """Wait until both agents' queued operations are on the relay."""
        from gitrelay.store.config import mirror_path
        from gitrelay.store.mirror import Mirror

        deadline = anyio.current_time() + INBOX_WAIT
        for handle in (ALICE, BOB):
            with _env(GITRELAY_HOME=str(self.homes[handle])):
                mirror = Mirror(mirror_path(self.relay), handle)
            while mirror.outbox():
                if anyio.current_time() > deadline:
                    raise DemoError(f"{handle}'s queued operations were not delivered")
                await anyio.sleep(0.1)

    async def day(self, alice: Agent, bob: Agent) -> None:
        t = self.t
        ex = self.example
        bob_cursor = alice_cursor = 0

        t.section(1, "alice's agent informs bob's: a diff and a test command")
        users = ex.thread("paginate-users").spec
        sent = await alice.call("handoff_to_teammate", {
            "to": BOB, "intent": "inform", "summary": users["summary"],
            "artifacts": [a for a in users["artifacts"] if a["type"] != "api_contract"]})
        tid1 = sent["thread_id"]
        t.say("(queued: the agent has its answer at once; its server's sync loop delivers it)")
        bob_cursor = await bob.wait_for(bob_cursor, lambda i: i["thread_id"] == tid1,
                                        "alice's handoff")
        t.say("bob's agent accepts: alice's text arrives fenced, with bob's trust overlay")
        accepted = await bob.call("accept_handoff", {"thread_id": tid1})
        _expect(accepted.get("status") == "accepted", "the handoff was not accepted")
        await bob.call("complete_handoff", {
            "thread_id": tid1,
            "result_summary": "The admin user list follows next_cursor; the API client and "
                              "its mocks use the new shape.",
            "artifacts": [{"type": "link", "url": "https://git.acme.dev/acme/web/pulls/418",
                           "title": "web#418: paginate the admin user list"}]})

        t.section(2, "bob's agent asks alice's a question; she replies")
        search = ex.thread("search-cursor").spec
        asked = await bob.call("handoff_to_teammate", {
            "to": ALICE, "intent": "ask_question", "summary": search["summary"],
            "question": search["question"], "artifacts": search["artifacts"]})
        tid2 = asked["thread_id"]
        alice_cursor = await alice.wait_for(alice_cursor, lambda i: i["thread_id"] == tid2,
                                            "bob's question")
        await alice.call("view_thread", {"thread_id": tid2})
        await alice.call("send_message", {
            "thread_id": tid2,
            "body": "Cursor, please: the edge cache keys on the full URL, so offsets "
                    "fragment it. Use the same cursor format as /users."})
        bob_cursor = await bob.wait_for(
            bob_cursor, lambda i: i["thread_id"] == tid2 and i["kind"] == "reply",
            "alice's reply")
        thread = await bob.call("view_thread", {"thread_id": tid2})
        _expect(any(m["from"] == ALICE for m in thread.get("messages", [])),
                "bob cannot see alice's reply")

        t.section(3, "alice's agent proposes an action; bob's drafts the diff")
        retry = ex.thread("retry-budget").spec
        proposed = await alice.call("handoff_to_teammate", {
            "to": BOB, "intent": "propose_action",
            "summary": "The web client gives up on the first 503 during deploys. Retry "
                       "idempotent requests with backoff, honouring Retry-After.",
            "proposed_action": {
                "description": "Retry GET requests on 503 up to 4 times, honouring "
                               "Retry-After (capped at 10 s).",
                "target_files": ["web/src/api/http.ts"],
                "rationale": retry["proposed_action"]["rationale"]}})
        tid3 = proposed["thread_id"]
        bob_cursor = await bob.wait_for(bob_cursor, lambda i: i["thread_id"] == tid3,
                                        "alice's proposal")
        await bob.call("accept_handoff", {"thread_id": tid3})
        await bob.call("draft_proposed_action", {
            "thread_id": tid3,
            "note": "Draft for review; nothing is applied until you agree.",
            "suggested_diff": (
                "--- a/web/src/api/http.ts\n+++ b/web/src/api/http.ts\n"
                "@@ -8,3 +8,11 @@ export async function get<T>(url: string) {\n"
                "-  return fetchJson<T>(url);\n"
                "+  for (let attempt = 0; ; attempt++) {\n"
                "+    const res = await fetch(url);\n"
                "+    if (res.status !== 503 || attempt === 4) return parse<T>(res);\n"
                "+    const wait = Number(res.headers.get(\"Retry-After\") ?? 1);\n"
                "+    await sleep(Math.min(wait, 10) * 1000);\n"
                "+  }\n")})
        alice_cursor = await alice.wait_for(
            alice_cursor, lambda i: i["thread_id"] == tid3 and i["kind"] == "proposal_review",
            "bob's draft")
        thread = await alice.call("view_thread", {"thread_id": tid3})
        _expect(any(m.get("type") == "draft" for m in thread.get("messages", [])),
                "alice cannot see bob's draft")

        t.section(4, "carol, blocked in bob's trust file, sends a handoff from the CLI")
        fixtures = ex.thread("regenerated-fixtures").spec
        command = ["gitrelay", "send", BOB, "--intent", "inform", "--summary",
                   fixtures["summary"], "--file", fixtures["artifacts"][0]["path"]]
        t.line(f"\n   carol$ {' '.join(_shell_quote(a) for a in command)}")
        proc = subprocess.run([sys.executable, "-m", "gitrelay", *command[1:],
                               "--relay", self.relay, "--as", CAROL],
                              env=dict(os.environ, GITRELAY_HOME=str(self.homes[CAROL]),
                                       GITRELAY_TRUST=str(self.trusts[CAROL])),
                              capture_output=True, text=True, timeout=120, check=False)
        for text in (proc.stdout + proc.stderr).strip().splitlines():
            t.line(f"   {clean(text)}")
        _expect(proc.returncode == 0, f"carol's send failed: {one_line(proc.stderr, 300)}")
        tid4 = proc.stdout.split()[1]
        bob_cursor = await bob.wait_for(bob_cursor, lambda i: i["thread_id"] == tid4,
                                        "carol's handoff")
        t.say("bob's agent tries to accept it; his trust file blocks carol:")
        await bob.call("accept_handoff", {"thread_id": tid4},
                       expect_error="teammate_blocked (-32013)")

        t.section(5, "alice's agent sends a handoff, then cancels it")
        ci = ex.thread("ci-typecheck").spec
        sent = await alice.call("handoff_to_teammate", {
            "to": BOB, "intent": "inform", "summary": ci["summary"],
            "artifacts": ci["artifacts"]})
        tid5 = sent["thread_id"]
        t.say("(she learns the check is postponed a week)")
        await alice.call("cancel_handoff", {"thread_id": tid5})
        bob_cursor = await bob.wait_for(
            bob_cursor, lambda i: i["thread_id"] == tid5 and i["status"] == "cancelled",
            "alice's cancelled handoff")
        t.say("bob's agent sees it cancelled: nothing for it to do")

    def git_log(self) -> None:
        t = self.t
        t.section(6, "The relay's history, as `git log` shows it to a person")
        t.line(f"\n   $ git --git-dir {self.relay} log --format='%h %s'\n")
        proc = subprocess.run(["git", "--git-dir", self.relay, "log", "--format=%h %s", "main"],
                              capture_output=True, text=True, check=False,
                              env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1"))
        _expect(proc.returncode == 0, f"git log failed: {one_line(proc.stderr)}")
        for text in proc.stdout.splitlines():
            t.line(f"   {clean(text)}")
        t.line()
        t.say("Every line is one commit adding one file, checked by the gate. Try it with "
              "your team: docs/getting-started.md")


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside (nested) task-group exception groups."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup) and first.exceptions:
        first = first.exceptions[0]
    if isinstance(first, (RelayError, KeyboardInterrupt)):
        return first
    return DemoError(f"{type(first).__name__}: {one_line(str(first), 300)}")


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def _expect(ok: bool, problem: str) -> None:
    if not ok:
        raise DemoError(problem)


def run_demo(*, keep: bool = False, out: TextIO | None = None,
             example: Example | None = None) -> int:
    """Run the scripted day; 0 when every step went as scripted."""
    transcript = Transcript(out or sys.stdout)
    root = Path(tempfile.mkdtemp(prefix="gitrelay-demo-"))
    day = Day(root, example or load_example(), transcript)
    ok = False
    try:
        with _env(GITRELAY_HOME=str(root / "relay-host")):
            day.setup()
            try:
                anyio.run(day.run)
            except BaseExceptionGroup as group:
                raise _first_error(group) from group
        day.git_log()
        ok = True
    finally:
        if not ok:
            for log in sorted(root.glob("*-mcp.log")):
                text = log.read_text(errors="replace").strip()
                if text:
                    transcript.line(f"\n[{log.name}, last lines]")
                    for line in text.splitlines()[-15:]:
                        transcript.line(f"   {clean(line)}")
        if keep:
            transcript.line(f"\nKept the demo's files in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0
