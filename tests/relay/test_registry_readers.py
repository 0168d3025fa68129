"""Readers on both layouts of the registry: a relay made before sharding (flat
``teammates/<handle>/``) and a new one (``teammates/<c0>/<c1>/<handle>/``).

GIVEN a relay of either layout with the gate installed
WHEN teammates join, correct their profiles, hand work over, list the team, and a
newcomer reads the whole history (verify-on-read)
THEN every client writes at the relay's own paths, the gate takes them, and every
reader sees the same registry: the layout changes where files lie, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.inbox.inbox import check_inbox
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.sync.verify import verify_relay
from tests.kit import Bench, git


@pytest.fixture(params=["sharded", "flat"])
def relay(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A fresh relay with the gate: as `gitrelay init` makes it today (sharded), or as it
    made it before sharding (relay.json without teammates_layout: flat)."""
    if request.param == "sharded":
        return joining.init_relay(tmp_path / "relay.git", name="acme")
    return Bench.create(tmp_path / "flat", config={"teammates_layout": None}).relay


def stored_files(relay: Path) -> list[str]:
    out = git("ls-tree", "-r", "--name-only", layout.MAIN_REF, layout.TEAMMATES_DIR,
              git_dir=relay).stdout.decode()
    return sorted(out.split())


@pytest.mark.slow
def test_clients_read_and_write_the_registry_where_the_relay_keeps_it(
        relay: Path, make_client: Callable[..., RelayClient]) -> None:
    alice, bob, carol = (make_client(h) for h in ("alice@acme", "bob@acme", "carol@acme"))
    sharded = alice.view().sharded
    assert sharded is ("teammates_layout" in alice.view().config)
    carol.update_profile(role="platform lead")
    assert stored_files(relay) == sorted([
        layout.profile_path("alice@acme", sharded), layout.profile_path("bob@acme", sharded),
        layout.profile_path("carol@acme", sharded),
        layout.profile_update_path("carol@acme", 1, sharded)])

    sent = alice.handoff(to="bob@acme", intent="inform", summary="the export is slow")
    assert sent.delivery == "delivered"
    bob.refresh(max_age=0)
    assert [i.thread_id for i in check_inbox(bob).items] == [sent.thread_id]
    bob.accept(sent.thread_id, session_id="bob-session")

    alice.refresh(max_age=0)
    assert [p["handle"] for p in alice.teammates()] == ["alice@acme", "bob@acme", "carol@acme"]
    first = alice.teammates_page(limit=2)
    rest = alice.teammates_page(limit=2, cursor=first.next_cursor)
    assert [p["handle"] for p in first.teammates + rest.teammates] == \
        ["alice@acme", "bob@acme", "carol@acme"]
    assert first.total == 3 and rest.next_cursor is None
    assert alice.teammate("CAROL@acme")["role"] == "platform lead"  # type: ignore[index]

    # A newcomer checks the whole history with the gate's rules, and reads the same.
    dave = make_client("dave@acme")
    dave.refresh(max_age=0)
    assert dave.sync.problem() is None
    assert [p["handle"] for p in dave.teammates()] == \
        ["alice@acme", "bob@acme", "carol@acme", "dave@acme"]
    assert dave.teammate("carol@acme")["role"] == "platform lead"  # type: ignore[index]
    assert verify_relay(str(relay)).ok


def test_joining_again_under_another_spelling_is_refused_on_either_layout(
        relay: Path, make_client: Callable[..., RelayClient]) -> None:
    make_client("alice@acme")
    with pytest.raises(RelayError, match="already registered") as refused:
        make_client("Alice@ACME", home="alice2")
    assert refused.value.data["field"] == "--as"  # found in the registry before writing
    assert len([f for f in stored_files(relay) if f.endswith("profile.json")]) == 1
