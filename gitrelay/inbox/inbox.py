"""The inbox: items addressed to a user, cursors, acks and claims.

An *item* is one (user, thread, kind) — ``assignment`` (a handoff to me),
``reply`` (messages by the other participant), ``task_update`` (accept,
complete or cancel by the other participant), ``proposal_review`` (a draft on
a thread I sent), and the items this machine keeps: ``refused`` (my own operation
the relay refused), ``stalled`` (a handoff that stalled) and ``claimed`` (a worker of
the recipient claimed a handoff I sent). Its ``seq`` is the ``Gitrelay-Seq`` of the latest commit on
main that changed it, so it is the same on every clone.

What a user has handled lives on the relay, in the ref
``refs/gitrelay/users/<handle>/inbox``: a chain of commits whose tree holds
only ``inbox.json`` (``acked_up_to``, single ``acked`` items above it, and
``claims`` by workers). Reading never changes it; only acks and claims do.
Items and unread counts come from the local index (:mod:`gitrelay.inbox.index`).

docs/inbox.md describes the behaviour; docs/format.md the ref's format.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrelay.core import cursors
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import (
    Forbidden,
    IndexLost,
    InvalidArgument,
    InvalidCursor,
    NextStep,
    RelayUnavailable,
)
from gitrelay.core.ids import check_worker, same_handle
from gitrelay.core.ops import now_iso
from gitrelay.core.threadstate import ACCEPTED, CANCELLED, PENDING, STATUSES
from gitrelay.core.vocab import (
    ACK_ITEMS_MAX,
    CLAIMED,
    INBOX_KINDS,
    INBOX_PAGE_MAX,
    LEASE_MAX,
    REFUSED,
    STALLED,
    SUMMARY_PREVIEW_CHARS,
    WAIT_MAX,
)
from gitrelay.inbox.inboxpeek import LOCAL_BOOK, read_book
from gitrelay.inbox.index import (
    Index,
    ItemRow,
    ReindexReport,
    index_for,
    is_busy,
    item_id_for,
    open_index,
)
from gitrelay.inbox.index import reindex as reindex_mirror
from gitrelay.inbox.news import claimed_handoffs, claimed_text, is_news, stall_text, stalls
from gitrelay.store.mirror import Mirror, Refused
from gitrelay.sync.inboxstate import (
    Claim,
    InboxState,
    bound_acked,
    commit_state,
    current_us,
    load_state,
    local_ref,
    merge_inbox_states,
    merge_states,
    relay_ref,
    time_us,
)

if TYPE_CHECKING:
    from gitrelay.relay.client import RelayClient

KINDS = INBOX_KINDS
DEFAULT_STATUSES = (PENDING, ACCEPTED)
LIMIT_MAX = INBOX_PAGE_MAX
LEASE_SECONDS = 600.0       # a claim's default lease: 10 minutes
POLL_SECONDS = 0.5          # how often a long-poll without a sync loop fetches
MAX_ACKED = 5_000           # single acks kept before the cursor is moved up under them
QUICK_CATCH_UP = 64         # operations an index may lag and still count as nearly current
REFUSED_BOOK = LOCAL_BOOK
_CURSOR_SALT = b"gitrelay inbox cursor v1\n"


@dataclass
class Sender:
    handle: str
    name: str
    role: str


@dataclass
class InboxItem:
    item_id: str
    seq: int
    kind: str
    thread_id: str
    sender: Sender          # the other participant (who caused the item)
    summary_preview: str    # the summary's first SUMMARY_PREVIEW_CHARS characters
    status: str             # the thread's status
    unread_messages: int
    created_at: str         # the thread's creation time
    updated_at: str         # the item's last event time
    unread: bool
    claimed_by: str | None = None
    claim_expires_at: str | None = None
    detail: str | None = None  # e.g. the gate's reason for a refused item
    # Who wrote the summary (the thread's sender); None when the thread is not on the
    # relay (a refused handoff), where the summary is taken to be the other participant's.
    thread_sender: str | None = None


@dataclass
class AckResult:
    item_id: str
    seq: int
    outcome: str            # "acknowledged" | "news_since" | "not_in_inbox" | "claimed_by_other"
    current_seq: int | None = None


@dataclass
class InboxPage:
    items: list[InboxItem]
    next_cursor: str | None
    cursor: int             # highest seq this user has (pass as `after` next time)
    acknowledged: str | None = None   # e.g. "Acknowledged 2 of 3."
    ack_results: list[AckResult] = field(default_factory=list)
    index_rebuilt: bool = False
    delivery: str | None = None       # acks: "delivered" to the relay or "queued"; None: no acks


@dataclass
class ClaimResult:
    item_id: str
    seq: int
    worker: str
    claimed: bool
    expires_at: str
    held_by: str | None = None
    # claimed | renewed | taken_over (an expired claim) | held_by_other | already_acknowledged
    outcome: str = "claimed"
    delivery: str | None = None


def _iso_in(seconds: float) -> str:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- items of this machine: refused operations, stalled and claimed handoffs -------------


@dataclass
class _LocalItem:
    item: InboxItem
    record_ids: list[str]   # every record folded into this item, newest last


def _record_id(rec: Refused) -> str:
    return f"{rec.key}|{rec.at}"


def _local_book(mirror: Mirror, record_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The seq and acked flag of every local record, assigning seqs to new ones.

    A refusal, a stall or a claim gets the seq of the relay when this clone's inbox first saw
    it. The book is a file of the mirror (not of the index): it is local state that a
    rebuilt index could not recover.
    """
    path = mirror.path / REFUSED_BOOK
    book = _read_book(path)
    missing = [r for r in record_ids if r not in book]
    if not missing:
        return book
    with mirror.refs_locked():
        book = _read_book(path)
        relay = mirror.relay_main() or mirror.main()
        seq = commit_seq(mirror.objects.commit(relay)) if relay else 0
        changed = False
        for rid in record_ids:
            if rid not in book:
                book[rid] = {"seq": max(seq, 1), "acked": False}
                changed = True
        if changed:
            _write_book(path, book)
    return book


