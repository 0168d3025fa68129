"""A user's unread inbox items straight from the inbox index, with the standard library.

The coding hosts' hooks show what is waiting when a session starts, within a
host's patience (150 ms, interpreter included). The full read
(:func:`gitrelay.inbox.inbox.check_inbox`) first brings the index up to date and
needs pygit2 and the whole library for that; loading them takes longer than the
read. This module answers from the derived SQLite index (:mod:`gitrelay.inbox.index`
writes it) without them, and only when the index says exactly what the full read
would. It is current when all of these hold:

- it is of the format this gitrelay writes;
- its recorded tip is the local copy's ``refs/heads/main`` (a loose ref or
  ``packed-refs``), and the outbox journal holds no record (else main is the
  journal's newest record);
- its copy of the user's acks was taken from the current local inbox ref
  (``refs/gitrelay/users/<handle>/inbox``, the commit id recorded beside the copy);
- no refused operation is recorded in the mirror (refused items live outside
  the index);
- every recipient's inbox ref the index watches for claims on the user's handoffs
  (``claim_refs``) is at the commit it last read;
- the user's profile is in it (the full read refuses an unregistered handle).

Otherwise :func:`peek_unread` returns None and the caller takes the full read, which
also brings the index up to date for the next time. The query is the index's own
(:data:`ITEM_SELECT`), so both reads list the same rows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitrelay.core import layout
from gitrelay.core.vocab import CLAIMED, STALLED
from gitrelay.inbox.news import (
    CLAIM_SELECT,
    STALL_SELECT,
    claimed_handoffs,
    claimed_text,
    is_news,
    stall_text,
    stalls,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "INDEX_FILE",
    "INDEX_FORMAT",
    "ITEM_SELECT",
    "LOCAL_BOOK",
    "STALL_META",
    "Peek",
    "UnreadItem",
    "peek_unread",
    "read_ref",
]

INDEX_FILE = "gitrelay-index.sqlite3"
# 2: items carry their thread's open flag (an index of open items); 3: search tables;
# 4: the claims seen on the handoffs the user sent (claims, claim_refs)
INDEX_FORMAT = 4
READ_TIMEOUT = 1.0                         # seconds to wait for a writer's lock
STALL_META = "stall_days"                  # the index's copy of relay.json's stall_days
# The seq and read flag of the items that are not commits of the relay (refused
# operations, stalled and claimed handoffs), kept by this machine in the mirror.
LOCAL_BOOK = "gitrelay-inbox-refused.json"

ITEM_SELECT = """
    SELECT i.item_id, i.seq, i.kind, i.thread_id, i.at, i.other, p.name, p.role, h.sender,
           t.status, h.summary_preview, h.created_at,
           (i.seq > :upto AND coalesce(a.seq, 0) < i.seq) AS unread,
           (SELECT count(*) FROM events e
             WHERE e.thread_id = i.thread_id AND e.op IN ('message', 'draft')
               AND e.actor_cf = i.other_cf
               AND e.seq > max(:upto, coalesce(
                   (SELECT max(a2.seq) FROM items i2 JOIN acks a2
                      ON a2.user_cf = i2.user_cf AND a2.item_id = i2.item_id
                     WHERE i2.user_cf = :user AND i2.thread_id = i.thread_id), 0))
           ) AS unread_messages
      FROM items i
      JOIN threads t ON t.thread_id = i.thread_id
      JOIN handoffs h ON h.thread_id = i.thread_id
      LEFT JOIN profiles p ON p.handle_cf = i.other_cf
      LEFT JOIN acks a ON a.user_cf = i.user_cf AND a.item_id = i.item_id
     WHERE i.user_cf = :user
    """
"""An item of a user with its thread's facts: the index's rows of ``check_inbox``."""

# check_inbox's default page, the news (gitrelay.inbox.news): unread items whatever
# their thread's status, newest first.
_NEWS_PAGE = (ITEM_SELECT + " AND i.seq > :upto AND coalesce(a.seq, 0) < i.seq"
              " ORDER BY i.seq DESC, i.item_id DESC LIMIT :limit")


def read_ref(git_dir: Path, name: str) -> str | None:
    """The commit id of ref ``name`` in the bare repository ``git_dir``: its loose file,
    else its line in ``packed-refs``; None when it has neither."""
    try:
        text = (git_dir / name).read_text(encoding="ascii").strip()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        text = ""
    except (OSError, UnicodeError):
        return None
    if text:
        return None if text.startswith("ref:") else text
    try:
        packed = (git_dir / "packed-refs").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    suffix = f" {name}"
    for line in packed.splitlines():
        if line.endswith(suffix) and not line.startswith(("#", "^")):
            return line.split(" ", 1)[0]
    return None


class UnreadItem(NamedTuple):
    """One unread item, as the session-start context shows it."""

    item_id: str
    seq: int
    kind: str
    thread_id: str
    status: str
    unread_messages: int
    sender: str               # the other participant
    sender_name: str
    sender_role: str
    summary_preview: str
    thread_sender: str | None  # who wrote the thread's handoff and summary
    updated_at: str
    # a stalled or claimed handoff's line (news.stall_text, news.claimed_text)
    detail: str | None = None


class Peek:
    """What the index answered: the unread items, and thread statuses on demand."""

    def __init__(self, mirror: Path, conn: sqlite3.Connection | None,
                 items: list[UnreadItem]) -> None:
        self.mirror = mirror
        self.items = items
        self._conn = conn

    def thread_status(self, tid: str) -> str | None:
        if self._conn is None:
            return None
        row = self._conn.execute("SELECT status FROM threads WHERE thread_id = ?",
                                 (tid,)).fetchone()
        return str(row[0]) if row is not None else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def read_book(path: Path) -> dict[str, dict[str, object]]:
    """The records of the book of local items (:data:`LOCAL_BOOK`); empty when none."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (FileNotFoundError, ValueError):
        return {}
    records = data.get("records") if isinstance(data, dict) else None
    return records if isinstance(records, dict) else {}


