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
from gitrelay.core.errors import InvalidArgument, RelayUnavailable
from gitrelay.relay import admin
from gitrelay.store.config import mirror_path
from gitrelay.sync.verify import verify_relay
from tests.forging import forge, handoff_op, profile_op
from tests.hookless import OpenRelay, make_open_relay


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

    report = verify_relay(str(r.path), expect_tip=genuine[:12])

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
        admin.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
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

    cfg = admin.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
                     expect_tip=parent[:10], save=False)

    assert cfg.handle == "carol@acme"
    with pytest.raises(InvalidArgument, match="is not a commit id"):
        admin.join(str(r.path), "carol@acme", name="Carol Diaz", role="platform",
                   expect_tip="main~3")
