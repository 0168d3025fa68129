"""What the MCP tools return: relay documents turned into output models.

This module is the one place that decides which fields a teammate wrote.
Every such value goes through a :class:`Pen`, which

- leaves text the caller wrote as it is;
- replaces text by a blocked sender (per the caller's trust file) with a
  notice, so no tool ever returns it;
- wraps everything else in the response's fence (:class:`provenance.Fence`)
  and attaches a structured :class:`provenance.ProvenanceMarker` next to it.

Each response is built by one function with one fresh Fence, whose random
token occurs in none of the texts it wraps (checked on every wrap); should one
contain it, the response is built again: once with a recorder that collects
every teammate-authored value, then with a Fence chosen to avoid them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

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
    TeammateOut,
    TeammatesOut,
    TestCommandOut,
    ThreadOut,
)
from gitrelay.relay.client import ThreadView
from gitrelay.relay.inbox import ClaimResult, InboxPage
from gitrelay.relay.provenance import Fence, FenceCollision, ProvenanceMarker
from gitrelay.relay.trust import TrustDecision, TrustRules, evaluate, normalize_handle
from gitrelay.store.mirror import Refused

__all__ = [
    "Fenced",
    "Pen",
    "present_accept",
    "present_claim",
    "present_inbox",
    "present_inbox_fenced",
    "present_teammates",
    "present_thread",
    "render",
    "render_fenced",
    "withheld_notice",
]

T = TypeVar("T")
Profiles = Mapping[str, Mapping[str, Any]]  # casefolded handle -> profile document
_PLACEHOLDER_TOKEN = "0" * 32


class _Wrapper(Protocol):
    def wrap(self, text: str, *, sender: str, field: str) -> str: ...

    def wrap_json(self, value: object, *, sender: str, field: str) -> str: ...

    def marker(self, sender: str) -> ProvenanceMarker: ...


class _Recorder:
    """Stands in for the Fence on the first pass: remembers what would be wrapped."""

    def __init__(self) -> None:
        self.values: list[object] = []

    def wrap(self, text: str, *, sender: str, field: str) -> str:
        self.values.append(text)
        return text

    def wrap_json(self, value: object, *, sender: str, field: str) -> str:
        self.values.append(value)
        return ""

    def marker(self, sender: str) -> ProvenanceMarker:
        return ProvenanceMarker(sender=sender, fence=_PLACEHOLDER_TOKEN)


def withheld_notice(handle: str, rules: TrustRules) -> str:
    """What replaces a blocked sender's text."""
    return (f"[withheld by gitrelay: {handle} is blocked in your trust file "
            f"({rules.source}); their text is never shown]")


class Pen:
    """Writes one response: the caller's own text plain, a teammate's text fenced."""

    def __init__(self, caller: str, rules: TrustRules, wrapper: _Wrapper) -> None:
        self.caller = caller
        self.rules = rules
        self._wrapper = wrapper
        self._me = normalize_handle(caller)
        # Per author, for this response: a page names the same few people many times.
        self._blocked: dict[str, bool] = {}
        self._markers: dict[str, ProvenanceMarker] = {}
        self._callers: dict[str, bool] = {}

    def is_caller(self, author: str) -> bool:
        known = self._callers.get(author)
        if known is None:
            known = self._callers[author] = normalize_handle(author) == self._me
        return known

    def _is_blocked(self, author: str) -> bool:
        known = self._blocked.get(author)
        if known is None:
            known = self._blocked[author] = self.rules.is_blocked(author)
        return known

    def blocked(self, author: str) -> bool:
        return not self.is_caller(author) and self._is_blocked(author)

    def text(self, value: str, author: str, field: str) -> str:
        if self.is_caller(author):
            return value
        if self._is_blocked(author):
            return withheld_notice(author, self.rules)
        return self._wrapper.wrap(value, sender=author, field=field)

    def opt_text(self, value: Any, author: str, field: str) -> str | None:
        return None if value is None else self.text(str(value), author, field)

    def obj(self, value: dict[str, Any], author: str, field: str) -> dict[str, Any] | str:
        """A free-form object: itself for the caller, fenced JSON text for a teammate."""
        if self.is_caller(author):
            return value
        if self._is_blocked(author):
            return withheld_notice(author, self.rules)
        return self._wrapper.wrap_json(value, sender=author, field=field)

    def marker(self, author: str) -> ProvenanceMarker | None:
        if self.is_caller(author):
            return None
        mark = self._markers.get(author)
        if mark is None:
            # Markers are frozen: one per author serves every object of the response.
            mark = self._markers[author] = self._wrapper.marker(author)
        return mark


def render(caller: str, rules: TrustRules, build: Callable[[Pen], T]) -> T:
    """Run ``build`` with one fresh Fence for the response."""
    return render_fenced(caller, rules, build).response


class Fenced(NamedTuple, Generic[T]):
    """A response and the token of its fences and markers."""

    response: T
    token: str


