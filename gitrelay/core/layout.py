"""Where everything lives: paths in the relay tree and ref names.

The one place the on-disk layout is spelled out (docs/format.md describes
it). Pure and standard library only.
"""

from __future__ import annotations

from gitrelay.core.ids import handle_digest, handle_problem, is_thread_id, only

FORMAT_VERSION = 1
CONFIG_PATH = "relay.json"
TEAMMATES_DIR = "teammates"
# relay.json's ``teammates_layout``: where a relay keeps its teammates' directories.
# ``flat`` (the field left out: relays made before sharding) is teammates/<handle>/,
# ``sharded`` is teammates/<c0>/<c1>/<handle>/, as threads are sharded.
TEAMMATES_FLAT = "flat"
TEAMMATES_SHARDED = "sharded"
TEAMMATES_LAYOUTS = (TEAMMATES_FLAT, TEAMMATES_SHARDED)
THREADS_DIR = "threads"
PROFILE_FILE = "profile.json"
# A teammate's corrections of their own profile: update-000001.json, numbered from 1.
PROFILE_UPDATE_PREFIX = "update-"
HANDOFF_FILE = "handoff.json"
TRANSITION_FILES = {"accept": "accept.json", "complete": "complete.json", "cancel": "cancel.json"}
INBOX_FILE = "inbox.json"
ARCHIVE_PATH = "archive.json"  # names the snapshot commit holding the archived threads
MESSAGE_DIGITS = 6
_DIGITS = frozenset("0123456789")  # ASCII only: str.isdigit() also takes "٣"

# In a client's mirror of the relay (not in the relay): the operations the relay refused.
REFUSED_FILE = "gitrelay-refused.jsonl"

MAIN_REF = "refs/heads/main"
USERS_REF_PREFIX = "refs/gitrelay/users/"
# A mirror's own refs: the relay's refs as last fetched (quarantined, before
# verify-on-read) and as verified.
FETCHED_MAIN = "refs/fetched/main"
FETCHED_USERS = "refs/fetched/users/"
RELAY_MAIN = "refs/relay/main"
RELAY_USERS = "refs/relay/users/"
# What a fetch brings into the quarantine refs, and the lock every fetch of a mirror
# holds (a file in the mirror).
FETCH_REFSPECS = (f"+{MAIN_REF}:{FETCHED_MAIN}", f"+{USERS_REF_PREFIX}*:{FETCHED_USERS}*")
SYNC_LOCK_FILE = "gitrelay-sync.lock"
INBOX_REF_LEAF = "inbox"

# Operations, one per commit; each but archive adds exactly one file.
OP_INIT = "init"
OP_REGISTER = "register"
OP_PROFILE = "profile"  # a teammate corrects their own name, role or server usernames
OP_HANDOFF = "handoff"
OP_MESSAGE = "message"
OP_DRAFT = "draft"
OP_ACCEPT = "accept"
OP_COMPLETE = "complete"
OP_CANCEL = "cancel"
OP_INBOX = "inbox"
# The one operation that adds no single file: it moves closed threads' directories
# out of main's tree into the archive snapshot (docs/format.md, "Archived threads").
OP_ARCHIVE = "archive"
THREAD_OPS = (OP_HANDOFF, OP_MESSAGE, OP_DRAFT, OP_ACCEPT, OP_COMPLETE, OP_CANCEL)

TRAILER_OP = "Gitrelay-Op"
TRAILER_THREAD = "Gitrelay-Thread"
TRAILER_ACTOR = "Gitrelay-Actor"
TRAILER_SEQ = "Gitrelay-Seq"


def shard(thread_id: str) -> str:
    """threads/<c0>/<c1>/<id>: two levels of 32, so no tree a commit rewrites grows large."""
    return f"{THREADS_DIR}/{thread_id[0]}/{thread_id[1]}/{thread_id}"


def handoff_path(thread_id: str) -> str:
    return f"{shard(thread_id)}/{HANDOFF_FILE}"


def snapshot_message(added: int, total: int) -> str:
    """The message of an archive snapshot commit (the gate wants exactly this)."""
    plural = "s" if added != 1 else ""
    return f"Archive snapshot: {added} more closed thread{plural}, {total} in all\n"


def thread_dir_id(path: str) -> str | None:
    """The thread id when ``path`` is a thread's directory (``threads/<c0>/<c1>/<id>``)."""
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != THREADS_DIR or not is_thread_id(parts[3]):
        return None
    return parts[3] if parts[1] == parts[3][0] and parts[2] == parts[3][1] else None


def message_name(sequence_no: int) -> str:
    return f"msg-{sequence_no:0{MESSAGE_DIGITS}d}.json"


def message_path(thread_id: str, sequence_no: int) -> str:
    return f"{shard(thread_id)}/{message_name(sequence_no)}"


def transition_path(thread_id: str, op: str) -> str:
    return f"{shard(thread_id)}/{TRANSITION_FILES[op]}"


