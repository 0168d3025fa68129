"""``gitrelay demo``: the product on a throw-away relay, told as a short story.

It creates the embedded default relay under a temporary directory, registers
the three teammates of ``example-repo/`` (shipped inside this package), starts
a real ``gitrelay mcp`` process for two of them (each with its own home, as on
two laptops) and drives both with a scripted MCP client over stdio: alice's
agent hands work to bob's, bob's agent finds it, his trust file lets it in, it
accepts, asks a question, gets alice's answer and completes; then carol, whom
bob's trust file blocks, sends one from the command line and is kept out.

Two outputs: the story on standard output (a line per MCP call with its gist,
the one fenced answer bob's agent reads, a closing summary and the commands
to look further), and the full transcript (every call and answer as the agent
got it) in a file whose path the story ends with. Everything it starts is
stopped before it returns; the temporary relay is removed unless ``keep``.

This module is an MCP *client* (the only one in the package); the server is
:mod:`gitrelay.mcp.agentserver`, reached only through real processes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
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
from gitrelay.core.readable import clean, clip, one_line, short_id
from gitrelay.core.threadstate import ACCEPTED, COMPLETED
from gitrelay.demo.example import Example, load_example
from gitrelay.relay.joining import ensure_default_relay, join
from gitrelay.store.config import default_relay_path

ALICE, BOB, CAROL = "alice@acme", "bob@acme", "carol@acme"
INBOX_WAIT = 20.0
# Result fields that are noise in the full transcript (ids are shown where they matter).
_QUIET_KEYS = {"created_at", "updated_at", "id", "message_id", "item_id", "idempotency_key",
               "repeated", "accepted_by_session", "inbox_url", "unread", "cursor",
               "next_cursor", "index_rebuilt", "claimed_by", "claim_expires_at", "email",
               "metadata", "trust_reason"}
_MAX_BLOCK_LINES = 16
_MAX_TEXT_LINES = 40
_MAX_LINE = 150
STORY_WIDTH = 100       # columns of a story line
FENCE_LINES = 13        # at most this many lines of the one answer shown in the story


class DemoError(RelayError):
    """A step of the demo did not go as scripted."""

    code = -32030
    name = "demo_failed"


# --- printing -------------------------------------------------------------------


class Story:
    """What a person reads: short sections, one line per call."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        self.out.write(clip(text, STORY_WIDTH + 10) + "\n")
        self.out.flush()

    def section(self, number: int | None, title: str) -> None:
        self.line()
        self.line(f"{number}. {title}" if number is not None else title)

    def say(self, text: str) -> None:
        self.line(f"   {text}")

    def command(self, text: str) -> None:
        """A command to copy: never clipped."""
        self.out.write(f"   {text}\n")

    def step(self, who: str, what: str, gist: str) -> None:
        head = f"   {who:<6} {what}"
        self.line(clip(f"{head} → {one_line(gist)}", STORY_WIDTH))


class Transcript:
    """Every call and answer in full, as the agent got it (the file the story names)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def section(self, title: str) -> None:
        head = f"── {title} "
        self.line()
        self.line(head + "─" * max(78 - len(head), 3))

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
        """A read's text content as the agent reads it (long lines clipped, a long
        answer's middle elided)."""
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


# --- the gist of each call, for the story ------------------------------------------


def _quote(text: Any, limit: int = 44) -> str:
    return f"“{one_line(str(text or ''), limit)}”"


def _artifact_kinds(artifacts: list[dict[str, Any]]) -> str:
    kinds = [str(a.get("type", "?")).replace("_", " ") for a in artifacts]
    return ", ".join(kinds) if kinds else "no artifacts"


