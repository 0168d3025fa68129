"""A user's local mirror of the relay, and its outbox.

The mirror is a bare repository (under ``$GITRELAY_HOME``) with these refs:

- ``refs/relay/main`` and ``refs/relay/users/*``: the relay as last fetched
  *and verified* (verify-on-read);
- ``refs/heads/main``: ``refs/relay/main`` plus this user's operations not yet
  delivered — the outbox is exactly the commits between the two;
- ``refs/gitrelay/users/<me>/inbox``: this user's inbox state, possibly ahead
  of the relay's copy.

Writing an operation takes a short lock (``gitrelay-refs.lock``), builds the
commit in memory, checks it with the gate's rules and appends it whole to the
outbox journal (:mod:`gitrelay.store.journal`): it is then durable and will be
delivered. While the journal holds records, ``main`` is the last record's tip;
:meth:`Mirror.flush` files them into the object store and moves
``refs/heads/main`` there, and every other change of the mirror's refs (under
:meth:`Mirror.refs_locked`) flushes first. Locks are ``flock`` locks, released
by the kernel when a process dies, so a crash never leaves the store wedged.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrelay.core import faults, layout, schema
from gitrelay.core.archive import archive_base, archived_threads
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import NextStep, RelayError, RelayUnavailable, StateChanged
from gitrelay.core.objects import Commit, Objects
from gitrelay.core.ops import Op, archive_moves, archive_op, now_iso, op_from_file
from gitrelay.core.rules import check_commit
from gitrelay.core.signing import verify_commit_signature
from gitrelay.core.view import RelayView
from gitrelay.store import journal
from gitrelay.store.gitstore import Store
from gitrelay.store.locks import FileMutex, LockTimeout

RELAY_MAIN, RELAY_USERS = layout.RELAY_MAIN, layout.RELAY_USERS
FETCHED_MAIN, FETCHED_USERS = layout.FETCHED_MAIN, layout.FETCHED_USERS
LOCK_TIMEOUT = 60.0

Signer = Callable[[bytes], str]


@dataclass
class Written:
    """An operation committed to the local outbox."""

    op: Op
    commit: str
    seq: int
    path: str
    doc: dict[str, Any]  # as the relay holds it: read back from the file by the checker
    base: str  # the commit it was built on


@dataclass
class Refused:
    """An operation the relay (or a replay onto a newer relay) refused."""

    key: str
    kind: str
    thread_id: str | None
    actor: str
    rule: str
    name: str
    code: int
    message: str
    at: str
    doc: dict[str, Any] = field(default_factory=dict)

    def error(self) -> RelayError:
        from gitrelay.core.errors import ERRORS_BY_NAME

        cls = ERRORS_BY_NAME.get(self.name, RelayError)
        return cls(self.message, rule=self.rule, thread_id=self.thread_id)


FSYNC_ENV = "GITRELAY_FSYNC"


def fsync_requested() -> bool:
    """``GITRELAY_FSYNC=1``: sync each queued operation to disk before answering."""
    return os.environ.get(FSYNC_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def _file_key(st: os.stat_result) -> tuple[int, int, int]:
    """What says a file changed since it was last read: inode, size, mtime."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def _journal_on(ref: str | None, records: list[journal.Record]) -> bool:
    """Whether the journal's records follow the ref: it is their base, or one of their
    commits (a flush that moved the ref was cut short before removing the journal)."""
    return ref == records[0].base or any(ref == r.tip for r in records)


def archive_commit(store: Store, view: RelayView, op: Op, *, when: float | None = None
                   ) -> tuple[str, str, dict[str, Any]]:
    """Main's tree with ``op``'s threads archived on top of ``view``, the snapshot
    commit to give it as second parent, and the operation's document (the
    threads it archives there: any archived meanwhile are left out)."""
    moves = archive_moves(view, op.doc)
    by = str(op.doc["by"])
    before, archived = archive_base(view.objs, view.tree)
    total = archived + len(moves)
    snap_tree = store.tree_edit(view.objs.commit(before).tree if before else None, [], {},
                                {layout.shard(t): oid for t, (_, oid) in moves.items()})
    snapshot = store.commit(tree=snap_tree, parents=[before] if before else [],
                            message=layout.snapshot_message(len(moves), total),
                            author=by, email=by, when=when)
    index = {"format_version": layout.FORMAT_VERSION, "kind": "archive", "snapshot": snapshot,
             "threads": total, "by": by, "archived_at": op.doc["archived_at"]}
    tree = store.tree_edit(view.tree, [path for path, _ in moves.values()],
                           {layout.ARCHIVE_PATH: schema.dumps(index)})
    return tree, snapshot, {**op.doc, "threads": sorted(moves)}


