"""A write to a relay on a local path whose gate is this gitrelay's is checked and applied
in process (sync/localrelay.py): no git is started, the gate's rules refuse what its hook
would refuse, with the same words, and a relay that anything else runs on gets git."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gitrelay.core import layout
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.store.gitstore import Store
from gitrelay.sync import localrelay
from gitrelay.sync.push import Syncer
from tests.kit import git_out, wait_until


def _objects(relay: Path) -> set[str]:
    return set(git_out(relay, "cat-file", "--batch-all-objects",
                       "--batch-check=%(objectname)").split())


def _pushes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The ``git push`` commands the syncers run from now on."""
    seen: list[tuple[str, ...]] = []
    git = Syncer._git

    def recorded(self: Syncer, *args: str, timeout: float = 120.0) -> tuple[int, str, str]:
        if args and args[0] == "push":
            seen.append(args)
        return git(self, *args, timeout=timeout)

    monkeypatch.setattr(Syncer, "_git", recorded)
    return seen


def test_a_write_to_a_relay_with_this_gitrelays_gate_starts_no_git(team, relay):
    alice, bob = team["alice"], team["bob"]
    assert localrelay.checks_here(Store(relay))
    started: list[object] = []

    def no_process(*args, **kwargs):  # type: ignore[no-untyped-def]
        started.append(args)
        raise AssertionError(f"a process was started: {args}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "run", no_process)
        patch.setattr(subprocess, "Popen", no_process)
        sent = alice.handoff(to="bob@acme", intent="inform", summary="no git here",
                             mode="wait")
    assert started == []
    tip = git_out(relay, "rev-parse", layout.MAIN_REF).strip()
    assert tip == alice.mirror.relay_main() == alice.mirror.main()
    # As git logs a push: the old and new tips in the relay's reflog.
    last = (relay / "logs" / layout.MAIN_REF).read_text().splitlines()[-1]
    assert last.split()[1] == tip and last.endswith("\tpush")
    assert not list(relay.glob("refs/**/*.lock"))
    git_out(relay, "fsck", "--strict", "--no-dangling")
    bob.refresh(max_age=0)
    assert bob.thread(sent.thread_id).handoff["summary"] == "no git here"


@pytest.fixture
def pusher_relay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A relay whose gate takes the pusher from REMOTE_USER, alice (username alice) on it."""
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", require_pusher=True,
                               pusher_env=["REMOTE_USER"])
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice"))
    joining.join(str(relay), "alice@acme", name="Alice Martin", role="backend",
                 usernames=["alice"], env={"REMOTE_USER": "alice"}, save=False)
    joining.join(str(relay), "bob@acme", name="Bob Chen", role="frontend",
                 usernames=["bob"], env={"REMOTE_USER": "bob"}, save=False)
    return relay


@pytest.mark.parametrize("path", ["in process", "git push"])
def test_a_refusal_is_the_gates_and_leaves_the_relay_as_it_was(
        pusher_relay: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """alice's write reaches the relay as pushed by mallory: the gate's pusher rule refuses
    it, in the same words in process as through the relay's hook; nothing of it is
    written to the relay."""
    if path == "git push":  # another hook on the relay: git pushes, the hook runs
        hook = pusher_relay / "hooks" / "post-receive"
        hook.write_text("#!/bin/sh\nexit 0\n")
        hook.chmod(0o755)
    assert localrelay.checks_here(Store(pusher_relay)) is (path == "in process")
    pushes = _pushes(monkeypatch)
    monkeypatch.setenv("GITRELAY_HOME", str(pusher_relay.parent / "alice"))
    monkeypatch.setenv("REMOTE_USER", "mallory")
    alice = RelayClient(str(pusher_relay), "alice@acme", writes="queue")
    before_tip = git_out(pusher_relay, "rev-parse", layout.MAIN_REF)
    before_objects = _objects(pusher_relay)
    sent = alice.handoff(to="bob@acme", intent="inform", summary="pushed as mallory")
    report = alice.deliver()
    assert [r.rule for r in report.refused] == ["pusher"]
    assert "authenticated pusher 'mallory' (REMOTE_USER)" in report.refused[0].message
    assert report.refused[0].thread_id == sent.thread_id
    assert git_out(pusher_relay, "rev-parse", layout.MAIN_REF) == before_tip
    assert bool(pushes) is (path == "git push")
    if path == "in process":  # git's quarantine keeps a refused push's objects out too
        assert _objects(pusher_relay) == before_objects
    assert not alice.mirror.outbox()


@pytest.mark.parametrize("what", ["post-receive hook", "another interpreter's gate",
                                  "shared repository", "hooks elsewhere"])
def test_a_relay_that_runs_anything_else_on_a_push_gets_git(team, relay, monkeypatch, what):
    if what == "post-receive hook":
        marker = relay / "post-receive-ran"
        hook = relay / "hooks" / "post-receive"
        hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
        hook.chmod(0o755)
    elif what == "another interpreter's gate":
        joining.install_hook(relay, python="/usr/bin/python3")
        # That interpreter may lack this package's dependencies; the hook needs none.
    elif what == "shared repository":
        git_out(relay, "config", "core.sharedRepository", "group")
    else:
        git_out(relay, "config", "core.hooksPath", str(relay / "hooks"))
    if what == "another interpreter's gate" and not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 on this machine to write a hook for")
    assert not localrelay.checks_here(Store(relay))
    pushes = _pushes(monkeypatch)
    alice, bob = team["alice"], team["bob"]
    sent = alice.handoff(to="bob@acme", intent="inform", summary="through git", mode="wait")
    assert len(pushes) == 1
    if what == "post-receive hook":
        assert (relay / "post-receive-ran").exists()
    bob.refresh(max_age=0)
    assert bob.thread(sent.thread_id).handoff["summary"] == "through git"


def test_a_ref_another_writer_holds_waits_for_it(team, relay):
    """git's own lock on the relay's main (``main.lock``, as a push in flight holds it):
    the write is stale until the lock goes, then lands."""
    alice = team["alice"]
    lock = relay / "refs" / "heads" / "main.lock"
    lock.write_text("held by a push in flight\n")
    done: list[object] = []
    writer = threading.Thread(target=lambda: done.append(alice.handoff(
        to="bob@acme", intent="inform", summary="after the lock", mode="wait")))
    writer.start()
    time.sleep(0.3)
    assert not done  # still waiting on the lock
    lock.unlink()
    writer.join(timeout=60)
    assert done and alice.mirror.relay_main() == git_out(relay, "rev-parse",
                                                         layout.MAIN_REF).strip()


def test_writers_in_process_and_through_git_at_once_keep_every_write(team, relay, monkeypatch):
    """alice and bob write in process while carol's writes go through git (the relay's
    hook runs for them), all at once: every write lands, on one line of history."""
    checks_here = localrelay.checks_here
    monkeypatch.setattr(localrelay, "checks_here", lambda store: (
        threading.current_thread().name != "carol" and checks_here(store)))
    pushes = _pushes(monkeypatch)
    sent: dict[str, str] = {}
    errors: list[BaseException] = []

    def writes(who: str) -> None:
        try:
            for i in range(4):
                to = "bob@acme" if who == "alice" else "alice@acme"
                result = team[who].handoff(to=to, intent="inform", summary=f"{who} {i}",
                                           mode="wait")
                sent[f"{who} {i}"] = str(result.thread_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writes, args=(who,), name=who)
               for who in ("alice", "bob", "carol")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(sent) == 12 and pushes  # carol's went through git
    git_out(relay, "fsck", "--strict", "--no-dangling")
    reader = team["alice"]
    reader.refresh(max_age=0)
    assert {reader.thread(tid).handoff["summary"] for tid in sent.values()} == set(sent)


def test_a_relay_full_of_loose_objects_is_packed_as_a_push_would_pack_it(team, relay):
    """receive-pack runs ``git gc --auto`` after a push; so does a write in process. git
    judges "full" from one folder of loose objects (``objects/17``): three there, with
    gc.auto at 256, is full."""
    import hashlib

    store = Store(relay)
    n = found = 0
    while found < 3:
        data = f"filler {n}\n".encode()
        n += 1
        if hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest().startswith("17"):
            store.source.write("blob", data)
            found += 1
    git_out(relay, "config", "gc.auto", "256")
    assert not list((relay / "objects" / "pack").glob("*.pack"))
    team["alice"].handoff(to="bob@acme", intent="inform", summary="one more", mode="wait")
    wait_until(lambda: list((relay / "objects" / "pack").glob("*.pack"))
               and not (relay / "gc.pid").exists(), "git gc --auto packing the relay")


def test_a_relay_folder_that_cannot_be_written_is_relay_unavailable_and_the_write_stays(
        team, relay, monkeypatch):
    """The disk is full (or the folder read-only): a coded error naming the relay and
    the reason; the relay has not moved and the operation stays queued."""
    import errno

    from gitrelay.core.errors import RelayUnavailable

    def full(self: Store, source: Store, tips: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    alice = team["alice"]
    before = git_out(relay, "rev-parse", layout.MAIN_REF)
    alice.handoff(to="bob@acme", intent="inform", summary="no room", mode="queue")
    monkeypatch.setattr(Store, "copy_objects", full)
    with pytest.raises(RelayUnavailable) as raised:
        alice.deliver()
    assert str(relay) in raised.value.message and "No space left on device" in \
        raised.value.message
    assert raised.value.data.get("queued") is True
    assert git_out(relay, "rev-parse", layout.MAIN_REF) == before
    assert len(alice.mirror.outbox()) == 1
