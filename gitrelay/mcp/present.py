"""What the MCP tools return: relay documents turned into output models and text.

This module is the one place that decides which fields a teammate wrote.
Every such value goes through a :class:`Pen`, which

- leaves text the caller wrote as it is;
- replaces text by a blocked sender (per the caller's trust file) with a
  notice, so no tool ever returns it: which fields, and what stands in their
  place, :class:`~gitrelay.trust.withholding.Withholding` decides for every
  front end (:func:`withheld_notice` is this server's wording of the notice);
- records everything else for the answer's fence
  (:class:`provenance.AnswerFence`) and marks the object holding it with a
  structured :class:`provenance.ProvenanceMarker`.

An answer has two forms. The text content, which the agent reads (and, by
default, all the server sends), is compact: gitrelay's own fields as
``key=value`` lines (:func:`head_lines`), then ONE fence holding every teammate
value, one ``FIELD JSON`` line each, under the ``by`` line of its author. The
structured form (sent by ``gitrelay mcp --structured``) holds every value as it
was written (a teammate's free-form object as its JSON text), each object with
teammate text marked. docs/tools.md describes both.

Each answer is built by one function with one fresh fence, whose random
token occurs in none of the texts (checked on every answer); should one
contain it, the answer is built again with a fence chosen to avoid them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel

from gitrelay.core.ids import handle_key, same_handle
from gitrelay.core.vocab import OWN_WORDS_KINDS
from gitrelay.inbox.inbox import ClaimResult, InboxPage
from gitrelay.inbox.searchindex import SearchPage
from gitrelay.mcp.provenance import (
    RELAY_AUTHOR,
    AnswerFence,
    FenceCollision,
    ProvenanceMarker,
    json_line,
)
from gitrelay.mcp.tool_models import (
    AcceptOut,
    AckResultOut,
    ApiContractOut,
    ArtifactOut,
    Cancellation,
    ClaimOut,
    Completion,
    FileDiffOut,
    FileRefOut,
    InboxItemOut,
    InboxOut,
    InboxSender,
    LinkOut,
    MessageOut,
    PendingOperation,
    Person,
    ProposedActionOut,
    RefusedOperation,
    SearchHitOut,
    SearchOut,
    TeammateOut,
    TeammatesOut,
    TestCommandOut,
    ThreadOut,
)
from gitrelay.relay.results import ThreadView
from gitrelay.store.mirror import Refused
from gitrelay.trust.fencetext import (
    INBOX_PREVIEW_CHARS,
    INBOX_ROW_FIELDS,
    TEXT_PREVIEW_CHARS,
    inbox_row,
    withheld_note,
)
from gitrelay.trust.fencetext import scalar as _scalar
from gitrelay.trust.trust import TrustDecision, TrustRules, evaluate
from gitrelay.trust.withholding import Withholding

__all__ = [
    "INBOX_PREVIEW_CHARS",
    "MAX_RELAY_TEXT",
    "MESSAGE_PAGE",
    "MESSAGE_TEXT_BUDGET",
    "TEXT_PREVIEW_CHARS",
    "Fenced",
    "Pen",
    "head_lines",
    "inbox_legend",
    "page_messages",
    "present_accept",
    "present_accept_fenced",
    "present_claim",
    "present_inbox",
    "present_inbox_fenced",
    "present_search_fenced",
    "present_teammates",
    "present_teammates_fenced",
    "present_thread",
    "present_thread_fenced",
    "relay_text",
    "withheld_notice",
]

T = TypeVar("T", bound=BaseModel)
Profiles = Mapping[str, Mapping[str, Any]]  # casefolded handle -> profile document

MAX_RELAY_TEXT = 1000
"""Characters kept of a text quoted from the relay (a refusal, a sync warning)."""
MESSAGE_PAGE = 50
"""Messages view_thread shows by default, the newest last."""
MESSAGE_TEXT_BUDGET = 200_000
"""Characters of message text (bodies, diffs, payloads) one view_thread page may hold;
older messages wait for the next page (at least one message is always shown)."""


def relay_text(text: str) -> str:
    """A text quoted from the relay, bounded to :data:`MAX_RELAY_TEXT` characters."""
    if len(text) <= MAX_RELAY_TEXT:
        return text
    return text[:MAX_RELAY_TEXT] + f"... [{len(text) - MAX_RELAY_TEXT} more characters]"


def withheld_notice(handle: str, rules: TrustRules) -> str:
    """What replaces a blocked sender's text."""
    return (f"[withheld by gitrelay: {handle} is blocked in your trust file "
            f"({rules.source}); their text is never shown]")


