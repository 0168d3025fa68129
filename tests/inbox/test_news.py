"""What is news (gitrelay.inbox.news), held the same in every front end.

The stall rules are checked on the pure function; the rest (claims of a handoff by a
worker of its recipient among them) on a real relay with the
gate, alice and bob each with their own GITRELAY_HOME, as the hooks and the CLI find
them: the six front ends (check_inbox's default call, `gitrelay inbox`, the web
inbox's default view, the session-start context and the stop nudge, which read the
same look, and the waiter) are held to one set of items over random histories, and
no cursor leaves an unread item behind.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitrelay.core.vocab import ASSIGNMENT, CLAIMED, STALLED
from gitrelay.inbox.inbox import check_inbox, claim_inbox_item, mark_read, unread_on_thread
from gitrelay.inbox.inboxpeek import peek_unread
from gitrelay.inbox.news import (
    DAY_US,
    StallClock,
    item_id_for,
    stall_days,
    stall_text,
    stalls,
)
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.sync.inboxstate import current_us

ALL = ["pending", "accepted", "completed", "cancelled"]
NOW = 1_800_000_000_000_000


# --- the pure decision -----------------------------------------------------------------


def clock(status: str, *, handoff_days: float, last_days: float, sender: str = "alice@acme",
          recipient: str = "bob@acme") -> StallClock:
    return StallClock("T1", sender, recipient, status, "Paginate /users", 5,
                      NOW - int(handoff_days * DAY_US), 9, NOW - int(last_days * DAY_US))


def test_a_handoff_pending_for_n_days_is_news_to_both_sides():
    rows = [clock("pending", handoff_days=4.5, last_days=0.1)]
    sent = stalls("alice@acme", rows, now_us=NOW, days=3)
    got = stalls("bob@acme", rows, now_us=NOW, days=3)
    assert [(s.mine, s.days, s.since_seq) for s in sent] == [(True, 4, 5)]
    assert [(s.mine, s.days) for s in got] == [(False, 4)]
    assert stall_text(sent[0]) == "bob@acme has not accepted this handoff for 4 days"
    assert stall_text(got[0]) == "you have not accepted this handoff for 4 days"
    # Not yet for a longer stall_days, nor for a teammate not on the thread.
    assert stalls("alice@acme", rows, now_us=NOW, days=5) == []
    assert stalls("carol@acme", rows, now_us=NOW, days=3) == []


def test_an_accepted_handoff_stalls_from_its_last_move_and_a_closed_one_never():
    quiet = [clock("accepted", handoff_days=9, last_days=5.2)]
    (sent,) = stalls("alice@acme", quiet, now_us=NOW, days=3)
    (got,) = stalls("bob@acme", quiet, now_us=NOW, days=3)
    assert sent.since_seq == 9 and sent.days == 5
    assert stall_text(got) == "you accepted this handoff 5 days ago, with no message since"
    assert stall_text(sent) == ("bob@acme accepted this handoff 5 days ago, with no "
                                "message since")
    # A message two days ago: the thread moved.
    assert stalls("bob@acme", [clock("accepted", handoff_days=9, last_days=2)], now_us=NOW,
                  days=3) == []
    for status in ("completed", "cancelled"):
        assert stalls("bob@acme", [clock(status, handoff_days=9, last_days=9)], now_us=NOW,
                      days=3) == []
    # Handles compare without case, as everywhere.
    assert len(stalls("bob@acme", [clock("pending", handoff_days=4, last_days=4,
                                         recipient="Bob@Acme")], now_us=NOW, days=3)) == 1


def test_stall_days_is_the_relays_or_the_default():
    assert stall_days({}) == 3
    assert stall_days({"stall_days": 7}) == 7
    assert stall_days({"stall_days": True}) == 3


# --- a relay, alice and bob at their own machines -------------------------------------------


class Duo:
    """alice and bob joined to one relay, each with their own GITRELAY_HOME (saved config:
    the hooks and the CLI find them from it)."""

    def __init__(self, relay: Path, base: Path, mp: pytest.MonkeyPatch) -> None:
        self.relay, self.base, self.mp = relay, base, mp
        self.clients: dict[str, RelayClient] = {}
        for who, (name, role) in {"alice": ("Alice Martin", "backend"),
                                  "bob": ("Bob Chen", "frontend")}.items():
            self.be(who)
            joining.join(str(relay), f"{who}@acme", name=name, role=role)
            client = RelayClient.from_config(writes="wait")
            client.sync.fresh_seconds = 0
            self.clients[who] = client

    def be(self, who: str) -> RelayClient | None:
        self.mp.setenv("GITRELAY_HOME", str(self.base / who))
        return self.clients.get(who)

    def __getitem__(self, who: str) -> RelayClient:
        client = self.be(who)
        assert client is not None
        return client


@pytest.fixture
def duo(relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Duo]:
    yield Duo(relay, tmp_path, monkeypatch)


Key = tuple[str, str]  # (thread, kind): what every front end shows of an item


def _cli_inbox(duo: Duo, who: str) -> set[Key]:
    from gitrelay.cli.main import main

    duo.be(who)
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            code = main(["inbox", "--json", "--limit", "200"])
        except SystemExit as exc:
            code = int(exc.code or 0)
    assert code == 0
    return {(i["thread_id"], i["kind"]) for i in json.loads(out.getvalue())["items"]}


def _web_inbox(client: RelayClient) -> set[Key]:
    from gitrelay.trust.trust import TrustRules
    from gitrelay.web import pages

    data = pages.inbox(client, pages.InboxFilters(), pages.Intents(),
                       pages.Withheld(client.handle, TrustRules.strict()), limit=200)
    return {(r.thread_id, r.kind) for r in data.rows}


def _hook_look(duo: Duo, who: str, session: str) -> set[Key]:
    """What a new session's start context (and, in a session, the stop nudge) announces."""
    from gitrelay.hosts import hookrun
    from gitrelay.hosts.session import SessionStore

    duo.be(who)
    looked = hookrun._look(SessionStore("codex", duo.base / f"sessions-{who}"), session)
    return set() if looked is None else {(i.thread_id, i.kind) for i in looked.new}