def _read_book(path: os.PathLike[str]) -> dict[str, dict[str, Any]]:
    return read_book(Path(path))


def _write_book(path: os.PathLike[str], book: dict[str, dict[str, Any]]) -> None:
    tmp = f"{os.fspath(path)}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"format_version": 1, "records": book}, fh, sort_keys=True)
    os.replace(tmp, path)


def _local_items(mirror: Mirror, idx: Index, now_us: int | None = None) -> list[_LocalItem]:
    """The user's refused operations (one item per thread or operation), stalled
    handoffs (:func:`gitrelay.inbox.news.stalls`) and claimed ones
    (:func:`gitrelay.inbox.news.claimed_handoffs`) as items."""
    handle = mirror.handle
    records = [r for r in mirror.refused() if same_handle(r.actor, handle)]
    stalled = stalls(handle.casefold(), idx.stall_clocks(handle),
                     now_us=current_us() if now_us is None else now_us,
                     days=idx.stall_days())
    claimed = claimed_handoffs(idx.claims_seen(handle))
    if not records and not stalled and not claimed:
        return []
    book = _local_book(mirror, [_record_id(r) for r in records]
                       + [s.record for s in stalled]
                       + [r for c in claimed for r in c.records])
    groups: dict[str, list[Refused]] = {}
    for rec in records:
        groups.setdefault(rec.thread_id or rec.key, []).append(rec)
    out = []
    for group, recs in groups.items():
        rec = recs[-1]
        entry = book.get(_record_id(rec), {"seq": 1, "acked": False})
        facts = idx.thread_facts(rec.thread_id) if rec.thread_id else None
        doc = rec.doc or {}
        author = None
        if facts is not None:
            author = str(facts["sender"])
            other = facts["recipient"] if same_handle(facts["sender"], handle) \
                else facts["sender"]
            status, preview, created = (facts["status"], facts["summary_preview"],
                                        facts["created_at"])
        else:
            other = str(doc.get("recipient") or handle)
            # A handoff that never reached the relay: its thread does not exist.
            status = CANCELLED
            preview = str(doc.get("summary") or doc.get("body") or "")[:SUMMARY_PREVIEW_CHARS]
            created = str(doc.get("created_at") or rec.at)
        profile = idx.profile(other)
        what = {"message": "message", "profile": "registration",
                "profile_update": "profile update"}.get(rec.kind, rec.kind)
        item = InboxItem(
            item_id=item_id_for(handle, group, REFUSED), seq=int(entry["seq"]), kind=REFUSED,
            thread_id=rec.thread_id or "",
            sender=Sender(other, profile[0] if profile else other, profile[1] if profile else ""),
            summary_preview=preview, status=status, unread_messages=0, created_at=created,
            updated_at=rec.at, unread=not entry.get("acked", False),
            detail=f"Your {what} was refused by the relay: {rec.name} ({rec.code}), rule "
                   f"{rec.rule}: {rec.message}", thread_sender=author)
        out.append(_LocalItem(item, [_record_id(r) for r in recs]))
    for stall in stalled:
        out.append(_computed_item(
            idx, book, handle, STALLED, stall.thread_id, stall.other, stall.status,
            stall.summary_preview, stall.since_us, stall_text(stall), stall.sender,
            [stall.record]))
    for news in claimed:
        claim = news.latest
        out.append(_computed_item(
            idx, book, handle, CLAIMED, claim.thread_id, claim.recipient, claim.status,
            claim.summary_preview, claim.claimed_us, claimed_text(claim), claim.sender,
            list(news.records)))
    return out


