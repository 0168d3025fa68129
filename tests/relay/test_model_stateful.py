"""A stateful property test: three teammates at random, checked against a small model.

alice, bob and carol each have their own mirror on one relay (a fresh copy of a
template relay per example) and write in ``wait`` mode, so every legal
operation goes through their client's checks, the ``git`` push and the gate.
Hypothesis picks the operations — handoffs, messages, drafts, accepts,
completes, cancels and acks, by anyone on any thread, legal or not — and a
pure-Python model of the rules predicts each outcome.

After every step each teammate fetches and reads: every thread's status and
messages (author, text, type, numbering) must equal the model's, and each
teammate's inbox (``gitrelay.inbox.inbox.check_inbox`` over every status) must hold
exactly the model's items: thread, kind, thread status, unread flag and unread
message count. An illegal operation must raise the error the model names and
change nothing. GITRELAY_SOAK=1 runs more and longer examples.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from gitrelay.core.errors import RelayError
from gitrelay.inbox.inbox import check_inbox
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient

pytestmark = pytest.mark.slow  # a hypothesis state machine of three teammates through the gate

SOAK = bool(os.environ.get("GITRELAY_SOAK"))
EXAMPLES, STEPS = (60, 40) if SOAK else (10, 16)
PEOPLE = ("alice@acme", "bob@acme", "carol@acme")
NAMES = {"alice@acme": ("Alice Martin", "backend"), "bob@acme": ("Bob Chen", "frontend"),
         "carol@acme": ("Carol Diaz", "platform")}
STRANGER = "zed@acme"                    # a well-formed handle nobody registered
NO_SUCH = "0123456789ABCDEFGHJKMNPQRS"   # a well-formed thread id nobody used
STATUSES = ["pending", "accepted", "completed", "cancelled"]
INTENTS = ("inform", "ask_question", "propose_action", "propose_action+diff")


# --- the model -------------------------------------------------------------------------------


@dataclass
class MThread:
    tid: str
    sender: str
    recipient: str
    intent: str
    has_diff: bool
    status: str = "pending"
    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (from, body, type)
    archived: bool = False

    def participant(self, who: str) -> bool:
        return who in (self.sender, self.recipient)

    def other(self, who: str) -> str:
        return self.recipient if who == self.sender else self.sender


class Model:
    """The rules of docs/format.md and the inbox of docs/inbox.md, as plainly as possible."""

    def __init__(self) -> None:
        self.threads: dict[str, MThread] = {}
        # user -> (thread, kind) -> unread; user -> thread -> messages by the other since ack
        self.items: dict[str, dict[tuple[str, str], bool]] = {p: {} for p in PEOPLE}
        self.unread_messages: dict[str, dict[str, int]] = {p: {} for p in PEOPLE}

    def _touch(self, user: str, tid: str, kind: str) -> None:
        self.items[user][(tid, kind)] = True
        self.unread_messages[user].setdefault(tid, 0)

    # Each method returns the error name the operation must raise, or None and applies it.

    def handoff(self, sender: str, recipient: str, intent: str, tid: str) -> str | None:
        if recipient not in PEOPLE:
            return "recipient_not_found"
        self.threads[tid] = MThread(tid, sender, recipient, intent.split("+")[0],
                                    intent.endswith("+diff"))
        self._touch(recipient, tid, "assignment")
        return None

    def message(self, actor: str, tid: str, body: str, *, draft: bool = False) -> str | None:
        t = self.threads.get(tid)
        if t is None:
            return "thread_not_found"
        if not t.participant(actor):
            return "not_a_participant"
        if t.status in ("completed", "cancelled"):
            return "thread_terminal"
        if draft:
            if actor != t.recipient:
                return "forbidden"
            if t.intent != "propose_action" or t.has_diff:
                return "invalid_intent_payload"
        t.messages.append((actor, body, "draft" if draft else "message"))
        other = t.other(actor)
        self._touch(other, tid, "proposal_review" if draft else "reply")
        self.unread_messages[other][tid] += 1
        return None

    def transition(self, actor: str, tid: str, kind: str) -> str | None:
        t = self.threads.get(tid)
        if t is None:
            return "thread_not_found"
        allowed = t.sender if kind == "cancel" else t.recipient
        if actor != allowed:
            return "not_authorized_transition" if t.participant(actor) else "not_a_participant"
        if t.status in ("completed", "cancelled"):
            return "thread_terminal"
        needs = {"accept": "pending", "complete": "accepted", "cancel": "pending"}[kind]
        if t.status != needs:
            return "invalid_transition"
        t.status = {"accept": "accepted", "complete": "completed", "cancel": "cancelled"}[kind]
        self._touch(t.other(actor), tid, "task_update")
        return None

    def archive(self, tid: str) -> str | None:
        """Anyone archives a closed thread; it reads and refuses as before."""
        t = self.threads.get(tid)
        if t is None or t.archived:
            return "invalid_argument"  # nothing to archive
        if t.status not in ("completed", "cancelled"):
            return "format_error"  # the archive rule
        t.archived = True
        return None

    def ack_all(self, user: str) -> None:
        for key in self.items[user]:
            self.items[user][key] = False
        for tid in self.unread_messages[user]:
            self.unread_messages[user][tid] = 0

    def inbox(self, user: str) -> set[tuple[str, str, str, bool, int]]:
        return {(tid, kind, self.threads[tid].status, unread,
                 self.unread_messages[user][tid])
                for (tid, kind), unread in self.items[user].items()}


# --- the machine -----------------------------------------------------------------------------


class Teammates(RuleBasedStateMachine):
    """Set up by the test: ``template`` (a relay with the three joined) and ``base``."""

    template: ClassVar[Path]
    base: ClassVar[Path]
    runs: ClassVar[itertools.count[int]] = itertools.count()
    counts: ClassVar[dict[str, int]] = {}

    threads = Bundle("threads")

    def __init__(self) -> None:
        super().__init__()
        run = next(Teammates.runs)
        root = self.base / f"run{run}"
        relay = root / "relay.git"
        shutil.copytree(self.template, relay, symlinks=True)
        self.clients: dict[str, RelayClient] = {}
        for handle in PEOPLE:
            os.environ["GITRELAY_HOME"] = str(root / handle.split("@")[0])
            client = RelayClient(str(relay), handle, writes="wait", fresh_seconds=0)
            client.refresh(max_age=0)
            self.clients[handle] = client
        self.model = Model()
        self.said = itertools.count(1)
        Teammates.counts["examples"] = Teammates.counts.get("examples", 0) + 1

    def _do(self, expected: str | None, write: Callable[[], Any]) -> Any:
        Teammates.counts["steps"] = Teammates.counts.get("steps", 0) + 1
        try:
            result = write()
        except RelayError as exc:
            assert expected == exc.name, f"expected {expected or 'success'}, got {exc}"
            Teammates.counts["refused"] = Teammates.counts.get("refused", 0) + 1
            return None
        assert expected is None, f"expected {expected}, the operation was accepted"
        assert result.delivery == "delivered", "a waited write stayed queued"
        return result

    # --- operations ---------------------------------------------------------------------

    @rule(target=threads, sender=st.sampled_from(PEOPLE), to=st.sampled_from([1, 2, 1, 2, 0]),
          intent=st.sampled_from(INTENTS))
    def handoff(self, sender: str, to: int, intent: str) -> str:
        """To one of the two others, or (offset 0) to a handle nobody registered."""
        recipient = PEOPLE[(PEOPLE.index(sender) + to) % len(PEOPLE)] if to else STRANGER
        return self._handoff(sender, recipient, intent)

    def _handoff(self, sender: str, to: str, intent: str) -> str:
        client = self.clients[sender]
        key = f"k{next(self.said)}"
        kind = intent.split("+")[0]
        action = None
        if kind == "propose_action":
            action = {"description": "Paginate /users", "target_files": ["src/users.ts"],
                      "rationale": "The list grew."}
            if intent.endswith("+diff"):
                action["suggested_diff"] = "--- a/src/users.ts\n+++ b/src/users.ts\n"
        result = self._do(None if to in PEOPLE else "recipient_not_found", lambda: client.handoff(
            to=to, intent=kind, summary=f"{sender} asks {to} ({intent})",
            question="Cursor or offset?" if kind == "ask_question" else None,
            proposed_action=action, idempotency_key=key))
        if result is None:
            return NO_SUCH
        tid = str(result.thread_id)
        assert self.model.handoff(sender, to, intent, tid) is None
        return tid

    def actor(self, thread: str, role: str) -> str:
        """The sender, the recipient or the third teammate of ``thread``."""
        t = self.model.threads.get(thread)
        if t is None:
            return PEOPLE[0]
        if role == "outsider":
            return next(p for p in PEOPLE if not t.participant(p))
        return t.sender if role == "sender" else t.recipient

    @rule(thread=threads, role=st.sampled_from(["sender", "recipient", "outsider"]))
    def message(self, thread: str, role: str) -> None:
        actor = self.actor(thread, role)
        body = f"{actor.split('@')[0]} says #{next(self.said)}"
        expected = self.model.message(actor, thread, body)
        self._do(expected, lambda: self.clients[actor].send_message(thread, body))

    @rule(thread=threads, role=st.sampled_from(["recipient", "recipient", "sender", "outsider"]))
    def draft(self, thread: str, role: str) -> None:
        actor = self.actor(thread, role)
        note = f"{actor.split('@')[0]} drafts #{next(self.said)}"
        expected = self.model.message(actor, thread, note, draft=True)
        self._do(expected, lambda: self.clients[actor].draft_proposed_action(
            thread, "--- a/src/users.ts\n+++ b/src/users.ts\n@@ -1 +1 @@\n-a\n+b\n", note))

    @rule(thread=threads, role=st.sampled_from(["recipient", "recipient", "sender", "outsider"]))
    def accept(self, thread: str, role: str) -> None:
        actor = self.actor(thread, role)
        expected = self.model.transition(actor, thread, "accept")
        self._do(expected, lambda: self.clients[actor].accept(thread, session_id="model"))

    @rule(thread=threads, role=st.sampled_from(["recipient", "recipient", "sender", "outsider"]))
    def complete(self, thread: str, role: str) -> None:
        actor = self.actor(thread, role)
        expected = self.model.transition(actor, thread, "complete")
        self._do(expected, lambda: self.clients[actor].complete(thread, result_summary="Done."))

    @rule(thread=threads, role=st.sampled_from(["sender", "sender", "recipient", "outsider"]),
          reason=st.booleans())
    def cancel(self, thread: str, role: str, reason: bool) -> None:
        actor = self.actor(thread, role)
        expected = self.model.transition(actor, thread, "cancel")
        self._do(expected, lambda: self.clients[actor].cancel(
            thread, reason="Design moved" if reason else None))

    @rule(thread=threads, who=st.sampled_from(PEOPLE))
    def archive(self, thread: str, who: str) -> None:
        expected = self.model.archive(thread)
        if self._do(expected, lambda: self.clients[who].archive([thread])) is not None:
            Teammates.counts["archived"] = Teammates.counts.get("archived", 0) + 1

    def _has_unread(self) -> bool:
        return any(any(items.values()) for items in self.model.items.values())

    @precondition(_has_unread)
    @rule(who=st.sampled_from(PEOPLE))
    def ack_everything(self, who: str) -> None:
        client = self.clients[who]
        Teammates.counts["acks"] = Teammates.counts.get("acks", 0) + 1
        seen = check_inbox(client, status=STATUSES, limit=200)
        page = check_inbox(client, status=STATUSES, limit=200, ack_up_to=seen.cursor)
        assert page.delivery == "delivered"
        self.model.ack_all(who)

    # --- what everyone reads --------------------------------------------------------------

    @invariant()
    def everyone_reads_what_the_model_says(self) -> None:
        Teammates.counts["checks"] = Teammates.counts.get("checks", 0) + 1
        for who, client in self.clients.items():
            client.refresh(max_age=0)
            for tid, want in self.model.threads.items():
                got = client.thread(tid)
                assert got.status == want.status, (who, tid)
                assert [(m["from"], m["body"], m["type"]) for m in got.messages] == \
                    want.messages, (who, tid)
                assert [m["sequence_no"] for m in got.messages] == \
                    list(range(1, len(want.messages) + 1)), (who, tid)
                assert not got.undelivered and not got.refused, (who, tid)
            page = check_inbox(client, status=STATUSES, limit=200)
            assert page.next_cursor is None
            items = {(i.thread_id, i.kind, i.status, i.unread, i.unread_messages)
                     for i in page.items}
            assert len(items) == len(page.items), f"{who}: an item listed twice"
            assert items == self.model.inbox(who), (
                f"{who}'s inbox\n  only on the relay: {sorted(items - self.model.inbox(who))}"
                f"\n  only in the model: {sorted(self.model.inbox(who) - items)}")
            assert client.mirror.outbox() == []


# --- the test ----------------------------------------------------------------------------------


@pytest.fixture
def template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A relay with the three teammates registered, copied for every example."""
    relay = joining.init_relay(tmp_path / "template.git", name="acme")
    for handle, (name, role) in NAMES.items():
        monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "joining" / handle.split("@")[0]))
        joining.join(str(relay), handle, name=name, role=role, save=False)
    return relay


def test_three_teammates_at_random_agree_with_the_model(
        template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        record_property: Callable[[str, object], None]) -> None:
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "unused"))  # the machine sets its own
    Teammates.template = template
    Teammates.base = tmp_path / "runs"
    Teammates.counts = {}
    run_state_machine_as_test(Teammates, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    counts = Teammates.counts
    assert counts.get("examples", 0) >= EXAMPLES // 2
    assert counts.get("refused", 0) > 0 and counts.get("steps", 0) > counts.get("refused", 0)
    record_property("reliability", {"suite": "stateful", **counts})
