"""A thread as a front end reads it, and an accept as it is judged: the local copy first,
fetched once when it lacks the thread, then :mod:`gitrelay.relay.policy`'s decision.

The MCP tools, the command line and the web view call these; the decisions
themselves (who may read, what the trust file allows) are policy's, over the data
read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from gitrelay.core.errors import ThreadNotFound
from gitrelay.core.view import resolve_thread_id
from gitrelay.relay import policy
from gitrelay.relay.client import RelayClient
from gitrelay.relay.policy import Reader
from gitrelay.relay.results import ThreadView, WriteResult

if TYPE_CHECKING:
    from gitrelay.trust.trust import TrustDecision, TrustRules

__all__ = ["Accepted", "accept", "participant_view", "read_thread", "resolve_thread",
           "thread_to_read"]

T = TypeVar("T")


def _fetched_once(client: RelayClient, read: Callable[[str], T], ref: str) -> T:
    """``read(ref)`` on the local copy; a thread the copy does not have yet may have
    arrived since the last fetch, so on ThreadNotFound one fetch, then once more."""
    try:
        return read(ref)
    except ThreadNotFound:
        client.refresh(max_age=0)
        return read(ref)


def resolve_thread(client: RelayClient, ref: str) -> str:
    """The full thread id an id or a unique prefix names (fetching once if needed)."""
    return _fetched_once(client, lambda r: resolve_thread_id(r, client.view), ref)


def read_thread(client: RelayClient, tid: str) -> ThreadView:
    """Thread ``tid`` as of the local copy, fetched once if the copy lacks it."""
    return _fetched_once(client, client.thread, tid)


def participant_view(client: RelayClient, ref: str) -> ThreadView:
    """The thread ``ref`` names, for its sender or recipient only."""
    view = read_thread(client, resolve_thread(client, ref))
    policy.check_participant(client.handle, view)
    return view


def thread_to_read(client: RelayClient, ref: str, reader: Reader) -> ThreadView:
    """The thread ``ref`` names, as ``reader`` may read it.

    A person reads any thread of the relay: whoever can run gitrelay on it can read
    every thread with ``git log -p`` (or ``gitrelay log``), so refusing would hide
    nothing, and a lead following the team's work needs it. An agent reads only
    the threads its teammate sent or received (``not_a_participant`` otherwise):
    teammate text reaches a model only from the people it works with, which keeps
    the text that could carry an injection to the least the work needs."""
    if reader is Reader.AGENT:
        return participant_view(client, ref)
    return read_thread(client, resolve_thread(client, ref))




def accept(client: RelayClient, ref: str, rules: TrustRules, *, session_id: str,
           mode: str | None = None) -> Accepted:
    """Accept the handoff ``ref`` names, after the caller's trust rules."""
    view = participant_view(client, ref)
    decision = policy.check_accept(client.handle, view, rules)
    result = client.accept(view.thread_id, session_id=session_id, mode=mode)
    return Accepted(view, decision, result)


@dataclass
class Accepted:
    before: ThreadView        # the thread as it was judged
    decision: TrustDecision   # the trust file's judgement of its sender
    result: WriteResult
