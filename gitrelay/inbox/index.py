"""The local inbox index: a derived, disposable SQLite database inside the mirror.

The relay's history is the only source of truth. This module folds the
commits of the mirror's ``refs/heads/main`` (the verified relay plus this
user's queued operations) into a few tables so that ``check_inbox`` answers
without walking the history:

- ``events``: one row per commit on main (seq, commit id, operation, thread,
  actor, time) — what every other table is derived from, and what lets the
  index roll back when the outbox is replayed;
- ``handoffs``/``threads``: per thread, who sent it to whom, the summary
  preview, the status, the last update and the message count;
- ``items``: one row per (user, thread, kind) — the inbox items — with the
  seq of the latest commit that changed it;
- ``profiles``: display names and roles of teammates;
- ``acks``: a copy of one user's acknowledged items, taken from their inbox
  ref, so that "unread" can be filtered in SQL;
- ``claims``: the claims a worker of a recipient made on the handoffs this mirror's
  user sent, as seen on the recipients' inbox refs (``claim_refs``: the commit of each
  ref last looked at), for the ``claimed`` news (:mod:`gitrelay.inbox.news`);
- ``meta``: the index format version and the indexed tip (commit and seq);
- ``search_text``, ``search_docs``, ``artifact_paths``: the words of every
  summary, question, message, result and artifact path, for search
  (:mod:`gitrelay.inbox.searchindex` writes and reads them).

Updates are incremental: the first-parent chain from main's tip back to the
indexed tip. When the indexed tip is not on that chain (the outbox was
replayed onto a newer relay, or a refused operation was dropped), the rows
of commits above the common ancestor are removed and the threads they
touched are folded again from their remaining events. A missing, damaged,
stale or foreign index is detected and rebuilt from scratch; it is never
answered from. docs/inbox.md describes the whole design.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gitrelay.core import layout
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import IndexLost, NextStep
from gitrelay.core.gitcli import hermetic_env, stream_git
from gitrelay.core.ids import handle_key
from gitrelay.core.objects import Commit, Objects, diff_trees
from gitrelay.core.threadstate import ACCEPTED, CANCELLED, COMPLETED, PENDING
from gitrelay.core.view import RelayView
from gitrelay.core.vocab import (
    ASSIGNMENT,
    PROPOSAL_REVIEW,
    REPLY,
    SUMMARY_PREVIEW_CHARS,
    TASK_UPDATE,
)
from gitrelay.inbox import searchindex
from gitrelay.inbox.inboxpeek import INDEX_FILE as INDEX_FILE
from gitrelay.inbox.inboxpeek import INDEX_FORMAT as INDEX_FORMAT
from gitrelay.inbox.inboxpeek import ITEM_SELECT, STALL_META
from gitrelay.inbox.news import CLAIM_SELECT, STALL_SELECT, SeenClaim, StallClock, stall_days
from gitrelay.inbox.news import item_id_for as item_id_for
from gitrelay.store.mirror import Mirror
from gitrelay.sync.inboxstate import time_us

if TYPE_CHECKING:
    import subprocess

T = TypeVar("T")

BUSY_SECONDS = 120.0  # how long to wait for another process writing the index
# From this many new commits, the files they added are listed by one `git log --raw`.
BULK_COMMITS = 500

# Which item an operation creates or moves, for the participant who did not do it.
ITEM_KIND = {layout.OP_HANDOFF: ASSIGNMENT, layout.OP_MESSAGE: REPLY,
             layout.OP_DRAFT: PROPOSAL_REVIEW, layout.OP_ACCEPT: TASK_UPDATE,
             layout.OP_COMPLETE: TASK_UPDATE, layout.OP_CANCEL: TASK_UPDATE}
STATUS_AFTER = {layout.OP_ACCEPT: ACCEPTED, layout.OP_COMPLETE: COMPLETED,
                layout.OP_CANCEL: CANCELLED}
_MESSAGE_OPS = (layout.OP_MESSAGE, layout.OP_DRAFT)
OPEN_STATUSES = frozenset({PENDING, ACCEPTED})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events(
    seq INTEGER PRIMARY KEY, oid TEXT NOT NULL, op TEXT NOT NULL, thread_id TEXT,
    actor_cf TEXT NOT NULL, at TEXT NOT NULL, at_us INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS events_thread ON events(thread_id, seq);
-- unread_messages (one participant's messages on a thread after a seq) from the index alone
CREATE INDEX IF NOT EXISTS events_author ON events(thread_id, actor_cf, op, seq);
CREATE TABLE IF NOT EXISTS profiles(
    handle_cf TEXT PRIMARY KEY, handle TEXT NOT NULL, name TEXT NOT NULL,
    role TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS handoffs(
    thread_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, sender TEXT NOT NULL,
    recipient TEXT NOT NULL, intent TEXT NOT NULL, summary_preview TEXT NOT NULL,
    created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS threads(
    thread_id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at TEXT NOT NULL,
    updated_us INTEGER NOT NULL, messages INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS items(
    user_cf TEXT NOT NULL, thread_id TEXT NOT NULL, kind TEXT NOT NULL,
    item_id TEXT NOT NULL, seq INTEGER NOT NULL, at TEXT NOT NULL, at_us INTEGER NOT NULL,
    other TEXT NOT NULL, other_cf TEXT NOT NULL,
    open INTEGER NOT NULL,  -- 1 while the thread is pending or accepted
    PRIMARY KEY(user_cf, thread_id, kind));
CREATE INDEX IF NOT EXISTS items_seq ON items(user_cf, seq, item_id);
-- the default page (open threads only) without reading the items of closed ones
CREATE INDEX IF NOT EXISTS items_open ON items(user_cf, open, seq, item_id);
CREATE UNIQUE INDEX IF NOT EXISTS items_id ON items(user_cf, item_id);
-- the open threads, whose handoffs may stall (inbox.news): not every thread ever closed
CREATE INDEX IF NOT EXISTS threads_status ON threads(status);
CREATE TABLE IF NOT EXISTS acks(
    user_cf TEXT NOT NULL, item_id TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY(user_cf, item_id));
-- claims on the handoffs a user sent, kept once seen (an ack drops them from inbox.json)
CREATE TABLE IF NOT EXISTS claims(
    sender_cf TEXT NOT NULL, thread_id TEXT NOT NULL, worker TEXT NOT NULL,
    recipient TEXT NOT NULL, seq INTEGER NOT NULL, expires_at TEXT NOT NULL,
    claimed_us INTEGER NOT NULL, PRIMARY KEY(sender_cf, thread_id, worker));
-- the recipients' inbox refs (refs/relay/users/<owner>/inbox) watched for them: the
-- commit last read ('' when the ref did not exist)
CREATE TABLE IF NOT EXISTS claim_refs(owner TEXT PRIMARY KEY, oid TEXT NOT NULL);
"""
_TABLES = ("meta", "events", "profiles", "handoffs", "threads", "items", "acks", "claims",
           "claim_refs")
