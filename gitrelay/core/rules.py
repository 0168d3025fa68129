"""The relay's rules: what a commit may do, checked the same way everywhere.

The pre-receive gate, the client before every push, verify-on-read after
every fetch and ``gitrelay verify`` all call :func:`check_commit` (for
``main``) and :func:`check_inbox_commit` (for per-user refs). Each refusal is
a :class:`~gitrelay.core.errors.RelayError` whose ``data['rule']`` names the rule
(docs/gate-rules.md lists them all). The rules themselves live by concept:
:mod:`~gitrelay.core.commits` (trailers, message, author),
:mod:`~gitrelay.core.identity` (pusher, signatures, registration),
:mod:`~gitrelay.core.threadstate` (the thread state machine),
:mod:`~gitrelay.core.archive` and :mod:`~gitrelay.core.view` (the read model).

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout, schema
from gitrelay.core.archive import check_archive
from gitrelay.core.commits import (
    Operation,
    check_author,
    check_message_text,
    check_trailer_repeats,
    check_trailers,
    commit_seq,
    load_written,
    object_error,
)
from gitrelay.core.errors import RelayError
from gitrelay.core.errors import error_for_rule as refuse
from gitrelay.core.identity import check_identity, check_profile_update, check_registration
from gitrelay.core.ids import same_handle
from gitrelay.core.objects import (
    MODE_BLOB,
    MODE_EXEC,
    MODE_GITLINK,
    MODE_LINK,
    MODE_TREE,
    Change,
    Commit,
    Objects,
    TreeEntry,
    diff_trees,
)
from gitrelay.core.terminal import shown
from gitrelay.core.threadstate import check_handoff, check_thread_action
from gitrelay.core.view import RelayView

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from gitrelay.core.identity import Pusher, SignatureCheck

def _replaces_operation(changes: list[Change]) -> bool:
    """True when a commit's only change rewrites one existing operation file."""
    if len(changes) != 1:
        return False
    ch = changes[0]
    if ch.old is None or ch.new is None or ch.old.mode != MODE_BLOB:
        return False
    ref = layout.classify(ch.path)
    # Thread files only: a rewritten profile or config stays plainly append-only.
    return ref is not None and ref.thread_id is not None


def _added_file(view_objs: Objects, commit: Commit,
                parent_tree: str | None) -> tuple[str, TreeEntry, bool]:
    """The one file a commit adds, and whether it rewrites an existing operation file.

    A rewrite is still refused (append-only), but only after the commit was
    judged as the operation it claims to be, so that accepting twice reads as
    invalid_transition and reusing a thread id as thread-exists.
    """
    short = commit.oid[:12]
    changes = diff_trees(view_objs, parent_tree, commit.tree)
    replaced = _replaces_operation(changes)
    for ch in changes:
        if ch.old is not None and ch.new is not None and not replaced:
            raise refuse("append-only", f"commit {short} changes {shown(ch.path)}; relay files are "
                         "never changed once committed", commit=commit.oid, field=ch.path)
        if ch.new is None:
            raise refuse("append-only", f"commit {short} deletes {shown(ch.path)}; relay files are "
                         "never deleted (closed threads leave main's tree only through an "
                         "archive operation)", commit=commit.oid, field=ch.path)
    for ch in changes:
        assert ch.new is not None
        mode = ch.new.mode
        if mode == MODE_TREE:
            raise refuse("layout", f"commit {short} adds an empty directory {shown(ch.path)}",
                         commit=commit.oid, field=ch.path)
        if mode == MODE_LINK:
            raise refuse("file-mode", f"commit {short} adds a symlink {shown(ch.path)}",
                         commit=commit.oid, field=ch.path)
        if mode == MODE_GITLINK:
            raise refuse("file-mode", f"commit {short} adds a submodule {shown(ch.path)}",
                         commit=commit.oid, field=ch.path)
        if mode == MODE_EXEC:
            raise refuse("file-mode", f"commit {short} adds an executable file {shown(ch.path)}",
                         commit=commit.oid, field=ch.path)
        if mode != MODE_BLOB:
            raise refuse("file-mode", f"commit {short} adds {shown(ch.path)} with mode {mode}",
                         commit=commit.oid, field=ch.path)
        if layout.classify(ch.path) is None:
            raise refuse("layout", f"commit {short} adds {shown(ch.path)}, which has no place "
                         "in the relay layout (docs/format.md)", commit=commit.oid, field=ch.path)
    if len(changes) != 1:
        paths = ", ".join(shown(ch.path) for ch in changes[:5]) or "nothing"
        raise refuse("one-file-per-operation", f"commit {short} adds {len(changes)} files "
                     f"({paths}); an operation adds exactly one file", commit=commit.oid)
    entry = changes[0].new
    assert entry is not None
    return changes[0].path, entry, replaced


def _naming(commit: Commit, exc: Exception) -> RelayError:
    """The refusal for ``exc``, found while checking ``commit``, naming the commit: an
    object that cannot be read is object_error, and a refusal found below the commit (in a
    tree) gets its id. (No context manager: the gate does not import contextlib.)"""
    if not isinstance(exc, RelayError):
        return object_error(commit, exc)
    if "commit" in exc.data:
        return exc
    return exc.replaced(f"commit {commit.oid[:12]}: {exc.message}", commit=commit.oid)


