"""What the hooks add to a host's turn, and how fast the waiter wakes.

Every figure runs the installed ``gitrelay hook EVENT`` command exactly as a host
does (a new process, its JSON on stdin) for a user with a ready local copy of a
generated relay (10,000 threads by default):

- ``session-start``: a session's first look at the inbox (a new session id each run;
  the relay is asked for news first, and has none, so the inbox index answers);
- ``session-start`` after a teammate's handoff reached the relay while nothing ran:
  the fetch and the full read it takes (report);
- ``stop``: a stop with nothing new (the common case: everything was shown);
- ``pre-tool-use``: the guard, with an accepted handoff in progress (an Edit outside
  ``auto_write_paths``: ``ask``), and with none (no opinion);
- the floor: the interpreter starting and exiting, for comparison;
- wake-up: from a teammate's handoff being delivered to the waiter's exit;
- the waiter's end: from the stop of an unattended run (``claude -p``, which waits for
  the waiter before it exits) to the waiter's exit, and from its host being killed to
  the waiter's exit.

The goals are the hooks' as the host runs them (issue 36): pre-tool-use ≤ 60 ms, stop
≤ 100 ms, session-start ≤ 300 ms with its look at the relay (here a relay on a local
path); ``claude -p`` exits within 2 s of its result; no waiter outlives its host by
more than 5 s. A host adds its own cost to each hook (a shell, its process spawn).

``python -m bench.hooks_bench [--quick] [--reps N]`` prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import kit

GITRELAY = str(Path(sys.executable).parent / "gitrelay")
FULL_SIZE = (10_000, 50_000)
QUICK_SIZE = (100, 500)
GOAL_PRE_TOOL_USE_MS = 60.0
GOAL_STOP_MS = 100.0
GOAL_SESSION_START_MS = 300.0
GOAL_UNATTENDED_EXIT_MS = 2000.0
GOAL_ORPHAN_EXIT_MS = 5000.0
UNATTENDED = {"CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}  # what `claude -p` gives its hooks


def _hook(env: dict[str, str], event: str, payload: dict[str, Any]
          ) -> tuple[float, Any, float]:
    """Seconds of wall time, the finished process, and its CPU seconds (user and system,
    with the processes it ran): on a busy machine the CPU time says what the hook costs
    better than the wall time, which waits for the other processes too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([GITRELAY, "hook", event, "--host", "claude"],
                          input=json.dumps(payload), capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 2):
        raise RuntimeError(f"hook {event} failed: {proc.stderr.strip()}")
    return took, proc, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _event(name: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/dev/null", "cwd": str(cwd),
            "permission_mode": "default", "hook_event_name": name, **fields}


def _floor(reps: int, cpu: list[float] | None = None) -> list[float]:
    out = []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        out.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cpu is not None:
            cpu.append((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime))
    return out


def run(quick: bool = False, reps: int | None = None, log: kit.Log = print,
        work: Path | None = None) -> list[kit.Figure]:
    """The figures, in a workspace of their own (``python -m bench.hooks_bench``)."""
    root = work or Path(tempfile.mkdtemp(prefix="gitrelay-hooks-bench-"))
    kit.hermetic_environment(root)
    return measure(kit.Workspace(root, log), QUICK_SIZE if quick else FULL_SIZE,
                   reps or (10 if quick else 100), 3 if quick else 10, log)