def peek_unread(mirror: Path, handle: str, *, limit: int = 200,
                now_us: int | None = None) -> Peek | None:
    """The newest ``limit`` items of news (:mod:`gitrelay.inbox.news`) of ``handle``, from
    the index of the local copy at ``mirror``, claimed and stalled handoffs first; None
    when the index cannot say (see the module doc: the caller then reads the full way)."""
    import sqlite3  # here: the guard imports this module and never reads the index
    import time

    from gitrelay.store import journal

    path = mirror / INDEX_FILE
    if (not path.is_file() or _size(mirror / journal.FILENAME) > len(journal.HEADER)
            or _size(mirror / layout.REFUSED_FILE)):
        return None
    main = read_ref(mirror, layout.MAIN_REF)
    inbox = read_ref(mirror, layout.inbox_ref(handle))
    if main is None:
        return None
    user = handle.casefold()
    conn = None
    try:
        conn = sqlite3.connect(str(path), timeout=READ_TIMEOUT, isolation_level=None)
        conn.execute("BEGIN")  # one snapshot for every read below
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                                 "('format', 'tip', ?, ?)",
                                 (f"acks:{user}", STALL_META)).fetchall())
        acks = meta.get(f"acks:{user}", "")
        oid, _, upto = acks.rpartition(":")
        days = meta.get(STALL_META, "")
        if (meta.get("format") != str(INDEX_FORMAT) or meta.get("tip") != main
                or oid != (inbox or "none") or not upto.isdigit() or not days.isdigit()
                or conn.execute("SELECT 1 FROM profiles WHERE handle_cf = ?",
                                (user,)).fetchone() is None):
            conn.close()
            return None
        if any((read_ref(mirror, ref) or "") != oid for ref, oid in
               conn.execute("SELECT owner, oid FROM claim_refs").fetchall()):
            conn.close()
            return None  # a recipient's inbox ref moved: the full read looks at it
        rows = conn.execute(_NEWS_PAGE, {"user": user, "upto": int(upto),
                                         "limit": limit}).fetchall()
        stalled = stalls(user, conn.execute(STALL_SELECT, {"handle": handle}).fetchall(),
                         now_us=time.time_ns() // 1000 if now_us is None else now_us,
                         days=int(days))
        claimed = claimed_handoffs(conn.execute(CLAIM_SELECT, {"user": user}).fetchall())
        others = [s.other.casefold() for s in stalled] + \
            [c.latest.recipient.casefold() for c in claimed]
        people = {str(k): (str(n), str(r)) for k, n, r in conn.execute(
            "SELECT handle_cf, name, role FROM profiles WHERE handle_cf IN "
            f"({', '.join('?' * len(others))})", others)}
    except sqlite3.Error:
        if conn is not None:
            conn.close()
        return None
    items = []
    if stalled or claimed:
        from gitrelay.inbox.news import item_id_for

        book = read_book(mirror / LOCAL_BOOK)
        # (kind, its book records oldest first, thread, other participant, status,
        # preview, the thread's sender, since when, gitrelay's line)
        computed = [(CLAIMED, n.records, c.thread_id, c.recipient, c.status,
                     c.summary_preview, c.sender, c.claimed_us, claimed_text(c))
                    for n in claimed for c in (n.latest,)]
        computed += [(STALLED, (t.record,), t.thread_id, t.other, t.status,
                      t.summary_preview, t.sender, t.since_us, stall_text(t))
                     for t in stalled]
        for kind, records, tid, other, status, preview, author, since_us, detail in computed:
            seqs = [q for r in records
                    if isinstance(e := book.get(r), dict) and isinstance(q := e.get("seq"), int)]
            if len(seqs) < len(records):
                conn.close()
                return None  # never seen here: the full read numbers it
            # the newest record speaks for the item
            if not is_news(unread=not book[records[-1]].get("acked"), kind=kind):
                continue
            name, role = people.get(other.casefold(), (other, ""))
            items.append(UnreadItem(
                item_id=item_id_for(handle, tid, kind), seq=seqs[-1], kind=kind,
                thread_id=tid, status=status, unread_messages=0, sender=other,
                sender_name=name, sender_role=role, summary_preview=preview,
                thread_sender=author, updated_at=_iso(since_us), detail=detail))
    items += [UnreadItem(item_id=r[0], seq=int(r[1]), kind=r[2], thread_id=r[3], status=r[9],
                         unread_messages=int(r[13]), sender=r[5], sender_name=r[6] or r[5],
                         sender_role=r[7] or "", summary_preview=r[10], thread_sender=r[8],
                         updated_at=r[4])
              for r in rows if is_news(unread=bool(r[12]), kind=r[2])]
    return Peek(mirror, conn, items[:limit])


def _iso(us: int) -> str:
    """An ISO 8601 UTC time of microseconds since the epoch (as the operations write it)."""
    import time

    whole, frac = divmod(int(us), 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{frac:06d}Z"
