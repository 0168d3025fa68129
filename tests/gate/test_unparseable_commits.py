"""Commits git fsck refuses, and trees deeper than the layout, on every kind of host.

GIVEN a relay made by ``gitrelay init`` (git checks every pushed object) or a
host that checks nothing (no hook, no receive.fsckObjects), WHEN someone with
write access pushes a commit with an unknown header line before its author, or
a directory 3,000 levels deep, THEN git or the gate refuses it where they run,
and where nothing refused it every reader stops at the last valid commit and
names the bad one — no crash, no RecursionError — and ``gitrelay verify`` says
the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gitrelay.core import layout
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.sync.verify import verify_relay
from tests.kit import (
    forge,
    git,
    git_out,
    join_each,
    message_op,
    push,
    ref_of,
    with_deep_tree,
    with_header_line,
)


@dataclass
class Team:
    path: Path
    alice: RelayClient
    bob: RelayClient
    thread_id: str
    valid: str  # the last genuine commit on main
    tmp: Path
    monkeypatch: pytest.MonkeyPatch

    def reader(self, handle: str) -> RelayClient:
        self.monkeypatch.setenv("GITRELAY_HOME", str(self.tmp / handle.split("@")[0]))
        return RelayClient(str(self.path), handle, writes="wait")


def _team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, hook: bool,
          fsck: bool) -> Team:
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", hook=hook)
    if not fsck:  # a host that takes whatever git can store
        git("config", "receive.fsckObjects", "false", git_dir=relay)
    clients = join_each(relay, tmp_path, monkeypatch)
    alice, bob = clients["alice@acme"], clients["bob@acme"]
    alice.refresh(max_age=0)
    handoff = alice.handoff(to="bob@acme", intent="inform", summary="the export job is slow")
    assert handoff.written is not None and handoff.thread_id is not None
    bob.refresh(max_age=0)
    return Team(relay, alice, bob, handoff.thread_id, handoff.written.commit, tmp_path,
                monkeypatch)


def _extra_header(team: Team) -> str:
    """bob's genuine-looking answer with ``x-note hello`` before its author line."""
    genuine = forge(team.bob.mirror, message_op(team.thread_id, "bob@acme", "on it"))
    return with_header_line(team.bob.mirror, genuine, "x-note hello")


def test_gitrelay_init_has_git_check_every_pushed_object(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    team = _team(tmp_path, monkeypatch, hook=False, fsck=True)
    config = git_out(team.path, "config", "--get", "receive.fsckObjects")
    assert config.strip() == "true"
    forged = _extra_header(team)
    result = push(team.bob.mirror.path, str(team.path), forged)
    assert result.returncode != 0
    assert "fsck" in result.stderr or "missingAuthor" in result.stderr, result.stderr
    assert ref_of(team.path) == team.valid


def test_the_gate_refuses_an_unknown_header_line_even_where_git_checks_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = _team(tmp_path, monkeypatch, hook=True, fsck=False)
    forged = _extra_header(team)
    result = push(team.bob.mirror.path, str(team.path), forged)
    assert result.returncode != 0
    assert f"[commit-header] commit {forged[:12]} has 'x-note' where the author belongs" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert ref_of(team.path) == team.valid


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["extra header", "deep tree"])
def test_on_a_host_that_checks_nothing_readers_stop_at_the_last_valid_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attack: str) -> None:
    team = _team(tmp_path, monkeypatch, hook=False, fsck=False)
    if attack == "extra header":
        bad, rule = _extra_header(team), "commit-header"
    else:
        genuine = forge(team.bob.mirror, message_op(team.thread_id, "bob@acme", "on it"))
        bad, rule = with_deep_tree(team.bob.mirror, genuine, 3000), "layout"
    pushed = push(team.bob.mirror.path, str(team.path), bad)
    assert pushed.returncode == 0, pushed.stderr
    if attack == "deep tree":  # something valid-looking on top must not sneak in either
        later = forge(team.bob.mirror, message_op(team.thread_id, "bob@acme", "later"),
                      base=bad)
        assert push(team.bob.mirror.path, str(team.path), later).returncode == 0

    team.alice.refresh(max_age=0)  # a reader who was there before
    fresh = team.reader("carol@acme")  # and one whose first fetch is after it
    fresh.refresh(max_age=0)
    for client in (team.alice, fresh):
        assert client.mirror.relay_main() == team.valid
        thread = client.thread(team.thread_id)
        assert thread.status == "pending" and thread.messages == []
        problem = client.sync.problem()
        assert problem is not None
        assert problem.startswith(f"commit {bad[:12]} breaks rule {rule}:"), problem
        assert f"this client stops at {team.valid[:12]}" in problem

    report = verify_relay(str(team.path))
    assert not report.ok
    assert (report.problems[0].commit, report.problems[0].rule) == (bad, rule), report.text()
    assert report.valid_until == team.valid
    assert f"main is valid up to {team.valid[:12]}" in report.text()


def test_verify_reads_a_relay_whose_tip_does_not_parse(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    team = _team(tmp_path, monkeypatch, hook=False, fsck=False)
    bad = _extra_header(team)
    assert push(team.bob.mirror.path, str(team.path), bad).returncode == 0
    report = verify_relay(str(team.path))
    assert [(p.commit, p.rule) for p in report.problems] == [(bad, "commit-header")]
    assert report.refs[layout.MAIN_REF] == report.checked
