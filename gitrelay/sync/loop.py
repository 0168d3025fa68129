"""The background sync loop: deliver queued operations, fetch what is new.

One loop runs per relay and machine: every gitrelay process of the user that starts a
``SyncLoop`` on a local copy (each MCP server, the waiter, ``gitrelay web``) takes part
in an election through the copy's seat (:mod:`gitrelay.sync.seat`). The process that
holds the seat runs the passes; the others watch what it publishes and ask it for a
pass when they queue a write. When the holder stops or dies, one of the others takes
over. The copy's :class:`~gitrelay.sync.control.SyncControl` (a client's
``client.sync``) owns the loop through ``start_loop`` and is never seen by it.

The holder wakes up

- at once when kicked (a write was queued here or in another process);
- when the relay changes, for a relay on a local path (watchdog on its refs);
- otherwise on an interval that follows the team's activity: ``MAX_INTERVAL`` times
  the square of the time the relay has been quiet over ``QUIET_SECONDS``, from
  ``TEAM_MIN_INTERVAL`` up to ``MAX_INTERVAL`` (``WATCHED_MAX_INTERVAL`` for a
  watched local relay); from ``MIN_INTERVAL`` on right after this machine delivered
  a write (its answer is looked for sooner, ``ACTIVITY_FRACTION`` of the time since).

Each pass delivers the whole outbox in one push (group commit) when anything is queued;
otherwise it asks the relay for its refs (``git ls-remote``; a relay on a local path
has them read in place) and fetches only when they moved. ``wait_for_change`` lets
``check_inbox`` long-poll: it returns as soon as a pass (of whichever process holds the
seat) brought something new.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from gitrelay.core import layout
from gitrelay.core.errors import RelayError, RelayUnavailable
from gitrelay.store.mirror import RELAY_USERS, Mirror
from gitrelay.sync.localrelay import local_relay_dir
from gitrelay.sync.push import Syncer
from gitrelay.sync.seat import TAKE_OVER_SECONDS, WATCH_TIMEOUT_SECONDS, Passes, Seat

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.5
# After a teammate's change the looks come at least this far apart: a team that writes
# every few seconds costs each machine a look every 2 s, not two a second.
TEAM_MIN_INTERVAL = 2.0
MAX_INTERVAL = 60.0
# A relay on a local path is watched (its refs' changes wake the loop): the timer only
# catches what a watch could miss.
WATCHED_MAX_INTERVAL = 600.0
# After the relay moved, the looks come every TEAM_MIN_INTERVAL for the first 44 s of
# quiet, then spread out with the square of the quiet time: 3.75 s after a minute,
# 15 s after two, MAX_INTERVAL after QUIET_SECONDS (a quiet relay). A team that writes
# every few minutes is seen within seconds; a quiet one costs a look a minute.
QUIET_SECONDS = 240.0
# Right after this machine's own write, its answer is looked for from MIN_INTERVAL on,
# this fraction of the time since the write (and a watched local relay's backstop
# looks, this fraction of its quiet time).
ACTIVITY_FRACTION = 0.25
# While the loop runs, reads use the local copy if its last look is this fresh.
FRESH_WHILE_RUNNING = MAX_INTERVAL + 15.0
# After the seat's holder closed its ``holder`` file, how long a waiting process keeps
# trying the seat, and how often (the holder's lock may be let go a moment later).
VACANT_GRACE_SECONDS = 2.0
VACANT_RETRY_SECONDS = 0.02


def next_interval(quiet_for: float, longest: float = MAX_INTERVAL, *,
                  since_own_write: float = float("inf"), watched: bool = False) -> float:
    """Seconds until the next look at a relay that has not moved for ``quiet_for``
    seconds, ``since_own_write`` after this machine last delivered: an answer to
    one's own write is looked for sooner (from ``MIN_INTERVAL`` on) than a
    teammate's news (from ``TEAM_MIN_INTERVAL`` on). A ``watched`` relay wakes the
    loop itself when it moves: its timer is only a backstop, and spreads out with the
    quiet time itself (``ACTIVITY_FRACTION`` of it), not its square."""
    if watched:
        spread = quiet_for * ACTIVITY_FRACTION
    else:
        spread = MAX_INTERVAL * (quiet_for / QUIET_SECONDS) ** 2
    team = min(longest, max(TEAM_MIN_INTERVAL, spread))
    return min(team, max(MIN_INTERVAL, since_own_write * ACTIVITY_FRACTION))


class SyncLoop:
    def __init__(self, mirror: Mirror, syncer: Syncer, relay_url: str, *,
                 watch: bool = True) -> None:
        self.mirror = mirror
        self.syncer = syncer
        self.relay_url = relay_url
        self.seat = Seat(mirror.path)
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._vacated = float("-inf")  # when the holder last closed its ``holder`` file
        self._changed = threading.Condition()
        self._generation = 0
        self._thread: threading.Thread | None = None
        self._seat_observer: Any = None
        self._relay_observer: Any = None
        self._watch = watch
        self.interval = MIN_INTERVAL
        self.last_error: RelayError | None = None
        self.passes = 0
        # When the relay last moved (monotonic): the interval follows it.
        self._last_change = time.monotonic()
        self._last_own_write = -float("inf")
        # Passes started and finished by this process, and the wall-clock start of the
        # last pass finished by whichever process holds the seat: a caller waits for
        # "a pass that began after my operation was queued" (``deliver_pass``).
        self._started = 0
        self._finished = 0
        self._done_started_at = 0.0
        self._asked_at = 0.0
        self._heard = Passes()

    # --- control ----------------------------------------------------------------

    def start(self) -> SyncLoop:
        if self._thread is not None:
            return self
        self._heard = self.seat.passes()
        self._done_started_at = self._heard.started_at
        self._seat_observer = self.seat.watch(self._on_asked, self._on_published,
                                             self._on_vacant)
        self._thread = threading.Thread(target=self._run, name="gitrelay-sync", daemon=True)
        self._thread.start()
        return self

    @property
    def leading(self) -> bool:
        """Whether this process holds the seat and runs the passes."""
        return self.seat.held

    def kick(self) -> None:
        """Ask for a pass now: this process's when it holds the seat, else the holder's
        (asked before this returns: a process killed right after queueing a write
        still has it delivered)."""
        if self.running and not self.leading:
            with self._changed:
                self._asked_at = time.time()
            try:
                self.seat.ask()
            except OSError as exc:
                log.warning("gitrelay: cannot ask the sync loop for a pass: %s", exc)
        self._kick.set()

    def stop(self, *, flush: bool = True, timeout: float = 10.0) -> None:
        """Stop the loop (another process may take the seat); with ``flush``, try once
        more to deliver what is queued when no other loop will."""
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
        for observer in (self._seat_observer, self._relay_observer):
            if observer is not None:
                observer.stop()
        self._seat_observer = self._relay_observer = None
        self.seat.leave()
        with self._changed:
            self._changed.notify_all()
        if flush and self.mirror.outbox() and not self.seat.taken():
            try:
                self.syncer.deliver(deadline=time.monotonic() + timeout)
            except RelayError as exc:
                log.warning("gitrelay: %d operation(s) stay queued: %s",
                            len(self.mirror.outbox()), exc)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stop.is_set()

    def deliver_pass(self, timeout: float) -> bool:
        """Have the loop run a pass that starts after this call, and wait for its end.

        A waited write hands its delivery to the loop this way instead of pushing
        from the caller's thread: the loop is the only pusher of the machine, so
        the write never queues behind the loop's fetch for the sync lock, and
        writes waited for at the same time go to the relay in one push. False
        when the pass did not finish within ``timeout`` (or the loop stopped).
        """
        deadline = time.monotonic() + timeout
        since = time.time()
        self.kick()
        with self._changed:
            while self._done_started_at < since:
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    return False
                self._changed.wait(left)
        return True

    @property
    def idle(self) -> bool:
        """No pass running and none asked for (the benchmarks wait for it between calls)."""
        with self._changed:
            if self._kick.is_set():
                return False
            if self.leading:
                return self._started == self._finished
            return self._asked_at <= self._done_started_at

    @property
    def generation(self) -> int:
        return self._generation

    def wait_for_change(self, timeout: float, since: int | None = None) -> bool:
        """Block until a pass brings something new (or ``timeout``); True if it did.

        It asks for no pass: the loop looks at the relay on its own schedule, so a
        session that long-polls costs the relay nothing more than an idle one."""
        start = self._generation if since is None else since
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._generation == start:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # --- what the seat's holder publishes ----------------------------------------------

    def _on_asked(self) -> None:
        if self.leading:
            self._kick.set()

    def _on_vacant(self) -> None:
        """The holder closed its ``holder`` file: it left or died; try the seat now."""
        if not self.leading:
            self._vacated = time.monotonic()
            self._kick.set()

    def _take_seat(self) -> bool:
        """Take the seat; right after the holder closed its ``holder`` file, keep trying
        for ``VACANT_GRACE_SECONDS``: a dying process closes its files one by one, and the
        ``holder`` file may close before the seat's lock does."""
        while not self.seat.take():
            if self._stop.is_set() or \
                    time.monotonic() - self._vacated > VACANT_GRACE_SECONDS:
                return False
            time.sleep(VACANT_RETRY_SECONDS)
        return True

    def _on_published(self) -> None:
        if self.leading:
            return
        heard = self.seat.passes()
        with self._changed:
            before, self._heard = self._heard, heard
            if heard.changes != before.changes or heard.holder != before.holder:
                self._generation += 1
            self._done_started_at = max(self._done_started_at, heard.started_at)
            self.last_error = (RelayUnavailable(heard.error, relay=self.relay_url)
                               if heard.error else None)
            self._changed.notify_all()

    # --- the loop -----------------------------------------------------------------

    def run_once(self) -> bool:
        """One pass: deliver if anything is queued, else look at the relay and fetch
        what moved. True if the relay or the local copy moved."""
        before = self.mirror.main()
        if self.mirror.outbox() or _inbox_ahead(self.mirror):
            self.syncer.deliver()
            self._last_own_write = time.monotonic()
            moved = True
        else:
            moved = self.syncer.fetch_if_moved()
        self.passes += 1
        return moved or self.mirror.main() != before

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.seat.take():
                try:
                    self._lead()
                finally:
                    self.seat.leave()
                return
            if self._kick.wait(TAKE_OVER_SECONDS):
                self._kick.clear()
                if self._stop.is_set():
                    return
                # Asked for a pass, or the holder closed its ``holder`` file: the holder
                # runs the pass (kick() asked it), or it is gone and the seat is ours.
                if not self._take_seat():
                    continue
                self._kick.set()  # the seat was free: run the pass asked for at once
                try:
                    self._lead()
                finally:
                    self.seat.leave()
                return

    def _lead(self) -> None:
        relay_dir = local_relay_dir(self.relay_url) if self._watch else None
        longest = MAX_INTERVAL
        if relay_dir is not None:
            self._relay_observer = _watch_refs(relay_dir, self.kick)
            longest = WATCHED_MAX_INTERVAL
        published = self.seat.passes()
        finished, changes = published.finished, published.changes
        # The team's activity so far: when its last operation was committed.
        self._last_change = time.monotonic() - quiet_for(self.mirror)
        self._kick.set()  # a new holder looks at once: the last one may have left work
        while not self._stop.is_set():
            kicked = self._kick.wait(self.interval)
            self._kick.clear()
            if self._stop.is_set():
                break
            started_at = time.time()
            with self._changed:
                self._started += 1
            moved = False
            error: RelayError | None = None
            try:
                moved = self.run_once()
            except RelayError as exc:
                error = exc
            except Exception as exc:  # keep serving reads whatever happens here
                log.error("gitrelay: sync loop error: %r", exc)
                error = RelayUnavailable(f"sync loop error: {exc!r}", relay=self.relay_url)
            finished += 1
            changes += moved
            try:
                self.seat.publish(Passes(os.getpid(), started_at, finished, changes,
                                         error.message if error is not None else None))
            except OSError as exc:
                log.warning("gitrelay: cannot tell the other processes about a pass: %s", exc)
            with self._changed:
                self._finished += 1
                self._done_started_at = max(self._done_started_at, started_at)
                self.last_error = error
                if moved:
                    self._generation += 1
                self._changed.notify_all()
            now = time.monotonic()
            if moved:
                self._last_change = now
            if error is not None:
                self.interval = min(MAX_INTERVAL, max(self.interval * 2, 1.0))
            elif kicked and not moved:
                self.interval = max(self.interval, MIN_INTERVAL)
            else:
                self.interval = next_interval(now - self._last_change, longest,
                                              watched=relay_dir is not None,
                                              since_own_write=now - self._last_own_write)


