"""Operations: one file added to the relay, as the client prepares it.

An :class:`Op` knows how to place itself on a given state of the relay
(``materialize``: a message takes the next sequence number), how to tell that
it is already there (a retried or replayed delivery), and how to describe
itself in a commit. The outbox replays ops with these when the relay moved.
The archive operation adds no single file: :func:`archive_moves` says which
threads it moves on a given state (``mirror.archive_commit`` builds its trees).
Pure: no I/O beyond the :class:`~gitrelay.core.view.RelayView` it is given.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.errors import ThreadNotFound
from gitrelay.core.terminal import char_class
from gitrelay.core.threadstate import CANCELLED, COMPLETED
from gitrelay.core.view import RelayView, thread_files

SUBJECT_MAX = 72


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The gate refuses these in commit messages (gitrelay.core.terminal): a teammate's text
# must not reach the terminal of someone reading plain `git log`.
_UNSAFE_IN_SUBJECT = re.compile(char_class())


def _clip(text: str, room: int) -> str:
    line = _UNSAFE_IN_SUBJECT.sub("?", " ".join(text.split()))
    return line if len(line) <= room else line[: max(room - 1, 0)] + "…"


@dataclass
class Op:
    kind: str  # file kind: profile, profile_update, handoff, message, accept, complete,
    # cancel; or archive
    doc: dict[str, Any]
    thread_id: str | None = None
    handle: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def actor(self) -> str:
        if self.kind == layout.OP_ARCHIVE:
            return str(self.doc["by"])
        return str(self.doc[schema.AUTHOR_FIELD[self.kind]])

    @property
    def op_name(self) -> str:
        if self.kind == "profile":
            return layout.OP_REGISTER
        if self.kind == "profile_update":
            return layout.OP_PROFILE
        if self.kind == "message":
            return layout.OP_DRAFT if self.doc.get("type") == "draft" else layout.OP_MESSAGE
        return self.kind

    def materialize(self, view: RelayView) -> tuple[str, dict[str, Any]]:
        """The path and document of this op on top of ``view``."""
        if self.kind == "profile":
            return layout.profile_path(str(self.doc["handle"]), view.sharded), self.doc
        if self.kind == "profile_update":
            # The next number on this state of the relay, as a message takes its own.
            handle = str(self.doc["handle"])
            return layout.profile_update_path(handle, view.profile_updates(handle) + 1,
                                              view.sharded), self.doc
        assert self.thread_id is not None
        if self.kind == "handoff":
            return layout.handoff_path(self.thread_id), self.doc
        if self.kind == "message":
            state = view.thread(self.thread_id)
            if state is None:
                raise ThreadNotFound(f"thread {self.thread_id} does not exist",
                                     field="thread_id")
            doc = dict(self.doc, sequence_no=state.last_seq + 1)
            return layout.message_path(self.thread_id, state.last_seq + 1), doc
        return layout.transition_path(self.thread_id, self.kind), self.doc

    def already_applied(self, view: RelayView) -> bool:
        """True when the relay already holds this very operation (a replayed delivery)."""
        objs, tree = view.objs, view.tree
        if self.kind == layout.OP_ARCHIVE:
            return not archive_moves(view, self.doc)
        if self.kind == "profile":
            profile = view.profile(str(self.doc["handle"]))
            return profile is not None and profile == self.doc
        if self.kind == "profile_update":
            handle = str(self.doc["handle"])
            number = view.profile_updates(handle)
            data = schema.dumps(self.doc)
            return any(objs.read_path(tree, layout.profile_update_path(handle, n, view.sharded))
                       == data
                       for n in range(number, 0, -1))
        assert self.thread_id is not None
        found = thread_files(objs, tree, self.thread_id)
        if self.kind == "message":
            for e in found[1] if found else []:
                if e.name.startswith("msg-"):
                    try:
                        stored = json.loads(objs.blob(e.oid))
                    except ValueError:
                        continue
                    if isinstance(stored, dict) and stored.get("id") == self.doc["id"]:
                        return True
            return False
        name = (layout.HANDOFF_FILE if self.kind == "handoff"
                else layout.TRANSITION_FILES[self.kind])
        stored = objs.read_path(found[0], name) if found else None
        return stored is not None and stored == schema.dumps(self.doc)

    def subject(self, doc: dict[str, Any]) -> str:
        tid = (self.thread_id or "")[:10]
        if self.kind == "profile":
            head = f"register {doc['handle']} ({_clip(str(doc['role']), 24)}): "
            return head + _clip(str(doc["name"]), SUBJECT_MAX - len(head))
        if self.kind == "profile_update":
            head = f"profile {doc['handle']} ({_clip(str(doc['role']), 24)}): "
            return head + _clip(str(doc["name"]), SUBJECT_MAX - len(head))
        if self.kind == "handoff":
            head = f"handoff {tid} {doc['sender']} → {doc['recipient']} ({doc['intent']}): "
            return head + _clip(str(doc["summary"]), SUBJECT_MAX - len(head))
        if self.kind == "message":
            what = "draft" if doc.get("type") == "draft" else "message"
            head = f"{what} {tid} #{doc['sequence_no']} {doc['from']}: "
            return head + _clip(str(doc["body"]), SUBJECT_MAX - len(head))
        if self.kind == layout.OP_ARCHIVE:
            n = len(doc["threads"])
            return f"archive {n} closed thread{'s' if n != 1 else ''} by {doc['by']}"
        if self.kind == "complete":
            head = f"complete {tid} by {doc['by']}: "
            return head + _clip(str(doc["result_summary"]), SUBJECT_MAX - len(head))
        return f"{self.kind} {tid} by {doc['by']}"

    def message(self, doc: dict[str, Any], seq: int) -> str:
        lines = [self.subject(doc), ""]
        lines.append(f"{layout.TRAILER_OP}: {self.op_name}")
        if self.thread_id:
            lines.append(f"{layout.TRAILER_THREAD}: {self.thread_id}")
        lines.append(f"{layout.TRAILER_ACTOR}: {self.actor}")
        lines.append(f"{layout.TRAILER_SEQ}: {seq}")
        return "\n".join(lines) + "\n"


def archive_op(by: str, thread_ids: list[str], at: str | None = None) -> Op:
    """The operation archiving ``thread_ids`` (closed threads) as ``by``."""
    return Op(layout.OP_ARCHIVE, {"by": by, "archived_at": at or now_iso(),
                                  "threads": sorted(thread_ids)})


def archive_moves(view: RelayView, doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The threads an archive operation moves out of main's tree on top of ``view``, by
    thread id: the path that leaves the tree (the directory) and the directory's tree.

    Threads archived meanwhile (by someone else) are left out. The rules refuse
    any that is not closed.
    """
    out: dict[str, tuple[str, str]] = {}
    for tid in doc["threads"]:
        entry = view.objs.entry(view.tree, layout.shard(tid))
        if entry is not None and entry.is_tree and view.thread(tid) is not None:
            out[tid] = (layout.shard(tid), entry.oid)
    return out


