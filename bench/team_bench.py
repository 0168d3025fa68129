"""A team on one relay: what it costs the git server and each laptop.

``people`` simulated teammates (50 in the full run) on one relay served by a real
OpenSSH ``sshd`` on this machine (the one ``tests/servers`` sets up, each teammate with
a key of their own, a forced command that logs every git request). Each teammate has
their own GITRELAY_HOME (their laptop) and ``sessions`` agent sessions open on it (2):
every session opens the copy and starts a sync loop as ``gitrelay mcp`` does, so one of
them runs it and the other watches. Each laptop is a process of its own (forked from
this one), as the laptops are machines of their own.

The work: each teammate sends a handoff to a random teammate at random times, a few
an hour (``handoffs_per_hour``), and the recipient's session reads it in its
``check_inbox`` and answers it with a message (it long-polls its loop's
``wait_for_change`` as an agent woken by the waiter would). After a quiet start
(everyone's loops settle), the run lasts ``seconds`` (its first third quiet); then:

- git requests per minute at the server (from the forced command's log), while quiet
  (the first third, before any handoff) and while the team works, and the ssh
  connections that carried them (the laptops share one per relay while it is busy);
- the server's CPU (sshd, its children and the git processes and gates they ran, the
  connections still open included);
- delivery: from a handoff call to the recipient's check_inbox showing it, p50 and
  p95 (both moments read from this machine's clock). The
  goal is judged on the handoffs sent while the team works: those of the first
  ``MAX_INTERVAL`` seconds after the quiet third find the recipients' loops looking
  once a minute (the quiet relay's schedule) and are reported on their own;
- each laptop's CPU: the laptops' processes (and what they ran), with the ssh
  processes that hold their shared connections, divided by the number of teammates.

``python -m bench.team_bench [--quick] [--people N] [--seconds S]`` prints the table.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import kit

GOAL_QUIET_REQUESTS_PER_S = 1.0
GOAL_P95_DELIVERY_S = 5.0


def _processes() -> dict[int, tuple[int, float, bytes]]:
    """Every process: pid -> (parent, CPU seconds with its reaped children, cmdline)."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        found[int(entry.name)] = (int(fields[1]),
                                  sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick, cmd)
    return found


def _tree_cpu(pid: int, procs: dict[int, tuple[int, float, bytes]]) -> float:
    """CPU of ``pid`` and of every live descendant, each with what it reaped: a long
    ssh connection's processes count before they exit."""
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in procs.items():
        children.setdefault(parent, []).append(child)
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += procs[p][1] if p in procs else 0.0
        todo.extend(children.get(p, []))
    return total


def _cpu(sshd: int, homes: Path) -> tuple[float, float]:
    """(the server's CPU, the laptops' CPU): the laptops are this process without the
    server it started, and the ssh processes holding their shared connections (which
    leave this process's tree)."""
    procs = _processes()
    server = _tree_cpu(sshd, procs)
    masters = sum(cpu for _, cpu, cmd in procs.values()
                  if cmd.startswith(b"ssh") and str(homes).encode() in cmd)
    return server, _tree_cpu(os.getpid(), procs) - server + masters


def _requests(log: Path) -> tuple[int, int]:
    """(git requests, distinct ssh connections that carried them) in the log so far."""
    lines = [line for line in log.read_text().splitlines() if line.startswith("accepted")]
    return len(lines), len({line.rsplit("connection=", 1)[-1] for line in lines})


def measure(ws: kit.Workspace, people: int, sessions: int, seconds: float,
            handoffs_per_hour: float, log: kit.Log, settle: float = 240.0
            ) -> list[kit.Figure]:
    """``settle``: seconds between the joins and the quiet window: after 4 minutes the
    loops look at a quiet relay at their slowest (the joins were its last activity)."""
    try:
        from tests.servers import require_binaries
        from tests.servers.ssh import ssh_git_server

        require_binaries(["sshd", "ssh", "ssh-keygen", "git"])
    except BaseException as exc:  # a missing sshd skips (pytest's Skipped is a BaseException)
        return [kit.unavailable("team", "team simulation", f"no local sshd: {exc}")]
    from gitrelay.relay import joining

    names = [f"t{i:03d}" for i in range(people)]
    root = ws.fresh("team")
    fork = multiprocessing.get_context("fork")
    work, stop = fork.Event(), fork.Event()
    events: Any = fork.Queue()
    with ssh_git_server(root / "served", users=names) as server:
        joining.init_relay(server.root / "relay.git", name="acme")
        url = server.url("relay.git", names[0])
        laptops = []
        started = time.monotonic()
        for i, name in enumerate(names):
            env = {"GIT_SSH_COMMAND": server.client_env(name)["GIT_SSH_COMMAND"]}
            home = root / f"home-{name}"
            with kit.gitrelay_home(home):
                joining.join(url, f"{name}@acme", name=name.title(), role="engineer",
                             usernames=[name], save=False, env=env)
            laptops.append(fork.Process(
                target=_laptop, name=f"laptop-{name}", daemon=True,
                args=(Laptop(name, url, env, home, sessions, names, handoffs_per_hour, i),
                      work, stop, events)))
        log(f"team: {people} teammates joined over ssh in {time.monotonic() - started:.0f} s")
        for laptop in laptops:
            laptop.start()
        assert server.forced_command_log is not None
        sshd = server.processes[0].pid
        try:
            figures = _run(people, sessions, events, work, stop, server.forced_command_log,
                           lambda: _cpu(sshd, root), seconds, handoffs_per_hour, log, settle)
        finally:
            stop.set()
            for laptop in laptops:
                laptop.join(10)
                if laptop.is_alive():
                    laptop.kill()
    return figures