def _waiter(client: RelayClient) -> set[Key]:
    """The waiter's two reads: its first look, then what it long-polls after its cursor."""
    first = check_inbox(client, limit=200)
    later = check_inbox(client, unread_only=True, limit=200, after=first.cursor)
    keys = {(i.thread_id, i.kind) for i in first.items}
    assert {(i.thread_id, i.kind) for i in later.items} == keys
    return keys


def front_ends(duo: Duo, who: str, session: str) -> dict[str, set[Key]]:
    client = duo[who]
    client.refresh(max_age=0)
    unread = {(i.thread_id, i.kind) for i in
              check_inbox(client, status=ALL, limit=200).items if i.unread}
    peek = peek_unread(client.mirror.path, client.handle)
    return {
        "unread (any status)": unread,
        "check_inbox": {(i.thread_id, i.kind) for i in check_inbox(client, limit=200).items},
        "gitrelay inbox": _cli_inbox(duo, who),
        "web inbox": _web_inbox(duo[who]),
        "start context / stop nudge": _hook_look(duo, who, session),
        "index reader of the hooks": unread if peek is None else
        {(i.thread_id, i.kind) for i in peek.items},
        "waiter": _waiter(duo[who]),
    }


STEP = st.one_of(
    st.tuples(st.just("handoff"), st.sampled_from(["alice", "bob"]), st.just(0)),
    st.tuples(st.sampled_from(["message", "accept", "complete", "cancel", "read", "ack",
                               "claim"]),
              st.sampled_from(["alice", "bob"]), st.integers(0, 3)),
)


