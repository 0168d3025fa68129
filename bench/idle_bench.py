"""What idle sessions cost their machine: CPU per second, and who looks at the relay.

Three ``gitrelay mcp`` servers of one person (one GITRELAY_HOME, one relay on a local
path, each started as a coding host starts it) sit idle, connected and asked nothing,
for ``seconds`` (300 in the full run, 20 in --quick) after a warm-up. Each one's CPU
(user and system, with the git processes it ran and reaped) is read from /proc at the
start and the end of the window. The figures: the CPU per second of the median and of
the busiest session (goal ≤ 0.2 ms/s each), and how many of them hold the sync loop's
seat (exactly one: one loop per machine and relay).

``python -m bench.idle_bench [--quick] [--seconds N]`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import kit

SESSIONS = 3
GOAL_MS_PER_S = 0.2
# Start-up's last work (the first look, the election, imports done lazily) settles first.
WARMUP_S = 30.0


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` and its reaped children (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(ws: kit.Workspace, size: tuple[int, int], seconds: float,
            log: kit.Log, warmup: float = WARMUP_S) -> list[kit.Figure]:
    if not Path("/proc/self/stat").exists():
        return [kit.unavailable("idle", "idle session CPU", "needs /proc (Linux)")]
    relay, _ = ws.relay(size)
    homes, trust = kit.teammates(ws, relay, size, "idle-")
    home = homes["alice@acme"]
    env = {**os.environ, "GITRELAY_HOME": str(home)}
    procs = [subprocess.Popen([kit.PY, *kit.mcp_command(relay, "alice@acme",
                                                         trust["alice@acme"])],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env, cwd=str(home))
             for _ in range(SESSIONS)]
    try:
        time.sleep(warmup)
        before = [_cpu_seconds(p.pid) for p in procs]
        started = time.monotonic()
        time.sleep(seconds)
        after = [_cpu_seconds(p.pid) for p in procs]
        took = time.monotonic() - started
        mirrors = list((home / "mirrors").glob("*.git"))
        passes = json.loads((mirrors[0] / "gitrelay-loop" / "passes.json").read_text()) \
            if mirrors else {}
        holders = sum(p.pid == passes.get("holder") for p in procs)
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
            if p.stdin is not None:
                p.stdin.close()
    per_s = [(a - b) * 1000 / took for a, b in zip(after, before, strict=True)]
    load = os.getloadavg()[0]
    note = (f"{SESSIONS} sessions of one person idle for {took:.0f} s after {warmup:.0f} s; each: "
            f"{', '.join(f'{x:.3f}' for x in per_s)} ms/s; load average {load:.1f}")
    log(f"idle: {note}")
    return [
        kit.Figure("idle", "idle session CPU (median session)", "ms/s",
                   statistics.median(per_s), max(per_s), goal=f"≤ {GOAL_MS_PER_S:g} ms/s",
                   limit=GOAL_MS_PER_S, note=note),
        kit.Figure("idle", "idle session CPU (busiest session)", "ms/s", max(per_s),
                   goal=f"≤ {GOAL_MS_PER_S:g} ms/s", limit=GOAL_MS_PER_S),
        kit.Figure("idle", "sync loops running for one person's sessions", "loops",
                   float(holders), goal="= 1", limit=1.0,
                   note="processes holding the seat of the local copy"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float)
    args = parser.parse_args(argv)
    with kit.experiment_workspace(None, "idle") as ws:
        size = kit.QUICK.small_relay
        seconds = args.seconds or (20.0 if args.quick else 300.0)
        figures = measure(ws, size, seconds, lambda m: print(m, file=sys.stderr))
    print(kit.format_table(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
