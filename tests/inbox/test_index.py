"""The local inbox index: incremental, disposable, and never answering when it is wrong.

The property test at the end checks the index against an independent fold of
the whole history, for random sequences of operations by three teammates
writing through real relays (queued writes, deliveries that replay the
outbox, acks on the relay, a deleted index now and then).
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitrelay.cli.main import main as cli_main
from gitrelay.core import layout
from gitrelay.core.errors import RelayError
from gitrelay.inbox import inbox
from gitrelay.inbox.inbox import InboxItem, InboxPage, check_inbox
from gitrelay.inbox.index import INDEX_FILE, INDEX_FORMAT, ListedFiles, index_for, item_id_for
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient

ALL = ["pending", "accepted", "completed", "cancelled"]


def everything(client: RelayClient) -> list[InboxItem]:
    """Every item of the client's inbox, oldest first, through all pages."""
    out: list[InboxItem] = []
    page = check_inbox(client, after=0, status=ALL, limit=200)
    while True:
        out += page.items
        if page.next_cursor is None:
            return out
        page = check_inbox(client, cursor=page.next_cursor, limit=200)


def answers(client: RelayClient) -> list[InboxPage]:
    """The answers an agent would get now, with the rebuilt flag cleared."""
    pages = [check_inbox(client), check_inbox(client, after=0, status=ALL),
             check_inbox(client, after=0, unread_only=True)]
    for page in pages:
        page.index_rebuilt = False
    return pages


def busy_relay(people: dict[str, RelayClient]) -> str:
    alice, bob, carol = people["alice"], people["bob"], people["carol"]
    tid = bob.handoff(to="alice@acme", intent="inform", summary="Paginate /users").thread_id
    assert tid is not None
    carol.handoff(to="alice@acme", intent="inform", summary="Rotate the keys")
    alice.refresh(max_age=0)
    alice.accept(tid, session_id="s1")
    bob.send_message(tid, "One more thing.")
    return tid


def test_the_index_applies_only_the_commits_that_are_new(people):
    alice, bob = people["alice"], people["bob"]
    busy_relay(people)
    idx = index_for(alice.mirror)
    check_inbox(alice)
    assert idx.update().applied == 0
    for n in range(3):
        bob.handoff(to="alice@acme", intent="inform", summary=f"Task {n}")
    alice.refresh(max_age=0)

    report = idx.update()

    assert (report.applied, report.rebuilt, report.rolled_back) == (3, False, 0)


def table_rows(client: RelayClient) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the client's index, in a fixed order."""
    conn = sqlite3.connect(client.mirror.path / INDEX_FILE)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                for t in tables}
    finally:
        conn.close()


@pytest.mark.slow
def test_a_long_history_listed_by_git_log_builds_the_same_index(people, monkeypatch):
    """From BULK_COMMITS new commits on, the files they added come from one
    `git log --raw`; the index is the same row for row as reading each commit,
    with an archive, queued operations (not in git's object store yet) and
    registrations among them."""
    from gitrelay.inbox import index

    alice, carol = people["alice"], people["carol"]
    tid = busy_relay(people)
    closed = carol.handoff(to="alice@acme", intent="inform", summary="Short-lived").thread_id
    carol.cancel(closed)
    carol.archive([closed])
    alice.refresh(max_age=0)
    alice.send_message(tid, "Queued, not delivered.", mode="queue")
    listings: list[index.ListedFiles] = []
    real = index.Index._added_files

    def listed(self, new):  # type: ignore[no-untyped-def]
        found = real(self, new)
        listings.append(found)
        return found

    monkeypatch.setattr(index.Index, "_added_files", listed)
    monkeypatch.setattr(index, "BULK_COMMITS", 10**9)
    index_for(alice.mirror).rebuild()
    one_by_one = table_rows(alice)
    assert listings and listings[-1].hits == 0  # below the threshold: nothing listed
    monkeypatch.setattr(index, "BULK_COMMITS", 1)
    index_for(alice.mirror).rebuild()
    assert listings[-1].hits >= 10, listings[-1].hits  # most commits came from git log
    assert table_rows(alice) == one_by_one


