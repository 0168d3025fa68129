"""The inbox through real relays: items, seq, acks, cursors, claims and long-polls.

Every test drives real clients (alice, bob and carol, each with
their own mirror) against a bare relay with the gate installed. The MCP-level
tests of check_inbox live with the MCP server's tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from gitrelay.core import layout
from gitrelay.core.errors import InvalidArgument, InvalidCursor
from gitrelay.inbox import inbox
from gitrelay.inbox.inbox import (
    Claim,
    InboxItem,
    InboxPage,
    InboxState,
    check_inbox,
    claim_inbox_item,
    merge_states,
)
from gitrelay.inbox.index import item_id_for, time_us
from gitrelay.mcp.wording import next_step_text as agent_wording
from gitrelay.relay.client import RelayClient
from gitrelay.store.mirror import RELAY_USERS
from tests.kit import wait_until

ALL = ["pending", "accepted", "completed", "cancelled"]


def by_kind(page: InboxPage, kind: str) -> list[InboxItem]:
    return [i for i in page.items if i.kind == kind]


def only(page: InboxPage, kind: str, thread_id: str | None = None) -> InboxItem:
    found = [i for i in by_kind(page, kind) if thread_id in (None, i.thread_id)]
    assert len(found) == 1, page
    return found[0]


def tip_seq(client: RelayClient) -> int:
    """The seq of the client's newest commit on main (after a delivered write: the relay's)."""
    tip = client.mirror.main()
    assert tip is not None
    return int(client.mirror.objects.commit(tip).trailers[layout.TRAILER_SEQ])


def handoff(sender: RelayClient, to: str, summary: str = "Paginate /users", **kw: Any) -> str:
    result = sender.handoff(to=to, intent=kw.pop("intent", "inform"), summary=summary, **kw)
    assert result.thread_id is not None
    return result.thread_id


# --- items ------------------------------------------------------------------------


def test_a_handoff_is_an_unread_assignment_with_every_seed_000_field(people):
    alice, bob = people["alice"], people["bob"]
    summary = "The /users endpoint now returns pages. " * 10
    tid = handoff(bob, "alice@acme", summary)

    page = check_inbox(alice)

    item = only(page, "assignment")
    assert item.thread_id == tid
    assert (item.sender.handle, item.sender.name, item.sender.role) == \
        ("bob@acme", "Bob Chen", "frontend")
    assert item.summary_preview == summary[:240]
    assert item.status == "pending" and item.unread and item.unread_messages == 0
    assert item.item_id == item_id_for("alice@acme", tid, "assignment")
    assert item.item_id.startswith("ibx_") and len(item.item_id) == 20
    assert item.seq == tip_seq(bob)
    assert item.created_at == item.updated_at == bob.thread(tid).handoff["created_at"]
    assert page.cursor == item.seq and page.next_cursor is None
    # The sender has nothing: their own actions never make items for them.
    assert check_inbox(bob, after=0).items == []


def test_reading_never_consumes(people):
    alice, bob = people["alice"], people["bob"]
    handoff(bob, "alice@acme")
    first = check_inbox(alice, after=0)
    again = check_inbox(alice, after=0)
    assert first.items == again.items
    assert all(i.unread for i in again.items)
    assert alice.mirror.store.ref(layout.inbox_ref("alice@acme")) is None


@pytest.mark.slow
def test_one_reply_item_per_thread_moves_up_with_each_message(people):
    alice, bob = people["alice"], people["bob"]
    tid = handoff(bob, "alice@acme", intent="ask_question", question="Cursor or offset?")
    alice.refresh(max_age=0)
    alice.accept(tid, session_id="s1")
    alice.send_message(tid, "Cursor, I think. Why?")
    assert bob.send_message(tid, "Offsets drift under inserts.").delivery == "delivered"
    reply = only(check_inbox(alice, after=0), "reply", tid)
    assert (reply.seq, reply.unread_messages) == (tip_seq(bob), 1)

    assert bob.send_message(tid, "Also: stable order.").delivery == "delivered"
    page = check_inbox(alice, after=0)

    moved = only(page, "reply", tid)
    assert moved.item_id == reply.item_id and moved.seq == tip_seq(bob)
    assert moved.unread_messages == 2
    assert only(page, "assignment", tid).unread_messages == 2  # a count per thread
    # bob sees alice's message and her accept, as one item of each kind.
    bobs = check_inbox(bob, after=0)
    assert only(bobs, "reply", tid).unread_messages == 1
    assert only(bobs, "task_update", tid).status == "accepted"


@pytest.mark.slow
def test_task_updates_and_proposal_reviews_go_to_the_other_participant(people):
    alice, bob, carol = people["alice"], people["bob"], people["carol"]
    proposed = {"description": "Add an index", "target_files": ["db/schema.sql"],
                "rationale": "Slow lookups"}
    tid = handoff(bob, "alice@acme", intent="propose_action", proposed_action=proposed)
    other = handoff(bob, "carol@acme", "Drop the legacy table")
    alice.refresh(max_age=0)
    alice.accept(tid, session_id="s1")
    alice.draft_proposed_action(tid, "--- a/db/schema.sql\n+++ b/db/schema.sql\n", "Draft")
    alice.complete(tid, result_summary="Index added")
    bob.refresh(max_age=0)
    bob.cancel(other, reason="Not needed after all")

    bobs = check_inbox(bob, after=0)
    update = only(bobs, "task_update", tid)
    assert update.status == "completed" and update.sender.handle == "alice@acme"
    review = only(bobs, "proposal_review", tid)
    assert review.seq < update.seq and review.unread_messages == 1
    cancelled = only(check_inbox(carol, after=0), "task_update", other)
    assert cancelled.status == "cancelled" and cancelled.sender.handle == "bob@acme"
    # With no arguments: the news, closed threads included (the sender hears of the
    # completion), until it is read.
    assert {(i.kind, i.thread_id) for i in check_inbox(bob).items} == \
        {("task_update", tid), ("proposal_review", tid)}
    check_inbox(bob, ack_up_to=update.seq)
    assert check_inbox(bob).items == []
    assert {i.status for i in check_inbox(carol, status=["cancelled"]).items} == {"cancelled"}


# --- acks ------------------------------------------------------------------------------


def test_ack_items_with_news_since_stays_unread_and_comes_back(people):
    alice, bob = people["alice"], people["bob"]
    tid = handoff(bob, "alice@acme")
    bob.send_message(tid, "First detail.")
    seen = check_inbox(alice, after=0)
    reply = only(seen, "reply")
    bob.send_message(tid, "Second detail, after alice looked.")

    page = check_inbox(alice, after=0, ack_items=[
        {"item_id": reply.item_id, "seq": reply.seq},
        {"item_id": only(seen, "assignment").item_id, "seq": only(seen, "assignment").seq},
        {"item_id": "ibx_0000000000000000", "seq": 3}])

    outcomes = {r.item_id: (r.outcome, r.current_seq) for r in page.ack_results}
    assert outcomes[reply.item_id] == ("news_since", reply.seq + 1)
    assert outcomes["ibx_0000000000000000"] == ("not_in_inbox", None)
    assert page.acknowledged == "Acknowledged 1 of 3."
    assert page.delivery == "delivered"
    back = only(page, "reply")
    assert back.unread and back.seq == reply.seq + 1
    assert back.unread_messages == 1  # the first message was read when acked at its seq
    assert not only(page, "assignment").unread
    assert check_inbox(alice, after=0, unread_only=True).items == [back]

    done = check_inbox(alice, after=0, ack_items=[{"item_id": back.item_id, "seq": back.seq}])
    assert [r.outcome for r in done.ack_results] == ["acknowledged"]
    assert check_inbox(alice, after=0, unread_only=True).items == []
    assert only(done, "reply").unread_messages == 0


@pytest.mark.slow
def test_ack_up_to_marks_everything_up_to_that_seq(people):
    alice, bob, carol = people["alice"], people["bob"], people["carol"]
    first = handoff(bob, "alice@acme", "First")
    handoff(carol, "alice@acme", "Second")
    cursor = check_inbox(alice, after=0).cursor
    third = handoff(bob, "alice@acme", "Third")

    page = check_inbox(alice, after=0, ack_up_to=cursor)

    assert page.acknowledged == f"Acknowledged everything up to seq {cursor}."
    assert [(i.summary_preview, i.unread) for i in page.items] == \
        [("First", False), ("Second", False), ("Third", True)]
    newer = check_inbox(alice, after=cursor)
    assert [i.thread_id for i in newer.items] == [third] and newer.cursor > cursor
    # An unread item never falls behind a cursor: listed again until it is read.
    again = check_inbox(alice, after=newer.cursor)
    assert [i.thread_id for i in again.items] == [third] and again.cursor == newer.cursor
    state = inbox.inbox_state(alice)
    assert state.acked_up_to == cursor and state.acked == {}
    # The state is on the relay, in alice's own ref.
    store = alice.mirror.store
    assert store.ref(layout.inbox_ref("alice@acme")) == \
        store.ref(f"{RELAY_USERS}alice@acme/inbox")
    check_inbox(alice, ack_up_to=newer.cursor)
    nothing = check_inbox(alice, after=newer.cursor)
    assert nothing.items == [] and nothing.cursor == newer.cursor
    assert first != third


@pytest.mark.slow
def test_two_clones_of_one_user_see_the_same_seqs_and_unread_state(people, make_client):
    alice, bob = people["alice"], people["bob"]
    laptop, ci = alice, make_client("alice@acme", home="alice2")
    ci.sync.fresh_seconds = 0
    tid = handoff(bob, "alice@acme")
    bob.send_message(tid, "More context.")
    other = handoff(bob, "alice@acme", "Another one")

    on_laptop, on_ci = check_inbox(laptop, after=0), check_inbox(ci, after=0)
    assert on_laptop.items == on_ci.items and len(on_laptop.items) == 3

    reply = only(on_laptop, "reply")
    check_inbox(laptop, ack_items=[{"item_id": reply.item_id, "seq": reply.seq}])
    assert check_inbox(ci, after=0).items == check_inbox(laptop, after=0).items
    assert not only(check_inbox(ci, after=0), "reply").unread

    # Both ack different items before seeing each other's ack: the states merge.
    ci.refresh(max_age=0)
    ci.sync.fresh_seconds = 3600  # the CI box does not fetch before its ack
    laptop_item = only(on_laptop, "assignment", tid)
    check_inbox(laptop, ack_items=[{"item_id": laptop_item.item_id, "seq": laptop_item.seq}])
    ci_item = only(on_ci, "assignment", other)
    ci_page = check_inbox(ci, ack_items=[{"item_id": ci_item.item_id, "seq": ci_item.seq}])
    assert ci_page.delivery == "delivered"
    ci.sync.fresh_seconds = 0
    assert check_inbox(ci, after=0, unread_only=True).items == []
    assert check_inbox(laptop, after=0, unread_only=True).items == []
    assert inbox.inbox_state(laptop).same(inbox.inbox_state(ci))


# --- pagination and filters -----------------------------------------------------------------


@pytest.mark.slow
def test_pagination_over_more_than_200_items_returns_each_once(people):
    alice, bob = people["alice"], people["bob"]
    bob.writes = "queue"
    sent = [handoff(bob, "alice@acme", f"Task {n}") for n in range(205)]
    report = bob.deliver()
    assert report.delivered == 205 and not bob.mirror.outbox()

    seen: list[InboxItem] = []
    page = check_inbox(alice, after=0, limit=200)
    while True:
        seen += page.items
        if page.next_cursor is None:
            break
        page = check_inbox(alice, cursor=page.next_cursor, limit=200)
    assert [i.thread_id for i in seen] == sent
    assert [i.seq for i in seen] == sorted({i.seq for i in seen})

    newest_first: list[InboxItem] = []
    page = check_inbox(alice)  # seed 000: most recently updated first, 50 a page
    pages = 0
    while True:
        pages += 1
        assert len(page.items) <= 50
        newest_first += page.items
        if page.next_cursor is None:
            break
        page = check_inbox(alice, cursor=page.next_cursor)
    assert pages == 5
    assert [i.thread_id for i in newest_first] == sent[::-1]

    for bad in (0, 201):
        with pytest.raises(InvalidArgument) as err:
            check_inbox(alice, limit=bad)
        assert err.value.data["field"] == "limit"


def test_a_cursor_that_check_inbox_did_not_return_is_refused(people):
    alice, bob = people["alice"], people["bob"]
    for n in range(3):
        handoff(bob, "alice@acme", f"Task {n}")
    token = check_inbox(alice, limit=1).next_cursor
    assert token is not None
    for bad in (token[:-1] + ("0" if token[-1] != "0" else "1"), "c1.e30.000000000000",
                "garbage", ""):
        with pytest.raises(InvalidCursor) as err:
            check_inbox(alice, cursor=bad)
        assert "start again with after: 0" in agent_wording(err.value).lower()
    with pytest.raises(InvalidCursor):
        check_inbox(alice, after=10_000)
    with pytest.raises(InvalidCursor):
        check_inbox(alice, after=-1)
    with pytest.raises(InvalidArgument):
        check_inbox(alice, ack_up_to=10_000)


@pytest.mark.slow
def test_since_and_status_filters(people):
    alice, bob, carol = people["alice"], people["bob"], people["carol"]
    old = handoff(bob, "alice@acme", "Old")
    done = handoff(carol, "alice@acme", "Done")
    alice.refresh(max_age=0)
    alice.accept(done, session_id="s")
    alice.complete(done, result_summary="ok")
    cut = check_inbox(alice, after=0, status=ALL).items[-1].updated_at
    new = handoff(bob, "alice@acme", "New")

    assert [i.thread_id for i in check_inbox(alice, since=cut).items] == [new]
    # No arguments: the news, whatever the status: alice never read the completed
    # thread's handoff (accepting it through the library marks nothing read).
    assert {i.thread_id for i in check_inbox(alice).items} == {old, new, done}
    assert {i.thread_id for i in check_inbox(alice, status=["pending", "accepted"]).items} \
        == {old, new}
    assert [i.thread_id for i in check_inbox(alice, status=["completed"]).items] == [done]
    # With a cursor, every status comes (a completion is news), unless filtered.
    assert {i.thread_id for i in check_inbox(alice, after=0).items} == {old, done, new}
    assert [i.thread_id for i in check_inbox(alice, after=0, status=["pending"],
                                             since=cut).items] == [new]
    with pytest.raises(InvalidArgument):
        check_inbox(alice, status=["open"])
    with pytest.raises(InvalidArgument):
        check_inbox(alice, since="yesterday")


# --- claims ------------------------------------------------------------------------------


@pytest.mark.slow
def test_claims_keep_two_workers_off_each_others_items(people):
    alice, bob = people["alice"], people["bob"]
    one = handoff(bob, "alice@acme", "One")
    two = handoff(bob, "alice@acme", "Two")
    items = {i.thread_id: i for i in check_inbox(alice, after=0).items}
    a, b = items[one], items[two]

    got = claim_inbox_item(alice, item_id=a.item_id, seq=a.seq, worker="w1")
    assert got.claimed and got.outcome == "claimed" and got.delivery == "delivered"
    lost = claim_inbox_item(alice, item_id=a.item_id, seq=a.seq, worker="w2")
    assert not lost.claimed and lost.held_by == "w1" and lost.outcome == "held_by_other"
    listed = {i.thread_id: i for i in check_inbox(alice, after=0, worker="w2").items}
    assert listed[one].claimed_by == "w1" and listed[one].claim_expires_at == got.expires_at

    # w2 cannot ack w1's item; its ack_up_to leaves it to w1 and acks the rest.
    page = check_inbox(alice, after=0, worker="w2", ack_items=[
        {"item_id": a.item_id, "seq": a.seq}])
    assert [r.outcome for r in page.ack_results] == ["claimed_by_other"]
    page = check_inbox(alice, after=0, worker="w2", ack_up_to=b.seq)
    assert "1 item(s) another copy has claimed" in (page.acknowledged or "")
    unread = {i.thread_id for i in page.items if i.unread}
    assert unread == {one}

    renewed = claim_inbox_item(alice, item_id=a.item_id, seq=a.seq, worker="w1")
    assert renewed.claimed and renewed.outcome == "renewed"
    page = check_inbox(alice, worker="w1", ack_items=[{"item_id": a.item_id, "seq": a.seq}])
    assert [r.outcome for r in page.ack_results] == ["acknowledged"]
    assert check_inbox(alice, after=0, unread_only=True).items == []
    assert inbox.inbox_state(alice).claims == {}  # an ack releases the claim
    again = claim_inbox_item(alice, item_id=a.item_id, seq=a.seq, worker="w2")
    assert not again.claimed and again.outcome == "already_acknowledged"
    with pytest.raises(InvalidArgument):
        claim_inbox_item(alice, item_id="ibx_0000000000000000", seq=1, worker="w1")


def test_an_expired_claim_is_taken_over(people):
    alice, bob = people["alice"], people["bob"]
    handoff(bob, "alice@acme")
    item = only(check_inbox(alice, after=0), "assignment")
    # A worker that died: its claim's lease ran out a minute ago.
    mirror = alice.mirror
    with mirror.refs_locked():
        state = inbox.inbox_state(alice)
        state.claims[item.item_id] = Claim(item.item_id, item.seq, "dead", "2020-01-01T00:00:00Z")
        oid = inbox.commit_state(mirror, state, mirror.store.ref(layout.inbox_ref(alice.handle)),
                                 "inbox alice@acme: a claim that expired")
        mirror.store.set_ref(layout.inbox_ref(alice.handle), oid)
    assert only(check_inbox(alice, after=0), "assignment").claimed_by is None

    taken = claim_inbox_item(alice, item_id=item.item_id, seq=item.seq, worker="w2")

    assert taken.claimed and taken.outcome == "taken_over"
    ack = check_inbox(alice, worker="w2", ack_items=[{"item_id": item.item_id,
                                                       "seq": item.seq}])
    assert [r.outcome for r in ack.ack_results] == ["acknowledged"]


def test_two_machines_claiming_one_item_cannot_both_win(people, make_client):
    alice, bob = people["alice"], people["bob"]
    ci = make_client("alice@acme", home="alice2")
    handoff(bob, "alice@acme")
    item = only(check_inbox(alice, after=0), "assignment")
    ci.refresh(max_age=0)
    ci.sync.fresh_seconds = 3600  # the CI box does not know about the laptop's claim yet

    first = claim_inbox_item(alice, item_id=item.item_id, seq=item.seq, worker="laptop")
    second = claim_inbox_item(ci, item_id=item.item_id, seq=item.seq, worker="ci")

    assert first.claimed and not second.claimed
    assert second.held_by == "laptop"
    ci.sync.fresh_seconds = 0
    assert only(check_inbox(ci, after=0), "assignment").claimed_by == "laptop"


def test_merging_two_states_keeps_every_ack_and_the_relays_claim():
    now = time_us("2026-05-01T10:00:00Z")
    live, later, dead = "2026-05-01T10:10:00Z", "2026-05-01T10:20:00Z", "2026-05-01T09:00:00Z"
    local = InboxState("alice@acme", 5, {"ibx_a": 9, "ibx_b": 7},
                       {"ibx_c": Claim("ibx_c", 8, "w1", live),
                        "ibx_d": Claim("ibx_d", 8, "w2", later),
                        "ibx_e": Claim("ibx_e", 8, "w1", dead)})
    remote = InboxState("alice@acme", 6, {"ibx_a": 8, "ibx_f": 10},
                        {"ibx_c": Claim("ibx_c", 8, "w2", live),
                         "ibx_d": Claim("ibx_d", 8, "w2", live)})

    merged = merge_states(local, remote, now)

    assert merged.acked_up_to == 6
    assert merged.acked == {"ibx_a": 9, "ibx_b": 7, "ibx_f": 10}
    assert {k: (c.worker, c.expires_at) for k, c in merged.claims.items()} == \
        {"ibx_c": ("w2", live), "ibx_d": ("w2", later)}


# --- refused operations and long-polls ----------------------------------------------------


def test_an_operation_the_relay_refused_is_an_item_until_acknowledged(people):
    alice, bob = people["alice"], people["bob"]
    tid = handoff(bob, "alice@acme")
    alice.refresh(max_age=0)
    alice.accept(tid, session_id="s1", mode="queue")  # queued, not delivered
    bob.cancel(tid, reason="Changed my mind")  # the sender wins the race
    report = alice.deliver()
    assert [r.rule for r in report.refused] == ["thread_terminal"]

    page = check_inbox(alice)  # the default view still shows it (a cancelled thread)
    refused = only(page, "refused", tid)
    assert refused.unread and refused.status == "cancelled"
    assert refused.detail is not None and "state_changed" in refused.detail
    assert refused.sender.handle == "bob@acme"
    assert only(check_inbox(alice, after=0), "task_update", tid).status == "cancelled"
    cursor = check_inbox(alice, after=0).cursor
    assert refused.seq <= cursor

    done = check_inbox(alice, ack_items=[{"item_id": refused.item_id, "seq": refused.seq}])
    assert [r.outcome for r in done.ack_results] == ["acknowledged"]
    assert by_kind(check_inbox(alice, after=0, unread_only=True), "refused") == []


@pytest.mark.slow
def test_a_long_poll_returns_when_a_new_item_arrives(people):
    alice, bob = people["alice"], people["bob"]
    cursor = check_inbox(alice, after=0).cursor
    sent: list[str] = []
    later = threading.Timer(0.3, lambda: sent.append(handoff(bob, "alice@acme", "Wake up")))
    later.start()
    try:
        page = check_inbox(alice, after=cursor, wait_seconds=30)
    finally:
        later.join()
    assert [i.thread_id for i in page.items] == sent
    with pytest.raises(InvalidArgument):
        check_inbox(alice, wait_seconds=61)


@pytest.mark.slow
def test_a_long_poll_with_nothing_new_answers_empty(people):
    alice = people["alice"]
    cursor = check_inbox(alice, after=0).cursor
    page = check_inbox(alice, after=cursor, wait_seconds=0.6)
    assert page.items == [] and page.cursor == cursor


def test_check_inbox_refuses_bad_acks_and_workers(people):
    alice = people["alice"]
    bad: list[Callable[[], object]] = [
        lambda: check_inbox(alice, ack_items=[{"item_id": "ibx_x"}]),
        lambda: check_inbox(alice, ack_items=[{"item_id": "ibx_x", "seq": 0}]),
        lambda: check_inbox(alice, ack_up_to=-1),
        lambda: check_inbox(alice, worker="../w"),
        lambda: claim_inbox_item(alice, item_id="ibx_x", seq=1, worker="w", lease_seconds=0),
    ]
    for call in bad:
        with pytest.raises(InvalidArgument):
            call()


def test_news_a_pass_brings_while_the_page_is_read_ends_the_long_poll_at_once(
        people, monkeypatch):
    """The sync loop brings a handoff while check_inbox reads its first page, which misses
    it: the wait that follows counts that pass and ends at once, instead of waiting for
    the next one (or its 5 s)."""
    alice, bob = people["alice"], people["bob"]
    cursor = check_inbox(alice, after=0).cursor
    alice.sync.start_loop(watch=False)
    loop = alice.sync.loop
    assert loop is not None
    sent: list[str] = []
    waits: list[bool] = []
    read, wait = inbox._read, loop.wait_for_change

    def read_then_news(*args: Any) -> Any:
        page = read(*args)
        if not sent:  # the news lands, and the loop takes it, right after this read
            before = loop.generation
            sent.append(handoff(bob, "alice@acme", "Mid-read"))
            loop.kick()
            wait_until(lambda: loop.generation > before, "alice's loop fetching the handoff")
        return page

    def recorded(timeout: float, since: int | None = None) -> bool:
        waits.append(wait(timeout, since))
        return waits[-1]

    monkeypatch.setattr(inbox, "_read", read_then_news)
    monkeypatch.setattr(loop, "wait_for_change", recorded)
    try:
        page = check_inbox(alice, after=cursor, wait_seconds=30, sync_loop=loop)
    finally:
        alice.sync.stop_loop()
    assert [i.thread_id for i in page.items] == sent
    assert waits == [True]  # the wait saw the pass that came during the read