class Pen:
    """Writes one answer: the caller's own text as it is, a teammate's recorded for the
    fence, a blocked sender's withheld."""

    def __init__(self, caller: str, rules: TrustRules, fence: AnswerFence) -> None:
        self.caller = caller
        self.rules = rules
        self.withholding = Withholding.of(caller, rules)
        self.fence = fence
        # Per author, for this answer: a page names the same few people many times.
        self._blocked: dict[str, bool] = {}
        self._callers: dict[str, bool] = {}
        self.values: dict[str, list[tuple[str, object]]] = {}  # author -> [(field, value)]
        self.fields: set[str] = set()       # the fields in the fence, left out of the head
        self.objects: set[str] = set()      # the caller's own free-form objects
        # The text holds no teammate value although the structured form does (an accept
        # of a thread this session read): no fence in the text then.
        self.fence_optional = False
        self.unread: list[str] = []         # an accept's messages the session has not read
        self.unshown: set[str] = set()      # teammate text only the structured form holds
        self.held_items: dict[int, frozenset[str]] = {}  # an inbox item's withheld words

    def fenced_lines(self) -> int:
        """The lines of the text that hold the fence's token: its two, or none."""
        return 2 if self.values or (self.fence.marked and not self.fence_optional) else 0

    def is_caller(self, author: str) -> bool:
        known = self._callers.get(author)
        if known is None:
            known = self._callers[author] = same_handle(self.caller, author)
        return known

    def _is_blocked(self, author: str) -> bool:
        known = self._blocked.get(author)
        if known is None:
            known = self._blocked[author] = self.withholding.withheld(author)
        return known

    def blocked(self, author: str) -> bool:
        return self._is_blocked(author)

    def record(self, author: str, field: str, value: object) -> None:
        """``value`` goes into the fence as ``field`` under ``author``."""
        self.values.setdefault(author, []).append((field, value))
        self.fields.add(field)

    def text(self, value: str, author: str, field: str) -> str:
        if self.is_caller(author):
            return value
        if self._is_blocked(author):
            return withheld_notice(author, self.rules)
        self.record(author, field, value)
        return value

    def opt_text(self, value: Any, author: str, field: str) -> str | None:
        return None if value is None else self.text(str(value), author, field)

    def obj(self, value: dict[str, Any], author: str, field: str) -> dict[str, Any] | str:
        """A free-form object: itself for the caller, its JSON text for a teammate."""
        if self.is_caller(author):
            self.objects.add(field)
            return value
        if self._is_blocked(author):
            return withheld_notice(author, self.rules)
        if value:
            self.record(author, field, value)
        else:
            self.fields.add(field)  # nothing written: nothing to fence
        return json.dumps(value, sort_keys=True, ensure_ascii=False)

    def relay(self, value: str | None, field: str) -> str | None:
        """A text quoted from the relay: bounded, and in the fence under ``relay``."""
        if value is None:
            return None
        bounded = relay_text(value)
        self.record(RELAY_AUTHOR, field, bounded)
        return bounded

    def marker(self, author: str) -> ProvenanceMarker | None:
        return None if self.is_caller(author) else self.fence.marker(author)


class Fenced(NamedTuple, Generic[T]):
    """An answer: its structured form, the token of its fence, and its text content."""

    response: T
    token: str
    text: str


Build = Callable[[Pen], T]
Head = Callable[[T, Pen], list[str]]


def _render(caller: str, rules: TrustRules, build: Build[T], head: Head[T],
            fence: AnswerFence) -> tuple[Fenced[T], Pen]:
    pen = Pen(caller, rules, fence)
    out = build(pen)
    lines = head(out, pen)
    text = "\n".join(lines) + "\n"
    if pen.fenced_lines():
        text += fence.block(pen.values.items())
    return Fenced(out, fence.token, text), pen


def _values_of(pen: Pen) -> list[object]:
    return [v for values in pen.values.values() for _, v in values]


def render_fenced(caller: str, rules: TrustRules, build: Build[T], head: Head[T]) -> Fenced[T]:
    """The answer ``build`` makes, with ``head`` its text before the fence.

    The token is drawn before anything is written, so a text can hold it only by
    chance (2^-64); every answer is checked anyway, and one whose text or values
    hold the token is built again with a fence drawn to avoid them all.
    """
    fence = AnswerFence()
    try:
        fenced, pen = _render(caller, rules, build, head, fence)
        token = fence.token
        held = fenced.text.count(token) != pen.fenced_lines() or any(
            token in json_line(v) for v in _values_of(pen))
        if not held:
            return fenced
        values = [fenced.text, *_values_of(pen)]
    except FenceCollision:
        probe, pen = _render(caller, rules, build, head, AnswerFence())
        values = [probe.text, *_values_of(pen)]
    return _render(caller, rules, build, head, AnswerFence(values))[0]


# --- the text before the fence ----------------------------------------------------------

