"""Every front end withholds the same words of a blocked teammate, and shows none of them.

On one real relay, mallory@evil (whom alice's trust file blocks) opens two threads to
alice and works on one alice opened: every text she could write carries a marker. As
alice, the real front ends read them: the MCP server through the SDK's stdio client
(structured content and the text the model reads), ``gitrelay inbox``/``show``/``log``
as a person runs them, the web view over HTTP, and the coding host's session-start
hook. The marker is in none of their outputs; and each marks as withheld exactly the
fields :class:`gitrelay.trust.withholding.Withholding` names (those it shows at all),
which are the fields written out here by hand. Alice's own words are shown everywhere.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.trust.trust import load_trust
from gitrelay.trust.withholding import Withholding
from tests.kit import hermetic_env, read_answer, set_hermetic, web_view

pytestmark = pytest.mark.slow  # one relay read through four front ends, as processes

REPO = Path(__file__).resolve().parent.parent.parent
ALICE, MALLORY = "alice@acme", "mallory@evil"
MARK = "Qv7zMark"
"""In every word mallory writes, and in nothing else."""
OWN = "Alice's own words stay."
STATUSES = ["pending", "accepted", "completed", "cancelled"]

# What the decision withholds, by thread (the MCP answer's field names).
EXPECTED = {
    "asked": {"sender.name", "sender.role", "summary", "question", "artifacts", "metadata",
              "messages[0].body", "messages[0].payload"},
    "proposed": {"sender.name", "sender.role", "summary", "metadata",
                 "proposed_action.description", "proposed_action.target_files",
                 "proposed_action.rationale", "proposed_action.suggested_diff",
                 "cancellation.reason"},
    "worked": {"recipient.name", "recipient.role", "accepted_by_session",
               "messages[0].body", "messages[0].suggested_diff",
               "completion.result_summary", "completion.artifacts"},
}
# Of an inbox item: mallory's threads' previews are hers, the third's is alice's.
EXPECTED_ITEMS = {"asked": {"sender.name", "sender.role", "summary_preview"},
                  "proposed": {"sender.name", "sender.role", "summary_preview"},
                  "worked": {"sender.name", "sender.role"}}
TEXTS = ("summary", "question", "proposed_action.description", "proposed_action.rationale",
         "completion.result_summary", "cancellation.reason", "accepted_by_session")
PROFILE = ("sender.name", "sender.role", "recipient.name", "recipient.role")


@dataclass
class Relay:
    base: Path
    path: Path
    homes: dict[str, Path]
    trust: Path
    ids: dict[str, str]                     # "asked", "proposed", "worked" -> thread id
    work: Path
    outputs: dict[str, str] = field(default_factory=dict)   # every front end's output

    def env(self) -> dict[str, str]:
        return hermetic_env(self.base / "home", gitrelay_home=self.homes[ALICE],
                            trust=self.trust)

    def name(self, tid: str) -> str:
        return next(k for k, v in self.ids.items() if v == tid)


def _build(base: Path, mp: pytest.MonkeyPatch) -> Relay:
    set_hermetic(mp, base / "home")
    path = joining.init_relay(base / "relay.git", name="acme")
    homes = {ALICE: base / "alice", MALLORY: base / "mallory"}
    clients = {}
    profiles = {ALICE: ("Alice Martin", "backend"),
                MALLORY: (f"Mallory {MARK}-name", f"{MARK}-role")}
    for handle, (name, role) in profiles.items():
        mp.setenv("GITRELAY_HOME", str(homes[handle]))
        joining.join(str(path), handle, name=name, role=role)
        clients[handle] = RelayClient(str(path), handle, writes="wait", fresh_seconds=0)

    def by(handle: str) -> RelayClient:
        mp.setenv("GITRELAY_HOME", str(homes[handle]))
        clients[handle].refresh(max_age=0)
        return clients[handle]

    ids = {}
    ids["asked"] = str(by(MALLORY).handoff(
        to=ALICE, intent="ask_question", summary=f"{MARK}-summary",
        question=f"{MARK}-question", metadata={"note": f"{MARK}-metadata"},
        artifacts=[{"type": "file_diff", "path": f"docs/{MARK}.md",
                    "diff": f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+{MARK}-diff\n"},
                   {"type": "link", "url": f"https://example.com/{MARK}-link",
                    "title": f"{MARK}-title"},
                   {"type": "test_command", "command": f"echo {MARK}-command"}]).thread_id)
    by(MALLORY).send_message(ids["asked"], f"{MARK}-body", payload={"k": f"{MARK}-payload"})
    by(ALICE).send_message(ids["asked"], OWN)
    ids["proposed"] = str(by(MALLORY).handoff(
        to=ALICE, intent="propose_action", summary=f"{MARK}-summary-2",
        proposed_action={"description": f"{MARK}-description",
                         "target_files": [f"src/{MARK}-target.py"],
                         "rationale": f"{MARK}-rationale",
                         "suggested_diff": f"--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+{MARK}-y\n"}
    ).thread_id)
    by(MALLORY).cancel(ids["proposed"], reason=f"{MARK}-reason")
    ids["worked"] = str(by(ALICE).handoff(
        to=MALLORY, intent="propose_action", summary=OWN,
        proposed_action={"description": "Paginate /users", "target_files": ["src/users.ts"],
                         "rationale": "The list grew."}).thread_id)
    by(MALLORY).accept(ids["worked"], session_id=f"{MARK}-session")
    by(MALLORY).draft_proposed_action(ids["worked"], f"--- a/z\n+++ b/z\n+{MARK}-draft\n",
                                      f"{MARK}-note")
    by(MALLORY).complete(ids["worked"], result_summary=f"{MARK}-result",
                         artifacts=[{"type": "link", "url": f"https://example.com/{MARK}"}])
    by(ALICE)  # alice's copy holds it all
    trust = base / "alice-trust.yaml"
    trust.write_text("version: 1\nblocked: [Mallory@Evil]\n")
    work = base / "work"
    (work / ".git").mkdir(parents=True)   # the session's work tree
    return Relay(base, path, homes, trust, ids, work)


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    base = tmp_path_factory.mktemp("withheld")
    with pytest.MonkeyPatch.context() as mp:
        yield _build(base, mp)


# --- each front end, as alice ----------------------------------------------------------


def _gitrelay(relay: Relay, *argv: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "gitrelay", *argv], env=relay.env(),
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, (argv, proc.stderr)
    relay.outputs[" ".join(argv)] = proc.stdout + proc.stderr
    return proc.stdout


def _hook_context(relay: Relay) -> str:
    event = {"session_id": "s-withheld", "transcript_path": str(relay.base / "t.jsonl"),
             "cwd": str(relay.work), "permission_mode": "default",
             "hook_event_name": "SessionStart", "source": "startup"}
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "hook", "session-start",
                           "--host", "claude"], input=json.dumps(event), env=relay.env(),
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    context = str(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])
    relay.outputs["hook session-start"] = context + proc.stderr
    return context


async def _agent(relay: Relay) -> dict[str, tuple[dict[str, Any], str]]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gitrelay", "mcp", "--structured"],
                                   env=relay.env(), cwd=str(REPO))
    calls = {"inbox": ("check_inbox", {"status": STATUSES}),
             "teammates": ("list_teammates", {})}
    calls |= {name: ("view_thread", {"thread_id": tid}) for name, tid in relay.ids.items()}
    out = {}
    with open(relay.base / "mcp.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=60) as session:
            await session.initialize()
            for name, (tool, args) in calls.items():
                result = await session.call_tool(tool, args)
                text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                assert not result.is_error, text
                out[name] = (result.structured_content or {}, text)
                relay.outputs[f"mcp {name}"] = json.dumps(out[name][0]) + text
            for name, tid in relay.ids.items():
                resource = await session.read_resource(f"gitrelay://threads/{tid}")  # type: ignore[arg-type]
                relay.outputs[f"mcp resource {name}"] = resource.contents[0].text  # type: ignore[union-attr]
    return out


def _web(relay: Relay) -> dict[str, str]:
    pages = {"inbox": "/inbox?status=all", "teammates": "/teammates"}
    pages |= {name: f"/threads/{tid}" for name, tid in relay.ids.items()}
    out = {}
    env = {k: v for k, v in relay.env().items() if k not in ("GITRELAY_HOME",
                                                               "PYTHONUNBUFFERED")}
    with web_view(relay.path, ALICE, relay.homes[ALICE], trust=relay.trust,
                  env=env) as view:
        assert view.login().status == 200
        for name, path in pages.items():
            page = view.request("GET", path)
            assert page.status == 200, (path, page.body[:500])
            out[name] = html.unescape(page.body)
            relay.outputs[f"web {path}"] = out[name]
    return out


@dataclass
class Seen:
    """What every front end gave alice, read once for all the tests (reading marks items
    read, so the session-start hook goes first)."""

    hook: str
    agent: dict[str, tuple[dict[str, Any], str]]
    inbox_json: dict[str, Any]
    inbox_text: str
    shown_json: dict[str, dict[str, Any]]
    shown_text: dict[str, str]
    originals: dict[str, dict[str, Any]]
    web: dict[str, str]
    decided: dict[str, set[str]]
    decided_items: dict[str, set[str]]


@pytest.fixture(scope="module")
def seen(relay: Relay) -> Seen:
    hook = _hook_context(relay)
    agent = anyio.run(_agent, relay)
    inbox_json = json.loads(_gitrelay(relay, "inbox", "--all", "--json"))
    inbox_text = _gitrelay(relay, "inbox", "--all")
    shown_json = {n: json.loads(_gitrelay(relay, "show", t, "--json", "--keep-unread"))
                  for n, t in relay.ids.items()}
    shown_text = {n: _gitrelay(relay, "show", t, "--keep-unread") for n, t in relay.ids.items()}
    _gitrelay(relay, "log")
    web = _web(relay)
    # What mallory wrote, as alice sees it on purpose: the marker is there, so its absence
    # elsewhere is the withholding.
    originals = {}
    for n, t in relay.ids.items():
        argv = ("show", t, "--json", "--keep-unread", "--show-blocked")
        originals[n] = json.loads(_gitrelay(relay, *argv))
        assert MARK in json.dumps(originals[n]), n
        del relay.outputs[" ".join(argv)]
    # The decision itself, from alice's copy and trust file.
    decision = Withholding.of(ALICE, load_trust(relay.trust))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITRELAY_HOME", str(relay.homes[ALICE]))
        client = RelayClient(str(relay.path), ALICE, writes="wait")
        decided = {n: set(decision.thread(client.thread(t), str).fields)
                   for n, t in relay.ids.items()}
    decided_items = {relay.name(str(i["thread_id"])):
                     set(decision.item(i["sender"]["handle"], i.get("thread_sender")))
                     for i in json.loads(_gitrelay(relay, "inbox", "--all", "--json",
                                                   "--show-blocked"))["items"]}
    del relay.outputs["inbox --all --json --show-blocked"]
    kept = relay.base / "outputs"   # for reading a failure
    kept.mkdir()
    for n, (name, output) in enumerate(relay.outputs.items()):
        (kept / f"{n:02d}.txt").write_text(f"{name}\n{output}")
    return Seen(hook, agent, inbox_json, inbox_text, shown_json, shown_text, originals, web,
                decided, decided_items)


# --- reading back which fields each one withheld -----------------------------------------


def _at(doc: Any, path: str) -> Any:
    """The value at ``path`` (``a.b``, ``messages[0].body``) of ``doc``; None if absent."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            at = int(part[1:-1])
            doc = doc[at] if isinstance(doc, list) and at < len(doc) else None
        else:
            doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _held(value: Any, notice: str) -> bool:
    """A value as withheld: the front end's notice, or nothing where words were."""
    return (isinstance(value, str) and value.startswith(notice)) or value in (None, [], {}, "")


