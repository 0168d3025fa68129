"""Fault points for crash tests: ``GITRELAY_FAULT=<point>`` kills the process there.

The write path calls :func:`point` at the places a crash matters (after the
local commit, after the outbox journal was filed but before it is emptied,
during the push, after the push but before the reply). Unset in
normal use, it costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

POINTS = ("after_local_commit", "after_flush", "during_push", "after_push")


def point(name: str) -> None:
    if os.environ.get("GITRELAY_FAULT") == name:
        # SIGKILL where there is one; on Windows SIGTERM is TerminateProcess, as abrupt.
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


def armed(name: str) -> bool:
    return os.environ.get("GITRELAY_FAULT") == name
