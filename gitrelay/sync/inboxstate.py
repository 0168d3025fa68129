"""One user's inbox state: the ``inbox.json`` of ``refs/gitrelay/users/<handle>/inbox``.

What a user has handled (``acked_up_to`` and single ``acked`` items above it)
and which of their workers holds which item (``claims``). The state is a
chain of commits whose tree holds only ``inbox.json``; this module reads
such a commit, writes one (checked with the gate's rules) and merges two
machines' states of one user. The sync calls :func:`merge_inbox_states`
when the relay's copy of the ref moved while this machine had unpushed acks
or claims, so this module sits below the client: it uses only the mirror,
the format modules and the rules. :mod:`gitrelay.inbox.inbox` builds the inbox
(items, cursors, acks and claims) on top of it; docs/inbox.md describes both.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field, replace
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import RelayError, RelayUnavailable
from gitrelay.core.ops import now_iso
from gitrelay.core.rules import check_inbox_commit
from gitrelay.core.view import RelayView
from gitrelay.store.mirror import RELAY_USERS, Mirror

ACKED_LIMIT = 10_000        # the format's bound on single acks


def time_us(stamp: str) -> int:
    """Microseconds since the epoch of an ISO 8601 time (naive times are UTC)."""
    parsed = dt.datetime.fromisoformat(stamp)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    delta = parsed - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass
class Claim:
    item_id: str
    seq: int
    worker: str
    expires_at: str

    def live(self, now_us: int) -> bool:
        return time_us(self.expires_at) > now_us


@dataclass
class InboxState:
    """The content of ``inbox.json``: what one user has handled and who is on what."""

    handle: str
    acked_up_to: int = 0
    acked: dict[str, int] = field(default_factory=dict)      # item_id -> seq
    claims: dict[str, Claim] = field(default_factory=dict)   # item_id -> claim
    updated_at: str = ""

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> InboxState:
        acked: dict[str, int] = {}
        for a in doc["acked"]:
            acked[a["item_id"]] = max(acked.get(a["item_id"], 0), int(a["seq"]))
        claims = {c["item_id"]: Claim(c["item_id"], int(c["seq"]), c["worker"], c["expires_at"])
                  for c in doc["claims"]}
        return cls(doc["handle"], int(doc["acked_up_to"]), acked, claims, doc["updated_at"])

    def to_doc(self) -> dict[str, Any]:
        return {"format_version": layout.FORMAT_VERSION, "kind": "inbox", "handle": self.handle,
                "acked_up_to": self.acked_up_to,
                "acked": [{"item_id": i, "seq": s}
                          for i, s in sorted(self.acked.items(), key=lambda x: (x[1], x[0]))],
                "claims": [{"item_id": c.item_id, "seq": c.seq, "worker": c.worker,
                            "expires_at": c.expires_at}
                           for c in sorted(self.claims.values(), key=lambda c: c.item_id)],
                "updated_at": self.updated_at or now_iso()}

    def copy(self) -> InboxState:
        return replace(self, acked=dict(self.acked),
                       claims={k: replace(c) for k, c in self.claims.items()})

    def same(self, other: InboxState) -> bool:
        """Equal apart from ``updated_at``."""
        return (self.acked_up_to, self.acked, self.claims) == \
            (other.acked_up_to, other.acked, other.claims)

    def is_acked(self, item_id: str, seq: int) -> bool:
        return seq <= self.acked_up_to or self.acked.get(item_id, 0) >= seq

    def live_claim(self, item_id: str, now_us: int) -> Claim | None:
        claim = self.claims.get(item_id)
        return claim if claim is not None and claim.live(now_us) else None

    def ack(self, item_id: str, seq: int) -> None:
        if seq > self.acked_up_to and seq > self.acked.get(item_id, 0):
            self.acked[item_id] = seq

    def tidy(self, now_us: int) -> None:
        """Drop single acks under the cursor, expired claims and claims an ack covers."""
        self.acked = {i: s for i, s in self.acked.items() if s > self.acked_up_to}
        self.claims = {i: c for i, c in self.claims.items()
                       if c.live(now_us) and not self.is_acked(i, c.seq)}


def merge_states(local: InboxState, remote: InboxState, now_us: int) -> InboxState:
    """Two machines' states of one user, combined.

    Acks only grow: the higher cursor, and every single ack at its highest seq.
    Claims: the relay's copy (``remote``) was there first, so where both hold
    a live claim on one item by different workers the remote one stays (the
    local worker learns it lost when it re-reads); the same worker's two
    claims keep the later expiry. Expired claims and claims an ack covers go.
    """
    merged = InboxState(remote.handle, max(local.acked_up_to, remote.acked_up_to))
    for state in (remote, local):
        for item_id, seq in state.acked.items():
            merged.ack(item_id, seq)
    for item_id, claim in remote.claims.items():
        if claim.live(now_us):
            merged.claims[item_id] = replace(claim)
    for item_id, claim in local.claims.items():
        if not claim.live(now_us):
            continue
        held = merged.claims.get(item_id)
        later = held is not None and held.worker == claim.worker and (
            time_us(claim.expires_at), claim.seq) > (time_us(held.expires_at), held.seq)
        if held is None or later:
            merged.claims[item_id] = replace(claim)
    merged.tidy(now_us)
    bound_acked(merged)
    return merged


_STATES: dict[str, InboxState] = {}


def load_state(mirror: Mirror, oid: str | None) -> InboxState:
    """The inbox state at commit ``oid`` of the user's inbox ref (empty when None)."""
    if oid is None:
        return InboxState(mirror.handle)
    cached = _STATES.get(oid)
    if cached is None:
        objs = mirror.objects
        data = objs.read_path(objs.commit(oid).tree, layout.INBOX_FILE)
        if data is None:
            raise RelayError(f"inbox commit {oid[:12]} has no {layout.INBOX_FILE}",
                             rule="layout")
        cached = InboxState.from_doc(schema.load("inbox", data))
        if len(_STATES) > 256:
            _STATES.clear()
        _STATES[oid] = cached
    return cached.copy()


