"""Where everything lives: paths in the relay tree and ref names.

The one place the on-disk layout is spelled out (docs/format.md describes
it). Pure and standard library only.
"""

from __future__ import annotations

from gitrelay.core.ids import handle_problem, is_thread_id, only

FORMAT_VERSION = 1
CONFIG_PATH = "relay.json"
TEAMMATES_DIR = "teammates"
THREADS_DIR = "threads"
PROFILE_FILE = "profile.json"
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
ALL_OPS = (OP_INIT, OP_REGISTER, *THREAD_OPS, OP_ARCHIVE)

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


def teammate_dir(handle: str) -> str:
    return f"{TEAMMATES_DIR}/{handle}"


def profile_path(handle: str) -> str:
    return f"{teammate_dir(handle)}/{PROFILE_FILE}"


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

    ``kind`` is one of config, archive, profile, handoff, message, accept, complete,
    cancel, archived.
    """

    __slots__ = ("handle", "kind", "sequence_no", "thread_id")

    def __init__(self, kind: str, thread_id: str | None = None, handle: str | None = None,
                 sequence_no: int | None = None) -> None:
        self.kind = kind
        self.thread_id = thread_id
        self.handle = handle
        self.sequence_no = sequence_no


def classify(path: str) -> FileRef | None:
    """Classify a blob path; None when the layout has no place for it."""
    if path == CONFIG_PATH:
        return FileRef("config")
    if path == ARCHIVE_PATH:
        return FileRef("archive")
    parts = path.split("/")
    if parts[0] == TEAMMATES_DIR and len(parts) == 3 and parts[2] == PROFILE_FILE:
        if handle_problem(parts[1]) is None:
            return FileRef("profile", handle=parts[1])
        return None
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


def message_number(name: str) -> int | None:
    """N of a name ``msg-NNNNNN.json`` (exactly six ASCII digits), else None."""
    digits = name[4:-5]
    if (len(digits) != MESSAGE_DIGITS or not name.startswith("msg-")
            or not name.endswith(".json") or not only(_DIGITS, digits)):
        return None
    return int(digits)
