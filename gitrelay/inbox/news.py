"""What is news to a teammate: the one definition every front end reads.

News is what a teammate has not read yet, whatever the thread's status:

- as the recipient of a handoff: the handoff itself (``assignment``), the sender's
  messages (``reply``) and a cancel (``task_update``);
- as its sender: the recipient's accept, complete (``task_update``), messages
  (``reply``) and drafts (``proposal_review``);
- on either side: an operation of one's own the relay refused (``refused``), and a
  handoff that has stalled (``stalled``): still pending, or accepted with no message
  since, for the relay's ``stall_days`` (3 unless ``relay.json`` says otherwise);
- as its sender, too: a copy (``worker``) of the recipient claimed the handoff
  (``claimed``), as seen on the recipient's inbox ref (:func:`claimed_handoffs`).

An item stays news until it is read: acknowledged at its ``seq`` or later, which
reading its thread does (docs/inbox.md, "What marks an item read"). A closed thread
does not end its news: the sender hears of a completion after the thread closed.

The decision is made here once, as plain Python over rows, so that
:func:`gitrelay.inbox.inbox.check_inbox` (whose default call is the news), and the
coding hosts' hooks, which read the index without pygit2 or pydantic
(:mod:`gitrelay.inbox.inboxpeek`), reach the same answer: :func:`is_news` for an item
the index holds, :func:`stalls` for the handoffs that stalled, :data:`STALL_SELECT`
for the rows :func:`stalls` reads, :func:`claimed_handoffs` and :data:`CLAIM_SELECT` for
the handoffs a worker of their recipient claimed. The standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

from gitrelay.core.ids import same_handle
from gitrelay.core.threadstate import ACCEPTED, PENDING
from gitrelay.core.vocab import CLAIMED, STALL_DAYS, STALLED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = [
    "CLAIM_SELECT",
    "DAY_US",
    "STALL_SELECT",
    "ClaimNews",
    "SeenClaim",
    "Stall",
    "StallClock",
    "claimed_handoffs",
    "claimed_text",
    "is_news",
    "item_id_for",
    "stall_days",
    "stall_text",
    "stalls",
]

DAY_US = 86_400_000_000

STALL_SELECT = """
    SELECT h.thread_id, h.sender, h.recipient, t.status, h.summary_preview, h.seq,
           (SELECT e.at_us FROM events e WHERE e.seq = h.seq),
           (SELECT max(e.seq) FROM events e WHERE e.thread_id = h.thread_id),
           t.updated_us
      FROM threads t CROSS JOIN handoffs h ON h.thread_id = t.thread_id
     WHERE t.status IN ('pending', 'accepted')
       AND (h.sender = :handle COLLATE NOCASE OR h.recipient = :handle COLLATE NOCASE)
    """
"""A user's open threads with their clocks, as :class:`StallClock` reads them: the index's
own tables (:mod:`gitrelay.inbox.index`), for the full read and the hooks' alike. The
open threads of the relay are walked (``threads_status``), not every thread the user
ever had: those grow with the months, the open ones do not."""


_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def item_id_for(user: str, thread: str, kind: str) -> str:
    """``ibx_`` + 16 characters: a stable hash of (user, thread, kind), the same on every
    clone."""
    import hashlib  # here: the guard imports the hooks' reader and never names an item

    digest = hashlib.sha256(f"{user.casefold()}\n{thread}\n{kind}".encode()).digest()
    number = int.from_bytes(digest[:10], "big")
    chars = []
    for _ in range(16):
        chars.append(_ID_ALPHABET[number & 31])
        number >>= 5
    return "ibx_" + "".join(reversed(chars))


def is_news(*, unread: bool, kind: str) -> bool:
    """Whether an item of mine is news: unread, of any kind and on any thread, open or
    closed. (Every item the index makes for me is of the other participant's doing or of
    my own refused operation; see the module doc.)"""
    del kind  # every kind is news while unread: none is left out for its thread's status
    return unread


def stall_days(config: Mapping[str, Any]) -> int:
    """The relay's ``stall_days`` from its ``relay.json``, or the default."""
    value = config.get("stall_days")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 \
        else STALL_DAYS


class StallClock(NamedTuple):
    """One open thread of the reader and when it last moved (a row of STALL_SELECT)."""

    thread_id: str
    sender: str
    recipient: str
    status: str
    summary_preview: str
    handoff_seq: int
    handoff_us: int
    last_seq: int
    last_us: int


