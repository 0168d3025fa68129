"""Inter-process locks on a file, on every OS: the one lock of gitrelay.

:class:`FileMutex` is an exclusive lock on a file through ``filelock`` (``flock`` on
Linux and macOS, ``LockFileEx`` through ``msvcrt`` on Windows). The operating system
drops such a lock when its holder dies, so a killed process never leaves a stale lock
behind. A lock is re-entrant within one thread and excludes other threads of the same
process as it excludes other processes (each thread holds its own open file).

The store's refs and sync locks, the trust file's edits, the session state of the
coding hosts' hooks and the waiter's one-per-session rule all take one of these::

    with FileMutex(path):            # waits as long as it takes
        ...
    lock = FileMutex(path)
    lock.acquire(timeout=2.0)        # LockTimeout past it; timeout=0: one try
    ...
    lock.release()
    FileMutex(path).held_elsewhere() # someone else holds it now (never creates the file)
"""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["FileMutex", "LockTimeout"]


class LockTimeout(Exception):
    """The lock stayed held by someone else for longer than the timeout."""


class FileMutex:
    """An exclusive lock on ``path``: ``with lock:`` (waits as long as it takes), or
    ``acquire(timeout)`` then ``release()``. The file is created when first taken and
    left in place (removing it would let two processes lock two different files)."""

    POLL = 0.005

    def __init__(self, path: str | Path, *, per_thread: bool = True) -> None:
        """``per_thread=False``: one lock for the whole process, which any of its
        threads may release (a sync loop's seat, taken by one thread and left by
        another at shutdown)."""
        self.path = str(path)
        self._per_thread = per_thread
        self._pid = os.getpid()
        self._file_lock = self._new()

    def _new(self) -> FileLock:
        return FileLock(self.path, mode=0o600, thread_local=self._per_thread)

    @property
    def _lock(self) -> FileLock:
        """This process's lock on the file: a child made by ``fork`` holds nothing of its
        parent's, and takes its own."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._file_lock = self._new()
        return self._file_lock

    @property
    def is_held(self) -> bool:
        """Whether this thread (with ``per_thread=False``, this process) holds the lock."""
        return bool(self._lock.is_locked)

    def acquire(self, timeout: float | None = None) -> None:
        """Take the lock, waiting up to ``timeout`` seconds (None: as long as it takes;
        0: a single try)."""
        try:
            self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0),
                               poll_interval=self.POLL)
        except Timeout:
            raise LockTimeout(self.path) from None

    def try_acquire(self) -> bool:
        """Take the lock if nobody else holds it; False (and nothing taken) otherwise."""
        try:
            self.acquire(timeout=0)
        except LockTimeout:
            return False
        return True

    def release(self) -> None:
        self._lock.release()

    def held_elsewhere(self) -> bool:
        """Whether another process or thread holds the lock now. Never creates the
        file: a lock never taken is not held."""
        if self.is_held or not os.path.exists(self.path):
            return False
        if not self.try_acquire():
            return True
        self.release()
        return False

    def __enter__(self) -> FileMutex:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