def _computed_item(idx: Index, book: dict[str, dict[str, Any]], handle: str, kind: str,
                   thread_id: str, other: str, status: str, preview: str, since_us: int,
                   detail: str, thread_sender: str, records: list[str]) -> _LocalItem:
    """A stalled or claimed handoff as an item: news computed from the history, read
    once the newest of its ``records`` is acked in the book."""
    entry = book.get(records[-1], {"seq": 1, "acked": False})
    facts = idx.thread_facts(thread_id) or {}
    profile = idx.profile(other)
    item = InboxItem(
        item_id=item_id_for(handle, thread_id, kind), seq=int(entry["seq"]), kind=kind,
        thread_id=thread_id,
        sender=Sender(other, profile[0] if profile else other, profile[1] if profile else ""),
        summary_preview=preview, status=status, unread_messages=0,
        created_at=str(facts.get("created_at") or ""), updated_at=_iso_us(since_us),
        unread=not entry.get("acked", False), detail=detail, thread_sender=thread_sender)
    return _LocalItem(item, records)


def _iso_us(us: int) -> str:
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ack_local(mirror: Mirror, ids: dict[str, int], up_to: int | None,
               records: list[str] | None = None) -> None:
    """Mark local records acked: those of ``ids`` (item_id -> seq), all up to ``up_to``,
    and the ``records`` named."""
    items = {r.item.item_id: r for r in _local_items(mirror, index_for(mirror))}
    path = mirror.path / REFUSED_BOOK
    book = _read_book(path)
    changed = False
    for ref in items.values():
        for rid in ref.record_ids:
            entry = book.get(rid)
            if entry is None or entry.get("acked"):
                continue
            by_id = ids.get(ref.item.item_id, 0) >= int(entry["seq"])
            if by_id or (up_to is not None and int(entry["seq"]) <= up_to) \
                    or rid in (records or ()):
                entry["acked"] = True
                changed = True
    if changed:
        _write_book(path, book)


# --- queries and cursors ------------------------------------------------------------------


@dataclass
class _Query:
    statuses: list[str] | None
    since_us: int | None
    unread_only: bool
    descending: bool
    position: tuple[int, str] | None   # exclusive (seq, item_id) to continue after
    after: int | None                  # a seq cursor given with `after`
    limit: int
    news: bool = False                 # the default call: what is news (inbox.news)
    floor: int | None = None           # the `after` of the listing a cursor continues

    @property
    def behind(self) -> int | None:
        """The seq below which only unread items are listed (an `after` listing's)."""
        return self.after if self.after is not None else self.floor

    def token(self, last: InboxItem) -> str:
        fields = {"o": "d" if self.descending else "a", "s": last.seq, "i": last.item_id,
                  "st": self.statuses, "sn": self.since_us, "u": self.unread_only}
        if self.behind is not None:
            fields["f"] = self.behind
        return cursors.seal("c1", _CURSOR_SALT, fields)

    def filters(self, item: InboxItem) -> bool:
        """Status (not applied to refused items) and since, for items not in the index."""
        if self.statuses is not None and item.kind != REFUSED \
                and item.status not in self.statuses:
            return False
        return self.since_us is None or time_us(item.updated_at) > self.since_us

    def includes(self, item: InboxItem) -> bool:
        """The filters and the position, for items that are not in the index."""
        if not self.filters(item) or (self.unread_only and not item.unread):
            return False
        if self.news and not is_news(unread=item.unread, kind=item.kind):
            return False
        key = (item.seq, item.item_id)
        if self.position is not None:
            if self.floor is not None and item.seq <= self.floor:
                # A later page of an `after` listing: such an item was on its first page
                # (unread, with the items behind the cursor) or is not listed (read).
                return False
            return key < self.position if self.descending else key > self.position
        if self.after is not None:
            return item.seq > self.after
        return True


def _bad_cursor(why: str) -> InvalidCursor:
    return InvalidCursor(f"That cursor isn't one check_inbox returned ({why}).",
                         next_step=NextStep.START_OVER, field="cursor")


def _decode_cursor(token: str) -> dict[str, Any]:
    if not isinstance(token, str):
        raise _bad_cursor("not a string")
    try:
        data = cursors.unseal("c1", _CURSOR_SALT, token)
    except cursors.UnreadableCursor as exc:
        raise _bad_cursor(str(exc)) from None
    try:
        assert data["o"] in ("a", "d")
        assert isinstance(data["s"], int) and isinstance(data["i"], str)
    except (ValueError, KeyError, AssertionError):
        raise _bad_cursor("unreadable") from None
    return data


