"""Checks of a commit itself: its trailers, message and author, and what a valid
commit on ``main`` did (:class:`Operation`).

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout, schema
from gitrelay.core.errors import RelayError
from gitrelay.core.errors import error_for_rule as refuse
from gitrelay.core.ids import same_handle
from gitrelay.core.objects import Commit, trailer_pairs
from gitrelay.core.terminal import first_unsafe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

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


# A commit message is at most this many bytes (UTF-8): a gitrelay message is a
# subject of at most a hundred-odd characters and four trailers.
MAX_MESSAGE_BYTES = 8192


def check_message_text(commit: Commit) -> None:
    """A message of at most MAX_MESSAGE_BYTES, with no control or bidi/format
    character: ``git log`` prints it raw."""
    size = len(commit.message.encode("utf-8", "surrogateescape"))
    if size > MAX_MESSAGE_BYTES:
        raise refuse("commit-message", f"commit {commit.oid[:12]}'s message is {size:,} "
                     f"bytes, over the limit of {MAX_MESSAGE_BYTES:,}", commit=commit.oid,
                     field="message")
    bad = first_unsafe(commit.message, keep="\n\t")
    if bad is not None:
        raise refuse("commit-message", f"commit {commit.oid[:12]}'s message holds the control "
                     f"or format character U+{ord(bad):04X}; git log would print it to its "
                     "reader's terminal as it is", commit=commit.oid, field="message")


def _person(ident: str) -> tuple[str, str]:
    """The name and email of an ``author``/``committer`` value."""
    name, _, rest = ident.partition("<")
    return name.rstrip(" "), rest.partition(">")[0]


def check_author(commit: Commit, actor: str) -> None:
    """The commit's author and committer are its actor, by name and by email: ``git
    log`` shows them, not the trailer, so they are fixed to the actor's handle."""
    short = commit.oid[:12]
    name, email = _person(commit.author)
    if not same_handle(email, actor):
        raise refuse("actor", f"commit {short} is authored by {email!r}, but its "
                     f"operation is by {actor}; the author's email is the actor's handle",
                     commit=commit.oid, field="author")
    if name != email:
        raise refuse("actor", f"commit {short}'s author name is {name[:80]!r}; the author's "
                     f"name is the actor's handle, {email}, as its email is",
                     commit=commit.oid, field="author")
    if _person(commit.committer) != (name, email):
        who = "{} <{}>".format(*_person(commit.committer))
        raise refuse("actor", f"commit {short} is committed by {who[:120]!r}; the "
                     f"committer is the author, {name} <{email}>", commit=commit.oid,
                     field="committer")


def object_error(commit: Commit, exc: Exception) -> RelayError:
    what = f"object {exc.args[0]} is missing" if isinstance(exc, KeyError) else str(exc)
    return refuse("objects", f"commit {commit.oid[:12]}: unreadable or malformed object: {what}",
                  commit=commit.oid)



def load_written(kind: str, data: bytes, limits: Mapping[str, int] | None, commit: Commit,
                  where: str) -> dict[str, Any]:
    """``schema.load`` of a file ``commit`` writes; a refusal starts with ``where`` (the
    commit and the file) and names the commit."""
    try:
        return schema.load(kind, data, limits)
    except RelayError as exc:
        raise exc.replaced(f"{where}: {exc.message}", commit=commit.oid) from None



def check_trailers(commit: Commit, op: str, actor: str, thread_id: str | None) -> None:
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

