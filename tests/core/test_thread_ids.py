"""Which thread an id or a prefix names (``core.view.resolve_thread_id``, the one
resolution every front end goes through), and a thread's state as the rules read it
agreeing with the client's full read of it."""

from __future__ import annotations

from itertools import count

import pytest

from gitrelay.core.errors import AmbiguousId, ThreadNotFound
from gitrelay.core.ids import thread_id_for
from gitrelay.core.threadstate import ThreadState
from gitrelay.core.view import RelayView, resolve_thread_id
from gitrelay.relay.client import RelayClient
from gitrelay.relay.results import ThreadView


def _never_read() -> RelayView:
    raise AssertionError("a full thread id was resolved by reading the relay")


def _two_keys_sharing_a_prefix(sender: str, length: int) -> tuple[str, str, str]:
    """Two idempotency keys whose threads' ids start alike, and that prefix."""
    seen: dict[str, str] = {}
    for n in count():
        key = f"prefix-probe-{n}"
        prefix = thread_id_for(sender, key)[:length]
        if prefix in seen:
            return seen[prefix], key, prefix
        seen[prefix] = key
    raise AssertionError("unreachable")


def test_a_full_id_is_checked_without_reading_the_relay() -> None:
    tid = thread_id_for("alice@acme", "k-1")
    assert resolve_thread_id(tid, _never_read) == tid
    assert resolve_thread_id(tid.lower(), _never_read) == tid


def test_a_prefix_names_one_thread_or_is_refused_as_ambiguous_or_unknown(
        team: dict[str, RelayClient]) -> None:
    alice = team["alice"]
    first_key, second_key, shared = _two_keys_sharing_a_prefix("alice@acme", 2)
    one = alice.handoff(to="bob@acme", intent="inform", summary="one",
                        idempotency_key=first_key, mode="queue").thread_id
    two = alice.handoff(to="bob@acme", intent="inform", summary="two",
                        idempotency_key=second_key, mode="queue").thread_id
    assert one is not None and two is not None
    assert resolve_thread_id(one[:8], alice.view) == one
    assert resolve_thread_id(two[:8].lower(), alice.view) == two
    with pytest.raises(AmbiguousId) as ambiguous:
        resolve_thread_id(shared, alice.view)
    assert set(ambiguous.value.data["matching"]) == {one, two}
    # One character walks every shard under it.
    with pytest.raises(AmbiguousId) as wider:
        resolve_thread_id(one[:1], alice.view)
    assert set(wider.value.data["matching"]) >= {one, two}
    unused = next(p for p in ("ZZ", "ZY", "YZ", "YY") if not one.startswith(p)
                  and not two.startswith(p))
    with pytest.raises(ThreadNotFound):
        resolve_thread_id(unused, alice.view)


def test_the_full_read_of_a_thread_is_its_state_with_its_documents(
        team: dict[str, RelayClient]) -> None:
    alice, bob = team["alice"], team["bob"]
    tid = alice.handoff(to="bob@acme", intent="ask_question", summary="which parser?",
                        question="v2 or v3?").thread_id
    assert tid is not None
    bob.refresh(max_age=0)
    bob.accept(tid, session_id="s-1")
    bob.send_message(tid, "v3")
    full = bob.thread(tid)
    state = bob.mirror.view().thread(tid)
    assert isinstance(full, ThreadView) and isinstance(full, ThreadState)
    assert state is not None
    assert (full.thread_id, full.sender, full.recipient, full.status, full.last_seq) == \
        (state.thread_id, state.sender, state.recipient, state.status, state.last_seq) == \
        (tid, "alice@acme", "bob@acme", "accepted", 1)
    assert full.names == state.names
    assert [m["body"] for m in full.messages] == ["v3"]
    assert full.accept is not None and full.complete is None and full.cancel is None
