"""One sync loop per machine and relay, whichever processes start, stop or are killed.

Real processes share one person's local copy (one GITRELAY_HOME), each with a
``SyncLoop`` started as ``gitrelay mcp`` starts it; they are killed with SIGKILL, as a
crash or a closed terminal would. Exactly one of them holds the seat and runs the
passes, the others hear from it, and a write queued by any of them reaches the relay.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitrelay.relay.client import RelayClient
from gitrelay.store.config import mirror_path
from gitrelay.sync.push import Syncer
from gitrelay.sync.seat import Seat
from tests.kit import log_subjects, wait_until

pytestmark = pytest.mark.slow  # real processes, each loading gitrelay and pygit2

# One process of the person: opens the copy, starts the loop, answers commands.
PROCESS = r"""
import sys
from gitrelay.relay.client import RelayClient

relay, handle = sys.argv[1], sys.argv[2]
client = RelayClient(relay, handle, writes="queue")
loop = client.sync.start_loop()
print("ready", flush=True)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "role":
        print("lead" if loop.leading else "watch", flush=True)
    elif cmd == "send":
        client.handoff(to="bob@acme", intent="inform", summary=arg, mode="queue")
        print("queued", flush=True)
    elif cmd == "news":
        print("news" if loop.wait_for_change(60, since=int(arg)) else "none", flush=True)
    elif cmd == "gen":
        print(loop.generation, flush=True)
    elif cmd == "linger":
        # A child keeps the seat's lock for ARG seconds after this process dies: the
        # ``holder`` file closes before the lock is let go, as it can in a dying process.
        import os, subprocess
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")
               if os.path.realpath(f"/proc/self/fd/{fd}").endswith("seat.lock")]
        subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({arg})"],
                         pass_fds=fds)
        print("lingering", flush=True)
    elif cmd == "stop":
        client.sync.stop_loop()
        print("stopped", flush=True)
        break
