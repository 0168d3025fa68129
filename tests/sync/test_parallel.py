"""A long run of commits checked on several processes says what one process says.

GIVEN a relay's history with a forged commit somewhere in it (pushed where no
gate runs)
WHEN the run is checked split over this process and child interpreters
THEN the first invalid commit, its rule and its reason are those of checking one
commit after the other; the children's answers are used (this process checks
only its own slice), and a child that cannot start or answer costs only time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrelay.core.objects import Commit
from gitrelay.relay import joining
from gitrelay.store.gitstore import Store
from gitrelay.sync import parallel
from tests.kit import forge, join_each, message_op, push, transition_op


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Commit]]:
    """A gate-less relay: a dozen genuine operations, a forged accept, then more."""
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", hook=False)
    clients = join_each(relay, tmp_path, monkeypatch)
    alice, bob = clients["alice@acme"], clients["bob@acme"]
    alice.refresh(max_age=0)
    tid = str(alice.handoff(to="bob@acme", intent="inform", summary="paging").thread_id)
    for n in range(8):
        alice.send_message(tid, f"note {n}")
    forged = forge(alice.mirror, transition_op("accept", tid, "alice@acme"))
    assert push(alice.mirror.path, str(relay), forged, "refs/heads/main").returncode == 0
    after = forge(alice.mirror, message_op(tid, "bob@acme", "later"), base=forged)
    assert push(alice.mirror.path, str(relay), after, "refs/heads/main").returncode == 0
    store = Store(relay)
    tip = store.ref("refs/heads/main")
    chain: list[Commit] = []
    while tip:
        commit = store.objects.commit(tip)
        chain.append(commit)
        tip = commit.parents[0] if commit.parents else None
    chain.reverse()
    bob.refresh(max_age=0)  # keeps the fixture honest: bob stops before the forgery
    assert bob.mirror.relay_main() == chain[-3].oid
    return relay, chain


def run(relay: Path, chain: list[Commit], processes: int) -> parallel.Invalid | None:
    return parallel.first_invalid(relay, Store(relay).objects, chain[1:], chain[0],
                                  processes=processes)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 3, 5])
def test_several_processes_find_what_one_finds(history: tuple[Path, list[Commit]],
                                               processes: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    relay, chain = history
    one = run(relay, chain, 1)
    assert one is not None and one.rule == "not_authorized_transition"
    assert chain[1 + one.index].oid == chain[-2].oid
    monkeypatch.setattr(parallel, "PARALLEL_MIN_COMMITS", 2)
    here: list[int] = []
    real = parallel._check_slice

    def counted(objs, commits, parent, offset, limit):  # type: ignore[no-untyped-def]
        here.append(offset)
        return real(objs, commits, parent, offset, limit)

    monkeypatch.setattr(parallel, "_check_slice", counted)
    assert run(relay, chain, processes) == one
    assert here == [0], "only this process's own slice is checked here"


@pytest.mark.slow
def test_a_clean_run_is_clean_however_it_is_split(history: tuple[Path, list[Commit]],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    relay, chain = history
    monkeypatch.setattr(parallel, "PARALLEL_MIN_COMMITS", 2)
    genuine = chain[:-2]
    for processes in (1, 2, 4):
        assert parallel.first_invalid(relay, Store(relay).objects, genuine[1:], genuine[0],
                                      processes=processes) is None


def test_a_child_that_cannot_start_costs_only_time(history: tuple[Path, list[Commit]],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    relay, chain = history
    one = run(relay, chain, 1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_COMMITS", 2)
    monkeypatch.setattr(parallel.sys, "executable", str(relay / "no-such-python"))
    assert run(relay, chain, 3) == one


def test_a_child_that_answers_nonsense_is_not_believed(history: tuple[Path, list[Commit]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A child whose interpreter runs but cannot check (here: `true`, which prints
    nothing and exits 0) has its slice checked here."""
    relay, chain = history
    one = run(relay, chain, 1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_COMMITS", 2)
    monkeypatch.setattr(parallel.sys, "executable", "/bin/true")
    assert run(relay, chain, 3) == one


@pytest.mark.slow
def test_gitrelay_verify_reports_the_same_problems_on_several_processes(
        history: tuple[Path, list[Commit]], monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitrelay verify` checks every commit against its parent and lists every
    problem: split over processes, the report is the same, line for line."""
    from gitrelay.sync.verify import verify_relay

    relay, chain = history
    mirror = Store(relay)
    tid = chain[-1].trailers["Gitrelay-Thread"]
    from gitrelay.store.mirror import Mirror

    second = forge(Mirror(relay, "alice@acme"), transition_op("cancel", tid, "bob@acme"),
                   base=chain[-1].oid)
    mirror.set_ref("refs/heads/main", second, "test: a second forgery")
    monkeypatch.setattr(parallel, "processes_available", lambda: 1)
    serial = verify_relay(str(relay))
    assert [p.rule for p in serial.problems] == ["not_authorized_transition",
                                                 "not_authorized_transition"]
    monkeypatch.setattr(parallel, "PARALLEL_MIN_COMMITS", 2)
    for processes in (2, 4):
        monkeypatch.setattr(parallel, "processes_available", lambda n=processes: n)
        split = verify_relay(str(relay))
        assert split.text() == serial.text()
        assert split.valid_until == serial.valid_until == chain[-3].oid
