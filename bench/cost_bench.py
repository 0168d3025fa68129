"""What one write costs the machines: CPU of the writer's and the reader's servers.

Two ``gitrelay mcp`` processes (alice writes, bob reads, each with their own home, as on
two laptops) on one relay on a local path with the gate. Alice makes ``n`` queue-mode
handoffs to bob through the SDK's stdio client; after each, the bench waits until
bob's server has fetched it. Each server's CPU (user and system, with the git
processes it ran and reaped: the push, the gate the push runs, the fetch) is read from
/proc before and after: divided by ``n``, the writer's and the reader's CPU per write.

Beside them, on a copy of the same relay with a hook that does nothing: a raw ``git
push`` of a one-file commit and a raw ``git fetch`` of it into another clone, their
CPU and their time (push + fetch is git's floor for delivery). Delivery is the time
from alice's call until bob's copy holds the commit, against that floor
(goal ≤ 1.5×); the peer's published 14 ms is quoted beside it.

``python -m bench.cost_bench [--quick] [--writes N]`` prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import kit, relaygen

GOAL_TOTAL_MS = 2 * 23.0    # 2× the peer's 16–23 ms of server CPU per write
GOAL_READER_MS = 10.0
GOAL_DELIVERY_RATIO = 1.5
PEER_DELIVERY_MS = 14.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def _server_pid(handle: str) -> int:
    """The `gitrelay mcp` process of ``handle`` started by this process."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and b"mcp" in cmd and handle.encode() in cmd:
            return int(entry.name)
    raise RuntimeError(f"no gitrelay mcp process of {handle}")


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def raw_floor(ws: kit.Workspace, size: tuple[int, int], n: int
              ) -> tuple[list[float], list[float], list[float], list[float]]:
    """CPU and time of a raw push and of a raw fetch of the same commit, ``n`` times."""
    relay, _ = ws.relay(size, hook="noop")
    pusher = kit.RawPusher(relay, ws.fresh("cost-raw"))
    reader = ws.fresh("cost-raw-reader") / "reader.git"
    relaygen.clone_relay(relay, reader)
    push_cpu, push_s, fetch_cpu, fetch_s = [], [], [], []
    for _ in range(n):
        cpu = _children_cpu()
        push_s.append(pusher.push())
        push_cpu.append(_children_cpu() - cpu)
        cpu, start = _children_cpu(), time.perf_counter()
        kit.git("fetch", "--quiet", str(relay), "+refs/heads/main:refs/heads/main",
                git_dir=reader)
        fetch_s.append(time.perf_counter() - start)
        fetch_cpu.append(_children_cpu() - cpu)
    return push_cpu, push_s, fetch_cpu, fetch_s


def measure(ws: kit.Workspace, size: tuple[int, int], n: int, log: kit.Log
            ) -> list[kit.Figure]:
    if not Path("/proc/self/stat").exists():
        return [kit.unavailable("cost", "CPU per write", "needs /proc (Linux)")]
    relay, _ = ws.relay(size)
    homes, trust = kit.teammates(ws, relay, size, "cost-")
    bob_copy = kit.client_for(relay, homes["bob@acme"], "bob@acme")
    delivery: list[float] = []
    cpu: dict[str, float] = {}

    async def body() -> None:
        with (ws.root / "cost-servers.log").open("w") as errlog:
            async with contextlib.AsyncExitStack() as stack:
                sessions = {}
                for h in ("alice@acme", "bob@acme"):
                    sessions[h] = await kit.sdk_session(
                        stack, kit.mcp_command(relay, h, trust[h]),
                        {**os.environ, "GITRELAY_HOME": str(homes[h])}, homes[h], errlog)
                pids = {h: _server_pid(h) for h in sessions}
                alice = sessions["alice@acme"]
                for i in range(n + 2):
                    if i == 2:  # two writes warm both servers up
                        before = {h: _cpu_seconds(p) for h, p in pids.items()}
                    start = time.perf_counter()
                    out = await alice.call_tool("handoff_to_teammate", {
                        "to": "bob@acme", "intent": "inform", "delivery": "queue",
                        "summary": f"cost probe {i}: the export job is slower since the "
                                   "index change."})
                    await _until(bob_copy, str((out.structured_content or {})["thread_id"]))
                    if i >= 2:
                        delivery.append(time.perf_counter() - start)
                after = {h: _cpu_seconds(p) for h, p in pids.items()}
                cpu.update({h: (after[h] - before[h]) / n for h in pids})

    kit.run_async(body)
    push_cpu, push_s, fetch_cpu, fetch_s = raw_floor(ws, size, n)
    floor = [p + f for p, f in zip(push_s, fetch_s, strict=True)]
    writer_ms, reader_ms = cpu["alice@acme"] * 1000, cpu["bob@acme"] * 1000
    load = os.getloadavg()[0]
    note = f"{n} handoffs, queue mode; load average {load:.1f}"
    log(f"cost: writer {writer_ms:.1f} ms, reader {reader_ms:.1f} ms of CPU per write; {note}")
    sec = "cost per write"
    ms = 1000.0
    return [
        kit.Figure(sec, "writer's server CPU per write", "ms", writer_ms, note=note),
        kit.Figure(sec, "reader's server CPU per write (its sync)", "ms", reader_ms,
                   goal=f"≤ {GOAL_READER_MS:g} ms", limit=GOAL_READER_MS),
        kit.Figure(sec, "total server CPU per write (writer + reader)", "ms",
                   writer_ms + reader_ms, goal=f"≤ {GOAL_TOTAL_MS:g} ms (2× the peer's 23)",
                   limit=GOAL_TOTAL_MS),
        kit.Figure(sec, "raw git push: CPU (no-op hook)", "ms",
                   statistics.median(push_cpu) * ms),
        kit.Figure(sec, "raw git fetch of that commit: CPU", "ms",
                   statistics.median(fetch_cpu) * ms),
        kit.ms_figure(sec, "delivery: call to the reader's copy", delivery,
                      note=f"the peer's published delivery: {PEER_DELIVERY_MS:g} ms"),
        kit.ms_figure(sec, "raw git push + raw git fetch (git's floor)", floor),
        kit.ratio_figure(sec, "delivery / raw push + fetch", delivery, floor,
                         limit=GOAL_DELIVERY_RATIO),
    ]


async def _until(bob: Any, thread_id: str, timeout: float = 30.0) -> None:
    """Until bob's copy (as his server's loop fetched it) holds the thread."""
    import anyio

    deadline = time.monotonic() + timeout
    while True:  # polls itself: the bench's wait, a few ms apart
        tip = bob.mirror.relay_main()
        if tip is not None and bob.mirror.view(tip).thread(thread_id) is not None:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the write never reached the reader's copy")
        await anyio.sleep(0.002)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--writes", type=int)
    args = parser.parse_args(argv)
    with kit.experiment_workspace(None, "cost") as ws:
        size = kit.QUICK.write_relay if args.quick else kit.FULL.write_relay
        n = args.writes or (5 if args.quick else 30)
        figures = measure(ws, size, n, lambda m: print(m, file=sys.stderr))
    print(kit.format_table(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