class Stall(NamedTuple):
    """A handoff that has not moved for ``days`` days: news to both its participants."""

    thread_id: str
    sender: str
    recipient: str
    status: str            # pending or accepted
    summary_preview: str
    since_seq: int         # the commit it has been waiting since (the handoff, or the
    since_us: int          # accept or the last message after it)
    days: int
    mine: bool             # the reader sent it

    @property
    def other(self) -> str:
        return self.recipient if self.mine else self.sender

    @property
    def record(self) -> str:
        """One stall of one thread: a later one (after the thread moved) is another."""
        return f"{STALLED}|{self.thread_id}|{self.since_seq}"


def stalls(handle_cf: str, rows: Iterable[StallClock | tuple[Any, ...]], *, now_us: int,
           days: int) -> list[Stall]:
    """The handoffs of ``handle_cf`` (the reader's casefolded handle) that have stalled:
    pending for ``days`` days since the handoff, or accepted with no message for
    ``days`` days since the accept or the last message after it. Computed from the
    history and the clock alone: nothing is written for a stall."""
    out = []
    for raw in rows:
        clock = StallClock(*raw)
        if clock.status == PENDING:
            since_seq, since_us = clock.handoff_seq, clock.handoff_us
        elif clock.status == ACCEPTED:
            since_seq, since_us = clock.last_seq, clock.last_us
        else:
            continue
        waited = (now_us - int(since_us or 0)) // DAY_US
        if waited < days:
            continue
        mine = same_handle(clock.sender, handle_cf)
        if not mine and not same_handle(clock.recipient, handle_cf):
            continue
        out.append(Stall(clock.thread_id, clock.sender, clock.recipient, clock.status,
                         clock.summary_preview, int(since_seq), int(since_us), int(waited),
                         mine))
    out.sort(key=lambda s: (s.since_seq, s.thread_id))
    return out


def stall_text(stall: Stall) -> str:
    """The stall in a line, for the reader (who is one of its two participants)."""
    n = f"{stall.days} day{'' if stall.days == 1 else 's'}"
    if stall.status == PENDING:
        return (f"{stall.recipient} has not accepted this handoff for {n}" if stall.mine
                else f"you have not accepted this handoff for {n}")
    return (f"{stall.recipient} accepted this handoff {n} ago, with no message since"
            if stall.mine else f"you accepted this handoff {n} ago, with no message since")


CLAIM_SELECT = """
    SELECT c.thread_id, h.sender, c.recipient, t.status, h.summary_preview, c.worker, c.seq,
           c.claimed_us
      FROM claims c
      JOIN handoffs h ON h.thread_id = c.thread_id
      JOIN threads t ON t.thread_id = c.thread_id
     WHERE c.sender_cf = :user
     ORDER BY c.rowid
    """
"""The claims the index saw on the handoffs ``:user`` (casefolded) sent, in the order it
first saw them (:mod:`gitrelay.inbox.index` records them from the recipients' inbox
refs), as :class:`SeenClaim` reads them: for the full read and the hooks' alike."""


class SeenClaim(NamedTuple):
    """A worker of a handoff's recipient claimed its assignment (a row of CLAIM_SELECT)."""

    thread_id: str
    sender: str
    recipient: str
    status: str
    summary_preview: str
    worker: str
    seq: int               # the seq of the assignment item claimed
    claimed_us: int        # the time of the first state of the recipient's inbox holding it

    @property
    def record(self) -> str:
        """One worker's claim of one handoff: another worker's (a takeover) is another."""
        return f"{CLAIMED}|{self.thread_id}|{self.worker}"


class ClaimNews(NamedTuple):
    """The claims of one handoff, folded into one item: the newest says it."""

    latest: SeenClaim
    records: tuple[str, ...]   # every claim of the thread seen here, oldest first


def claimed_handoffs(rows: Iterable[SeenClaim | tuple[Any, ...]]) -> list[ClaimNews]:
    """The handoffs a worker of their recipient claimed, one per thread, from rows of
    :data:`CLAIM_SELECT` (oldest first). Seen on the recipient's inbox ref: nothing is
    written for it, and a claim stays news after the recipient's ack dropped it."""
    threads: dict[str, list[SeenClaim]] = {}
    for raw in rows:
        claim = SeenClaim(*raw)
        threads.setdefault(claim.thread_id, []).append(claim)
    return [ClaimNews(claims[-1], tuple(c.record for c in claims))
            for claims in threads.values()]


def claimed_text(claim: SeenClaim) -> str:
    """The claim in a line, for the handoff's sender: handles and the worker's name only
    (a worker name is 1-64 characters of A-Z a-z 0-9 . _ -)."""
    return f"{claim.recipient}'s worker {claim.worker} claimed this handoff"