def head_lines(name: str, value: Mapping[str, Any], *, skip: AbstractSet[str],
               objects: AbstractSet[str] = frozenset()) -> list[str]:
    """``value`` as ``key=value`` lines: its own scalars on the first line after ``name``,
    each object under it (or in a list under it) on a line of its own,
    ``path: key=value ...``. Fields in ``skip`` (they are in the fence),
    ``provenance`` markers, nulls and empty lists are left out; texts that are not one
    plain word are JSON (:func:`json_line`), free-form objects (``objects``) too."""
    lines: list[str] = []

    def pairs(node: Mapping[str, Any], path: str, prefix: str, out: list[str],
              later: list[tuple[str, Mapping[str, Any]]]) -> None:
        for key, sub in node.items():
            where = f"{path}.{key}" if path else key
            if where in skip or key == "provenance" or sub is None or sub == []:
                continue
            if where in objects:
                out.append(f"{prefix}{key}={json_line(sub)}")
            elif isinstance(sub, Mapping):
                later.append((where, sub))
            elif isinstance(sub, list) and all(isinstance(x, Mapping) for x in sub):
                later.extend((f"{where}[{i}]", x) for i, x in enumerate(sub))
            elif isinstance(sub, list):
                kept = [x for i, x in enumerate(sub) if f"{where}[{i}]" not in skip]
                if kept:
                    out.append(f"{prefix}{key}={json_line(kept)}")
            else:
                out.append(f"{prefix}{key}={_scalar(sub)}")

    def line(label: str, node: Mapping[str, Any], path: str) -> None:
        out: list[str] = []
        later: list[tuple[str, Mapping[str, Any]]] = []
        pairs(node, path, "", out, later)
        if out or not path:     # an object all of whose fields are elsewhere: no line
            lines.append(" ".join([label, *out]))
        for sub_path, sub in later:
            line(f"{sub_path}:", sub, sub_path)

    line(name, value, "")
    return lines


def _model_head(name: str, quiet: frozenset[str] = frozenset()) -> Head[Any]:
    def head(out: BaseModel, pen: Pen) -> list[str]:
        value = out.model_dump(mode="json", by_alias=True)
        return head_lines(name, value, skip=pen.fields | pen.unshown | _quiet(value, pen)
                          | quiet, objects=pen.objects)
    return head


_TIMES = ("created_at", "accepted_at", "completed_at", "cancelled_at")


def _quiet(value: Mapping[str, Any], pen: Pen) -> set[str]:
    """What a thread's text leaves out as saying nothing new to its reader: the caller's
    own profile, the session id the caller's own accept stored, an ``updated_at`` equal
    to another time of the thread, a ``messages_total`` that counts the page's own
    messages, a teammate row's ``you`` (its ``trust`` says ``you``), the messages' ids (no tool
    takes one), and a completion's time and author when they are the thread's
    ``completed_at`` and recipient (the structured form keeps them all)."""
    if "teammates" in value:     # each row's trust says "you" where you is true
        return {f"teammates[{i}].you" for i in range(len(value["teammates"]))}
    if "thread_id" not in value:
        return set()
    quiet = set()
    for person in ("sender", "recipient"):
        if pen.is_caller(str(value[person]["handle"])):
            quiet |= {f"{person}.name", f"{person}.role", f"{person}.email"}
    if value.get("accepted_by_session") is not None \
            and pen.is_caller(str(value["recipient"]["handle"])):
        quiet.add("accepted_by_session")
    if value.get("updated_at") in [value.get(t) for t in _TIMES] \
            and not any(m["created_at"] == value["updated_at"] for m in value["messages"]):
        quiet.add("updated_at")
    if value.get("messages_total") == len(value.get("messages") or []):
        quiet.add("messages_total")     # every message is on the page: its lines count them
    # A message's id is no tool's argument: its number says which it is.
    quiet.update(f"messages[{i}].id" for i in range(len(value.get("messages") or [])))
    # The completion's time and author are the thread's completed_at and its recipient.
    completion = value.get("completion") or {}
    if completion.get("completed_at") == value.get("completed_at"):
        quiet.add("completion.completed_at")
    if completion and same_handle(str(completion.get("by")), str(value["recipient"]["handle"])):
        quiet.add("completion.by")
    return quiet


# --- pieces -------------------------------------------------------------------------------


def _person(pen: Pen, handle: str, profiles: Profiles, field: str) -> Person:
    profile = profiles.get(handle_key(handle))
    if profile is None:
        return Person(handle=handle, name=handle, role="")
    if pen.blocked(handle):  # a withheld profile: the notice stands for its name and role
        notice = withheld_notice(handle, pen.rules)
        return Person(handle=handle, name=notice, role=notice)
    email = profile.get("email")
    return Person(
        handle=handle,
        name=pen.text(str(profile["name"]), handle, f"{field}.name"),
        role=pen.text(str(profile["role"]), handle, f"{field}.role"),
        email=pen.opt_text(email, handle, f"{field}.email"),
    )


