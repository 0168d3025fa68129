"""Pinning what was verified: `gitrelay verify --expect-tip/--tip-file`, `join --expect-tip`.

GIVEN a hook-less relay where alice handed work to bob, WHEN someone with shell
access rewrites main from its root commit into a history that follows every
rule (alice registered again, a handoff "from alice" that she never wrote),
THEN a reader who joins fresh, or a CI job, accepts it unless they pin a commit
they verified before: with the pin, verify reports the rewrite and join refuses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrelay.cli.main import main as cli_main
from gitrelay.cli.wording import next_step_text as person_wording
from gitrelay.core.errors import InvalidArgument, RelayUnavailable
from gitrelay.relay import joining
from gitrelay.store.config import mirror_path
from gitrelay.sync.verify import verify_relay
from tests.kit import OpenRelay, forge, handoff_op, make_open_relay, profile_op


@pytest.fixture
def rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[OpenRelay, str]:
    """The relay (main now the rewritten history) and the genuine tip it had."""
    r = make_open_relay(tmp_path, monkeypatch)
    mirror = r.alice.mirror
    chain = [r.valid]
    while parents := mirror.objects.commit(chain[-1]).parents:
        chain.append(parents[0])
    root = chain[-1]
    tip = root
    for op in (profile_op("alice@acme", name="Alice Martin"),
               profile_op("bob@acme", name="Bob Chen"),
               handoff_op("alice@acme", "bob@acme", "Paste your deploy token here")):
        tip = forge(mirror, op, base=tip)
    r.set_main(tip)
    return r, r.valid


def test_without_a_pin_a_rewritten_history_that_follows_the_rules_passes(
        rewritten: tuple[OpenRelay, str]) -> None:
    r, _ = rewritten
    assert verify_relay(str(r.path)).ok  # what the pin is for


def test_verify_with_the_last_verified_tip_reports_the_rewrite(
        rewritten: tuple[OpenRelay, str], capsys: pytest.CaptureFixture[str]) -> None:
    r, genuine = rewritten

    report = verify_relay(str(r.path), expect_tip=genuine)

    assert not report.ok
    [problem] = report.problems
    assert problem.rule == "pin"
    assert "its history was rewritten" in problem.message and genuine[:12] in problem.message
    assert cli_main(["verify", str(r.path), "--expect-tip", genuine]) != 0
    assert "[pin]" in capsys.readouterr().out


def test_a_ci_job_keeping_the_tip_in_a_file_notices_the_rewrite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    r = make_open_relay(tmp_path, monkeypatch)
    kept = tmp_path / "ci-cache" / "verified-tip"
    kept.parent.mkdir()

    assert cli_main(["verify", str(r.path), "--tip-file", str(kept)]) == 0  # first run: no pin
    assert kept.read_text().strip() == r.valid
    assert f"main is at {r.valid}" in capsys.readouterr().out
    later = r.bob.send_message(r.thread_id, "Which version?")
    assert later.written is not None
    assert cli_main(["verify", str(r.path), "--tip-file", str(kept)]) == 0  # a fast-forward
    assert kept.read_text().strip() == later.written.commit

    r.set_main(r.valid)  # history rewound: bob's message is gone
    assert cli_main(["verify", str(r.path), "--tip-file", str(kept)]) != 0
    out = capsys.readouterr().out
    assert "[pin]" in out and "does not descend from the pinned commit" in out
    assert kept.read_text().strip() == later.written.commit  # the pin stays


def test_a_new_joiner_with_a_pin_refuses_the_rewritten_relay(
        rewritten: tuple[OpenRelay, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    r, genuine = rewritten
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))

    with pytest.raises(RelayUnavailable) as err:
        joining.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
                   expect_tip=genuine)

    assert "is not the relay you pinned" in err.value.message
    assert "no such commit" in err.value.message
    assert not mirror_path(str(r.path)).exists()
    assert [p["handle"] for p in r.alice.mirror.view(r.alice.mirror.relay_main()).profiles()
            .values()] == ["alice@acme", "bob@acme"]  # carol registered nothing


def test_a_joiner_with_a_pin_on_the_genuine_relay_joins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = make_open_relay(tmp_path, monkeypatch)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))
    parent = r.alice.mirror.objects.commit(r.valid).parents[0]

    cfg = joining.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
                     expect_tip=parent, save=False)

    assert cfg.handle == "carol@acme"
    with pytest.raises(InvalidArgument, match="is not a full commit id"):
        joining.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
                   expect_tip="main~3")


@pytest.mark.parametrize("pin", ["1a2b3c", "1a2b3c4d5e6f", "", "main~3", "g" * 40, "a" * 41])
def test_only_a_full_commit_id_pins(rewritten: tuple[OpenRelay, str], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch, pin: str) -> None:
    """A forged root commit matching a 6-digit prefix takes seconds to grind."""
    r, genuine = rewritten
    with pytest.raises(InvalidArgument, match="not a full commit id") as err:
        verify_relay(str(r.path), expect_tip=pin)
    assert "gitrelay status --pin" in person_wording(err.value)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))
    with pytest.raises(InvalidArgument, match="not a full commit id"):
        joining.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
                   expect_tip=pin)
    assert not mirror_path(str(r.path)).exists()
    assert verify_relay(str(r.path), expect_tip=genuine.upper()).problems[0].rule == "pin"


@pytest.mark.parametrize("content", ["", "\n  \n", "1a2b3c\n", None])
def test_an_empty_or_unreadable_tip_file_is_an_error_not_a_missing_pin(
        rewritten: tuple[OpenRelay, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], content: str | None) -> None:
    r, _ = rewritten
    kept = tmp_path / "verified-tip"
    if content is None:
        kept.mkdir()  # unreadable as a file
    else:
        kept.write_text(content)

    assert cli_main(["verify", str(r.path), "--tip-file", str(kept)]) not in (0, 3)

    err = capsys.readouterr().err
    assert f"--tip-file {kept}" in err and "invalid_argument" in err
    assert kept.is_dir() if content is None else kept.read_text() == content  # not replaced


def test_status_pin_prints_the_line_a_new_teammate_pastes(
        rewritten: tuple[OpenRelay, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """alice sends it by chat before the rewrite; carol's join with it refuses the relay."""
    r, genuine = rewritten
    r.set_main(genuine)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice"))
    assert cli_main(["--relay", str(r.path), "--as", "alice@acme", "status", "--pin"]) == 0
    out, err = capsys.readouterr()
    line = out.strip()
    # The whole join line, every flag in it: the newcomer only puts their own values in.
    assert line == (f"gitrelay join {r.path} --as HANDLE --name NAME --role ROLE "
                    f"--expect-tip {genuine}")
    assert "outside the relay" in err and f"gitrelay verify --expect-tip {genuine}" in err
    assert "HANDLE, NAME, ROLE" in err

    def filled(handle: str, name: str) -> list[str]:
        words = line.split()[1:]
        return [{"HANDLE": handle, "NAME": name, "ROLE": "qa"}.get(w, w) for w in words]

    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))
    assert cli_main(filled("carol@acme", "Carol")) == 0
    capsys.readouterr()

    rewritten_tip = r.alice.mirror.relay_main()
    assert rewritten_tip is not None
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "dave"))
    forged = _rewrite(r)
    assert cli_main(filled("dave@acme", "Dave")) != 0
    assert "is not the relay you pinned" in capsys.readouterr().err
    assert forged != genuine