def _parse_query(*, status: list[str] | None, since: str | None, limit: int, after: int | None,
                 cursor: str | None, unread_only: bool) -> _Query:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        raise InvalidArgument(f"limit {limit!r} must be an integer from 1 to {LIMIT_MAX}",
                              field="limit")
    statuses: list[str] | None = None
    if status is not None:
        if isinstance(status, str):
            status = [status]
        bad = [s for s in status if s not in STATUSES]
        if bad or not status:
            raise InvalidArgument(f"status {bad or status!r}: each must be one of "
                                  f"{', '.join(STATUSES)}", field="status")
        statuses = list(dict.fromkeys(status))
    since_us: int | None = None
    if since is not None:
        try:
            since_us = time_us(since)
        except (TypeError, ValueError):
            raise InvalidArgument(f"since {since!r} is not an ISO 8601 time "
                                  "(e.g. 2026-05-01T09:14:32Z)", field="since") from None
    if cursor is not None:
        data = _decode_cursor(cursor)
        cst = data.get("st")
        floor = data.get("f")
        return _Query(statuses if statuses is not None else cst,
                      since_us if since_us is not None else data.get("sn"),
                      unread_only or bool(data.get("u")), data["o"] == "d",
                      (int(data["s"]), str(data["i"])), None, limit,
                      floor=floor if isinstance(floor, int) else None)
    if after is not None:
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise _bad_cursor(f"after must be a seq of 0 or more, not {after!r}")
        return _Query(statuses, since_us, unread_only, False, None, after, limit)
    if statuses is not None:
        return _Query(statuses, since_us, unread_only, True, None, None, limit)
    # The default call: the news, newest first (gitrelay.inbox.news).
    return _Query(None, since_us, True, True, None, None, limit, news=True)


# --- check_inbox ------------------------------------------------------------------------


def _check_registered(client: RelayClient) -> None:
    """An unregistered handle has no inbox: refuse rather than answer an empty one,
    which would look like nothing waiting (a mistyped handle, a config or ``--as``
    naming someone who never joined this relay)."""
    if client.mirror.main() is not None and client.mirror.view().profile(client.handle) is None:
        raise Forbidden(f"{client.handle} is not a registered teammate on this relay, so "
                        "nothing can be addressed to it",
                        next_step=NextStep.CHECK_IDENTITY, field="handle")


def check_inbox(client: RelayClient, *, status: list[str] | None = None,
                since: str | None = None, limit: int = 50, after: int | None = None,
                cursor: str | None = None, unread_only: bool = False,
                ack_up_to: int | None = None, ack_items: list[dict[str, Any]] | None = None,
                worker: str | None = None, wait_seconds: float = 0,
                sync_loop: Any | None = None) -> InboxPage:
    """The user's inbox items, after applying any acks (reading alone changes nothing).

    With no ``status``, ``after`` or ``cursor``: the news
    (:mod:`gitrelay.inbox.news`: every unread item, whatever its thread's status, and
    the stalled handoffs), most recently updated (highest seq) first. With ``status``
    alone: the items on threads of those statuses, newest first. With ``after``:
    every item after that seq and every unread item before it, oldest first; with
    ``cursor``: the next page of a listing. ``sync_loop`` (a running
    :class:`~gitrelay.sync.loop.SyncLoop`, else ``client.sync.loop`` if set)
    delivers acks and wakes a long-poll. docs/inbox.md has the details.
    """
    query = _parse_query(status=status, since=since, limit=limit, after=after, cursor=cursor,
                         unread_only=unread_only)
    if worker is not None:
        check_worker(worker)
    wait = _check_wait(wait_seconds)
    loop = sync_loop if sync_loop is not None else client.sync.loop
    items_to_ack = _check_ack_items(ack_items)
    if ack_up_to is not None and (isinstance(ack_up_to, bool) or not isinstance(ack_up_to, int)
                                  or ack_up_to < 0):
        raise InvalidArgument(f"ack_up_to {ack_up_to!r} must be a seq of 0 or more",
                              field="ack_up_to")
    client.refresh()
    mirror = client.mirror
    _check_registered(client)
    newest = max((q for q in (query.after, ack_up_to) if q is not None), default=0)
    if newest > 0 and newest > _main_seq(mirror):
        client.refresh(max_age=0)  # another clone may have seen a newer relay
        main_seq = _main_seq(mirror)
        if query.after is not None and query.after > main_seq:
            raise _bad_cursor(f"seq {query.after} is beyond the relay's newest operation, "
                              f"seq {main_seq}")
        if ack_up_to is not None and ack_up_to > main_seq:
            raise InvalidArgument(f"ack_up_to {ack_up_to} is beyond the relay's newest "
                                  f"operation, seq {main_seq}", field="ack_up_to")
    idx = index_for(mirror)
    rebuilt = False
    results: list[AckResult] = []
    acknowledged = delivery = None
    if ack_up_to is not None or items_to_ack:
        with idx.session():
            rebuilt = idx.update().rebuilt
            results, acknowledged, changed = _acknowledge(mirror, idx, worker, ack_up_to,
                                                          items_to_ack)
        delivery = _deliver(client, loop) if changed else _delivery_state(mirror)
    # The loop's generation is taken before each read: news that a pass brings while
    # the page is read then ends the wait at once instead of being waited past.
    seen = _generation(loop)
    page = _read(mirror, idx, query)
    deadline = time.monotonic() + wait
    while not _arrived(page, query) and time.monotonic() < deadline:
        _wait_for_news(client, loop, deadline - time.monotonic(), seen)
        seen = _generation(loop)
        rebuilt = rebuilt or page.index_rebuilt
        page = _read(mirror, idx, query)
    page.index_rebuilt = page.index_rebuilt or rebuilt
    page.acknowledged, page.ack_results, page.delivery = acknowledged, results, delivery
    return page