# The most commits of one recipient's inbox ref read at one update: a clone that was
# away for long reads the newest ones (a claim lives from the claim to its ack).
CLAIM_WALK = 200
_MY_OPEN_RECIPIENTS = """
    SELECT h.thread_id, h.recipient
      FROM threads t CROSS JOIN handoffs h ON h.thread_id = t.thread_id
     WHERE t.status IN ('pending', 'accepted') AND h.sender = :handle COLLATE NOCASE
    """
_MY_MOVED_RECIPIENTS = """
    SELECT DISTINCT h.thread_id, h.recipient
      FROM events e JOIN handoffs h ON h.thread_id = e.thread_id
     WHERE e.seq > :after AND h.sender = :handle COLLATE NOCASE
    """

_PAGES_KEPT = 16  # distinct page queries remembered until the database changes


@dataclass(frozen=True, slots=True)
class ItemRow:
    """One inbox item as the index knows it, with its thread's facts."""

    item_id: str
    seq: int
    kind: str
    thread_id: str
    at: str
    other: str
    other_name: str | None
    other_role: str | None
    sender: str             # the thread's sender, who wrote its handoff and summary
    status: str
    summary_preview: str
    created_at: str
    unread: bool
    unread_messages: int


@dataclass
class UpdateReport:
    rebuilt: bool = False
    applied: int = 0
    rolled_back: int = 0
    reason: str | None = None


class ListedFiles:
    """The file each commit of a run added, read from a running ``git log --raw
    --reverse`` while the caller folds the same commits, oldest first.

    :meth:`get` answers for the commits in the order git lists them; a commit the
    listing does not hold, or one that did not add exactly one plainly named file,
    gets None (the caller reads it on its own). Should git stop early, every commit
    after that gets None too: nothing is guessed.
    """

    def __init__(self, proc: subprocess.Popen[bytes] | None, oids: set[str]) -> None:
        self._proc = proc
        self._lines: Iterator[bytes] = iter(proc.stdout) if proc and proc.stdout else iter(())
        self._oids = oids
        self._ahead: str | None = None  # the next commit's id, read with the last record
        self.hits = 0

    def get(self, oid: str) -> tuple[str, str] | None:
        if oid not in self._oids:
            return None
        while (record := self._record()) is not None:
            listed, added = record
            if listed == oid:
                self.hits += added is not None
                return added
        return None

    def _record(self) -> tuple[str, tuple[str, str] | None] | None:
        """The next commit's id and the file it added, or None once the listing ended."""
        current, self._ahead = self._ahead, None
        changes: list[str] = []
        whole = True  # every line ended with its newline
        for raw in self._lines:
            whole = whole and raw.endswith(b"\n")
            line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
            if line.startswith(":"):
                changes.append(line)
            elif line and current is None:
                current = line
            elif line:
                self._ahead = line
                break
        if current is None:
            return None
        if self._ahead is None and not self._ended_well():
            whole = False  # the last record of a git that failed may be cut short
        if len(changes) != 1 or not whole:
            return current, None
        meta, _, path = changes[0].partition("\t")
        fields = meta.split()
        if len(fields) != 5 or fields[4] != "A" or path.startswith('"'):
            return current, None  # a quoted path: read it the long way
        return current, (path, fields[3])

    def _ended_well(self) -> bool:
        return self._proc is not None and self._proc.wait() == 0

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc.wait()
            self._proc = None


class _OtherFormat(sqlite3.DatabaseError):
    """The file holds an index of another format: it is replaced, not read."""