@dataclass(frozen=True)
class Laptop:
    """One teammate's laptop: who, where its copy lives, and its share of the work."""

    name: str
    url: str
    env: dict[str, str]
    home: Path
    sessions: int
    names: list[str]
    handoffs_per_hour: float
    seed: int


def _laptop(me: Laptop, work: Any, stop: Any, events: Any) -> None:
    """A laptop's process: ``sessions`` clients with their loops; once ``work`` is set,
    one session hands work off at random times and the other answers what reaches its
    inbox. Reports ("ready"/"sent"/"seen", thread id, time.time()) on ``events``."""
    os.environ["GITRELAY_HOME"] = str(me.home)
    from gitrelay.core.vocab import ASSIGNMENT
    from gitrelay.inbox.inbox import check_inbox
    from gitrelay.relay.client import RelayClient

    clients = [RelayClient(me.url, f"{me.name}@acme", writes="queue", env=me.env)
               for _ in range(me.sessions)]
    loops = [c.sync.start_loop() for c in clients]
    events.put(("ready", me.name, float(sum(1 for lp in loops if lp.leading))))
    rng = random.Random(me.seed)

    def teammate() -> None:
        sender = clients[0]
        while not stop.wait(rng.expovariate(me.handoffs_per_hour / 3600.0)):
            to = rng.choice([n for n in me.names if n != me.name])
            sent = sender.handoff(to=f"{to}@acme", intent="inform",
                                  summary=f"{me.name} to {to}: the nightly export needs a look")
            events.put(("sent", str(sent.thread_id), time.time()))

    def reader() -> None:
        session = clients[-1]  # the session that watches (or holds) the loop
        loop = session.sync.loop
        assert loop is not None
        answered: set[str] = set()
        while not stop.is_set():
            gen = loop.generation
            for item in check_inbox(session, limit=50).items:
                if item.kind == ASSIGNMENT and item.thread_id not in answered:
                    answered.add(item.thread_id)
                    events.put(("seen", item.thread_id, time.time()))
                    session.send_message(thread_id=item.thread_id, body="Looking at it now.")
            loop.wait_for_change(1.0, since=gen)

    while not work.wait(1.0):
        if stop.is_set():
            break
    threads = [threading.Thread(target=f, daemon=True) for f in (teammate, reader)]
    if not stop.is_set():
        for t in threads:
            t.start()
    stop.wait()
    events.put(("loops", me.name, float(sum(1 for lp in loops if lp.leading))))
    for t in threads:
        t.join(5)
    for c in clients:
        c.sync.stop_loop(flush=False, timeout=2)


