"""What each page of the web view shows, gathered from the relay library.

No HTTP here: each function takes the user's client (and trust rules) and
returns the values a template renders. Every teammate-written text passes
through :mod:`gitrelay.web.text` first; the templates escape it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrelay.core.errors import InvalidArgument, RelayError
from gitrelay.core.ids import handle_key, same_handle
from gitrelay.core.readable import when
from gitrelay.core.threadstate import ACCEPTED, PENDING, STATUSES, actions_open_to
from gitrelay.core.vocab import INTENTS
from gitrelay.inbox.inbox import ReadMark, check_inbox, mark_read, unread_on_thread
from gitrelay.relay import policy, reads
from gitrelay.trust.trust import TrustRules, evaluate, load_trust
from gitrelay.trust.withholding import Withholding
from gitrelay.web.text import artifact_view, diff_lines, page_line, shown

if TYPE_CHECKING:
    from gitrelay.inbox.inbox import InboxItem
    from gitrelay.relay.client import RelayClient
    from gitrelay.relay.results import ThreadView

class Withheld:
    """The web view's wording of :class:`~gitrelay.trust.withholding.Withholding` (whose
    words, which fields and what stands in their place are decided there), as ``gitrelay
    show`` and the agent's answers word it (docs/trust.md); ``show`` (the page's "show
    blocked" link) shows them on purpose."""

    def __init__(self, me: str, rules: TrustRules, *, show: bool = False) -> None:
        self.rules = rules
        self.decision = Withholding.of(me, rules, shown=show)

    def blocked(self, author: object) -> bool:
        return self.decision.withheld(author)

    def notice(self, author: str) -> str:
        return (f"[withheld: {page_line(author, 80)} is blocked in your trust file "
                f"({page_line(self.rules.source, 200)})]")


PAGE_ITEMS = 50
# Filters the index cannot apply (intent, sender) read at most this many items per page.
SCAN_MAX = 1000


# --- inbox ------------------------------------------------------------------------------


@dataclass
class InboxFilters:
    status: str = ""        # "", "all", "open" or one status ("": the news, inbox.news)
    intent: str = ""
    sender: str = ""
    unread: bool = False
    since: str = ""

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> InboxFilters:
        status = query.get("status", "")
        if status not in ("", "all", "open", *STATUSES):
            raise InvalidArgument(f"status must be one of all, open, {', '.join(STATUSES)}",
                                  field="status")
        intent = query.get("intent", "")
        if intent not in ("", *INTENTS):
            raise InvalidArgument(f"intent must be one of {', '.join(INTENTS)}",
                                  field="intent")
        return cls(status, intent, query.get("from", "").strip()[:200],
                   query.get("unread", "") in ("1", "on", "true"),
                   query.get("since", "").strip()[:40])

    def statuses(self) -> list[str] | None:
        if self.status == "all":
            return list(STATUSES)
        if self.status == "open":
            return [PENDING, ACCEPTED]
        # "": check_inbox's default call, the news (what is not read yet, any status)
        return [self.status] if self.status else None

    def query(self) -> dict[str, str]:
        """The filters as query parameters (for the next page's link)."""
        out = {"status": self.status, "intent": self.intent, "from": self.sender,
               "since": self.since, "unread": "1" if self.unread else ""}
        return {k: v for k, v in out.items() if v}


@dataclass
class InboxRow:
    thread_id: str
    kind: str
    sender: str
    sender_name: str
    intent: str
    status: str
    unread: bool
    unread_messages: int
    updated: str
    summary: str
    claimed_by: str
    claim_expires: str
    detail: str


@dataclass
class InboxData:
    rows: list[InboxRow]
    next_cursor: str | None
    cursor: int
    filters: InboxFilters
    scanned: int = 0
    index_rebuilt: bool = False


