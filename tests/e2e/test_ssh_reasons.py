"""When ssh fails, its own reason and the fix reach the person, not only git's
"Could not read from remote repository."

GIVEN a relay served by a real sshd, WHEN a new user joins without the host's key in
their known_hosts (as every first join to a new host does under BatchMode=yes), or
with a port nothing listens on, THEN join, whoami, status and doctor say what ssh
said and how to fix it.
"""

from __future__ import annotations

import shlex
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gitrelay.cli.main import main as cli_main
from gitrelay.relay import joining
from gitrelay.store.config import mirror_path
from gitrelay.store.mirror import Mirror
from tests.servers.ssh import SshGitServer

pytestmark = pytest.mark.servers


def ssh_command(server: SshGitServer, user: str, known_hosts: Path | None) -> str:
    """The server's ssh client line for ``user``, port from the URL, and host keys
    checked against ``known_hosts`` (None: not checked) as a user's ssh would."""
    argv = server.ssh_argv(server.keys[user])
    i = argv.index("-p")
    del argv[i:i + 2]
    if known_hosts is not None:
        argv = [a for a in argv if a not in ("StrictHostKeyChecking=no",
                                             "UserKnownHostsFile=/dev/null")]
        argv = [a for i, a in enumerate(argv) if not (a == "-o" and i + 1 < len(argv)
                                                      and argv[i + 1].startswith("-"))]
        argv += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    return shlex.join(argv)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unknown_host_key_is_named_with_the_fix_in_join_whoami_status_and_doctor(
        ssh_server: SshGitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    joining.init_relay(ssh_server.root / "relay.git", name="acme")
    url = ssh_server.url("relay.git", "alice")
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    monkeypatch.setenv("GIT_SSH_COMMAND", ssh_command(ssh_server, "alice", empty))
    join = ("join", url, "--as", "alice@acme", "--name", "Alice Martin", "--role", "backend",
            "--username", "alice")

    code, out = cli(capsys, *join)

    assert code != 0
    assert "Host key verification failed" in out
    assert "connect once yourself" in out and "BatchMode=yes" in out
    # The exact command, with the URL's own port, user and host filled in.
    parts = urlsplit(url)
    assert f"`ssh -p {parts.port} {parts.username}@{parts.hostname}`" in out, out
    assert "PORT USER@HOST" not in out

    # Joined (host key accepted once), then the host key is unknown again.
    monkeypatch.setenv("GIT_SSH_COMMAND", ssh_command(ssh_server, "alice", None))
    joined = cli(capsys, *join)
    assert joined[0] == 0, joined[1]
    monkeypatch.setenv("GIT_SSH_COMMAND", ssh_command(ssh_server, "alice", empty))
    code, out = cli(capsys, "doctor")
    assert code != 0 and "Host key verification failed" in out
    assert "connect once yourself" in out
    assert "Host key verification failed" in cli(capsys, "status")[1]  # the last error
    # An hour later, whoami fetches (a fresh copy it would not).
    Mirror(mirror_path(url), "alice@acme").update_sync_state(last_fetch=time.time() - 3600)
    code, out = cli(capsys, "whoami")
    assert "unreachable: cannot fetch from" in out and "Host key verification failed" in out
    assert "  fix     Your ssh does not know" in out


def test_a_refused_connection_is_named_with_the_fix(
        ssh_server: SshGitServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GIT_SSH_COMMAND", ssh_command(ssh_server, "alice", None))
    url = f"ssh://{ssh_server.login}@127.0.0.1:{closed_port()}/relay.git"

    code, out = cli(capsys, "join", url, "--as", "alice@acme", "--name", "Alice Martin",
                    "--role", "backend")

    assert code != 0
    assert "Connection refused" in out
    assert "Nothing accepts ssh connections at 127.0.0.1" in out


def test_having_no_ssh_key_reads_apart_from_having_the_wrong_one(
        ssh_server: SshGitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """As a new user would: first with no key at all, then with a key the server lacks."""
    import getpass
    import os

    account_ssh = Path(os.path.expanduser(f"~{getpass.getuser()}")) / ".ssh"
    if any(account_ssh.glob("id_*")):
        pytest.skip(f"this account has ssh keys in {account_ssh}, which ssh would offer")
    joining.init_relay(ssh_server.root / "relay.git", name="acme")
    url = ssh_server.url("relay.git", "alice")
    argv = shlex.split(ssh_command(ssh_server, "alice", None))
    i = argv.index("-i")
    without_key = shlex.join(argv[:i] + argv[i + 2:])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("GIT_SSH_COMMAND", without_key)
    join = ("join", url, "--as", "alice@acme", "--name", "Alice Martin", "--role", "backend",
            "--username", "alice")

    code, out = cli(capsys, *join)
    assert code != 0
    assert "You have no ssh key" in out and "ssh-keygen -t ed25519" in out, out

    # A key the server does not have: the other wording.
    stranger = tmp_path / "home" / ".ssh" / "id_ed25519"
    stranger.parent.mkdir(parents=True)
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)],
                   check=True, capture_output=True)
    monkeypatch.setenv("GIT_SSH_COMMAND",
                       shlex.join([*argv[:i], "-i", str(stranger), *argv[i + 2:]]))
    code, out = cli(capsys, *join)
    assert code != 0
    assert "The server refused your ssh key" in out and "You have no ssh key" not in out, out