def render_fenced(caller: str, rules: TrustRules, build: Callable[[Pen], T]) -> Fenced[T]:
    """Run ``build`` with one fresh Fence for the response; the response and its token.

    The token is 128 random bits drawn after every text was written, so it is
    in none of them; ``Fence.wrap`` checks that for every text anyway. Should
    a text contain it (a collision, or the first text changing the token after
    a marker took it), the response is built again the careful way: once to
    collect the teammate texts, then with a Fence chosen to avoid all of them.
    """
    fence = Fence()
    token = fence.token
    try:
        out = build(Pen(caller, rules, fence))
        if fence.token == token:
            return Fenced(out, token)
    except FenceCollision:
        pass
    recorder = _Recorder()
    build(Pen(caller, rules, recorder))
    fence = Fence(recorder.values)
    return Fenced(build(Pen(caller, rules, fence)), fence.token)


# --- pieces -------------------------------------------------------------------------------


def _person(pen: Pen, handle: str, profiles: Profiles, field: str) -> Person:
    profile = profiles.get(handle.casefold())
    if profile is None:
        return Person(handle=handle, name=handle, role="", provenance=pen.marker(handle))
    email = profile.get("email")
    return Person(
        handle=handle,
        name=pen.text(str(profile["name"]), handle, f"{field}.name"),
        role=pen.text(str(profile["role"]), handle, f"{field}.role"),
        email=pen.opt_text(email, handle, f"{field}.email"),
        provenance=pen.marker(handle),
    )


def _artifact(pen: Pen, art: Mapping[str, Any], author: str, field: str) -> ArtifactOut:
    kind = art["type"]
    mark = pen.marker(author)
    if kind == "file_diff":
        return FileDiffOut(type="file_diff", path=pen.text(art["path"], author, f"{field}.path"),
                           diff=pen.text(art["diff"], author, f"{field}.diff"), provenance=mark)
    if kind == "file_ref":
        lines = art.get("lines")
        return FileRefOut(type="file_ref", path=pen.text(art["path"], author, f"{field}.path"),
                          git_sha=art.get("git_sha"),
                          lines=list(lines) if lines is not None else None, provenance=mark)
    if kind == "test_command":
        return TestCommandOut(type="test_command",
                              command=pen.text(art["command"], author, f"{field}.command"),
                              cwd=pen.opt_text(art.get("cwd"), author, f"{field}.cwd"),
                              provenance=mark)
    if kind == "api_contract":
        inline = art.get("inline")
        return ApiContractOut(
            type="api_contract",
            schema_url=pen.opt_text(art.get("schema_url"), author, f"{field}.schema_url"),
            inline=None if inline is None else pen.obj(inline, author, f"{field}.inline"),
            provenance=mark)
    if kind == "link":
        return LinkOut(type="link", url=pen.text(art["url"], author, f"{field}.url"),
                       title=pen.opt_text(art.get("title"), author, f"{field}.title"),
                       provenance=mark)
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
        created_at=str(msg["created_at"]), provenance=pen.marker(author),
    )


def _proposed_action(pen: Pen, action: Mapping[str, Any], author: str) -> ProposedActionOut:
    return ProposedActionOut(
        description=pen.text(action["description"], author, "proposed_action.description"),
        target_files=[pen.text(p, author, f"proposed_action.target_files[{i}]")
                      for i, p in enumerate(action["target_files"])],
        rationale=pen.text(action["rationale"], author, "proposed_action.rationale"),
        suggested_diff=pen.opt_text(action.get("suggested_diff"), author,
                                    "proposed_action.suggested_diff"),
        provenance=pen.marker(author),
    )


def _undelivered(keys: Iterable[str]) -> list[PendingOperation]:
    out = []
    for key in keys:
        kind, _, rest = key.partition(":")
        out.append(PendingOperation(operation=kind,
                                    message_id=rest if kind == "message" else None))
    return out


def _refused(records: Iterable[Refused]) -> list[RefusedOperation]:
    out = []
    for r in records:
        message_id = r.doc.get("id") if r.kind == "message" else None
        out.append(RefusedOperation(
            operation=str(r.doc.get("type", r.kind)) if r.kind == "message" else r.kind,
            message_id=str(message_id) if message_id is not None else None,
            code=r.code, name=r.name, rule=r.rule, reason=r.message, refused_at=r.at))
    return out


def _thread_fields(pen: Pen, view: ThreadView, profiles: Profiles,
                   sync_warning: str | None) -> dict[str, Any]:
    handoff = view.handoff
    author = view.sender
    complete, cancel, accept = view.complete, view.cancel, view.accept
    completion = None
    if complete is not None:
        by = str(complete["by"])
        completion = Completion(
            by=by, result_summary=pen.text(complete["result_summary"], by,
                                           "completion.result_summary"),
            artifacts=_artifacts(pen, complete.get("artifacts", []), by, "completion.artifacts"),
            completed_at=str(complete["at"]), provenance=pen.marker(by))
    cancellation = None
    if cancel is not None:
        by = str(cancel["by"])
        cancellation = Cancellation(
            by=by, reason=pen.opt_text(cancel.get("reason"), by, "cancellation.reason"),
            cancelled_at=str(cancel["at"]), provenance=pen.marker(by))
    action = handoff.get("proposed_action")
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
        "metadata": pen.obj(handoff.get("metadata", {}), author, "metadata"),
        "messages": [_message(pen, m, i) for i, m in enumerate(view.messages)],
        "created_at": str(handoff["created_at"]),
        "updated_at": view.updated_at,
        "accepted_at": str(accept["at"]) if accept else None,
        "completed_at": str(complete["at"]) if complete else None,
        "cancelled_at": str(cancel["at"]) if cancel else None,
        # The recipient chose the session id: text like any other they wrote.
        "accepted_by_session": pen.text(str(accept["accepted_by_session"]), str(accept["by"]),
                                        "accepted_by_session") if accept else None,
        "completion": completion,
        "cancellation": cancellation,
        "undelivered": _undelivered(view.undelivered),
        "refused": _refused(view.refused),
        "sync_warning": sync_warning,
        "provenance": pen.marker(author),
    }


