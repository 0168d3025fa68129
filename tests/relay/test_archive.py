"""Archiving closed threads: out of main's tree, read exactly as before.

GIVEN a relay with the gate installed and teammates with their own mirrors
WHEN one of them archives the closed threads (through the gate, as `gitrelay
archive` does)
THEN main's tip no longer holds the closed threads' directories, the archive
snapshot (the operation's second parent, named by archive.json) holds them
at the same paths, the threads read the same for everyone, nothing more can
be added to them, their ids stay taken, a concurrent or replayed archive
lands once; the retired marker form is refused.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gitrelay.core import layout, schema
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import RelayError
from gitrelay.core.ops import archive_op
from gitrelay.core.view import resolve_thread_id
from gitrelay.inbox.inbox import check_inbox, reindex
from gitrelay.relay.client import RelayClient
from gitrelay.relay.history import history
from gitrelay.relay.results import ThreadView
from gitrelay.sync import verify
from tests.gitcli import git_out


def tree_paths(relay: Path, rev: str = "main") -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(relay), "ls-tree", "-r", "-t",
                          "--name-only", rev, "threads"],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()



def archive_index(relay: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads(git_out(relay, "show", f"main:{layout.ARCHIVE_PATH}"))
    return doc


def snapshot_dirs(relay: Path) -> dict[str, str]:
    """Thread id -> directory tree in the snapshot archive.json names."""
    snap = str(archive_index(relay)["snapshot"])
    out = git_out(relay, "ls-tree", "-r", "-d", snap, "threads").strip()
    return {line.rsplit("/", 1)[-1]: line.split()[2] for line in out.splitlines()
            if line.count("/") == 3}


def same_thread(a: ThreadView, b: ThreadView) -> None:
    """Equal in everything but the commit each was read at."""
    assert dataclasses.replace(a, tip=None) == dataclasses.replace(b, tip=None)


@pytest.fixture
def threads(team: dict[str, RelayClient]) -> dict[str, str]:
    """alice → bob: one completed (with a reply), one cancelled, one accepted, one pending."""
    alice, bob = team["alice"], team["bob"]
    made = {name: alice.handoff(to="bob@acme", intent="inform", summary=f"the {name} one",
                                idempotency_key=f"key-{name}").thread_id
            for name in ("completed", "cancelled", "accepted", "pending")}
    bob.refresh(max_age=0)
    bob.accept(made["completed"], session_id="s1")
    bob.send_message(made["completed"], "Done on my side, see the PR.")
    bob.complete(made["completed"], result_summary="Merged as web#418.")
    bob.accept(made["accepted"], session_id="s1")
    alice.refresh(max_age=0)
    alice.cancel(made["cancelled"], reason="Superseded.")
    for c in team.values():
        c.refresh(max_age=0)
    return made


def test_archived_threads_leave_mains_tree_and_read_the_same(
        team: dict[str, RelayClient], threads: dict[str, str], relay: Path) -> None:
    alice, bob = team["alice"], team["bob"]
    before = {name: bob.thread(tid) for name, tid in threads.items()}
    found = alice.archivable(older_than=0)
    assert sorted(tid for _, tid, _ in found) == sorted([threads["completed"],
                                                         threads["cancelled"]])
    assert {status for _, _, status in found} == {"completed", "cancelled"}
    dirs_before = {tid: git_out(relay, "rev-parse", f"main:{layout.shard(tid)}").strip()
                   for tid in threads.values()}
    result = alice.archive([tid for _, tid, _ in found])
    assert result.delivery == "delivered"
    paths = tree_paths(relay)
    index = archive_index(relay)
    assert index["threads"] == 2 and index["by"] == "alice@acme"
    # The snapshot is the operation's second parent, so the relay's history holds it.
    assert git_out(relay, "rev-parse", "main^2").strip() == index["snapshot"]
    assert git_out(relay, "log", "--format=%s", "-1", str(index["snapshot"])).strip() == \
        "Archive snapshot: 2 more closed threads, 2 in all"
    snapshot = snapshot_dirs(relay)
    for name in ("completed", "cancelled"):
        tid = threads[name]
        assert snapshot[tid] == dirs_before[tid]
        assert not any(p.startswith(layout.shard(tid)) for p in paths)
    for name in ("accepted", "pending"):
        assert layout.handoff_path(threads[name]) in paths
    bob.refresh(max_age=0)
    carol = team["carol"]
    carol.refresh(max_age=0)
    for name, tid in threads.items():
        same_thread(bob.thread(tid), before[name])
    assert resolve_thread_id(threads["completed"][:6], bob.view) == threads["completed"]
    subjects = [e.text for e in history(alice.mirror, limit=1)]
    assert subjects == ["alice@acme archived 2 closed threads"]


def test_nothing_is_added_to_an_archived_thread_and_its_id_stays_taken(
        team: dict[str, RelayClient], threads: dict[str, str]) -> None:
    alice, bob = team["alice"], team["bob"]
    alice.archive([threads["completed"], threads["cancelled"]])
    bob.refresh(max_age=0)
    with pytest.raises(RelayError) as refused:
        bob.send_message(threads["completed"], "One more thing.")
    assert refused.value.data["rule"] == "thread_terminal"
    # The same handoff again (a retry) is recognised as the one already made.
    again = alice.handoff(to="bob@acme", intent="inform", summary="the cancelled one",
                          idempotency_key="key-cancelled")
    assert again.repeated and again.thread_id == threads["cancelled"]
    # Another payload under the archived thread's key is refused, not a second thread.
    with pytest.raises(RelayError) as dup:
        alice.handoff(to="bob@acme", intent="inform", summary="something else",
                      idempotency_key="key-completed")
    assert dup.value.name == "duplicate_idempotency_key"


def test_a_queued_archive_that_lost_a_race_lands_once(
        make_client: Callable[..., RelayClient], team: dict[str, RelayClient],
        threads: dict[str, str], relay: Path) -> None:
    """bob archives the completed thread first; alice's queued archive of both is
    replayed onto his and carries only the cancelled one."""
    alice, bob = team["alice"], team["bob"]
    queued = alice.archive([threads["completed"], threads["cancelled"]], mode="queue")
    assert queued.delivery == "queued"
    bob.archive([threads["completed"]])
    alice.deliver()
    assert not alice.mirror.outbox() and not alice.mirror.refused()
    assert set(snapshot_dirs(relay)) == {threads["completed"], threads["cancelled"]}
    assert archive_index(relay)["threads"] == 2
    ops = git_out(relay, "log", "--first-parent", "--format=%s", "-2", "main").strip().splitlines()
    assert ops == ["archive 1 closed thread by alice@acme", "archive 1 closed thread by bob@acme"]
    # Archived by someone else before a queued archive reaches the relay: nothing left
    # to do, so it counts as delivered (not refused) and adds no commit.
    closed = alice.handoff(to="bob@acme", intent="inform", summary="short-lived").thread_id
    alice.cancel(closed)
    alice.archive([closed], mode="queue")
    carol = team["carol"]
    carol.refresh(max_age=0)
    carol.archive([closed])
    alice.deliver()
    assert not alice.mirror.outbox() and not alice.mirror.refused()
    last = git_out(relay, "log", "--format=%s", "-1", "main").strip()
    assert last == "archive 1 closed thread by carol@acme"
    # Asked to archive what is archived already: a clear refusal, nothing queued.
    with pytest.raises(RelayError) as nothing:
        alice.archive([closed])
    assert nothing.value.name == "invalid_argument"
    assert not alice.mirror.outbox()


def test_an_open_thread_is_never_archived_locally_either(
        team: dict[str, RelayClient], threads: dict[str, str]) -> None:
    alice = team["alice"]
    tip = alice.mirror.main()
    with pytest.raises(RelayError) as refused:
        alice.archive([threads["accepted"], threads["completed"]])
    assert refused.value.data["rule"] == "archive"
    assert "accepted" in refused.value.message
    assert alice.mirror.main() == tip and not alice.mirror.outbox()


def test_verify_and_a_rebuilt_inbox_index_agree_after_archiving(
        team: dict[str, RelayClient], threads: dict[str, str], relay: Path) -> None:
    alice, bob = team["alice"], team["bob"]
    every = ["pending", "accepted", "completed", "cancelled"]

    def items() -> list[tuple[str, str, str, int]]:
        page = check_inbox(bob, status=every, limit=200)
        return [(i.thread_id, i.kind, i.status, i.seq) for i in page.items]

    before = items()
    assert {status for _, _, status, _ in before} >= {"completed", "cancelled"}
    alice.archive([threads["completed"], threads["cancelled"]])
    bob.refresh(max_age=0)
    report = verify.verify_relay(str(relay))
    assert report.ok, report.text()
    assert items() == before
    reindex(bob)
    assert items() == before


def test_an_archive_in_the_retired_marker_form_is_refused_by_the_gate(
        team: dict[str, RelayClient], threads: dict[str, str], relay: Path) -> None:
    """The marker form (a ``<id>.archived.json`` file beside each removed directory,
    one parent) was replaced by the snapshot: a push in that form is refused and the
    relay stays as it was."""
    alice = team["alice"]
    mirror = alice.mirror
    base = mirror.main()
    assert base is not None
    view = alice.view()
    tid = threads["completed"]
    entry = view.objs.entry(view.tree, layout.shard(tid))
    assert entry is not None
    marker = {"format_version": 1, "kind": "archived", "thread_id": tid,
              "status": "completed", "tree": entry.oid, "by": alice.handle,
              "archived_at": "2026-06-01T08:00:00Z"}
    tree = mirror.store.tree_edit(view.tree, [layout.shard(tid)],
                                  {f"{layout.shard(tid)}.archived.json": schema.dumps(marker)})
    op = archive_op(alice.handle, [tid], "2026-06-01T08:00:00Z")
    seq = commit_seq(mirror.objects.commit(base)) + 1
    oid = mirror.store.commit(tree=tree, parents=[base], message=op.message(op.doc, seq),
                              author=alice.handle, email=alice.handle)
    before = git_out(relay, "rev-parse", "main")
    pushed = subprocess.run(["git", "--git-dir", str(mirror.path), "push", "-q", str(relay),
                             f"{oid}:refs/heads/main"], capture_output=True, text=True,
                            check=False)
    assert pushed.returncode != 0
    assert "[archive]" in pushed.stderr and "without a snapshot" in pushed.stderr, pushed.stderr
    assert git_out(relay, "rev-parse", "main") == before
