"""What the model receives: tokens per tool answer and for the tool definitions, start-up.

A coding host gives the model each tool's answer and, on every turn, every tool's
definition; both cost context. This section builds a small relay where alice sent bob 200
handoffs (summaries of 240 characters) and measures, against the real MCP server as
``gitrelay mcp`` runs by default (text answers, no structured content, no output schemas):

- the tokens the model reads, counted with the o200k tokenizer (``bpe-openai``, which
  ships the encoding): ``check_inbox`` at 50 and 200 items, ``view_thread`` and
  ``accept_handoff`` of a one-handoff thread, an error, and the tool definitions (name,
  description, input schema) as a host sends them;
- the bytes of the same answers with ``--structured`` (what a host would show the model
  instead of the text if the server sent structured content) and of the output schemas;
- start-up: spawn of ``gitrelay mcp`` to its answer to ``tools/list``.

Then it times ``check_inbox`` at 50 and 200 items as a host calls it: ``gitrelay mcp`` on
stdio through both SDK clients, this tree beside BEFORE_REF (the code before the compact
answers), interleaved call by call. AgentRelay's figures (a hosted service this machine
cannot reach) are carried over from the issues that measured them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

from bench import relaygen
from bench.kit import (
    PY,
    ROOT,
    Figure,
    Log,
    Sizes,
    Workspace,
    client_for,
    gitrelay_home,
    ms_figure,
    ratio_figure,
    run_async,
    trust_file,
    unavailable,
)
from gitrelay.inbox.inboxpeek import INDEX_FILE

SECTION = "what the model receives"
KB = 1024
SIZES = (50, 200)
# The last commit before the answers became compact text with one fence: "before" in the
# stdio figures (served on the SDK's stdio transport, as this tree is).
BEFORE_REF = "5d05b30"
# The goals of issue 36, in o200k tokens and seconds (docs/performance.md).
TOKEN_GOALS = {"inbox50": 3_600, "inbox200": 14_500, "tools": 1_500}
STARTUP_GOAL_S = 0.45
# The last tree whose server was served through the MCP SDK: start-up is measured beside it.
SDK_SERVED_REF = "1b40da8"
PY_CLIENT_GOAL_MS = {50: 6.5, 200: 10.6}
# AgentRelay, measured through the same kind of client on this kind of machine (issue 36):
# its 50-item page as the model reads it, its 7 tool definitions, its initialize, and its
# check_inbox through the Python SDK's client on 2026-12-06.
PEER = {"inbox50_tokens": 14_586, "tools_tokens": 563, "initialize_s": 0.49,
        "py_ms": {50: 13.1, 200: 21.2}}
SUMMARY = ("The nightly export of /users times out since the table passed 10k rows: "
           "paginate the endpoint with a cursor (50 per page, ?limit up to 200), update "
           "the admin list and its mocks, and keep the CSV export streaming all pages. #{n:03d}")
STARTUP_RUNS = {True: 5, False: 15}  # quick run, full run


def tokens(text: str) -> int:
    """``text`` in o200k tokens, as an OpenAI model or a host counting that way reads it."""
    with warnings.catch_warnings():  # it opens its encoding file with a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
    return len(encoding.encode(text))


def _size(text: str) -> int:
    return len(text.encode())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _token_figure(name: str, text: str, *, limit: float | None = None, note: str = "",
                  section: str = SECTION) -> Figure:
    count = tokens(text)
    goal = f"≤ {limit:,.0f} tokens" if limit is not None else "report"
    return Figure(section, name, "tokens", float(count), None, goal=goal, limit=limit,
                  note=f"{_size(text):,} B" + (f"; {note}" if note else ""))


def _byte_figure(name: str, size: int, note: str = "") -> Figure:
    return Figure(SECTION, name, "B", float(size), None, note=note)


def build_relay(root: Path, items: int, log: Log) -> tuple[Path, Path, Any, Path]:
    """A relay where alice sent bob ``items`` handoffs: the relay, bob's home, his client
    and his trust file. Its teammates are flat, so that the servers of the older trees
    measured beside this one (BEFORE_REF, SDK_SERVED_REF) read it too."""
    from bench.registry_bench import make_relay
    from gitrelay.relay import joining

    relay = root / "relay.git"
    make_relay(relay, name="acme", sharded=False)
    homes = {h: root / h.split("@")[0] for h in ("alice@acme", "bob@acme")}
    people = {"alice@acme": ("Alice Martin", "backend"), "bob@acme": ("Bob Chen", "frontend")}
    for handle, home in homes.items():
        with gitrelay_home(home):
            joining.join(str(relay), handle, name=people[handle][0], role=people[handle][1],
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


def _server(bob: Any, trust: Path, *, structured: bool) -> Any:
    from gitrelay.mcp.agentserver import build_server
    from gitrelay.mcp.state import ServerState
    from gitrelay.trust.trust import TrustStore

    def opener() -> ServerState:
        return ServerState(client=bob, trust=TrustStore(trust, watch=False), loop=None,
                           session_id="bench-context")

    return build_server(opener, structured=structured)


def measure(root: Path, log: Log, *, items: int = 200, reps: int = 9,
            install: bool = True, startup_runs: int = 5) -> dict[str, Any]:
    """Every figure of the section as a dict (also for tests): texts the model reads, the
    structured forms' sizes, start-up times, and the stdio timings."""
    from mcp import Client

    from gitrelay.mcp.inprocess import in_process
    from gitrelay.trust.fencetext import inbox_rows

    relay, home, bob, trust = build_relay(root, items, log)
    out: dict[str, Any] = {"texts": {}}
    texts: dict[str, str] = out["texts"]

    async def body() -> None:
        async with Client(in_process(_server(bob, trust, structured=False))) as c, \
                Client(in_process(_server(bob, trust, structured=True))) as typed:
            listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                      for t in (await c.list_tools()).tools]
            shown = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t}
                     for t in listed]
            texts["tools"] = _json(shown)
            out["tools_by_name"] = {t["name"]: tokens(_json(t)) for t in shown}
            out["tools_output_schemas"] = sum(
                _size(_json(t.output_schema)) for t in (await typed.list_tools()).tools)
            for limit in SIZES:
                args = {"limit": limit, "status": ["pending"]}
                res = await c.call_tool("check_inbox", args)
                texts[f"inbox{limit}"] = res.content[0].text  # type: ignore[union-attr]
                if len(inbox_rows(texts[f"inbox{limit}"])) != min(limit, items):
                    raise RuntimeError(f"check_inbox {limit}: not {min(limit, items)} rows")
                typed_res = await typed.call_tool("check_inbox", args)
                out[f"inbox{limit}_structured"] = _size(_json(typed_res.structured_content))
            first = typed_res.structured_content["items"][0]["thread_id"]  # type: ignore[index]
            for tool in ("view_thread", "accept_handoff"):
                res = await c.call_tool(tool, {"thread_id": first})
                if res.is_error:
                    raise RuntimeError(f"{tool}: {res.content[0].text}")  # type: ignore[union-attr]
                texts[tool] = res.content[0].text  # type: ignore[union-attr]
            res = await c.call_tool("send_message", {"thread_id": "ZZZZZZZZ", "body": "x"})
            texts["error"] = res.content[0].text  # type: ignore[union-attr]

    run_async(body)
    out["startup"] = measure_startup(root, relay, home, trust, runs=startup_runs)
    out["stdio"] = measure_stdio(root, relay, home, trust, log, reps=reps, install=install)
    return out


