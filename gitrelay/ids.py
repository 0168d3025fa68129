"""Identifiers: teammate handles, thread ids, message ids, keys and worker names.

Pure functions, standard library only (the gate imports this module).
Every identifier that ends up in a path, a ref name or a git argument is
validated here.
"""

from __future__ import annotations

import re

from .errors import AmbiguousId, InvalidArgument, ThreadNotFound

# The handle pattern of the handoff reference, plus what keeps a handle safe
# as a path component and a ref name component. Patterns are applied with
# fullmatch: ``$`` alone would also accept a trailing newline.
HANDLE_PATTERN = r"^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+$"
_HANDLE_RE = re.compile(HANDLE_PATTERN)
HANDLE_MAX = 100

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
THREAD_ID_LEN = 26
_THREAD_ID_RE = re.compile(f"^[{CROCKFORD}]{{{THREAD_ID_LEN}}}$")
_KEY_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_WORKER_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def handle_problem(handle: object) -> str | None:
    """Why ``handle`` is not a valid teammate handle, or None when it is."""
    if not isinstance(handle, str):
        return "must be a string"
    if not handle or len(handle) > HANDLE_MAX:
        return f"must be 1-{HANDLE_MAX} characters"
    if not _HANDLE_RE.fullmatch(handle):
        return f"must match {HANDLE_PATTERN} (name@team)"
    if handle[0] in ".-":
        return "must not start with '.' or '-'"
    if ".." in handle or handle.endswith(".lock") or handle.endswith("."):
        return "must not contain '..' or end with '.' or '.lock'"
    return None


def check_handle(handle: object, field: str = "handle") -> str:
    problem = handle_problem(handle)
    if problem is not None:
        raise InvalidArgument(f"{field} {handle!r} {problem}.", field=field)
    assert isinstance(handle, str)
    return handle


def same_handle(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def _crockford(data: bytes, length: int) -> str:
    number = int.from_bytes(data, "big")
    chars = []
    for _ in range(length):
        chars.append(CROCKFORD[number & 31])
        number >>= 5
    return "".join(reversed(chars))


def thread_id_for(sender: str, idempotency_key: str) -> str:
    """The thread id a handoff gets: derived from its sender and idempotency key.

    Deriving it (rather than drawing it at random) makes a retried handoff land
    on the same thread, which the gate refuses as a reuse, and it spreads thread
    directories evenly over the shards.
    """
    import hashlib

    digest = hashlib.sha256(f"{sender.casefold()}\n{idempotency_key}".encode()).digest()
    return _crockford(digest[:17], THREAD_ID_LEN)


def is_thread_id(value: object) -> bool:
    return isinstance(value, str) and bool(_THREAD_ID_RE.fullmatch(value))


def check_thread_id(value: object, field: str = "thread_id") -> str:
    if not is_thread_id(value):
        raise ThreadNotFound(
            f"{field} {value!r} is not a thread id (26 characters of 0-9A-Z without I, L, O, U).",
            hint="Use a thread_id returned by check_inbox or handoff_to_teammate.",
            field=field,
        )
    assert isinstance(value, str)
    return value


def is_key(value: object) -> bool:
    return isinstance(value, str) and bool(_KEY_RE.fullmatch(value))


def new_key() -> str:
    import uuid

    return str(uuid.uuid4())


def new_message_id() -> str:
    import uuid

    return str(uuid.uuid4())


def is_uuid(value: object) -> bool:
    return isinstance(value, str) and bool(_UUID_RE.fullmatch(value))


def check_worker(value: object) -> str:
    if not isinstance(value, str) or not _WORKER_RE.fullmatch(value):
        raise InvalidArgument(
            f"worker {value!r} must be 1-64 characters of A-Z a-z 0-9 . _ -", field="worker"
        )
    return value


def resolve_prefix(prefix: str, candidates: list[str]) -> str:
    """Resolve a short, case-insensitive thread id prefix among ``candidates``."""
    wanted = prefix.strip().upper()
    if not wanted or any(c not in CROCKFORD for c in wanted):
        raise ThreadNotFound(f"{prefix!r} is not a thread id or a prefix of one.")
    matches = sorted(c for c in candidates if c.startswith(wanted))
    if not matches:
        raise ThreadNotFound(f"no thread id starts with {wanted}.")
    if len(matches) > 1 and wanted not in matches:
        raise AmbiguousId(
            f"{wanted} matches {len(matches)} threads: {', '.join(matches[:10])}.",
            hint="Give more characters of the id.", matching=matches,
        )
    return wanted if wanted in matches else matches[0]