_CLI_PLACES = {"completion.": "complete.", "cancellation.": "cancel.",
               "accepted_by_session": "accept.accepted_by_session"}


def _cli_path(path: str) -> str:
    for mcp, cli in _CLI_PLACES.items():
        if path.startswith(mcp):
            return cli + path[len(mcp):]
    return path if path.startswith("messages[") else f"handoff.{path}"


def _candidates(original: dict[str, Any], expected: set[str]) -> set[str]:
    """The fields of ``expected`` that hold words in ``original`` (``show --json``)."""
    found = {f for f in expected if f in PROFILE or _at(original, _cli_path(f)) not in
             (None, [], {}, "")}
    assert found == expected, expected - found   # every one of them was written
    return found


def _agent_thread(out: dict[str, Any], fields: set[str]) -> set[str]:
    notice = "[withheld by gitrelay: mallory@evil is blocked"
    return {f for f in fields if _held(_at(out, f), notice)}


def _cli_thread(out: dict[str, Any], text: str, fields: set[str]) -> set[str]:
    held = {f for f in fields - set(PROFILE)
            if _held(_at(out, _cli_path(f)), "[withheld: mallory@evil is blocked")}
    if "<mallory@evil>" not in text:   # the profile left out: the handle alone
        held |= set(PROFILE) & fields
    return held


