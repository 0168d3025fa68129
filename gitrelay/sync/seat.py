"""The one sync loop of a machine for a relay: who runs it, and how the others hear from it.

Every gitrelay process of one user on one machine (each ``gitrelay mcp``, the waiter,
``gitrelay web``, a CLI command) works on the same local copy of a relay. Of those that
run a :class:`~gitrelay.sync.loop.SyncLoop`, one holds the copy's *seat*: a ``filelock``
on ``gitrelay-loop/seat.lock`` inside the copy, which the operating system lets go when
its holder exits or is killed. The holder fetches and delivers for everyone; the others
watch (watchdog) the two files it shares in that folder:

- ``passes.json``, replaced after each of its passes: when that pass started, how many
  passes it ran, how many brought something new, its last error;
- ``kick``, which the others write to ask the holder for a pass now (a write was
  queued, a reader wants fresh data).

- ``holder``, which the holder keeps open for writing as long as it holds the seat and
  nobody else ever opens for writing: the system closes it when the holder leaves,
  exits or is killed, and that close is the others' signal that the seat is free.

A process that waits tries the seat when the ``holder`` file is closed (for a moment:
a dying process closes its files one by one, the lock's maybe last), whenever the
holder does not answer a request, and otherwise only every ``TAKE_OVER_SECONDS`` (in
case a close went unseen: a file system without change events, a holder killed between
taking the seat and opening the file). When the holder dies, one of the waiting
processes takes the seat and carries on from the copy. Trying the seat opens its lock
file for writing, which wakes every watcher: waiting processes that tried it every few
seconds kept each other awake. The outbox is the copy's journal, so nothing queued
is lost with the process that queued it or with the holder.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitrelay.store.locks import FileMutex

LOOP_DIR = "gitrelay-loop"
SEAT_FILE = "seat.lock"
PASSES_FILE = "passes.json"
KICK_FILE = "kick"
HOLDER_FILE = "holder"
# How often a process without the seat tries to take it when it asks nothing of the
# holder and saw no ``holder`` close (a try costs 0.1 to 0.2 ms of CPU and wakes every
# watcher of the folder; a process that asks for a pass tries at once).
TAKE_OVER_SECONDS = 120.0
# The watchdog threads wake this often with nothing to do (stop() wakes them at once).
WATCH_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Passes:
    """What the seat's holder tells the others after each pass."""

    holder: int = 0            # its process id
    started_at: float = 0.0    # when its last pass started (wall clock, shared by processes)
    finished: int = 0          # passes it finished
    changes: int = 0           # of those, passes that brought something new
    error: str | None = None   # why the last pass could not reach the relay

    @classmethod
    def parse(cls, data: Any) -> Passes:
        if not isinstance(data, dict):
            return cls()
        try:
            return cls(holder=int(data.get("holder", 0)),
                       started_at=float(data.get("started_at", 0.0)),
                       finished=int(data.get("finished", 0)),
                       changes=int(data.get("changes", 0)),
                       error=str(data["error"]) if data.get("error") else None)
        except (TypeError, ValueError):
            return cls()


class Seat:
    """The seat of the sync loop of the local copy at ``copy``."""

    def __init__(self, copy: Path) -> None:
        self.dir = Path(copy) / LOOP_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.passes_path = self.dir / PASSES_FILE
        self.kick_path = self.dir / KICK_FILE
        self.holder_path = self.dir / HOLDER_FILE
        self._holder_fd: int | None = None
        # The store's one lock module, held by the process rather than a thread: the
        # loop's thread takes it and whichever thread stops the loop leaves it.
        self._lock = FileMutex(self.dir / SEAT_FILE, per_thread=False)

    @property
    def held(self) -> bool:
        """Whether this object holds the seat."""
        return self._lock.is_held

    def take(self) -> bool:
        """Take the seat if nobody holds it; True when this object holds it."""
        if self._lock.is_held:
            return True
        if not self._lock.try_acquire():
            return False
        try:
            self._holder_fd = os.open(self.holder_path,
                                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(self._holder_fd, f"{os.getpid()}\n".encode())
        except OSError:  # the others then notice a departure by their slow retries only
            self._holder_fd = None
        return True

    def leave(self) -> None:
        if self._holder_fd is not None:
            fd, self._holder_fd = self._holder_fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._lock.is_held:
            self._lock.release()

    def taken(self) -> bool:
        """Whether a loop holds the seat (this object's or another process's)."""
        if self.held:
            return True
        if self.take():
            self.leave()
            return False
        return True

    # --- what the holder and the others share -------------------------------------

    def ask(self) -> None:
        """Ask the holder for a pass now."""
        fd = os.open(self.kick_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {time.time():.6f}\n".encode())
        finally:
            os.close(fd)

    def publish(self, passes: Passes) -> None:
        tmp = self.dir / f"{PASSES_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(asdict(passes)))
        os.replace(tmp, self.passes_path)

    def passes(self) -> Passes:
        try:
            return Passes.parse(json.loads(self.passes_path.read_text()))
        except (OSError, ValueError):
            return Passes()

    def watch(self, on_kick: Callable[[], None], on_passes: Callable[[], None],
              on_vacant: Callable[[], None] | None = None) -> Any:
        """Call ``on_kick`` when someone asks for a pass, ``on_passes`` when the holder
        published one, ``on_vacant`` when the holder left (or died); the watchdog
        observer is returned (``stop()`` it)."""
        from watchdog.events import (
            FileClosedEvent,
            FileMovedEvent,
            FileSystemEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        kick, published = str(self.kick_path), str(self.passes_path)
        holder = str(self.holder_path)

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type == "closed" and str(event.src_path) == kick:
                    on_kick()
                elif (event.event_type == "closed" and str(event.src_path) == holder
                      and on_vacant is not None):
                    on_vacant()
                elif event.event_type == "moved" and str(event.dest_path) == published:
                    on_passes()

        observer = Observer(timeout=WATCH_TIMEOUT_SECONDS)
        observer.daemon = True
        # Only writes that close a file and renames: each reader's open and close
        # would otherwise wake every watcher.
        observer.schedule(Handler(), str(self.dir), recursive=False,
                          event_filter=[FileClosedEvent, FileMovedEvent])
        observer.start()
        return observer


def ask_for_pass(seat: Seat, timeout: float) -> bool:
    """For a process that runs no loop (a CLI command, ``gitrelay web``'s reads): when
    another process holds the seat, ask it for a pass and wait until one that started
    after this call has finished. False when no loop runs or none answered in time
    (the caller then fetches itself)."""
    import threading

    if seat.held or not seat.taken():
        return False
    since = time.time()
    done = threading.Event()

    def heard() -> None:
        if seat.passes().started_at >= since:
            done.set()

    observer = seat.watch(lambda: None, heard)
    try:
        seat.ask()
        return done.wait(timeout)
    finally:
        observer.stop()
