"""The copy's sync state (gitrelay-sync.json): what the last look and push found."""

from __future__ import annotations

import os

from gitrelay.store.mirror import STATE_TIME_GRAIN


def test_a_look_within_the_grain_of_the_last_leaves_the_file_as_it_is(team):
    """A busy relay's passes do not rewrite the file each time: only the look's time
    would change, and it is kept to the second."""
    mirror = team["alice"].mirror
    mirror.update_sync_state(last_fetch=1000.0, last_error=None)
    written = os.stat(mirror.state_path).st_ino
    mirror.update_sync_state(last_fetch=1000.0 + STATE_TIME_GRAIN / 2, last_error=None)
    assert os.stat(mirror.state_path).st_ino == written
    assert mirror.sync_state()["last_fetch"] == 1000.0
    mirror.update_sync_state(last_fetch=1000.0 + STATE_TIME_GRAIN * 1.5)
    assert os.stat(mirror.state_path).st_ino != written
    assert mirror.sync_state()["last_fetch"] == 1000.0 + STATE_TIME_GRAIN * 1.5


def test_anything_else_that_changes_is_written_with_the_time(team):
    mirror = team["alice"].mirror
    mirror.update_sync_state(last_fetch=2000.0, last_error=None)
    mirror.update_sync_state(last_fetch=2000.1, last_error="cannot reach the relay")
    state = mirror.sync_state()
    assert state["last_error"] == "cannot reach the relay" and state["last_fetch"] == 2000.1
