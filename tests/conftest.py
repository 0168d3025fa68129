"""Shared fixtures: hermetic git, real relays with the gate installed, teammates."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitrelay.relay import setup
from gitrelay.relay.client import RelayClient
from tests.relaykit import RelayTemplates

pytest_plugins = ["tests.servers.conftest_plugin"]

# Test modules that take tens of seconds or more (real `gitrelay mcp` processes, the
# CLI end to end, generated relays, property and model runs, crash rounds). They are
# marked ``slow``: `make check` leaves them out, `make test` runs everything.
SLOW_MODULES = frozenset({
    "test_bad_tool_input", "test_bench", "test_cli", "test_crashes", "test_demo",
    "test_example_repo", "test_gate_property", "test_inbox", "test_index", "test_injection",
    "test_mcp_stdio", "test_mcp_tools", "test_mcp_ts_client", "test_model_stateful",
    "test_parallel", "test_front_ends_agree", "test_unparseable_commits", "test_real_hosts",
    "test_web_browser",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git config, no real home, fixed identity for git commands."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GITRELAY_HOME", str(home / ".gitrelay"))
    monkeypatch.setenv("GITRELAY_TRUST", str(home / "trust.yaml"))


@pytest.fixture
def relay(tmp_path: Path) -> Path:
    """A fresh bare relay with the gate installed."""
    return setup.init_relay(tmp_path / "relay.git", name="acme")


@pytest.fixture(scope="session")
def relays(tmp_path_factory: pytest.TempPathFactory) -> RelayTemplates:
    """``relays(kind, dest)``: a copy of a standard relay of that kind (built once)."""
    return RelayTemplates(tmp_path_factory.mktemp("relay-templates"))


TEAM = {
    "alice@acme": ("Alice Martin", "backend"),
    "bob@acme": ("Bob Chen", "frontend"),
    "carol@acme": ("Carol Diaz", "platform"),
}


@pytest.fixture
def make_client(relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[Callable[..., RelayClient]]:
    """Join a teammate (own GITRELAY_HOME) and return their client."""
    made: dict[str, RelayClient] = {}

    def make(handle: str, *, writes: str = "wait", home: str | None = None) -> RelayClient:
        home_dir = tmp_path / (home or handle.split("@")[0])
        monkeypatch.setenv("GITRELAY_HOME", str(home_dir))
        name, role = TEAM.get(handle, (handle.split("@")[0].title(), "engineer"))
        setup.join(str(relay), handle, name=name, role=role, save=False)
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