class Intents:
    """Each thread's intent (a handoff never changes), read once per thread."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def of(self, client: RelayClient, tid: str) -> str:
        found = self._known.get(tid)
        if found is None:
            state = client.mirror.view().thread(tid)
            if state is None:
                try:
                    found = str(client.thread(tid).handoff.get("intent", ""))
                except RelayError:
                    return ""
            else:
                found = str(state.handoff.get("intent", ""))
            if len(self._known) > 200_000:
                self._known.clear()
            self._known[tid] = found
        return found


def inbox(client: RelayClient, filters: InboxFilters, intents: Intents, withheld: Withheld,
          *, cursor: str | None = None, limit: int = PAGE_ITEMS) -> InboxData:
    """One page of the user's inbox, newest first, after ``filters``."""
    rows: list[InboxRow] = []
    scanned = 0
    rebuilt = False
    since = filters.since or None
    page_cursor = cursor
    next_cursor: str | None = None
    seq_cursor = 0
    sender = filters.sender.casefold()
    while True:
        page = check_inbox(client, status=filters.statuses(), since=since, limit=limit,
                           cursor=page_cursor, unread_only=filters.unread)
        rebuilt = rebuilt or page.index_rebuilt
        seq_cursor = max(seq_cursor, page.cursor)
        for item in page.items:
            scanned += 1
            if sender and sender not in item.sender.handle.casefold():
                continue
            intent = intents.of(client, item.thread_id)
            if filters.intent and intent != filters.intent:
                continue
            rows.append(_row(item, intent, withheld))
        next_cursor = page.next_cursor
        if len(rows) >= limit or next_cursor is None or scanned >= SCAN_MAX:
            break
        page_cursor = next_cursor
    return InboxData(rows, next_cursor, seq_cursor, filters, scanned, rebuilt)


def _row(item: InboxItem, intent: str, withheld: Withheld) -> InboxRow:
    author = item.thread_sender or item.sender.handle
    held = withheld.decision.item(item.sender.handle, item.thread_sender)
    blocked = item.detail is None and "summary_preview" in held
    return InboxRow(
        thread_id=item.thread_id, kind=item.kind, sender=page_line(item.sender.handle, 80),
        sender_name="" if "sender.name" in held else page_line(item.sender.name, 60),
        intent=intent, status=item.status,
        unread=item.unread, unread_messages=item.unread_messages, updated=when(item.updated_at),
        summary=withheld.notice(author) if blocked
        else page_line(item.detail or item.summary_preview, 200),
        claimed_by=page_line(item.claimed_by or "", 80),
        claim_expires=when(item.claim_expires_at) if item.claim_expires_at else "",
        detail=page_line(item.detail or "", 200))


# --- a thread ---------------------------------------------------------------------------


@dataclass
class Event:
    at: str
    order: int
    kind: str             # message, draft, accept, complete, cancel
    who: str
    mine: bool
    number: int | None = None
    body: str = ""
    diff: list[Any] = field(default_factory=list)
    payload: str = ""
    artifacts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ThreadData:
    thread_id: str
    status: str
    sender: str
    recipient: str
    sender_name: str
    recipient_name: str
    intent: str
    sent: str
    summary: str
    question: str
    action: dict[str, Any] | None
    artifacts: list[dict[str, Any]]
    events: list[Event]
    trust_note: str
    queued: int
    refused: list[str]
    me_sender: bool
    me_recipient: bool
    can_reply: bool
    can_cancel: bool
    can_complete: bool
    withheld: bool = False   # some of it is a blocked teammate's, withheld
    can_accept: bool = False  # pending, sent to me, and the trust file accepts its sender
    accept_overlay: dict[str, Any] | None = None   # what accepting holds a session to


def _name(profiles: Mapping[str, Mapping[str, Any]], handle: str) -> str:
    profile = profiles.get(handle_key(handle))
    return page_line(profile["name"], 60) if profile else ""