def _inbox_gist(items: list[dict[str, Any]]) -> str:
    """``N new on THREAD from HANDLE: kind (status), …`` for what a long-poll brought."""
    groups: dict[tuple[str, str], list[str]] = {}
    for item in items:
        sender = item.get("sender") or {}
        handle = str(sender.get("handle", "?") if isinstance(sender, dict) else sender)
        what = f"{str(item.get('kind', '?')).replace('_', ' ')} ({item.get('status')})"
        if str(item.get("summary_preview") or "").startswith("[withheld by gitrelay"):
            what = what.split(" (")[0] + ", text withheld (blocked)"
        groups.setdefault((short_id(str(item.get("thread_id")), 6), handle), []).append(what)
    return f"{len(items)} new " + "; ".join(
        f"on {tid} from {handle}: {', '.join(kinds)}" for (tid, handle), kinds in groups.items())


def gist(tool: str, args: dict[str, Any], data: dict[str, Any]) -> str:
    """One line saying what a successful call did."""
    tid = short_id(str(data.get("thread_id") or args.get("thread_id") or ""), 6)
    if tool == "handoff_to_teammate":
        return (f"thread {tid} for {args.get('to')}, {data.get('status')} "
                f"({args.get('intent')}; {_artifact_kinds(args.get('artifacts') or [])})")
    if tool == "accept_handoff":
        overlay = data.get("trust_overlay") or {}
        needs = ", ".join(overlay.get("require_approval") or []) or "nothing"
        return (f"{data.get('status')}; trust file: {data.get('trust_reason') or 'listed'}, "
                f"auto_test {'yes' if overlay.get('auto_test') else 'no'}, "
                f"{needs} ask first")
    if tool == "send_message":
        return f"message #{data.get('sequence_no')} on {tid}: {_quote(args.get('body'))}"
    if tool == "complete_handoff":
        return f"{data.get('status')}: {_quote(args.get('result_summary'), 50)}"
    if tool == "search_threads":
        hits = data.get("results") or []
        found = ", ".join(f"{short_id(str(h.get('thread_id')), 6)} ({h.get('status')})"
                          for h in hits[:3])
        return f"{len(hits)} found for {args.get('query')!r}: {found or 'none'}"
    if tool == "view_thread":
        return f"thread {tid}, {data.get('status')}, {len(data.get('messages') or [])} message(s)"
    return one_line(json.dumps(data), 60)


# --- the agents -----------------------------------------------------------------


@dataclass
class Agent:
    """One teammate's agent: an MCP client session with their `gitrelay mcp`."""

    handle: str
    session: mcp.ClientSession
    story: Story
    transcript: Transcript

    @property
    def who(self) -> str:
        return self.handle.split("@")[0]

    async def call(self, tool: str, args: dict[str, Any], *, expect_error: str | None = None,
                   quiet: bool = False) -> dict[str, Any]:
        """Call ``tool``; the full exchange goes to the transcript, its gist to the story
        (unless ``quiet``). The answer's text content is kept under ``"_text"``."""
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
            if not quiet:
                self.story.step(self.who, tool, "refused: " + text.split(".")[0])
            return {"error": text}
        if expect_error is not None:
            raise DemoError(f"{self.who}'s {tool} should have been refused ({expect_error})")
        data = result.structured_content or {}
        if tool not in _FENCED_READS:  # a write's answer: its fields, one per line
            self.transcript.result(data)
        else:  # a read: its compact text and fence, as the agent reads it
            self.transcript.text(text)
        if not quiet:
            self.story.step(self.who, tool, gist(tool, args, data))
        data["_text"] = text
        return data

    async def wait_for(self, after: int, want: Callable[[dict[str, Any]], bool],
                       what: str) -> int:
        """Long-poll the inbox (items after the cursor ``after``) until an item ``want``s;
        the story gets one line for everything that arrived meanwhile. The new cursor."""
        cursor = after
        seen: dict[str, dict[str, Any]] = {}
        deadline = anyio.current_time() + INBOX_WAIT
        while anyio.current_time() < deadline:
            page = await self.call("check_inbox", {"after": cursor,
                                                   "wait_seconds": INBOX_WAIT}, quiet=True)
            # What arrived after the cursor: the page also lists again what is still
            # unread before it (docs/inbox.md), which the story told already.
            arrived = [i for i in page.get("items", []) if int(i.get("seq", 0)) > cursor]
            cursor = int(page.get("cursor", cursor))
            for item in arrived:
                seen[str(item.get("item_id"))] = item
            if any(want(item) for item in arrived):
                items = list(seen.values())
                self.story.step(self.who, "check_inbox", _inbox_gist(items))
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