def _listing(text: str, status: int) -> subprocess.Popen[bytes]:
    """A process that writes ``text`` as git log's listing would, then exits ``status``."""
    return subprocess.Popen([sys.executable, "-c",
                             f"import sys; sys.stdout.write({text!r}); sys.exit({status})"],
                            stdout=subprocess.PIPE)


@pytest.mark.parametrize("status", [0, 1])
def test_a_listing_cut_short_is_not_trusted(status):
    """The record git was writing when it stopped (a line without its newline, or the
    last one of a git that failed) is read the long way; the finished ones count."""
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    raw = ":000000 100644 " + "0" * 40 + " {blob} A\tthreads/A/B/{name}"
    text = (f"{a}\n\n{raw.format(blob='1' * 40, name='handoff.json')}\n"
            f"{b}\n\n{raw.format(blob='2' * 40, name='accept.json')}\n"
            f"{c}\n\n{raw.format(blob='3' * 40, name='complete.js')}")
    listed = ListedFiles(_listing(text, status), {a, b, c})
    try:
        assert listed.get(a) == ("threads/A/B/handoff.json", "1" * 40)
        assert listed.get(b) == ("threads/A/B/accept.json", "2" * 40)
        assert listed.get(c) is None  # cut short: no newline
    finally:
        listed.close()
    whole = ListedFiles(_listing(text + "on\n", status), {a, b, c})
    try:
        assert whole.get(a) is not None and whole.get(b) is not None
        expected = ("threads/A/B/complete.json", "3" * 40) if status == 0 else None
        assert whole.get(c) == expected  # a git that failed: its last record is not trusted
    finally:
        whole.close()
    assert whole.hits == (3 if status == 0 else 2)


def test_deleting_the_index_mid_session_changes_no_answer(people):
    alice = people["alice"]
    busy_relay(people)
    before = answers(alice)
    path = alice.mirror.path / INDEX_FILE
    assert path.exists()

    path.unlink()
    page = check_inbox(alice)

    assert page.index_rebuilt
    assert answers(alice) == before
    assert not check_inbox(alice).index_rebuilt


def test_a_damaged_index_is_rebuilt_not_answered_from(people):
    alice = people["alice"]
    busy_relay(people)
    before = answers(alice)
    path = alice.mirror.path / INDEX_FILE
    index_for(alice.mirror).close()
    path.write_bytes(b"this is not a database" * 100)

    assert check_inbox(alice).index_rebuilt
    assert answers(alice) == before


@pytest.mark.parametrize("damage", [
    "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
    "UPDATE meta SET value = '0000000000000000000000000000000000000000' WHERE key = 'tip'",
    "UPDATE meta SET value = '99' WHERE key = 'format'",
])
def test_a_stale_or_foreign_index_is_detected_and_rebuilt(people, damage):
    alice, bob = people["alice"], people["bob"]
    busy_relay(people)
    before = answers(alice)
    conn = sqlite3.connect(alice.mirror.path / INDEX_FILE)
    with conn:
        conn.execute(damage)
    conn.close()
    # Something new arrives: the index must notice it cannot be extended.
    bob.handoff(to="carol@acme", intent="inform", summary="Not for alice")

    page = check_inbox(alice)

    assert page.index_rebuilt
    assert answers(alice) == before


def test_an_index_of_an_earlier_format_is_replaced_and_says_why(people):
    """A mirror indexed by the previous release (no open flag on its items) is rebuilt
    on its next use, and the answers are the same."""
    alice = people["alice"]
    busy_relay(people)
    before = answers(alice)
    index_for(alice.mirror).close()
    conn = sqlite3.connect(alice.mirror.path / INDEX_FILE)
    with conn:
        conn.execute("DROP INDEX items_open")
        conn.execute("ALTER TABLE items DROP COLUMN open")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'format'")
    conn.close()

    report = index_for(alice.mirror).update()

    assert report.rebuilt
    assert report.reason == f"index format '1', this gitrelay writes {INDEX_FORMAT}"
    assert answers(alice) == before


