"""Identifiers: teammate handles, thread ids, message ids, keys and worker names.

Pure functions, standard library only (the gate imports this module).
Every identifier that ends up in a path, a ref name or a git argument is
validated here.
"""

from __future__ import annotations

from gitrelay.core.errors import AmbiguousId, InvalidArgument, NextStep, ThreadNotFound

TYPE_CHECKING = False
if TYPE_CHECKING:  # collections.abc imports all of collections: a part of the gate's start-up
    from collections.abc import Iterable

# The checks below are written out by hand instead of with ``re``: importing
# ``re`` (and ``enum`` with it) is a good part of the gate's start-up time.
# tests/core/test_ids_patterns.py holds each check to the pattern it documents.

# The handle pattern of the handoff reference, plus what keeps a handle safe
# as a path component and a ref name component. The pattern must match the
# whole value (``$`` alone would also accept a trailing newline).
HANDLE_PATTERN = r"^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+$"
HANDLE_MAX = 100

ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_NAME_CHARS = frozenset(ALNUM + "._-")
_KEY_CHARS = frozenset(ALNUM + "._:-")
_LOWER_HEX = frozenset("0123456789abcdef")

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_CHARS = frozenset(CROCKFORD)
THREAD_ID_LEN = 26
KEY_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
WORKER_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_UUID_GROUPS = (8, 4, 4, 4, 12)


def only(chars: frozenset[str], value: str) -> bool:
    """True when every character of ``value`` is one of ``chars`` (also for ``""``)."""
    return chars.issuperset(value)


def _handle_shape(value: str) -> bool:
    """``value`` matches HANDLE_PATTERN as a whole."""
    name, at, team = value.partition("@")
    return bool(at and name and team) and only(_NAME_CHARS, name) and only(_NAME_CHARS, team)


def handle_problem(handle: object) -> str | None:
    """Why ``handle`` is not a valid teammate handle, or None when it is."""
    if not isinstance(handle, str):
        return "must be a string"
    if not handle or len(handle) > HANDLE_MAX:
        return f"must be 1-{HANDLE_MAX} characters"
    if not _handle_shape(handle):
        return f"must match {HANDLE_PATTERN} (name@team)"
    if handle[0] in ".-":
        return "must not start with '.' or '-'"
    if ".." in handle or handle.endswith(".lock") or handle.endswith("."):
        return "must not contain '..' or end with '.' or '.lock'"
    return None


def check_handle(handle: object, field: str = "handle") -> str:
    problem = handle_problem(handle)
    if problem is not None:
        from gitrelay.core.terminal import quoted

        raise InvalidArgument(f"{field} {quoted(handle)} {problem}.", field=field)
    assert isinstance(handle, str)
    return handle


def handle_key(handle: str) -> str:
    """The one form in which handles are compared and keyed: case does not matter
    (``casefold``), as for the gate. A trust file's ``blocked`` entries add a more generous
    reading on top of it (:func:`gitrelay.trust.trustkeys.blocking_key`)."""
    return handle.casefold()


def same_handle(a: str, b: str) -> bool:
    """Whether two handles name the same teammate (yourself, when one is ``me``)."""
    return handle_key(a) == handle_key(b)


def near_handle(typed: str, handles: Iterable[str]) -> str | None:
    """The handle ``typed`` most likely meant, for a did-you-mean: with no team, the only
    handle of that name (``bob`` → ``bob@acme``); else a close name on the same team,
    else a close whole handle (``bob@acme.com`` for ``bob@acme``); None if none is."""
    import difflib  # here, not at the top: the gate imports this module and never needs it

    known = list(handles)
    name, at, team = typed.casefold().partition("@")
    if not at:
        same = [h for h in known if h.casefold().partition("@")[0] == name]
        if len(same) == 1:
            return same[0]
    pool = [h for h in known if h.casefold().partition("@")[2] == team] if at else known
    by_name = {h.casefold().partition("@")[0]: h for h in pool}
    near = difflib.get_close_matches(name, list(by_name), n=1, cutoff=0.6)
    if near:
        return by_name[near[0]]
    by_handle = {h.casefold(): h for h in known}
    near = difflib.get_close_matches(typed.casefold(), list(by_handle), n=1, cutoff=0.8)
    return by_handle[near[0]] if near else None


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one letter added, dropped, changed or two neighbours
    swapped (an optimal string alignment distance of 1)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long = sorted((a, b), key=len)
    i = next((k for k, (x, y) in enumerate(zip(short, long, strict=False)) if x != y),
             len(short))
    return short[i:] == long[i + 1:]