def thread(client: RelayClient, ref: str, rules: TrustRules, *, show_blocked: bool = False
           ) -> ThreadData:
    """A thread as a person reads it (any thread of the relay, as ``gitrelay show``);
    reading it marks the reader's inbox items on it read, as ``gitrelay show`` does
    (docs/inbox.md, "What marks an item read")."""
    tid = reads.resolve_thread(client, ref)
    try:
        mark: ReadMark | None = unread_on_thread(client, tid)
    except RelayError:
        mark = None  # the page is shown all the same; its items stay unread
    view = reads.thread_to_read(client, tid, policy.Reader.PERSON)
    data = thread_data(client, view, rules, Withheld(client.handle, rules, show=show_blocked))
    if mark is not None:
        with contextlib.suppress(RelayError):
            mark_read(client, mark)
    return data


def thread_data(client: RelayClient, view: ThreadView, rules: TrustRules,
                withheld: Withheld) -> ThreadData:
    me = client.handle
    held = withheld.decision.thread(view, withheld.notice)
    h = held.handoff
    profiles = withheld.decision.profiles(client.thread_profiles(view))
    hidden = bool(held.fields)
    events: list[Event] = []
    for m in held.messages:
        author = str(m.get("from", ""))
        events.append(Event(
            str(m.get("created_at", "")), 1, "draft" if m.get("type") == "draft" else "message",
            page_line(author, 80), same_handle(me, author), int(m.get("sequence_no", 0)),
            shown(m.get("body", "")).rstrip(),
            diff_lines(m["suggested_diff"]) if m.get("suggested_diff") else [],
            shown(json.dumps(m["payload"], indent=2, sort_keys=True, ensure_ascii=False))
            if m.get("payload") else ""))
    if view.accept:
        by = str(view.accept.get("by", ""))
        events.append(Event(str(view.accept.get("at", "")), 0, "accept", page_line(by, 80),
                            same_handle(me, by)))
    if held.complete:
        by = str(held.complete.get("by", ""))
        events.append(Event(str(held.complete.get("at", "")), 2, "complete", page_line(by, 80),
                            same_handle(me, by),
                            body=shown(held.complete.get("result_summary", "")).rstrip(),
                            artifacts=[artifact_view(a)
                                       for a in held.complete.get("artifacts") or []]))
    if held.cancel:
        by = str(held.cancel.get("by", ""))
        events.append(Event(str(held.cancel.get("at", "")), 2, "cancel", page_line(by, 80),
                            same_handle(me, by),
                            body=shown(held.cancel.get("reason") or "").rstrip()))
    events.sort(key=lambda e: (e.at, e.order, e.number or 0))
    for e in events:
        e.at = when(e.at)
    action = h.get("proposed_action")
    action_view = None
    if action:
        action_view = {
            "description": shown(action.get("description", "")).rstrip(),
            "target_files": [page_line(p, 300) for p in action.get("target_files", [])],
            "rationale": shown(action.get("rationale", "")).rstrip(),
            "diff": diff_lines(action["suggested_diff"]) if action.get("suggested_diff")
            else []}
    note = ""
    acceptable = False
    try:
        judged = policy.sender_judgement(me, view, rules)
        if judged is not None:
            note = judged[0].message + ("" if judged[1] is None
                                        else "; accepting is refused")
            acceptable = judged[1] is None   # the decision the accept itself makes
    except RelayError as exc:
        note = f"cannot judge {view.sender}: {exc.message}"
    open_to_me = actions_open_to(view, me)   # the state machine's, as the gate applies it
    can_accept = acceptable and "accept" in open_to_me
    overlay = policy.held_overlay(me, view, rules) if can_accept else None
    me_sender, me_recipient = same_handle(me, view.sender), same_handle(me, view.recipient)
    return ThreadData(
        thread_id=view.thread_id, status=view.status, sender=page_line(view.sender, 80),
        recipient=page_line(view.recipient, 80), sender_name=_name(profiles, view.sender),
        recipient_name=_name(profiles, view.recipient), intent=page_line(h.get("intent", "")),
        sent=when(h.get("created_at")), summary=shown(h.get("summary", "")).rstrip(),
        question=shown(h.get("question") or "").rstrip(), action=action_view,
        artifacts=[artifact_view(a) for a in h.get("artifacts") or []], events=events,
        trust_note=page_line(note, 400), queued=len(view.undelivered),
        refused=[page_line(f"your {r.kind} at {when(r.at)}: {r.name} ({r.code}): {r.message}",
                          400) for r in view.refused],
        me_sender=me_sender, me_recipient=me_recipient,
        can_reply="message" in open_to_me, can_cancel="cancel" in open_to_me,
        can_complete="complete" in open_to_me, withheld=hidden,
        can_accept=can_accept, accept_overlay=None if overlay is None else {
            "auto_read": bool(overlay.get("auto_read")),
            "auto_test": bool(overlay.get("auto_test")),
            "auto_write_paths": [page_line(x, 200) for x in overlay.get("auto_write_paths", [])],
            "require_approval": [page_line(x, 80) for x in overlay.get("require_approval", [])]})