def sql_steps(client: RelayClient, call: Callable[[], object]) -> int:
    """How many SQLite virtual-machine steps ``call`` makes on the client's index."""
    conn = index_for(client.mirror)._conn_for_read()
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        call()
    finally:
        conn.set_progress_handler(None, 1)
    return steps


@pytest.mark.slow
def test_the_default_page_does_not_read_the_items_already_read(people):
    """The default page is the news (unread items, closed threads included): its cost
    follows the unread items, not every item the user has read over the months."""
    alice, bob, carol = people["alice"], people["bob"], people["carol"]
    for n in range(2):
        bob.handoff(to="carol@acme", intent="inform", summary=f"Still open {n}")
    check_inbox(carol)
    # A limit not asked before: the page query runs (a page read again comes from memory).
    few = sql_steps(carol, lambda: check_inbox(carol, limit=49))
    for n in range(40):
        tid = bob.handoff(to="alice@acme", intent="inform", summary=f"Withdrawn {n}").thread_id
        assert tid is not None
        bob.cancel(tid, reason="not needed after all")
    done = check_inbox(alice)
    assert len(done.items) == 50  # the withdrawn ones are news until read
    check_inbox(alice, ack_up_to=done.cursor)
    for n in range(2):
        bob.handoff(to="alice@acme", intent="inform", summary=f"Still open {n}")
    check_inbox(alice)  # brings the index up to date

    page = check_inbox(alice)
    many = sql_steps(alice, lambda: check_inbox(alice, limit=48))

    assert sorted(i.summary_preview for i in page.items) == ["Still open 0", "Still open 1"]
    assert many < few + 200, (few, many)  # reading 80 read items would take thousands
    closed = check_inbox(alice, after=0, status=["cancelled"], limit=100)
    # each withdrawn thread: its assignment and the cancel's task update
    assert len(closed.items) == 80 and {i.status for i in closed.items} == {"cancelled"}


