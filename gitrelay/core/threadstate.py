"""The thread state machine: a thread's status and which action may follow which.

A thread's status is read off the names of its directory's files (a
transition is a file); :func:`check_handoff`, :func:`check_thread_action` and
:func:`check_transition` are the rules of opening a thread and acting on one.

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout
from gitrelay.core.errors import NextStep, RelayError
from gitrelay.core.errors import error_for_rule as refuse
from gitrelay.core.ids import same_handle, thread_id_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

    class Registry(Protocol):
        """The registered teammates a rule reads: a relay view answers it
        (:class:`~gitrelay.core.view.RelayView`, which reads threads with this module)."""

        def profile(self, handle: str) -> dict[str, Any] | None: ...

PENDING, ACCEPTED, COMPLETED, CANCELLED = "pending", "accepted", "completed", "cancelled"
TERMINAL = (COMPLETED, CANCELLED)
STATUSES = (PENDING, ACCEPTED, COMPLETED, CANCELLED)


class ThreadState:
    """A thread as the rules read it: its handoff and the names of its directory's
    files, from which its status and the number of its last message follow.

    The client's full read of a thread (``relay.results.ThreadView``) is this
    state with the thread's documents added.
    """

    def __init__(self, thread_id: str, handoff: dict[str, Any], names: frozenset[str]) -> None:
        self.thread_id = thread_id
        self.handoff = handoff
        self.names = names

    @property
    def sender(self) -> str:
        return str(self.handoff["sender"])

    @property
    def recipient(self) -> str:
        return str(self.handoff["recipient"])

    @property
    def status(self) -> str:
        return status_from_names(self.names)

    @property
    def last_seq(self) -> int:
        return last_sequence(self.names)


def status_from_names(names: set[str] | frozenset[str]) -> str:
    if layout.TRANSITION_FILES["cancel"] in names:
        return CANCELLED
    if layout.TRANSITION_FILES["complete"] in names:
        return COMPLETED
    if layout.TRANSITION_FILES["accept"] in names:
        return ACCEPTED
    return PENDING


def last_sequence(names: set[str] | frozenset[str]) -> int:
    last = 0
    for name in names:
        if name.startswith("msg-"):
            last = max(last, int(name[4:4 + layout.MESSAGE_DIGITS]))
    return last



def check_handoff(view: Registry, doc: Mapping[str, Any], *, commit_label: str = "handoff",
                  commit: str = "") -> None:
    """Rules of a new handoff that do not depend on the thread existing."""
    for role in ("sender", "recipient"):
        if view.profile(str(doc[role])) is None:
            raise refuse("recipient_not_found", f"{commit_label}: {role} {doc[role]} is not a "
                         "registered teammate", commit=commit, field=role)
    intent = doc["intent"]
    if intent == "propose_action" and "proposed_action" not in doc:
        raise refuse("invalid_intent_payload", f"{commit_label}: intent propose_action needs "
                     "a proposed_action", commit=commit, field="proposed_action")
    if intent != "propose_action" and "proposed_action" in doc:
        raise refuse("invalid_intent_payload", f"{commit_label}: proposed_action is only "
                     f"allowed with intent propose_action, not {intent}", commit=commit,
                     field="proposed_action")
    if intent != "ask_question" and "question" in doc:
        raise refuse("invalid_intent_payload", f"{commit_label}: question is only allowed "
                     f"with intent ask_question, not {intent}", commit=commit, field="question")
    expected = thread_id_for(str(doc["sender"]), str(doc["idempotency_key"]))
    if doc["thread_id"] != expected:
        raise refuse("thread-id", f"{commit_label}: thread_id {doc['thread_id']} is not the id "
                     f"derived from its sender and idempotency key ({expected})",
                     commit=commit, field="thread_id")


def check_thread_action(state: ThreadState, kind: str, actor: str, doc: Mapping[str, Any],
                        limits: Mapping[str, int], *, commit_label: str, commit: str = "",
                        sequence_no: int | None = None) -> None:
    """Rules of a message, draft or transition on an existing thread."""
    tid = state.thread_id
    is_sender = same_handle(actor, state.sender)
    is_recipient = same_handle(actor, state.recipient)
    if kind == "message":
        if not (is_sender or is_recipient):
            raise refuse("not_a_participant", f"{commit_label}: {actor} is neither the sender "
                         f"nor the recipient of thread {tid}", commit=commit, field="from")
        if state.status in TERMINAL:
            raise refuse("thread_terminal", f"{commit_label}: thread {tid} is {state.status}; "
                         "no more messages can be added", commit=commit, field="thread_id")
        expected = state.last_seq + 1
        if doc["sequence_no"] != expected or (sequence_no is not None
                                               and sequence_no != expected):
            raise refuse("sequence", f"{commit_label}: message sequence_no "
                         f"{doc['sequence_no']} in thread {tid}, expected {expected}",
                         commit=commit, field="sequence_no")
        if expected > limits["max_messages_per_thread"]:
            raise refuse("size", f"{commit_label}: thread {tid} already has the maximum of "
                         f"{limits['max_messages_per_thread']} messages", commit=commit)
        if doc["type"] == "draft":
            if not is_recipient:
                raise refuse("forbidden", f"{commit_label}: only the recipient drafts a "
                             "proposed action", commit=commit, field="from")
            if state.handoff["intent"] != "propose_action":
                raise refuse("invalid_intent_payload", f"{commit_label}: thread {tid} has "
                             f"intent {state.handoff['intent']}; drafts are for propose_action",
                             commit=commit, field="type", next_step=NextStep.VIEW_THREAD)
            if "suggested_diff" in state.handoff.get("proposed_action", {}):
                raise refuse("invalid_intent_payload", f"{commit_label}: the proposed action "
                             f"of thread {tid} already has a suggested_diff", commit=commit,
                             field="type", next_step=NextStep.VIEW_THREAD)
            if "suggested_diff" not in doc:
                raise refuse("schema", f"{commit_label}: a draft needs a suggested_diff",
                             commit=commit, field="suggested_diff")
        elif "suggested_diff" in doc:
            raise refuse("schema", f"{commit_label}: only a draft carries a suggested_diff",
                         commit=commit, field="suggested_diff")
        return
    check_transition(state, kind, actor, commit_label=commit_label, commit=commit)


def check_transition(state: ThreadState, kind: str, actor: str, *, commit_label: str,
                     commit: str = "") -> None:
    tid = state.thread_id
    allowed_actor = state.sender if kind == "cancel" else state.recipient
    if not same_handle(actor, allowed_actor):
        if not (same_handle(actor, state.sender) or same_handle(actor, state.recipient)):
            raise refuse("not_a_participant", f"{commit_label}: {actor} is neither the sender "
                         f"nor the recipient of thread {tid}", commit=commit, field="by")
        who = "sender" if kind == "cancel" else "recipient"
        raise refuse("not_authorized_transition", f"{commit_label}: only the {who} "
                     f"({allowed_actor}) can {kind} thread {tid}", commit=commit, field="by")
    if state.status in TERMINAL:
        raise refuse("thread_terminal", f"{commit_label}: cannot {kind} thread {tid}: it is "
                     f"{state.status}, and a closed thread takes no more changes",
                     commit=commit, field="thread_id", status=state.status)
    required = {"accept": PENDING, "complete": ACCEPTED, "cancel": PENDING}[kind]
    if state.status != required:
        raise refuse("invalid_transition", f"{commit_label}: cannot {kind} thread {tid}: it is "
                     f"{state.status}, and {kind} needs {required}", commit=commit,
                     field="thread_id", status=state.status)


# What a participant may do to a thread: reply (a message), or one of the transitions.
ACTIONS = ("message", "accept", "complete", "cancel")


def actions_open_to(state: ThreadState, actor: str) -> frozenset[str]:
    """Which of :data:`ACTIONS` ``actor`` may take on the thread now, by the rules the gate
    applies (:func:`check_transition`; a message: a participant, the thread open). The
    front ends offer these and no others; whether the trust file lets an accept through
    is the caller's to add (``relay.policy``)."""
    allowed = set()
    if (same_handle(actor, state.sender) or same_handle(actor, state.recipient)) \
            and state.status not in TERMINAL:
        allowed.add("message")
    for kind in ("accept", "complete", "cancel"):
        try:
            check_transition(state, kind, actor, commit_label=kind)
        except RelayError:
            continue
        allowed.add(kind)
    return frozenset(allowed)
