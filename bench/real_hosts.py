"""What the model receives, from real host runs: start-up, tool definitions, hook times.

Claude Code and Codex (installed by ``.ci/install-node.sh``) run headless against the
scripted model server of :mod:`tests.kit.hosts`, in a fresh home set up by the real
``gitrelay setup`` each time (a cold start: nothing of gitrelay running), with one
handoff from alice waiting in bob's local copy. The script: ``check_inbox``, then done.
Each Claude Code run also writes its debug log (``--debug-file``), which is where it
reports when it started the MCP server and how long the connection took.

Figures:

- start-up: from Claude Code starting ``gitrelay mcp`` (its debug log) to the first
  model request that offers gitrelay's tools (the model server's clock); Claude Code's
  own "connected in N ms"; Codex: from ``codex exec`` starting to that request;
- in how many cold runs gitrelay's tools were in the very first model request, per
  host, with the load average (1 min) at each run: Claude Code waits for the server
  that ``setup`` marks ``alwaysLoad``, Codex for the one it marks ``required`` (without
  it Codex waits about 1 s, and on a loaded machine its first request lacked the tools
  in 12 of 26 cold runs); the goal is every run, at whatever load the machine has;
- hook times as Claude Code reports them: PreToolUse, PostToolUse and Stop from its
  ``--include-hook-events`` stream (hook_started to hook_response), SessionStart from
  its debug log (that stream gives SessionStart's two events together at start-up);
- what the model receives: gitrelay's tool definitions as each host sends them, and a
  one-item ``check_inbox`` result as the model reads it, in o200k tokens
  (:func:`bench.context.tokens`) with their bytes.

``python -m bench --only model`` runs this section; ``--quick`` does 3 Claude Code runs
and 1 Codex run, a full run 20 of each. A missed goal is a row, never a failure.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import kit
from bench.context import tokens

SECTION = "model (real hosts)"
GOAL_PRE_TOOL_USE_MS = 60.0
GOAL_STOP_MS = 100.0
GOAL_SESSION_START_MS = 300.0
GOAL_DEFINITIONS_TOKENS = 1_500.0
SUMMARY = "Paging for /users is documented in docs/paging.md"

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) ")
_CONNECTED = re.compile(r'MCP server "gitrelay": Successfully connected .* in (\d+)ms')


def _wall(line: str) -> float | None:
    m = _STAMP.match(line)
    if m is None:
        return None
    return datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=UTC).timestamp()


def read_debug_log(path: Path) -> dict[str, float]:
    """From Claude Code's debug log: when it started gitrelay's MCP server (epoch s), how
    long it says the connection took (ms), and SessionStart's time (ms)."""
    out: dict[str, float] = {}
    hook_start = None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        when = _wall(line)
        if when is None:
            continue
        if 'MCP server "gitrelay": Starting connection' in line:
            out.setdefault("mcp_spawn", when)
        elif (m := _CONNECTED.search(line)) is not None:
            out.setdefault("connect_ms", float(m[1]))
        elif "hook_execution_start" in line and hook_start is None:
            hook_start = when  # the first hook Claude Code runs is SessionStart's
        elif '"Hook SessionStart:startup (SessionStart) success' in line \
                and hook_start is not None:
            out.setdefault("session_start_ms", (when - hook_start) * 1000)
    return out


