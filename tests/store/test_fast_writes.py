"""Local-first writes: the outbox, group commit, the sync loop, and crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gitrelay.core.errors import RelayUnavailable, StateChanged
from gitrelay.core.ops import Op
from gitrelay.relay.client import DELIVERED, QUEUED, RelayClient
from gitrelay.store.mirror import Mirror
from tests.kit import git_out, log_subjects, ref_of, wait_until


def ops_on_relay(relay: Path) -> list[str]:
    return log_subjects(relay, "--reverse")


def test_queued_write_answers_before_delivery_and_the_loop_delivers(team, relay):
    alice = team["alice"]
    alice.sync.start_loop()
    try:
        result = alice.handoff(to="bob@acme", intent="inform", summary="CI needs typecheck",
                               mode="queue")
        assert result.delivery == QUEUED
        wait_until(lambda: not alice.mirror.outbox(), "the loop delivers the queued write",
                   timeout=10, every=0.05)
        assert not alice.mirror.outbox()
        assert any("CI needs typecheck" in s for s in ops_on_relay(relay))
    finally:
        alice.sync.stop_loop()


def test_wait_mode_reports_delivered(team):
    result = team["alice"].handoff(to="bob@acme", intent="inform", summary="x", mode="wait")
    assert result.delivery == DELIVERED
    assert not team["alice"].mirror.outbox()


def test_a_queued_write_survives_sigkill_and_is_delivered_exactly_once(team, relay, tmp_path):
    home = os.environ["GITRELAY_HOME"]
    alice_home = tmp_path / "alice"
    script = textwrap.dedent(f"""
        import os, sys, time
        os.environ["GITRELAY_HOME"] = {str(alice_home)!r}
        from gitrelay.relay.client import RelayClient
        c = RelayClient({str(relay)!r}, "alice@acme", writes="queue")
        r = c.handoff(to="bob@acme", intent="inform", summary="survives a crash",
                      idempotency_key="crash-1")
        print(r.delivery, flush=True)
        time.sleep(60)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == QUEUED
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not any("survives a crash" in s for s in ops_on_relay(relay))
    os.environ["GITRELAY_HOME"] = str(alice_home)
    try:
        again = RelayClient(str(relay), "alice@acme")
        again.deliver()
        again.deliver()
    finally:
        os.environ["GITRELAY_HOME"] = home
    assert sum("survives a crash" in s for s in ops_on_relay(relay)) == 1


def test_two_processes_on_one_mirror_share_one_push(team, relay, tmp_path):
    alice_home = tmp_path / "alice"
    script = textwrap.dedent(f"""
        import os
        os.environ["GITRELAY_HOME"] = {str(alice_home)!r}
        from gitrelay.relay.client import RelayClient
        c = RelayClient({str(relay)!r}, "alice@acme", writes="queue")
        import sys
        c.handoff(to="bob@acme", intent="inform", summary="from process " + sys.argv[1])
    """)
    for n in ("one", "two"):
        subprocess.run([sys.executable, "-c", script, n], check=True)
    before = len(ops_on_relay(relay))
    report = team["alice"].deliver()
    assert report.delivered == 2
    after = ops_on_relay(relay)
    assert len(after) == before + 2
    last_update = (relay / "logs" / "refs" / "heads" / "main").read_text().splitlines()[-1]
    old_tip, new_tip = last_update.split()[:2]
    two_back = git_out(relay, "rev-parse", f"{new_tip}~2").strip()
    assert two_back == old_tip  # a single ref update carried both operations


def test_a_queued_accept_that_loses_to_a_cancel_is_reported(team):
    alice, bob = team["alice"], team["bob"]
    sent = alice.handoff(to="bob@acme", intent="inform", summary="race me")
    bob.refresh(max_age=0)
    alice.cancel(sent.thread_id, mode="wait")
    accepted = bob.accept(sent.thread_id, session_id="s1", mode="queue")
    assert accepted.delivery == QUEUED
    bob.deliver()
    view = bob.thread(sent.thread_id)
    assert view.status == "cancelled"
    assert [r.name for r in view.refused] == ["state_changed"]
    assert "accept" in view.refused[0].message


def test_wait_mode_surfaces_a_lost_race_as_state_changed(team):
    alice, bob = team["alice"], team["bob"]
    sent = alice.handoff(to="bob@acme", intent="inform", summary="race me too")
    bob.refresh(max_age=0)
    alice.cancel(sent.thread_id, mode="wait")
    with pytest.raises(StateChanged):
        bob.accept(sent.thread_id, session_id="s1", mode="wait")


