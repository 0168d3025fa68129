"""One ssh connection per relay and machine: the sync's looks, fetches and pushes share
it (OpenSSH's connection sharing), and an ssh command the user chose is respected."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitrelay.core import sshcmd
from gitrelay.core.gitcli import hermetic_env
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from tests.kit import wait_until
from tests.servers.conftest_plugin import ssh_server
from tests.servers.ssh import SshGitServer

__all__ = ["ssh_server"]  # the fixture, used by name

URL = "ssh://git@git.acme.dev/srv/git/acme.git"


@pytest.fixture
def short_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A GITRELAY_HOME as short as a user's ~/.gitrelay: a control socket's path must
    fit in 104 bytes, which a test's own folder may not."""
    home = Path(tempfile.mkdtemp(prefix="grh-", dir="/tmp" if os.name != "nt" else None))
    monkeypatch.setenv("GITRELAY_HOME", str(home))
    for name in ("GIT_SSH_COMMAND", "GIT_SSH"):
        monkeypatch.delenv(name, raising=False)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _command(env: dict[str, str]) -> str:
    return env["GIT_SSH_COMMAND"]


@pytest.mark.skipif(os.name == "nt", reason="Windows' OpenSSH cannot share a connection")
def test_the_default_ssh_command_shares_one_connection_per_relay(short_home: Path) -> None:
    command = _command(sshcmd.relay_ssh_env(URL, hermetic_env(), short_home))
    assert command.startswith(sshcmd.DEFAULT_COMMAND + " -o ControlMaster=auto")
    assert f"ControlPersist={sshcmd.SHARE_SECONDS}" in command
    socket = Path(shlex.split(command)[command.count(" -o ") * 2 - 2].split("=", 1)[1])
    assert socket.parent == short_home / "ssh"
    assert stat.S_IMODE(socket.parent.stat().st_mode) == 0o700
    # Another relay, or the same one through another key, gets a connection of its own.
    other = _command(sshcmd.relay_ssh_env(URL.replace("acme.git", "ops.git"), hermetic_env(),
                                          short_home))
    keyed = _command(sshcmd.relay_ssh_env(
        URL, hermetic_env({"GIT_SSH_COMMAND": "ssh -i /home/alice/.ssh/work"}), short_home))
    assert keyed.startswith("ssh -i /home/alice/.ssh/work -o ControlMaster=auto")
    paths = {c.split("ControlPath=")[1].split()[0] for c in (command, other, keyed)}
    assert len(paths) == 3


@pytest.mark.parametrize("url", ["/srv/git/acme.git", "file:///srv/git/acme.git",
                                 "https://git.acme.dev/acme.git"])
def test_a_relay_not_reached_through_ssh_is_left_alone(short_home: Path, url: str) -> None:
    env = hermetic_env()
    assert sshcmd.relay_ssh_env(url, env, short_home) == env
    assert not (short_home / "ssh").exists()


@pytest.mark.parametrize("command", ["ssh -o ControlMaster=no",
                                     "ssh -o controlpath=/run/alice/ssh-%C",
                                     "plink -batch", "/opt/tools/corp-ssh -q"])
def test_an_ssh_command_of_the_users_own_choosing_is_kept(short_home: Path,
                                                         command: str) -> None:
    env = sshcmd.relay_ssh_env(URL, hermetic_env({"GIT_SSH_COMMAND": command}), short_home)
    assert _command(env) == command


def test_a_git_ssh_program_is_left_to_git(short_home: Path) -> None:
    # GIT_SSH names a program git runs; gitrelay's default command would take its place.
    env = sshcmd.relay_ssh_env(URL, hermetic_env({"GIT_SSH": "/opt/tools/ssh-wrapper"}),
                               short_home)
    assert "GIT_SSH_COMMAND" not in env
    assert env["GIT_SSH"] == "/opt/tools/ssh-wrapper"


