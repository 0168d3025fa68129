"""What the handoff operations give back: a thread read in full, a write's result,
a page of teammates.

Kept apart from :mod:`gitrelay.relay.client`, which makes them, so that
:mod:`gitrelay.relay.policy` (which the client calls) can name them without
reaching up to the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitrelay.core.ops import Op
from gitrelay.core.threadstate import ThreadState
from gitrelay.store.mirror import Refused, Written


@dataclass
class WriteResult:
    op: Op
    written: Written | None
    delivery: str
    thread_id: str | None
    doc: dict[str, Any]
    repeated: bool = False
    # Why a write meant to be delivered stayed queued: the relay could not be reached.
    unreachable: str | None = None


@dataclass
class ThreadView(ThreadState):
    """A thread folded from its files, as of the local mirror (outbox included): its
    state (:class:`~gitrelay.core.threadstate.ThreadState`: sender, recipient, status,
    read off the same file names) with every document of the thread."""

    thread_id: str
    handoff: dict[str, Any]
    messages: list[dict[str, Any]]
    accept: dict[str, Any] | None
    complete: dict[str, Any] | None
    cancel: dict[str, Any] | None
    undelivered: list[str] = field(default_factory=list)  # keys of the caller's queued ops
    refused: list[Refused] = field(default_factory=list)
    names: frozenset[str] = frozenset()  # the files of the thread's directory
    tip: str | None = None  # the local main it was read from, when known

    @property
    def updated_at(self) -> str:
        stamps = [str(self.handoff["created_at"])]
        stamps += [str(m["created_at"]) for m in self.messages]
        stamps += [str(d["at"]) for d in (self.accept, self.complete, self.cancel) if d]
        return max(stamps)


@dataclass
class TeammatesPage:
    """A page of :meth:`RelayClient.teammates_page`: the profiles, the cursor of the next
    page (None on the last) and how many teammates are registered in all."""

    teammates: list[dict[str, Any]]
    next_cursor: str | None
    total: int
