"""The one ``git fetch`` of a relay into a local copy's quarantine refs.

:class:`gitrelay.sync.push.Syncer` runs it (when the relay is not a local path it can read
in place), and so does a coding host's session-start hook, which must start without
pygit2 or pydantic: this module uses only the standard library, ``core`` and the store's
lock. The fetch runs under the copy's sync lock, as every fetch of the copy does.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from gitrelay.core import layout
from gitrelay.core.errors import RelayUnavailable
from gitrelay.core.gitcli import run_git
from gitrelay.store.locks import FileMutex, LockTimeout

__all__ = ["fetch_argv", "fetch_before"]


def fetch_argv(url: str) -> list[str]:
    """git's arguments for a fetch of every ref the relay keeps into the quarantine refs
    (``layout.FETCH_REFSPECS``), pruning what the relay no longer has."""
    return ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--prune", url,
            *layout.FETCH_REFSPECS]


def fetch_before(copy: Path, url: str, deadline: float, env: Mapping[str, str]
                 ) -> subprocess.CompletedProcess[bytes]:
    """:func:`fetch_argv` run in ``copy`` under its sync lock, both waited for until
    ``deadline`` (``time.monotonic()``) at the latest: RelayUnavailable when the lock
    stays held past it; git's own failure is the caller's to read off the result."""
    lock = FileMutex(copy / layout.SYNC_LOCK_FILE)
    try:
        lock.acquire(timeout=max(deadline - time.monotonic(), 0.0))
    except LockTimeout:
        raise RelayUnavailable("another fetch of the relay took longer") from None
    try:
        return run_git(fetch_argv(url), git_dir=copy, env=dict(env),
                       timeout=max(deadline - time.monotonic(), 0.05))
    finally:
        lock.release()