def play(duo: Duo, threads: list[tuple[str, str, str]], step: tuple[str, str, int]) -> None:
    """One step of a history; steps the state machine would refuse are skipped."""
    op, who, n = step
    other = "bob" if who == "alice" else "alice"
    if op == "handoff":
        result = duo[who].handoff(to=f"{other}@acme", intent="inform",
                                  summary=f"Work {len(threads)} from {who}")
        assert result.thread_id is not None
        threads.append((result.thread_id, who, other))
        return
    if op == "ack":
        client = duo[who]
        client.refresh(max_age=0)
        check_inbox(client, ack_up_to=check_inbox(client, limit=1).cursor)
        return
    if not threads:
        return
    tid, sender, recipient = threads[n % len(threads)]
    client = duo[who]
    client.refresh(max_age=0)
    status = client.thread(tid).status
    if op == "read":
        mark_read(client, unread_on_thread(client, tid))
    elif op == "claim":
        # a copy of the recipient takes the handoff (w0 or w1: a second worker takes
        # over only an expired claim, so it is mostly refused)
        taker = duo[recipient]
        taker.refresh(max_age=0)
        item = item_id_for(taker.handle, tid, ASSIGNMENT)
        row = next((i for i in check_inbox(taker, status=ALL, limit=200).items
                    if i.item_id == item), None)
        if row is not None:
            claim_inbox_item(taker, item_id=item, seq=row.seq, worker=f"w{n % 2}")
    elif op == "message" and status in ("pending", "accepted"):
        client.send_message(tid, f"note from {who}")
    elif op == "accept" and status == "pending" and who == recipient:
        client.accept(tid, session_id="s")
    elif op == "complete" and status == "accepted" and who == recipient:
        client.complete(tid, result_summary="done")
    elif op == "cancel" and status == "pending" and who == sender:
        client.cancel(tid, reason="not needed")


@pytest.mark.slow
def test_every_front_end_shows_the_same_news_over_random_histories(duo: Duo) -> None:
    threads: list[tuple[str, str, str]] = []
    sessions = iter(range(10_000))

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(st.lists(STEP, min_size=1, max_size=7))
    def history(steps: list[tuple[str, str, int]]) -> None:
        for step in steps:
            play(duo, threads, step)
        for who in ("alice", "bob"):
            seen = front_ends(duo, who, f"s{next(sessions)}")
            expected = seen["unread (any status)"]
            for name, keys in seen.items():
                assert keys == expected, (who, name, keys ^ expected)

    history()


@pytest.mark.slow
def test_no_unread_item_falls_behind_a_cursor_over_random_histories(duo: Duo) -> None:
    """Whatever cursor a teammate holds, a listing after it holds every item they have
    not read or acked; what they read or acked it may leave behind."""
    threads: list[tuple[str, str, str]] = []

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(st.lists(STEP, min_size=1, max_size=7), st.lists(st.integers(0, 60), max_size=4))
    def history(steps: list[tuple[str, str, int]], picks: list[int]) -> None:
        for step in steps:
            play(duo, threads, step)
        for who in ("alice", "bob"):
            client = duo[who]
            client.refresh(max_age=0)
            every = check_inbox(client, status=ALL, limit=200).items
            unread = {(i.item_id, i.seq) for i in every if i.unread}
            tip = max([i.seq for i in every], default=0)
            cursors = {0, tip, check_inbox(client, limit=200).cursor,
                       *(min(p, tip) for p in picks)}
            for cursor in cursors:
                listed = {(i.item_id, i.seq) for i in
                          check_inbox(client, after=cursor, limit=200).items}
                assert unread <= listed, (who, cursor, unread - listed)
                # Page by page (a cursor continues the listing), the same items, once.
                paged: list[tuple[str, int]] = []
                page = check_inbox(client, after=cursor, limit=2)
                while True:
                    paged += [(i.item_id, i.seq) for i in page.items]
                    if page.next_cursor is None:
                        break
                    page = check_inbox(client, cursor=page.next_cursor, limit=2)
                assert sorted(paged) == sorted(listed), (who, cursor)

    history()


@pytest.mark.slow
def test_the_sender_hears_of_a_completion_until_she_reads_it(duo: Duo) -> None:
    """The round trip of the issue: alice hands off, bob accepts and completes; at her
    next look every front end shows the completion (the thread is closed), and once she
    has read the thread, none does."""
    alice, bob = duo["alice"], duo["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Paginate /users").thread_id
    assert tid is not None
    bob.refresh(max_age=0)
    bob.accept(tid, session_id="s")
    bob.send_message(tid, "on it")
    bob.complete(tid, result_summary="done")
    seen = front_ends(duo, "alice", "first")
    for name, keys in seen.items():
        assert keys == {(tid, "task_update"), (tid, "reply")}, name
    # Told once: the same session is not told again; a new one is, while it is unread.
    assert _hook_look(duo, "alice", "first") == set()
    assert _hook_look(duo, "alice", "second") == {(tid, "task_update"), (tid, "reply")}
    assert mark_read(alice, unread_on_thread(alice, tid)) == 2
    for name, keys in front_ends(duo, "alice", "third").items():
        assert keys == set(), name