def hook_times(events: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Seconds from each hook's hook_started to its hook_response, by event name."""
    started = {e["hook_id"]: e["_at"] for e in events
               if e.get("subtype") == "hook_started" and "hook_id" in e}
    out: dict[str, list[float]] = {}
    for e in events:
        if e.get("subtype") == "hook_response" and e.get("hook_id") in started:
            if e.get("hook_event") == "SessionStart":
                continue  # emitted together with its hook_started at start-up
            out.setdefault(str(e.get("hook_event")), []).append(e["_at"] - started[e["hook_id"]])
    return out


def _ms(name: str, samples: list[float], *, limit: float | None = None, note: str = ""
        ) -> kit.Figure:
    if not samples:
        return kit.unavailable(SECTION, name, "no run gave it")
    return kit.ms_figure(SECTION, name, samples, limit=limit, note=note)


def _token_figure(name: str, text: str, note: str, limit: float | None = None
                  ) -> kit.Figure:
    goal = f"≤ {limit:,.0f} tokens" if limit is not None else "report"
    return kit.Figure(SECTION, name, "tokens", float(tokens(text)), goal=goal, limit=limit,
                        note=f"{len(text.encode()):,} B; {note}")


class _Team:
    """A relay, bob's desk with gitrelay set up for a host, and a handoff from alice."""

    def __init__(self, root: Path) -> None:
        from gitrelay.relay import joining
        from gitrelay.relay.client import RelayClient
        from tests.kit import Desk

        relay = joining.init_relay(root / "relay.git", name="acme")
        self.desk = Desk(root, relay)
        with kit.gitrelay_home(self.desk.gitrelay_home):
            joining.join(str(relay), "bob@acme", name="Bob Chen", role="frontend")
        with kit.gitrelay_home(root / "alice"):
            joining.join(str(relay), "alice@acme", name="Alice Martin", role="backend")
            alice = RelayClient(str(relay), "alice@acme", writes="wait")
            self.thread = alice.handoff(to="bob@acme", intent="inform",
                                        summary=SUMMARY).thread_id
        self.desk.gitrelay("inbox")  # bob's copy has it, as after any earlier session


def _result_text(body: dict[str, Any]) -> str:
    """The text of the last tool result in a request, as the model reads it."""
    for message in reversed(body.get("messages", [])):
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content")
                return content if isinstance(content, str) else "".join(
                    str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
    for item in reversed(body.get("input", [])):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return str(item.get("output", ""))
    return ""


def bench_model(ws: kit.Workspace, sizes: kit.Sizes, log: kit.Log,
                shared: dict[str, Any]) -> list[kit.Figure]:
    from tests.kit import call, host_binary, run_host, say, tool_definitions

    quick = sizes is kit.QUICK
    claude_runs, codex_runs = (1, 1) if quick else (20, 20)
    missing = [h for h in ("claude", "codex") if host_binary(h) is None]
    if missing:
        why = f"{', '.join(missing)} not installed (run .ci/install-node.sh)"
        return [kit.unavailable(SECTION, "real-host runs", why)]
    load = os.getloadavg()[0]
    script = [call("gitrelay.check_inbox", {}), say("done")]
    figures: list[kit.Figure] = []
    startup: list[float] = []
    connect: list[float] = []
    first_had_tools = 0
    never = 0
    hooks: dict[str, list[float]] = {}
    definitions: dict[str, str] = {}
    results: dict[str, str] = {}
    for n in range(claude_runs):
        team = _Team(ws.fresh(f"claude-{n}"))
        debug = team.desk.root / "claude-debug.txt"
        run = run_host("claude", team.desk, script,
                       extra_args=["--debug-file", str(debug), "--debug", "hooks,mcp"])
        logged = read_debug_log(debug)
        offered = [r for r in run.agent_requests if r.offers_gitrelay]
        if not offered:  # a figure of its own, never a broken section
            never += 1
            log(f"claude run {n + 1}/{claude_runs}: gitrelay's tools never came")
            continue
        with_tools = offered[0]
        first_had_tools += run.first_request.offers_gitrelay
        if "mcp_spawn" in logged:
            startup.append(with_tools.wall - logged["mcp_spawn"])
        if "connect_ms" in logged:
            connect.append(logged["connect_ms"] / 1000)
        if "session_start_ms" in logged:
            hooks.setdefault("SessionStart", []).append(logged["session_start_ms"] / 1000)
        for event, samples in hook_times(run.events).items():
            hooks.setdefault(event, []).extend(samples)
        definitions["claude"] = json.dumps(tool_definitions(with_tools.body),
                                           separators=(",", ":"))
        results["claude"] = _result_text(run.agent_requests[-1].body)
        log(f"claude run {n + 1}/{claude_runs}: tools in the first request: "
            f"{run.first_request.offers_gitrelay}")
    codex_startup: list[float] = []
    codex_first = 0
    codex_never = 0
    codex_loads: list[float] = []
    for n in range(codex_runs):
        team = _Team(ws.fresh(f"codex-{n}"))
        codex_loads.append(os.getloadavg()[0])
        run = run_host("codex", team.desk, script)
        offered = [r for r in run.agent_requests if r.offers_gitrelay]
        if not offered:
            codex_never += 1
            log(f"codex run {n + 1}/{codex_runs}: gitrelay's tools never came")
            continue
        codex_startup.append(offered[0].at - run.started)
        codex_first += run.first_request.offers_gitrelay
        log(f"codex run {n + 1}/{codex_runs} (load {codex_loads[-1]:.1f}): tools in the "
            f"first request: {run.first_request.offers_gitrelay}")
        definitions["codex"] = json.dumps(tool_definitions(offered[0].body),
                                          separators=(",", ":"))
        results["codex"] = _result_text(run.agent_requests[-1].body)
    note = f"load {load:.1f} at the start" + (
        f"; in {never} run(s) gitrelay's tools never came" if never else "")
    figures.append(_ms("Claude Code: gitrelay mcp started → its tools in a model request",
                       startup, note=note))
    figures.append(_ms("Claude Code: MCP connection, as its debug log reports it", connect))
    figures.append(kit.Figure(
        SECTION, f"Claude Code: tools in the first model request, of {claude_runs} cold runs",
        "runs", float(first_had_tools), goal=f"{claude_runs} of {claude_runs}",
        limit=float(claude_runs), at_least=True, note=note))
    figures.append(_ms(
        "Codex: codex exec started → gitrelay's tools in a model request",
        codex_startup, note=f"tools in the first request in {codex_first} of {codex_runs}"
        + (f"; never in {codex_never}" if codex_never else "")))
    codex_note = (f"load {min(codex_loads):.1f}–{max(codex_loads):.1f} (1 min) at the runs' "
                  "starts" if codex_loads else "")
    figures.append(kit.Figure(
        SECTION, f"Codex: tools in the first model request, of {codex_runs} cold runs",
        "runs", float(codex_first), goal=f"{codex_runs} of {codex_runs}",
        limit=float(codex_runs), at_least=True,
        note=codex_note + (f"; the tools never came in {codex_never}" if codex_never else "")))
    goals = {"PreToolUse": GOAL_PRE_TOOL_USE_MS, "Stop": GOAL_STOP_MS,
             "SessionStart": GOAL_SESSION_START_MS}
    for event in ("SessionStart", "PreToolUse", "PostToolUse", "Stop"):
        samples = hooks.get(event, [])
        if not samples:
            figures.append(kit.unavailable(SECTION, f"hook {event}", "not reported"))
            continue
        figures.append(_ms(
            f"hook {event}, as Claude Code ran it", samples, limit=goals.get(event),
            note="from its debug log" if event == "SessionStart" else "from its hook events"))
    for host, text in sorted(definitions.items()):
        figures.append(_token_figure(f"{host}: gitrelay's tool definitions as sent", text,
                                     "what the model reads of all of gitrelay's tools",
                                     limit=GOAL_DEFINITIONS_TOKENS))
    for host, text in sorted(results.items()):
        figures.append(_token_figure(f"{host}: a one-item check_inbox result as received",
                                     text, "the tool result in the next model request"))
    shared["model_hosts"] = {"claude_runs": claude_runs, "codex_runs": codex_runs,
                             "load": load, "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                             "tools_first": first_had_tools,
                             "codex_tools_first": codex_first, "codex_loads": codex_loads,
                             "startup_median_s": statistics.median(startup) if startup
                             else None}
    return figures