def check_commit(objs: Objects, commit: Commit, parent: Commit | None, *,
                 pusher: Pusher | None = None,
                 verify_signature: SignatureCheck | None = None) -> Operation:
    """Check one commit on ``main`` against the state at its parent."""
    try:
        return _check_commit(objs, commit, parent, pusher, verify_signature)
    except (KeyError, ValueError, RelayError) as exc:
        raise _naming(commit, exc) from None



def _check_commit(objs: Objects, commit: Commit, parent: Commit | None,
                  pusher: Pusher | None, verify_signature: SignatureCheck | None) -> Operation:
    short = commit.oid[:12]
    if len(commit.parents) > 1 and (len(commit.parents) > 2 or parent is None or commit.trailers
                                    .get(layout.TRAILER_OP) != layout.OP_ARCHIVE):
        raise refuse("linear-history", f"commit {short} is a merge; main is linear "
                     "(rebase instead of merging; only an archive operation has a second "
                     "parent, its snapshot)", commit=commit.oid)
    check_trailer_repeats(commit)
    check_message_text(commit)
    if parent is None:
        return _check_init(objs, commit)
    seq = commit_seq(commit)
    parent_seq = commit_seq(parent)
    if seq != parent_seq + 1:
        raise refuse("trailers", f"commit {short} has {layout.TRAILER_SEQ}: {seq}, expected "
                     f"{parent_seq + 1}", commit=commit.oid, field=layout.TRAILER_SEQ)
    view = RelayView(objs, parent.tree)
    limits = view.limits
    if commit.trailers.get(layout.TRAILER_OP) == layout.OP_ARCHIVE:
        return check_archive(view, commit, parent, seq, pusher, verify_signature)
    path, entry, replaced = _added_file(objs, commit, parent.tree)
    ref = layout.classify(path)
    assert ref is not None
    if ref.kind == "config":
        raise refuse("append-only", f"commit {short} adds {path}; only the first commit may",
                     commit=commit.oid, field=path)
    if ref.kind == "archive":
        raise refuse("archive", f"commit {short} adds {path} without archiving a thread; only "
                     f"a {layout.TRAILER_OP}: {layout.OP_ARCHIVE} commit writes it",
                     commit=commit.oid, field=path)
    if ref.handle is not None:
        _check_teammates_layout(view, commit, path, ref)
    doc = load_written(ref.kind, objs.blob(entry.oid), limits, commit, f"commit {short} {path}")
    op = _op_for(ref.kind, doc)
    actor = str(doc[schema.AUTHOR_FIELD[ref.kind]])
    check_trailers(commit, op, actor, ref.thread_id)
    check_author(commit, actor)
    if ref.kind == "profile":
        check_registration(view, commit, doc, ref.handle or "")
        check_identity(view, commit, actor, pusher, registering=doc,
                       verify_signature=verify_signature)
    elif ref.kind == "profile_update":
        check_profile_update(view, commit, doc, ref.handle or "", ref.sequence_no, pusher,
                             verify_signature=verify_signature)
    else:
        assert ref.thread_id is not None
        if doc.get("thread_id") != ref.thread_id:
            raise refuse("layout", f"commit {short}: {path} says thread_id "
                         f"{doc.get('thread_id')}, but lies in thread {ref.thread_id}",
                         commit=commit.oid, field="thread_id")
        check_identity(view, commit, actor, pusher, verify_signature=verify_signature)
        _check_thread_op(view, commit, ref, doc, limits)
    if replaced:
        raise refuse("append-only", f"commit {short} changes {path}; relay files are never "
                     "changed once committed", commit=commit.oid, field=path)
    if ref.kind == "profile":
        view.registered(commit.tree, doc)
    return Operation(op, seq, actor, path, doc, ref.thread_id, commit.oid)



def _check_teammates_layout(view: RelayView, commit: Commit, path: str,
                            ref: layout.FileRef) -> None:
    """A teammate's file lies in the one layout relay.json names (``teammates_layout``):
    a relay is never both flat and sharded, so no handle is registered in both."""
    if ref.sharded == view.sharded:
        return
    assert ref.handle is not None
    name = path.rpartition("/")[2]
    where = f"{layout.teammate_dir(ref.handle, view.sharded)}/{name}"
    said = (f"teammates_layout {layout.TEAMMATES_SHARDED!r}" if view.sharded
            else f"no teammates_layout {layout.TEAMMATES_SHARDED!r}")
    raise refuse("layout", f"commit {commit.oid[:12]} adds {shown(path)}, but this relay keeps "
                 f"teammates' files in the {'sharded' if view.sharded else 'flat'} layout "
                 f"(relay.json has {said}): that file belongs at {shown(where)}",
                 commit=commit.oid, field=path)