@pytest.mark.slow
def test_a_stalled_handoff_is_news_to_both_sides_until_read(duo: Duo,
                                                           monkeypatch: pytest.MonkeyPatch):
    """Four days on, a pending handoff is news to its sender and its recipient, in
    check_inbox, the hooks' reader and `gitrelay inbox`; reading the thread marks it
    read on that side only. No commit is made for it."""
    from gitrelay.hosts import hookrun
    from gitrelay.inbox import inbox as inbox_module

    alice, bob = duo["alice"], duo["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Paginate /users").thread_id
    assert tid is not None
    bob.refresh(max_age=0)
    mark_read(bob, unread_on_thread(bob, tid))
    mark_read(alice, unread_on_thread(alice, tid))
    assert check_inbox(alice, limit=200).items == check_inbox(bob, limit=200).items == []
    tip = alice.mirror.main()
    later = current_us() + 4 * DAY_US + 60_000_000
    monkeypatch.setattr(inbox_module, "current_us", lambda: later)

    sent = check_inbox(alice, limit=200).items
    got = check_inbox(bob, limit=200).items
    assert [(i.kind, i.thread_id, i.detail) for i in sent] == \
        [(STALLED, tid, "bob@acme has not accepted this handoff for 4 days")]
    assert [(i.kind, i.detail) for i in got] == \
        [(STALLED, "you have not accepted this handoff for 4 days")]
    assert sent[0].unread and got[0].sender.handle == "alice@acme"
    # The hooks' reader, standard library only, says the same at the same time.
    peek = peek_unread(alice.mirror.path, alice.handle, now_us=later)
    assert peek is not None
    assert [(i.kind, i.thread_id, i.detail) for i in peek.items] == \
        [(i.kind, i.thread_id, i.detail) for i in sent]
    # The start context says it in the item's line.
    context = hookrun._context("alice@acme", peek.items)
    assert "bob@acme has not accepted this handoff for 4 days" in context.splitlines()[2]
    # Reading the thread marks it read for alice; bob still has it.
    assert mark_read(alice, unread_on_thread(alice, tid)) == 1
    assert check_inbox(alice, limit=200).items == []
    assert [i.kind for i in check_inbox(bob, limit=200).items] == [STALLED]
    # Computed, not committed: main did not move.
    assert alice.mirror.main() == tip


