"""An idle pass looks at the relay's refs (git ls-remote) and fetches only what moved;
the loop's interval follows the team's activity."""

from __future__ import annotations

import pytest

from gitrelay.sync import loop
from gitrelay.sync.push import Syncer


def test_a_look_at_an_unchanged_relay_fetches_nothing(team, monkeypatch: pytest.MonkeyPatch):
    alice = team["alice"]
    fetches: list[int] = []
    fetch = Syncer._fetch

    def counted(self: Syncer):  # type: ignore[no-untyped-def]
        fetches.append(1)
        return fetch(self)

    monkeypatch.setattr(Syncer, "_fetch", counted)
    assert alice.sync.syncer.fetch_if_moved() is False
    assert fetches == []
    assert alice.sync.mirror.last_fetch_age() < 60  # the look counts as a fresh copy
    sent = team["bob"].handoff(to="alice@acme", intent="inform", summary="a change",
                               mode="wait")
    assert alice.sync.syncer.fetch_if_moved() is True
    assert fetches == [1]
    assert sent.thread_id is not None
    assert alice.mirror.view().thread(sent.thread_id) is not None
    assert alice.sync.syncer.fetch_if_moved() is False
    assert fetches == [1]


def test_an_inbox_position_moved_by_a_teammate_is_a_change(team):
    alice, bob = team["alice"], team["bob"]
    alice.handoff(to="bob@acme", intent="inform", summary="to ack", mode="wait")
    assert alice.sync.syncer.fetch_if_moved() is False
    bob.refresh(max_age=0)
    from gitrelay.inbox.inbox import check_inbox

    page = check_inbox(bob, limit=5)
    check_inbox(bob, ack_up_to=page.cursor)
    bob.deliver()
    assert alice.sync.syncer.fetch_if_moved() is True


def test_the_interval_follows_the_teams_activity():
    right_after = loop.next_interval(0.0)
    after_a_minute = loop.next_interval(60.0)
    after_an_hour = loop.next_interval(3600.0)
    assert right_after == loop.TEAM_MIN_INTERVAL
    assert right_after < after_a_minute < after_an_hour == loop.MAX_INTERVAL
    # A team that wrote half a minute ago is probably still at it: its next write is
    # seen within seconds. Then the looks spread out fast: a quiet relay (4 minutes)
    # is looked at once a minute.
    assert loop.next_interval(30.0) == loop.TEAM_MIN_INTERVAL
    assert after_a_minute < 5.0
    assert loop.next_interval(120.0) == pytest.approx(15.0)
    assert loop.next_interval(loop.QUIET_SECONDS) == loop.MAX_INTERVAL
    # A watched local relay wakes the loop itself: its timer is a backstop, sooner apart.
    assert loop.next_interval(60.0, loop.WATCHED_MAX_INTERVAL, watched=True) == 15.0
    # Right after this machine's own write, its answer is looked for sooner.
    assert loop.next_interval(0.0, since_own_write=0.0) == loop.MIN_INTERVAL
    assert loop.next_interval(3600.0, since_own_write=3600.0) == loop.MAX_INTERVAL


def test_a_loop_starting_on_a_quiet_relay_looks_at_it_rarely(team, monkeypatch):
    # The team's last operation was committed just now; an hour later the relay has
    # been quiet for an hour, and a loop starting then looks at it only every minute.
    alice = team["alice"]
    now = loop.time.time()
    assert 0 <= loop.quiet_for(alice.mirror) < 600
    monkeypatch.setattr(loop.time, "time", lambda: now + 3600)
    assert 3000 < loop.quiet_for(alice.mirror) < 4200
    assert loop.next_interval(loop.quiet_for(alice.mirror)) == loop.MAX_INTERVAL


def test_a_look_at_a_relay_on_a_local_path_starts_no_process(team, monkeypatch):
    alice = team["alice"]
    import subprocess

    def no_process(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "run", no_process)
    assert alice.sync.syncer.fetch_if_moved() is False


def test_news_from_a_relay_on_a_local_path_is_fetched_without_starting_git(team, monkeypatch):
    """The objects a teammate pushed are copied in process and verified as a fetch's are."""
    alice = team["alice"]
    sent = team["bob"].handoff(to="alice@acme", intent="inform", summary="news", mode="wait")
    import subprocess

    def no_process(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "run", no_process)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    assert alice.sync.syncer.fetch_if_moved() is True
    assert alice.mirror.view().thread(sent.thread_id) is not None
    assert alice.sync.mirror.relay_main() == team["bob"].sync.mirror.relay_main()


def test_copied_objects_are_written_after_everything_they_name(team, tmp_path):
    """A copy cut short leaves no object whose history is missing."""
    import pygit2

    from gitrelay.store.gitstore import Store

    source = team["alice"].sync.mirror.store
    tip = team["alice"].sync.mirror.relay_main()
    target = Store(tmp_path / "copy.git", create=True)
    order: list[str] = []
    write = target.source.write

    def recording(kind: str, data: bytes) -> str:
        oid = write(kind, data)
        order.append(oid)
        return oid

    target.source.write = recording  # type: ignore[method-assign]
    assert target.copy_objects(source, [tip]) == len(order) > 0
    position = {oid: i for i, oid in enumerate(order)}
    for oid in order:
        obj = source.repo[oid]
        if isinstance(obj, pygit2.Commit):
            named = [obj.tree_id, *obj.parent_ids]
        elif isinstance(obj, pygit2.Tree):
            named = [e.id for e in obj]
        else:
            named = []
        assert all(position[str(n)] < position[oid] for n in named)


def test_the_hooks_fetch_is_the_sync_layers_and_takes_the_copys_sync_lock(team):
    """The session-start hook's fetch (no pygit2) and the Syncer's are one git command,
    run under the copy's sync lock: a fetch held by another process past the deadline is
    relay_unavailable, and once free the same call brings the teammate's handoff in."""
    import time

    from gitrelay.core import layout
    from gitrelay.core.errors import RelayUnavailable
    from gitrelay.core.gitcli import hermetic_env
    from gitrelay.store.locks import FileMutex
    from gitrelay.sync.gitfetch import fetch_argv, fetch_before
    from tests.kit import ref_of

    alice, bob = team["alice"], team["bob"]
    copy = alice.mirror.path
    bob.handoff(to="alice@acme", intent="inform", summary="news", mode="wait")
    held = FileMutex(copy / layout.SYNC_LOCK_FILE)
    held.acquire()
    try:
        with pytest.raises(RelayUnavailable, match="another fetch"):
            fetch_before(copy, alice.relay_url, time.monotonic() + 0.2, hermetic_env())
    finally:
        held.release()
    before = ref_of(copy, layout.FETCHED_MAIN)
    done = fetch_before(copy, alice.relay_url, time.monotonic() + 60, hermetic_env())
    assert done.returncode == 0, done.stderr
    assert ref_of(copy, layout.FETCHED_MAIN) != before
    assert fetch_argv(alice.relay_url)[-len(layout.FETCH_REFSPECS):] == \
        list(layout.FETCH_REFSPECS)