def _artifact(pen: Pen, art: Mapping[str, Any], author: str, field: str) -> ArtifactOut:
    kind = art["type"]
    if kind == "file_diff":
        return FileDiffOut(type="file_diff", path=pen.text(art["path"], author, f"{field}.path"),
                           diff=pen.text(art["diff"], author, f"{field}.diff"))
    if kind == "file_ref":
        lines = art.get("lines")
        return FileRefOut(type="file_ref", path=pen.text(art["path"], author, f"{field}.path"),
                          git_sha=art.get("git_sha"),
                          lines=list(lines) if lines is not None else None)
    if kind == "test_command":
        return TestCommandOut(type="test_command",
                              command=pen.text(art["command"], author, f"{field}.command"),
                              cwd=pen.opt_text(art.get("cwd"), author, f"{field}.cwd"))
    if kind == "api_contract":
        inline = art.get("inline")
        return ApiContractOut(
            type="api_contract",
            schema_url=pen.opt_text(art.get("schema_url"), author, f"{field}.schema_url"),
            inline=None if inline is None else pen.obj(inline, author, f"{field}.inline"))
    if kind == "link":
        return LinkOut(type="link", url=pen.text(art["url"], author, f"{field}.url"),
                       title=pen.opt_text(art.get("title"), author, f"{field}.title"))
    raise ValueError(f"unknown artifact type {kind!r}")  # the schema admits only five


def _artifacts(pen: Pen, arts: Iterable[Mapping[str, Any]], author: str,
               field: str) -> list[ArtifactOut]:
    return [_artifact(pen, a, author, f"{field}[{i}]") for i, a in enumerate(arts)]


def _message(pen: Pen, msg: Mapping[str, Any], index: int) -> MessageOut:
    author = str(msg["from"])
    field = f"messages[{index}]"
    payload = msg.get("payload")
    return MessageOut(
        id=str(msg["id"]), sequence_no=int(msg["sequence_no"]), from_=author,
        type=msg["type"], body=pen.text(str(msg["body"]), author, f"{field}.body"),
        payload=None if payload is None else pen.obj(payload, author, f"{field}.payload"),
        suggested_diff=pen.opt_text(msg.get("suggested_diff"), author,
                                    f"{field}.suggested_diff"),
        created_at=str(msg["created_at"]),
    )


def _proposed_action(pen: Pen, action: Mapping[str, Any], author: str) -> ProposedActionOut:
    return ProposedActionOut(
        description=pen.text(action["description"], author, "proposed_action.description"),
        target_files=[pen.text(p, author, f"proposed_action.target_files[{i}]")
                      for i, p in enumerate(action["target_files"])],
        rationale=pen.text(action["rationale"], author, "proposed_action.rationale"),
        suggested_diff=pen.opt_text(action.get("suggested_diff"), author,
                                    "proposed_action.suggested_diff"),
    )


def _undelivered(keys: Iterable[str]) -> list[PendingOperation]:
    out = []
    for key in keys:
        kind, _, rest = key.partition(":")
        out.append(PendingOperation(operation=kind,
                                    message_id=rest if kind == "message" else None))
    return out


def _refused(pen: Pen, records: Iterable[Refused]) -> list[RefusedOperation]:
    out = []
    for i, r in enumerate(records):
        message_id = r.doc.get("id") if r.kind == "message" else None
        # The gate's reason may quote what the relay holds: fenced, as relay text.
        reason = pen.relay(r.message, f"refused[{i}].reason") or ""
        out.append(RefusedOperation(
            operation=str(r.doc.get("type", r.kind)) if r.kind == "message" else r.kind,
            message_id=str(message_id) if message_id is not None else None,
            code=r.code, name=r.name, rule=r.rule, reason=reason, refused_at=r.at))
    return out


def _message_size(msg: Mapping[str, Any]) -> int:
    size = len(str(msg.get("body", ""))) + len(str(msg.get("suggested_diff") or ""))
    payload = msg.get("payload")
    return size + (len(json.dumps(payload)) if payload is not None else 0)


def page_messages(messages: Sequence[Mapping[str, Any]], *, limit: int = MESSAGE_PAGE,
                  before: int | None = None, budget: int = MESSAGE_TEXT_BUDGET
                  ) -> tuple[list[Mapping[str, Any]], int | None]:
    """One page of a thread's messages, oldest first, and the ``before`` of the page
    before it (None when there is none).

    The page ends with the newest message (or the newest before sequence number
    ``before``) and holds at most ``limit`` messages and ``budget`` characters of their
    text; the newest of them is shown whatever its size.
    """
    candidates = [m for m in messages
                  if before is None or int(m["sequence_no"]) < before]
    shown: list[Mapping[str, Any]] = []
    used = 0
    for msg in reversed(candidates):
        size = _message_size(msg)
        if shown and (len(shown) >= limit or used + size > budget):
            break
        shown.append(msg)
        used += size
    shown.reverse()
    older = len(candidates) > len(shown)
    return shown, int(shown[0]["sequence_no"]) if older and shown else None


def _session_of(pen: Pen, accept: Mapping[str, Any], recipient: str) -> str:
    """The session id the recipient's accept stored: fenced for its recipient, and for
    anyone else kept out of the text (withheld like any text of a blocked teammate)."""
    value, by = str(accept["accepted_by_session"]), str(accept["by"])
    if pen.is_caller(recipient) or pen.is_caller(by):
        return pen.text(value, by, "accepted_by_session")
    if pen.blocked(by):
        return withheld_notice(by, pen.rules)
    pen.unshown.add("accepted_by_session")
    return value


_PLANTED = "client_idempotency_key"