"""


class Person:
    """One process of alice's."""

    def __init__(self, relay: Path, home: Path) -> None:
        env = {**os.environ, "GITRELAY_HOME": str(home)}
        self.proc = subprocess.Popen([sys.executable, "-c", PROCESS, str(relay), "alice@acme"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        assert self.ask_raw() == "ready"

    def ask_raw(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"process {self.proc.pid} ended (exit {self.proc.poll()})"
        return line.strip()

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.ask_raw()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.alive:
            self.proc.kill()
            self.proc.wait(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def alice_home(team: dict[str, RelayClient], tmp_path: Path) -> Path:
    """alice's GITRELAY_HOME (the team fixture joined her and bob)."""
    return tmp_path / "alice"


@pytest.fixture
def spawn(relay: Path, alice_home: Path) -> Iterator[Callable[[], Person]]:
    started: list[Person] = []

    def start() -> Person:
        person = Person(relay, alice_home)
        started.append(person)
        return person

    yield start
    for person in started:
        person.close()


def leaders(people: list[Person]) -> list[Person]:
    return [p for p in people if p.alive and p.ask("role") == "lead"]


def one_leader(people: list[Person]) -> Person | None:
    found = leaders(people)
    return found[0] if len(found) == 1 else None


def test_three_processes_run_one_loop_and_a_killed_holder_is_replaced(spawn, relay):
    people = [spawn() for _ in range(3)]
    first = wait_until(lambda: one_leader(people), lambda: f"leaders: {leaders(people)}")
    first.kill()
    rest = [p for p in people if p is not first]
    second = wait_until(lambda: one_leader(rest), "one of the two left to take the seat")
    assert len(leaders(rest)) == 1
    # A newcomer finds the seat taken and watches.
    people.append(spawn())
    assert people[-1].ask("role") == "watch"
    assert leaders(people) == [second]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the seat's lock "
                    "descriptor through /proc, which this system does not have")
def test_a_watcher_takes_the_seat_when_the_lock_is_let_go_after_the_holder_file_closed(spawn):
    holder = spawn()
    wait_until(lambda: holder.ask("role") == "lead", "the first process to hold the seat")
    watcher = spawn()
    assert watcher.ask("role") == "watch"
    assert holder.ask("linger 1.5") == "lingering"
    holder.kill()  # its holder file closes now, the seat's lock 1.5 s later
    # Well within the 120 s a watcher waits between tries when it hears nothing.
    wait_until(lambda: watcher.ask("role") == "lead", "the watcher to take the seat",
               timeout=20.0)


def test_a_write_queued_by_a_watching_process_is_delivered_by_the_holder(spawn, relay,
                                                                        alice_home):
    holder = spawn()
    wait_until(lambda: holder.ask("role") == "lead", "the first process to hold the seat")
    watcher = spawn()
    assert watcher.ask("role") == "watch"
    assert watcher.ask("send from-the-watcher") == "queued"
    # Killed at once: the write is in the shared outbox and the holder was asked.
    watcher.kill()
    wait_until(lambda: any("from-the-watcher" in s for s in log_subjects(relay)),
               "the watcher's handoff on the relay")
    assert Seat(mirror_path_in(alice_home, relay)).passes().holder == holder.proc.pid


def test_nothing_queued_is_lost_when_the_holder_is_killed(spawn, relay):
    holder = spawn()
    wait_until(lambda: holder.ask("role") == "lead", "the first process to hold the seat")
    watcher = spawn()
    holder.kill()
    assert watcher.ask("send after-the-holder-died") == "queued"
    wait_until(lambda: any("after-the-holder-died" in s for s in log_subjects(relay)),
               "the handoff delivered by the process that took the seat")
    assert watcher.ask("role") == "lead"


def test_a_watching_process_hears_of_news_the_holder_fetched(spawn, team, relay):
    holder = spawn()
    wait_until(lambda: holder.ask("role") == "lead", "the first process to hold the seat")
    watcher = spawn()
    gen = int(watcher.ask("gen"))
    team["bob"].handoff(to="alice@acme", intent="inform", summary="news for alice",
                        mode="wait")
    assert watcher.ask(f"news {gen}") == "news"


def test_a_stopped_holder_leaves_the_seat_to_another(spawn):
    holder = spawn()
    wait_until(lambda: holder.ask("role") == "lead", "the first process to hold the seat")
    watcher = spawn()
    assert holder.ask("stop") == "stopped"
    wait_until(lambda: watcher.ask("role") == "lead", "the watcher taking the free seat")


def mirror_path_in(home: Path, relay: Path) -> Path:
    env_home = os.environ.get("GITRELAY_HOME")
    os.environ["GITRELAY_HOME"] = str(home)
    try:
        return mirror_path(str(relay))
    finally:
        if env_home is None:
            del os.environ["GITRELAY_HOME"]
        else:
            os.environ["GITRELAY_HOME"] = env_home


def test_the_seat_is_held_by_one_at_a_time(tmp_path):
    seat = Seat(tmp_path)
    assert seat.take()
    other = Seat(tmp_path)
    assert not other.take() and other.taken()
    seat.leave()
    assert other.take() and other.held
    other.leave()
    assert not seat.taken()


def test_a_process_without_a_loop_has_the_machines_loop_fetch_for_it(
        spawn, team, relay, alice_home, monkeypatch: pytest.MonkeyPatch):
    holder = spawn()
    wait_until(lambda: holder.ask("role") == "lead", "the first process to hold the seat")
    monkeypatch.setenv("GITRELAY_HOME", str(alice_home))
    alice = RelayClient(str(relay), "alice@acme")  # a CLI command's client: no loop
    sent = team["bob"].handoff(to="alice@acme", intent="inform", summary="fetched for me",
                               mode="wait")

    def own_fetch(self: Syncer) -> None:
        raise AssertionError("the CLI fetched itself while a loop runs on this machine")

    monkeypatch.setattr(Syncer, "_fetch", own_fetch)
    alice.sync.refresh(max_age=0)
    assert sent.thread_id is not None
    assert alice.mirror.view().thread(sent.thread_id) is not None


def test_the_holder_leaving_wakes_the_watchers_and_failed_tries_do_not(tmp_path):
    """The watchers hear that the seat is free from the ``holder`` file's close (the
    system closes it when the holder dies too), not by trying the seat every few
    seconds; a try that fails touches no file they react to."""
    import threading

    vacant = threading.Event()
    watcher = Seat(tmp_path)
    observer = watcher.watch(lambda: None, lambda: None, vacant.set)
    try:
        holder = Seat(tmp_path)
        assert holder.take()
        assert holder.holder_path.read_text().strip() == str(os.getpid())
        assert not watcher.take()
        assert not vacant.wait(0.5)
        holder.leave()
        wait_until(vacant.is_set, "the watcher hearing that the holder left")
        assert watcher.take()
        watcher.leave()
    finally:
        observer.stop()