def test_unreachable_relay_queues_then_delivers_everything_once_in_order(team, relay):
    alice = team["alice"]
    hidden = relay.with_name("relay-away.git")
    relay.rename(hidden)
    try:
        results = [alice.handoff(to="bob@acme", intent="inform", summary=f"offline {i}",
                                 mode="wait") for i in range(3)]
        assert [r.delivery for r in results] == [QUEUED] * 3
        with pytest.raises(RelayUnavailable):
            alice.deliver()
    finally:
        hidden.rename(relay)
    alice.deliver()
    subjects = [s for s in ops_on_relay(relay) if "offline" in s]
    assert [s.rsplit(": ", 1)[1] for s in subjects] == ["offline 0", "offline 1", "offline 2"]
    assert not alice.mirror.outbox()




def relay_main_updates(relay: Path) -> list[tuple[str, str]]:
    lines = (relay / "logs" / "refs" / "heads" / "main").read_text().splitlines()
    return [(line.split()[0], line.split()[1]) for line in lines]


def test_waited_writes_are_delivered_by_the_running_loop_in_one_push(team, relay):
    import threading

    alice = team["alice"]
    loop = alice.sync.start_loop(watch=False)
    try:
        assert alice.sync.loop is loop
        pushes_before = len(relay_main_updates(relay))
        # Hold the loop's lock so that both writes are queued before it can push.
        results: list[str] = []
        with alice.mirror.sync_lock:
            writers = [threading.Thread(target=lambda n=n: results.append(alice.handoff(
                to="bob@acme", intent="inform", summary=f"waited write {n}",
                mode="wait").delivery)) for n in (1, 2)]
            for w in writers:
                w.start()
            wait_until(lambda: len(alice.mirror.outbox()) >= 2, "both writes are queued",
                       timeout=10, every=0.01)
            assert len(alice.mirror.outbox()) == 2
        for w in writers:
            w.join(timeout=20)
        assert results == [DELIVERED, DELIVERED]
        updates = relay_main_updates(relay)[pushes_before:]
        assert len(updates) == 1  # one push carried both waited writes
        subjects = ops_on_relay(relay)
        assert sum("waited write" in s for s in subjects) == 2
    finally:
        alice.sync.stop_loop()
    assert alice.sync.loop is None


def test_a_waited_write_through_the_loop_that_loses_a_race_is_told(team, monkeypatch):
    alice, bob = team["alice"], team["bob"]
    sent = alice.handoff(to="bob@acme", intent="inform", summary="race the loop")
    bob.refresh(max_age=0)
    alice.cancel(sent.thread_id, mode="wait")
    # The cancel lands between two of bob's looks: his loop's looks find nothing new
    # (else its first look, at once, could fetch the cancel before the accept is made).
    monkeypatch.setattr(bob.sync.syncer, "fetch_if_moved", lambda: False)
    bob.sync.start_loop(watch=False)
    try:
        # Bob's copy still shows the thread pending: the accept passes locally and
        # the relay (through the loop's push) refuses it.
        with pytest.raises(StateChanged):
            bob.accept(sent.thread_id, session_id="s1", mode="wait")
        assert bob.thread(sent.thread_id).status == "cancelled"
    finally:
        bob.sync.stop_loop()


def test_a_refused_inbox_state_is_reset_and_recorded(team, relay):
    from gitrelay.core import layout

    bob = team["bob"]
    store = bob.mirror.store
    mine = layout.inbox_ref("bob@acme")
    before = store.ref(mine)
    # An inbox state the gate refuses: a commit whose tree is not one inbox.json
    # (as a damaged or outdated client could leave it).
    tree = store.single_file_tree("notes.txt", b"not an inbox state\n")
    bad = store.commit(tree=tree, parents=[before] if before else [],
                       message=f"inbox\n\n{layout.TRAILER_OP}: {layout.OP_INBOX}\n"
                               f"{layout.TRAILER_ACTOR}: bob@acme\n",
                       author="bob@acme", email="bob@acme")
    store.set_ref(mine, bad, "test: forged inbox state")
    report = bob.deliver()
    assert store.ref(mine) == before  # back to the relay's copy
    (rec,) = [r for r in report.refused if r.kind == "inbox"]
    assert rec.rule == "layout" and bad[:12] in rec.message
    assert rec in bob.mirror.refused()
    pushed = ref_of(relay, mine)
    assert pushed != bad


