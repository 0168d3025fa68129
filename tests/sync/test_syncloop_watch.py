"""The sync loop's watch on a local relay wakes it for ref changes, not for reads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers import Observer

from gitrelay.sync.loop import SyncLoop
from tests.kit import git


class KickRecorder:
    """Every kick the loop's watcher gives, with the file-system event behind it
    (``"moved SRC -> DEST"``); ``sentinel_seen`` is set once a change of
    ``refs/heads/sentinel`` woke it (the watcher delivers events in order, so by then it
    has delivered every earlier one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kicks: list[str] = []
        self.sentinel_seen = threading.Event()
        dispatching = threading.local()
        schedule_as_usual, kick_as_usual = Observer.schedule, SyncLoop.kick

        def schedule(observer: Any, handler: Any, path: str, **kwargs: Any) -> Any:
            handle = handler.on_any_event

            def on_any_event(event: Any) -> None:
                dispatching.event = event
                try:
                    handle(event)
                finally:
                    dispatching.event = None

            handler.on_any_event = on_any_event
            return schedule_as_usual(observer, handler, path, **kwargs)

        def kick(loop: SyncLoop) -> None:
            event = getattr(dispatching, "event", None)
            if event is not None:
                self.kicks.append(f"{event.event_type} {event.src_path} -> {event.dest_path}")
                if "refs/heads/sentinel" in self.kicks[-1]:
                    self.sentinel_seen.set()
            kick_as_usual(loop)

        monkeypatch.setattr(Observer, "schedule", schedule)
        monkeypatch.setattr(SyncLoop, "kick", kick)

    def sentinel_after(self, team: Any, relay: Path, passes: int) -> None:
        """alice's loop runs ``passes`` passes, then the sentinel ref is written on the
        relay and seen by the watcher."""
        alice = team["alice"]
        loop = alice.sync.start_loop()
        try:
            for _ in range(passes):
                assert loop.deliver_pass(30)
            git("update-ref", "refs/heads/sentinel", "refs/heads/main", git_dir=relay)
            assert self.sentinel_seen.wait(30), \
                f"the watcher never saw the ref change: {self.kicks}"
        finally:
            alice.sync.stop_loop(flush=False)


def test_an_idle_loop_on_a_local_relay_does_not_wake_itself_by_fetching(
        team, relay: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each fetch reads the relay's refs; if reads woke the loop, every pass would
    # trigger the next one and an idle server would fetch without pause. A ref written
    # after a few passes is the sentinel: every kick before it came from the passes.
    recorder = KickRecorder(monkeypatch)
    recorder.sentinel_after(team, relay, passes=3)
    kicks = recorder.kicks
    before = kicks[:next(i for i, k in enumerate(kicks) if "sentinel" in k)]
    assert before == [], f"the loop's own fetches woke it: {before}"


def test_a_ref_update_wakes_the_loop_once_for_the_ref_not_for_its_lock_file(
        team, relay: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Git writes <ref>.lock, closes it and renames it onto the ref: only the rename is a
    # change. Waking on the lock's creation and close too ran two more passes per write.
    recorder = KickRecorder(monkeypatch)
    recorder.sentinel_after(team, relay, passes=1)
    sentinel = [k for k in recorder.kicks if "sentinel" in k]
    assert len(sentinel) == 1, sentinel
    assert sentinel[0].startswith("moved ") and sentinel[0].endswith(
        "/refs/heads/sentinel.lock -> " + sentinel[0].split(" -> ")[1]), sentinel
    assert sentinel[0].endswith("/refs/heads/sentinel"), sentinel


def test_a_teammates_push_still_wakes_the_loop(team):
    alice, bob = team["alice"], team["bob"]
    loop = bob.sync.start_loop()
    try:
        gen = loop.generation
        alice.handoff(to="bob@acme", intent="inform", summary="wake on push", mode="wait")
        assert loop.wait_for_change(10, since=gen)
    finally:
        bob.sync.stop_loop(flush=False)