def measure(ws: kit.Workspace, size: tuple[int, int], reps: int, wake_reps: int,
            log: kit.Log) -> list[kit.Figure]:
    """Every figure on a relay of ``size`` (``python -m bench --only hooks`` too)."""
    section = f"hooks ({size[0]:,} threads)"
    root = ws.fresh("hooks")
    relay, info = ws.relay(size)
    me, other = info.team[1], info.team[0]
    accepted = [t for t in info.samples.get(me, []) if t[2] == "accepted"]
    if not accepted:
        raise RuntimeError(f"{me} has no accepted thread in the generated relay")
    home, sender_home = root / "me", root / "sender"
    kit.seed_user(relay, size, home, me, ws)
    kit.seed_user(relay, size, sender_home, other, ws)
    from gitrelay.store.config import UserConfig, save_user_config

    with kit.gitrelay_home(home):
        save_user_config(UserConfig(relay=str(relay), handle=me, writes="wait"))
    trust = kit.trust_file(home, info.team)
    work = root / "work-tree"
    (work / ".git").mkdir(parents=True)
    env = {**os.environ, "GITRELAY_HOME": str(home), "HOME": str(root / "user-home"),
           "GITRELAY_TRUST": str(trust)}

    tid = str(accepted[0][0])
    start = _hook(env, "session-start", _event("SessionStart", "steady", work,
                                               source="startup"))[1]
    if "additionalContext" not in start.stdout:
        raise RuntimeError(f"session-start listed nothing: {start.stdout!r} {start.stderr!r}")
    _hook(env, "post-tool-use", _event(
        "PostToolUse", "steady", work, tool_name="mcp__gitrelay__accept_handoff",
        tool_input={"thread_id": tid}, tool_response={"thread_id": tid}))
    edit = {"tool_name": "Edit", "tool_input": {"file_path": str(work / "src" / "x.py"),
                                                "old_string": "a", "new_string": "b"}}
    probe = _hook(env, "pre-tool-use", _event("PreToolUse", "steady", work, **edit))[1]
    if '"ask"' not in probe.stdout:
        raise RuntimeError(f"the guard did not ask: {probe.stdout!r} {probe.stderr!r}")
    _hook(env, "stop", _event("Stop", "steady", work, stop_hook_active=False))

    log(f"measuring the hooks {reps} times each, interleaved, on {relay}")
    times: dict[str, list[float]] = {k: [] for k in ("start", "stop", "guarded", "idle",
                                                    "floor")}
    cpu: dict[str, list[float]] = {k: [] for k in ("start", "stop", "guarded", "floor")}
    for n in range(reps):  # interleaved, so that a busy machine slows each alike
        times["floor"] += _floor(1, cpu["floor"])
        for name, event, payload in (
                ("start", "session-start", _event("SessionStart", f"start-{n}", work,
                                                  source="startup")),
                ("stop", "stop", _event("Stop", "steady", work, stop_hook_active=False)),
                ("guarded", "pre-tool-use", _event("PreToolUse", "steady", work, **edit))):
            took, _, used = _hook(env, event, payload)
            times[name].append(took)
            cpu[name].append(used)
        times["idle"].append(_hook(env, "pre-tool-use",
                                   _event("PreToolUse", "idle", work, **edit))[0])
    inside = _in_process(env, reps, {
        "start": ("session-start", _event("SessionStart", "inside", work, source="startup")),
        "guarded": ("pre-tool-use", _event("PreToolUse", "steady", work, **edit))})

    wakes, cold, ends, orphans = [], [], [], []
    sender = kit.client_for(relay, sender_home, other)
    lock = home / "sessions" / "claude"
    for n in range(wake_reps):
        session = f"wait-{n}"
        _hook(env, "session-start", _event("SessionStart", session, work, source="startup"))
        waiter = _start_waiter(env, lock, session, "Stop")
        with kit.gitrelay_home(sender_home):
            sender.handoff(to=me, intent="inform", summary=f"bench wake {uuid.uuid4()}")
        sent = time.perf_counter()
        _, err = waiter.communicate(timeout=120)
        wakes.append(time.perf_counter() - sent)
        if waiter.returncode != 2:
            raise RuntimeError(f"the waiter left without waking: {err!r}")
        # A handoff that reaches the relay while nothing of gitrelay runs: the next
        # session's start fetches it and reads the full way.
        with kit.gitrelay_home(sender_home):
            sender.handoff(to=me, intent="inform", summary=f"bench cold {uuid.uuid4()}")
        took, proc, _ = _hook(env, "session-start", _event("SessionStart", f"cold-{n}", work,
                                                           source="startup"))
        if "bench cold" not in proc.stdout:
            raise RuntimeError(f"the cold start missed the handoff: {proc.stdout[:200]!r}")
        cold.append(took)
        ends.append(_unattended_end(env, lock, work, f"p-{n}"))
        orphans.append(_orphan_end(env, lock, work, f"orphan-{n}"))
    floor = times["floor"]
    return [
        kit.ms_figure(section, "session-start hook (a new session)", times["start"],
                        limit=GOAL_SESSION_START_MS),
        kit.ms_figure(section, "session-start, the work alone (in one process)",
                        inside["start"]),
        kit.ms_figure(section, "session-start after a handoff arrived while nothing ran",
                        cold),
        kit.ms_figure(section, "stop hook (nothing new)", times["stop"], limit=GOAL_STOP_MS),
        kit.ms_figure(section, "pre-tool-use guard, handoff in progress", times["guarded"],
                        limit=GOAL_PRE_TOOL_USE_MS),
        kit.ms_figure(section, "pre-tool-use guard, nothing in progress", times["idle"],
                        limit=GOAL_PRE_TOOL_USE_MS),
        kit.ms_figure(section, "pre-tool-use, the decision alone (in one process)",
                        inside["guarded"]),
        kit.ms_figure(section, "floor: the interpreter starting and exiting", floor),
        kit.ms_figure(section, "CPU time: session-start", cpu["start"]),
        kit.ms_figure(section, "CPU time: stop", cpu["stop"]),
        kit.ms_figure(section, "CPU time: pre-tool-use, handoff in progress",
                        cpu["guarded"]),
        kit.ms_figure(section, "CPU time: the floor", cpu["floor"]),
        kit.ms_figure(section, "wake-up: handoff delivered to waiter exit", wakes),
        kit.ms_figure(section, "claude -p: its stop to the waiter's exit", ends,
                        limit=GOAL_UNATTENDED_EXIT_MS),
        kit.ms_figure(section, "host killed to the waiter's exit", orphans,
                        limit=GOAL_ORPHAN_EXIT_MS),
    ]


