"""RelayView's shared parses of relay.json and the profiles: keyed by object ids,
so a change to either is seen by the next view and never by an older one; and a
lookup of one teammate that reads that teammate's profile alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gitrelay.core import layout
from gitrelay.core import view as relay_view
from gitrelay.core.objects import Objects
from gitrelay.core.view import RelayView
from gitrelay.relay.client import RelayClient


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


class _Counting:
    """An object source that records every object read through it."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.read_oids: list[str] = []

    def read(self, oid: str) -> tuple[str, bytes] | None:
        self.read_oids.append(oid)
        found: tuple[str, bytes] | None = self.source.read(oid)
        return found


def test_one_profile_is_read_without_the_rest_of_the_team(
        team: dict[str, RelayClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate starts afresh on every push: looking up an operation's actor must not
    read every teammate's profile (nor may it answer differently from profiles())."""
    monkeypatch.setattr(relay_view, "_PROFILE_SETS", {})
    monkeypatch.setattr(relay_view, "_PROFILES", {})
    mirror = team["alice"].mirror
    tip = mirror.main()
    assert tip is not None
    counting = _Counting(mirror.objects.source)
    objs = Objects(counting)
    tree = objs.commit(tip).tree
    view = RelayView(objs, tree)
    bob = view.profile("Bob@ACME")  # handles compare ignoring case
    assert bob is not None and bob["handle"] == "bob@acme"
    fresh = RelayView(Objects(mirror.objects.source), tree)
    assert fresh.sharded  # a new relay keeps its teammates in shards
    others = {fresh.objs.entry(tree, layout.teammate_dir(h, True)).oid  # type: ignore[union-attr]
              for h in ("alice@acme", "carol@acme")}
    assert others and not others & set(counting.read_oids)
    assert view.profile("dave@acme") is None
    # The whole team, read afresh, says the same of everyone.
    whole = RelayView(Objects(mirror.objects.source), tree).profiles()
    for handle in ("alice@acme", "bob@acme", "carol@acme", "CAROL@acme", "dave@acme"):
        assert RelayView(objs, tree).profile(handle) == whole.get(handle.casefold())