def local_ref(mirror: Mirror) -> str:
    """The user's inbox ref on this machine (acks and claims not yet pushed included)."""
    return layout.inbox_ref(mirror.handle)


def relay_ref(mirror: Mirror) -> str:
    """The relay's copy of the user's inbox ref, as of the last fetch."""
    return f"{RELAY_USERS}{mirror.handle}/{layout.INBOX_REF_LEAF}"


def commit_state(mirror: Mirror, state: InboxState, parent: str | None, subject: str) -> str:
    """Write ``state`` as a commit on top of ``parent`` (no ref moves), checked like the gate."""
    state.updated_at = now_iso()
    doc = state.to_doc()
    schema.validate("inbox", doc)
    store, objs = mirror.store, mirror.objects
    tree = store.single_file_tree(layout.INBOX_FILE, schema.dumps(doc))
    message = (f"{subject}\n\n{layout.TRAILER_OP}: {layout.OP_INBOX}\n"
               f"{layout.TRAILER_ACTOR}: {mirror.handle}\n")
    oid = store.commit(tree=tree, parents=[parent] if parent else [], message=message,
                       author=mirror.handle, email=mirror.handle, sign=mirror.signer)
    main = mirror.main()
    if main is None:
        raise RelayUnavailable("the local mirror has no copy of the relay yet")
    tip = objs.commit(main)
    check_inbox_commit(objs, objs.commit(oid), mirror.handle, commit_seq(tip),
                       RelayView(objs, tip.tree))
    return oid


def merge_inbox_states(mirror: Mirror, local: str | None, remote: str) -> str | None:
    """The sync's inbox merger: the relay's state plus this machine's unpushed acks/claims.

    Returns a commit on top of ``remote`` (a fast-forward for the relay), or
    ``remote`` itself when the local state adds nothing. Called by the sync
    with the refs lock held.
    """
    store = mirror.store
    if local is None or local == remote or store.is_ancestor(local, remote):
        return remote
    try:
        mine, theirs = load_state(mirror, local), load_state(mirror, remote)
    except (RelayError, KeyError, ValueError):
        return remote
    merged = merge_states(mine, theirs, current_us())
    if merged.same(theirs):
        return remote
    try:
        return commit_state(mirror, merged, remote,
                            f"inbox {mirror.handle}: merge with the relay's copy")
    except RelayError:
        return remote


def bound_acked(state: InboxState) -> None:
    """Keep the format's bound on single acks: forget the oldest beyond it."""
    if len(state.acked) > ACKED_LIMIT:
        keep = sorted(state.acked.items(), key=lambda x: (-x[1], x[0]))[:ACKED_LIMIT]
        state.acked = dict(keep)


def current_us() -> int:
    return time.time_ns() // 1000


__all__ = [
    "ACKED_LIMIT",
    "Claim",
    "InboxState",
    "bound_acked",
    "commit_state",
    "current_us",
    "load_state",
    "local_ref",
    "merge_inbox_states",
    "merge_states",
    "relay_ref",
    "time_us",
]
