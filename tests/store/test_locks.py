"""The one inter-process lock (store.locks.FileMutex, on filelock): a holder killed
outright leaves no stale lock, threads of one process exclude one another, and a lock
nobody took is not held."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gitrelay.store.locks import FileMutex, LockTimeout
from tests.kit import wait_until

HOLDER = """
import sys, time
from gitrelay.store.locks import FileMutex
lock = FileMutex(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(300)
"""


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "refs.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = FileMutex(path)
        assert lock.held_elsewhere()
        with pytest.raises(LockTimeout):
            lock.acquire(timeout=0.1)
        holder.kill()  # SIGKILL (TerminateProcess on Windows): no clean-up runs
        holder.wait()
        wait_until(lock.try_acquire, "the lock is free once its holder was killed",
                   timeout=30)
        assert lock.is_held
        lock.release()
        assert path.exists()  # the file stays; only the OS's lock on it went away
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_another_thread_waits_and_the_holder_may_take_it_again(tmp_path: Path) -> None:
    lock = FileMutex(tmp_path / "x.lock")
    lock.acquire()
    lock.acquire(timeout=0)  # re-entrant in the holding thread
    tried: list[bool] = []
    other = threading.Thread(target=lambda: tried.append(lock.try_acquire()))
    other.start()
    other.join()
    assert tried == [False]
    lock.release()
    lock.release()
    assert not lock.is_held
    assert lock.try_acquire()
    lock.release()


def test_a_lock_never_taken_is_not_held_and_asking_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "never.lock"
    assert not FileMutex(path).held_elsewhere()
    assert not path.exists()
