"""What a new team runs into in its first hour, answered with the right error and the
next step: a closed thread is thread_terminal (not a lost race), completing before
accepting says to accept, a mistyped recipient gets the near handle.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gitrelay.cli.main import main as cli_main
from gitrelay.cli.wording import next_step_text as person_wording
from gitrelay.core.errors import (
    ConfigError,
    InvalidTransition,
    NextStep,
    RecipientNotFound,
    RelayUnavailable,
    ThreadTerminal,
)
from gitrelay.core.gitcli import git_failure
from gitrelay.mcp.wording import next_step_text as agent_wording
from gitrelay.relay.client import RelayClient
from gitrelay.trust.trust import load_trust
from tests.kit import git


@pytest.mark.slow
def test_a_message_on_a_thread_you_completed_yourself_is_thread_terminal(
        team: dict[str, RelayClient]) -> None:
    alice, bob, carol = team["alice"], team["bob"], team["carol"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Rotate the keys").thread_id
    assert tid is not None
    bob.refresh(max_age=0)
    bob.accept(tid, session_id="s1")
    bob.complete(tid, result_summary="Rotated.")
    # The relay moves on meanwhile (someone else's work): bob's copy is behind.
    carol.handoff(to="alice@acme", intent="inform", summary="Unrelated")

    with pytest.raises(ThreadTerminal) as err:
        bob.send_message(tid, "One more thing")

    assert err.value.code == -32007
    assert "completed" in err.value.message


@pytest.mark.slow
def test_completing_a_pending_thread_says_to_accept_it_first(
        team: dict[str, RelayClient]) -> None:
    alice, bob = team["alice"], team["bob"]
    tid = alice.handoff(to="bob@acme", intent="inform", summary="Bump the parser").thread_id
    assert tid is not None
    bob.refresh(max_age=0)

    with pytest.raises(InvalidTransition) as err:
        bob.complete(tid, result_summary="Done")

    assert "it is pending, and complete needs accepted" in err.value.message
    assert err.value.next_step is NextStep.ACCEPT_FIRST
    # Each front end words it for its audience: a tool for an agent, a command for a person.
    assert agent_wording(err.value).startswith("Accept it first (accept_handoff)")
    assert person_wording(err.value).startswith(f"Accept it first with `gitrelay accept {tid[:6]}`")


@pytest.mark.slow
def test_a_mistyped_recipient_gets_the_nearest_registered_handle(
        team: dict[str, RelayClient]) -> None:
    alice = team["alice"]
    for typo in ("bbo@acme", "Bob@acme.com", "carl@acme"):
        with pytest.raises(RecipientNotFound) as err:
            alice.handoff(to=typo, intent="inform", summary="hi")
        want = "carol@acme" if typo.startswith("car") else "bob@acme"
        assert person_wording(err.value).startswith(f"Did you mean {want}?"), err.value
        assert err.value.data["did_you_mean"] == want
    with pytest.raises(RecipientNotFound) as err:
        alice.handoff(to="zoe@initech", intent="inform", summary="hi")
    assert "Did you mean" not in person_wording(err.value)


def test_a_mistyped_trust_file_key_gets_the_key_it_meant(tmp_path) -> None:
    path = tmp_path / "trust.yaml"
    path.write_text("version: 1\nteamates:\n  bob@acme: {auto_tset: true}\n")
    with pytest.raises(ConfigError) as err:
        load_trust(path)
    assert "teamates: unknown key 'teamates'; did you mean teammates?" in err.value.message
    assert "Extra inputs are not permitted" not in err.value.message
    assert person_wording(err.value).startswith("Rename the key to teammates")
    path.write_text("version: 1\nteammates:\n  bob@acme: {auto_tset: true}\n")
    with pytest.raises(ConfigError) as err:
        load_trust(path)
    assert "unknown key 'auto_tset'; did you mean auto_test?" in err.value.message


# What ssh prints when it does not know the host's key (BatchMode=yes), and git after it.
HOST_KEY_FAILURE = ("No ED25519 host key is known for [git.acme.dev]:2222 and you have "
                    "requested strict checking.\nHost key verification failed.\n"
                    "fatal: Could not read from remote repository.\n")


@pytest.mark.parametrize(("url", "command"), [
    ("ssh://git@git.acme.dev:2222/acme/relay.git", "ssh -p 2222 git@git.acme.dev"),
    ("git@git.acme.dev:acme/relay.git", "ssh git@git.acme.dev"),
    ("ssh://git.acme.dev/relay.git", "ssh git.acme.dev"),
])
def test_the_host_key_fix_is_the_exact_ssh_command_for_the_relay(url: str, command: str
                                                                 ) -> None:
    reason, ssh = git_failure(HOST_KEY_FAILURE, url)
    fix = person_wording(RelayUnavailable(reason, next_step=NextStep.FIX_SSH, **ssh))
    assert reason.startswith("Host key verification failed")
    assert f"connect once yourself with `{command}`" in fix
    assert "PORT" not in fix and "USER@HOST" not in fix


def test_a_repository_that_is_not_a_relay_says_so_in_plain_words(tmp_path, monkeypatch,
                                                                  capsys) -> None:
    repo = tmp_path / "notes.git"
    work = tmp_path / "work"
    run = [("init", "-q", "--bare", "-b", "main", str(repo)),
           ("init", "-q", "-b", "main", str(work)),
           ("-C", str(work), "commit", "-q", "--allow-empty", "-m", "notes"),
           ("-C", str(work), "push", "-q", str(repo), "main")]
    for args in run:
        git(*args)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "home"))
    code = cli_main(["join", str(repo), "--as", "dana@acme", "--name", "Dana", "--role", "qa"])
    err = capsys.readouterr().err
    assert code != 0
    assert "stops at nothing" not in err
    assert "not a valid gitrelay relay" in err and "not one of its commits can be used" in err


def test_doctors_ssh_fix_reads_as_one_sentence(tmp_path, monkeypatch, capsys) -> None:
    """The fix doctor prints for an ssh failure is ssh's fix then "until then…", without
    a full stop in between (it read "….; until then")."""
    from gitrelay.relay import joining

    relay = joining.init_relay(tmp_path / "relay.git", name="acme")
    url = f"ssh://git@127.0.0.1:2222{relay}"
    # ssh to this machine, as the git account would run it: the remote command, here.
    local = tmp_path / "ssh-here"
    local.write_text('#!/bin/sh\nwhile [ $# -gt 1 ]; do shift; done\nexec sh -c "$1"\n')
    unknown = tmp_path / "ssh-unknown-host"
    unknown.write_text("#!/bin/sh\necho 'Host key verification failed.' >&2\nexit 255\n")
    for script in (local, unknown):
        script.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_VARIANT", "ssh")
    monkeypatch.setenv("GIT_SSH_COMMAND", str(local))
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "home"))
    assert cli_main(["join", url, "--as", "dana@acme", "--name", "D", "--role", "qa"]) == 0
    monkeypatch.setenv("GIT_SSH_COMMAND", str(unknown))
    capsys.readouterr()
    cli_main(["doctor"])
    out = capsys.readouterr().out
    assert "connect once yourself with `ssh -p 2222 git@127.0.0.1`" in out, out
    assert "then run the command again; until then your local copy is used" in out, out


@pytest.mark.slow
def test_make_test_ends_with_one_verdict_line(tmp_path) -> None:
    """The runner `make test` uses: the last line counts the tests and the time, and a
    failing test makes it fail (run here on two small test files of its own)."""
    (tmp_path / "test_ok.py").write_text("import pytest\n\ndef test_ok():\n    pass\n\n"
                                         "@pytest.mark.skip(reason='shown as skipped')\n"
                                         "def test_later():\n    pass\n")
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2\n")
    base = [sys.executable, "-m", "tests.maketest", "--skip", "lint", "--skip", "typecheck",
            "--skip", "bench", "--pytest-args"]
    root = Path(__file__).resolve().parent.parent.parent
    ok = subprocess.run([*base, f"-p no:cacheprovider --rootdir {tmp_path} "
                         f"{tmp_path / 'test_ok.py'}"], capture_output=True, text=True,
                        cwd=root, check=False, timeout=300)
    last = ok.stdout.rstrip().splitlines()[-1]
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.fullmatch(r"make test: 1 passed, 0 failed, 1 skipped in \d+ s", last), last
    bad = subprocess.run([*base, f"-p no:cacheprovider --rootdir {tmp_path} {tmp_path}"],
                         capture_output=True, text=True, cwd=root, check=False, timeout=300)
    last = bad.stdout.rstrip().splitlines()[-1]
    assert bad.returncode == 1
    assert re.fullmatch(r"make test: 1 passed, 1 failed, 1 skipped in \d+ s", last), last


@pytest.mark.slow
def test_the_verdict_says_how_many_real_host_tests_were_skipped_and_what_runs_them(
        tmp_path) -> None:
    """Without the hosts in .hosts/, the real-host tests skip (tests/kit/hosts.py), and the
    verdict line counts them and gives the one command that runs them."""
    (tmp_path / "test_hosts.py").write_text(
        "from tests.kit import need_host\n\n"
        "def test_with_claude():\n    need_host('claude')\n\n"
        "def test_with_codex():\n    need_host('codex')\n\n"
        "def test_plain():\n    pass\n")
    root = Path(__file__).resolve().parent.parent.parent
    env = {**os.environ, "GITRELAY_HOSTS_DIR": str(tmp_path / "no-hosts")}
    for name in ("GITRELAY_REQUIRE_HOSTS", "GITRELAY_REQUIRE_SERVERS"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-m", "tests.maketest", "--skip", "lint", "--skip",
                          "typecheck", "--skip", "bench", "--pytest-args",
                          f"-p no:cacheprovider --rootdir {tmp_path} "
                          f"{tmp_path / 'test_hosts.py'}"], capture_output=True, text=True,
                         cwd=root, env=env, check=False, timeout=300)
    last = out.stdout.rstrip().splitlines()[-1]
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.fullmatch(r"make test: 1 passed, 0 failed, 2 skipped in \d+ s \(2 real-host "
                        r"tests skipped: the hosts are not installed; "
                        r"`\.ci/install-node\.sh && make test` runs them\)", last), last


def test_the_makefile_runs_the_verdict_runner_and_tests_leave_no_mass_cleanup() -> None:
    root = Path(__file__).resolve().parent.parent.parent
    makefile = (root / "Makefile").read_text()
    recipe = makefile.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    assert "-m tests.maketest" in recipe
    pyproject = (root / "pyproject.toml").read_text()
    assert 'tmp_path_retention_policy = "failed"' in pyproject


DOCS = Path(__file__).resolve().parent.parent.parent / "docs"


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_deployings_ssh_steps_run_as_written(tmp_path) -> None:
    """The account's script steps, in page order, for a `git` account whose home is a
    temporary folder: make the directory, save the script, make it executable."""
    home = tmp_path / "srv-git"
    home.mkdir()
    blocks = _sh_blocks((DOCS / "deploying.md").read_text())
    start = next(i for i, b in enumerate(blocks) if "mkdir" in b and "git-shell-commands" in b)
    steps = blocks[start:start + 3]
    assert "#!/bin/sh" in steps[1] and "git-shell-commands/gitrelay-as" in steps[1]
    for n, block in enumerate(steps):
        if n == 1:   # the script, saved where the page says
            (home / "git-shell-commands" / "gitrelay-as").write_text(block)
            continue
        command = block.replace("sudo -u git ", "").replace("~git", str(home))
        ran = subprocess.run(["sh", "-e", "-c", command], capture_output=True, text=True,
                             check=False)
        assert ran.returncode == 0, (command, ran.stderr)
    assert (home / "git-shell-commands" / "gitrelay-as").stat().st_mode & 0o777 == 0o755


def test_getting_started_stands_on_its_own() -> None:
    page = (DOCS / "getting-started.md").read_text()
    assert "python3-venv" in page and "macOS" in page
    assert "steps 1–3" not in page and "steps 1-3" not in page
    # The ssh host's script is the one deploying.md's page (and its test) runs.
    script = next(b for b in _sh_blocks(page) if b.startswith("#!/bin/sh"))
    deploying = next(b for b in _sh_blocks((DOCS / "deploying.md").read_text())
                     if b.startswith("#!/bin/sh"))
    body = [ln for ln in deploying.splitlines() if not ln.startswith("#")]
    assert [ln for ln in script.splitlines() if not ln.startswith("#")] == body
    assert 'command="gitrelay-as alice"' in page and "usermod -p '*' git" in page