def test_a_waited_message_reports_the_sequence_number_it_landed_with(team):
    alice, bob = team["alice"], team["bob"]
    sent = alice.handoff(to="bob@acme", intent="ask_question", summary="which index?",
                         question="Which index does the export use?")
    bob.refresh(max_age=0)
    # Alice writes message 1 first; Bob's copy does not know, so he queues his as 1 too.
    alice.send_message(sent.thread_id, "also: the export runs at 02:00", mode="wait")
    queued_as = bob.mirror.view().thread(sent.thread_id)
    assert queued_as is not None and queued_as.last_seq == 0
    reply = bob.send_message(sent.thread_id, "the covering index on (team, created_at)",
                             mode="wait")
    assert reply.delivery == DELIVERED
    assert reply.doc["sequence_no"] == 2  # replayed after Alice's message 1
    assert [m["sequence_no"] for m in bob.thread(sent.thread_id).messages] == [1, 2]


def test_the_refused_log_is_read_again_only_when_it_grows_and_every_process_sees_it(team):
    alice = team["alice"]
    other = Mirror(alice.mirror.path, "alice@acme")  # another process on the same mirror
    assert alice.mirror.refused() == [] and other.refused() == []
    op = Op("cancel", {"kind": "cancel", "thread_id": "0" * 26, "by": "alice@acme"}, "0" * 26)
    alice.mirror.record_refused(op, StateChanged("lost a race"), rule="state_changed")
    first = other.refused()
    assert [r.rule for r in first] == ["state_changed"]
    first.clear()  # a caller's copy: the next answer is whole again
    assert len(other.refused()) == 1
    other.record_refused(op, StateChanged("lost again"), rule="state_changed")
    assert [r.message for r in alice.mirror.refused()] == ["lost a race", "lost again"]


def test_the_thread_after_a_queued_write_is_the_thread_read_again(team):
    """thread_after lays the written file over the thread read before the write; each
    kind of operation must give exactly what folding the thread afresh gives."""
    alice, bob = team["alice"], team["bob"]
    sent = alice.handoff(to="bob@acme", intent="ask_question", summary="which index?",
                         question="Which index does the export use?", mode="wait")
    other = alice.handoff(to="bob@acme", intent="inform", summary="withdrawn soon",
                          mode="wait")
    bob.refresh(max_age=0)
    tid = sent.thread_id
    writes = [
        (bob, lambda: bob.accept(tid, session_id="s-1", mode="queue")),
        (bob, lambda: bob.send_message(tid, "the covering index", mode="queue")),
        (bob, lambda: bob.send_message(tid, "and a second note", mode="queue")),
        (bob, lambda: bob.complete(tid, result_summary="answered", mode="queue")),
        (alice, lambda: alice.cancel(other.thread_id, reason="not needed", mode="queue")),
    ]
    for client, write in writes:
        before = client.thread(tid if client is bob else other.thread_id)
        result = write()
        laid = client.thread_after(before, result)
        assert laid.tip == result.written.commit != before.tip
        assert laid == client.thread(before.thread_id)
        assert laid.undelivered[-1:] and laid.undelivered != before.undelivered


def test_the_thread_after_a_write_on_a_newer_copy_is_read_again(team):
    """A write built on a newer main than the thread was read from (another write came
    between) must not be laid over the older read: that read misses the other write."""
    alice, bob = team["alice"], team["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="two notes", mode="wait",
                        ).thread_id
    bob.refresh(max_age=0)
    before = bob.thread(tid)
    bob.send_message(tid, "first, written meanwhile", mode="queue")
    result = bob.send_message(tid, "second", mode="queue")
    after = bob.thread_after(before, result)
    assert [m["body"] for m in after.messages] == ["first, written meanwhile", "second"]
    assert after == bob.thread(tid)


def test_the_thread_after_a_write_the_loop_replayed_meanwhile_is_read_again(team):
    """Between the write and the answer, a fetch may replay the queued write onto a
    newer relay (another commit id, the other side's message below it): the thread
    must then be read again, not laid over the read from before."""
    alice, bob = team["alice"], team["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="replayed", mode="wait",
                        ).thread_id
    bob.refresh(max_age=0)
    before = bob.thread(tid)
    result = bob.accept(tid, session_id="s-1", mode="queue")
    alice.send_message(tid, "sent while Bob's accept was queued", mode="wait")
    bob.refresh(max_age=0)  # what the sync loop's pass does meanwhile: fetch and replay
    assert bob.mirror.main() != result.written.commit
    after = bob.thread_after(before, result)
    assert [m["body"] for m in after.messages] == ["sent while Bob's accept was queued"]
    assert after.status == "accepted" and after.tip == bob.mirror.main()
    assert after == bob.thread(tid)
