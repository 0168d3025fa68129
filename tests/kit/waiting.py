"""Waiting for what another process or thread does.

:func:`wait_until` (and :func:`await_until` in async tests) waits with a deadline and a
message saying what never happened.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

import anyio

__all__ = ["await_until", "wait_until"]

T = TypeVar("T")

def wait_until(check: Callable[[], T], what: str | Callable[[], str], timeout: float = 30.0,
               every: float = 0.02) -> T:
    """The first true value of ``check()``, asked every ``every`` seconds; an assertion
    saying ``what`` did not happen (a callable: what it says then) when there is none
    within ``timeout`` seconds. The timeout only ends a wait that would hang: timings
    never make a test fail."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, _never(what, timeout)
        time.sleep(every)


async def await_until(check: Callable[[], Awaitable[T] | T], what: str | Callable[[], str],
                      timeout: float = 30.0, every: float = 0.05) -> T:
    """:func:`wait_until` in an async test, sleeping on the event loop: the first true
    value of ``check()`` (awaited when it is a coroutine). A check that hangs ends at the
    timeout too."""
    try:
        with anyio.fail_after(timeout):
            while True:
                got = check()
                value = cast(T, await got if inspect.isawaitable(got) else got)
                if value:
                    return value
                await anyio.sleep(every)
    except TimeoutError:
        raise AssertionError(_never(what, timeout)) from None


def _never(what: str | Callable[[], str], timeout: float) -> str:
    return f"{what if isinstance(what, str) else what()}: not within {timeout:g} s"