def _run(people: int, sessions: int, events: Any, work: Any, stop: Any, request_log: Path,
         cpu: Callable[[], tuple[float, float]], seconds: float, handoffs_per_hour: float,
         log: kit.Log, settle: float) -> list[kit.Figure]:
    from gitrelay.sync.loop import MAX_INTERVAL

    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    holders: dict[str, float] = {}
    ready: set[str] = set()

    def drain(until: float) -> None:
        while True:
            try:
                kind, key, at = events.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                return
            if kind == "ready":
                ready.add(key)
            elif kind == "sent":
                sent[key] = at
            elif kind == "seen":
                seen.setdefault(key, at)
            elif kind == "loops":
                holders[key] = at

    deadline = time.monotonic() + 120
    while len(ready) < people and time.monotonic() < deadline:
        drain(time.monotonic() + 1)
    drain(time.monotonic() + settle)  # the loops' first looks settle; the team is quiet
    quiet_s = seconds / 3
    (r0, n0), (s0, c0) = _requests(request_log), cpu()
    drain(time.monotonic() + quiet_s)  # nobody works: what open sessions cost by themselves
    (r1, n1), (s1, c1) = _requests(request_log), cpu()
    work_from = time.time()
    work.set()
    work_s = seconds - quiet_s
    drain(time.monotonic() + work_s)
    (r2, n2), (s2, c2) = _requests(request_log), cpu()
    stop.set()
    drain(time.monotonic() + 5)  # what the laptops say as they stop
    load = os.getloadavg()[0]
    quiet_rps = (r1 - r0) / quiet_s
    work_rpm = (r2 - r1) / work_s * 60
    delivery = [(at, seen[tid] - at) for tid, at in sent.items() if tid in seen]
    # Handoffs of the first MAX_INTERVAL s after the quiet third met loops that look
    # once a minute; the rest were sent while the team worked.
    warm = [d for at, d in delivery if at >= work_from + MAX_INTERVAL]
    cold = [d for at, d in delivery if at < work_from + MAX_INTERVAL]
    running = sum(holders.values())
    note = (f"{people} teammates × {sessions} sessions over ssh, one process each, "
            f"{handoffs_per_hour:g} handoffs/hour each, each answered; quiet {quiet_s:.0f} s "
            f"then working {work_s:.0f} s; {len(delivery)} delivered, "
            f"{len(sent) - len(delivery)} not yet; loops running: {running:g}; "
            f"load average {load:.1f}")
    log(f"team: {note}")
    log("team: each handoff, sent s after the work began -> s to the recipient's inbox: " +
        ", ".join(f"{at - work_from:.0f}->{d:.1f}" for at, d in sorted(delivery)))
    sec = f"team scale ({people} teammates)"
    figs = [        kit.Figure(sec, "git requests at the server, quiet", "req/s", quiet_rps,
                   goal=f"≤ {GOAL_QUIET_REQUESTS_PER_S:g} req/s",
                   limit=GOAL_QUIET_REQUESTS_PER_S, note=note),
        kit.Figure(sec, "ssh connections at the server, quiet", "conn/s",
                   (n1 - n0) / quiet_s),
        kit.Figure(sec, "git requests at the server, working", "req/min", work_rpm),
        kit.Figure(sec, "ssh connections at the server, working", "conn/min",
                   (n2 - n1) / work_s * 60, note="the requests above ride them"),
        kit.Figure(sec, "server CPU, quiet", "ms/s", (s1 - s0) * 1000 / quiet_s),
        kit.Figure(sec, "server CPU, working", "ms/s", (s2 - s1) * 1000 / work_s),
        kit.Figure(sec, "each laptop's CPU, quiet", "ms/s",
                   (c1 - c0) * 1000 / quiet_s / people),
        kit.Figure(sec, "each laptop's CPU, working", "ms/s",
                   (c2 - c1) * 1000 / work_s / people),
        kit.Figure(sec, "sync loops running", "loops", running,
                   goal=f"= {people}", limit=float(people)),
    ]
    if delivery:
        every = [d for _, d in delivery]
        figs.append(kit.Figure(sec, "delivery, handoff call to the recipient's check_inbox", "s",
                               statistics.median(every), kit.p95(every),
                               note=f"all {len(every)} handoffs delivered"))
    if cold:
        figs.append(kit.Figure(
            sec, "delivery after a quiet spell (first minute of work), longest", "s",
            max(cold), goal=f"≤ {MAX_INTERVAL:g} s + a delivery (the quiet schedule)",
            limit=MAX_INTERVAL + GOAL_P95_DELIVERY_S,
            note=f"{len(cold)} handoffs sent in the first {MAX_INTERVAL:g} s of work"))
    if warm:
        p95 = kit.p95(warm)
        figs.append(kit.Figure(sec, "delivery while the team works", "s",
                               statistics.median(warm), p95,
                               goal=f"p95 ≤ {GOAL_P95_DELIVERY_S:g} s"))
        figs.append(kit.Figure(sec, "delivery p95 while the team works", "s", p95,
                               goal=f"≤ {GOAL_P95_DELIVERY_S:g} s",
                               limit=GOAL_P95_DELIVERY_S,
                               note=f"{len(warm)} handoffs sent after the first "
                                    f"{MAX_INTERVAL:g} s of work"))
    return figs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.team_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--people", type=int)
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--handoffs-per-hour", type=float, default=4.0)
    parser.add_argument("--settle", type=float,
                        help="seconds between the joins and the quiet window (240; quick 20)")
    args = parser.parse_args(argv)
    kit.hermetic_environment(Path(os.environ.get("TMPDIR", "/tmp")))
    with kit.experiment_workspace(None, "team") as ws:
        people = args.people or (5 if args.quick else 50)
        seconds = args.seconds or (60.0 if args.quick else 600.0)
        figures = measure(ws, people, args.sessions, seconds, args.handoffs_per_hour,
                          lambda m: print(m, file=sys.stderr),
                          settle=args.settle if args.settle is not None
                          else 20.0 if args.quick else 240.0)
    print(kit.format_table(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