def _arrived(page: InboxPage, query: _Query) -> bool:
    """Whether a long-poll has something to answer: an item past ``after`` (the unread
    items behind it, listed again until read, are not what it waits for), else any."""
    if query.after is None:
        return bool(page.items)
    return any(i.seq > query.after for i in page.items)


def index_nearly_current(mirror: Mirror) -> bool:
    """True when this process's inbox index of ``mirror`` is open and at most
    :data:`QUICK_CATCH_UP` operations behind main: reading a page updates it in
    a few milliseconds at most (no rebuild, no long catch-up)."""
    idx = open_index(mirror)
    try:
        tip = idx.tip_seq() if idx is not None else -1
    except sqlite3.DatabaseError:
        return False
    return tip >= 0 and 0 <= _main_seq(mirror) - tip <= QUICK_CATCH_UP


def _check_wait(wait_seconds: float) -> float:
    if isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float) \
            or not 0 <= wait_seconds <= WAIT_MAX:
        raise InvalidArgument(f"wait_seconds {wait_seconds!r} must be from 0 to {WAIT_MAX:.0f}",
                              field="wait_seconds")
    return float(wait_seconds)


def _check_ack_items(ack_items: list[dict[str, Any]] | None) -> list[tuple[str, int]]:
    if not ack_items:
        return []
    if not isinstance(ack_items, list) or len(ack_items) > ACK_ITEMS_MAX:
        raise InvalidArgument(f"ack_items must be a list of at most {ACK_ITEMS_MAX} "
                              "{item_id, seq} objects", field="ack_items")
    out = []
    for n, entry in enumerate(ack_items):
        item_id = entry.get("item_id") if isinstance(entry, dict) else None
        seq = entry.get("seq") if isinstance(entry, dict) else None
        if not isinstance(item_id, str) or not item_id or len(item_id) > 100 \
                or isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise InvalidArgument(f"ack_items[{n}] must be {{item_id: string, seq: integer "
                                  f">= 1}}, not {entry!r}", field=f"ack_items[{n}]")
        out.append((item_id, seq))
    return out


def _main_seq(mirror: Mirror) -> int:
    main = mirror.main()
    return commit_seq(mirror.objects.commit(main)) if main else 0


def _read(mirror: Mirror, idx: Index, query: _Query) -> InboxPage:
    try:
        return _read_once(mirror, idx, query)
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
            raise IndexLost(f"the inbox index {idx.path} is busy: another gitrelay process "
                            "is writing it", next_step=NextStep.TRY_AGAIN_SOON) from None
        # Damaged between the update and the reads: rebuild and answer from the new one.
        idx.rebuild()
        page = _read_once(mirror, idx, query)
        page.index_rebuilt = True
        return page


def _read_once(mirror: Mirror, idx: Index, query: _Query) -> InboxPage:
    handle = mirror.handle
    now = current_us()
    with idx.session():
        rebuilt = idx.update().rebuilt
        ref = mirror.store.ref(local_ref(mirror))
        state = load_state(mirror, ref)
        idx.sync_acks(handle, ref, state.acked_up_to, state.acked)
        # The news is the unread items (news.is_news): asked of the index itself, so that
        # a page holds `limit` of them rather than what is left of `limit` rows.
        rows = idx.page(handle, upto=state.acked_up_to, statuses=query.statuses,
                        since_us=query.since_us, unread_only=query.unread_only or query.news,
                        descending=query.descending,
                        position=query.position, limit=query.limit + 1,
                        # an unread item never falls behind a cursor given as `after`
                        floor=query.behind)
        items = [_item(row, state, now) for row in rows
                 if not query.news or is_news(unread=row.unread, kind=row.kind)]
        refused = _local_items(mirror, idx)
        highest = idx.max_item_seq(handle)
    extra: list[InboxItem] = []
    for ref_item in refused:
        item = ref_item.item
        _with_claim(item, state, now)
        highest = max(highest, item.seq)
        if query.includes(item):
            items.append(item)
        elif (query.after is not None and item.unread and item.seq <= query.after
              and query.filters(item)):
            extra.append(item)  # a refusal newer than the cursor it was numbered under
    items.sort(key=lambda i: (i.seq, i.item_id), reverse=query.descending)
    more = len(items) > query.limit
    items = items[:query.limit]
    next_cursor = query.token(items[-1]) if more and items else None
    if query.descending:
        cursor = highest
    else:
        floor = max(query.behind or 0,
                    query.position[0] if query.position is not None else 0)
        cursor = max([floor, *(i.seq for i in items)])
    return InboxPage(extra + items, next_cursor, cursor, index_rebuilt=rebuilt)