def closed_threads(view: RelayView, closed_before: float) -> list[tuple[str, str, str]]:
    """Threads in ``view``'s tree closed at ``closed_before`` (unix time) or earlier:
    ``(closed_at, thread_id, status)``, oldest first.

    Reads every thread directory of the tree: a maintenance scan.
    """
    objs = view.objs
    found: list[tuple[str, str, str]] = []
    for c0 in objs.list_dir(view.tree, layout.THREADS_DIR) or []:
        for c1 in objs.tree(c0.oid) if c0.is_tree else []:
            for e in objs.tree(c1.oid) if c1.is_tree else []:
                if not e.is_tree:
                    continue
                tid, directory = e.name, e.oid
                names = {x.name: x for x in objs.tree(directory)}
                for kind, status in (("complete", COMPLETED), ("cancel", CANCELLED)):
                    closing = names.get(layout.TRANSITION_FILES[kind])
                    if closing is None:
                        continue
                    at = str(json.loads(objs.blob(closing.oid))["at"])
                    if _epoch(at) <= closed_before:
                        found.append((at, tid, status))
    found.sort()
    return found


def _epoch(stamp: str) -> float:
    """Seconds since the epoch of a relay time (``2026-05-01T09:14:32[.123456]Z``)."""
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def op_from_file(path: str, doc: dict[str, Any]) -> Op:
    """The op that added ``doc`` at ``path`` (used to replay outbox commits)."""
    ref = layout.classify(path)
    if ref is None or ref.kind == "config":
        raise ValueError(f"{path} is not an operation file")
    return Op(ref.kind, doc, ref.thread_id, ref.handle)