META = r'<div class="meta">.*?</div>'
"""An event's first line on the thread page; its words follow, up to the event's end."""


def _web_thread(page: str, original: dict[str, Any], fields: set[str]) -> set[str]:
    notice = "[withheld: mallory@evil is blocked"

    def pre(after: str) -> str | None:
        found = re.search(re.escape(after) + r'<pre class="text"[^>]*>(.*?)</pre>', page, re.S)
        return None if found is None else found.group(1)

    shown: dict[str, Any] = {
        "summary": pre("<h2>Summary</h2>"), "question": pre("<h2>Question</h2>"),
        "proposed_action.description": pre("<h2>Proposed action</h2>"),
        "proposed_action.rationale": pre("<h3>Rationale</h3>"),
        "proposed_action.target_files": [] if "Target files: (none)" in page else ["?"],
        "proposed_action.suggested_diff": "Suggested diff (never applied)" in page or None,
        "artifacts": "<h2>Artifacts</h2>" in page or None,
    }
    for i, m in enumerate(original["messages"]):
        block = re.search(rf'id="m{m["sequence_no"]}">\s*{META}(.*?)</div>', page, re.S)
        assert block is not None, m["sequence_no"]
        body = re.search(r'<pre class="text">(.*?)</pre>', block.group(1), re.S)
        shown[f"messages[{i}].body"] = body.group(1) if body else None
        shown[f"messages[{i}].suggested_diff"] = 'class="diff"' in block.group(1) or None
        shown[f"messages[{i}].payload"] = "<summary>payload</summary>" in block.group(1) or None
    for kind, place in (("complete", "completion."), ("cancel", "cancellation.")):
        block = re.search(rf'class="event ev-{kind}">\s*{META}(.*?)</div>', page, re.S)
        if block is not None:
            text = re.search(r'<pre class="text">(.*?)</pre>', block.group(1), re.S)
            shown[place + ("result_summary" if kind == "complete" else "reason")] = \
                text.group(1) if text else None
            shown[place + "artifacts"] = "artifacts" in block.group(1) or None
    held = {f for f in fields if f in shown and _held(shown[f], notice)}
    if not re.search(r"<b>mallory@evil</b> \(", page):   # no name after the handle
        held |= set(PROFILE) & fields
    return held