def _own_metadata(handoff: Mapping[str, Any]) -> dict[str, Any]:
    """A handoff's metadata as its sender gave it: without the copies a client plants
    there (docs/format.md: ``client_idempotency_key``, the ``idempotency_key``, and
    ``question``, the handoff's own field), so that each value is shown once."""
    meta = dict(handoff.get("metadata") or {})
    if meta.get(_PLANTED) == handoff.get("idempotency_key"):
        meta.pop(_PLANTED, None)
    if "question" in meta and meta["question"] == handoff.get("question"):
        meta.pop("question")
    return meta


def _thread_fields(pen: Pen, view: ThreadView, profiles: Profiles, sync_warning: str | None,
                   limit: int, before: int | None) -> dict[str, Any]:
    # A blocked author's words, as every front end withholds them; the notice is this
    # server's (and the Pen words any text of theirs left the same way).
    held = pen.withholding.thread(view, lambda who: withheld_notice(who, pen.rules))
    handoff = held.handoff
    author = view.sender
    other = view.recipient if pen.is_caller(author) else author
    complete, cancel, accept = held.complete, held.cancel, held.accept
    completion = None
    if complete is not None:
        by = str(complete["by"])
        completion = Completion(
            by=by, result_summary=pen.text(complete["result_summary"], by,
                                           "completion.result_summary"),
            artifacts=_artifacts(pen, complete.get("artifacts", []), by, "completion.artifacts"),
            completed_at=str(complete["at"]))
    cancellation = None
    if cancel is not None:
        by = str(cancel["by"])
        cancellation = Cancellation(
            by=by, reason=pen.opt_text(cancel.get("reason"), by, "cancellation.reason"),
            cancelled_at=str(cancel["at"]))
    action = handoff.get("proposed_action")
    shown, older = page_messages(held.messages, limit=limit, before=before)
    return {
        "thread_id": view.thread_id,
        "status": view.status,
        "intent": handoff["intent"],
        "sender": _person(pen, view.sender, profiles, "sender"),
        "recipient": _person(pen, view.recipient, profiles, "recipient"),
        "summary": pen.text(handoff["summary"], author, "summary"),
        "question": pen.opt_text(handoff.get("question"), author, "question"),
        "artifacts": _artifacts(pen, handoff.get("artifacts", []), author, "artifacts"),
        "proposed_action": None if action is None else _proposed_action(pen, action, author),
        "metadata": pen.obj(_own_metadata(handoff), author, "metadata"),
        "messages": [_message(pen, m, i) for i, m in enumerate(shown)],
        "messages_total": len(view.messages),
        "messages_before": older,
        "created_at": str(handoff["created_at"]),
        "updated_at": view.updated_at,
        "accepted_at": str(accept["at"]) if accept else None,
        "completed_at": str(complete["at"]) if complete else None,
        "cancelled_at": str(cancel["at"]) if cancel else None,
        # The recipient chose the session id: text like any other they wrote. Only the
        # structured form gives it to the sender (an audit value, nothing to act on).
        "accepted_by_session": _session_of(pen, accept, view.recipient) if accept else None,
        "completion": completion,
        "cancellation": cancellation,
        "undelivered": _undelivered(view.undelivered),
        "refused": _refused(pen, view.refused),
        "sync_warning": pen.relay(sync_warning, "sync_warning"),
        # Every text of the thread is by one of its two participants: one marker.
        "provenance": pen.marker(other),
    }


# --- answers ----------------------------------------------------------------------------------


def present_thread_fenced(view: ThreadView, *, caller: str, rules: TrustRules,
                          profiles: Profiles, sync_warning: str | None = None,
                          limit: int = MESSAGE_PAGE, before: int | None = None
                          ) -> Fenced[ThreadOut]:
    """view_thread (and the ``gitrelay://threads/{id}`` resource): one page of messages."""
    return render_fenced(
        caller, rules,
        lambda pen: ThreadOut(**_thread_fields(pen, view, profiles, sync_warning, limit,
                                               before)),
        _model_head("thread"))


def present_thread(view: ThreadView, *, caller: str, rules: TrustRules, profiles: Profiles,
                   sync_warning: str | None = None, limit: int = MESSAGE_PAGE,
                   before: int | None = None) -> ThreadOut:
    """:func:`present_thread_fenced`'s structured answer."""
    return present_thread_fenced(view, caller=caller, rules=rules, profiles=profiles,
                                 sync_warning=sync_warning, limit=limit,
                                 before=before).response


def present_accept_fenced(view: ThreadView, *, caller: str, rules: TrustRules,
                          profiles: Profiles, decision: TrustDecision, accepted_at: str,
                          delivery: str, sync_warning: str | None = None,
                          seen: AbstractSet[int] | None = None) -> Fenced[AcceptOut]:
    """accept_handoff: the thread after the accept, with the trust overlay.

    ``seen``: the numbers of the messages this session's model already read of the
    thread (its view_thread), when it read it. The text then says only what changed:
    the accept, the overlay, and the messages it has not read (the structured form
    still holds the whole thread)."""
    if decision.reason not in ("listed", "unknown_allowed"):
        raise ValueError(f"a refused sender ({decision.reason}) is never presented")

    def build(pen: Pen) -> AcceptOut:
        fields = _thread_fields(pen, view, profiles, sync_warning, MESSAGE_PAGE, None)
        fields["accepted_at"] = fields["accepted_at"] or accepted_at
        out = AcceptOut(**fields, trust_overlay=decision.overlay,
                        trust_reason=decision.reason, delivery=delivery)
        if seen is not None:
            _keep_unread(pen, out, seen)
        return out

    return render_fenced(caller, rules, build,
                         _accept_head if seen is None else _accept_since_head)


