"""What an answer costs an agent: bytes and approximate tokens per tool answer.

An agent's cost of a tool is mostly context: every byte of a result's text content
is read by the model. This section builds a small relay where alice sent bob 200
handoffs (summaries of 240 characters, the inbox preview's length) and measures,
through the Python SDK's client against the real MCP server:

- ``check_inbox`` at 50 and 200 items: text content, structured content, and the
  call's time (the client validates each result against the output schema);
- ``view_thread`` and ``accept_handoff`` of a one-handoff thread: the text and its
  overhead beyond what the teammate wrote (the fenced values);
- ``tools/list``: what the model sees of the tools (names, descriptions, input
  schemas) and the output schemas the client validates against.

Then it times ``check_inbox`` at 50 and 200 items as a host calls it: ``gitrelay mcp``
on stdio through both SDK clients, this tree beside BEFORE_REF (the code before the
compact answers), interleaved call by call.

Tokens are approximated as bytes / 4. AgentRelay's published page sizes (51 KB for
50 items, 204 KB for 200) and its times through the Python SDK's client (from the
earlier runs; AgentRelay is a hosted service this machine cannot reach) are listed
beside gitrelay's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import relaygen
from bench.suite import (
    PY,
    ROOT,
    Figure,
    Log,
    Sizes,
    Workspace,
    client_for,
    gitrelay_home,
    mcp_server,
    ms_figure,
    ratio_figure,
    run_async,
    timed,
    trust_file,
    unavailable,
)

SECTION = "context"
KB = 1024
PEER_PUBLISHED_KB = {50: 51, 200: 204}   # AgentRelay's check_inbox page, text + structured
SIZES = (50, 200)
# The last commit before the answers became compact text with one fence: "before" in the
# stdio figures (served on the SDK's stdio transport, as this tree is).
BEFORE_REF = "5d05b30"
GOALS = {"inbox50": 12 * KB, "overhead": 600, "tools": 12 * KB}
SUMMARY = ("The nightly export of /users times out since the table passed 10k rows: "
           "paginate the endpoint with a cursor (50 per page, ?limit up to 200), update "
           "the admin list and its mocks, and keep the CSV export streaming all pages. #{n:03d}")


def tokens(size: int) -> int:
    return round(size / 4)


def _size(text: str) -> int:
    return len(text.encode())


def _structured_size(value: Any) -> int:
    return _size(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _fenced_size(text: str, structured: Any) -> int:
    """Bytes of the teammate-written values in the answer's fence (their own text); 0 for
    a version of gitrelay without the answer fence (to measure it before the change)."""
    try:
        from gitrelay.relay.provenance import parse_answer_fence
    except ImportError:
        return 0

    marks = [structured.get("provenance"), *(i.get("provenance")
                                             for i in structured.get("items", []))]
    token = next((m["fence"] for m in marks if isinstance(m, dict)), None)
    if token is None:
        return 0
    total = 0
    for v in parse_answer_fence(text, token):
        total += _size(v.value if isinstance(v.value, str)
                       else json.dumps(v.value, ensure_ascii=False))
    return total


def _figure(name: str, size: int, *, limit: float | None = None, note: str = "",
            section: str = SECTION) -> Figure:
    goal = f"≤ {limit:,.0f} B" if limit is not None else "report"
    return Figure(section, name, "B", float(size), None, goal=goal, limit=limit,
                  note=f"≈ {tokens(size):,} tokens" + (f"; {note}" if note else ""))


def build_relay(root: Path, items: int, log: Log) -> tuple[Path, Path, Any, Path]:
    """A relay where alice sent bob ``items`` handoffs: the relay, bob's home, his client
    and his trust file."""
    from gitrelay.relay import admin

    relay = admin.init_relay(root / "relay.git", name="acme")
    homes = {h: root / h.split("@")[0] for h in ("alice@acme", "bob@acme")}
    people = {"alice@acme": ("Alice Martin", "backend"), "bob@acme": ("Bob Chen", "frontend")}
    for handle, home in homes.items():
        with gitrelay_home(home):
            admin.join(str(relay), handle, name=people[handle][0], role=people[handle][1],
                       save=False)
    alice = client_for(relay, homes["alice@acme"], "alice@acme", writes="queue")
    started = time.perf_counter()
    with gitrelay_home(homes["alice@acme"]):
        for n in range(items):
            alice.handoff(to="bob@acme", intent="inform", summary=SUMMARY.format(n=n),
                          mode="queue")
        refused = alice.deliver().refused
    if refused:
        raise RuntimeError(f"the relay refused the context relay's handoffs: {refused[:1]}")
    log(f"context relay: {items} handoffs in {time.perf_counter() - started:.1f} s")
    bob = client_for(relay, homes["bob@acme"], "bob@acme", writes="wait")
    with gitrelay_home(homes["bob@acme"]):
        bob.refresh(max_age=0)
    return relay, homes["bob@acme"], bob, trust_file(homes["bob@acme"], ["alice@acme"])


def measure(root: Path, log: Log, *, items: int = 200, reps: int = 9,
            install: bool = True) -> dict[str, Any]:
    """Every size of the section, and check_inbox's times, as a dict (also for tests)."""
    from mcp import Client

    relay, home, bob, trust = build_relay(root, items, log)
    server = mcp_server(bob, trust, loop=False)
    out: dict[str, Any] = {}

    async def body() -> None:
        async with Client(server) as c:
            listed = await c.list_tools()
            tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                     for t in listed.tools]
            visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t}
                       for t in tools]
            out["tools_visible"] = _structured_size(visible)
            out["tools_output_schemas"] = _structured_size([t.get("outputSchema")
                                                            for t in tools])
            out["tools_by_name"] = {t["name"]: _structured_size(t) for t in visible}
            for limit in (50, 200):
                args = {"limit": limit, "status": ["pending"]}
                times = []
                for _ in range(reps + 1):
                    start = time.perf_counter()
                    res = await c.call_tool("check_inbox", args)
                    times.append(time.perf_counter() - start)
                text = res.content[0].text  # type: ignore[union-attr]
                assert len(res.structured_content["items"]) == min(limit, items)
                out[f"inbox{limit}"] = {
                    "text": _size(text), "structured": _structured_size(res.structured_content),
                    "fenced": _fenced_size(text, res.structured_content),
                    "ms": statistics.median(times[1:]) * 1000}
            first = res.structured_content["items"][0]["thread_id"]
            for tool, tid in (("view_thread", first), ("accept_handoff", first)):
                res = await c.call_tool(tool, {"thread_id": tid})
                if res.is_error:
                    raise RuntimeError(f"{tool}: {res.content[0].text}")  # type: ignore[union-attr]
                text = res.content[0].text  # type: ignore[union-attr]
                fenced = _fenced_size(text, res.structured_content)
                out[tool] = {"text": _size(text), "fenced": fenced,
                             "overhead": _size(text) - fenced,
                             "structured": _structured_size(res.structured_content)}

    run_async(body)
    out["stdio"] = measure_stdio(root, relay, home, trust, log, reps=reps, install=install)
    return out