# --- responses --------------------------------------------------------------------------------


def present_thread(view: ThreadView, *, caller: str, rules: TrustRules, profiles: Profiles,
                   sync_warning: str | None = None) -> ThreadOut:
    """view_thread (and the ``gitrelay://threads/{id}`` resource)."""
    return render(caller, rules,
                  lambda pen: ThreadOut(**_thread_fields(pen, view, profiles, sync_warning)))


def present_accept(view: ThreadView, *, caller: str, rules: TrustRules, profiles: Profiles,
                   decision: TrustDecision, accepted_at: str, delivery: str,
                   sync_warning: str | None = None) -> AcceptOut:
    """accept_handoff: the thread after the accept, with the trust overlay."""
    if decision.reason not in ("listed", "unknown_allowed"):
        raise ValueError(f"a refused sender ({decision.reason}) is never presented")

    def build(pen: Pen) -> AcceptOut:
        fields = _thread_fields(pen, view, profiles, sync_warning)
        fields["accepted_at"] = fields["accepted_at"] or accepted_at
        return AcceptOut(**fields, trust_overlay=decision.overlay,
                         trust_reason=decision.reason, delivery=delivery)

    return render(caller, rules, build)


def present_teammates(profiles: Iterable[Mapping[str, Any]], *, caller: str,
                      rules: TrustRules) -> TeammatesOut:
    """list_teammates: everyone registered, with how the trust file treats them."""
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
                email=pen.opt_text(p.get("email"), handle, f"{field}.email"),
                you=you, trust="you" if you else evaluate(rules, handle).reason,
                provenance=pen.marker(handle)))
        return TeammatesOut(you=caller, teammates=out)

    return render(caller, rules, build)


def present_inbox(page: InboxPage, *, caller: str, rules: TrustRules) -> InboxOut:
    """check_inbox (and the ``gitrelay://inbox`` resource): :func:`present_inbox_fenced`'s
    response."""
    return present_inbox_fenced(page, caller=caller, rules=rules).response


def present_inbox_fenced(page: InboxPage, *, caller: str, rules: TrustRules) -> Fenced[InboxOut]:
    """check_inbox's response and the token of its fences.

    The item's ``sender`` is the other participant; the summary was written by
    the thread's sender (``item.thread_sender``, from the index), who may be the
    caller. When the thread is unknown the summary is treated as the other
    participant's.
    """

    def build(pen: Pen) -> InboxOut:
        items = []
        for i, item in enumerate(page.items):
            other = item.sender.handle
            author = item.thread_sender or other
            field = f"items[{i}]"
            detail = item.detail
            if detail is not None and item.kind != "refused":
                detail = pen.text(detail, other, f"{field}.detail")
            items.append(InboxItemOut(
                thread_id=item.thread_id,
                sender=InboxSender(handle=other,
                                   name=pen.text(item.sender.name, other, f"{field}.sender.name"),
                                   role=pen.text(item.sender.role, other, f"{field}.sender.role"),
                                   provenance=pen.marker(other)),
                summary_preview=pen.text(item.summary_preview, author,
                                         f"{field}.summary_preview"),
                status=item.status, unread_messages=item.unread_messages,
                created_at=item.created_at, updated_at=item.updated_at, kind=item.kind,
                item_id=item.item_id, seq=item.seq, unread=item.unread,
                claimed_by=item.claimed_by, claim_expires_at=item.claim_expires_at,
                detail=detail, provenance=pen.marker(author)))
        return InboxOut(items=items, next_cursor=page.next_cursor, cursor=page.cursor,
                        acknowledged=page.acknowledged,
                        ack_results=[AckResultOut(item_id=a.item_id, seq=a.seq,
                                                  outcome=a.outcome, current_seq=a.current_seq)
                                     for a in page.ack_results],
                        index_rebuilt=page.index_rebuilt, delivery=page.delivery)

    return render_fenced(caller, rules, build)


def present_claim(result: ClaimResult) -> ClaimOut:
    """claim_inbox_item: nothing in a claim is teammate text."""
    return ClaimOut(item_id=result.item_id, seq=result.seq, worker=result.worker,
                    claimed=result.claimed, outcome=result.outcome,
                    expires_at=result.expires_at, held_by=result.held_by,
                    delivery=result.delivery)