def _unread_messages(out: AcceptOut, seen: AbstractSet[int]) -> list[int]:
    return [i for i, m in enumerate(out.messages) if m.sequence_no not in seen]


def _keep_unread(pen: Pen, out: AcceptOut, seen: AbstractSet[int]) -> None:
    """Leave in the fence only what the session has not read: the messages past
    ``seen`` and the relay's own notes."""
    new = {f"messages[{i}]" for i in _unread_messages(out, seen)}

    def kept(author: str, field: str) -> bool:
        return author == RELAY_AUTHOR or field.split(".", 1)[0] in new

    pen.values = {a: [(f, v) for f, v in vals if kept(a, f)] for a, vals in pen.values.items()}
    pen.values = {a: vals for a, vals in pen.values.items() if vals}
    pen.fence_optional = True
    pen.unread = sorted(new)


def _accept_since_head(out: AcceptOut, pen: Pen) -> list[str]:
    """An accept's text after the session read the thread: the state change, the
    overlay, and what is new since (messages the session has not read, in the fence)."""
    value = out.model_dump(mode="json", by_alias=True)
    first = {k: value[k] for k in ("thread_id", "accepted_at", "delivery")}
    lines = head_lines("accepted", first, skip=frozenset())
    lines.append(trust_line(value["trust_reason"], value["trust_overlay"]))
    unread = pen.unread
    if not unread:
        lines.append("new since your view_thread: nothing")
        return lines
    lines.append(f"new since your view_thread: {len(unread)} message(s)")
    for path in unread:
        index = int(path[len("messages["):-1])
        message = value["messages"][index]
        lines += head_lines(f"{path}:", message, skip=pen.fields | {
            f.removeprefix(path + ".") for f in pen.fields if f.startswith(path + ".")})
    return lines


def _accept_head(out: AcceptOut, pen: Pen) -> list[str]:
    """An accept's text before the fence: the thread's head and, right under its first
    line, the trust overlay in one line, ``trust_overlay (REASON): key=value ...``.

    Its status is always accepted (the first word says so) and its recipient the caller
    (only the recipient accepts), so neither is repeated."""
    value = out.model_dump(mode="json", by_alias=True)
    quiet = {"status", "trust_reason", "trust_overlay"}
    if pen.is_caller(str(value["recipient"]["handle"])):
        quiet.add("recipient")
    lines = head_lines("accepted", value,
                       skip=pen.fields | pen.unshown | _quiet(value, pen) | quiet,
                       objects=pen.objects)
    lines.insert(1, trust_line(value["trust_reason"], value["trust_overlay"]))
    return lines


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._:@+/-]*")


def _plain_name(value: object) -> bool:
    """A text that reads as itself in a bare list: a word that starts with a letter and
    is none of JSON's own words."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) \
        and value not in ("true", "false", "null")


def trust_line(reason: str, overlay: Mapping[str, Any]) -> str:
    """The trust overlay as the model reads it: every rule, a list of plain names
    without quotes (``[Edit,Write,Bash]``), JSON when any entry is not one plain name.
    The overlay comes from the caller's own trust file, never from a teammate."""
    rules = []
    for key, rule in overlay.items():
        if rule is None or rule == []:
            continue
        if isinstance(rule, list) and all(_plain_name(x) for x in rule):
            rules.append(f"{key}=[{','.join(rule)}]")
        else:
            rules.append(f"{key}={_scalar(rule)}")
    return f"trust_overlay ({reason}): {' '.join(rules)}"


def present_accept(view: ThreadView, *, caller: str, rules: TrustRules, profiles: Profiles,
                   decision: TrustDecision, accepted_at: str, delivery: str,
                   sync_warning: str | None = None) -> AcceptOut:
    """:func:`present_accept_fenced`'s structured answer."""
    return present_accept_fenced(view, caller=caller, rules=rules, profiles=profiles,
                                 decision=decision, accepted_at=accepted_at,
                                 delivery=delivery, sync_warning=sync_warning).response