class Index:
    """The index of one mirror. Thread-safe; processes share it through SQLite locking."""

    def __init__(self, mirror: Mirror, path: Path | None = None) -> None:
        self.mirror = mirror
        self.path = Path(path) if path is not None else mirror.path / INDEX_FILE
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None
        self._fresh = False  # the open file had no index in it: the next update builds it
        self._fresh_reason = "no index"
        # Pages read since the database last changed (see _answers_version): an agent
        # checking in again with nothing new gets the same rows without the query.
        self._pages: dict[tuple[Any, ...], tuple[tuple[int, int, int], list[ItemRow]]] = {}
        self._writes = 0  # commits through this connection, which data_version does not count
        # Rows of the news' own selects (stall clocks, claims seen) per (select, user),
        # kept like pages until the database changes.
        self._kept: dict[tuple[str, str], tuple[tuple[int, int, int], list[Any]]] = {}
        # The recipients' inbox refs watched for claims at an indexed tip (the index at
        # one tip always watches the same ones): (tip, handle) -> ref names.
        self._watched: tuple[tuple[str, str], list[str]] | None = None
        # The tip and the watched refs' files (stat) when they were last found where the
        # index read them: unchanged, they are not resolved again.
        self._claims_ok: tuple[str, tuple[Any, ...]] | None = None

    # --- connection ---------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None
            self._inode = None
            self._pages.clear()
            self._kept.clear()
            self._claims_ok = None

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _open(self) -> sqlite3.Connection:
        """The connection, reopened when the file was deleted or replaced under us."""
        try:
            st = os.stat(self.path)
            inode: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            inode = None
        if self._conn is not None and inode == self._inode:
            return self._conn
        self.close()
        if inode is None:
            # A -wal left behind by a deleted database must not be replayed into a new one.
            self._remove_files()
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table' "
                               "AND name='meta'").fetchone()
            if row[0] == 0:
                self._create(conn)
                self._fresh, self._fresh_reason = True, "no index"
            elif conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            else:
                stored = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if stored is not None and stored[0] != str(INDEX_FORMAT):
                    # Another format's tables may have other columns: a new file.
                    raise _OtherFormat(f"index format {stored[0]!r}, this gitrelay writes "
                                       f"{INDEX_FORMAT}")
                self._create(conn)  # a file from an earlier version gains the newer indexes
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                raise  # another process is writing it: not damage
            self._remove_files()
            conn = self._connect()
            self._create(conn)
            self._fresh = True
            self._fresh_reason = str(exc) if isinstance(exc, _OtherFormat) \
                else f"damaged: {exc}"
        st = os.stat(self.path)
        self._conn, self._inode = conn, (st.st_dev, st.st_ino)
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=BUSY_SECONDS, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @staticmethod
    def _create(conn: sqlite3.Connection) -> None:
        # IF NOT EXISTS: another process may be creating the same file right now.
        conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + searchindex.SCHEMA + "COMMIT;")

    @contextlib.contextmanager
    def _write(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        self._writes += 1  # before the commit: a failed commit must not leave stale pages
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _answers_version(self, conn: sqlite3.Connection) -> tuple[int, int, int]:
        """Equal on two reads exactly when no commit reached the database between them.

        ``PRAGMA data_version`` changes when another connection (another gitrelay
        process on the same mirror) commits; this connection's own commits are
        counted by :meth:`_write`; a new connection starts the cache afresh.
        """
        return (id(conn), int(conn.execute("PRAGMA data_version").fetchone()[0]), self._writes)

    # --- bringing the index up to date --------------------------------------------

    def update(self) -> UpdateReport:
        """Bring the index up to the mirror's main; rebuild it when it cannot be trusted."""
        with self._lock:
            try:
                return self._update()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    return self._start_over(exc)
                raise IndexLost(f"the inbox index {self.path} is busy: another gitrelay "
                                f"process has been writing it for over {BUSY_SECONDS:.0f} s "
                                "(a rebuild of a large relay?)",
                                next_step=NextStep.TRY_AGAIN_SOON) from None
            except sqlite3.DatabaseError as exc:
                return self._start_over(exc)

    def _start_over(self, exc: sqlite3.DatabaseError) -> UpdateReport:
        """Damaged under us: start again from an empty file, once."""
        with self._lock:
            self.close()
            self._remove_files()
            try:
                report = self._update()
            except sqlite3.DatabaseError as again:
                raise IndexLost(f"the inbox index {self.path} is damaged ({exc}) and "
                                f"could not be rebuilt ({again})",
                                next_step=NextStep.REINDEX, path=str(self.path)) from None
            report.rebuilt, report.reason = True, f"damaged: {exc}"
            return report

    def rebuild(self) -> UpdateReport:
        """Throw the index away and build it again from the whole history."""
        with self._lock:
            self.close()
            self._remove_files()
            report = self.update()
            report.rebuilt, report.reason = True, "rebuild requested"
            return report

    def _update(self) -> UpdateReport:
        conn = self._open()
        report = UpdateReport()
        if self._fresh:
            report.rebuilt, report.reason = True, self._fresh_reason
        tip = self.mirror.main()
        meta = self._meta(conn)
        if (tip is not None and meta.get("tip") == tip and not self._fresh
                and meta.get("format") == str(INDEX_FORMAT) and STALL_META in meta
                and self._claims_current(conn, tip)):
            return report
        with self._write(conn):
            meta = self._meta(conn)
            problem = self._problem(conn, meta)
            if problem is not None:
                for table in _TABLES:
                    conn.execute(f"DELETE FROM {table}")
                searchindex.clear(conn)
                report.rebuilt, report.reason = True, problem
                meta = {}
            self._fresh = False
            if tip is not None and STALL_META not in meta:
                # relay.json never changes: the hooks read its stall_days from here
                meta[STALL_META] = str(stall_days(self.mirror.view().config))
                self._set_meta(conn, None, {STALL_META: meta[STALL_META]})
            if tip is None or meta.get("tip") == tip:
                self._set_meta(conn, tip, meta)
                if tip is not None:
                    self._take_claims(conn, None)
                return report
            known = int(meta["tip_seq"]) if "tip_seq" in meta else -1
            new, ancestor = self._walk_back(conn, tip, known)
            if ancestor < known:
                report.rolled_back = known - ancestor
                self._roll_back(conn, ancestor)
            listed = self._added_files(new if len(new) >= BULK_COMMITS else [])
            try:
                for commit, seq in new:
                    self._apply(conn, commit, seq, listed.get(commit.oid))
            finally:
                listed.close()
            report.applied = len(new)
            self._set_meta(conn, tip, {"tip_seq": str(new[-1][1] if new else ancestor)})
            # The recipients of threads that moved are looked at too: a claim, then an
            # accept (its ack drops the claim) and a complete may all have come at once.
            self._take_claims(conn, ancestor if known >= 0 else None)
        return report

    # --- claims on the handoffs the user sent -------------------------------------

    def _watched_refs(self, conn: sqlite3.Connection, tip: str) -> list[str]:
        """The inbox refs of the recipients of the user's open handoffs, at ``tip``."""
        key = (tip, self.mirror.handle)
        if self._watched is not None and self._watched[0] == key:
            return self._watched[1]
        rows = conn.execute(_MY_OPEN_RECIPIENTS, {"handle": self.mirror.handle}).fetchall()
        refs = sorted({self._owner_ref(conn, r[1]) for r in rows})
        self._watched = (key, refs)
        return refs

    @staticmethod
    def _owner_ref(conn: sqlite3.Connection, recipient: str) -> str:
        """The relay's inbox ref of ``recipient`` as this mirror keeps it, under the
        registered spelling of the handle (the ref's name)."""
        row = conn.execute("SELECT handle FROM profiles WHERE handle_cf = ?",
                           (recipient.casefold(),)).fetchone()
        return f"{layout.RELAY_USERS}{row[0] if row else recipient}/{layout.INBOX_REF_LEAF}"

    def _claims_current(self, conn: sqlite3.Connection, tip: str) -> bool:
        """Whether every watched inbox ref is where the index last read it: the recipients
        of the user's open handoffs only (no listing of every teammate's ref), each
        resolved again only when its file (or ``packed-refs``) changed since it was
        last found current."""
        watched = self._watched_refs(conn, tip)
        stamp = (tip, self._ref_files(watched))  # before the refs are read
        if self._claims_ok == stamp:
            return True
        store = self.mirror.store
        seen = dict(conn.execute("SELECT owner, oid FROM claim_refs").fetchall())
        current = len(seen) == len(watched) and all(
            seen.get(ref) == (store.ref(ref) or "") for ref in watched)
        if current:
            self._claims_ok = stamp
        return current

    def _ref_files(self, refs: list[str]) -> tuple[Any, ...]:
        """What a stat says of each ref's loose file and of ``packed-refs``: a ref that
        moved has a new file (git and libgit2 write a ref aside, then rename it)."""
        out: list[Any] = []
        top = f"{os.fspath(self.mirror.path)}/"
        for name in ("packed-refs", *refs):
            try:
                st = os.stat(top + name)
            except OSError:
                out.append(None)
                continue
            out.append((st.st_ino, st.st_mtime_ns))
        return tuple(out)

    def _take_claims(self, conn: sqlite3.Connection, moved_after: int | None) -> None:
        """Record the claims made on the user's handoffs since each watched recipient's
        inbox ref was last read (the commits in between, newest :data:`CLAIM_WALK`),
        and forget the refs no longer watched. ``moved_after``: the seq above which the
        threads that just moved are watched too."""
        handle = self.mirror.handle
        threads: dict[str, dict[str, str]] = {}  # ref -> {assignment item id: thread}
        rows = conn.execute(_MY_OPEN_RECIPIENTS, {"handle": handle}).fetchall()
        if moved_after is not None:
            rows += conn.execute(_MY_MOVED_RECIPIENTS,
                                 {"handle": handle, "after": moved_after}).fetchall()
        for tid, recipient in rows:
            threads.setdefault(self._owner_ref(conn, recipient), {})[
                item_id_for(recipient, tid, ASSIGNMENT)] = tid
        seen = dict(conn.execute("SELECT owner, oid FROM claim_refs").fetchall())
        store = self.mirror.store
        for ref, wanted in threads.items():
            now = store.ref(ref) or ""
            if seen.get(ref) == now:
                continue
            for state in self._states_between(seen.get(ref) or None, now or None):
                for claim in state.get("claims") or ():
                    tid = wanted.get(str(claim.get("item_id")))
                    if tid is None:
                        continue
                    conn.execute(
                        "INSERT INTO claims(sender_cf, thread_id, worker, recipient, seq, "
                        "expires_at, claimed_us) VALUES (?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT(sender_cf, thread_id, worker) DO UPDATE SET "
                        "expires_at = excluded.expires_at",
                        (handle.casefold(), tid, str(claim["worker"]), str(state["handle"]),
                         int(claim["seq"]), str(claim["expires_at"]),
                         _us_or_zero(str(state.get("updated_at") or ""))))
            conn.execute("INSERT OR REPLACE INTO claim_refs(owner, oid) VALUES (?, ?)",
                         (ref, now))
        gone = [ref for ref in seen if ref not in threads]
        conn.executemany("DELETE FROM claim_refs WHERE owner = ?", [(r,) for r in gone])

    def _states_between(self, old: str | None, new: str | None) -> list[dict[str, Any]]:
        """The inbox states (``inbox.json``) of the commits after ``old`` up to ``new`` on
        an inbox ref, oldest first: the newest :data:`CLAIM_WALK` of them. Read as the
        sync verified them (refs/relay/users holds only verified commits); one that
        holds no claim is not parsed."""
        objs = self.mirror.objects
        out: list[dict[str, Any]] = []
        oid = new
        for _ in range(CLAIM_WALK):
            if oid is None or oid == old:
                break
            try:
                commit = objs.commit(oid)
                data = objs.read_path(commit.tree, layout.INBOX_FILE)
            except (KeyError, ValueError):
                break
            if data is not None and b'"claims": []' not in data:
                try:
                    doc = json.loads(data)
                except ValueError:
                    doc = None
                if isinstance(doc, dict):
                    out.append(doc)
            oid = commit.parents[0] if commit.parents else None
        out.reverse()
        return out

    @staticmethod
    def _meta(conn: sqlite3.Connection) -> dict[str, str]:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())

    @staticmethod
    def _problem(conn: sqlite3.Connection, meta: dict[str, str]) -> str | None:
        """Why the stored index cannot be extended, or None when it can."""
        events = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
        if not meta:
            return None if events is None else "events without a recorded tip"
        if meta.get("format") != str(INDEX_FORMAT):
            return f"index format {meta.get('format')!r}, this gitrelay writes {INDEX_FORMAT}"
        if "tip_seq" not in meta:
            return None if events is None else "events without a recorded tip"
        if events is None or str(events) != meta["tip_seq"]:
            return f"recorded tip seq {meta['tip_seq']} but the newest event is {events}"
        row = conn.execute("SELECT oid FROM events WHERE seq = ?", (events,)).fetchone()
        if row[0] != meta.get("tip"):
            return "the recorded tip is not the newest event's commit"
        return None

    @staticmethod
    def _set_meta(conn: sqlite3.Connection, tip: str | None, values: dict[str, str]) -> None:
        rows = {"format": str(INDEX_FORMAT), **values}
        if tip is not None:
            rows["tip"] = tip
        conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         list(rows.items()))

    def _walk_back(self, conn: sqlite3.Connection, tip: str, known: int
                   ) -> tuple[list[tuple[Commit, int]], int]:
        """Commits above the newest indexed commit still on main's first-parent chain.

        Returns them oldest first, with the seq of that common commit (-1: none).
        """
        objs = self.mirror.objects
        out: list[tuple[Commit, int]] = []
        oid: str | None = tip
        while oid is not None:
            commit = objs.commit(oid)
            seq = commit_seq(commit)
            if seq <= known:
                row = conn.execute("SELECT oid FROM events WHERE seq = ?", (seq,)).fetchone()
                if row is not None and row[0] == oid:
                    out.reverse()
                    return out, seq
            out.append((commit, seq))
            oid = commit.parents[0] if commit.parents else None
        out.reverse()
        return out, -1

    def _roll_back(self, conn: sqlite3.Connection, ancestor: int) -> None:
        touched = [r[0] for r in conn.execute(
            "SELECT DISTINCT thread_id FROM events WHERE seq > ? AND thread_id IS NOT NULL",
            (ancestor,))]
        # Whose items each thread has, read before its handoff row may go.
        parties = {tid: conn.execute("SELECT sender, recipient FROM handoffs "
                                     "WHERE thread_id = ?", (tid,)).fetchone()
                   for tid in touched}
        searchindex.roll_back(conn, self.mirror.objects, ancestor)  # reads events: first
        for table in ("events", "handoffs", "profiles"):
            conn.execute(f"DELETE FROM {table} WHERE seq > ?", (ancestor,))
        for tid in touched:
            self._refold_thread(conn, tid, parties[tid])

    def _refold_thread(self, conn: sqlite3.Connection, tid: str,
                       parties: tuple[str, str] | None) -> None:
        conn.execute("DELETE FROM threads WHERE thread_id = ?", (tid,))
        if parties is not None:  # by the primary key's prefix, not a scan of every item
            conn.execute("DELETE FROM items WHERE user_cf IN (?, ?) AND thread_id = ?",
                         (parties[0].casefold(), parties[1].casefold(), tid))
        else:
            conn.execute("DELETE FROM items WHERE thread_id = ?", (tid,))
        rows = conn.execute("SELECT seq, op, actor_cf, at, at_us FROM events "
                            "WHERE thread_id = ? ORDER BY seq", (tid,)).fetchall()
        for seq, op, actor_cf, at, at_us in rows:
            self._fold(conn, seq, op, tid, actor_cf, at, at_us)

    # --- folding one commit -------------------------------------------------------

    def _added_files(self, new: list[tuple[Commit, int]]) -> ListedFiles:
        """The file each of many commits added, as ``git log --raw`` lists them: one
        process walks the trees in C, beside this one, instead of five tree reads per
        commit here.

        Only commits in the object store (not the outbox's journal) and those that
        add exactly one file; the others are read as one commit would be.
        """
        relay = self.mirror.relay_main()
        oids = {c.oid for c, _ in new}
        if relay is None or relay not in oids:
            return ListedFiles(None, set())
        base = new[0][0].parents[:1]
        proc = stream_git(["log", "--format=%H", "--raw", "--no-abbrev", "--no-renames",
                           "--first-parent", "--reverse", relay, *(f"^{b}" for b in base)],
                          git_dir=self.mirror.path, env=hermetic_env())
        return ListedFiles(proc, oids)

    def _added_file(self, conn: sqlite3.Connection, commit: Commit, op: str, actor: str
                    ) -> tuple[str, str] | None:
        """The path and blob id of the file ``commit`` added.

        Commits on the mirror's main were checked with the gate's rules, so the
        trailers name the operation and thread truthfully and the path follows
        from them (a message is the thread's next number): a few tree reads
        instead of a diff of the whole path. Falls back to the diff.
        """
        objs = self.mirror.objects
        tid = commit.trailers.get(layout.TRAILER_THREAD)
        path: str | None = None
        if op == layout.OP_REGISTER:
            path = layout.profile_path(actor, RelayView(objs, commit.tree).sharded)
        elif tid is not None and op == layout.OP_HANDOFF:
            path = layout.handoff_path(tid)
        elif tid is not None and op in _MESSAGE_OPS:
            row = conn.execute("SELECT messages FROM threads WHERE thread_id = ?",
                               (tid,)).fetchone()
            if row is not None:
                path = layout.message_path(tid, int(row[0]) + 1)
        elif tid is not None and op in STATUS_AFTER:
            path = layout.transition_path(tid, op)
        if path is not None:
            blob = _blob_at(objs, commit.tree, path)
            if blob is not None:
                return path, blob
        parent_tree = objs.commit(commit.parents[0]).tree if commit.parents else None
        changes = [c for c in diff_trees(objs, parent_tree, commit.tree) if c.new is not None]
        if len(changes) != 1 or changes[0].new is None:
            return None
        return changes[0].path, changes[0].new.oid

    def _apply(self, conn: sqlite3.Connection, commit: Commit, seq: int,
               known: tuple[str, str] | None = None) -> None:
        """Fold one commit in; ``known``: the path and blob it added, when listed already."""
        objs = self.mirror.objects
        op = commit.trailers.get(layout.TRAILER_OP, "")
        actor = commit.trailers.get(layout.TRAILER_ACTOR, "")
        # An archive moves closed threads' files aside: no item, no thread changes.
        added = None if op in (layout.OP_INIT, layout.OP_ARCHIVE) or not commit.parents \
            else known or self._added_file(conn, commit, op, actor)
        if added is None:
            conn.execute("INSERT INTO events(seq, oid, op, thread_id, actor_cf, at, at_us) "
                         "VALUES (?, ?, ?, NULL, ?, '', 0)", (seq, commit.oid, op,
                                                              actor.casefold()))
            return
        path, blob = added
        ref = layout.classify(path)
        doc: dict[str, Any] = json.loads(objs.blob(blob))
        kind = ref.kind if ref is not None else ""
        if kind == "profile":
            at = str(doc["registered_at"])
            conn.execute("INSERT OR REPLACE INTO profiles(handle_cf, handle, name, role, seq) "
                         "VALUES (?, ?, ?, ?, ?)", (str(doc["handle"]).casefold(), doc["handle"],
                                                    doc["name"], doc["role"], seq))
            conn.execute("INSERT INTO events(seq, oid, op, thread_id, actor_cf, at, at_us) "
                         "VALUES (?, ?, ?, NULL, ?, ?, ?)",
                         (seq, commit.oid, layout.OP_REGISTER, actor.casefold(), at, time_us(at)))
            return
        if kind == "profile_update":  # views show a teammate's current name and role
            conn.execute("UPDATE profiles SET name = ?, role = ? WHERE handle_cf = ?",
                         (doc["name"], doc["role"], str(doc["handle"]).casefold()))
        tid = ref.thread_id if ref is not None else None
        at = str(doc.get("created_at") or doc.get("at") or doc.get("updated_at") or "")
        at_us = time_us(at) if at else 0
        if kind == "handoff":
            summary = str(doc["summary"])
            conn.execute("INSERT OR REPLACE INTO handoffs(thread_id, seq, sender, recipient, "
                         "intent, summary_preview, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (tid, seq, doc["sender"], doc["recipient"], doc["intent"],
                          summary[:SUMMARY_PREVIEW_CHARS], doc["created_at"]))
            op = layout.OP_HANDOFF
        elif kind == "message":
            op = layout.OP_DRAFT if doc.get("type") == "draft" else layout.OP_MESSAGE
        elif kind == "profile_update":
            op = layout.OP_PROFILE
        else:
            op = kind
        conn.execute("INSERT INTO events(seq, oid, op, thread_id, actor_cf, at, at_us) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (seq, commit.oid, op, tid, actor.casefold(), at, at_us))
        if tid is not None:
            self._fold(conn, seq, op, tid, actor.casefold(), at, at_us)
            searchindex.fold(conn, seq, op, tid, doc, blob, actor.casefold())

    @staticmethod
    def _fold(conn: sqlite3.Connection, seq: int, op: str, tid: str, actor_cf: str, at: str,
              at_us: int) -> None:
        """Apply one thread event to the thread's row and to the item it moves."""
        handoff = conn.execute("SELECT sender, recipient FROM handoffs WHERE thread_id = ?",
                               (tid,)).fetchone()
        if handoff is None:
            return
        sender, recipient = handoff
        status: str | None = PENDING
        if op == layout.OP_HANDOFF:
            conn.execute("INSERT OR REPLACE INTO threads(thread_id, status, updated_at, "
                         "updated_us, messages) VALUES (?, ?, ?, ?, 0)",
                         (tid, PENDING, at, at_us))
        else:
            row = conn.execute(
                "UPDATE threads SET status = coalesce(?, status), "
                "messages = messages + ?, "
                "updated_at = CASE WHEN ? > updated_us THEN ? ELSE updated_at END, "
                "updated_us = max(updated_us, ?) WHERE thread_id = ? RETURNING status",
                (STATUS_AFTER.get(op), 1 if op in _MESSAGE_OPS else 0, at_us, at, at_us,
                 tid)).fetchone()
            status = row[0] if row is not None else None
        is_open = 1 if status in OPEN_STATUSES else 0
        if not is_open:
            # A thread's items are its two participants': the primary key's prefix finds
            # them (an `open = 1` term would send SQLite through every open item instead).
            conn.execute("UPDATE items SET open = 0 WHERE user_cf IN (?, ?) AND thread_id = ?",
                         (sender.casefold(), recipient.casefold(), tid))
        kind = ITEM_KIND.get(op)
        target = recipient if actor_cf == handle_key(sender) else sender
        if kind is None or handle_key(target) == actor_cf:
            return
        other = sender if target == recipient else recipient
        user_cf = target.casefold()
        conn.execute(
            "INSERT INTO items(user_cf, thread_id, kind, item_id, seq, at, at_us, other, "
            "other_cf, open) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(user_cf, thread_id, kind) DO UPDATE SET seq = excluded.seq, "
            "at = excluded.at, at_us = excluded.at_us, open = excluded.open",
            (user_cf, tid, kind, item_id_for(target, tid, kind), seq, at, at_us, other,
             other.casefold(), is_open))

    # --- reading ----------------------------------------------------------------------

    def _conn_for_read(self) -> sqlite3.Connection:
        # The connection of the last update, even if the file was deleted since: its
        # answers are those of that update. The next update notices and rebuilds.
        if self._conn is None:
            self.update()
        assert self._conn is not None
        return self._conn

    @contextlib.contextmanager
    def session(self) -> Iterator[Index]:
        """Hold the index for one update-then-read sequence (threads of this process)."""
        with self._lock:
            yield self

    def reader(self) -> sqlite3.Connection:
        """The connection to read from, inside :meth:`session` after an :meth:`update`."""
        return self._conn_for_read()

    def tip_seq(self) -> int:
        with self._lock:
            meta = self._meta(self._conn_for_read())
            return int(meta.get("tip_seq", "-1"))

    def sync_acks(self, user: str, inbox_oid: str | None, upto: int,
                  acked: dict[str, int]) -> None:
        """Make the ``acks`` rows of ``user`` those of the inbox state ``inbox_oid``."""
        key = f"acks:{user.casefold()}"
        value = f"{inbox_oid or 'none'}:{upto}"
        with self._lock:
            conn = self._conn_for_read()
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row is not None and row[0] == value:
                return
            with self._write(conn):
                conn.execute("DELETE FROM acks WHERE user_cf = ?", (user.casefold(),))
                conn.executemany("INSERT INTO acks(user_cf, item_id, seq) VALUES (?, ?, ?)",
                                 [(user.casefold(), i, s) for i, s in acked.items()])
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                             (key, value))

    _SELECT = ITEM_SELECT  # shared with the hooks' reader (relay.inboxpeek)

    def page(self, user: str, *, upto: int, statuses: Sequence[str] | None = None,
             since_us: int | None = None, unread_only: bool = False, descending: bool = False,
             position: tuple[int, str] | None = None, limit: int = 50,
             floor: int | None = None) -> list[ItemRow]:
        """Up to ``limit`` items of ``user`` after ``position`` in (seq, item_id) order;
        with ``floor`` (an `after` listing's seq), only the items above it and the unread
        ones at or below it (an unread item never falls behind a cursor: docs/inbox.md).

        ``upto`` is the user's acked_up_to; the acks rows must be synced first.
        """
        sql = [self._SELECT]
        params: dict[str, Any] = {"user": user.casefold(), "upto": upto, "limit": limit}
        if statuses is not None:
            names = []
            for n, status in enumerate(statuses):
                params[f"s{n}"] = status
                names.append(f":s{n}")
            if statuses and OPEN_STATUSES.issuperset(statuses):
                # Open threads only (the default): walk the open items in order, not
                # every item of every thread the user has had (items_open).
                sql.append(" AND i.open = 1")
            sql.append(f" AND t.status IN ({', '.join(names) or 'NULL'})")
        if since_us is not None:
            sql.append(" AND i.at_us > :since")
            params["since"] = since_us
        if unread_only:
            sql.append(" AND i.seq > :upto AND coalesce(a.seq, 0) < i.seq")
        if position is not None:
            params["pseq"], params["pid"] = position
            sql.append(" AND (i.seq, i.item_id) < (:pseq, :pid)" if descending
                       else " AND (i.seq, i.item_id) > (:pseq, :pid)")
        if floor is not None:
            # Nothing at or below both the floor and acked_up_to qualifies: the walk in
            # seq order starts there (items_seq), not at the user's first item.
            params["floor"], params["low"] = floor, min(floor, upto)
            sql.append(" AND i.seq > :low AND (i.seq > :floor"
                       " OR (i.seq > :upto AND coalesce(a.seq, 0) < i.seq))")
        order = "DESC" if descending else "ASC"
        sql.append(f" ORDER BY i.seq {order}, i.item_id {order} LIMIT :limit")
        query = "".join(sql)
        key = (query, *sorted(params.items()))
        with self._lock:
            conn = self._conn_for_read()
            version = self._answers_version(conn)
            cached = self._pages.get(key)
            if cached is not None and cached[0] == version:
                return list(cached[1])
            rows = [_row(r) for r in conn.execute(query, params).fetchall()]
            if len(self._pages) >= _PAGES_KEPT:
                self._pages.clear()
            self._pages[key] = (version, rows)
        return list(rows)

    def item(self, user: str, item_id: str, *, upto: int = 0) -> ItemRow | None:
        with self._lock:
            row = self._conn_for_read().execute(
                self._SELECT + " AND i.item_id = :item",
                {"user": user.casefold(), "upto": upto, "item": item_id}).fetchone()
        return _row(row) if row is not None else None

    def item_seqs(self, user: str, low: int, high: int) -> list[tuple[str, int]]:
        """(item_id, seq) of ``user``'s items with low < seq <= high."""
        with self._lock:
            return [(r[0], int(r[1])) for r in self._conn_for_read().execute(
                "SELECT item_id, seq FROM items WHERE user_cf = ? AND seq > ? AND seq <= ? "
                "ORDER BY seq", (user.casefold(), low, high))]

    def max_item_seq(self, user: str) -> int:
        with self._lock:
            row = self._conn_for_read().execute(
                "SELECT max(seq) FROM items WHERE user_cf = ?", (user.casefold(),)).fetchone()
        return int(row[0]) if row[0] is not None else 0

    def thread_facts(self, tid: str) -> dict[str, Any] | None:
        """Sender, recipient, status, summary preview and creation time of a thread."""
        with self._lock:
            row = self._conn_for_read().execute(
                "SELECT h.sender, h.recipient, t.status, h.summary_preview, h.created_at "
                "FROM handoffs h JOIN threads t ON t.thread_id = h.thread_id "
                "WHERE h.thread_id = ?", (tid,)).fetchone()
        if row is None:
            return None
        return dict(zip(("sender", "recipient", "status", "summary_preview", "created_at"),
                        row, strict=True))

    def stall_clocks(self, user: str) -> list[StallClock]:
        """The open threads of ``user`` and when each last moved (:mod:`.news`); kept,
        like a page, until the database changes (the clock is applied by the caller)."""
        return self._kept_rows(STALL_SELECT, {"handle": user}, user, StallClock)

    def claims_seen(self, user: str) -> list[SeenClaim]:
        """The claims seen on the handoffs ``user`` sent (:func:`.news.claimed_handoffs`
        folds them), oldest first."""
        return self._kept_rows(CLAIM_SELECT, {"user": user.casefold()}, user, SeenClaim)

    def _kept_rows(self, select: str, params: dict[str, str], user: str,
                   row: Callable[..., T]) -> list[T]:
        """The rows of ``select`` for ``user``, each made a ``row``; kept, like a page,
        until the database changes."""
        key = (select, user.casefold())
        with self._lock:
            conn = self._conn_for_read()
            version = self._answers_version(conn)
            cached = self._kept.get(key)
            if cached is not None and cached[0] == version:
                return list(cached[1])
            rows = [row(*r) for r in conn.execute(select, params)]
            if len(self._kept) >= _PAGES_KEPT:
                self._kept.clear()
            self._kept[key] = (version, rows)
        return list(rows)

    def stall_days(self) -> int:
        """The relay's stall_days, as the last update recorded it."""
        with self._lock:
            row = self._conn_for_read().execute("SELECT value FROM meta WHERE key = ?",
                                                (STALL_META,)).fetchone()
        return int(row[0]) if row is not None and str(row[0]).isdigit() else \
            stall_days(self.mirror.view().config)

    def profile(self, handle: str) -> tuple[str, str] | None:
        with self._lock:
            row = self._conn_for_read().execute(
                "SELECT name, role FROM profiles WHERE handle_cf = ?",
                (handle.casefold(),)).fetchone()
        return (str(row[0]), str(row[1])) if row is not None else None

    def events(self, after: int = 0, ops: Sequence[str] | None = None
               ) -> list[tuple[int, str, str, str | None, str, int]]:
        """The operations above seq ``after`` (only those named in ``ops``, if given),
        oldest first, as the index holds them: (seq, commit, operation, thread, actor
        casefolded, time in microseconds)."""
        where = "seq > ?"
        args: list[Any] = [after]
        if ops is not None:
            where += f" AND op IN ({', '.join('?' * len(ops))})"
            args += list(ops)
        with self._lock:
            rows = self._conn_for_read().execute(
                f"SELECT seq, oid, op, thread_id, actor_cf, at_us FROM events WHERE {where} "
                "ORDER BY seq", args).fetchall()
        return rows

    def counts(self) -> dict[str, int]:
        with self._lock:
            conn = self._conn_for_read()
            out = {}
            for table in ("events", "threads", "items", "profiles"):
                out[table] = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            out["messages"] = int(conn.execute(
                "SELECT count(*) FROM events WHERE op IN ('message', 'draft')").fetchone()[0])
            return out


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """A lock timeout (another process writing), as opposed to damage."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _us_or_zero(stamp: str) -> int:
    try:
        return time_us(stamp)
    except (TypeError, ValueError):
        return 0


def _blob_at(objs: Objects, tree: str, path: str) -> str | None:
    """The blob id at ``path`` below ``tree``, scanning raw tree objects.

    Equivalent to ``objs.entry`` for one path, without building an entry object
    for every name on the way: the index rebuild reads five trees per commit.
    """
    oid = tree
    parts = path.split("/")
    for depth, part in enumerate(parts):
        kind, data = objs.raw(oid)
        if kind != "tree":
            return None
        name = part.encode()
        pos, end, found = 0, len(data), None
        while pos < end:
            space = data.index(b" ", pos)
            nul = data.index(b"\x00", space)
            if data[space + 1:nul] == name:
                found = (data[pos:space], data[nul + 1:nul + 21].hex())
                break
            pos = nul + 21
        if found is None:
            return None
        mode, oid = found
        if (mode == b"40000") != (depth < len(parts) - 1):
            return None
    return oid


def _row(r: Sequence[Any]) -> ItemRow:
    return ItemRow(item_id=r[0], seq=int(r[1]), kind=r[2], thread_id=r[3], at=r[4], other=r[5],
                   other_name=r[6], other_role=r[7], sender=r[8], status=r[9],
                   summary_preview=r[10], created_at=r[11], unread=bool(r[12]),
                   unread_messages=int(r[13]))


_OPEN: dict[str, Index] = {}
_OPEN_LOCK = threading.Lock()
_OPEN_MAX = 16
_RESOLVED: dict[str, str] = {}  # a mirror path as given -> resolved (the key of _OPEN)


def open_index(mirror: Mirror) -> Index | None:
    """The Index of ``mirror`` if this process holds it open already, else None."""
    key = _RESOLVED.get(str(mirror.path))
    with _OPEN_LOCK:
        return _OPEN.get(key) if key is not None else None


def index_for(mirror: Mirror) -> Index:
    """The process-wide Index of ``mirror``'s directory (a few kept open, least recent closed)."""
    raw = str(mirror.path)
    key = _RESOLVED.get(raw)
    if key is None:
        if len(_RESOLVED) > 256:
            _RESOLVED.clear()
        key = _RESOLVED[raw] = str(Path(raw).resolve())
    with _OPEN_LOCK:
        idx = _OPEN.pop(key, None)
        if idx is None:
            idx = Index(mirror)
        idx.mirror = mirror
        _OPEN[key] = idx
        while len(_OPEN) > _OPEN_MAX:
            _OPEN.pop(next(iter(_OPEN))).close()
        return idx


@dataclass
class ReindexReport:
    operations: int
    threads: int
    messages: int
    seconds: float
    path: str

    def text(self) -> str:
        counted = ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in
                            ((self.threads, "thread"), (self.messages, "message")))
        return (f"reindexed {self.operations} operations ({counted}) in "
                f"{self.seconds:.2f} s into {self.path}")


def reindex(mirror: Mirror) -> ReindexReport:
    """Rebuild the index of ``mirror`` from the whole history (``gitrelay reindex``)."""
    idx = index_for(mirror)
    start = time.perf_counter()
    idx.rebuild()
    counts = idx.counts()
    return ReindexReport(counts["events"], counts["threads"], counts["messages"],
                         time.perf_counter() - start, str(idx.path))