def _digits_apart(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ only in their digits."""
    def letters(text: str) -> str:
        return "".join(ch for ch in text if not ch.isdigit())
    return a != b and letters(a) == letters(b) and any(ch.isdigit() for ch in a + b)


def typo_of(typed: str, handles: Iterable[str]) -> str | None:
    """The registered handle that ``typed`` is most likely a typo of: one edit from it in
    the name on the same team (``carl@acme`` for ``carol@acme``; names of four letters or
    more, so that ``dan`` and ``don`` stay two people), or in the team with the same name;
    None if there is none. Stricter than :func:`near_handle`, which suggests a handle for
    one that matches nothing."""
    name, _, team = typed.casefold().partition("@")
    for handle in handles:
        other, _, other_team = handle.casefold().partition("@")
        if _digits_apart(name, other):
            continue  # numbered accounts (ci1, ci2; t000, t001), not a typo
        if team == other_team and max(len(name), len(other)) >= 4 \
                and _one_edit_apart(name, other):
            return handle
        if name == other and team != other_team and _one_edit_apart(team, other_team):
            return handle
    return None


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
    digest = _sha256(f"{sender.casefold()}\n{idempotency_key}".encode())
    return _crockford(digest[:17], THREAD_ID_LEN)


def handle_digest(handle: str) -> str:
    """A handle's digest, written as a thread id is: its first two characters name
    the shard of the teammate's directory (``teammates/<c0>/<c1>/<handle>``).

    Taken of the handle's key, so that every spelling of one handle (case aside)
    lands in one shard, where a registration finds the others.
    """
    return _crockford(_sha256(handle_key(handle).encode())[:17], THREAD_ID_LEN)


def _sha256(data: bytes) -> bytes:
    # The gate derives a thread id on every handoff. ``hashlib`` loads OpenSSL,
    # which takes longer than the whole check; the interpreter's own SHA-256
    # module (``_sha2`` since Python 3.12) gives the same digest for far less.
    for name in ("_sha256", "_sha2"):
        try:
            digest: bytes = __import__(name).sha256(data).digest()
        except ImportError:
            continue
        return digest
    import hashlib

    return hashlib.sha256(data).digest()


def is_thread_id(value: object) -> bool:
    return (isinstance(value, str) and len(value) == THREAD_ID_LEN
            and only(_CROCKFORD_CHARS, value))


def check_thread_id(value: object, field: str = "thread_id") -> str:
    if not is_thread_id(value):
        raise ThreadNotFound(
            f"{field} {value!r} is not a thread id (26 characters of 0-9A-Z without I, L, O, U).",
            next_step=NextStep.CHECK_INBOX,
            field=field,
        )
    assert isinstance(value, str)
    return value


def is_key(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 128 and only(_KEY_CHARS, value)


def new_key() -> str:
    import uuid

    return str(uuid.uuid4())


def new_message_id() -> str:
    import uuid

    return str(uuid.uuid4())


def is_uuid(value: object) -> bool:
    """A lowercase UUID as text, like ``str(uuid.uuid4())``."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    groups = value.split("-")
    return (tuple(len(g) for g in groups) == _UUID_GROUPS
            and all(only(_LOWER_HEX, g) for g in groups))


def check_worker(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 64 or not only(_NAME_CHARS, value):
        raise InvalidArgument(
            f"worker {value!r} must be 1-64 characters of A-Z a-z 0-9 . _ -", field="worker"
        )
    return value


# Crockford base 32 reads the letters it leaves out as the digits they look like.
_MISREAD = str.maketrans("ILO", "110")


def read_thread_ref(ref: str) -> str:
    """A thread id or prefix as typed, the way Crockford base 32 reads it: any case,
    ``I`` and ``L`` as ``1``, ``O`` as ``0``."""
    return ref.strip().upper().translate(_MISREAD)


def resolve_prefix(prefix: str, candidates: list[str]) -> str:
    """Resolve a short, case-insensitive thread id prefix among ``candidates``."""
    wanted = read_thread_ref(prefix)
    if not wanted or any(c not in CROCKFORD for c in wanted):
        raise ThreadNotFound(f"{prefix!r} is not a thread id or a prefix of one.")
    matches = sorted(c for c in candidates if c.startswith(wanted))
    if not matches:
        raise ThreadNotFound(f"no thread id starts with {wanted}.")
    if len(matches) > 1 and wanted not in matches:
        raise AmbiguousId(
            f"{wanted} matches {len(matches)} threads: {', '.join(matches[:10])}.",
            next_step=NextStep.LONGER_ID, matching=matches,
        )
    return wanted if wanted in matches else matches[0]
