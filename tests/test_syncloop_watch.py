"""The sync loop's watch on a local relay wakes it for ref changes, not for reads."""

from __future__ import annotations

import time


def test_an_idle_loop_on_a_local_relay_does_not_wake_itself_by_fetching(team):
    # Each fetch reads the relay's refs; if reads woke the loop, every pass would
    # trigger the next one and an idle server would fetch without pause.
    alice = team["alice"]
    loop = alice.start_sync_loop()
    try:
        loop.kick()
        time.sleep(2.0)
        passes = loop.passes
    finally:
        alice.stop_sync_loop(flush=False)
    # Adaptive interval from 0.5 s, doubling while quiet: a handful of passes at most.
    assert passes <= 6, f"{passes} passes in 2 s: the loop keeps waking itself"


def test_a_teammates_push_still_wakes_the_loop(team):
    alice, bob = team["alice"], team["bob"]
    loop = bob.start_sync_loop()
    try:
        gen = loop.generation
        alice.handoff(to="bob@acme", intent="inform", summary="wake on push", mode="wait")
        assert loop.wait_for_change(10, since=gen)
    finally:
        bob.stop_sync_loop(flush=False)