def teammate_shard(handle: str) -> str:
    """``teammates/<c0>/<c1>``: the shard holding ``handle``'s directory on a sharded
    relay, named by the first two characters of :func:`~gitrelay.core.ids.handle_digest`
    (two levels of 32, as threads are sharded by their id's)."""
    found = _SHARDS.get(handle)
    if found is None:
        digest = handle_digest(handle)
        found = f"{TEAMMATES_DIR}/{digest[0]}/{digest[1]}"
        if len(_SHARDS) >= 4096:
            _SHARDS.clear()
        _SHARDS[handle] = found
    return found


# Each operation's checks name its actor's shard several times: digests, remembered.
_SHARDS: dict[str, str] = {}


def teammate_dir(handle: str, sharded: bool) -> str:
    """A teammate's directory: ``teammates/<c0>/<c1>/<handle>`` on a sharded relay,
    ``teammates/<handle>`` on a flat one (relay.json's ``teammates_layout``)."""
    if sharded:
        return f"{teammate_shard(handle)}/{handle}"
    return f"{TEAMMATES_DIR}/{handle}"


def profile_path(handle: str, sharded: bool) -> str:
    return f"{teammate_dir(handle, sharded)}/{PROFILE_FILE}"


def profile_update_name(number: int) -> str:
    return f"{PROFILE_UPDATE_PREFIX}{number:0{MESSAGE_DIGITS}d}.json"


def profile_update_path(handle: str, number: int, sharded: bool) -> str:
    return f"{teammate_dir(handle, sharded)}/{profile_update_name(number)}"


def profile_update_number(name: str) -> int | None:
    """N of a name ``update-NNNNNN.json`` (exactly six ASCII digits, N >= 1), else None."""
    if not name.startswith(PROFILE_UPDATE_PREFIX):
        return None
    number = message_number("msg-" + name[len(PROFILE_UPDATE_PREFIX):])
    return number if number is not None and number >= 1 else None


def inbox_ref(handle: str) -> str:
    return f"{USERS_REF_PREFIX}{handle}/{INBOX_REF_LEAF}"


def inbox_ref_owner(ref: str) -> str | None:
    """The handle owning a per-user inbox ref, or None when ``ref`` is not one."""
    if not ref.startswith(USERS_REF_PREFIX):
        return None
    rest = ref[len(USERS_REF_PREFIX):].split("/")
    if len(rest) != 2 or rest[1] != INBOX_REF_LEAF or handle_problem(rest[0]) is not None:
        return None
    return rest[0]


class FileRef:
    """What a path in the relay tree is, per the layout.

    ``kind`` is one of config, archive, profile, profile_update, handoff, message,
    accept, complete, cancel, archived. ``sharded``: a teammate's file at its sharded
    path (``teammates/<c0>/<c1>/<handle>/…``) rather than its flat one.
    """

    __slots__ = ("handle", "kind", "sequence_no", "sharded", "thread_id")

    def __init__(self, kind: str, thread_id: str | None = None, handle: str | None = None,
                 sequence_no: int | None = None, sharded: bool = False) -> None:
        self.kind = kind
        self.thread_id = thread_id
        self.handle = handle
        self.sequence_no = sequence_no
        self.sharded = sharded


def classify(path: str) -> FileRef | None:
    """Classify a blob path; None when the layout has no place for it."""
    if path == CONFIG_PATH:
        return FileRef("config")
    if path == ARCHIVE_PATH:
        return FileRef("archive")
    parts = path.split("/")
    if parts[0] == TEAMMATES_DIR:
        return _teammate_file(parts)
    if parts[0] != THREADS_DIR or len(parts) != 5:
        return None
    _, c0, c1, tid, name = parts
    if not is_thread_id(tid) or c0 != tid[0] or c1 != tid[1]:
        return None
    if name == HANDOFF_FILE:
        return FileRef("handoff", thread_id=tid)
    for op, fname in TRANSITION_FILES.items():
        if name == fname:
            return FileRef(op, thread_id=tid)
    sequence_no = message_number(name)
    if sequence_no is not None and sequence_no >= 1:
        return FileRef("message", thread_id=tid, sequence_no=sequence_no)
    return None


def _teammate_file(parts: list[str]) -> FileRef | None:
    """A file in a teammate's directory, flat (``teammates/<handle>/<name>``) or sharded
    (``teammates/<c0>/<c1>/<handle>/<name>``, in the handle's own shard)."""
    if len(parts) == 3:
        handle, name, sharded = parts[1], parts[2], False
    elif len(parts) == 5:
        handle, name, sharded = parts[3], parts[4], True
    else:
        return None
    if handle_problem(handle) is not None:
        return None
    if sharded and f"{TEAMMATES_DIR}/{parts[1]}/{parts[2]}" != teammate_shard(handle):
        return None
    if name == PROFILE_FILE:
        return FileRef("profile", handle=handle, sharded=sharded)
    number = profile_update_number(name)
    if number is not None:
        return FileRef("profile_update", handle=handle, sequence_no=number, sharded=sharded)
    return None


def message_number(name: str) -> int | None:
    """N of a name ``msg-NNNNNN.json`` (exactly six ASCII digits), else None."""
    digits = name[4:-5]
    if (len(digits) != MESSAGE_DIGITS or not name.startswith("msg-")
            or not name.endswith(".json") or not only(_DIGITS, digits)):
        return None
    return int(digits)