@pytest.mark.slow
def test_a_page_read_again_comes_from_memory_until_the_index_changes(people, tmp_path):
    """An agent checking in again with nothing new gets the same page without the query;
    a change to the index, by this process or by another gitrelay process on the same
    mirror, is in the very next answer."""
    alice, bob = people["alice"], people["bob"]
    bob.handoff(to="alice@acme", intent="inform", summary="First")
    first = check_inbox(alice)
    queried = sql_steps(alice, lambda: check_inbox(alice, limit=7))
    again = sql_steps(alice, lambda: check_inbox(alice, limit=7))
    assert again * 3 < queried, (again, queried)
    assert [i.summary_preview for i in check_inbox(alice).items] == ["First"]

    # Another process of alice's (the CLI, a second agent) fetches and indexes the next
    # handoff; this one does not fetch, so only that process's commit can tell it.
    bob.handoff(to="alice@acme", intent="inform", summary="Second")
    alice.sync.fresh_seconds = 3600
    script = textwrap.dedent(f"""
        import os
        os.environ["GITRELAY_HOME"] = {str(tmp_path / "alice")!r}
        from gitrelay.relay.client import RelayClient
        from gitrelay.inbox.inbox import check_inbox
        c = RelayClient({alice.relay_url!r}, "alice@acme")
        c.refresh(max_age=0)
        print(len(check_inbox(c).items))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "2"
    assert [i.summary_preview for i in check_inbox(alice).items] == ["Second", "First"]
    assert first.items[0].summary_preview == "First"

    # This process's own commits: indexing the next handoff it fetches, an ack.
    bob.handoff(to="alice@acme", intent="inform", summary="Third")
    alice.sync.fresh_seconds = 0
    assert [i.summary_preview for i in check_inbox(alice).items] == ["Third", "Second", "First"]
    check_inbox(alice, ack_up_to=check_inbox(alice).cursor)
    # The ack is in the very next answer: the default call (the news) is empty now, and
    # the three items are read.
    assert check_inbox(alice).items == []
    assert [i.unread for i in check_inbox(alice, status=["pending"]).items] == [False] * 3


@pytest.mark.slow
def test_the_index_rolls_back_when_the_outbox_is_replayed(people):
    alice, bob = people["alice"], people["bob"]
    tid = busy_relay(people)
    alice.writes = "queue"
    alice.send_message(tid, "Queued, not delivered yet.")  # a local commit at seq N
    check_inbox(bob)
    bobs_idx = index_for(bob.mirror)
    alice_idx = index_for(alice.mirror)
    check_inbox(alice)
    bob.send_message(tid, "Meanwhile, on the relay.")  # takes seq N on the relay
    alice.deliver()  # fetch, replay alice's message on top, push

    report = alice_idx.update()

    assert report.rolled_back == 1 and report.applied == 2 and not report.rebuilt
    incremental = answers(alice)
    alice_idx.rebuild()
    assert answers(alice) == incremental
    reply = [i for i in everything(alice) if i.kind == "reply"]
    assert [i.unread_messages for i in reply] == [2]
    assert bobs_idx is not alice_idx


@pytest.mark.slow
def test_gitrelay_reindex_rebuilds_from_the_history(people, monkeypatch, capsys):
    alice = people["alice"]
    busy_relay(people)
    before = answers(alice)
    monkeypatch.setenv("GITRELAY_HOME", str(alice.mirror.path.parent.parent))

    code = cli_main(["reindex", "--relay", alice.relay_url, "--as", "alice@acme"])

    out = capsys.readouterr().out
    assert code == 0, out
    tip = alice.mirror.main()
    assert tip is not None
    commits = len(alice.mirror.commits_between(None, tip))
    assert f"reindexed {commits} operations (2 threads, 1 message)" in out
    assert answers(alice) == before


# --- the property: the index equals a fold of the history ---------------------------------


def fold(client: RelayClient) -> list[dict[str, Any]]:
    """The client's inbox computed from scratch from its mirror's main, without the index."""
    mirror, me = client.mirror, client.handle
    tip = mirror.main()
    assert tip is not None
    threads: dict[str, dict[str, Any]] = {}
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for commit in mirror.commits_between(None, tip)[1:]:
        seq = int(commit.trailers[layout.TRAILER_SEQ])
        op = mirror.op_of(commit)
        if op.kind == "profile":
            continue
        doc, tid = op.doc, str(op.thread_id)
        if op.kind == "handoff":
            threads[tid] = {"sender": doc["sender"], "recipient": doc["recipient"],
                            "status": "pending", "created_at": doc["created_at"],
                            "preview": doc["summary"][:240], "messages": []}
        thread = threads[tid]
        at = doc.get("created_at") or doc.get("at")
        kind = {"handoff": "assignment", "message": "reply"}.get(op.kind, "task_update")
        if op.kind == "message":
            thread["messages"].append((seq, op.actor))
            if doc["type"] == "draft":
                kind = "proposal_review"
        elif op.kind != "handoff":
            thread["status"] = {"accept": "accepted", "complete": "completed",
                                "cancel": "cancelled"}[op.kind]
        other = thread["recipient"] if op.actor == thread["sender"] else thread["sender"]
        if other == me and op.actor != me:
            items[(tid, kind)] = {"seq": seq, "at": at, "other": op.actor}
    state = inbox.inbox_state(client)
    out = []
    for (tid, kind), item in items.items():
        thread = threads[tid]
        item_id = item_id_for(me, tid, kind)
        acked = [state.acked.get(item_id_for(me, tid, k), 0)
                 for k in ("assignment", "reply", "task_update", "proposal_review")]
        point = max([state.acked_up_to, *acked])
        out.append({
            "item_id": item_id, "seq": item["seq"], "kind": kind, "thread_id": tid,
            "sender": item["other"], "status": thread["status"],
            "summary_preview": thread["preview"], "created_at": thread["created_at"],
            "updated_at": item["at"], "unread": not state.is_acked(item_id, item["seq"]),
            "unread_messages": sum(1 for s, who in thread["messages"]
                                   if who == item["other"] and s > point)})
    return sorted(out, key=lambda i: (i["seq"], i["item_id"]))


def indexed(client: RelayClient) -> list[dict[str, Any]]:
    return [{"item_id": i.item_id, "seq": i.seq, "kind": i.kind, "thread_id": i.thread_id,
             "sender": i.sender.handle, "status": i.status,
             "summary_preview": i.summary_preview, "created_at": i.created_at,
             "updated_at": i.updated_at, "unread": i.unread,
             "unread_messages": i.unread_messages}
            for i in everything(client) if i.kind != "refused"]


HANDLES = ("alice@acme", "bob@acme", "carol@acme")
who = st.integers(0, 2)
pick = st.integers(0, 50)
step = st.one_of(
    st.tuples(st.just("handoff"), who, who, st.booleans()),
    st.tuples(st.sampled_from(["message", "accept", "complete", "cancel", "draft"]), who, pick),
    st.tuples(st.sampled_from(["deliver", "fetch", "check", "drop_index"]), who),
    st.tuples(st.just("ack_up_to"), who, st.floats(0, 1)),
    st.tuples(st.just("ack_item"), who, pick),
)


def new_team(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[RelayClient]:
    relay = joining.init_relay(root / "relay.git", name="acme")
    clients = []
    for handle in HANDLES:
        monkeypatch.setenv("GITRELAY_HOME", str(root / handle.split("@")[0]))
        joining.join(str(relay), handle, name=handle.split("@")[0].title(), role="dev",
                   save=False)
        client = RelayClient(str(relay), handle, writes="queue")
        client.sync.fresh_seconds = 1e9  # only the steps fetch
        clients.append(client)
    for client in clients:
        client.refresh(max_age=0)
    return clients


def run_step(clients: list[RelayClient], threads: list[str], step: tuple[Any, ...]) -> None:
    kind, user = step[0], clients[step[1]]
    if kind == "handoff":
        to = HANDLES[step[2]]
        extra: dict[str, Any] = {"intent": "inform"}
        if step[3]:
            extra = {"intent": "propose_action", "proposed_action": {
                "description": "Rename", "target_files": ["a.py"], "rationale": "Clarity"}}
        tid = user.handoff(to=to, summary=f"Work {len(threads)}", **extra).thread_id
        assert tid is not None
        threads.append(tid)
    elif kind in ("message", "accept", "complete", "cancel", "draft") and threads:
        tid = threads[step[2] % len(threads)]
        calls = {"message": lambda: user.send_message(tid, "a note"),
                 "accept": lambda: user.accept(tid, session_id="s"),
                 "complete": lambda: user.complete(tid, result_summary="done"),
                 "cancel": lambda: user.cancel(tid),
                 "draft": lambda: user.draft_proposed_action(tid, "+x\n", "draft")}
        # Not allowed in this user's view of the thread: refused locally, nothing written.
        with contextlib.suppress(RelayError):
            calls[kind]()
    elif kind == "deliver":
        user.deliver()
    elif kind == "fetch":
        user.refresh(max_age=0)
    elif kind == "check":
        assert indexed(user) == fold(user)
    elif kind == "drop_index":
        (user.mirror.path / INDEX_FILE).unlink(missing_ok=True)
    elif kind == "ack_up_to":
        tip = user.mirror.relay_main()
        assert tip is not None
        top = int(user.mirror.objects.commit(tip).trailers[layout.TRAILER_SEQ])
        check_inbox(user, ack_up_to=int(top * step[2]))
    elif kind == "ack_item":
        items = everything(user)
        if items:
            item = items[step[2] % len(items)]
            check_inbox(user, ack_items=[{"item_id": item.item_id, "seq": item.seq}])


@pytest.mark.slow
@settings(max_examples=5, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=4, max_size=12))
def test_the_index_answers_like_a_fold_of_the_whole_history(
        steps: list[tuple[Any, ...]], tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    clients = new_team(tmp_path_factory.mktemp("prop"), monkeypatch)
    threads: list[str] = []
    for s in steps:
        run_step(clients, threads, s)
    for client in clients:
        while client.mirror.outbox() or inbox._delivery_state(client.mirror) == "queued":
            client.deliver()
    for client in clients:
        client.refresh(max_age=0)
        assert indexed(client) == fold(client)
        index_for(client.mirror).close()
