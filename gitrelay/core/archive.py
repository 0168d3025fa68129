"""The archive: closed threads' directories leave main's tree for a snapshot.

Reading (where an archived thread lies, what an archive operation archived)
and the rules of an archive operation.

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout, schema
from gitrelay.core.commits import Operation, check_author, load_written
from gitrelay.core.errors import error_for_rule as refuse
from gitrelay.core.identity import check_identity
from gitrelay.core.ids import same_handle
from gitrelay.core.objects import (
    MODE_BLOB,
    Commit,
    Objects,
    TreeEntry,
    diff_trees,
    tree_problem,
)
from gitrelay.core.threadstate import TERMINAL, ThreadState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from gitrelay.core.identity import Pusher, SignatureCheck
    from gitrelay.core.view import RelayView

def archive_index(objs: Objects, tree: str) -> dict[str, Any] | None:
    """``archive.json`` of the relay tree ``tree``, or None before the first archive."""
    data = objs.read_path(tree, layout.ARCHIVE_PATH)
    return None if data is None else schema.load("archive", data)


def archive_base(objs: Objects, tree: str) -> tuple[str | None, int]:
    """What the next archive operation on main's tree ``tree`` builds on: the snapshot
    ``archive.json`` names (None before the first archive) and how many threads it holds."""
    index = archive_index(objs, tree)
    return (str(index["snapshot"]), int(index["threads"])) if index else (None, 0)


def archived_threads(objs: Objects, commit: Commit) -> tuple[list[str], str, str]:
    """What an archive operation's commit archived: the thread ids, by whom, when
    (nothing for a commit without a snapshot as its second parent)."""
    if len(commit.parents) < 2:
        return [], "", ""
    index = archive_index(objs, commit.tree)
    if index is None:
        return [], "", ""
    moved = sorted(snapshot_additions(objs, objs.commit(commit.parents[1]), commit))
    return moved, str(index["by"]), str(index["archived_at"])



# At most this many threads per archive operation: the gate reads each one.
ARCHIVE_MAX_THREADS = 1000


def check_archive(view: RelayView, commit: Commit, parent: Commit, seq: int,
                  pusher: Pusher | None, verify_signature: SignatureCheck | None) -> Operation:
    """An archive operation: closed threads' directories leave main's tree.

    The commit's second parent is the archive snapshot: the previous snapshot's
    tree plus exactly the directories that left, and ``archive.json`` names it.
    """
    short = commit.oid[:12]
    actor = commit.trailers.get(layout.TRAILER_ACTOR, "")
    if layout.TRAILER_THREAD in commit.trailers:
        raise refuse("trailers", f"commit {short}: an archive operation has no "
                     f"{layout.TRAILER_THREAD} trailer; its snapshot names the threads",
                     commit=commit.oid, field=layout.TRAILER_THREAD)
    check_author(commit, actor)
    check_identity(view, commit, actor, pusher, verify_signature=verify_signature)
    if len(commit.parents) != 2:
        raise refuse("archive", f"commit {short} is an archive operation without a "
                     "snapshot: its second parent is the archive snapshot the threads move to",
                     commit=commit.oid, field="snapshot")
    tids = _check_snapshot_archive(view, commit, parent, actor)
    return Operation(layout.OP_ARCHIVE, seq, actor, "", {"threads": tids, "by": actor},
                     None, commit.oid)


def _check_count(commit: Commit, count: int, nothing: str) -> None:
    """An archive operation archives 1 to ARCHIVE_MAX_THREADS threads."""
    if not count:
        raise refuse("archive", f"commit {commit.oid[:12]} is an archive operation that "
                     f"{nothing}", commit=commit.oid)
    if count > ARCHIVE_MAX_THREADS:
        raise refuse("archive", f"commit {commit.oid[:12]} archives {count} threads; at "
                     f"most {ARCHIVE_MAX_THREADS} per operation", commit=commit.oid)


def _closed_thread(view: RelayView, commit: Commit, tid: str, path: str) -> ThreadState:
    """The state of ``tid``, which an archive operation archives: closed, or refused."""
    state = view.thread(tid)
    if state is None:
        raise refuse("archive", f"commit {commit.oid[:12]} archives {tid}, which is no thread",
                     commit=commit.oid, field=path)
    if state.status not in TERMINAL:
        raise refuse("archive", f"commit {commit.oid[:12]} archives thread {tid}, which is "
                     f"{state.status}; only completed or cancelled threads are archived",
                     commit=commit.oid, field=path, status=state.status)
    return state


def _check_snapshot_archive(view: RelayView, commit: Commit, parent: Commit,
                            actor: str) -> list[str]:
    objs = view.objs
    short = commit.oid[:12]
    moved: dict[str, str] = {}  # thread id -> its directory's tree
    index: dict[str, Any] | None = None
    for ch in diff_trees(objs, parent.tree, commit.tree):
        if ch.path == layout.ARCHIVE_PATH and ch.new is not None and ch.new.mode == MODE_BLOB:
            index = load_written("archive", objs.blob(ch.new.oid), view.limits, commit,
                                  f"commit {short} {ch.path}")
            continue
        left = _left_threads(objs, ch.path, ch.old) if ch.new is None else None
        if left is None:
            what = "adds" if ch.old is None else "deletes" if ch.new is None else "changes"
            raise refuse("archive", f"commit {short} {what} {ch.path}; an archive operation "
                         "only moves closed threads' directories to its snapshot and "
                         f"updates {layout.ARCHIVE_PATH}", commit=commit.oid, field=ch.path)
        moved.update(left)
    _check_count(commit, len(moved), "takes no thread out of main's tree (it archives "
                 "nothing)")
    for tid in moved:  # a shard the move left empty goes as a whole, as clients write it
        for up in (layout.shard(tid).rsplit("/", 1)[0], f"{layout.THREADS_DIR}/{tid[0]}"):
            entry = objs.entry(commit.tree, up)
            if entry is not None and entry.is_tree and not objs.tree(entry.oid):
                raise refuse("layout", f"commit {short} leaves the empty directory {up}",
                             commit=commit.oid, field=up)
    if index is None:
        raise refuse("archive", f"commit {short} archives threads without updating "
                     f"{layout.ARCHIVE_PATH}", commit=commit.oid, field=layout.ARCHIVE_PATH)
    previous, archived = archive_base(objs, parent.tree)
    total = archived + len(moved)
    snap_oid = commit.parents[1]
    _check_archive_doc(commit, layout.ARCHIVE_PATH, index,
                       (("snapshot", snap_oid), ("threads", total)), actor)
    snap = objs.commit(snap_oid)
    want_parents = [previous] if previous else []
    if snap.parents != want_parents:
        raise refuse("archive", f"commit {short}: the snapshot {snap_oid[:12]} must have "
                     + (f"the previous snapshot {want_parents[0][:12]} as its one parent"
                        if want_parents else "no parent (it is the relay's first)"),
                     commit=commit.oid, field="snapshot")
    if snap.message != layout.snapshot_message(len(moved), total):
        raise refuse("archive", f"commit {short}: the snapshot {snap_oid[:12]} must say "
                     f"{layout.snapshot_message(len(moved), total).strip()!r}",
                     commit=commit.oid, field="snapshot")
    check_author(snap, actor)
    added = snapshot_additions(objs, snap, commit)
    for tid in sorted(moved.keys() | added.keys()):
        path = layout.shard(tid)
        if added.get(tid) != moved.get(tid):
            raise refuse("archive", f"commit {short}: " + (
                f"thread {tid} leaves main's tree but its snapshot does not hold it as it was"
                if tid in moved else f"its snapshot adds {path}, which did not leave main's "
                "tree"), commit=commit.oid, field=path)
        _closed_thread(view, commit, tid, path)
    return sorted(moved)


def _left_threads(objs: Objects, path: str, entry: TreeEntry | None
                  ) -> dict[str, str] | None:
    """The threads whose directories the removal of ``entry`` at ``path`` takes out of
    main's tree, with their directories' trees; None when it takes anything else out."""
    parts = path.split("/")
    if entry is None or parts[0] != layout.THREADS_DIR:
        return None
    if len(parts) == 4:
        tid = layout.thread_dir_id(path)
        if tid is not None and entry.is_tree:
            return {tid: entry.oid}
        return None
    if not entry.is_tree or len(parts) > 4:
        return None
    out: dict[str, str] = {}
    for e in objs.tree(entry.oid):  # a shard left empty goes as a whole
        inner = _left_threads(objs, f"{path}/{e.name}", e)
        if inner is None:
            return None
        out.update(inner)
    return out


def snapshot_additions(objs: Objects, snap: Commit, commit: Commit) -> dict[str, str]:
    """The thread directories the snapshot ``snap`` adds to its parent's tree (to
    nothing for the first snapshot), by thread id; refuses (naming the archive
    ``commit``) anything else: a removal, a change, a file, a path outside
    ``threads/<c0>/<c1>/<id>``."""

    def walk(old: str | None, new: str, prefix: str, depth: int) -> None:
        olds = {e.name: e for e in objs.tree(old)} if old else {}
        listing = objs.tree(new)
        problem = tree_problem(listing)
        news = {e.name: e for e in listing}
        gone = sorted(olds.keys() - news.keys())
        if not problem and not listing:
            problem = "is empty"
        if problem or gone:
            raise refuse("archive", f"commit {commit.oid[:12]}: its snapshot "
                         + (f"tree {prefix or '/'} {problem}" if problem else
                            f"drops {prefix}{gone[0]}; a snapshot only grows"),
                         commit=commit.oid, field="snapshot")
        for name, e in news.items():
            o = olds.get(name)
            if o is not None and o.oid == e.oid and o.mode == e.mode:
                continue
            path = f"{prefix}{name}"
            if depth < 3 and e.is_tree and (depth or name == layout.THREADS_DIR):
                walk(o.oid if o is not None and o.is_tree else None, e.oid, path + "/",
                     depth + 1)
                continue
            tid = layout.thread_dir_id(path) if depth == 3 and e.is_tree else None
            if tid is None or o is not None:
                raise refuse("archive", f"commit {commit.oid[:12]}: its snapshot "
                             f"{'changes' if o is not None else 'adds'} {path}; a snapshot "
                             "holds thread directories only, each added once",
                             commit=commit.oid, field=path)
            out[tid] = e.oid

    out: dict[str, str] = {}
    walk(objs.commit(snap.parents[0]).tree if snap.parents else None, snap.tree, "", 0)
    return out


def _check_archive_doc(commit: Commit, path: str, doc: Mapping[str, Any],
                       wants: tuple[tuple[str, object], ...], actor: str) -> None:
    """``archive.json`` holds exactly the values ``wants`` names and was written by
    the operation's actor."""
    short = commit.oid[:12]
    for name, want in wants:
        if doc[name] != want:
            raise refuse("archive", f"commit {short} {path} says {name} {doc[name]}, "
                         f"expected {want}", commit=commit.oid, field=f"{path}:{name}")
    if not same_handle(str(doc["by"]), actor):
        raise refuse("actor", f"commit {short} {path} was written by {doc['by']}, but "
                     f"{layout.TRAILER_ACTOR} is {actor!r}", commit=commit.oid,
                     field=f"{path}:by")