def present_teammates_fenced(profiles: Iterable[Mapping[str, Any]], *, caller: str,
                             rules: TrustRules, total: int | None = None,
                             next_cursor: str | None = None) -> Fenced[TeammatesOut]:
    """list_teammates: a page of everyone registered, with how the trust file treats
    them (``total``: how many in all; the page's length when not given)."""
    listed = list(profiles)

    def build(pen: Pen) -> TeammatesOut:
        out = []
        for i, p in enumerate(listed):
            handle = str(p["handle"])
            you = pen.is_caller(handle)
            field = f"teammates[{i}]"
            out.append(TeammateOut(
                handle=handle, name=pen.text(str(p["name"]), handle, f"{field}.name"),
                role=pen.text(str(p["role"]), handle, f"{field}.role"),
                email=None if pen.blocked(handle)
                else pen.opt_text(p.get("email"), handle, f"{field}.email"),
                you=you, trust="you" if you else evaluate(rules, handle).reason,
                provenance=pen.marker(handle)))
        return TeammatesOut(you=caller, teammates=out,
                            total=len(listed) if total is None else total,
                            next_cursor=next_cursor)

    return render_fenced(caller, rules, build, _model_head("teammates"))


def present_teammates(profiles: Iterable[Mapping[str, Any]], *, caller: str,
                      rules: TrustRules) -> TeammatesOut:
    """:func:`present_teammates_fenced`'s structured answer."""
    return present_teammates_fenced(profiles, caller=caller, rules=rules).response


def present_inbox(page: InboxPage, *, caller: str, rules: TrustRules,
                  sync_warning: str | None = None) -> InboxOut:
    """check_inbox (and the ``gitrelay://inbox`` resource): :func:`present_inbox_fenced`'s
    structured answer."""
    return present_inbox_fenced(page, caller=caller, rules=rules,
                                sync_warning=sync_warning).response


def inbox_legend(out: InboxOut) -> str:
    """The line above an inbox page's rows: their order (read off the rows: the default
    page is newest first, a page ``after`` a cursor oldest first) and their words."""
    seqs = [item.seq for item in out.items]
    order = ("" if len(seqs) < 2 else
             ", newest first" if seqs[0] > seqs[-1] else ", oldest first")
    return (f"items{order}: {INBOX_ROW_FIELDS}; a teammate's preview is in the fence "
            "as #seq")


def _inbox_head(out: InboxOut, pen: Pen) -> list[str]:
    """The compact text of an inbox page: one row per item (:func:`inbox_legend`); each
    item's preview, name, role and detail are in the fence (``#SEQ`` is the preview, cut
    to :data:`INBOX_PREVIEW_CHARS`), under ``by`` its author."""
    top = [f"check_inbox {len(out.items)} items", f"cursor={out.cursor}",
           f"next_cursor={_scalar(out.next_cursor) if out.next_cursor else 'null'}"]
    if out.index_rebuilt:
        top.append("index_rebuilt=true")
    if out.delivery is not None:
        top.append(f"delivery={out.delivery}")
    if out.acknowledged is not None:
        top.append(f"acknowledged={_scalar(out.acknowledged)}")
    if out.sync_warning is not None:
        top.append("sync_warning=(in the fence: this page may be stale)")
    lines = [" ".join(top)]
    lines += [f"ack_results[{i}]: item_id={a.item_id} seq={a.seq} outcome={a.outcome}"
              + (f" current_seq={a.current_seq}" if a.current_seq is not None else "")
              for i, a in enumerate(out.ack_results)]
    if out.items:
        lines.append(inbox_legend(out))
    blocked: dict[str, str] = {}  # handle -> the notice that replaced their text
    for i, item in enumerate(out.items):
        line = inbox_row(
            seq=item.seq, item_id=item.item_id, thread_id=item.thread_id, kind=item.kind,
            status=item.status, unread=item.unread, unread_messages=item.unread_messages,
            sender=item.sender.handle, updated_at=item.updated_at, claimed_by=item.claimed_by,
            claim_expires_at=item.claim_expires_at,
            preview=None if f"items[{i}].summary_preview" in pen.fields
            else item.summary_preview)
        if item.kind in OWN_WORDS_KINDS and item.detail:
            # gitrelay's words: handles, a worker's name and days only
            line += f" ({item.detail})"
        held = pen.held_items.get(i, frozenset())
        if held:
            line += withheld_note(held)
        if "sender.name" in held:
            blocked.setdefault(item.sender.handle, item.sender.name)
        lines.append(line)
    lines += [f"withheld {handle}: {notice}" for handle, notice in blocked.items()]
    return lines