def quiet_for(mirror: Mirror) -> float:
    """Seconds since the last operation on the relay as last fetched was committed (0
    when unknown): how long the team has been quiet when a loop starts."""
    tip = mirror.relay_main()
    if tip is None:
        return 0.0
    try:
        when = int(mirror.objects.commit(tip).committer.rsplit(" ", 2)[1])
    except (KeyError, ValueError, IndexError):
        return 0.0
    return max(0.0, time.time() - when)


def _inbox_ahead(mirror: Mirror) -> bool:
    """The user's inbox ref moved here and not yet on the relay."""
    local = mirror.store.ref(layout.inbox_ref(mirror.handle))
    remote = mirror.store.ref(f"{RELAY_USERS}{mirror.handle}/{layout.INBOX_REF_LEAF}")
    return local is not None and local != remote


def _names_a_ref(relay_dir: Path, path: str) -> bool:
    """Whether a change to ``path`` (in the folder of the relay at ``relay_dir``) can be a
    change of its refs.

    Git writes a ref to ``<ref>.lock`` and renames the lock onto the ref: the rename
    (or a ref deleted, or ``packed-refs`` replaced) is the change. The lock's creation
    and close come first and change nothing; waking on them cost every write to the
    relay two more passes that found nothing new."""
    path = path.replace("\\", "/")
    if not path or path.endswith(".lock"):
        return False
    root = str(relay_dir).replace("\\", "/").rstrip("/") + "/"
    if path.startswith(root):  # the relay's own path may hold a folder named refs
        path = path[len(root) - 1:]
    return "/refs/" in path or path.endswith("/packed-refs")


def _watch_refs(relay_dir: Path, callback: Any) -> Any:
    """Kick the loop when a local relay's refs change."""
    from watchdog.events import (
        FileClosedEvent,
        FileCreatedEvent,
        FileDeletedEvent,
        FileMovedEvent,
        FileSystemEvent,
        FileSystemEventHandler,
    )
    from watchdog.observers import Observer

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if any(_names_a_ref(relay_dir, str(p)) for p in (event.src_path,
                                                             getattr(event, "dest_path", ""))):
                callback()

    # Only changes: every fetch reads the relay's refs, and reacting to the reads
    # (opened, closed without a write) would make each fetch wake the next one.
    changes = [FileClosedEvent, FileCreatedEvent, FileDeletedEvent, FileMovedEvent]
    observer = Observer(timeout=WATCH_TIMEOUT_SECONDS)
    observer.daemon = True
    observer.schedule(Handler(), str(relay_dir / "refs"), recursive=True, event_filter=changes)
    observer.schedule(Handler(), str(relay_dir), recursive=False, event_filter=changes)
    observer.start()
    return observer
