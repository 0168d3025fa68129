"""RelayView's shared parses of relay.json and the profiles: keyed by object ids,
so a change to either is seen by the next view and never by an older one."""

from __future__ import annotations

from collections.abc import Callable

from gitrelay.client import RelayClient


def test_views_of_one_team_share_parsed_profiles(team: dict[str, RelayClient]) -> None:
    alice = team["alice"]
    before = alice.mirror.view()
    alice.handoff(to="bob@acme", intent="inform", summary="the nightly export is slow",
                  mode="queue")
    after = alice.mirror.view()
    assert before.tree != after.tree
    # Same teammates tree and relay.json: one parse serves both views.
    assert after.profiles() is before.profiles()
    assert after.config is before.config
    assert set(after.profiles()) == {"alice@acme", "bob@acme", "carol@acme"}


def test_a_new_registration_is_seen_by_the_next_view_only(
        team: dict[str, RelayClient], make_client: Callable[..., RelayClient]) -> None:
    alice = team["alice"]
    old = alice.mirror.view()
    assert old.profile("dave@acme") is None
    make_client("dave@acme")
    alice.refresh(max_age=0)
    new = alice.mirror.view()
    assert new.profile("dave@acme") is not None
    assert old.profile("dave@acme") is None
    # A handoff to the new teammate passes the rules against the cached profiles.
    result = alice.handoff(to="dave@acme", intent="inform", summary="welcome aboard")
    assert result.delivery == "delivered"
