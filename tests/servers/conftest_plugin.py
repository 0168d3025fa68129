"""pytest fixtures for the real git servers.

Load with ``pytest_plugins = ["tests.servers.conftest_plugin"]`` in the
rootdir conftest, or import the fixture functions into a test module.

Function scope (a fresh server and an empty served root per test):
    http_server   -> HttpGitServer   (REMOTE_USER)
    ssh_server    -> SshGitServer    (GITRELAY_SSH_USER)
    git_server    -> each of the two in turn (parametrized, ids "http"/"ssh")

Session scope (one server for the whole run; tests must use distinct repo names):
    http_server_session, ssh_server_session

Every server knows the teammates in ``DEFAULT_USERS`` (alice, bob); call
``server.add_user(name)`` for more. A missing binary skips the test, or fails
it when GITRELAY_REQUIRE_SERVERS=1. Tests using these fixtures should carry
``@pytest.mark.servers``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import DEFAULT_USERS, GitServer
from .http import HttpGitServer, http_git_server
from .ssh import SshGitServer, ssh_git_server

__all__ = [
    "git_server",
    "http_server",
    "http_server_session",
    "ssh_server",
    "ssh_server_session",
]


@pytest.fixture
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpGitServer]:
    root = tmp_path_factory.mktemp("http-served")
    with http_git_server(root, DEFAULT_USERS) as server:
        yield server


@pytest.fixture
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshGitServer]:
    root = tmp_path_factory.mktemp("ssh-served")
    with ssh_git_server(root, DEFAULT_USERS) as server:
        yield server


@pytest.fixture(params=["http", "ssh"])
def git_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GitServer]:
    kind: str = request.param
    root = tmp_path_factory.mktemp(f"{kind}-served")
    start = http_git_server if kind == "http" else ssh_git_server
    with start(root, DEFAULT_USERS) as server:
        yield server


@pytest.fixture(scope="session")
def http_server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpGitServer]:
    root = tmp_path_factory.mktemp("http-served-session")
    with http_git_server(root, DEFAULT_USERS) as server:
        yield server


@pytest.fixture(scope="session")
def ssh_server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshGitServer]:
    root = tmp_path_factory.mktemp("ssh-served-session")
    with ssh_git_server(root, DEFAULT_USERS) as server:
        yield server