def _item(row: ItemRow, state: InboxState, now_us: int) -> InboxItem:
    item = InboxItem(
        item_id=row.item_id, seq=row.seq, kind=row.kind, thread_id=row.thread_id,
        sender=Sender(row.other, row.other_name or row.other, row.other_role or ""),
        summary_preview=row.summary_preview, status=row.status,
        unread_messages=row.unread_messages, created_at=row.created_at, updated_at=row.at,
        unread=row.unread, thread_sender=row.sender)
    _with_claim(item, state, now_us)
    return item


def _with_claim(item: InboxItem, state: InboxState, now_us: int) -> None:
    claim = state.live_claim(item.item_id, now_us)
    if claim is not None:
        item.claimed_by, item.claim_expires_at = claim.worker, claim.expires_at


def _generation(loop: Any | None) -> int | None:
    """The sync loop's count of passes that brought something, or None without a loop."""
    return getattr(loop, "generation", None) if loop is not None else None


def _wait_for_news(client: RelayClient, loop: Any | None, left: float,
                   seen: int | None) -> None:
    """Until the loop brings something after generation ``seen`` (or ``left`` s)."""
    if left <= 0:
        return
    if loop is not None and hasattr(loop, "wait_for_change"):
        loop.wait_for_change(min(left, 5.0), since=seen)
        return
    time.sleep(min(POLL_SECONDS, left))
    client.refresh(max_age=POLL_SECONDS)


# --- acknowledging ------------------------------------------------------------------------


def _acknowledge(mirror: Mirror, idx: Index, worker: str | None, ack_up_to: int | None,
                 ack_items: list[tuple[str, int]]
                 ) -> tuple[list[AckResult], str, bool]:
    """Apply acks to the local inbox ref (one commit); returns results, summary, changed."""
    handle = mirror.handle
    now = current_us()
    texts = []
    results: list[AckResult] = []
    refused = {r.item.item_id: r.item for r in _local_items(mirror, idx)}
    refused_acks: dict[str, int] = {}
    with mirror.refs_locked():
        ref = local_ref(mirror)
        parent = mirror.store.ref(ref)
        state = load_state(mirror, parent)
        before = state.copy()
        if ack_up_to is not None:
            left = _ack_up_to(idx, state, handle, worker, ack_up_to, now)
            text = f"Acknowledged everything up to seq {ack_up_to}"
            if left:
                text += (f", except {left} item(s) another copy has claimed and is still on "
                         "(left to it)")
            texts.append(text + ".")
        for item_id, seq in ack_items:
            if item_id in refused:
                item = refused[item_id]
                if seq < item.seq:
                    results.append(AckResult(item_id, seq, "news_since", item.seq))
                else:
                    refused_acks[item_id] = item.seq
                    results.append(AckResult(item_id, seq, "acknowledged", item.seq))
                continue
            results.append(_ack_item(idx, state, handle, worker, item_id, seq, now))
        if ack_items:
            done = sum(r.outcome == "acknowledged" for r in results)
            texts.append(f"Acknowledged {done} of {len(ack_items)}.")
        state.tidy(now)
        _compact(idx, state, handle)
        changed = not state.same(before)
        if changed:
            subject = _ack_subject(handle, ack_up_to, results)
            oid = commit_state(mirror, state, parent, subject)
            mirror.store.set_ref(ref, oid, "gitrelay: inbox acks")
        if refused_acks or ack_up_to is not None:
            _ack_local(mirror, refused_acks, ack_up_to)
    return results, " ".join(texts), changed


def _ack_up_to(idx: Index, state: InboxState, handle: str, worker: str | None, up_to: int,
               now_us: int) -> int:
    """Move the cursor to ``up_to``, leaving items other workers hold; returns how many."""
    held: dict[str, int] = {}
    for item_id, claim in state.claims.items():
        if not claim.live(now_us) or claim.worker == worker:
            continue
        row = idx.item(handle, item_id, upto=state.acked_up_to)
        seq = row.seq if row is not None else claim.seq
        if seq <= up_to and not state.is_acked(item_id, seq):
            held[item_id] = seq
    if not held:
        state.acked_up_to = max(state.acked_up_to, up_to)
        return 0
    floor = max(state.acked_up_to, min(held.values()) - 1)
    for item_id, seq in idx.item_seqs(handle, floor, up_to):
        if item_id not in held:
            state.ack(item_id, seq)
    state.acked_up_to = floor
    return len(held)


