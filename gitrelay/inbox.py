"""The inbox: items addressed to a user, cursors, acks and claims.

INTERFACE ONLY (being implemented): the types and signatures below are the
contract between the MCP server, the CLI and the inbox implementation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import RelayClient

KINDS = ("assignment", "reply", "task_update", "proposal_review", "refused")


@dataclass
class Sender:
    handle: str
    name: str
    role: str


@dataclass
class InboxItem:
    item_id: str
    seq: int
    kind: str
    thread_id: str
    sender: Sender          # the other participant (who caused the item)
    summary_preview: str    # first 240 characters of the handoff summary
    status: str             # the thread's status
    unread_messages: int
    created_at: str         # the thread's creation time
    updated_at: str         # the item's last event time
    unread: bool
    claimed_by: str | None = None
    claim_expires_at: str | None = None
    detail: str | None = None  # e.g. the gate's reason for a refused item


@dataclass
class AckResult:
    item_id: str
    seq: int
    outcome: str            # "acknowledged" | "news_since" | "not_in_inbox" | "claimed_by_other"
    current_seq: int | None = None


@dataclass
class InboxPage:
    items: list[InboxItem]
    next_cursor: str | None
    cursor: int             # highest seq this user has (pass as `after` next time)
    acknowledged: str | None = None   # e.g. "Acknowledged 2 of 3."
    ack_results: list[AckResult] = field(default_factory=list)
    index_rebuilt: bool = False


@dataclass
class ClaimResult:
    item_id: str
    seq: int
    worker: str
    claimed: bool
    expires_at: str
    held_by: str | None = None


def check_inbox(client: RelayClient, *, status: list[str] | None = None,
                since: str | None = None, limit: int = 50, after: int | None = None,
                cursor: str | None = None, unread_only: bool = False,
                ack_up_to: int | None = None, ack_items: list[dict[str, Any]] | None = None,
                worker: str | None = None, wait_seconds: float = 0) -> InboxPage:
    raise NotImplementedError("the inbox is being implemented")


def claim_inbox_item(client: RelayClient, *, item_id: str, seq: int, worker: str,
                     lease_seconds: float | None = None) -> ClaimResult:
    raise NotImplementedError("the inbox is being implemented")
