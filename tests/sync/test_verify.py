"""``gitrelay verify``: the gate's rules over a relay's whole history.

Relays here are real bare repositories; forged histories are pushed with
`git push` after the gate was removed (as on a host that runs no hooks).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitrelay.cli.main import main as cli_main
from gitrelay.core import layout
from gitrelay.core.errors import ConfigError, InvalidArgument, RelayUnavailable
from gitrelay.store.config import UserConfig, default_relay_path, save_user_config
from gitrelay.sync import verify
from gitrelay.sync.verify import verify_relay
from tests.kit import ALICE, BOB, CAROL, MAIN, Bench, git, inbox_doc, message_doc, standard_bench


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield standard_bench(tmp_path_factory.mktemp("verify") / "template")


@pytest.fixture
def bench(template: Bench, tmp_path: Path) -> Bench:
    return template.copy(tmp_path / "relay")


def ungated(bench: Bench) -> Bench:
    """The relay as a host without hooks keeps it: no gate, no git guards."""
    os.remove(bench.relay / "hooks" / "pre-receive")
    bench.without_git_guards()
    return bench


def test_a_valid_relay_passes_and_every_commit_is_counted(bench: Bench) -> None:
    report = verify_relay(str(bench.relay))
    assert report.ok
    assert report.refs == {MAIN: bench.seq() + 1, layout.inbox_ref(ALICE): 2}
    assert report.checked == bench.seq() + 1 + 2
    assert report.valid_until == bench.tip
    assert report.text().splitlines()[-2:] == [
        f"OK: {report.checked} commits on 2 refs follow the relay's rules.",
        f"main is at {bench.tip} (what --expect-tip pins)"]


def test_every_forged_commit_is_reported_with_its_rule_and_where_main_stops_being_valid(
        bench: Bench) -> None:
    ungated(bench)
    pending, bc = bench.threads["pending"], bench.threads["bc"]
    last_good = bench.tip
    forged = bench.build("message", message_doc(pending, 3, BOB),
                         trailers={layout.TRAILER_ACTOR: ALICE})
    bench.message(bc, CAROL)  # valid on top of the forgery
    outsider = bench.message(pending, CAROL)
    assert bench.push_main().accepted  # nothing refuses it: there is no gate
    report = verify_relay(str(bench.relay))
    assert not report.ok
    assert [(p.commit, p.rule) for p in report.problems] == [
        (forged, "actor"), (outsider, "not_a_participant")]
    assert report.valid_until == last_good
    text = report.text()
    assert f"refs/heads/main at {forged[:12]}: [actor]" in text
    assert f"main is valid up to {last_good[:12]}" in text


def test_refs_outside_the_namespaces_are_reported_and_host_refs_skipped(bench: Bench) -> None:
    ungated(bench)
    for ref in ("refs/tags/v1", "refs/heads/wip", "refs/pull/7/head"):
        git("update-ref", ref, bench.tip, git_dir=bench.relay)
    report = verify_relay(str(bench.relay))
    assert sorted(p.ref for p in report.problems) == ["refs/heads/wip", "refs/tags/v1"]
    assert {p.rule for p in report.problems} == {"ref-namespace"}
    assert "refs/pull/7/head" not in report.refs


def test_an_inbox_ref_is_checked_against_main(bench: Bench) -> None:
    ungated(bench)
    ref = layout.inbox_ref(BOB)
    oid = bench.inbox_commit(BOB, inbox_doc(BOB, bench.seq() + 5))
    assert bench.push(f"{oid}:{ref}").accepted
    (problem,) = verify_relay(str(bench.relay)).problems
    assert (problem.ref, problem.commit, problem.rule) == (ref, oid, "cursor")


def test_a_relay_without_main_is_a_problem(bench: Bench) -> None:
    ungated(bench)
    bench.set_config("receive.denyDeleteCurrent", "ignore")
    assert bench.push(f":{MAIN}").accepted
    report = verify_relay(str(bench.relay))
    assert [p.rule for p in report.problems] == ["layout"]
    assert "no refs/heads/main" in report.problems[0].message


def test_a_url_is_cloned_into_a_temporary_directory_that_is_removed(
        bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    report = verify_relay(f"file://{bench.relay}")
    assert report.ok
    assert report.checked == bench.seq() + 1 + 2
    assert list(scratch.iterdir()) == []


def test_without_an_argument_the_configured_relay_is_checked(bench: Bench) -> None:
    save_user_config(UserConfig(relay=str(bench.relay), handle=ALICE))
    report = verify_relay(None)
    assert report.relay == str(bench.relay)
    assert report.ok


def test_without_an_argument_or_a_config_the_default_relay_is_checked_if_it_exists() -> None:
    with pytest.raises(ConfigError):
        verify_relay(None)
    from gitrelay.relay.joining import init_relay

    init_relay(default_relay_path(), name="local")
    assert verify_relay(None).relay == str(default_relay_path())


def test_what_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RelayUnavailable, match="no relay at"):
        verify_relay(str(tmp_path / "nowhere.git"))
    with pytest.raises(RelayUnavailable, match="cannot clone"):
        verify_relay(f"file://{tmp_path}/nowhere.git")
    (tmp_path / "plain").mkdir()
    with pytest.raises(RelayUnavailable, match="not a git repository"):
        verify_relay(str(tmp_path / "plain"))
    with pytest.raises(InvalidArgument):
        verify_relay("--upload-pack=touch pwned")


def test_a_long_report_is_truncated(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "MAX_PROBLEMS", 2)
    for n in range(4):
        git("update-ref", f"refs/tags/t{n}", bench.tip, git_dir=bench.relay)
    report = verify_relay(str(bench.relay))
    assert len(report.problems) == 2 and report.truncated
    assert "PROBLEMS: 2+" in report.text()


def test_the_command_exits_3_with_the_report_when_a_rule_is_broken(
        bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["verify", str(bench.relay)]) == 0
    assert "OK:" in capsys.readouterr().out
    git("update-ref", "refs/tags/v1", bench.tip, git_dir=bench.relay)
    assert cli_main(["verify", str(bench.relay)]) == 3
    assert "[ref-namespace] refs/tags/v1" in capsys.readouterr().out


def test_the_installed_command_verifies_as_a_new_user_would(bench: Bench) -> None:
    """`gitrelay verify RELAY` in a fresh process, as a new user would run it."""
    ungated(bench)
    forged = bench.build("message", message_doc(bench.threads["pending"], 3, CAROL))
    assert bench.push_main().accepted
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "verify", str(bench.relay)],
                          capture_output=True, text=True, check=False, timeout=60,
                          env=dict(os.environ))
    assert proc.returncode == 3, proc.stderr
    assert f"at {forged[:12]}: [not_a_participant]" in proc.stdout
