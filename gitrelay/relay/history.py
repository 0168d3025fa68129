"""The handoff history, read from the relay's commits.

Each commit on ``main`` is one operation; its trailers (checked by the gate
against the file the commit adds) say which operation, on which thread, by
whom and at which sequence number. :func:`history` walks the user's mirror
newest first — the verified relay plus the user's own queued operations —
and reads each operation's file for the text to show, never the commit
subject, which the gate does not check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitrelay.core import layout
from gitrelay.core.archive import archived_threads
from gitrelay.core.errors import RelayError
from gitrelay.core.objects import Commit, diff_trees
from gitrelay.store.mirror import Mirror


@dataclass
class HistoryEntry:
    commit: str
    seq: int
    op: str
    thread_id: str | None
    actor: str
    at: str
    path: str
    doc: dict[str, Any]
    queued: bool = False

    @property
    def text(self) -> str:
        """What happened, in a sentence (teammate text raw: clean it before printing)."""
        d = self.doc
        if self.op == layout.OP_INIT:
            return f"relay {d.get('name', '')} created"
        if self.op == layout.OP_REGISTER:
            return f"{d.get('handle')} joined as {d.get('role')}: {d.get('name')}"
        if self.op == layout.OP_PROFILE:
            return (f"{d.get('handle')} corrected their profile: {d.get('name')}, "
                    f"{d.get('role')}")
        if self.op == layout.OP_HANDOFF:
            return (f"{d.get('sender')} → {d.get('recipient')} ({d.get('intent')}): "
                    f"{d.get('summary')}")
        if self.op == layout.OP_MESSAGE:
            return f"{d.get('from')} #{d.get('sequence_no')}: {d.get('body')}"
        if self.op == layout.OP_DRAFT:
            return f"{d.get('from')} #{d.get('sequence_no')} drafted a diff: {d.get('body')}"
        if self.op == layout.OP_ACCEPT:
            return f"{d.get('by')} accepted"
        if self.op == layout.OP_COMPLETE:
            return f"{d.get('by')} completed: {d.get('result_summary')}"
        if self.op == layout.OP_CANCEL:
            reason = d.get("reason")
            return f"{d.get('by')} cancelled" + (f": {reason}" if reason else "")
        if self.op == layout.OP_ARCHIVE:
            n = len(d.get("threads", []))
            return f"{self.actor} archived {n} closed thread{'s' if n != 1 else ''}"
        return f"{self.actor} {self.op}"

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "seq": self.seq, "op": self.op,
                "thread_id": self.thread_id, "actor": self.actor, "at": self.at,
                "text": self.text, "queued": self.queued}


def _committed_at(commit: Commit) -> str:
    import datetime as dt

    parts = commit.committer.rsplit(" ", 2)
    try:
        stamp = dt.datetime.fromtimestamp(int(parts[-2]), dt.UTC)
    except (ValueError, IndexError):
        return ""
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(mirror: Mirror, commit: Commit, queued: bool) -> HistoryEntry:
    objs = mirror.objects
    trailers = commit.trailers
    path, doc = "", {}
    if trailers.get(layout.TRAILER_OP) == layout.OP_ARCHIVE:
        try:
            doc = {"threads": archived_threads(objs, commit)[0]}
        except (RelayError, KeyError, ValueError):  # not a valid archive: nothing to list
            doc = {"threads": []}
        changes = []
    else:
        parent_tree = objs.commit(commit.parents[0]).tree if commit.parents else None
        changes = diff_trees(objs, parent_tree, commit.tree)
    if len(changes) == 1 and changes[0].new is not None:
        path = changes[0].path
        try:
            loaded = json.loads(objs.blob(changes[0].new.oid))
            doc = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            doc = {}
    at = str(doc.get("created_at") or doc.get("at") or doc.get("registered_at")
             or _committed_at(commit))
    seq_text = trailers.get(layout.TRAILER_SEQ, "")
    return HistoryEntry(
        commit=commit.oid, seq=int(seq_text) if seq_text.isdigit() else -1,
        op=trailers.get(layout.TRAILER_OP, "?"), thread_id=trailers.get(layout.TRAILER_THREAD),
        actor=trailers.get(layout.TRAILER_ACTOR, ""), at=at, path=path, doc=doc, queued=queued)


def walk(mirror: Mirror) -> Iterator[tuple[Commit, bool]]:
    """Commits of the user's ``main`` (relay plus outbox), newest first, with
    whether each is still queued."""
    relay = mirror.relay_main()
    oid = mirror.main()
    queued = oid is not None and oid != relay
    while oid:
        if oid == relay:
            queued = False
        commit = mirror.objects.commit(oid)
        yield commit, queued
        oid = commit.parents[0] if commit.parents else None


def history(mirror: Mirror, *, thread_id: str | None = None, limit: int | None = None
            ) -> list[HistoryEntry]:
    """The operations on the relay, newest first; only one thread's when ``thread_id``.

    A thread's history stops at its handoff: nothing older can belong to it.
    """
    out: list[HistoryEntry] = []
    for commit, queued in walk(mirror):
        if limit is not None and len(out) >= limit:
            break
        if thread_id is not None and commit.trailers.get(layout.TRAILER_THREAD) != thread_id:
            continue
        entry = _entry(mirror, commit, queued)
        out.append(entry)
        if thread_id is not None and entry.op == layout.OP_HANDOFF:
            break
    return out


def queued(mirror: Mirror) -> list[HistoryEntry]:
    """The user's operations not yet on the relay (the outbox), oldest first."""
    out = []
    for commit, is_queued in walk(mirror):
        if not is_queued:
            break
        out.append(_entry(mirror, commit, True))
    out.reverse()
    return out
