"""The relay's documents and commit messages as the tests write them: the teammates,
each kind of document with plausible fields, and the message and trailers of a commit.

``*_doc`` builds a document with fixed values (the same bytes every run: what the gate
tests push); ``*_op`` builds the same document as a client would write it now (a new
key, the time of the run), validated, as an :class:`~gitrelay.core.ops.Op` for
:func:`tests.kit.forging.forge`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.ids import new_key, thread_id_for
from gitrelay.core.ops import Op, now_iso

__all__ = ["ALICE", "BOB", "CAROL", "DAVE", "MAIN", "STAMP", "TEAM", "WHEN", "commit_message",
           "handoff_doc", "handoff_op", "inbox_doc", "message_doc", "message_op",
           "profile_doc", "profile_op", "profile_update_doc", "transition_doc", "transition_op",
           "with_trailers"]

ALICE, BOB, CAROL, DAVE = "alice@acme", "bob@acme", "carol@acme", "dave@acme"
TEAM = {ALICE: ("Alice Martin", "backend", "alice"), BOB: ("Bob Chen", "frontend", "bob"),
        CAROL: ("Carol Diaz", "platform", "carol")}
"""The teammates of the standard relays: handle -> (name, role, username)."""
MAIN = layout.MAIN_REF
STAMP = "2026-05-01T09:14:32Z"
WHEN = 1_777_000_000



def profile_doc(handle: str, **fields: Any) -> dict[str, Any]:
    name, role, username = TEAM.get(handle, (handle.split("@")[0].title(), "engineer",
                                             handle.split("@")[0]))
    doc = {"format_version": 1, "kind": "profile", "handle": handle, "name": name,
           "role": role, "usernames": [username], "registered_at": STAMP}
    doc.update(fields)
    return doc


def profile_update_doc(handle: str, **fields: Any) -> dict[str, Any]:
    """A correction of ``handle``'s profile: a new role, the rest as registered."""
    registered = profile_doc(handle)
    doc = {"format_version": 1, "kind": "profile_update", "handle": handle,
           "name": registered["name"], "role": "staff engineer",
           "usernames": registered["usernames"], "updated_at": STAMP}
    doc.update(fields)
    return doc


def handoff_doc(sender: str, recipient: str, key: str, intent: str = "inform",
                **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format_version": 1, "kind": "handoff", "thread_id": thread_id_for(sender, key),
        "sender": sender, "recipient": recipient, "intent": intent,
        "summary": f"Work handed over under key {key}", "artifacts": [], "metadata": {},
        "idempotency_key": key, "created_at": STAMP}
    if intent == "ask_question":
        doc["question"] = "Does the new endpoint need cursor pagination?"
    if intent == "propose_action":
        doc["proposed_action"] = {"description": "Rename the users table",
                                  "target_files": ["db/schema.sql"],
                                  "rationale": "Matches the service name"}
    doc.update(fields)
    return doc


_counter = iter(range(1, 1 << 62))


def message_doc(thread_id: str, seq: int, sender: str, **fields: Any) -> dict[str, Any]:
    n = next(_counter)
    doc = {"format_version": 1, "kind": "message", "thread_id": thread_id,
           "id": str(uuid.UUID(int=n)), "sequence_no": seq, "from": sender, "type": "message",
           "body": f"Message {n} on the thread", "idempotency_key": f"msg-key-{n}",
           "created_at": STAMP}
    doc.update(fields)
    return doc


def transition_doc(kind: str, thread_id: str, by: str, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"format_version": 1, "kind": kind, "thread_id": thread_id, "by": by,
                           "at": STAMP}
    if kind == "accept":
        doc["accepted_by_session"] = "session-1"
    if kind == "complete":
        doc["result_summary"] = "Done: the change is merged"
        doc["artifacts"] = []
    doc.update(fields)
    return doc


def commit_message(op: str, actor: str, seq: int, thread_id: str | None = None,
                   subject: str | None = None) -> str:
    lines = [subject or f"{op} by {actor}", "", f"{layout.TRAILER_OP}: {op}"]
    if thread_id:
        lines.append(f"{layout.TRAILER_THREAD}: {thread_id}")
    lines += [f"{layout.TRAILER_ACTOR}: {actor}", f"{layout.TRAILER_SEQ}: {seq}"]
    return "\n".join(lines) + "\n"


def with_trailers(message: str, changes: Mapping[str, str | None]) -> str:
    """``message`` with trailers replaced (a value), added, or removed (None)."""
    head, _, trailers = message.rstrip("\n").rpartition("\n\n")
    pairs = [line.split(": ", 1) for line in trailers.splitlines()]
    out = {k: v for k, v in pairs}
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return head + "\n\n" + "\n".join(f"{k}: {v}" for k, v in out.items()) + "\n"



def inbox_doc(handle: str, acked_up_to: int = 0, **fields: Any) -> dict[str, Any]:
    doc = {"format_version": 1, "kind": "inbox", "handle": handle, "acked_up_to": acked_up_to,
           "acked": [], "claims": [], "updated_at": STAMP}
    doc.update(fields)
    return doc


# --- documents as a client writes them now ---------------------------------------------------


def handoff_op(sender: str, recipient: str, summary: str, *, intent: str = "inform") -> Op:
    key = new_key()
    doc = handoff_doc(sender, recipient, key, intent, summary=summary,
                      metadata={"client_idempotency_key": key}, created_at=now_iso())
    return Op("handoff", schema.validate("handoff", doc), str(doc["thread_id"]))


def message_op(thread_id: str, sender: str, body: str) -> Op:
    doc = message_doc(thread_id, 1, sender, id=str(uuid.uuid4()), body=body,
                      idempotency_key=new_key(), created_at=now_iso())
    return Op("message", schema.validate("message", doc), thread_id)


def transition_op(kind: str, thread_id: str, by: str, **fields: Any) -> Op:
    doc = transition_doc(kind, thread_id, by, **fields, at=now_iso())
    return Op(kind, schema.validate(kind, doc), thread_id)


def profile_op(handle: str, *, usernames: list[str] | None = None,
               keys: list[str] | None = None, name: str = "Dana Kim") -> Op:
    doc = profile_doc(handle, name=name, role="engineer", usernames=usernames or [],
                      registered_at=now_iso())
    if keys:
        doc["signing_keys"] = keys
    return Op("profile", schema.validate("profile", doc), handle=handle)