def measure_stdio(root: Path, relay: Path, home: Path, trust: Path, log: Log, *,
                  reps: int, install: bool = True) -> dict[str, Any]:
    """check_inbox at 50 and 200 items as a host calls it: `gitrelay mcp` on stdio, through
    the Python SDK's client and, where Node is installed, the TypeScript SDK's client, on a
    server of this tree ("now") and one of BEFORE_REF ("before"), all interleaved call by
    call on the same relay. Seconds per call keyed ``"{limit}:{tree}:{py|ts}"``, and the
    answers' sizes keyed ``"bytes:{limit}:{tree}"``. ``install``: False leaves the
    TypeScript client out unless it is already installed (the quick run installs nothing)."""
    from bench.suite import mcp_command, sdk_session, tree_at
    from bench.ts_host import HostUnavailable, TsClient, ensure_sdk, sdk_installed

    cache = relaygen.CACHE_DIR / "ts-client"
    try:
        if not install and not sdk_installed(cache):
            raise HostUnavailable("not installed, and the quick run installs nothing")
        sdk_dir: Path | None = ensure_sdk(cache, log)[0]
    except HostUnavailable as exc:
        log(f"context: no TypeScript client figures: {exc}")
        sdk_dir = None
    trees, homes = {"now": ROOT}, {"now": home}
    try:
        trees["before"] = tree_at(BEFORE_REF, root / f"tree-{BEFORE_REF}")
        homes["before"] = root / "bob-before"
        shutil.copytree(home, homes["before"])  # each tree keeps its own inbox index
    except (subprocess.CalledProcessError, OSError) as exc:
        log(f"context: no figures for {BEFORE_REF} (a clone without that commit?): {exc}")
        trees.pop("before", None)
    kinds = ("py", "ts") if sdk_dir is not None else ("py",)
    out: dict[str, Any] = {f"{n}:{t}:{c}": [] for n in SIZES for t in trees for c in kinds}

    async def body() -> None:
        async with contextlib.AsyncExitStack() as stack:
            errlog = stack.enter_context((root / "stdio-servers.log").open("w"))
            command = mcp_command(relay, "bob@acme", trust)
            calls: dict[tuple[str, str], Any] = {}
            sessions: dict[str, Any] = {}
            for t, tree in trees.items():
                env = {**os.environ, "GITRELAY_HOME": str(homes[t]), "PYTHONPATH": str(tree),
                       "GITRELAY_STDIO": "sdk"}  # BEFORE_REF: the SDK's stdio, as now
                session = sessions[t] = await sdk_session(stack, command, env, tree, errlog)

                async def py_call(args: dict[str, Any], s: Any = session) -> Any:
                    return await timed(s, "check_inbox", args)

                calls[(t, "py")] = py_call
                if sdk_dir is not None:
                    ts = TsClient(sdk_dir, PY, command, env, tree, errlog)
                    stack.callback(ts.close)

                    async def ts_call(args: dict[str, Any], ts: Any = ts) -> Any:
                        return ts.call("check_inbox", args)

                    calls[(t, "ts")] = ts_call
            for i in range(reps + 1):
                for n in SIZES:
                    for (t, c), call in calls.items():
                        took, page = await call({"limit": n})
                        if len(page["items"]) != n:
                            raise RuntimeError(f"check_inbox on stdio ({t}, {c}): "
                                               f"{len(page['items'])} items, not {n}")
                        if i:
                            out[f"{n}:{t}:{c}"].append(took)
            for t in trees:  # what each tree's answer weighs, as the Python client got it
                for n in SIZES:
                    res = await sessions[t].call_tool(
                        "check_inbox", {"limit": n})
                    out[f"bytes:{n}:{t}"] = (
                        sum(_size(getattr(c, "text", "")) for c in res.content),
                        _structured_size(res.structured_content))

    run_async(body)
    return out