def _start_waiter(env: dict[str, str], folder: Path, session: str, event: str
                  ) -> subprocess.Popen[str]:
    waiter = subprocess.Popen([GITRELAY, "hook", "wait", "--host", "claude", "--timeout",
                               "120"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    _wait_for_waiter(folder, waiter, session, event)
    return waiter


def _unattended_end(env: dict[str, str], folder: Path, work: Path, session: str) -> float:
    """An unattended run (``claude -p``): its waiter, started at its start, leaves when
    the stop hook marks the turn over; seconds from the stop hook's start to that."""
    quiet = {**env, **UNATTENDED}
    _hook(quiet, "session-start", _event("SessionStart", session, work, source="startup"))
    waiter = _start_waiter(quiet, folder, session, "SessionStart")
    started = time.perf_counter()
    _hook(quiet, "stop", _event("Stop", session, work, stop_hook_active=False))
    waiter.communicate(timeout=60)
    return time.perf_counter() - started


def _orphan_end(env: dict[str, str], folder: Path, work: Path, session: str) -> float:
    """A host that starts the waiter and is killed (no SessionEnd): seconds from the kill
    to the waiter's exit, seen as its lock being released."""
    from gitrelay.hosts.session import SessionStore

    given = folder.parent / f"{session}.json"
    given.parent.mkdir(parents=True, exist_ok=True)
    given.write_text(json.dumps(_event("Stop", session, work, stop_hook_active=False)))
    host = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([{GITRELAY!r}, 'hook', 'wait', '--host', 'claude'], "
        f"stdin=open({str(given)!r}))\n"
        "time.sleep(300)\n")], env=env)
    store = SessionStore("claude", folder.parent)
    try:
        deadline = time.monotonic() + 60
        while not store.held(session, "wait"):
            if time.monotonic() > deadline:
                raise RuntimeError("the waiter did not start waiting in 60 s")
            time.sleep(0.01)
        host.kill()
        host.wait()
        killed = time.perf_counter()
        while store.held(session, "wait"):
            if time.perf_counter() - killed > 30:
                raise RuntimeError("the waiter outlived its host by 30 s")
            time.sleep(0.01)
        return time.perf_counter() - killed
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def _in_process(env: dict[str, str], reps: int, calls: dict[str, tuple[str, dict[str, Any]]]
                ) -> dict[str, list[float]]:
    """Each hook's work without starting Python and importing gitrelay: run in this
    process after one warm-up call."""
    from gitrelay.hosts.hookrun import run_hook

    saved = {k: os.environ.get(k) for k in ("GITRELAY_HOME", "GITRELAY_TRUST", "HOME")}
    os.environ.update({k: env[k] for k in saved})
    try:
        out: dict[str, list[float]] = {}
        for name, (event, payload) in calls.items():
            text = json.dumps(payload)
            run_hook("claude", event, text)
            samples = []
            for _ in range(reps):
                started = time.perf_counter()
                run_hook("claude", event, text)
                samples.append(time.perf_counter() - started)
            out[name] = samples
        return out
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _wait_for_waiter(folder: Path, proc: subprocess.Popen[str], session: str,
                     event: str = "Stop") -> None:
    """Hand the waiter its input, then return once it holds its lock (it is waiting)."""
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"session_id": session, "cwd": "/", "hook_event_name": event}))
    proc.stdin.close()
    proc.stdin = None
    from gitrelay.hosts.session import SessionStore

    store = SessionStore("claude", folder.parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the waiter exited early: "
                               + (proc.stderr.read() if proc.stderr else ""))
        if store.held(session, "wait"):
            return
        time.sleep(0.01)
    raise RuntimeError("the waiter did not start waiting in 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 100-thread relay, 10 runs")
    parser.add_argument("--reps", type=int, help="runs per hook (default 100)")
    args = parser.parse_args(argv)
    figures = run(args.quick, args.reps, log=lambda line: print(line, file=sys.stderr))
    print(kit.format_table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