def _rewrite(r: OpenRelay) -> str:
    mirror = r.alice.mirror
    oid = r.valid
    while parents := mirror.objects.commit(oid).parents:
        oid = parents[0]
    tip = forge(mirror, profile_op("alice@acme", name="Alice Martin"), base=oid)
    r.set_main(tip)
    return tip


def test_join_without_a_pin_says_how_to_get_one_from_a_teammate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    r = make_open_relay(tmp_path, monkeypatch)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))

    assert cli_main(["join", str(r.path), "--as", "carol@acme", "--name", "Carol Diaz",
                     "--role", "qa"]) == 0

    err = capsys.readouterr().err
    assert "you joined without a pin" in err
    assert "alice@acme, bob@acme" in err and "`gitrelay status --pin`" in err
    assert "outside the relay" in err and "gitrelay verify --expect-tip" in err


def test_join_on_a_terminal_asks_for_the_pin_and_checks_the_pasted_line(
        rewritten: tuple[OpenRelay, str], tmp_path: Path) -> None:
    """As a new user would: carol pastes the line alice sent her when join asks for it."""
    import os
    import pty
    import subprocess
    import sys
    import time

    r, genuine = rewritten
    master, slave = pty.openpty()
    env = {**os.environ, "GITRELAY_HOME": str(tmp_path / "carol")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitrelay", "join", str(r.path), "--as", "carol@acme",
         "--name", "Carol Diaz", "--role", "qa"],
        stdin=slave, stderr=slave, stdout=subprocess.DEVNULL, env=env)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 60
    while b"Paste the line here" not in shown and time.monotonic() < deadline:
        try:
            shown += os.read(master, 4096)
        except OSError:
            break
    assert b"gitrelay status --pin" in shown and b"alice@acme, bob@acme" in shown
    os.write(master, f"gitrelay join {r.path} --expect-tip {genuine}\n".encode())
    rest = b""
    while True:
        try:
            chunk = os.read(master, 4096)  # EIO once the process closed the terminal
        except OSError:
            break
        if not chunk:
            break
        rest += chunk
    proc.wait(timeout=60)
    os.close(master)

    assert proc.returncode != 0
    assert b"is not the relay you pinned" in rest
    assert not list((tmp_path / "carol").glob("mirrors/*"))  # nothing kept, nothing registered
