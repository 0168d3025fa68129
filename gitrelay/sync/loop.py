"""The background sync loop: deliver queued operations, fetch what is new.

One loop runs per MCP server (and ``gitrelay`` CLI commands can run one
pass). It works on the local copy and its syncer alone; the copy's
:class:`~gitrelay.sync.control.SyncControl` (a client's ``client.sync``) owns it
through ``start_loop`` and is never seen by it. It wakes up

- at once when kicked (a write was queued, an agent asked for fresh data);
- when the relay changes, for a relay on a local path (watchdog on its refs);
- otherwise on an adaptive interval: ``MIN_INTERVAL`` after activity, doubling
  on every quiet pass up to ``MAX_INTERVAL``.

Each pass delivers the whole outbox in one push (group commit) when anything
is queued, and fetches otherwise. ``wait_for_change`` lets ``check_inbox``
long-poll: it returns as soon as a pass brought something new.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.store.mirror import RELAY_USERS, Mirror
from gitrelay.sync.push import Syncer

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.5
MAX_INTERVAL = 15.0
# While the loop runs, reads use the local copy if its last fetch is this fresh.
FRESH_WHILE_RUNNING = MAX_INTERVAL + 5.0


def local_relay_dir(url: str) -> Path | None:
    """The directory of a relay given as a local path or file:// URL."""
    path = Path(url[len("file://"):] if url.startswith("file://") else url)
    if "://" in url and not url.startswith("file://"):
        return None
    return path if (path / "HEAD").exists() else None


class SyncLoop:
    def __init__(self, mirror: Mirror, syncer: Syncer, relay_url: str, *,
                 watch: bool = True) -> None:
        self.mirror = mirror
        self.syncer = syncer
        self.relay_url = relay_url
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._generation = 0
        self._thread: threading.Thread | None = None
        self._observer: Any = None
        self._watch = watch
        self.interval = MIN_INTERVAL
        self.last_error: RelayError | None = None
        self.passes = 0
        # Passes started and finished, for callers waiting on "a pass that began
        # after my operation was queued" (``deliver_pass``).
        self._started = 0
        self._finished = 0

    # --- control ----------------------------------------------------------------

    def start(self) -> SyncLoop:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="gitrelay-sync", daemon=True)
        self._thread.start()
        relay_dir = local_relay_dir(self.relay_url) if self._watch else None
        if relay_dir is not None:
            self._observer = _watch_refs(relay_dir, self.kick)
        return self

    def kick(self) -> None:
        self._kick.set()

    def stop(self, *, flush: bool = True, timeout: float = 10.0) -> None:
        """Stop the loop; with ``flush``, try once more to deliver what is queued."""
        self._stop.set()
        self._kick.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
        with self._changed:
            self._changed.notify_all()
        if flush and self.mirror.outbox():
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
        from the caller's thread: the loop is the only pusher of the process, so
        the write never queues behind the loop's fetch for the sync lock, and
        writes waited for at the same time go to the relay in one push. False
        when the pass did not finish within ``timeout`` (or the loop stopped).
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            want = self._started + 1
        self.kick()
        with self._changed:
            while self._finished < want:
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    return False
                self._changed.wait(left)
        return True

    @property
    def idle(self) -> bool:
        """No pass running and none asked for (the benchmarks wait for it between calls)."""
        with self._changed:
            return self._started == self._finished and not self._kick.is_set()

    @property
    def generation(self) -> int:
        return self._generation

    def wait_for_change(self, timeout: float, since: int | None = None) -> bool:
        """Block until a pass brings something new (or ``timeout``); True if it did."""
        start = self._generation if since is None else since
        self.kick()
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._generation == start:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # --- the loop -----------------------------------------------------------------

    def run_once(self) -> bool:
        """One pass: deliver if anything is queued, else fetch. True if main moved."""
        before = self.mirror.main()
        if self.mirror.outbox() or _inbox_ahead(self.mirror):
            self.syncer.deliver()
        else:
            self.syncer.fetch()
        self.passes += 1
        return self.mirror.main() != before

    def _run(self) -> None:
        while not self._stop.is_set():
            kicked = self._kick.wait(self.interval)
            self._kick.clear()
            if self._stop.is_set():
                break
            with self._changed:
                self._started += 1
            moved = False
            try:
                moved = self.run_once()
                self.last_error = None
            except RelayError as exc:
                self.last_error = exc
                self.interval = min(MAX_INTERVAL, max(self.interval * 2, 1.0))
                continue
            except Exception as exc:  # keep serving reads whatever happens here
                log.error("gitrelay: sync loop error: %r", exc)
                self.interval = MAX_INTERVAL
                continue
            finally:
                with self._changed:
                    self._finished += 1
                    if moved:
                        self._generation += 1
                    self._changed.notify_all()
            if moved or kicked:
                self.interval = MIN_INTERVAL
            else:
                self.interval = min(MAX_INTERVAL, self.interval * 2)


def _inbox_ahead(mirror: Mirror) -> bool:
    """The user's inbox ref moved here and not yet on the relay."""
    local = mirror.store.ref(layout.inbox_ref(mirror.handle))
    remote = mirror.store.ref(f"{RELAY_USERS}{mirror.handle}/{layout.INBOX_REF_LEAF}")
    return local is not None and local != remote


_REF_CHANGES = frozenset({"created", "modified", "moved", "deleted", "closed"})


def _watch_refs(relay_dir: Path, callback: Any) -> Any:
    """Kick the loop when a local relay's refs change."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            # Reads show up too (opened, closed_no_write): every fetch reads the
            # relay's refs, so reacting to them makes each fetch wake the next one.
            if event.event_type not in _REF_CHANGES:
                return
            path = str(event.src_path)
            if "/refs/" in path or path.endswith(("packed-refs", "/refs")):
                callback()

    observer = Observer()
    observer.daemon = True
    observer.schedule(Handler(), str(relay_dir / "refs"), recursive=True)
    observer.schedule(Handler(), str(relay_dir), recursive=False)
    observer.start()
    return observer