def _op_for(kind: str, doc: Mapping[str, Any]) -> str:
    if kind == "profile":
        return layout.OP_REGISTER
    if kind == "profile_update":
        return layout.OP_PROFILE
    if kind == "message":
        return layout.OP_DRAFT if doc["type"] == "draft" else layout.OP_MESSAGE
    return kind



def _check_init(objs: Objects, commit: Commit) -> Operation:
    short = commit.oid[:12]
    path, entry, _ = _added_file(objs, commit, None)
    if path != layout.CONFIG_PATH:
        raise refuse("layout", f"root commit {short} must add only {layout.CONFIG_PATH}",
                     commit=commit.oid, field=path)
    doc = load_written("config", objs.blob(entry.oid), None, commit,
                        f"root commit {short} {path}")
    if commit.trailers.get(layout.TRAILER_OP) != layout.OP_INIT or commit_seq(commit) != 0:
        raise refuse("trailers", f"root commit {short} must carry {layout.TRAILER_OP}: init "
                     f"and {layout.TRAILER_SEQ}: 0", commit=commit.oid)
    return Operation(layout.OP_INIT, 0, commit.trailers.get(layout.TRAILER_ACTOR, ""), path, doc,
                     None, commit.oid)



def _check_thread_op(view: RelayView, commit: Commit, ref: layout.FileRef,
                     doc: Mapping[str, Any], limits: Mapping[str, int]) -> None:
    short = commit.oid[:12]
    tid = ref.thread_id
    assert tid is not None
    state = view.thread(tid)
    if ref.kind == "handoff":
        check_handoff(view, doc, commit_label=f"commit {short}", commit=commit.oid)
        if state is not None or view.objs.entry(view.tree, layout.shard(tid)) is not None:
            raise refuse("thread-exists", f"commit {short}: thread {tid} already exists "
                         "(its idempotency key was used before)", commit=commit.oid,
                         field="thread_id")
        return
    if state is None:
        raise refuse("thread_not_found", f"commit {short}: thread {tid} does not exist",
                     commit=commit.oid, field="thread_id")
    actor = str(doc[schema.AUTHOR_FIELD[ref.kind]])
    check_thread_action(state, ref.kind, actor, doc, limits,
                        commit_label=f"commit {short}", commit=commit.oid,
                        sequence_no=ref.sequence_no)



def check_inbox_commit(objs: Objects, commit: Commit, owner: str, main_seq: int,
                       view: RelayView, *, pusher: Pusher | None = None,
                       verify_signature: SignatureCheck | None = None) -> dict[str, Any]:
    """Check one commit on ``refs/gitrelay/users/<owner>/inbox``."""
    try:
        return _check_inbox_commit(objs, commit, owner, main_seq, view, pusher,
                                   verify_signature)
    except (KeyError, ValueError, RelayError) as exc:
        raise _naming(commit, exc) from None


def _check_inbox_commit(objs: Objects, commit: Commit, owner: str, main_seq: int,
                        view: RelayView, pusher: Pusher | None,
                        verify_signature: SignatureCheck | None) -> dict[str, Any]:
    short = commit.oid[:12]
    if len(commit.parents) > 1:
        raise refuse("linear-history", f"commit {short} on {owner}'s inbox ref is a merge",
                     commit=commit.oid)
    check_trailer_repeats(commit)
    check_message_text(commit)
    registered = view.profile(owner)
    if registered is not None and registered["handle"] != owner:
        raise refuse("ref-namespace", f"commit {short}: the inbox ref of {owner} must be "
                     f"spelled as the registered handle {registered['handle']}",
                     commit=commit.oid, field="ref")
    entries = objs.tree(commit.tree)
    if [(e.name, e.mode) for e in entries] != [(layout.INBOX_FILE, MODE_BLOB)]:
        raise refuse("layout", f"commit {short} on {owner}'s inbox ref must hold exactly "
                     f"{layout.INBOX_FILE}", commit=commit.oid)
    doc = load_written("inbox", objs.blob(entries[0].oid), view.limits, commit,
                        f"commit {short} {layout.INBOX_FILE}")
    if doc["handle"] != owner:
        raise refuse("actor", f"commit {short}: inbox state of {doc['handle']} on {owner}'s ref",
                     commit=commit.oid, field="handle")
    t = commit.trailers
    if t.get(layout.TRAILER_OP) != layout.OP_INBOX or not same_handle(
            t.get(layout.TRAILER_ACTOR, ""), owner):
        raise refuse("trailers", f"commit {short} on {owner}'s inbox ref must carry "
                     f"{layout.TRAILER_OP}: inbox and {layout.TRAILER_ACTOR}: {owner}",
                     commit=commit.oid)
    check_author(commit, owner)
    check_identity(view, commit, owner, pusher, verify_signature=verify_signature)
    seqs = [doc["acked_up_to"], *(a["seq"] for a in doc["acked"]),
            *(c["seq"] for c in doc["claims"])]
    if max(seqs) > main_seq:
        raise refuse("cursor", f"commit {short}: {owner}'s inbox state names seq {max(seqs)}, "
                     f"but main only reaches seq {main_seq}", commit=commit.oid,
                     field="acked_up_to")
    return doc

