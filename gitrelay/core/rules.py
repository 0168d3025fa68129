"""The relay's rules: what a commit may do, checked the same way everywhere.

The pre-receive gate, the client before every push, verify-on-read after
every fetch and ``gitrelay verify`` all call :func:`check_commit` (for
``main``) and :func:`check_inbox_commit` (for per-user refs). Each refusal is
a :class:`~gitrelay.core.errors.RelayError` whose ``data['rule']`` names the rule
(docs/format.md lists them all).

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout, schema
from gitrelay.core.errors import RelayError, error_for_rule
from gitrelay.core.ids import same_handle, thread_id_for
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
    trailer_pairs,
    tree_problem,
)
from gitrelay.core.terminal import first_unsafe, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

PENDING, ACCEPTED, COMPLETED, CANCELLED = "pending", "accepted", "completed", "cancelled"
TERMINAL = (COMPLETED, CANCELLED)
STATUSES = (PENDING, ACCEPTED, COMPLETED, CANCELLED)


def refuse(rule: str, message: str, **data: Any) -> RelayError:
    return error_for_rule(rule, message, **data)


class ThreadState:
    def __init__(self, thread_id: str, handoff: dict[str, Any], status: str, last_seq: int,
                 names: set[str]) -> None:
        self.thread_id = thread_id
        self.handoff = handoff
        self.status = status
        self.last_seq = last_seq
        self.names = names

    @property
    def sender(self) -> str:
        return str(self.handoff["sender"])

    @property
    def recipient(self) -> str:
        return str(self.handoff["recipient"])


def status_from_names(names: set[str] | frozenset[str]) -> str:
    if layout.TRANSITION_FILES["cancel"] in names:
        return CANCELLED
    if layout.TRANSITION_FILES["complete"] in names:
        return COMPLETED
    if layout.TRANSITION_FILES["accept"] in names:
        return ACCEPTED
    return PENDING


def last_sequence(names: set[str] | frozenset[str]) -> int:
    last = 0
    for name in names:
        if name.startswith("msg-"):
            last = max(last, int(name[4:4 + layout.MESSAGE_DIGITS]))
    return last


class Operation:
    """What one valid commit on ``main`` did."""

    def __init__(self, op: str, seq: int, actor: str, path: str, doc: dict[str, Any],
                 thread_id: str | None = None, commit: str = "") -> None:
        self.op = op
        self.seq = seq
        self.actor = actor
        self.path = path
        self.doc = doc
        self.thread_id = thread_id
        self.commit = commit


# Parsed ``relay.json`` and profile sets, keyed by the ids of the objects they were
# read from: an object id names its content, so a parse is good for any view of
# any repository. Every operation is checked against the team's twelve-odd
# profiles; without this each check would parse them all again.
_CONFIGS: dict[str, dict[str, Any]] = {}
_PROFILE_SETS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
_PROFILES: dict[tuple[str, str, str], dict[str, Any] | None] = {}
_PARSED_MAX = 64


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _PARSED_MAX:
        cache.clear()
    cache[key] = value


class RelayView:
    """Read access to the relay's state at one tree, with small caches.

    ``config`` and ``profiles()`` are shared between views of trees holding the
    same ``relay.json`` blob and ``teammates`` tree; treat them as read-only.
    """

    def __init__(self, objs: Objects, tree: str) -> None:
        self.objs = objs
        self.tree = tree
        self._config: dict[str, Any] | None = None
        self._config_oid = ""
        self._profiles: dict[str, dict[str, Any]] | None = None

    @property
    def config(self) -> dict[str, Any]:
        if self._config is None:
            entry = self.objs.entry(self.tree, layout.CONFIG_PATH)
            if entry is None or entry.is_tree:
                raise refuse("layout", f"the relay has no {layout.CONFIG_PATH}")
            cached = _CONFIGS.get(entry.oid)
            if cached is None:
                cached = schema.load("config", self.objs.blob(entry.oid))
                _remember(_CONFIGS, entry.oid, cached)
            self._config, self._config_oid = cached, entry.oid
        return self._config

    @property
    def limits(self) -> Mapping[str, int]:
        limits: Mapping[str, int] = self.config["limits"]
        return limits

    def _teammates(self) -> tuple[str, str] | None:
        """The ``teammates`` tree's id and the ``relay.json`` blob's (whose limits the
        profiles are read with), or None when the relay has no teammates yet."""
        _ = self.config  # read first: it sets _config_oid
        entry = self.objs.entry(self.tree, layout.TEAMMATES_DIR)
        if entry is None or not entry.is_tree:
            return None
        return entry.oid, self._config_oid

    def profiles(self) -> dict[str, dict[str, Any]]:
        """Every registered teammate, keyed by casefolded handle."""
        if self._profiles is None:
            key = self._teammates()
            if key is None:
                self._profiles = {}
                return self._profiles
            cached = _PROFILE_SETS.get(key)
            if cached is None:
                cached = {}
                for e in self.objs.tree(key[0]):
                    found = self._read_profile(e.name)
                    if found is not None:
                        cached[e.name.casefold()] = found
                _remember(_PROFILE_SETS, key, cached)
            self._profiles = cached
        return self._profiles

    def profile(self, handle: str) -> dict[str, Any] | None:
        """One teammate's profile (handles compare ignoring case), or None.

        Reads that teammate's file alone unless every profile is at hand: the
        gate runs once per push in a new process, where reading the whole
        team's profiles for the one or two an operation names was most of its
        object reads.
        """
        if self._profiles is not None:
            return self._profiles.get(handle.casefold())
        key = self._teammates()
        if key is None:
            return None
        folded = handle.casefold()
        whole = _PROFILE_SETS.get(key)
        if whole is not None:
            self._profiles = whole
            return whole.get(folded)
        one = (*key, folded)
        if one in _PROFILES:
            return _PROFILES[one]
        found = None
        for e in self.objs.tree(key[0]):
            if e.name.casefold() == folded:  # the last of equal names, as in profiles()
                found = self._read_profile(e.name) or found
        _remember(_PROFILES, one, found)
        return found

    def _read_profile(self, name: str) -> dict[str, Any] | None:
        data = self.objs.read_path(self.tree, layout.profile_path(name))
        return None if data is None else schema.load("profile", data, self.limits)

    def thread(self, thread_id: str) -> ThreadState | None:
        found = thread_files(self.objs, self.tree, thread_id)
        if found is None:
            return None
        dir_oid, entries = found
        names = {e.name for e in entries}
        data = self.objs.read_path(dir_oid, layout.HANDOFF_FILE)
        if data is None:
            return None
        handoff = schema.load("handoff", data, self.limits)
        return ThreadState(thread_id, handoff, status_from_names(names), last_sequence(names),
                           names)


def thread_files(objs: Objects, tree: str, thread_id: str
                 ) -> tuple[str, list[TreeEntry]] | None:
    """A thread's directory in the relay tree ``tree``: its tree id and entries.

    An archived thread's directory is no longer in the tree: it lies at the
    same path in the archive snapshot that ``archive.json`` names (or, archived
    by an earlier release, a marker beside it names it), so it reads the same.
    """
    entry = objs.entry(tree, layout.shard(thread_id))
    if entry is not None and entry.is_tree:
        return entry.oid, objs.tree(entry.oid)
    snap = snapshot_tree(objs, tree)
    if snap is not None:
        entry = objs.entry(snap, layout.shard(thread_id))
        if entry is not None and entry.is_tree:
            return entry.oid, objs.tree(entry.oid)
    marker = archive_marker(objs, tree, thread_id)
    if marker is None:
        return None
    return marker["tree"], objs.tree(marker["tree"])


def archive_index(objs: Objects, tree: str) -> dict[str, Any] | None:
    """``archive.json`` of the relay tree ``tree``, or None before the first archive."""
    data = objs.read_path(tree, layout.ARCHIVE_PATH)
    return None if data is None else schema.load("archive", data)


def archive_base(objs: Objects, tree: str) -> tuple[str | None, int]:
    """What the next archive operation on main's tree ``tree`` builds on: the snapshot
    ``archive.json`` names (None before the first archive) and how many threads it holds."""
    index = archive_index(objs, tree)
    return (str(index["snapshot"]), int(index["threads"])) if index else (None, 0)


# archive.json's blob id -> the snapshot's tree id (both fixed by the blob's bytes)
_SNAPSHOTS: dict[str, str] = {}


def snapshot_tree(objs: Objects, tree: str) -> str | None:
    """The tree of the archive snapshot the relay tree ``tree`` names, or None."""
    entry = objs.entry(tree, layout.ARCHIVE_PATH)
    if entry is None or entry.is_tree:
        return None
    found = _SNAPSHOTS.get(entry.oid)
    if found is None:
        doc = schema.load("archive", objs.blob(entry.oid))
        found = objs.commit(str(doc["snapshot"])).tree
        _remember(_SNAPSHOTS, entry.oid, found)
    return found


def archive_marker(objs: Objects, tree: str, thread_id: str) -> dict[str, Any] | None:
    """The marker of a thread an earlier release archived in ``tree``, or None."""
    data = objs.read_path(tree, layout.archived_path(thread_id))
    return None if data is None else schema.load("archived", data)


def archived_threads(objs: Objects, commit: Commit) -> tuple[list[str], str, str]:
    """What an archive operation's commit archived: the thread ids, by whom, when.

    Reads either form: a snapshot commit as second parent, or (an earlier
    release's) markers added beside the directories.
    """
    if len(commit.parents) > 1:
        index = archive_index(objs, commit.tree)
        if index is None:
            return [], "", ""
        moved = sorted(snapshot_additions(objs, objs.commit(commit.parents[1]), commit))
        return moved, str(index["by"]), str(index["archived_at"])
    parent_tree = objs.commit(commit.parents[0]).tree if commit.parents else None
    markers = [schema.load("archived", objs.blob(ch.new.oid))
               for ch in diff_trees(objs, parent_tree, commit.tree)
               if ch.new is not None and ch.path.endswith(layout.ARCHIVED_SUFFIX)]
    if not markers:
        return [], "", ""
    return (sorted(str(m["thread_id"]) for m in markers), str(markers[0]["by"]),
            str(markers[0]["archived_at"]))


def commit_seq(commit: Commit) -> int:
    raw = commit.trailers.get(layout.TRAILER_SEQ, "")
    # ASCII digits in canonical form only: int() also reads "٣" and "007".
    if not (raw.isascii() and raw.isdigit()) or raw != str(int(raw)):
        raise refuse("trailers", f"commit {commit.oid[:12]} has no valid {layout.TRAILER_SEQ} "
                     "trailer", commit=commit.oid, field=layout.TRAILER_SEQ)
    return int(raw)


_OWN_TRAILERS = (layout.TRAILER_OP, layout.TRAILER_THREAD, layout.TRAILER_ACTOR,
                 layout.TRAILER_SEQ)


def check_trailer_repeats(commit: Commit) -> None:
    """Each gitrelay trailer at most once: git's own trailer readers ignore case and
    show every copy, so a second ``Gitrelay-Actor`` would tell ``git log`` readers
    another story than the one the rules checked."""
    keys = [k.casefold() for k, _ in trailer_pairs(commit.message)]
    for name in _OWN_TRAILERS:
        count = keys.count(name.casefold())
        if count > 1:
            raise refuse("trailers", f"commit {commit.oid[:12]} has {count} {name} trailers; "
                         "each gitrelay trailer appears once", commit=commit.oid, field=name)


def check_message_text(commit: Commit) -> None:
    """No control or bidi/format character in the message: ``git log`` prints it raw."""
    bad = first_unsafe(commit.message, keep="\n\t")
    if bad is not None:
        raise refuse("commit-message", f"commit {commit.oid[:12]}'s message holds the control "
                     f"or format character U+{ord(bad):04X}; git log would print it to its "
                     "reader's terminal as it is", commit=commit.oid, field="message")


def check_author(commit: Commit, actor: str) -> None:
    """The commit's author is its actor: ``git log`` shows the author, not the trailer."""
    email = commit.author.rpartition("<")[2].partition(">")[0]
    if not same_handle(email, actor):
        raise refuse("actor", f"commit {commit.oid[:12]} is authored by {email!r}, but its "
                     f"operation is by {actor}; the author's email is the actor's handle",
                     commit=commit.oid, field="author")


def _object_error(commit: Commit, exc: Exception) -> RelayError:
    what = f"object {exc.args[0]} is missing" if isinstance(exc, KeyError) else str(exc)
    return refuse("objects", f"commit {commit.oid[:12]}: unreadable or malformed object: {what}",
                  commit=commit.oid)


class Pusher:
    """Who the server says pushed: the env variable and the username in it.

    ``username == ""`` is a push the gate checked that no server vouched for.
    The rules get ``pusher=None`` only away from the gate (the client's own
    check, verify-on-read), where nobody can know who will push or who pushed.
    """

    def __init__(self, env: str, username: str) -> None:
        self.env = env
        self.username = username


def find_pusher(config: Mapping[str, Any], environ: Mapping[str, str]) -> Pusher:
    """The pusher named by the first variable of ``pusher_env`` that is set; at the gate."""
    for name in config.get("pusher_env", []):
        value = environ.get(name, "").strip()
        if value:
            return Pusher(name, value)
    return Pusher("", "")


if TYPE_CHECKING:
    SignatureCheck = Callable[[Commit, str, list[str]], str | None]


def check_identity(view: RelayView, commit: Commit, actor: str, pusher: Pusher | None,
                   *, registering: dict[str, Any] | None = None,
                   verify_signature: SignatureCheck | None = None) -> None:
    """The pusher and signature rules for an operation by ``actor``."""
    config = view.config
    profile = registering if registering is not None else view.profile(actor)
    if profile is None:
        raise refuse("recipient_not_found", f"commit {commit.oid[:12]}: actor {actor} is not a "
                     "registered teammate", commit=commit.oid, field="actor")
    if pusher is None:
        pass  # not at the gate: the pusher is unknown here
    elif not pusher.username:
        if config.get("require_pusher"):
            raise refuse("pusher", f"commit {commit.oid[:12]}: this relay requires an "
                         "authenticated pusher and the server supplied none "
                         f"(looked in {', '.join(config['pusher_env']) or 'no variables'})",
                         commit=commit.oid)
    elif pusher.username not in profile.get("usernames", []):
        raise refuse("pusher", f"commit {commit.oid[:12]}: actor {actor} is not the "
                     f"authenticated pusher {pusher.username!r} ({pusher.env}); "
                     f"{actor}'s server usernames are {profile.get('usernames', [])}",
                     commit=commit.oid, field="actor")
    if config.get("require_signatures"):
        keys = list(profile.get("signing_keys", []))
        problem = "commit is not signed" if commit.signature is None else None
        if problem is None:
            check = verify_signature
            if check is None:
                # Imported here, not at the top: only relays that require signatures
                # pay for it, and the gate's start-up stays small.
                from gitrelay.core.signing import verify_commit_signature

                check = verify_commit_signature
            if not keys:
                problem = f"{actor} has no registered signing key"
            else:
                problem = check(commit, actor, keys)
        if problem:
            raise refuse("signature", f"commit {commit.oid[:12]}: {problem}; this relay "
                         "requires every operation to be signed by its actor's registered key",
                         commit=commit.oid)


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


def check_commit(objs: Objects, commit: Commit, parent: Commit | None, *,
                 pusher: Pusher | None = None,
                 verify_signature: SignatureCheck | None = None) -> Operation:
    """Check one commit on ``main`` against the state at its parent."""
    try:
        return _check_commit(objs, commit, parent, pusher, verify_signature)
    except (KeyError, ValueError) as exc:
        raise _object_error(commit, exc) from None


def _load_written(kind: str, data: bytes, limits: Mapping[str, int] | None, commit: Commit,
                  where: str) -> dict[str, Any]:
    """``schema.load`` of a file ``commit`` writes; a refusal starts with ``where`` (the
    commit and the file) and names the commit."""
    try:
        return schema.load(kind, data, limits)
    except RelayError as exc:
        exc.message = f"{where}: {exc.message}"
        exc.data["commit"] = commit.oid
        raise


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
        return _check_archive(view, commit, parent, seq, pusher, verify_signature)
    path, entry, replaced = _added_file(objs, commit, parent.tree)
    ref = layout.classify(path)
    assert ref is not None
    if ref.kind == "config":
        raise refuse("append-only", f"commit {short} adds {path}; only the first commit may",
                     commit=commit.oid, field=path)
    if ref.kind in ("archived", "archive"):
        raise refuse("archive", f"commit {short} adds {path} without archiving a thread; only "
                     f"a {layout.TRAILER_OP}: {layout.OP_ARCHIVE} commit writes it",
                     commit=commit.oid, field=path)
    doc = _load_written(ref.kind, objs.blob(entry.oid), limits, commit, f"commit {short} {path}")
    op = _op_for(ref.kind, doc)
    actor = str(doc[schema.AUTHOR_FIELD[ref.kind]])
    _check_trailers(commit, op, actor, ref.thread_id)
    check_author(commit, actor)
    if ref.kind == "profile":
        _check_register(view, commit, doc, ref.handle or "")
        check_identity(view, commit, actor, pusher, registering=doc,
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
    return Operation(op, seq, actor, path, doc, ref.thread_id, commit.oid)


# At most this many threads per archive operation: the gate reads each one.
ARCHIVE_MAX_THREADS = 1000


def _check_archive(view: RelayView, commit: Commit, parent: Commit, seq: int,
                   pusher: Pusher | None, verify_signature: SignatureCheck | None) -> Operation:
    """An archive operation: closed threads' directories leave main's tree.

    The commit's second parent is the archive snapshot: the previous snapshot's
    tree plus exactly the directories that left, and ``archive.json`` names it.
    A commit with one parent is the form of earlier releases (a marker beside
    each directory), still read and accepted so their relays stay valid.
    """
    short = commit.oid[:12]
    actor = commit.trailers.get(layout.TRAILER_ACTOR, "")
    if layout.TRAILER_THREAD in commit.trailers:
        raise refuse("trailers", f"commit {short}: an archive operation has no "
                     f"{layout.TRAILER_THREAD} trailer; its snapshot names the threads",
                     commit=commit.oid, field=layout.TRAILER_THREAD)
    check_author(commit, actor)
    check_identity(view, commit, actor, pusher, verify_signature=verify_signature)
    if len(commit.parents) == 1:
        tids = _check_marker_archive(view, commit, parent, actor)
    else:
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
            index = _load_written("archive", objs.blob(ch.new.oid), view.limits, commit,
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
    """The threads whose directories (or markers of an earlier release) the removal of
    ``entry`` at ``path`` takes out of main's tree, with their directories' trees;
    None when it takes anything else out."""
    parts = path.split("/")
    if entry is None or parts[0] != layout.THREADS_DIR:
        return None
    if len(parts) == 4:
        tid = layout.thread_dir_id(path)
        if tid is not None and entry.is_tree:
            return {tid: entry.oid}
        ref = layout.classify(path)
        if ref is not None and ref.kind == "archived" and ref.thread_id \
                and entry.mode == MODE_BLOB:
            marker = schema.load("archived", objs.blob(entry.oid))
            return {ref.thread_id: str(marker["tree"])}
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


def _check_marker_archive(view: RelayView, commit: Commit, parent: Commit,
                          actor: str) -> list[str]:
    """An earlier release's archive: each directory replaced by a marker beside it."""
    objs = view.objs
    short = commit.oid[:12]
    removed: dict[str, str] = {}
    markers: dict[str, TreeEntry] = {}
    for ch in diff_trees(objs, parent.tree, commit.tree):
        tid = layout.thread_dir_id(ch.path)
        ref = layout.classify(ch.path)
        if tid is not None and ch.old is not None and ch.old.is_tree and ch.new is None:
            removed[tid] = ch.old.oid
        elif ref is not None and ref.kind == "archived" and ch.old is None \
                and ch.new is not None and ch.new.mode == MODE_BLOB and ref.thread_id:
            markers[ref.thread_id] = ch.new
        else:
            what = "adds" if ch.old is None else "deletes" if ch.new is None else "changes"
            raise refuse("archive", f"commit {short} {what} {ch.path}; an archive operation "
                         "only replaces closed threads' directories with their markers",
                         commit=commit.oid, field=ch.path)
    _check_count(commit, len(markers), "archives nothing")
    for tid in sorted(removed.keys() | markers.keys()):
        path = layout.archived_path(tid)
        if tid not in markers:
            raise refuse("archive", f"commit {short} removes thread {tid} without adding its "
                         f"marker {path}", commit=commit.oid, field=layout.shard(tid))
        if tid not in removed:
            raise refuse("archive", f"commit {short} adds {path} but keeps the thread's "
                         "directory, or the thread does not exist", commit=commit.oid,
                         field=path)
        state = _closed_thread(view, commit, tid, path)
        doc = _load_written("archived", objs.blob(markers[tid].oid), view.limits, commit,
                            f"commit {short} {path}")
        _check_archive_doc(commit, path, doc, (("thread_id", tid), ("tree", removed[tid]),
                                               ("status", state.status)), actor)
    return sorted(markers)


def _check_archive_doc(commit: Commit, path: str, doc: Mapping[str, Any],
                       wants: tuple[tuple[str, object], ...], actor: str) -> None:
    """An archive document (``archive.json``, or a marker) holds exactly the values
    ``wants`` names and was written by the operation's actor."""
    short = commit.oid[:12]
    for name, want in wants:
        if doc[name] != want:
            raise refuse("archive", f"commit {short} {path} says {name} {doc[name]}, "
                         f"expected {want}", commit=commit.oid, field=f"{path}:{name}")
    if not same_handle(str(doc["by"]), actor):
        raise refuse("actor", f"commit {short} {path} was written by {doc['by']}, but "
                     f"{layout.TRAILER_ACTOR} is {actor!r}", commit=commit.oid,
                     field=f"{path}:by")


def _op_for(kind: str, doc: Mapping[str, Any]) -> str:
    if kind == "profile":
        return layout.OP_REGISTER
    if kind == "message":
        return layout.OP_DRAFT if doc["type"] == "draft" else layout.OP_MESSAGE
    return kind


def _check_trailers(commit: Commit, op: str, actor: str, thread_id: str | None) -> None:
    t = commit.trailers
    short = commit.oid[:12]
    if t.get(layout.TRAILER_OP) != op:
        raise refuse("trailers", f"commit {short} has {layout.TRAILER_OP}: "
                     f"{t.get(layout.TRAILER_OP)!r}, but its file is a {op} operation",
                     commit=commit.oid, field=layout.TRAILER_OP)
    if not same_handle(t.get(layout.TRAILER_ACTOR, ""), actor):
        raise refuse("actor", f"commit {short} has {layout.TRAILER_ACTOR}: "
                     f"{t.get(layout.TRAILER_ACTOR)!r}, but its file was written by {actor}",
                     commit=commit.oid, field=layout.TRAILER_ACTOR)
    if thread_id is not None and t.get(layout.TRAILER_THREAD) != thread_id:
        raise refuse("trailers", f"commit {short} has {layout.TRAILER_THREAD}: "
                     f"{t.get(layout.TRAILER_THREAD)!r}, but its file is in thread {thread_id}",
                     commit=commit.oid, field=layout.TRAILER_THREAD)


def _check_init(objs: Objects, commit: Commit) -> Operation:
    short = commit.oid[:12]
    path, entry, _ = _added_file(objs, commit, None)
    if path != layout.CONFIG_PATH:
        raise refuse("layout", f"root commit {short} must add only {layout.CONFIG_PATH}",
                     commit=commit.oid, field=path)
    doc = _load_written("config", objs.blob(entry.oid), None, commit,
                        f"root commit {short} {path}")
    if commit.trailers.get(layout.TRAILER_OP) != layout.OP_INIT or commit_seq(commit) != 0:
        raise refuse("trailers", f"root commit {short} must carry {layout.TRAILER_OP}: init "
                     f"and {layout.TRAILER_SEQ}: 0", commit=commit.oid)
    return Operation(layout.OP_INIT, 0, commit.trailers.get(layout.TRAILER_ACTOR, ""), path, doc,
                     None, commit.oid)


def _check_register(view: RelayView, commit: Commit, doc: Mapping[str, Any], handle: str) -> None:
    short = commit.oid[:12]
    if doc["handle"] != handle:
        raise refuse("layout", f"commit {short}: profile of {doc['handle']} stored under "
                     f"teammates/{handle}", commit=commit.oid, field="handle")
    existing = view.profile(handle)
    if existing is not None:
        raise refuse("registration", f"commit {short}: {existing['handle']} is already "
                     "registered (handles are unique, ignoring case); a profile is never "
                     "replaced", commit=commit.oid, field="handle")
    taken = {u: p["handle"] for p in view.profiles().values() for u in p.get("usernames", [])}
    for username in doc.get("usernames", []):
        if username in taken:
            raise refuse("registration", f"commit {short}: server username {username!r} "
                         f"already belongs to {taken[username]}", commit=commit.oid,
                         field="usernames")


def _check_thread_op(view: RelayView, commit: Commit, ref: layout.FileRef,
                     doc: Mapping[str, Any], limits: Mapping[str, int]) -> None:
    short = commit.oid[:12]
    tid = ref.thread_id
    assert tid is not None
    state = view.thread(tid)
    if ref.kind == "handoff":
        check_handoff(view, doc, commit_label=f"commit {short}", commit=commit.oid)
        if state is not None or view.objs.entry(view.tree, layout.shard(tid)) is not None \
                or view.objs.entry(view.tree, layout.archived_path(tid)) is not None:
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


def check_handoff(view: RelayView, doc: Mapping[str, Any], *, commit_label: str = "handoff",
                  commit: str = "") -> None:
    """Rules of a new handoff that do not depend on the thread existing."""
    for role in ("sender", "recipient"):
        if view.profile(str(doc[role])) is None:
            raise refuse("recipient_not_found", f"{commit_label}: {role} {doc[role]} is not a "
                         "registered teammate", hint="See who is with list_teammates.",
                         commit=commit, field=role)
    intent = doc["intent"]
    if intent == "propose_action" and "proposed_action" not in doc:
        raise refuse("invalid_intent_payload", f"{commit_label}: intent propose_action needs "
                     "a proposed_action", commit=commit, field="proposed_action")
    if intent != "propose_action" and "proposed_action" in doc:
        raise refuse("invalid_intent_payload", f"{commit_label}: proposed_action is only "
                     f"allowed with intent propose_action, not {intent}", commit=commit,
                     field="proposed_action")
    if intent != "ask_question" and "question" in doc:
        raise refuse("invalid_intent_payload", f"{commit_label}: question is only allowed "
                     f"with intent ask_question, not {intent}", commit=commit, field="question")
    expected = thread_id_for(str(doc["sender"]), str(doc["idempotency_key"]))
    if doc["thread_id"] != expected:
        raise refuse("thread-id", f"{commit_label}: thread_id {doc['thread_id']} is not the id "
                     f"derived from its sender and idempotency key ({expected})",
                     commit=commit, field="thread_id")


def check_thread_action(state: ThreadState, kind: str, actor: str, doc: Mapping[str, Any],
                        limits: Mapping[str, int], *, commit_label: str, commit: str = "",
                        sequence_no: int | None = None) -> None:
    """Rules of a message, draft or transition on an existing thread."""
    tid = state.thread_id
    is_sender = same_handle(actor, state.sender)
    is_recipient = same_handle(actor, state.recipient)
    if kind == "message":
        if not (is_sender or is_recipient):
            raise refuse("not_a_participant", f"{commit_label}: {actor} is neither the sender "
                         f"nor the recipient of thread {tid}", commit=commit, field="from")
        if state.status in TERMINAL:
            raise refuse("thread_terminal", f"{commit_label}: thread {tid} is {state.status}; "
                         "no more messages can be added", commit=commit, field="thread_id")
        expected = state.last_seq + 1
        if doc["sequence_no"] != expected or (sequence_no is not None
                                               and sequence_no != expected):
            raise refuse("sequence", f"{commit_label}: message sequence_no "
                         f"{doc['sequence_no']} in thread {tid}, expected {expected}",
                         commit=commit, field="sequence_no")
        if expected > limits["max_messages_per_thread"]:
            raise refuse("size", f"{commit_label}: thread {tid} already has the maximum of "
                         f"{limits['max_messages_per_thread']} messages", commit=commit)
        if doc["type"] == "draft":
            if not is_recipient:
                raise refuse("forbidden", f"{commit_label}: only the recipient drafts a "
                             "proposed action", commit=commit, field="from")
            if state.handoff["intent"] != "propose_action":
                raise refuse("invalid_intent_payload", f"{commit_label}: thread {tid} has "
                             f"intent {state.handoff['intent']}; drafts are for propose_action",
                             commit=commit, field="type")
            if "suggested_diff" in state.handoff.get("proposed_action", {}):
                raise refuse("invalid_intent_payload", f"{commit_label}: the proposed action "
                             f"of thread {tid} already has a suggested_diff", commit=commit,
                             field="type")
            if "suggested_diff" not in doc:
                raise refuse("schema", f"{commit_label}: a draft needs a suggested_diff",
                             commit=commit, field="suggested_diff")
        elif "suggested_diff" in doc:
            raise refuse("schema", f"{commit_label}: only a draft carries a suggested_diff",
                         commit=commit, field="suggested_diff")
        return
    check_transition(state, kind, actor, commit_label=commit_label, commit=commit)


def check_transition(state: ThreadState, kind: str, actor: str, *, commit_label: str,
                     commit: str = "") -> None:
    tid = state.thread_id
    allowed_actor = state.sender if kind == "cancel" else state.recipient
    if not same_handle(actor, allowed_actor):
        if not (same_handle(actor, state.sender) or same_handle(actor, state.recipient)):
            raise refuse("not_a_participant", f"{commit_label}: {actor} is neither the sender "
                         f"nor the recipient of thread {tid}", commit=commit, field="by")
        who = "sender" if kind == "cancel" else "recipient"
        raise refuse("not_authorized_transition", f"{commit_label}: only the {who} "
                     f"({allowed_actor}) can {kind} thread {tid}", commit=commit, field="by")
    if state.status in TERMINAL:
        raise refuse("thread_terminal", f"{commit_label}: cannot {kind} thread {tid}: it is "
                     f"{state.status}, and a closed thread takes no more changes",
                     commit=commit, field="thread_id", status=state.status)
    required = {"accept": PENDING, "complete": ACCEPTED, "cancel": PENDING}[kind]
    if state.status != required:
        raise refuse("invalid_transition", f"{commit_label}: cannot {kind} thread {tid}: it is "
                     f"{state.status}, and {kind} needs {required}", commit=commit,
                     field="thread_id", status=state.status)


def check_inbox_commit(objs: Objects, commit: Commit, owner: str, main_seq: int,
                       view: RelayView, *, pusher: Pusher | None = None,
                       verify_signature: SignatureCheck | None = None) -> dict[str, Any]:
    """Check one commit on ``refs/gitrelay/users/<owner>/inbox``."""
    try:
        return _check_inbox_commit(objs, commit, owner, main_seq, view, pusher,
                                   verify_signature)
    except (KeyError, ValueError) as exc:
        raise _object_error(commit, exc) from None


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
    doc = _load_written("inbox", objs.blob(entries[0].oid), view.limits, commit,
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