def present_inbox_fenced(page: InboxPage, *, caller: str, rules: TrustRules,
                         sync_warning: str | None = None) -> Fenced[InboxOut]:
    """check_inbox's answer.

    The item's ``sender`` is the other participant; the summary was written by
    the thread's sender (``item.thread_sender``, from the index), who may be the
    caller. When the thread is unknown the summary is treated as the other
    participant's. In the text, a sender's name and role are said once per
    answer (``name``/``role`` under their ``by`` line) and the preview is cut to
    :data:`INBOX_PREVIEW_CHARS`, in the fence as ``#SEQ``.
    """

    def build(pen: Pen) -> InboxOut:
        items = []
        people: dict[str, tuple[str, str]] = {}
        for i, item in enumerate(page.items):
            other = item.sender.handle
            author = item.thread_sender or other
            field = f"#{item.seq}"
            name, role = item.sender.name, item.sender.role
            held = pen.held_items[i] = pen.withholding.item(other, item.thread_sender)
            if "sender.name" in held:
                name = role = withheld_notice(other, rules)
            elif not pen.is_caller(other):
                said = people.get(other)
                if said is None:
                    people[other] = (name, role)
                    pen.record(other, "name", name)
                    pen.record(other, "role", role)
                elif said != (name, role):  # a later profile of the same person
                    pen.record(other, f"{field}.name", name)
                    pen.record(other, f"{field}.role", role)
            preview = item.summary_preview
            if "summary_preview" in held:
                preview = withheld_notice(author, rules)
            elif not pen.is_caller(author):
                pen.record(author, field, preview[:INBOX_PREVIEW_CHARS])
                pen.fields.add(f"items[{i}].summary_preview")
            detail = item.detail
            # a stall or a claim: gitrelay's words
            if detail is not None and item.kind not in OWN_WORDS_KINDS:
                if item.kind == "refused":
                    detail = pen.relay(detail, f"{field}.detail")
                else:
                    detail = pen.text(detail, other, f"{field}.detail")
            items.append(InboxItemOut(
                thread_id=item.thread_id,
                sender=InboxSender(handle=other, name=name, role=role),
                summary_preview=preview,
                status=item.status, unread_messages=item.unread_messages,
                created_at=item.created_at, updated_at=item.updated_at, kind=item.kind,
                item_id=item.item_id, seq=item.seq, unread=item.unread,
                claimed_by=item.claimed_by, claim_expires_at=item.claim_expires_at,
                detail=detail, provenance=pen.marker(other)))
        return InboxOut(items=items, next_cursor=page.next_cursor, cursor=page.cursor,
                        acknowledged=page.acknowledged,
                        ack_results=[AckResultOut(item_id=a.item_id, seq=a.seq,
                                                  outcome=a.outcome, current_seq=a.current_seq)
                                     for a in page.ack_results],
                        index_rebuilt=page.index_rebuilt, delivery=page.delivery,
                        sync_warning=pen.relay(sync_warning, "sync_warning"))

    return render_fenced(caller, rules, build, _inbox_head)


def present_claim(result: ClaimResult) -> ClaimOut:
    """claim_inbox_item: nothing in a claim is teammate text."""
    return ClaimOut(item_id=result.item_id, seq=result.seq, worker=result.worker,
                    claimed=result.claimed, outcome=result.outcome,
                    expires_at=result.expires_at, held_by=result.held_by,
                    delivery=result.delivery)


SEARCH_LEGEND = "results, best first: [i] thread_id status intent from to updated_at field"


def _search_head(out: SearchOut, pen: Pen) -> list[str]:
    """A search's text: one line per thread (``SEARCH_LEGEND``); a teammate's snippet is
    in the fence as ``[i]`` under its author, the caller's own on the line."""
    top = [f"search_threads {len(out.results)} results",
           f"next_cursor={_scalar(out.next_cursor) if out.next_cursor else 'null'}"]
    if out.index_rebuilt:
        top.append("index_rebuilt=true")
    if out.sync_warning is not None:
        top.append("sync_warning=(in the fence: these results may be stale)")
    lines = [" ".join(top)]
    if out.results:
        lines.append(SEARCH_LEGEND)
    for i, hit in enumerate(out.results):
        where = hit.field or "-"
        if hit.sequence_no is not None:
            where += f"#{hit.sequence_no}"
        line = (f"[{i}] {hit.thread_id} {hit.status} {hit.intent} {hit.sender} "
                f"{hit.recipient} {hit.updated_at} {where}")
        if hit.withheld:
            line += f" (snippet withheld: {_scalar(hit.by)} is blocked in your trust file)"
        elif hit.snippet is not None and f"results[{i}].snippet" not in pen.fields:
            line += f" snippet={json_line(hit.snippet)}"
        lines.append(line)
    return lines


def present_search_fenced(page: SearchPage, *, caller: str, rules: TrustRules,
                          sync_warning: str | None = None) -> Fenced[SearchOut]:
    """search_threads: each thread found, its snippet fenced under its author."""

    def build(pen: Pen) -> SearchOut:
        results = []
        for i, hit in enumerate(page.hits):
            text = hit.snippet
            marker = None
            if text is not None and hit.by is not None and not pen.is_caller(hit.by):
                text = pen.text(text, hit.by, f"[{i}]")
                pen.fields.add(f"results[{i}].snippet")
                marker = pen.marker(hit.by)
            results.append(SearchHitOut(
                thread_id=hit.thread_id, status=hit.status, intent=hit.intent,
                sender=hit.sender, recipient=hit.recipient, created_at=hit.created_at,
                updated_at=hit.updated_at, field=hit.field, sequence_no=hit.sequence_no,
                by=hit.by, snippet=text, withheld=hit.withheld, provenance=marker))
        return SearchOut(results=results, next_cursor=page.next_cursor,
                         index_rebuilt=page.index_rebuilt,
                         sync_warning=pen.relay(sync_warning, "sync_warning"))

    return render_fenced(caller, rules, build, _search_head)
