"""Shared fixtures: hermetic git, real relays with the gate installed, teammates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from tests.kit import TEAM, RelayTemplates, set_hermetic

pytest_plugins = ["tests.servers.conftest_plugin"]


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git config, no real home, fixed identity for git commands
    (``tests.kit.set_hermetic``)."""
    home = tmp_path_factory.mktemp("home")
    set_hermetic(monkeypatch, home, gitrelay_home=home / ".gitrelay",
                 trust=home / "trust.yaml")


@pytest.fixture
def relay(tmp_path: Path) -> Path:
    """A fresh bare relay with the gate installed."""
    return joining.init_relay(tmp_path / "relay.git", name="acme")


@pytest.fixture(scope="session")
def relays(tmp_path_factory: pytest.TempPathFactory) -> RelayTemplates:
    """``relays(kind, dest)``: a copy of a standard relay of that kind (built once)."""
    return RelayTemplates(tmp_path_factory.mktemp("relay-templates"))


@pytest.fixture
def make_client(relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[Callable[..., RelayClient]]:
    """Join a teammate (own GITRELAY_HOME) and return their client."""
    made: dict[str, RelayClient] = {}

    def make(handle: str, *, writes: str = "wait", home: str | None = None) -> RelayClient:
        home_dir = tmp_path / (home or handle.split("@")[0])
        monkeypatch.setenv("GITRELAY_HOME", str(home_dir))
        name, role, _ = TEAM.get(handle, (handle.split("@")[0].title(), "engineer", ""))
        joining.join(str(relay), handle, name=name, role=role, save=False)
        client = RelayClient(str(relay), handle, writes=writes)
        made[f"{handle}:{home}"] = client
        return client

    yield make


@pytest.fixture
def team(make_client: Callable[..., RelayClient]) -> dict[str, RelayClient]:
    """alice, bob and carol joined to one relay, each with their own mirror."""
    clients = {h.split("@")[0]: make_client(h) for h in TEAM}
    for c in clients.values():
        c.refresh(max_age=0)
    return clients


class Team(dict[str, RelayClient]):
    """Teammates joined on first use (a join costs a push): people["carol"] joins carol."""

    def __init__(self, make: Callable[..., RelayClient]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, name: str) -> RelayClient:
        client = self.make(f"{name}@acme")
        client.sync.fresh_seconds = 0  # read the relay as it is now
        self[name] = client
        return client


@pytest.fixture
def people(make_client: Callable[..., RelayClient]) -> Team:
    """alice, bob, carol... each joined to one relay the first time a test names them."""
    return Team(make_client)