def _web_shows(fields: set[str]) -> set[str]:
    """The fields the thread page shows at all (no metadata, no session id)."""
    return fields - {"metadata", "accepted_by_session"}


def _rows(text: str) -> dict[str, list[str]]:
    """thread id -> its item rows, of an inbox text (a check_inbox text, the start
    context)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = line.split(" ")
        if len(words) > 3 and re.fullmatch(r"\d+", words[0]) and words[1].startswith("ibx_"):
            out.setdefault(words[2], []).append(line)
    return out


def _agent_text_items(relay: Relay, text: str, token_values: dict[str, str]) -> dict[str, set[str]]:
    """What an inbox text withholds of each row: its sender's name and role (the row says
    so), its preview (neither on the row nor in the fence as ``#SEQ``)."""
    out: dict[str, set[str]] = {}
    for tid, lines in _rows(text).items():
        held = out.setdefault(relay.name(tid), set())
        for line in lines:
            seq = line.split(" ")[0]
            if "(sender blocked: name" in line:
                held |= {"sender.name", "sender.role"}
            preview = token_values.get(f"#{seq}")
            on_row = re.search(r' preview=("(?:[^"\\]|\\.)*")', line)
            if preview is None and (on_row is None
                                    or "[withheld" in json.loads(on_row.group(1))):
                held.add("summary_preview")
    return out


# --- the tests ------------------------------------------------------------------------------


def test_the_decision_withholds_every_field_mallory_wrote(seen: Seen) -> None:
    assert seen.decided == EXPECTED
    assert seen.decided_items == EXPECTED_ITEMS


def test_no_front_end_shows_a_word_mallory_wrote(relay: Relay, seen: Seen) -> None:
    assert len(relay.outputs) >= 18, sorted(relay.outputs)
    for name, output in relay.outputs.items():
        assert MARK not in output, (name, output[output.find(MARK) - 300:][:600])
    # Alice's own words are never withheld.
    for where in (seen.shown_text["asked"], seen.web["asked"],
                  json.dumps(seen.agent["asked"][0]), seen.shown_text["worked"],
                  seen.web["worked"], json.dumps(seen.agent["worked"][0])):
        assert OWN in where


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_front_end_withholds_the_same_fields_of_a_thread(seen: Seen, name: str) -> None:
    fields = _candidates(seen.originals[name], EXPECTED[name])
    agent = _agent_thread(seen.agent[name][0], fields)
    cli = _cli_thread(seen.shown_json[name], seen.shown_text[name], fields)
    web = _web_thread(seen.web[name], seen.originals[name], fields)
    assert agent == seen.decided[name]
    assert cli == seen.decided[name]
    assert web == _web_shows(seen.decided[name])
    # A text stands as the notice: the same texts in each.
    texts = {f for f in fields if f in TEXTS or f.endswith(".body")}
    notice = {"agent": "[withheld by gitrelay: mallory@evil is blocked in your trust file",
              "cli": "[withheld: mallory@evil is blocked in your trust file"}
    for f in texts:
        assert str(_at(seen.agent[name][0], f)).startswith(notice["agent"]), f
        assert str(_at(seen.shown_json[name], _cli_path(f))).startswith(notice["cli"]), f
    assert "Words of a teammate your trust file blocks are withheld here" in seen.web[name]


def test_every_front_end_withholds_the_same_words_of_an_inbox_item(
        relay: Relay, seen: Seen) -> None:
    # The MCP answer: structured, and the text the model reads (its one fence).
    out, text = seen.agent["inbox"]
    agent = {}
    for item in out["items"]:
        notice = "[withheld by gitrelay: mallory@evil is blocked"
        agent[relay.name(item["thread_id"])] = {
            f for f in ("sender.name", "sender.role", "summary_preview")
            if str(_at(item, f)).startswith(notice)}
    answer = read_answer(text, out)
    fenced = {v.field: v.value for v in answer.values if v.author == MALLORY}
    agent_text = _agent_text_items(relay, text, {k: str(v) for k, v in fenced.items()})
    # The session-start context: the same rows, and one fence.
    # Nothing in it is a teammate's words (alice's own preview is on its row): no fence.
    assert "<<<teammate-data" not in seen.hook
    hook_items = _agent_text_items(relay, seen.hook, {})
    # The command line: --json leaves the name and role out, the preview is the notice.
    cli = {}
    for item in seen.inbox_json["items"]:
        held = set() if "name" in item["sender"] else {"sender.name", "sender.role"}
        if item["summary_preview"].startswith("[withheld: mallory@evil is blocked"):
            held.add("summary_preview")
        cli[relay.name(item["thread_id"])] = held
    cli_table = {relay.name(tid): {"summary_preview"} for tid in relay.ids.values()
                 if re.search(rf"{tid[:8]}.*\[withheld: mallory@evil is blocked\]",
                              seen.inbox_text)}
    # The web view's inbox: the name is the row's title, the preview its summary.
    web = {}
    for tid, title, summary in re.findall(
            r'href="/threads/(\w+)">.*?<td title="([^"]*)">.*?<td class="summary">(.*?)</td>',
            seen.web["inbox"], re.S):
        held = set() if title else {"sender.name", "sender.role"}
        if summary.startswith("[withheld: mallory@evil is blocked"):
            held.add("summary_preview")
        web[relay.name(tid)] = held
    assert agent == EXPECTED_ITEMS
    assert agent_text == EXPECTED_ITEMS
    assert hook_items == EXPECTED_ITEMS
    assert cli == EXPECTED_ITEMS
    assert web == EXPECTED_ITEMS
    assert cli_table == {n: {"summary_preview"} for n, f in EXPECTED_ITEMS.items()
                         if "summary_preview" in f}
    # Alice's own preview (the thread she opened) is shown by all of them.
    own = relay.ids["worked"]
    for rows in (_rows(text)[own], _rows(seen.hook)[own]):
        assert rows and all(OWN in row for row in rows), rows
        assert all("(sender blocked: name and role withheld)" in row for row in rows), rows


def test_the_teammates_list_and_page_withhold_the_name_and_role(seen: Seen) -> None:
    (mallory,) = [t for t in seen.agent["teammates"][0]["teammates"]
                  if t["handle"] == MALLORY]
    notice = "[withheld by gitrelay: mallory@evil is blocked"
    assert mallory["name"].startswith(notice) and mallory["role"].startswith(notice)
    assert mallory["email"] is None and mallory["trust"] == "blocked"
    row = re.search(r"<tr[^>]*>(?:(?!</tr>).)*mallory@evil.*?</tr>", seen.web["teammates"],
                    re.S)
    assert row is not None and "blocked" in row.group(0)
    assert "Alice Martin" in seen.web["teammates"]   # alice's own name stays