def measure_startup(root: Path, relay: Path, home: Path, trust: Path, *,
                    runs: int) -> dict[str, list[float]]:
    """Seconds from the spawn of ``gitrelay mcp`` to its answer to ``initialize`` and to
    ``tools/list`` (sent right after, as a host does), and the server's CPU seconds to
    that point; each run a fresh process, on raw JSON-RPC lines. A server of
    SDK_SERVED_REF (the last one served through the MCP SDK) starts in the same runs,
    interleaved: its figures are under ``sdk_*`` keys (none when the clone lacks it)."""
    from bench.kit import tree_at

    trees = {"": ROOT}
    with contextlib.suppress(subprocess.CalledProcessError, OSError):  # a clone without it
        trees["sdk_"] = tree_at(SDK_SERVED_REF, root / f"tree-{SDK_SERVED_REF}")
    out: dict[str, list[float]] = {f"{p}{k}": [] for p in trees
                                   for k in ("initialize", "tools_list", "cpu")}
    with (root / "startup.log").open("w") as errlog:
        for _ in range(runs):
            for prefix, tree in trees.items():
                for key, value in _start_once(tree, relay, home, trust, errlog).items():
                    out[f"{prefix}{key}"].append(value)
    return out


def _start_once(tree: Path, relay: Path, home: Path, trust: Path,
                errlog: Any) -> dict[str, float]:
    from bench.kit import mcp_command

    env = {**os.environ, "GITRELAY_HOME": str(home), "PYTHONPATH": str(tree)}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    out: dict[str, float] = {}
    start = time.perf_counter()
    proc = subprocess.Popen([PY, *mcp_command(relay, "bob@acme", trust, structured=False)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=errlog, env=env, cwd=str(tree), text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(requests[0]) + "\n")
        proc.stdin.flush()
        json.loads(proc.stdout.readline())
        out["initialize"] = time.perf_counter() - start
        for request in requests[1:]:
            proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        while json.loads(proc.stdout.readline()).get("id") != 2:
            pass
        out["tools_list"] = time.perf_counter() - start
        times = os.times()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    after = os.times()
    out["cpu"] = (after.children_user + after.children_system
                  - times.children_user - times.children_system)
    return out


def measure_stdio(root: Path, relay: Path, home: Path, trust: Path, log: Log, *,
                  reps: int, install: bool = True) -> dict[str, Any]:
    """check_inbox at 50 and 200 items as a host calls it: `gitrelay mcp` on stdio (as it
    runs by default), through the Python SDK's client and, where Node is installed, the
    TypeScript SDK's client, on a server of this tree ("now") and one of BEFORE_REF
    ("before"), all interleaved call by call on the same relay. Seconds per call keyed
    ``"{limit}:{tree}:{py|ts}"``, and the answers' sizes keyed ``"bytes:{limit}:{tree}"``
    (text, structured). ``install``: False leaves the TypeScript client out unless it is
    already installed (the quick run installs nothing)."""
    from bench.kit import mcp_command, sdk_session, tree_at
    from bench.ts_host import HostUnavailable, TsClient, ensure_sdk, sdk_installed
    from gitrelay.trust.fencetext import inbox_rows

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
        # Each tree keeps its own inbox index: the copy drops this tree's, whose format
        # the older code does not read, and that code builds its own on the first call.
        shutil.copytree(home, homes["before"], ignore=shutil.ignore_patterns(
            f"{Path(INDEX_FILE).name}*"))
    except (subprocess.CalledProcessError, OSError) as exc:
        log(f"context: no figures for {BEFORE_REF} (a clone without that commit?): {exc}")
        trees.pop("before", None)
    kinds = ("py", "ts") if sdk_dir is not None else ("py",)
    out: dict[str, Any] = {f"{n}:{t}:{c}": [] for n in SIZES for t in trees for c in kinds}

    def count(structured: dict[str, Any] | None, text: str) -> int:
        """Items in a page: its structured items (BEFORE_REF), else its text's rows."""
        if structured:
            return len(structured.get("items", []))
        return len(inbox_rows(text))

    async def body() -> None:
        async with contextlib.AsyncExitStack() as stack:
            errlog = stack.enter_context((root / "stdio-servers.log").open("w"))
            # The default server, as a coding host starts it (BEFORE_REF has no flag).
            command = mcp_command(relay, "bob@acme", trust, structured=False)
            calls: dict[tuple[str, str], Any] = {}
            sessions: dict[str, Any] = {}
            for t, tree in trees.items():
                env = {**os.environ, "GITRELAY_HOME": str(homes[t]), "PYTHONPATH": str(tree),
                       "GITRELAY_STDIO": "sdk"}  # BEFORE_REF: the SDK's stdio, as now
                session = sessions[t] = await sdk_session(stack, command, env, tree, errlog)

                async def py_call(args: dict[str, Any], s: Any = session) -> Any:
                    start = time.perf_counter()
                    res = await s.call_tool("check_inbox", args)
                    took = time.perf_counter() - start
                    text = "".join(getattr(c, "text", "") for c in res.content)
                    return took, count(res.structured_content, text)

                calls[(t, "py")] = py_call
                if sdk_dir is not None:
                    ts = TsClient(sdk_dir, PY, command, env, tree, errlog)
                    stack.callback(ts.close)

                    async def ts_call(args: dict[str, Any], ts: Any = ts) -> Any:
                        got = ts.request("check_inbox", args)
                        if got["is_error"] or got["ms"] is None:
                            raise RuntimeError(f"check_inbox (TypeScript): {got['text']}")
                        return float(got["ms"]) / 1000, count(got["structured"], got["text"])

                    calls[(t, "ts")] = ts_call
            for i in range(reps + 1):
                for n in SIZES:
                    for (t, c), call in calls.items():
                        # after 0: the first n items, read or not, from every tree (the
                        # default call lists the news, and measuring reads marks some)
                        took, items = await call({"limit": n, "after": 0})
                        if items != n:
                            raise RuntimeError(f"check_inbox on stdio ({t}, {c}): "
                                               f"{items} items, not {n}")
                        if i:
                            out[f"{n}:{t}:{c}"].append(took)
            for t in trees:  # what each tree's answer weighs, as the Python client got it
                for n in SIZES:
                    res = await sessions[t].call_tool("check_inbox",
                                                      {"limit": n, "after": 0})
                    structured = res.structured_content
                    out[f"bytes:{n}:{t}"] = (
                        sum(_size(getattr(c, "text", "")) for c in res.content),
                        _size(_json(structured)) if structured is not None else 0)

    run_async(body)
    return out


def bench_context(ws: Workspace, sizes: Sizes, log: Log, shared: dict[str, Any]
                  ) -> list[Figure]:
    quick = sizes.reps <= 5
    try:
        tokens("probe")
    except ImportError as exc:
        return [unavailable(SECTION, "tokens", f"bpe-openai is not installed ({exc}); "
                                               "make .venv/.installed installs it")]
    got = measure(ws.fresh("context"), log, reps=3 if quick else 15, install=not quick,
                  startup_runs=STARTUP_RUNS[quick])
    shared["context"] = {k: v for k, v in got.items() if k != "texts"}
    texts = got["texts"]
    top = sorted(got["tools_by_name"].items(), key=lambda kv: -kv[1])[:2]
    figs = [
        _token_figure("check_inbox, 50 items", texts["inbox50"],
                      limit=TOKEN_GOALS["inbox50"],
                      note=f"AgentRelay {PEER['inbox50_tokens']:,} tokens for the same 50"),
        _token_figure("check_inbox, 200 items", texts["inbox200"],
                      limit=TOKEN_GOALS["inbox200"]),
        _token_figure("view_thread, one handoff", texts["view_thread"]),
        _token_figure("accept_handoff, one handoff", texts["accept_handoff"]),
        _token_figure("an error (thread_not_found)", texts["error"]),
        _token_figure("tool definitions (name, description, input schema)", texts["tools"],
                      limit=TOKEN_GOALS["tools"],
                      note="largest: " + ", ".join(f"{k} {v:,}" for k, v in top)
                           + f"; AgentRelay {PEER['tools_tokens']} for its 7 tools"),
        _byte_figure("check_inbox, 50 items, --structured: structured content",
                     got["inbox50_structured"],
                     note="what Claude Code and Codex would show the model instead of the text"),
        _byte_figure("check_inbox, 200 items, --structured: structured content",
                     got["inbox200_structured"]),
        _byte_figure("--structured: output schemas in tools/list", got["tools_output_schemas"],
                     note="none by default"),
    ]
    start = got["startup"]
    figs.append(Figure(SECTION, "start-up: spawn to tools/list answered", "s",
                       statistics.median(start["tools_list"]), max(start["tools_list"]),
                       goal=f"≤ {STARTUP_GOAL_S} s", limit=STARTUP_GOAL_S,
                       note=f"{len(start['tools_list'])} runs, p95 column: the slowest; "
                            "goal on an idle machine"))
    figs.append(Figure(SECTION, "start-up: spawn to initialize answered", "s",
                       statistics.median(start["initialize"]), max(start["initialize"]),
                       note=f"AgentRelay initializes in {PEER['initialize_s']} s"))
    figs.append(Figure(SECTION, "start-up: CPU of the server process", "s",
                       statistics.median(start["cpu"]), max(start["cpu"]),
                       note="to its exit right after tools/list"))
    if start.get("sdk_tools_list"):
        sdk = statistics.median(start["sdk_tools_list"])
        figs.append(Figure(SECTION, "start-up: spawn to tools/list, server on the MCP SDK", "s",
                           sdk, max(start["sdk_tools_list"]),
                           note=f"{SDK_SERVED_REF}, interleaved with the runs above"))
        figs.append(Figure(SECTION, "start-up: spawn to tools/list, now / on the MCP SDK", "×",
                           statistics.median(start["tools_list"]) / sdk))
    figs.extend(_stdio_figures(got["stdio"]))
    return figs


CLIENT = {"py": "Python SDK client", "ts": "TypeScript client"}


def _stdio_figures(got: dict[str, Any]) -> list[Figure]:
    sec = f"check_inbox on stdio (now against {BEFORE_REF}, before the compact answers)"
    figs: list[Figure] = []
    for n in SIZES:
        for c in ("py", "ts"):
            now, before = got.get(f"{n}:now:{c}"), got.get(f"{n}:before:{c}")
            if not now:
                figs.append(unavailable(sec, f"{n} items, {CLIENT[c]}",
                                        "Node or the TypeScript SDK is not installed"))
                continue
            figs.append(ms_figure(sec, f"{n} items, {CLIENT[c]}, now", now,
                                  limit=PY_CLIENT_GOAL_MS[n] if c == "py" else None,
                                  note="text answers, no output schema to check"
                                       if c == "py" else ""))
            if not before:
                continue
            figs.append(ms_figure(sec, f"{n} items, {CLIENT[c]}, before", before))
            figs.append(ratio_figure(
                sec, f"{n} items, {CLIENT[c]}, now / before", now, before,
                limit=1.0 if c == "ts" else None,
                note="both on the SDK's stdio transport; the answers' shape is the change"))
        peer = PEER["py_ms"][n]
        figs.append(Figure(sec, f"{n} items, Python SDK client, AgentRelay",
                           "ms", peer, None, note="issue 36's run (2026-12-06), not this run"))
        for t in ("now", "before"):
            if f"bytes:{n}:{t}" in got:
                text, structured = got[f"bytes:{n}:{t}"]
                figs.append(Figure(sec, f"{n} items, {t}: text + structured",
                                   "B", float(text + structured), None,
                                   note=f"text {text:,} B, structured {structured:,} B"))
    return figs
