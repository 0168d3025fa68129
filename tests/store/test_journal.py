"""The outbox journal: a queued write is a whole commit in one record, filed later.

These tests look at the mirror on disk with the git CLI (what `git push`
would send) and from a second Mirror object on the same directory (what
another process sharing the mirror sees).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitrelay.core import layout
from gitrelay.relay.client import RelayClient
from gitrelay.relay.results import WriteResult
from gitrelay.store import journal
from gitrelay.store.gitstore import Store
from gitrelay.store.mirror import Mirror
from gitrelay.store.recovery import salvage_outbox


def git_has(mirror: Path, oid: str) -> bool:
    return subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", oid],
                          capture_output=True).returncode == 0


def record(base: str, tip: str, *objects: tuple[str, bytes]) -> journal.Record:
    return journal.Record(base, tip, tuple((journal.object_id(k, d), k, d) for k, d in objects))


def alice_queues(make_client, summary: str) -> tuple[RelayClient, WriteResult]:
    """Bob and Alice join (Alice last: GITRELAY_HOME stays hers); Alice queues a handoff."""
    make_client("bob@acme")
    alice = make_client("alice@acme", writes="queue")
    return alice, alice.handoff(to="bob@acme", intent="inform", summary=summary)


def test_records_read_back_whole_and_a_torn_tail_is_dropped_by_the_next_append(tmp_path):
    path = tmp_path / journal.FILENAME
    first = record("a" * 40, "b" * 40, ("blob", b"hello\n"), ("tree", b""))
    st = journal.append(path, first, 0)
    assert journal.read(path).records == [first]
    # a writer killed mid-write leaves half a record
    with path.open("ab") as f:
        f.write(journal.encode(record("b" * 40, "c" * 40, ("blob", b"lost")))[:30])
    assert journal.read(path).records == [first]
    assert journal.read(path).end == st.st_size
    second = record("b" * 40, "d" * 40, ("blob", b"kept"))
    journal.append(path, second, journal.read(path).end)
    assert journal.read(path).records == [first, second]


def test_a_record_that_fails_its_checksum_ends_the_journal(tmp_path):
    path = tmp_path / journal.FILENAME
    journal.append(path, record("a" * 40, "b" * 40, ("blob", b"one")), 0)
    end = journal.read(path).end
    journal.append(path, record("b" * 40, "c" * 40, ("blob", b"two")), end)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # one flipped bit in the second record's object
    path.write_bytes(bytes(data))
    contents = journal.read(path)
    assert [r.tip for r in contents.records] == ["b" * 40]
    assert contents.end == end


def test_the_journal_is_emptied_to_its_header_never_to_zero_bytes(tmp_path):
    """On ext4 a file truncated to zero and written again is flushed to disk at
    close (auto_da_alloc): emptying keeps the header line, and appends go after it."""
    path = tmp_path / journal.FILENAME
    first = record("a" * 40, "b" * 40, ("blob", b"one"))
    journal.append(path, first, 0)
    assert path.read_bytes().startswith(journal.HEADER)
    journal.clear(path)
    assert path.read_bytes() == journal.HEADER
    emptied = journal.read(path)
    assert emptied.records == [] and emptied.end == len(journal.HEADER)
    second = record("b" * 40, "c" * 40, ("blob", b"two"))
    journal.append(path, second, emptied.end)
    assert path.read_bytes() == journal.HEADER + journal.encode(second)
    assert journal.read(path).records == [second]
    journal.clear(tmp_path / "missing")  # nothing to empty: no file is made
    assert not (tmp_path / "missing").exists()


def test_a_journal_without_the_header_line_is_still_read(tmp_path):
    """Journals written before the header line existed."""
    path = tmp_path / journal.FILENAME
    old = record("a" * 40, "b" * 40, ("blob", b"queued before an upgrade"))
    path.write_bytes(journal.encode(old))
    contents = journal.read(path)
    assert contents.records == [old] and contents.end == path.stat().st_size
    newer = record("b" * 40, "c" * 40, ("blob", b"after"))
    journal.append(path, newer, contents.end)
    assert journal.read(path).records == [old, newer]


def test_object_ids_are_gits(tmp_path):
    blob = tmp_path / "f"
    blob.write_bytes(b"some json\n")
    out = subprocess.run(["git", "hash-object", str(blob)], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert journal.object_id("blob", b"some json\n") == out


def test_a_queued_write_is_in_the_journal_and_main_until_the_flush_files_it(make_client):
    alice, sent = alice_queues(make_client, "journal me")
    tip = sent.written.commit if sent.written else None
    assert tip is not None

    # durable as a record, not yet as loose objects or a ref
    records = journal.read(alice.mirror.journal_path).records
    assert [r.tip for r in records] == [tip]
    assert alice.mirror.store.ref(layout.MAIN_REF) == records[0].base
    assert not git_has(alice.mirror.path, tip)
    assert alice.mirror.main() == tip
    assert alice.thread(sent.thread_id).handoff["summary"] == "journal me"

    # another process on the same mirror sees the same main and can read it
    other = Mirror(alice.mirror.path, "alice@acme")
    assert other.main() == tip
    assert other.view().thread(sent.thread_id) is not None
    assert [c.oid for c in other.outbox()] == [tip]

    other.flush()
    assert git_has(alice.mirror.path, tip)
    assert alice.mirror.store.ref(layout.MAIN_REF) == tip
    # emptied down to its header, kept for the next append
    assert alice.mirror.journal_path.read_bytes() == journal.HEADER
    assert alice.mirror.main() == tip  # the first process follows without a re-read error


def test_writes_from_two_processes_chain_in_the_journal_and_one_push_delivers_both(
        make_client, relay):
    make_client("bob@acme")
    alice = make_client("alice@acme", writes="queue")  # last: GITRELAY_HOME is alice's
    # same GITRELAY_HOME; a long freshness bound, so that it does not fetch (which files
    # the journal) before writing
    second = RelayClient(str(relay), "alice@acme", writes="queue", fresh_seconds=600)
    one = alice.handoff(to="bob@acme", intent="inform", summary="from the first process")
    two = second.handoff(to="bob@acme", intent="inform", summary="from the second process")
    records = journal.read(alice.mirror.journal_path).records
    assert [r.base for r in records][1] == records[0].tip  # built on the first, unfiled
    assert len(alice.mirror.outbox()) == 2
    report = alice.deliver()
    assert report.delivered == 2 and report.attempts == 1
    log = subprocess.run(["git", "--git-dir", str(relay), "log", "--format=%s", "-3"],
                         capture_output=True, text=True, check=True).stdout
    assert log.count("handoff") == 2
    for sent in (one, two):
        assert second.thread(sent.thread_id).undelivered == []


def test_a_flush_cut_short_after_the_ref_moved_is_finished_by_the_next_one(make_client):
    alice, first = alice_queues(make_client, "first")
    mirror = alice.mirror
    records = journal.read(mirror.journal_path).records
    # the state a flush killed between moving the ref and removing the journal leaves
    mirror.store.file_objects(obj for r in records for obj in r.objects)
    mirror.store.set_ref(layout.MAIN_REF, records[-1].tip, "test: flush cut short")
    fresh = Mirror(mirror.path, "alice@acme")
    assert fresh.main() == records[-1].tip
    second = RelayClient(alice.relay_url, "alice@acme", writes="queue").handoff(
        to="bob@acme", intent="inform", summary="second")
    fresh.flush()
    assert [fresh.op_of(c).thread_id for c in fresh.outbox()] == [first.thread_id,
                                                                 second.thread_id]
    assert alice.deliver().delivered == 2


def test_a_journal_left_behind_by_a_moved_main_is_replayed_not_lost(make_client):
    alice, queued = alice_queues(make_client, "still queued")
    mirror = alice.mirror
    records = journal.read(mirror.journal_path).records
    # something moved main without the journal (as a hand repair might): a filed
    # operation on top of the old base
    saved = mirror.journal_path.read_bytes()
    mirror.journal_path.unlink()
    other = RelayClient(alice.relay_url, "alice@acme", writes="queue", fresh_seconds=600)
    moved = other.handoff(to="bob@acme", intent="inform", summary="filed directly")
    other.mirror.flush()
    mirror.journal_path.write_bytes(saved)
    assert records[0].base != mirror.store.ref(layout.MAIN_REF)

    fresh = Mirror(mirror.path, "alice@acme")
    outbox = [fresh.op_of(c).thread_id for c in fresh.outbox()]
    assert outbox == [moved.thread_id, queued.thread_id]
    assert journal.read(fresh.journal_path).records == []


def test_a_damaged_mirror_salvages_operations_that_were_only_in_the_journal(make_client,
                                                                            relay, tmp_path,
                                                                            monkeypatch):
    alice, queued = alice_queues(make_client, "only in the journal")
    assert alice.mirror.journal_path.exists()
    assert [op.thread_id for op in salvage_outbox(alice.mirror.path)] == [queued.thread_id]
    for path in (alice.mirror.path / "objects").rglob("*"):
        if path.is_file() and path.parent.name != "info":
            path.write_bytes(path.read_bytes()[:5])
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice"))
    fresh = RelayClient(str(relay), "alice@acme")
    fresh.deliver()
    assert fresh.thread(queued.thread_id).handoff["summary"] == "only in the journal"
    assert fresh.mirror.sync_state().get("repaired")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork to hold a lock elsewhere")
def test_the_refs_lock_excludes_another_process_and_times_out_with_a_clear_error(tmp_path):
    from gitrelay.store.locks import FileMutex, LockTimeout

    lock = FileMutex(tmp_path / "x.lock")
    held_r, held_w = os.pipe()  # child -> parent: the lock is held
    tried_r, tried_w = os.pipe()  # parent -> child: the parent has tried
    pid = os.fork()
    if pid == 0:  # the child holds the lock until the parent has tried
        os.close(held_r)
        os.close(tried_w)
        lock.acquire()
        os.write(held_w, b"1")
        os.read(tried_r, 1)
        os._exit(0)
    os.close(held_w)
    os.close(tried_r)
    os.read(held_r, 1)
    try:
        with pytest.raises(LockTimeout):
            lock.acquire(timeout=0.1)
    finally:
        os.write(tried_w, b"1")
        os.close(tried_w)
        os.close(held_r)
    os.waitpid(pid, 0)
    lock.acquire(timeout=5)  # released by the kernel when the child exited
    lock.acquire(timeout=0)  # re-entrant in the same thread
    lock.release()
    lock.release()
    assert not lock.is_held


def test_writes_and_flushes_from_two_threads_keep_every_operation_once_in_order(make_client):
    # The MCP server's shape: tool calls append while its sync loop flushes.
    import threading

    alice, first = alice_queues(make_client, "thread 0")
    stop = threading.Event()
    problems: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                alice.mirror.flush()
            except BaseException as exc:  # pragma: no cover - reported below
                problems.append(exc)
                return

    worker = threading.Thread(target=flusher)
    worker.start()
    try:
        sent = [first] + [alice.send_message(first.thread_id, f"note {i}") for i in range(40)]
    finally:
        stop.set()
        worker.join()
    assert not problems
    alice.mirror.flush()
    outbox = [alice.mirror.op_of(c) for c in alice.mirror.outbox()]
    assert [op.doc.get("id", op.thread_id) for op in outbox] == \
        [s.doc.get("id", s.thread_id) for s in sent]
    assert [op.doc.get("sequence_no") for op in outbox[1:]] == list(range(1, 41))
    assert alice.deliver().delivered == 41


def spy_on_syncs(monkeypatch: pytest.MonkeyPatch, alice: RelayClient) -> list[str]:
    """Every fdatasync/fsync (by path in alice's mirror), filing, ref move and emptying."""
    events: list[str] = []
    real_fdatasync, real_fsync, real_clear = os.fdatasync, os.fsync, journal.clear
    real_file, real_set = Store.file_objects, Store.set_ref

    def named(fd: int) -> str:  # the file's path in alice's mirror
        return os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), alice.mirror.path.resolve())

    def fdatasync(fd: int) -> None:
        events.append("fdatasync " + named(fd))
        real_fdatasync(fd)

    def fsync(fd: int) -> None:
        events.append("fsync " + named(fd))
        real_fsync(fd)

    def clear(path: Path) -> None:
        events.append("journal emptied")
        real_clear(path)

    def file_objects(self: Store, objects: object) -> None:
        events.append("file objects")
        real_file(self, objects)  # type: ignore[arg-type]

    def set_ref(self: Store, name: str, oid: str, message: str = "") -> None:
        events.append(f"set {name}")
        real_set(self, name, oid, message)

    for name, spy in (("fdatasync", fdatasync), ("fsync", fsync)):
        monkeypatch.setattr(os, name, spy)
    monkeypatch.setattr(journal, "clear", clear)
    monkeypatch.setattr(Store, "file_objects", file_objects)
    monkeypatch.setattr(Store, "set_ref", set_ref)
    return events