def bench_context(ws: Workspace, sizes: Sizes, log: Log, shared: dict[str, Any]
                  ) -> list[Figure]:
    quick = sizes.reps <= 5
    got = measure(ws.fresh("context"), log, reps=3 if quick else 15, install=not quick)
    shared["context"] = got
    i50, i200 = got["inbox50"], got["inbox200"]
    figs = [
        _figure("check_inbox, 50 items: text content", i50["text"], limit=GOALS["inbox50"],
                note=f"teammate text {i50['fenced']:,} B of it"),
        _figure("check_inbox, 50 items: structured content", i50["structured"]),
        _figure("check_inbox, 200 items: text content", i200["text"],
                limit=4 * GOALS["inbox50"]),
        _figure("check_inbox, 200 items: structured content", i200["structured"]),
    ]
    for n in (50, 200):
        figs.append(Figure(SECTION, f"AgentRelay check_inbox, {n} items (published)", "B",
                           float(PEER_PUBLISHED_KB[n] * KB), None,
                           note=f"≈ {tokens(PEER_PUBLISHED_KB[n] * KB):,} tokens; its "
                                "published page size, not measured here"))
    for tool in ("view_thread", "accept_handoff"):
        one = got[tool]
        figs.append(_figure(f"{tool}, one handoff: text content", one["text"],
                            note=f"teammate text {one['fenced']:,} B"))
        figs.append(_figure(f"{tool}, one handoff: text beyond the teammate's", one["overhead"],
                            limit=GOALS["overhead"]))
    figs.append(_figure("tools/list: names, descriptions, input schemas", got["tools_visible"],
                        limit=GOALS["tools"],
                        note="largest: " + ", ".join(
                            f"{k} {v:,} B" for k, v in sorted(
                                got["tools_by_name"].items(), key=lambda kv: -kv[1])[:2])))
    figs.append(_figure("tools/list: output schemas", got["tools_output_schemas"]))
    figs.extend(_stdio_figures(got["stdio"]))
    return figs


# AgentRelay's check_inbox through the Python SDK's client over stdio, in ms: medians of
# 3 earlier interleaved runs on this kind of machine, where gitrelay took 32 ms (1.5x
# AgentRelay's) at 50 items and 120 ms (3.6x) at 200. AgentRelay is a hosted service this
# machine cannot reach, so its figures are carried over, not measured in this run.
PEER_PY_CLIENT_MS = {50: 32 / 1.5, 200: 120 / 3.6}
CLIENT = {"py": "Python SDK client", "ts": "TypeScript client"}


def _stdio_figures(got: dict[str, Any]) -> list[Figure]:
    sec = f"{SECTION} on stdio (now against {BEFORE_REF}, before the compact answers)"
    figs: list[Figure] = []
    for n in SIZES:
        for c in ("py", "ts"):
            now, before = got.get(f"{n}:now:{c}"), got.get(f"{n}:before:{c}")
            if not now:
                figs.append(unavailable(sec, f"check_inbox, {n} items, {CLIENT[c]}",
                                        "Node or the TypeScript SDK is not installed"))
                continue
            figs.append(ms_figure(sec, f"check_inbox, {n} items, {CLIENT[c]}, now", now))
            if not before:
                continue
            figs.append(ms_figure(sec, f"check_inbox, {n} items, {CLIENT[c]}, before", before))
            figs.append(ratio_figure(
                sec, f"check_inbox, {n} items, {CLIENT[c]}, now / before", now, before,
                limit=1.0 if c == "ts" else None,
                note="both on the SDK's stdio transport; the answers' shape is the change"))
        peer = PEER_PY_CLIENT_MS[n]
        figs.append(Figure(sec, f"check_inbox, {n} items, Python SDK client, AgentRelay",
                           "ms", peer, None, note="earlier interleaved runs, not this run"))
        now = got[f"{n}:now:py"]
        figs.append(Figure(sec, f"check_inbox, {n} items, Python SDK client, now / AgentRelay",
                           "×", statistics.median(now) * 1000 / peer, None, goal="≤ 1×",
                           limit=1.0, note="AgentRelay's figure carried over (above)"))
        for t in ("now", "before"):
            if f"bytes:{n}:{t}" in got:
                text, structured = got[f"bytes:{n}:{t}"]
                figs.append(_figure(f"check_inbox, {n} items, {t}: text + structured",
                                    text + structured, section=sec,
                                    note=f"text {text:,} B, structured {structured:,} B"))
    return figs