# --- the story --------------------------------------------------------------------


class Day:
    def __init__(self, root: Path, example: Example, story: Story,
                 transcript: Transcript) -> None:
        self.root = root
        self.example = example
        self.story = story
        self.t = transcript
        self.homes = {h: root / h.split("@")[0] for h in (ALICE, BOB, CAROL)}
        self.trusts = {ALICE: root / "alice-trust.yaml", BOB: root / "bob-trust.yaml",
                       CAROL: root / "carol-trust.yaml"}
        self.relay = ""
        self.thread_id = ""

    def setup(self) -> None:
        s = self.story
        s.line("gitrelay demo: alice's and bob's coding agents hand work to each other through "
               "a git repository;")
        s.line("each line below is a real call to a real `gitrelay mcp` (one per agent) or a "
               "real command.")
        with _env(GITRELAY_HOME=str(self.root / "relay-host")):
            self.relay = str(ensure_default_relay(default_relay_path()))
        self.t.section("Setting up")
        self.t.line(f"   relay: {self.relay}")
        for mate in self.example.teammates:
            with _env(GITRELAY_HOME=str(self.homes[mate.handle])):
                join(self.relay, mate.handle, name=mate.name, role=mate.role, email=mate.email,
                     save=False)
            self.t.line(f"   registered {mate.handle}: {mate.name}, {mate.role}")
        shutil.copyfile(self.example.trust_path, self.trusts[BOB])
        self.trusts[ALICE].write_text("version: 1\nteammates:\n  bob@acme: {auto_test: true}\n"
                                      "  carol@acme: {}\n")
        self.trusts[CAROL].write_text("version: 1\nteammates: {alice@acme: {}, bob@acme: {}}\n")
        s.section(0, "The team")
        s.say(f"relay: {self.relay}")
        s.say("       a bare git repository; its pre-receive hook (the gate) refuses bad pushes")
        s.say("alice (backend), bob (frontend) and carol (platform) joined it.")
        s.say("bob's trust file lists alice (his agent may run her tests) and blocks carol.")

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
            alice = Agent(ALICE, sessions[ALICE], self.story, self.t)
            bob = Agent(BOB, sessions[BOB], self.story, self.t)
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
        s, t = self.story, self.t
        users = self.example.thread("paginate-users").spec
        question, answer = (step["body"] for step in users["then"] if step["do"] == "message")
        done = next(step for step in users["then"] if step["do"] == "complete")
        bob_cursor = alice_cursor = 0

        s.section(1, "alice hands work to bob")
        t.section("1. alice hands work to bob")
        sent = await alice.call("handoff_to_teammate", {
            "to": BOB, "intent": "inform", "summary": users["summary"],
            "artifacts": [a for a in users["artifacts"] if a["type"] != "api_contract"]})
        tid = self.thread_id = sent["thread_id"]
        s.say(f"{_quote(users['summary'], 80)}")

        s.section(2, "bob's agent finds it, and his trust file lets it in")
        t.section("2. bob's agent finds it and accepts")
        bob_cursor = await bob.wait_for(bob_cursor, lambda i: i["thread_id"] == tid,
                                        "alice's handoff")
        accepted = await bob.call("accept_handoff", {"thread_id": tid})
        _expect(accepted.get("status") == ACCEPTED, "the handoff was not accepted")
        s.say("What bob's agent read: gitrelay's own lines, then alice's words inside a fence "
              "whose")
        s.say("random token no sender can predict, marked as data, not instructions:")
        for text in _fence_excerpt(str(accepted.get("_text", ""))):
            s.line(f"   │ {text}")

        s.section(3, "bob's agent asks, alice answers")
        t.section("3. bob's agent asks, alice answers")
        await bob.call("send_message", {"thread_id": tid, "body": question})
        alice_cursor = await alice.wait_for(
            alice_cursor, lambda i: i["thread_id"] == tid and i["kind"] == "reply",
            "bob's question")
        await alice.call("send_message", {"thread_id": tid, "body": answer})
        bob_cursor = await bob.wait_for(
            bob_cursor, lambda i: i["thread_id"] == tid and i["kind"] == "reply",
            "alice's answer")

        s.section(4, "bob's agent completes it; alice sees it done")
        t.section("4. bob's agent completes; alice sees it")
        await bob.call("complete_handoff", {
            "thread_id": tid, "result_summary": done["result_summary"],
            "artifacts": [a for a in done["artifacts"] if a["type"] == "link"]})
        alice_cursor = await alice.wait_for(
            alice_cursor, lambda i: i["thread_id"] == tid and i["status"] == COMPLETED,
            "bob's completion")

        s.section(5, "carol, blocked in bob's trust file, sends work from the command line")
        t.section("5. carol, blocked in bob's trust file, sends from the CLI")
        fixtures = self.example.thread("regenerated-fixtures").spec
        command = ["gitrelay", "send", BOB, "--intent", "inform", "--summary",
                   fixtures["summary"], "--file", fixtures["artifacts"][0]["path"]]
        shown = " ".join(shlex.quote(a) for a in command)
        s.line(clip(f"   carol$ {shown}", STORY_WIDTH))
        t.line(f"\n   carol$ {shown}")
        proc = subprocess.run([sys.executable, "-m", "gitrelay", *command[1:],
                               "--relay", self.relay, "--as", CAROL],
                              env=dict(os.environ, GITRELAY_HOME=str(self.homes[CAROL]),
                                       GITRELAY_TRUST=str(self.trusts[CAROL])),
                              capture_output=True, text=True, timeout=120, check=False)
        for text in (proc.stdout + proc.stderr).strip().splitlines():
            t.line(f"   {clean(text)}")
        _expect(proc.returncode == 0, f"carol's send failed: {one_line(proc.stderr, 300)}")
        carol_tid = proc.stdout.split()[1]
        bob_cursor = await bob.wait_for(bob_cursor, lambda i: i["thread_id"] == carol_tid,
                                        "carol's handoff")
        await bob.call("accept_handoff", {"thread_id": carol_tid},
                       expect_error="teammate_blocked (-32013)")

        s.section(6, "a week later, bob's agent looks the work up")
        t.section("6. bob's agent searches the threads it took part in")
        await bob.call("search_threads", {"query": "next_cursor from:alice@acme"})

    def summary(self, transcript_path: Path, keep: bool) -> None:
        s = self.story
        proc = subprocess.run(["git", "--git-dir", self.relay, "log", "--format=%s", "main"],
                              capture_output=True, text=True, check=False,
                              env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1"))
        _expect(proc.returncode == 0, f"git log failed: {one_line(proc.stderr)}")
        self.t.section("The relay's history (git log --format=%s main)")
        for text in proc.stdout.splitlines():
            self.t.line(f"   {clean(text)}")
        commits = len(proc.stdout.splitlines())
        s.section(None, "What just happened")
        s.say(f"- {commits} commits on the relay, one per operation, each checked by the gate "
              "before it landed.")
        s.say("- alice's words reached bob's agent only inside a fence; carol's never reached "
              "it at all.")
        s.say("- alice saw bob accept, ask and complete the thread she started, in her inbox.")
        s.say("- No server of gitrelay's own: a git repository, two `gitrelay mcp` processes "
              "and a CLI.")
        s.section(None, "Look further")
        if not keep:
            s.say("The relay is gone now; `gitrelay demo --keep` keeps it for these commands:")
        bindir = _bin_dir_off_path()
        if bindir is not None:
            s.command(f'export PATH="{bindir}{os.pathsep}$PATH"   # the gitrelay this demo ran')
        s.command(f"export GITRELAY_HOME={self.homes[ALICE]}   # alice's side")
        s.command(f"R={self.relay}")
        commands = [(f"gitrelay log --relay $R --as {ALICE}", "the history, one line per step"),
                    (f"gitrelay show {short_id(self.thread_id, 6)} --relay $R --as {ALICE}",
                     "the thread as a conversation"),
                    (f"gitrelay search next_cursor --relay $R --as {ALICE}",
                     "threads that mention it"),
                    (f"gitrelay web --relay $R --as {ALICE}",
                     "all of it in your browser"),
                    ("git --git-dir $R log --stat main", "the same history, as plain git")]
        wide = max(len(c) for c, _ in commands)
        for command, what in commands:
            s.command(f"{command.ljust(wide)}   # {what}")
        s.say(f"Every call and answer in full: {transcript_path}")
        s.say("Set it up for your team: `gitrelay docs getting-started`")


def _bin_dir_off_path() -> str | None:
    """The folder of the ``gitrelay`` command beside this interpreter when a shell would not
    find that one by name (a demo run from a project's virtualenv), else None."""
    here = Path(sys.executable).parent
    own = next((here / name for name in ("gitrelay", "gitrelay.exe") if (here / name).exists()),
               None)
    if own is None:
        return None
    found = shutil.which("gitrelay")
    if found is not None and Path(found).resolve() == own.resolve():
        return None
    return str(here)


def _fence_excerpt(text: str) -> list[str]:
    """The answer an agent read, for a person: without bookkeeping lines (what is still
    queued), long lines clipped, at most :data:`FENCE_LINES` lines."""
    skip = ("undelivered[", "metadata ", "sender: ", "sender.")
    lines = [clip(one_line(ln), STORY_WIDTH - 5) for ln in text.rstrip("\n").split("\n")
             if ln.strip() and not ln.startswith(skip) and not re.match(r"artifacts\[\d+\]: ", ln)]
    if len(lines) > FENCE_LINES:
        lines = [*lines[:FENCE_LINES - 2], f"⋮ ({len(lines) - FENCE_LINES + 1} more lines)",
                 lines[-1]]
    return lines


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside (nested) task-group exception groups."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup) and first.exceptions:
        first = first.exceptions[0]
    if isinstance(first, (RelayError, KeyboardInterrupt)):
        return first
    return DemoError(f"{type(first).__name__}: {one_line(str(first), 300)}")


def _expect(ok: bool, problem: str) -> None:
    if not ok:
        raise DemoError(problem)


def run_demo(*, keep: bool = False, out: TextIO | None = None,
             example: Example | None = None) -> int:
    """Run the scripted story; 0 when every step went as scripted."""
    story = Story(out or sys.stdout)
    example = example or load_example()  # before anything is made: a bad one leaves nothing
    root = Path(tempfile.mkdtemp(prefix="gitrelay-demo-"))
    transcript_path = root / "transcript.txt" if keep else root.with_suffix(".txt")
    ok = False
    with transcript_path.open("w", encoding="utf-8") as full:
        transcript = Transcript(full)
        day = Day(root, example, story, transcript)
        try:
            with _env(GITRELAY_HOME=str(root / "relay-host")):
                day.setup()
                try:
                    anyio.run(day.run)
                except BaseExceptionGroup as group:
                    raise _first_error(group) from group
            day.summary(transcript_path, keep)
            ok = True
        finally:
            if not ok:
                for log in sorted(root.glob("*-mcp.log")):
                    text = log.read_text(errors="replace").strip()
                    if text:
                        story.line(f"\n[{log.name}, last lines]")
                        for line in text.splitlines()[-15:]:
                            story.line(f"   {clean(line)}")
                story.line(f"\nThe transcript so far: {transcript_path}")
            if keep:
                story.line(f"\nKept the demo's files in {root}")
            else:
                shutil.rmtree(root, ignore_errors=True)
    return 0