def test_with_fsync_an_answered_write_is_on_disk_and_synced_again_before_the_journal_empties(
        make_client, monkeypatch):
    # A power cut cannot be staged here; what can be checked is that every step
    # asks the kernel for it, in the order that keeps one synced copy at all times.
    monkeypatch.setenv("GITRELAY_FSYNC", "1")
    alice, sent = alice_queues(make_client, "durable")
    assert alice.mirror.fsync
    alice.mirror.flush()
    events = spy_on_syncs(monkeypatch, alice)
    alice.send_message(sent.thread_id, "one more")
    assert events == [f"fdatasync {journal.FILENAME}"]  # before it answered
    (record,) = journal.read(alice.mirror.journal_path).records
    events.clear()
    alice.mirror.flush()
    n = len(record.objects)
    assert events[0] == "file objects"
    # each object synced under its temporary name, before the rename that files it
    assert all(e.startswith("fsync objects/") and "/tmp_obj_" in e for e in events[1:1 + n])
    assert events[1 + n:3 + n] == [f"set {layout.MAIN_REF}", f"fsync {layout.MAIN_REF}"]
    folders = {f"fsync objects/{oid[:2]}" for oid, _, _ in record.objects} | {
        "fsync objects", "fsync refs/heads"}
    assert set(events[3 + n:-1]) == folders and len(events) == 4 + n + len(folders)
    assert events[-1] == "journal emptied"


def test_by_default_nothing_waits_for_the_disk(make_client, monkeypatch):
    monkeypatch.delenv("GITRELAY_FSYNC", raising=False)
    alice, sent = alice_queues(make_client, "fast")
    alice.mirror.flush()
    events = spy_on_syncs(monkeypatch, alice)
    alice.send_message(sent.thread_id, "one more")
    alice.mirror.flush()
    assert events == ["file objects", f"set {layout.MAIN_REF}", "journal emptied"]