def _ack_item(idx: Index, state: InboxState, handle: str, worker: str | None, item_id: str,
              seq: int, now_us: int) -> AckResult:
    row = idx.item(handle, item_id, upto=state.acked_up_to)
    if row is None:
        return AckResult(item_id, seq, "not_in_inbox")
    claim = state.live_claim(item_id, now_us)
    if claim is not None and claim.worker != worker:
        return AckResult(item_id, seq, "claimed_by_other", row.seq)
    if seq < row.seq:
        state.ack(item_id, seq)  # what was read up to seq counts as read
        return AckResult(item_id, seq, "news_since", row.seq)
    state.ack(item_id, row.seq)
    return AckResult(item_id, seq, "acknowledged", row.seq)


def _compact(idx: Index, state: InboxState, handle: str) -> None:
    """Too many single acks: move the cursor up to just below the oldest unhandled item."""
    if len(state.acked) <= MAX_ACKED:
        return
    top = max(state.acked.values())
    floor = state.acked_up_to
    for item_id, seq in idx.item_seqs(handle, state.acked_up_to, top):
        if not state.is_acked(item_id, seq) or item_id in state.claims:
            break
        floor = seq
    else:
        floor = top
    state.acked_up_to = max(state.acked_up_to, floor)
    state.acked = {i: s for i, s in state.acked.items() if s > state.acked_up_to}
    bound_acked(state)


def _ack_subject(handle: str, ack_up_to: int | None, results: list[AckResult]) -> str:
    parts = []
    if ack_up_to is not None:
        parts.append(f"ack up to {ack_up_to}")
    done = [r for r in results if r.outcome in ("acknowledged", "news_since")]
    if done:
        parts.append(f"ack {len(done)} item(s)")
    return f"inbox {handle}: {', '.join(parts) or 'update'}"


def _delivery_state(mirror: Mirror) -> str:
    store = mirror.store
    local = store.ref(local_ref(mirror))
    return "delivered" if local is None or local == store.ref(relay_ref(mirror)) \
        else "queued"


def _deliver(client: RelayClient, loop: Any | None = None, *, now: bool = False) -> str:
    """Send the inbox ref to the relay: through the sync loop when one runs (queue
    mode), else at once; an unreachable relay leaves it queued."""
    if not now and client.writes == "queue" and loop is not None and hasattr(loop, "kick"):
        loop.kick()
        return _delivery_state(client.mirror)
    try:
        client.deliver(timeout=client.wait_seconds)
    except RelayUnavailable as exc:
        client.sync.last_error = exc
    return _delivery_state(client.mirror)


# --- claims -------------------------------------------------------------------------------


def claim_inbox_item(client: RelayClient, *, item_id: str, seq: int, worker: str,
                     lease_seconds: float | None = None) -> ClaimResult:
    """Claim an item for ``worker`` so that other copies of this user leave it alone.

    The claim lasts ``lease_seconds`` (default 10 minutes); claiming again
    renews it; an expired claim is taken over. The claim is delivered to the
    relay before answering, so two machines cannot both be told they hold it.
    """
    check_worker(worker)
    lease = LEASE_SECONDS if lease_seconds is None else lease_seconds
    if isinstance(lease, bool) or not isinstance(lease, int | float) \
            or not 0 < lease <= LEASE_MAX:
        raise InvalidArgument(f"lease_seconds {lease!r} must be over 0 and at most "
                              f"{LEASE_MAX:.0f}",
                              field="lease_seconds")
    if not isinstance(item_id, str) or not item_id or len(item_id) > 100:
        raise InvalidArgument(f"item_id {item_id!r} is not an inbox item id", field="item_id")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise InvalidArgument(f"seq {seq!r} must be an integer >= 1", field="seq")
    client.refresh()
    mirror = client.mirror
    idx = index_for(mirror)
    now = current_us()
    with idx.session():
        idx.update()
        refused = {r.item.item_id: r.item for r in _local_items(mirror, idx)}
        with mirror.refs_locked():
            ref = local_ref(mirror)
            parent = mirror.store.ref(ref)
            state = load_state(mirror, parent)
            row = idx.item(mirror.handle, item_id, upto=state.acked_up_to)
            current = row.seq if row is not None else (
                refused[item_id].seq if item_id in refused else None)
            if current is None:
                raise InvalidArgument(f"item {item_id} is not in your inbox",
                                      next_step=NextStep.CHECK_INBOX, field="item_id")
            held = state.live_claim(item_id, now)
            if held is not None and held.worker != worker:
                return ClaimResult(item_id, current, worker, False, held.expires_at,
                                   held_by=held.worker, outcome="held_by_other")
            if (row is not None and state.is_acked(item_id, current)) or (
                    row is None and not refused[item_id].unread):
                return ClaimResult(item_id, current, worker, False, now_iso(),
                                   outcome="already_acknowledged")
            before = state.claims.get(item_id)
            outcome = ("renewed" if held is not None else
                       "taken_over" if before is not None and before.worker != worker
                       else "claimed")
            state.claims[item_id] = Claim(item_id, current, worker, _iso_in(lease))
            state.tidy(now)
            oid = commit_state(mirror, state, parent,
                               f"inbox {mirror.handle}: {worker} claims {item_id} at seq "
                               f"{current}")
            mirror.store.set_ref(ref, oid, "gitrelay: inbox claim")
    delivery = _deliver(client, now=True)
    # The relay's copy wins a race between machines: read the claim back.
    final = load_state(mirror, mirror.store.ref(local_ref(mirror)))
    mine = final.live_claim(item_id, current_us())
    if mine is None or mine.worker != worker:
        return ClaimResult(item_id, current, worker, False,
                           mine.expires_at if mine is not None else now_iso(),
                           held_by=mine.worker if mine is not None else None,
                           outcome="held_by_other" if mine is not None else
                           "already_acknowledged", delivery=delivery)
    return ClaimResult(item_id, current, worker, True, mine.expires_at, outcome=outcome,
                       delivery=delivery)