@pytest.mark.slow
def test_a_relays_stall_days_is_read_from_relay_json(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`stall_days` in relay.json (gitrelay init --stall-days) sets when a handoff stalls;
    the schema takes 1 to 365 and nothing else."""
    from gitrelay.core import schema
    from gitrelay.core.errors import RelayError
    from gitrelay.inbox import inbox as inbox_module
    from gitrelay.inbox.index import index_for

    with pytest.raises(RelayError):
        schema.validate("config", joining.relay_config("acme", stall_days=0))
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", stall_days=1)
    pair = Duo(relay, tmp_path, monkeypatch)
    alice, bob = pair["alice"], pair["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Paginate /users").thread_id
    mark_read(alice, unread_on_thread(alice, tid))  # nothing to alice yet
    assert check_inbox(alice).items == []
    assert index_for(alice.mirror).stall_days() == 1
    later = current_us() + DAY_US + 60_000_000
    monkeypatch.setattr(inbox_module, "current_us", lambda: later)
    assert [(i.kind, i.detail) for i in check_inbox(alice).items] == \
        [(STALLED, "bob@acme has not accepted this handoff for 1 day")]
    del bob


@pytest.mark.slow
def test_gitrelay_init_takes_stall_days_and_leaves_it_out_by_default(tmp_path: Path) -> None:
    from gitrelay.cli.main import main
    from tests.kit import git_out

    for name, extra in (("chosen", ["--stall-days", "5"]), ("default", [])):
        with redirect_stdout(io.StringIO()):
            assert main(["init", str(tmp_path / name), *extra]) == 0
        config = json.loads(git_out(tmp_path / name, "show", "main:relay.json"))
        assert config.get("stall_days") == (5 if extra else None)


def test_a_page_of_news_holds_limit_items_when_read_ones_lie_between(team):
    """Read items between unread ones do not shorten a page of news: the page is asked
    of the index as unread items, not cut to `limit` rows and then filtered."""
    from gitrelay.inbox import inbox

    alice, bob = team["alice"], team["bob"]
    sent = [alice.handoff(to="bob@acme", intent="inform", summary=f"handoff {i}",
                          mode="wait").thread_id for i in range(5)]
    bob.refresh(max_age=0)
    for tid in (sent[1], sent[3]):  # read, as view_thread marks them
        inbox.mark_read(bob, inbox.unread_on_thread(bob, tid))
    page = inbox.check_inbox(bob, limit=3)
    shown = [i.thread_id for i in page.items]
    assert sorted(shown) == sorted([sent[0], sent[2], sent[4]]), shown


@pytest.mark.slow
def test_the_sender_hears_that_a_worker_claimed_her_handoff_until_she_reads_it(duo: Duo):
    """alice hands off to bob; a copy of bob (worker w1) claims it: at her next look
    every front end shows one `claimed` item, in gitrelay's words, beside bob's accept;
    once she has read the thread, none does. bob is never told of his own claim, and
    nothing is committed to main for it."""
    from gitrelay.hosts import hookrun

    alice, bob = duo["alice"], duo["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Paginate /users").thread_id
    assert tid is not None
    assert check_inbox(alice).items == []
    quiet = peek_unread(alice.mirror.path, alice.handle)
    assert quiet is not None and quiet.items == []
    bob.refresh(max_age=0)
    item = item_id_for("bob@acme", tid, ASSIGNMENT)
    (assignment,) = check_inbox(bob).items
    claim = claim_inbox_item(bob, item_id=item, seq=assignment.seq, worker="w1")
    assert claim.claimed and claim.delivery == "delivered"
    tip = alice.mirror.main()
    alice.refresh(max_age=0)
    assert alice.mirror.main() == tip  # a claim moves bob's inbox ref, not main
    # The hooks' reader sees that bob's ref moved since the index read it: the full read.
    assert peek_unread(alice.mirror.path, alice.handle) is None
    sent = check_inbox(alice, limit=200).items
    assert [(i.kind, i.thread_id, i.sender.handle, i.detail, i.unread) for i in sent] == \
        [(CLAIMED, tid, "bob@acme", "bob@acme's worker w1 claimed this handoff", True)]
    # The hooks' reader, standard library only, says the same.
    peek = peek_unread(alice.mirror.path, alice.handle)
    assert peek is not None
    assert [(i.kind, i.thread_id, i.seq, i.detail) for i in peek.items] == \
        [(i.kind, i.thread_id, i.seq, i.detail) for i in sent]
    context = hookrun._context("alice@acme", peek.items)
    assert "bob@acme's worker w1 claimed this handoff" in context.splitlines()[2]
    assert hookrun._headline([(CLAIMED, "bob@acme")]) == \
        "1 handoff claimed by bob@acme: call check_inbox"
    # Renewing the claim is not news again; bob's own inbox never shows his claim.
    claim_inbox_item(bob, item_id=item, seq=assignment.seq, worker="w1")
    assert [i.kind for i in check_inbox(bob, status=ALL, limit=200).items] == [ASSIGNMENT]
    # bob accepts: the claim is news to alice beside the accept, in every front end.
    bob.accept(tid, session_id="s")
    mark_read(bob, unread_on_thread(bob, tid))
    assert bob.mirror.store.ref("refs/gitrelay/users/bob@acme/inbox") is not None
    for name, keys in front_ends(duo, "alice", "first").items():
        assert keys == {(tid, CLAIMED), (tid, "task_update")}, name
    # Reading the thread marks both read.
    assert mark_read(alice, unread_on_thread(alice, tid)) == 2
    for name, keys in front_ends(duo, "alice", "second").items():
        assert keys == set(), name


@pytest.mark.slow
def test_a_claim_made_and_ended_between_two_looks_is_still_news(duo: Duo):
    """bob's worker claims, accepts and acknowledges while alice's clone does not look:
    her next fetch brings a ref where the claim is gone already; the commits in between
    hold it."""
    alice, bob = duo["alice"], duo["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Paginate /users").thread_id
    assert tid is not None
    assert check_inbox(alice).items == []
    bob.refresh(max_age=0)
    (assignment,) = check_inbox(bob).items
    claim_inbox_item(bob, item_id=assignment.item_id, seq=assignment.seq, worker="ci-7")
    bob.accept(tid, session_id="s")
    # The worker acknowledges what it claimed: the claim leaves bob's inbox ref.
    check_inbox(bob, worker="ci-7",
                ack_items=[{"item_id": assignment.item_id, "seq": assignment.seq}])
    (after,) = check_inbox(bob, status=ALL).items
    assert after.kind == ASSIGNMENT and after.claimed_by is None and not after.unread
    kinds = {(i.kind, i.detail) for i in check_inbox(alice, limit=200).items}
    assert kinds == {(CLAIMED, "bob@acme's worker ci-7 claimed this handoff"),
                     ("task_update", None)}


@pytest.mark.slow
def test_pages_after_a_cursor_leave_out_this_machines_items_behind_it(duo: Duo):
    """A listing `after` a cursor, page by page, holds what it holds in one page: a
    claim (an item this machine keeps) at or below the cursor is on the first page
    while unread, with the unread items behind the cursor, and on no later page; once
    read, on none."""
    alice, bob = duo["alice"], duo["bob"]
    sent = [alice.handoff(to="bob@acme", intent="inform", summary=f"Work {n}").thread_id
            for n in range(4)]
    bob.refresh(max_age=0)
    for tid in sent[1:]:
        bob.send_message(tid, "a question")
    assignment = next(i for i in check_inbox(bob, limit=200).items if i.thread_id == sent[0])
    claim_inbox_item(bob, item_id=assignment.item_id, seq=assignment.seq, worker="w1")
    alice.refresh(max_age=0)
    cursor = check_inbox(alice, limit=200).cursor
    for read in (False, True):
        if read:
            mark_read(alice, unread_on_thread(alice, sent[0]))
        listed = [(i.item_id, i.seq) for i in check_inbox(alice, after=cursor, limit=200).items]
        assert (CLAIMED in {i.kind for i in check_inbox(alice, after=cursor, limit=200).items}
                ) is not read
        paged: list[tuple[str, int]] = []
        page = check_inbox(alice, after=cursor, limit=2)
        while True:
            paged += [(i.item_id, i.seq) for i in page.items]
            if page.next_cursor is None:
                break
            page = check_inbox(alice, cursor=page.next_cursor, limit=2)
        assert sorted(paged) == sorted(listed), read


@pytest.mark.slow
def test_an_update_reads_the_newest_claim_walk_commits_of_a_recipients_ref(
        duo: Duo, monkeypatch: pytest.MonkeyPatch):
    """A clone away for long reads only the newest CLAIM_WALK commits of a recipient's
    inbox ref: a claim made and ended before them is not seen."""
    from gitrelay.inbox import index

    alice, bob = duo["alice"], duo["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Paginate /users").thread_id
    assert tid is not None
    assert check_inbox(alice).items == []
    bob.refresh(max_age=0)
    (assignment,) = check_inbox(bob).items
    claim_inbox_item(bob, item_id=assignment.item_id, seq=assignment.seq, worker="w1")
    check_inbox(bob, worker="w1",  # a commit without the claim
                ack_items=[{"item_id": assignment.item_id, "seq": assignment.seq}])
    alice.send_message(tid, "one more thing")
    bob.refresh(max_age=0)
    check_inbox(bob, ack_up_to=check_inbox(bob).cursor)  # another
    ref = bob.mirror.store.ref("refs/gitrelay/users/bob@acme/inbox")
    assert ref is not None and len(bob.mirror.commits_between(None, ref)) == 3
    monkeypatch.setattr(index, "CLAIM_WALK", 2)
    assert {i.kind for i in check_inbox(alice, limit=200).items} == set()
