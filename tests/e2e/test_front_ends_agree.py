"""The `gitrelay` command line and the MCP server make the same decision for the same
request: both call the relay's policy, and only word the answer differently.

Each case is asked of a real ``gitrelay`` process (``python -m gitrelay …``) and of a
real ``gitrelay mcp`` process through the SDK's stdio client, as the same teammate,
on one relay with the gate installed. The decision (accepted, or the error's name
and code) must be the same, and each front end words the next step for its own
audience: a person is never told to call a tool, an agent never to run a command.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gitrelay.cli.wording import next_step_text as for_people
from gitrelay.core import layout, schema
from gitrelay.core.errors import NEXT_STEPS, NotAParticipant, RelayError
from gitrelay.core.vocab import DEFAULT_LIMITS
from gitrelay.mcp.wording import next_step_text as for_agents
from gitrelay.relay import joining, policy, reads
from gitrelay.relay.client import RelayClient
from gitrelay.store.gitstore import Store
from tests.kit import Bench, hermetic_env, set_hermetic

pytestmark = pytest.mark.slow  # each decision through the CLI, the MCP server and the hooks

REPO = Path(__file__).resolve().parent.parent.parent
ALICE, BOB, CAROL, DAVE = "alice@acme", "bob@acme", "carol@acme", "dave@acme"
TEAM = {ALICE: ("Alice Martin", "backend"), BOB: ("Bob Chen", "frontend"),
        CAROL: ("Carol Diaz", "platform"), DAVE: ("Dave Okafor", "qa")}
# Bob trusts alice, blocks dave, and refuses anyone unlisted (carol).
BOB_TRUST = ("version: 1\nunknown_teammates: {policy: reject}\nteammates:\n"
             "  alice@acme: {auto_read: true}\nblocked: [dave@acme]\n")
ALICE_TRUST = "version: 1\nteammates: {bob@acme: {}, carol@acme: {}, dave@acme: {}}\n"
CODED = re.compile(r"^(?:gitrelay: )?(?P<name>[a-z_]+) \((?P<code>-\d+)\): ")
TOOLS = ("list_teammates", "check_inbox", "view_thread", "handoff_to_teammate",
         "accept_handoff", "send_message", "complete_handoff", "cancel_handoff",
         "draft_proposed_action")
ACTION = {"description": "Paginate /users", "target_files": ["src/api/users.ts"],
          "rationale": "The list grew."}


@dataclass(frozen=True)
class Case:
    who: str
    cli: tuple[str, ...]            # the command, {name} placeholders for thread ids
    tool: str
    args: dict[str, Any]
    expect: str                     # "accepted", "repeated", "pending" or an error name


CASES: dict[str, Case] = {
    "accept-by-a-trusted-sender": Case(
        BOB, ("accept", "{trusted_cli}"), "accept_handoff", {"thread_id": "{trusted_mcp}"},
        "accepted"),
    "accept-from-an-unknown-sender-under-reject": Case(
        BOB, ("accept", "{unknown}"), "accept_handoff", {"thread_id": "{unknown}"},
        "forbidden"),
    "accept-from-a-blocked-sender": Case(
        BOB, ("accept", "{blocked}"), "accept_handoff", {"thread_id": "{blocked}"},
        "teammate_blocked"),
    "accept-by-the-sender": Case(
        ALICE, ("accept", "{pending}"), "accept_handoff", {"thread_id": "{pending}"},
        "not_authorized_transition"),
    "accept-by-someone-else": Case(
        CAROL, ("accept", "{pending}"), "accept_handoff", {"thread_id": "{pending}"},
        "not_a_participant"),
    "complete-of-a-pending-thread": Case(
        BOB, ("complete", "{pending}", "--summary", "Done."), "complete_handoff",
        {"thread_id": "{pending}", "result_summary": "Done."}, "invalid_transition"),
    "cancel-by-the-recipient": Case(
        BOB, ("cancel", "{pending}"), "cancel_handoff", {"thread_id": "{pending}"},
        "not_authorized_transition"),
    "a-question-with-intent-inform": Case(
        ALICE, ("send", BOB, "--intent", "inform", "--summary", "Paging", "--question", "Why?"),
        "handoff_to_teammate",
        {"to": BOB, "intent": "inform", "summary": "Paging", "question": "Why?"},
        "invalid_intent_payload"),
    "propose-action-without-an-action": Case(
        ALICE, ("send", BOB, "--intent", "propose_action", "--summary", "Paginate"),
        "handoff_to_teammate", {"to": BOB, "intent": "propose_action", "summary": "Paginate"},
        "invalid_intent_payload"),
    "a-handoff-to-nobody-registered": Case(
        ALICE, ("send", "zoe@acme", "--intent", "inform", "--summary", "Hi"),
        "handoff_to_teammate", {"to": "zoe@acme", "intent": "inform", "summary": "Hi"},
        "recipient_not_found"),
    "a-used-idempotency-key-with-another-payload": Case(
        ALICE, ("send", BOB, "--intent", "inform", "--summary", "Other", "--key", "paging-1"),
        "handoff_to_teammate",
        {"to": BOB, "intent": "inform", "summary": "Other", "idempotency_key": "paging-1"},
        "duplicate_idempotency_key"),
    "a-used-idempotency-key-with-the-same-payload": Case(
        ALICE, ("send", BOB, "--intent", "inform", "--summary", "Search paging", "--key",
                "paging-1"), "handoff_to_teammate",
        {"to": BOB, "intent": "inform", "summary": "Search paging",
         "idempotency_key": "paging-1"}, "repeated"),
    "two-idempotency-keys-that-differ": Case(
        ALICE, ("send", BOB, "--intent", "inform", "--summary", "Paging", "--key", "key-a",
                "--meta", "client_idempotency_key=key-b"), "handoff_to_teammate",
        {"to": BOB, "intent": "inform", "summary": "Paging", "idempotency_key": "key-a",
         "metadata": {"client_idempotency_key": "key-b"}}, "invalid_argument"),
    "a-summary-over-the-relays-own-limit": Case(
        ALICE, ("send", BOB, "--intent", "inform", "--summary", "x" * 301),
        "handoff_to_teammate", {"to": BOB, "intent": "inform", "summary": "x" * 301},
        "invalid_argument"),
    "a-summary-within-the-relays-own-limit": Case(
        ALICE, ("send", BOB, "--intent", "inform", "--summary", "y" * 300, "--key", "cli-300"),
        "handoff_to_teammate", {"to": BOB, "intent": "inform", "summary": "y" * 300,
                                "idempotency_key": "mcp-300"}, "pending"),
}


@dataclass
class Relay:
    base: Path
    path: Path
    homes: dict[str, Path]
    trusts: dict[str, Path]
    ids: dict[str, str]

    def env(self, who: str) -> dict[str, str]:
        return hermetic_env(self.base / "home", gitrelay_home=self.homes[who],
                            trust=self.trusts[who])

    def fill(self, value: Any) -> Any:
        if isinstance(value, str):
            return re.sub(r"\{(\w+)\}", lambda m: self.ids.get(m.group(1), m.group()), value)
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Answer:
    decision: str       # the status written, "repeated", or the error's name and code
    text: str           # what the person or agent reads


def _relay(base: Path, mp: pytest.MonkeyPatch) -> Relay:
    set_hermetic(mp, base / "home")
    path = joining.init_relay(base / "relay.git", name="acme")
    _limit_texts(path, 300)
    homes, trusts, clients = {}, {}, {}
    for handle, (name, role) in TEAM.items():
        who = handle.split("@")[0]
        homes[handle] = base / who
        trusts[handle] = base / f"{who}-trust.yaml"
        trusts[handle].write_text(BOB_TRUST if handle == BOB else ALICE_TRUST)
        mp.setenv("GITRELAY_HOME", str(homes[handle]))
        joining.join(str(path), handle, name=name, role=role)
        clients[handle] = RelayClient(str(path), handle, writes="wait", fresh_seconds=0)
    ids: dict[str, str] = {}

    def send(key: str, sender: str, **fields: Any) -> None:
        mp.setenv("GITRELAY_HOME", str(homes[sender]))
        fields.setdefault("intent", "inform")
        fields.setdefault("summary", f"Work for {key}")
        done = clients[sender].handoff(to=BOB, **fields)
        assert done.delivery == "delivered"
        ids[key] = str(done.thread_id)

    send("trusted_cli", ALICE)
    send("trusted_mcp", ALICE)
    send("unknown", CAROL)
    send("blocked", DAVE)
    send("pending", ALICE, intent="propose_action", proposed_action=ACTION)
    send("keyed", ALICE, summary="Search paging", idempotency_key="paging-1")
    return Relay(base, path, homes, trusts, ids)


def _limit_texts(relay: Path, chars: int) -> None:
    """Give the new relay its own max_text_chars in relay.json, as an admin creating
    it for a small team would: its first commit, written again with that limit."""
    store = Store(relay)
    doc = joining.relay_config("acme")
    doc["limits"] = dict(DEFAULT_LIMITS, max_text_chars=chars)
    tree = store.single_file_tree(layout.CONFIG_PATH, schema.dumps(doc))
    message = (f"init relay acme\n\n{layout.TRAILER_OP}: {layout.OP_INIT}\n"
               f"{layout.TRAILER_ACTOR}: gitrelay\n{layout.TRAILER_SEQ}: 0\n")
    store.set_ref(layout.MAIN_REF, store.commit(tree=tree, parents=[], message=message,
                                                author="gitrelay", email="gitrelay@localhost"))


def _cli(relay: Relay, case: Case) -> Answer:
    argv = [relay.fill(a) for a in case.cli]
    json_flag = ["--json"] if case.cli[0] in ("accept", "send", "complete", "cancel") else []
    proc = subprocess.run([sys.executable, "-m", "gitrelay", *argv, *json_flag],
                          env=relay.env(case.who), capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    if proc.returncode == 0:
        out = json.loads(proc.stdout)
        return Answer("repeated" if out.get("repeated") else str(out["status"]), proc.stdout)
    coded = CODED.match(proc.stderr)
    assert coded is not None, proc.stderr
    return Answer(f"{coded['name']} ({coded['code']})", proc.stderr.strip())


async def _mcp(relay: Relay, who: str, cases: list[tuple[str, Case]]) -> dict[str, Answer]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "gitrelay", "mcp", "--writes", "wait",
                                         "--structured"],
                                   env=relay.env(who), cwd=str(REPO))
    answers: dict[str, Answer] = {}
    with open(relay.base / f"mcp-{who}.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=60) as session:
            await session.initialize()
            for name, case in cases:
                result = await session.call_tool(case.tool, relay.fill(case.args))
                text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                if result.is_error:
                    coded = CODED.match(text)
                    assert coded is not None, text
                    answers[name] = Answer(f"{coded['name']} ({coded['code']})", text)
                    continue
                out = result.structured_content or {}
                answers[name] = Answer("repeated" if out.get("repeated")
                                       else str(out["status"]), text)
    return answers


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    base = tmp_path_factory.mktemp("front-ends")
    with pytest.MonkeyPatch.context() as mp:
        yield _relay(base, mp)


@pytest.fixture(scope="module")
def answers(relay: Relay) -> dict[str, tuple[Answer, Answer]]:
    cli = {name: _cli(relay, case) for name, case in CASES.items()}
    mcp: dict[str, Answer] = {}
    for who in TEAM:
        mine = [(name, case) for name, case in CASES.items() if case.who == who]
        if mine:
            mcp |= anyio.run(_mcp, relay, who, mine)
    return {name: (cli[name], mcp[name]) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_the_command_line_and_the_mcp_server_decide_alike(
        answers: dict[str, tuple[Answer, Answer]], name: str) -> None:
    cli, mcp = answers[name]
    assert cli.decision == mcp.decision, (cli.text, mcp.text)
    assert cli.decision.split(" ")[0] == CASES[name].expect, cli.text


def test_a_person_reads_any_thread_and_an_agent_only_the_threads_of_its_teammate(
        relay: Relay, monkeypatch: pytest.MonkeyPatch) -> None:
    """Who may read a thread is decided once (policy.check_participant, through
    reads.thread_to_read), per reader: a person at a terminal reads any thread, as
    ``git log -p`` would show it anyway; an agent reads only threads its teammate sent
    or received."""
    tid = relay.ids["pending"]  # alice's handoff to bob
    monkeypatch.setenv("GITRELAY_HOME", str(relay.homes[CAROL]))
    carol = RelayClient(str(relay.path), CAROL, writes="wait", fresh_seconds=0)
    assert reads.thread_to_read(carol, tid[:8], policy.Reader.PERSON).thread_id == tid
    with pytest.raises(NotAParticipant):
        reads.thread_to_read(carol, tid[:8], policy.Reader.AGENT)

    shown = subprocess.run([sys.executable, "-m", "gitrelay", "show", tid[:8], "--json"],
                           env=relay.env(CAROL), capture_output=True, text=True,
                           timeout=120, cwd=REPO)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["thread_id"] == tid

    view = Case(CAROL, (), "view_thread", {"thread_id": tid[:8]}, "")
    carol_agent = anyio.run(_mcp, relay, CAROL, [("view", view)])["view"]
    assert carol_agent.decision == "not_a_participant (-32005)", carol_agent.text
    assert "carol@acme" in carol_agent.text
    bob_agent = anyio.run(_mcp, relay, BOB, [("view", view)])["view"]
    assert bob_agent.decision == "pending", bob_agent.text


@pytest.mark.parametrize("name", [n for n, c in CASES.items()
                                  if c.expect not in ("accepted", "repeated", "pending")])
def test_a_person_is_told_a_command_and_an_agent_a_tool(
        answers: dict[str, tuple[Answer, Answer]], name: str) -> None:
    cli, mcp = answers[name]
    assert len(cli.text.splitlines()) == 1, cli.text
    assert not [tool for tool in TOOLS if tool in cli.text], cli.text
    assert "--" not in mcp.text.replace("---", ""), mcp.text


def test_a_refused_accept_names_the_command_or_the_trust_step_for_each_audience(
        answers: dict[str, tuple[Answer, Answer]]) -> None:
    cli, mcp = answers["accept-from-an-unknown-sender-under-reject"]
    assert "`gitrelay trust add carol@acme` trusts them" in cli.text
    assert "If your user trusts this sender" in mcp.text
    cli, mcp = answers["a-handoff-to-nobody-registered"]
    assert cli.text.endswith("See who is with `gitrelay teammates`.")
    assert "Call list_teammates" in mcp.text


def test_a_push_the_gate_refuses_names_neither_a_tool_nor_a_command(tmp_path: Path) -> None:
    """A `git push` through the gate is answered with the rule and the offending commit
    alone: whoever pushed may be neither an agent nor someone with gitrelay at hand."""
    bench = Bench.create(tmp_path / "gate")
    for handle in (ALICE, BOB):
        bench.register(handle)
    pending = bench.handoff(ALICE, BOB, "key-pending")
    bench.land()
    landed = bench.tip
    attempts = {
        "recipient_not_found": lambda: bench.handoff(ALICE, "zoe@acme", "key-zoe"),
        "invalid_intent_payload": lambda: bench.handoff(ALICE, BOB, "key-q", question="Why?"),
        "not_authorized_transition": lambda: bench.transition("accept", pending, ALICE),
        "invalid_transition": lambda: bench.transition("complete", pending, BOB),
    }
    for rule, build in attempts.items():
        bench.tip = landed
        build()
        result = bench.push_main()
        assert result.rules == [rule], result.stderr
        assert not [tool for tool in TOOLS if tool in result.stderr], result.stderr
        assert "gitrelay " not in result.stderr.replace("gitrelay: ", ""), result.stderr


def test_every_next_step_is_worded_for_a_person_and_for_an_agent() -> None:
    for step in NEXT_STEPS:
        err = RelayError("refused", next_step=step, thread_id="0VKDWJ5P3R8Q2M4N6T7V9X1Z3B",
                         sender="carol@acme")
        person, agent = for_people(err), for_agents(err)
        assert person and agent, step
        assert not [tool for tool in TOOLS if tool in person], person
        assert person != agent, step
