"""Smoke tests of the real git servers (tests/servers): authenticated pushes
reach a bare repository's pre-receive hook with the pusher's identity.

Run .ci/install-servers.sh first; without nginx, fcgiwrap or sshd the server
tests skip, or fail when GITRELAY_REQUIRE_SERVERS=1.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kit import git, ref_of, wait_until
from tests.servers import (
    REQUIRE_ENV,
    SEARCH_PATH_ENV,
    GitServer,
    is_running,
    require_binaries,
)
from tests.servers.conftest_plugin import git_server, ssh_server
from tests.servers.forced_command import Refused, resolve
from tests.servers.http import http_git_server
from tests.servers.ssh import SshGitServer, ssh_git_server

__all__ = ["git_server", "ssh_server"]  # fixtures used below by name

REFUSAL = "relay: mallory may not push to this relay"

HOOK = """\
#!/bin/sh
# pre-receive: record who pushed, refuse mallory.
pusher=$(printenv {var})
printf '%s\\n' "$pusher" >> {log}
cat >/dev/null
if [ "$pusher" = mallory ]; then
    echo {refusal} >&2
    exit 1
fi
exit 0
"""


@dataclass
class Relay:
    server: GitServer
    bare: Path
    hook_log: Path
    tmp: Path

    @property
    def pushers(self) -> list[str]:
        if not self.hook_log.exists():
            return []
        return self.hook_log.read_text().splitlines()

    def url(self, user: str) -> str:
        return self.server.url("relay.git", user)



def new_work_tree(relay: Relay, user: str, name: str) -> Path:
    work = relay.tmp / name
    git("init", "--quiet", "--initial-branch=main", str(work), env=relay.server.client_env(user))
    return work


def commit(work: Path, env: dict[str, str], text: str) -> str:
    (work / "handoff.md").write_text(text)
    git("add", "handoff.md", cwd=work, env=env)
    git("commit", "--quiet", "-m", text, cwd=work, env=env)
    return git("rev-parse", "HEAD", cwd=work, env=env).stdout.decode().strip()


def bare_head(relay: Relay) -> str | None:
    return ref_of(relay.bare, "refs/heads/main")


@pytest.fixture
def relay(git_server: GitServer, tmp_path: Path) -> Relay:
    bare = git_server.init_bare("relay.git")
    hook_log = tmp_path / "pushers.log"
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        HOOK.format(
            var=git_server.pusher_env,
            log=shlex.quote(str(hook_log)),
            refusal=shlex.quote(REFUSAL),
        )
    )
    hook.chmod(0o755)
    return Relay(git_server, bare, hook_log, tmp_path)


# --------------------------------------------------------------------------- real servers


@pytest.mark.servers
def test_alice_push_is_accepted_and_the_hook_sees_alice(relay: Relay) -> None:
    env = relay.server.client_env("alice")
    work = new_work_tree(relay, "alice", "alice")
    head = commit(work, env, "alice hands over the parser")

    pushed = git("push", relay.url("alice"), "HEAD:refs/heads/main", cwd=work, env=env, check=False)

    assert pushed.returncode == 0, pushed.stderr.decode() + relay.server.logs()
    assert relay.pushers == ["alice"]
    assert bare_head(relay) == head


@pytest.mark.servers
def test_mallory_push_is_refused_by_the_hook(relay: Relay) -> None:
    relay.server.add_user("mallory")  # new credentials while the server runs
    env = relay.server.client_env("mallory")
    work = new_work_tree(relay, "mallory", "mallory")
    commit(work, env, "mallory sneaks in")

    pushed = git(
        "push", relay.url("mallory"), "HEAD:refs/heads/main", cwd=work, env=env, check=False
    )

    assert pushed.returncode != 0
    assert REFUSAL in pushed.stderr.decode()
    assert "pre-receive hook declined" in pushed.stderr.decode()
    assert relay.pushers == ["mallory"]
    assert bare_head(relay) is None


@pytest.mark.servers
def test_bad_credentials_are_refused_by_the_server(relay: Relay) -> None:
    url, env = relay.server.bad_credentials("relay.git", "alice")
    work = new_work_tree(relay, "alice", "impostor")
    commit(work, env, "who am I")

    pushed = git("push", url, "HEAD:refs/heads/main", cwd=work, env=env, check=False)
    listed = git("ls-remote", url, env=env, check=False)

    expected = {
        "http": "Authentication failed",
        "ssh": "Permission denied (publickey)",
    }[relay.server.kind]
    for result in (pushed, listed):
        assert result.returncode != 0
        assert expected in result.stderr.decode()
    assert relay.pushers == []  # refused before any git command ran
    assert bare_head(relay) is None


@pytest.mark.servers
def test_clone_and_fetch(relay: Relay) -> None:
    alice_env = relay.server.client_env("alice")
    alice = new_work_tree(relay, "alice", "alice")
    first = commit(alice, alice_env, "first handoff")
    git("push", relay.url("alice"), "HEAD:refs/heads/main", cwd=alice, env=alice_env)

    bob_env = relay.server.client_env("bob")
    bob = relay.tmp / "bob"
    git("clone", "--quiet", relay.url("bob"), str(bob), env=bob_env)
    assert git("rev-parse", "HEAD", cwd=bob, env=bob_env).stdout.decode().strip() == first

    second = commit(alice, alice_env, "second handoff")
    git("push", relay.url("alice"), "HEAD:refs/heads/main", cwd=alice, env=alice_env)
    git("fetch", "--quiet", "origin", cwd=bob, env=bob_env)
    assert git("rev-parse", "origin/main", cwd=bob, env=bob_env).stdout.decode().strip() == second
    assert relay.pushers == ["alice", "alice"]  # fetches do not run pre-receive


@pytest.mark.servers
@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("git-receive-pack '../escape.git'", "repository path not allowed"),
        ("git-upload-pack '/relay.git/../../etc'", "repository path not allowed"),
        ("git-receive-pack '/missing.git'", "no such repository"),
        ("ls -la /", "not an allowed git command"),
        ("git-receive-pack '/relay.git'; id", "not an allowed git command"),
        ("", "interactive login is not allowed"),
    ],
)
def test_ssh_forced_command_refuses(ssh_server: SshGitServer, command: str, reason: str) -> None:
    ssh_server.init_bare("relay.git")
    argv = [*ssh_server.ssh_argv(ssh_server.keys["alice"]), "-T", ssh_server.destination]
    if command:
        argv.append(command)

    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )

    assert result.returncode == 1, result.stderr + ssh_server.logs()
    assert f"gitrelay-ssh: refused: {reason}" in result.stderr
    assert result.stdout == ""


@pytest.mark.servers
def test_teardown_kills_every_server_process(tmp_path: Path) -> None:
    seen: set[int] = set()
    with pytest.raises(RuntimeError, match="test failed"):  # noqa: SIM117
        with http_git_server(tmp_path / "http") as http, ssh_git_server(tmp_path / "ssh") as ssh:
            ssh.init_bare("relay.git")
            # A connection left open: sshd child + forced command -> git-upload-pack.
            client = subprocess.Popen(
                [*ssh.ssh_argv(ssh.keys["alice"]), ssh.destination, "git-upload-pack '/relay.git'"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            assert client.stdout is not None
            client.stdout.read(4)  # the ref advertisement has started
            seen = http.pids() | ssh.pids()
            assert any(_comm(pid) == "git" or _comm(pid) == "git-upload-pack" for pid in seen)
            raise RuntimeError("test failed")
    try:
        client.wait(timeout=10)  # its server went away
    finally:
        assert client.stdin is not None and client.stdout is not None
        client.stdin.close()
        client.stdout.close()
    wait_until(lambda: not any(is_running(pid) for pid in seen), "the servers' processes exit",
               timeout=5, every=0.05)
    assert len(seen) >= 4
    assert [pid for pid in seen if is_running(pid)] == []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------- no servers needed


@pytest.mark.parametrize(
    ("original", "service", "repo"),
    [
        ("git-receive-pack '/relay.git'", "receive-pack", "relay.git"),
        ("git-upload-pack 'relay.git'", "upload-pack", "relay.git"),
        ("git receive-pack '/team/relay.git'", "receive-pack", "team/relay.git"),
        ("git upload-pack '/team/relay.git/'", "upload-pack", "team/relay.git"),
    ],
)
def test_forced_command_accepts(tmp_path: Path, original: str, service: str, repo: str) -> None:
    (tmp_path / repo).mkdir(parents=True)
    assert resolve(original, tmp_path) == (service, str((tmp_path / repo).resolve()))


@pytest.mark.parametrize(
    "original",
    [
        None,
        "",
        "bash",
        "git-upload-archive '/relay.git'",
        "git-receive-pack /relay.git",
        "git-receive-pack '/relay.git' extra",
        "git-receive-pack '../relay.git'",
        "git-receive-pack '/team/../../relay.git'",
        "git-receive-pack '~root/relay.git'",
        "git-receive-pack '/'",
        "git-receive-pack '/escape'",
        "git-receive-pack '/missing.git'",
    ],
)
def test_forced_command_refuses(tmp_path: Path, original: str | None) -> None:
    root = tmp_path / "served"
    (root / "relay.git").mkdir(parents=True)
    (root / "team").mkdir()
    outside = tmp_path / "outside.git"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    with pytest.raises(Refused):
        resolve(original, root)


def test_missing_binary_skips_with_a_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SEARCH_PATH_ENV, str(tmp_path))  # hides every binary
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"nginx not installed; run \.ci/install"):
        require_binaries(["nginx", "fcgiwrap"])
    with pytest.raises(pytest.skip.Exception, match="real-server test skipped: sshd"):  # noqa: SIM117
        with ssh_git_server(tmp_path / "root"):
            pass


def test_missing_binary_fails_when_servers_are_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SEARCH_PATH_ENV, str(tmp_path))
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"fcgiwrap not installed and {REQUIRE_ENV}=1"):
        require_binaries(["fcgiwrap"])
    with pytest.raises(pytest.fail.Exception, match="nginx not installed"):  # noqa: SIM117
        with http_git_server(tmp_path / "root"):
            pass