def test_a_home_too_long_for_a_socket_shares_nothing(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    home = tmp_path / ("h" * 90)
    assert _command(sshcmd.relay_ssh_env(URL, hermetic_env(), home)) == \
        sshcmd.DEFAULT_COMMAND
    assert not home.exists()


def _join(server: SshGitServer, user: str, env: dict[str, str], home: Path,
          monkeypatch: pytest.MonkeyPatch) -> RelayClient:
    """``user`` joined from a laptop of their own: ``home / user`` (GITRELAY_HOME stays
    there after this)."""
    monkeypatch.setenv("GITRELAY_HOME", str(home / user))
    url = server.url("relay.git", user)
    joining.join(url, f"{user}@acme", name=user.title(), role="engineer",
                 usernames=[user], save=False, env=env)
    return RelayClient(url, f"{user}@acme", writes="wait", env=env)


def _connections(server: SshGitServer, user: str) -> list[str]:
    """The connection of each git request ``user`` made, in order."""
    assert server.forced_command_log is not None
    lines = server.forced_command_log.read_text().splitlines()
    return [line.rsplit("connection=", 1)[1] for line in lines
            if line.startswith(f"accepted user={user} ")]


def _masters(home: Path) -> list[int]:
    """The running ssh processes that serve a connection shared under ``home``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            # The one that holds the connection retitles itself "ssh: <socket> [mux]".
            if argv and os.path.basename(argv[0].split(b":")[0]) == b"ssh" and \
                    any(str(home).encode() in a for a in argv):
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts ssh processes in /proc")
def test_a_teammates_looks_fetches_and_pushes_share_one_connection(
        ssh_server: SshGitServer, short_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As a new user would: the relay over ssh, the key in their ssh command.
    monkeypatch.setattr(sshcmd, "SHARE_SECONDS", 2)
    joining.init_relay(ssh_server.root / "relay.git", name="acme")
    bob = _join(ssh_server, "bob", ssh_server.client_env("bob"), short_home, monkeypatch)
    alice = _join(ssh_server, "alice", ssh_server.client_env("alice"), short_home,
                  monkeypatch)
    first = len(_connections(ssh_server, "alice"))
    for _ in range(3):
        assert alice.sync.syncer.fetch_if_moved() is False
    sent = bob.handoff(to="alice@acme", intent="inform", summary="the export is back")
    assert alice.sync.syncer.fetch_if_moved() is True
    assert alice.mirror.view().thread(str(sent.thread_id)) is not None
    alice.send_message(thread_id=str(sent.thread_id), body="Looking at it now.")
    assert bob.sync.syncer.fetch_if_moved() is True
    shared = _connections(ssh_server, "alice")[first:]
    assert len(shared) >= 5  # four looks, a fetch and a push ...
    assert len(set(shared)) == 1, shared  # ... over one connection
    assert _masters(short_home)
    # Nothing is left running long after the last use.
    wait_until(lambda: not _masters(short_home), "the shared connection closes", timeout=15)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts ssh processes in /proc")
def test_without_sharing_each_request_is_a_connection_of_its_own(
        ssh_server: SshGitServer, short_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The user's command says no: gitrelay keeps it, and every request pays its login.
    env = ssh_server.client_env("alice")
    env["GIT_SSH_COMMAND"] += " -o ControlMaster=no"
    joining.init_relay(ssh_server.root / "relay.git", name="acme")
    alice = _join(ssh_server, "alice", env, short_home, monkeypatch)
    first = len(_connections(ssh_server, "alice"))
    for _ in range(3):
        alice.sync.syncer.fetch_if_moved()
    assert len(set(_connections(ssh_server, "alice")[first:])) == 3
    assert _masters(short_home) == []


def test_the_key_in_core_sshcommand_is_the_one_used(ssh_server: SshGitServer,
                                                    short_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # As a new user would: the key for this host set once in git's config, no
    # GIT_SSH_COMMAND; gitrelay's own command must not take core.sshCommand's place.
    # (Set through git's environment-borne config: the suite's git reads no ~/.gitconfig.)
    key_command = shlex.join(ssh_server.ssh_argv(ssh_server.keys["alice"]))
    for name, value in (("GIT_CONFIG_COUNT", "1"), ("GIT_CONFIG_KEY_0", "core.sshCommand"),
                        ("GIT_CONFIG_VALUE_0", key_command)):
        monkeypatch.setenv(name, value)
    env = ssh_server.client_env("alice")
    del env["GIT_SSH_COMMAND"]
    joining.init_relay(ssh_server.root / "relay.git", name="acme")
    alice = _join(ssh_server, "alice", env, short_home, monkeypatch)
    assert alice.sync.syncer.env["GIT_SSH_COMMAND"].startswith(key_command)
    assert _connections(ssh_server, "alice")
