"""docs/deploying.md's ssh recipe, run as sshd runs it for an account whose login
shell is git-shell.

sshd runs a key's forced command through the account's shell: ``git-shell -c
'<forced command>'`` in the account's home, with the client's request in
SSH_ORIGINAL_COMMAND. GIVEN the ``gitrelay-as`` script and the authorized_keys
lines copied from the docs, and a stand-in for ssh that does exactly that, WHEN
teammates join and write through git, THEN the gate knows who pushed, a key cannot
claim another teammate, and the one-line forced command fails as the docs say.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from gitrelay.core.errors import RelayError
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient

DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "deploying.md"
GIT_SHELL = shutil.which("git-shell")
pytestmark = pytest.mark.skipif(GIT_SHELL is None, reason="git-shell is not installed")

# What sshd does for a key whose authorized_keys line has command="$FORCED", on an
# account whose login shell is git-shell; git calls it as `ssh HOST 'COMMAND'`.
FAKE_SSH = """#!/bin/sh
for request; do :; done
cd "$ACCOUNT_HOME" || exit 1
exec env -i HOME="$ACCOUNT_HOME" PATH="$PATH" SSH_ORIGINAL_COMMAND="$request" \\
    "$GIT_SHELL" -c "$FORCED"
"""


def recipe() -> tuple[str, dict[str, str]]:
    """The gitrelay-as script and each teammate's forced command, from the docs."""
    text = DOCS.read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    script = next(b for b in blocks
                  if any("git-shell-commands/gitrelay-as" in ln for ln in b.splitlines()[1:2]))
    forced = dict(re.findall(r'^command="(gitrelay-as (\w+))",no-pty', text, re.M))
    return script, {user: command for command, user in forced.items()}


@pytest.fixture
def account(tmp_path: Path) -> Path:
    """The git account's home: the repositories and git-shell-commands/gitrelay-as."""
    home = tmp_path / "srv-git"
    commands = home / "git-shell-commands"
    commands.mkdir(parents=True)
    script, _ = recipe()
    (commands / "gitrelay-as").write_text(script)
    (commands / "gitrelay-as").chmod(0o755)
    joining.init_relay(home / "acme-relay.git", name="acme", require_pusher=True)
    fake = tmp_path / "bin" / "ssh-as-sshd"
    fake.parent.mkdir()
    fake.write_text(FAKE_SSH)
    fake.chmod(0o755)
    return home


def ssh_env(account: Path, forced: str) -> dict[str, str]:
    return {"GIT_SSH_COMMAND": str(account.parent / "bin" / "ssh-as-sshd"),
            "GIT_SSH_VARIANT": "simple", "ACCOUNT_HOME": str(account),
            "GIT_SHELL": str(GIT_SHELL), "FORCED": forced}


def url(account: Path) -> str:
    return f"ssh://git@relay.acme.test{account / 'acme-relay.git'}"


@pytest.mark.slow
def test_the_docs_recipe_names_the_pusher_through_git_shell(
        account: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, forced = recipe()
    assert forced == {"alice": "gitrelay-as alice", "bob": "gitrelay-as bob"}
    clients = {}
    for user in ("alice", "bob"):
        monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / f"home-{user}"))
        env = ssh_env(account, forced[user])
        joining.join(url(account), f"{user}@acme", name=user.title(), role="engineer",
                   usernames=[user], env=env, save=False)
        clients[user] = RelayClient(url(account), f"{user}@acme", writes="wait", env=env)
    sent = clients["alice"].handoff(to="bob@acme", intent="inform", summary="Hello over ssh")
    assert sent.delivery == "delivered"

    # bob's key, a server username nobody holds yet: the gate sees bob
    # (GITRELAY_SSH_USER from the script) and refuses the claim. (A username someone holds
    # already, alice's, is refused by join itself before anything is pushed.)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "home-bob-as-carol"))
    with pytest.raises(RelayError) as err:
        joining.join(url(account), "carol@acme", name="Carol", role="engineer",
                   usernames=["carol"], env=ssh_env(account, forced["bob"]), save=False)
    assert err.value.data.get("rule") in ("pusher", "registration")


def test_the_script_runs_nothing_but_push_and_fetch(account: Path) -> None:
    env = dict(os.environ, **ssh_env(account, "gitrelay-as alice"))
    fake = env["GIT_SSH_COMMAND"]
    for request in ("gitrelay-as bob", "sh -c id", "", "git-upload-archive '/etc'"):
        proc = subprocess.run([fake, "relay.acme.test", request], env=env,
                              capture_output=True, text=True, timeout=30, check=False)
        assert proc.returncode != 0
        assert "gitrelay-as: only git push and fetch are allowed" in proc.stderr, proc.stderr
    bad_name = dict(env, FORCED="gitrelay-as '-x'")
    proc = subprocess.run([fake, "relay.acme.test", "git-upload-pack '/x'"], env=bad_name,
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode != 0 and "bad user name" in proc.stderr


def test_the_one_line_forced_command_fails_under_git_shell_as_the_docs_say(
        account: Path) -> None:
    one_liner = 'GITRELAY_SSH_USER=alice exec git-shell -c "$SSH_ORIGINAL_COMMAND"'
    env = dict(os.environ, **ssh_env(account, one_liner))
    proc = subprocess.run([env["GIT_SSH_COMMAND"], "relay.acme.test",
                           shlex.join(["git-upload-pack", str(account / "acme-relay.git")])],
                          env=env, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode != 0 and "fatal: unrecognized command" in proc.stderr