# --- what marks an item read -----------------------------------------------------------------


@dataclass(frozen=True)
class ReadMark:
    """The reader's unread items on one thread, taken just before the thread is read:
    what reading it then marks read (:func:`mark_read`), each at the seq it had, so that
    news arriving while it was read stays unread."""

    thread_id: str
    items: tuple[tuple[str, int], ...]


def unread_on_thread(client: RelayClient, thread_id: str) -> ReadMark:
    """The reader's unread items on ``thread_id`` (of every kind, the local ones too),
    from the index brought up to date; none for a reader who has no inbox here."""
    mirror = client.mirror
    if mirror.main() is None or mirror.view().profile(client.handle) is None:
        return ReadMark(thread_id, ())
    handle = mirror.handle
    idx = index_for(mirror)
    found: list[tuple[str, int]] = []
    with idx.session():
        idx.update()
        ref = mirror.store.ref(local_ref(mirror))
        state = load_state(mirror, ref)
        idx.sync_acks(handle, ref, state.acked_up_to, state.acked)
        for kind in KINDS:
            row = idx.item(handle, item_id_for(handle, thread_id, kind),
                           upto=state.acked_up_to)
            if row is not None and row.unread:
                found.append((row.item_id, row.seq))
        found += [(r.item.item_id, r.item.seq) for r in _local_items(mirror, idx)
                  if r.item.thread_id == thread_id and r.item.unread]
    return ReadMark(thread_id, tuple(found))


def mark_read(client: RelayClient, mark: ReadMark, *, sync_loop: Any | None = None) -> int:
    """Mark read what ``mark`` holds (the thread was read): one acknowledgement, each
    item at the seq it had before the read. How many items that was."""
    if not mark.items:
        return 0
    mirror = client.mirror
    idx = index_for(mirror)
    with idx.session():
        idx.update()
        _, _, changed = _acknowledge(mirror, idx, None, None, list(mark.items))
    loop = sync_loop if sync_loop is not None else client.sync.loop
    if changed and client.writes == "queue":
        # Queued like the caller's writes: the sync loop sends it, else the next
        # delivery does (no fetch here: a read must not change what the caller saw).
        if loop is not None and hasattr(loop, "kick"):
            loop.kick()
    elif changed:
        _deliver(client, loop)
    return len(mark.items)


# --- maintenance ----------------------------------------------------------------------------


def reindex(client: RelayClient) -> ReindexReport:
    """Fetch if the relay is reachable, then rebuild the local index from the whole history."""
    client.refresh(max_age=0)
    return reindex_mirror(client.mirror)


def inbox_state(client: RelayClient) -> InboxState:
    """This user's inbox state as this machine knows it (unpushed acks included)."""
    return load_state(client.mirror, client.mirror.store.ref(local_ref(client.mirror)))


__all__ = ["DEFAULT_STATUSES", "KINDS", "LEASE_SECONDS", "AckResult", "Claim", "ClaimResult",
           "InboxItem", "InboxPage", "InboxState", "ReadMark", "Sender", "check_inbox",
           "claim_inbox_item", "inbox_state", "load_state", "mark_read", "merge_inbox_states",
           "merge_states", "reindex", "unread_on_thread"]