# --- teammates --------------------------------------------------------------------------


@dataclass
class Teammate:
    handle: str
    name: str
    role: str
    me: bool
    allowed: bool
    reason: str
    message: str
    auto_read: bool
    auto_test: bool
    auto_write_paths: list[str]
    require_approval: list[str]


def load_rules(path: Path) -> TrustRules:
    """The trust file's rules; one that cannot be read is an error (``config_error``), so
    that a mistake in it never shows a blocked teammate's words."""
    return load_trust(path)


def teammates(client: RelayClient, rules: TrustRules) -> list[Teammate]:
    """Everyone registered on the relay with the overlay the trust file gives them (a
    blocked teammate's name and role withheld, as on every page)."""
    me = client.handle
    withheld = Withholding.of(me, rules)
    out = []
    for p in client.teammates():
        handle = str(p["handle"])
        decision = evaluate(rules, handle)
        overlay = decision.overlay
        hide = withheld.profile(p) is None   # their words: name and role too
        out.append(Teammate(
            handle=page_line(handle, 80), name="" if hide else page_line(p.get("name", ""), 80),
            role="" if hide else page_line(p.get("role", ""), 80), me=same_handle(me, handle),
            allowed=decision.allowed, reason=decision.reason,
            message=page_line(decision.message, 300), auto_read=overlay.auto_read,
            auto_test=overlay.auto_test,
            auto_write_paths=[page_line(x, 200) for x in overlay.auto_write_paths],
            require_approval=[page_line(x, 80) for x in overlay.require_approval]))
    return out


# --- search -----------------------------------------------------------------------------


@dataclass
class Found:
    thread_id: str
    status: str
    intent: str
    sender: str
    recipient: str
    updated: str
    field: str
    by: str
    snippet: str
    withheld: bool


@dataclass
class SearchData:
    query: str
    hits: list[Found]
    next_cursor: str | None


def search(client: RelayClient, rules: TrustRules, query: str, *,
           cursor: str | None = None, limit: int = 20) -> SearchData:
    """Threads ``query`` finds, with the engine the ``search_threads`` tool uses."""
    from gitrelay.inbox.search import search_threads

    if not query.strip():
        return SearchData(query, [], None)
    page = search_threads(client, query, reader=policy.Reader.PERSON, rules=rules,
                          limit=limit, cursor=cursor)
    hits = [Found(thread_id=h.thread_id, status=h.status, intent=page_line(h.intent),
                  sender=page_line(h.sender, 80), recipient=page_line(h.recipient, 80),
                  updated=when(h.updated_at), field=page_line(h.field or ""),
                  by=page_line(h.by or "", 80),
                  snippet=page_line(h.snippet, 400) if h.snippet is not None else "",
                  withheld=h.withheld) for h in page.hits]
    return SearchData(query, hits, page.next_cursor)