def op_key(op: Op) -> str:
    """A stable identity of an operation across replays."""
    if op.kind == "message":
        return f"message:{op.doc['id']}"
    if op.kind == "profile":
        return f"register:{op.doc['handle']}"
    if op.kind == "profile_update":
        return f"profile:{op.doc['handle']}:{op.doc['updated_at']}"
    if op.kind == layout.OP_ARCHIVE:
        return f"archive:{op.doc['by']}:{op.doc['archived_at']}"
    return f"{op.kind}:{op.thread_id}"


class Mirror:
    def __init__(self, path: Path, handle: str, *, signer: Signer | None = None,
                 fsync: bool | None = None) -> None:
        self.path = Path(path)
        # Queued operations synced to disk before they are answered (GITRELAY_FSYNC).
        self.fsync = fsync_requested() if fsync is None else fsync
        self.path.mkdir(parents=True, exist_ok=True)
        self.handle = handle
        self.signer = signer
        self.store = Store(self.path, create=True)
        self._refs_lock = FileMutex(self.path / "gitrelay-refs.lock")
        self.sync_lock = FileMutex(self.path / layout.SYNC_LOCK_FILE)
        self.refused_path = self.path / layout.REFUSED_FILE
        self.state_path = self.path / "gitrelay-sync.json"
        self.journal_path = self.path / journal.FILENAME
        # The journal as last read: its file's (inode, size, mtime) and records.
        self._journal_key: tuple[int, int, int] | None = None
        self._journal = journal.Contents()
        self._ops: dict[str, Op] = {}
        self._refused: list[Refused] = []
        self._refused_key: tuple[int, int, int] | None = None
        self._state: dict[str, Any] = {}
        self._state_key: tuple[int, int, int] | None = None

    @property
    def objects(self) -> Objects:
        return self.store.objects

    @contextmanager
    def refs_locked(self) -> Iterator[None]:
        """Hold the refs lock, with the outbox journal filed (``main`` is a ref)."""
        with self._locked():
            self._flush_locked()
            yield

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._refs_lock.acquire(timeout=LOCK_TIMEOUT)
        except LockTimeout:
            raise RelayUnavailable(f"another gitrelay process holds {self._refs_lock.path} "
                                   f"for over {LOCK_TIMEOUT:.0f} s",
                                   next_step=NextStep.TRY_AGAIN_SOON) from None
        try:
            yield
        finally:
            self._refs_lock.release()

    # --- reading --------------------------------------------------------------

    def main(self) -> str | None:
        """The local main: the relay as verified plus the outbox (journal included)."""
        records = self._pending()  # before the ref: a flush moves the ref, then clears
        ref = self.store.ref(layout.MAIN_REF)
        if not records:
            return ref
        if _journal_on(ref, records):
            return records[-1].tip
        # The ref moved without the journal (a repair): replay the journal onto it.
        self.flush()
        return self.store.ref(layout.MAIN_REF)

    def _pending(self) -> list[journal.Record]:
        """The journal's records; its objects are readable through ``objects``."""
        try:
            st = os.stat(self.journal_path)
            key = _file_key(st) if st.st_size else None
        except FileNotFoundError:
            key = None
        if key != self._journal_key:
            self._journal = journal.read(self.journal_path) if key else journal.Contents()
            self._journal_key = key
            if not self._journal.records and self.store.source.staging is None:
                self.store.forget_pending()
            for record in self._journal.records:
                for oid, kind, data in record.objects:
                    self.store.source.pending[oid] = (kind, data)
        return self._journal.records

    def relay_main(self) -> str | None:
        return self.store.ref(RELAY_MAIN)

    def view(self, oid: str | None = None) -> RelayView:
        tip = oid or self.main()
        if tip is None:
            raise RelayUnavailable("the local mirror has no copy of the relay yet",
                                   next_step=NextStep.JOIN)
        return RelayView(self.objects, self.objects.commit(tip).tree)

    def commits_between(self, base: str | None, tip: str | None) -> list[Commit]:
        """First-parent commits after ``base`` up to ``tip``, oldest first."""
        out: list[Commit] = []
        oid = tip
        while oid and oid != base:
            commit = self.objects.commit(oid)
            out.append(commit)
            oid = commit.parents[0] if commit.parents else None
        out.reverse()
        return out

    def outbox(self) -> list[Commit]:
        relay = self.relay_main()
        tip = self.main()
        if relay is None or tip is None or tip == relay:
            return []
        return self.commits_between(relay, tip)

    def op_of(self, commit: Commit) -> Op:
        """The operation a commit of the outbox adds (read once per commit)."""
        op = self._ops.get(commit.oid)
        if op is None:
            op = self._op_of(commit)
            self._remember_op(commit.oid, op)
        return op

    def _remember_op(self, oid: str, op: Op) -> None:
        if len(self._ops) > 1024:
            self._ops.clear()
        self._ops[oid] = op

    def _op_of(self, commit: Commit) -> Op:
        parent = commit.parents[0] if commit.parents else None
        from gitrelay.core.objects import diff_trees

        parent_tree = self.objects.commit(parent).tree if parent else None
        if commit.trailers.get(layout.TRAILER_OP) == layout.OP_ARCHIVE:
            threads, by, at = archived_threads(self.objects, commit)
            return archive_op(by, threads, at)
        (change,) = diff_trees(self.objects, parent_tree, commit.tree)
        assert change.new is not None
        doc = json.loads(self.objects.blob(change.new.oid))
        return op_from_file(change.path, doc)

    # --- writing --------------------------------------------------------------

    def build(self, base_oid: str, op: Op) -> Written:
        """Commit ``op`` on top of ``base_oid`` (no ref moves) after checking the rules."""
        base = self.objects.commit(base_oid)
        view = RelayView(self.objects, base.tree)
        seq = commit_seq(base) + 1
        parents = [base_oid]
        if op.kind == layout.OP_ARCHIVE:
            path = ""
            tree, snapshot, doc = archive_commit(self.store, view, op)
            parents.append(snapshot)
            replay = Op(layout.OP_ARCHIVE, doc)  # the threads it archives on this base
        else:
            path, doc = op.materialize(view)
            data = schema.dumps(doc)
            tree = self.store.tree_with(base.tree, path, data)
            replay = op_from_file(path, json.loads(data))
        oid = self.store.commit(tree=tree, parents=parents, message=op.message(doc, seq),
                                author=op.actor, email=op.actor, sign=self.signer)
        # The real checker: a signing key that is not the registered one fails here,
        # before the operation is queued, rather than at the gate.
        try:
            checked = check_commit(self.objects, self.objects.commit(oid), base,
                                   verify_signature=verify_commit_signature)
        except RelayError as exc:
            # A refused commit is never kept: its id would name nothing to whoever
            # reads the error (a person at the CLI, an agent, the refused log).
            raise exc.replaced(exc.message.replace(f"commit {oid[:12]}: ", ""),
                               without=("commit",) if exc.data.get("commit") == oid else ()
                               ) from None
        self._remember_op(oid, replay)
        return Written(op, oid, seq, path, checked.doc, base_oid)

    def append(self, op: Op) -> Written:
        """Check ``op`` against the local state and commit it to the outbox journal."""
        with self._locked():
            base = self.main()
            if base is None:
                raise RelayUnavailable("the local mirror has no copy of the relay yet")
            before = self._journal  # the file as main() just read it (no one else writes)
            with self.store.staging() as staged:
                written = self.build(base, op)
            record = journal.Record(base, written.commit, tuple(staged))
            st = journal.append(self.journal_path, record, before.end, sync=self.fsync)
            # New objects, not changes to the shared ones: another thread may be reading.
            self._journal = journal.Contents([*before.records, record], st.st_size)
            self._journal_key = _file_key(st)
            faults.point("after_local_commit")
            return written

    def flush(self) -> None:
        """File the journal's operations into the object store and move ``main``."""
        with self._locked():
            self._flush_locked()

    def _flush_locked(self) -> None:
        records = self._pending()
        if not records:
            return
        ref = self.store.ref(layout.MAIN_REF)
        tip = records[-1].tip
        # With fsync: on disk before the journal, their only other copy, is emptied.
        with self.store.durable() if self.fsync else nullcontext():
            self.store.file_objects(obj for r in records for obj in r.objects)
            if _journal_on(ref, records):
                if ref != tip:
                    self.store.set_ref(layout.MAIN_REF, tip, "gitrelay: outbox")
            else:
                # main moved without the journal (a repair): replay its operations.
                self._replay([self.objects.commit(r.tip) for r in records],
                             ref or records[0].base, lost_race=True)
        faults.point("after_flush")
        journal.clear(self.journal_path)
        self._journal_key, self._journal = None, journal.Contents()
        self.store.forget_pending()

    def rebase_outbox(self, old_base: str | None, new_base: str) -> list[Refused]:
        """Replay the outbox (commits after ``old_base``) onto ``new_base``.

        Called with the refs lock held. Operations already on ``new_base`` are
        dropped (they were delivered); operations that are no longer legal are
        dropped and recorded as refused (``state_changed``: they lost a race).
        """
        tip = self.main()
        pending = self.commits_between(old_base, tip) if tip else []
        return self._replay(pending, new_base, lost_race=True)

    def drop_from_outbox(self, commit_prefix: str, error: RelayError) -> Refused | None:
        """Remove one outbox operation the gate refused; the rest are replayed."""
        with self.refs_locked():
            outbox = self.outbox()
            victim = next((c for c in outbox if c.oid.startswith(commit_prefix)), None)
            if victim is None and outbox:
                victim = outbox[0]
            if victim is None:
                return None
            refused = self.record_refused(self.op_of(victim), error,
                                          rule=str(error.data.get("rule", error.name)))
            rest = outbox[outbox.index(victim) + 1:]
            # An operation that needed the refused one (a message on a refused
            # handoff's thread) is refused with its own reason, not as a race.
            self._replay(rest, victim.parents[0], lost_race=False)
            return refused

    def _replay(self, commits: list[Commit], base: str, *, lost_race: bool) -> list[Refused]:
        """Rebuild ``commits``' operations on top of ``base`` and move main there.

        An operation already on the new base is skipped (delivered); one that the
        rules now refuse is dropped and recorded — as ``state_changed`` when
        ``lost_race``, else with the rules' own error.
        """
        refused: list[Refused] = []
        for commit in commits:
            op = self.op_of(commit)
            if op.already_applied(RelayView(self.objects, self.objects.commit(base).tree)):
                continue
            try:
                base = self.build(base, op).commit
            except RelayError as exc:
                rule = str(exc.data.get("rule", exc.name))
                error = exc if not lost_race else StateChanged(
                    f"{op.op_name} on {op.thread_id or op.doc.get('handle')} lost a race: "
                    f"{exc.message}", next_step=NextStep.VIEW_THREAD)
                refused.append(self.record_refused(op, error, rule=rule))
        self.store.set_ref(layout.MAIN_REF, base, "gitrelay: replay outbox")
        return refused

    # --- refused operations -----------------------------------------------------

    def record_refused(self, op: Op, error: RelayError, *, rule: str) -> Refused:
        return self.record(Refused(op_key(op), op.kind, op.thread_id, op.actor, rule,
                                   error.name, error.code, error.message, now_iso(), op.doc))

    def record(self, rec: Refused) -> Refused:
        """Append ``rec`` to the refused log (durable before this returns)."""
        line = json.dumps(rec.__dict__, sort_keys=True) + "\n"
        fd = os.open(self.refused_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return rec

    def clear_refused(self, keys: set[str] | None = None) -> int:
        """Forget the refused operations with these keys (all when None), once their
        owner has seen them; how many were forgotten."""
        before = self.refused()
        kept = [r for r in before if keys is not None and r.key not in keys]
        if len(kept) == len(before):
            return 0
        tmp = self.refused_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r.__dict__, sort_keys=True) + "\n" for r in kept))
        os.replace(tmp, self.refused_path)
        self._refused_key = None
        return len(before) - len(kept)

    def refused(self) -> list[Refused]:
        """Every refused operation recorded in this mirror, oldest first.

        Every thread view and inbox page asks; the log is parsed again only
        when the file changed (it only grows, by appends)."""
        try:
            st = os.stat(self.refused_path)
        except FileNotFoundError:
            return []
        key = _file_key(st)
        if key != self._refused_key:
            out = []
            for line in self.refused_path.read_text().splitlines():
                try:
                    out.append(Refused(**json.loads(line)))
                except (ValueError, TypeError):
                    continue
            self._refused, self._refused_key = out, key
        return list(self._refused)

    # --- sync bookkeeping ---------------------------------------------------------

    def sync_state(self) -> dict[str, Any]:
        """The sync bookkeeping (a copy). Every read asks for the last fetch's age;
        the file is parsed again only when it changed (it is replaced whole)."""
        try:
            key: tuple[int, int, int] | None = _file_key(os.stat(self.state_path))
        except FileNotFoundError:
            key = None
        if key != self._state_key:
            data: Any = {}
            if key is not None:
                try:
                    data = json.loads(self.state_path.read_text())
                except (FileNotFoundError, ValueError):
                    data = {}
            self._state = data if isinstance(data, dict) else {}
            self._state_key = key
        return dict(self._state)

    def update_sync_state(self, **values: Any) -> None:
        state = self.sync_state()
        state.update(values)
        tmp = self.state_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, sort_keys=True))
        os.replace(tmp, self.state_path)
        self._state, self._state_key = state, _file_key(os.stat(self.state_path))

    def last_fetch_age(self) -> float:
        return time.time() - float(self.sync_state().get("last_fetch", 0.0))
