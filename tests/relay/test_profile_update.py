"""A teammate corrects their own profile (name, role, server usernames): an operation the
gate checks like any other, and threads keep the names they were written under.

Gate tests push real commits with ``git push`` to relays with the gate installed
(tests/kit/relays.py); the refused forms are also in tests/data/bad_pushes/cases.yaml.
The command-line tests run ``gitrelay`` in-process against a real relay with its gate.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gitrelay.cli.main import EXIT_OK, EXIT_USAGE, main
from gitrelay.core import layout
from gitrelay.relay.client import RelayClient
from tests.kit import (
    ALICE,
    BOB,
    MAIN,
    STAMP,
    RelayTemplates,
    git,
    git_out,
    profile_update_doc,
    public_key,
)

# --- the gate -------------------------------------------------------------------------------


def test_the_gate_takes_a_teammates_own_corrections_numbered_from_one(
        relays: RelayTemplates, tmp_path: Path) -> None:
    bench = relays("default", tmp_path / "relay")
    bench.build("profile_update", profile_update_doc(ALICE, name="Alice Martin-Kim"))
    second = profile_update_doc(ALICE, name="Alice Martin-Kim", role="platform",
                                updated_at="2026-05-02T09:00:00Z")
    bench.build("profile_update", second, path=layout.profile_update_path(ALICE, 2, sharded=True))
    bench.land()
    view = bench.view()
    alice = view.profile(ALICE)
    assert alice is not None
    assert (alice["name"], alice["role"], alice["usernames"]) == (
        "Alice Martin-Kim", "platform", ["alice"])
    assert alice["registered_at"] == STAMP  # the registration is kept as it was
    assert view.profile_updates(ALICE) == 2
    assert git("rev-parse", MAIN, git_dir=bench.relay).stdout.decode().strip() == bench.tip


def test_on_a_relay_that_requires_a_pusher_only_the_teammate_themself_corrects_it(
        relays: RelayTemplates, tmp_path: Path) -> None:
    bench = relays("require_pusher", tmp_path / "relay")
    before = bench.relay_refs()
    bench.build("profile_update", profile_update_doc(ALICE, role="platform"))
    for who in ("bob", ""):  # bob, then nobody the server vouched for
        refused = bench.push_main({"REMOTE_USER": who} if who else {})
        assert refused.rules == ["pusher"], refused.stderr
        assert bench.relay_refs() == before
    assert "actor alice@acme is not the authenticated pusher 'bob'" in bench.push_main(
        {"REMOTE_USER": "bob"}).stderr
    bench.land({"REMOTE_USER": "alice"})
    alice = bench.view().profile(ALICE)
    assert alice is not None and alice["role"] == "platform"


def test_dropping_a_server_username_needs_only_the_teammate_but_adding_one_is_proved(
        relays: RelayTemplates, tmp_path: Path) -> None:
    bench = relays("require_pusher", tmp_path / "relay")
    base = bench.tip
    # Adding "amartin" from alice's listed account proves nothing about amartin.
    bench.build("profile_update", profile_update_doc(ALICE, usernames=["alice", "amartin"]))
    refused = bench.push_main({"REMOTE_USER": "alice"})
    assert refused.rules == ["registration"], refused.stderr
    assert "a server username is added only by a push from that account" in refused.stderr
    # From the amartin account, on a relay without signatures, nothing shows it is alice.
    refused = bench.push_main({"REMOTE_USER": "amartin"})
    assert refused.rules == ["pusher"], refused.stderr
    assert "must be signed by the teammate's registered key" in refused.stderr
    bench.tip = base
    bench.build("profile_update", profile_update_doc(BOB, usernames=["bob", "bchen"]))
    refused = bench.push_main({"REMOTE_USER": "bob"})
    assert refused.rules == ["registration"], refused.stderr
    bench.tip = base
    bench.build("profile_update", profile_update_doc(ALICE, usernames=[]))
    bench.land({"REMOTE_USER": "alice"})
    alice = bench.view().profile(ALICE)
    assert alice is not None and alice["usernames"] == []


def test_on_a_signed_relay_a_new_account_is_added_by_a_signed_push_from_it(
        relays: RelayTemplates, tmp_path: Path) -> None:
    bench = relays("signed", tmp_path / "relay")
    base = bench.tip
    doc = profile_update_doc(ALICE, usernames=["alice", "amartin"])
    bench.build("profile_update", doc, sign=False)
    refused = bench.push_main({"REMOTE_USER": "amartin"})
    assert refused.rules == ["signature"], refused.stderr
    bench.tip = base
    bench.build("profile_update", doc, sign=bench.signers[BOB])  # bob's key is not alice's
    refused = bench.push_main({"REMOTE_USER": "amartin"})
    assert refused.rules == ["signature"], refused.stderr
    bench.tip = base
    bench.build("profile_update", doc)  # signed by alice's registered key
    bench.land({"REMOTE_USER": "amartin"})
    alice = bench.view().profile(ALICE)
    assert alice is not None and alice["usernames"] == ["alice", "amartin"]
    assert alice["signing_keys"] == [public_key(relays.keys[ALICE])]  # keys never change


# --- the command line -----------------------------------------------------------------------


class Person:
    def __init__(self, handle: str, root: Path, mp: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.handle, self.home, self.mp, self.capsys = handle, root / handle, mp, capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.mp.setenv("GITRELAY_HOME", str(self.home))
        self.mp.setenv("GITRELAY_TRUST", str(self.home / "trust.yaml"))
        self.mp.setattr(sys, "stdin", io.StringIO(""))
        self.capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def client(self) -> RelayClient:
        self.mp.setenv("GITRELAY_HOME", str(self.home))
        return RelayClient.from_config(writes="wait")


@pytest.mark.slow
def test_gitrelay_profile_corrects_the_name_teammates_see_and_old_threads_keep_theirs(
        relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    alice, bob = (Person(h, tmp_path, monkeypatch, capsys) for h in (ALICE, BOB))
    for person, name, role in ((alice, "Alice Martin", "backend"), (bob, "Bob Chen", "frontend")):
        code, _, err = person("join", str(relay), "--as", person.handle, "--name", name,
                              "--role", role)
        assert code == EXIT_OK, err
    old = alice.client().handoff(to=BOB, intent="inform", summary="The /users endpoint pages now",
                                 mode="wait").thread_id
    assert old is not None

    code, out, err = alice("profile", "--name", "Alice Martin-Kim", "--role", "platform")
    assert code == EXIT_OK, err
    assert "profile of alice@acme corrected: Alice Martin-Kim (platform)" in out
    assert "delivered to the relay" in out
    subject = git_out(relay, "log", "-1", "--format=%s", "main").strip()
    assert subject == "profile alice@acme (platform): Alice Martin-Kim"

    code, out, err = bob("log", "-n", "1")
    assert code == EXIT_OK, err
    assert "alice@acme corrected their profile: Alice Martin-Kim, platform" in out
    code, out, err = bob("inbox")
    assert code == EXIT_OK, err
    assert "alice@acme" in out and "The /users endpoint pages now" in out
    code, out, err = bob("teammates", "--json")
    assert code == EXIT_OK, err
    shown = {p["handle"]: (p["name"], p["role"]) for p in json.loads(out)}
    assert shown[ALICE] == ("Alice Martin-Kim", "platform")
    code, out, err = alice("profile")
    assert code == EXIT_OK, err
    assert out.startswith("alice@acme: Alice Martin-Kim (platform); server usernames: none")

    code, out, err = bob("show", old, "--keep-unread")
    assert code == EXIT_OK, err
    assert "Alice Martin <alice@acme>" in out and "Martin-Kim" not in out
    new = alice.client().handoff(to=BOB, intent="inform", summary="Second one", mode="wait")
    assert new.thread_id is not None
    code, out, err = bob("show", new.thread_id, "--keep-unread")
    assert code == EXIT_OK, err
    assert "Alice Martin-Kim <alice@acme>" in out


def test_gitrelay_profile_refuses_a_correction_that_changes_nothing_or_empties_a_field(
        relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    alice = Person(ALICE, tmp_path, monkeypatch, capsys)
    code, _, err = alice("join", str(relay), "--as", ALICE, "--name", "Alice Martin",
                         "--role", "backend")
    assert code == EXIT_OK, err
    tip = git("rev-parse", MAIN, git_dir=relay).stdout
    for argv, words in ((["--role", "backend"], "nothing to change"),
                        (["--name", " "], "--name must not be empty"),
                        (["--username", "a", "--username", "a"], "given twice"),
                        (["--username", "two words"], "usernames[0]")):
        code, out, err = alice("profile", *argv)
        assert code == EXIT_USAGE, (argv, out, err)
        assert err.startswith("gitrelay: invalid_argument (") and words in err, err
        assert len(err.strip().splitlines()) == 1
    assert git("rev-parse", MAIN, git_dir=relay).stdout == tip  # nothing was written
    code, _, err = alice("profile", "--signing-key", "k")
    assert code == EXIT_USAGE
