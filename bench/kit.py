"""What every benchmark section shares: sizes, figures and the table, the hermetic
environment and workspace, seeded users with their clients and MCP servers, the
commands that start `gitrelay mcp`, and trees of other commits to measure beside.

The sections (:mod:`bench.suite` and the modules it runs) import this module and
never each other, so no section module imports the runner.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import relaygen

Log = Callable[[str], None]


ROOT = Path(__file__).resolve().parent.parent


PY = sys.executable


# The <= 5 ms goals of the fast writes are latencies an agent sees, so they are judged where
# an agent's host calls gitrelay: a `gitrelay mcp` process on stdio, through the TypeScript
# SDK's client, which the hosts of docs/agents.md embed (the `host` section). The same calls
# through the in-process client and the Python SDK's client are reported beside them: the
# Python client's walk of every result against the output schema is part of those figures.
AGENT_GOAL_MS = 5.0



ELSEWHERE = "the <= 5 ms goal is judged through the hosts' client (host clients section)"


@dataclass(frozen=True)
class Sizes:
    """What one mode of the run measures on."""

    write_relay: tuple[int, int]      # (threads, messages) for writes and delivery
    big_relay: tuple[int, int]        # the large relay: gate, reads, storage, join
    small_relay: tuple[int, int]      # the reads' comparison relay
    warmup: int
    reps: int
    read_reps: int
    writers: int
    writer_ops: dict[str, int]        # total operations per writer mode
    writer_budget: float              # seconds; writers stop starting operations after it
    shared_threads: int
    join_relay: tuple[int, int]
    join_timeout: float
    peer: bool                        # run THROWAWAY_INSTALLS (the peer, the TypeScript client)
    delivery_reps: int
    host_writes: bool                 # the host section's writes (six more server processes)


FULL = Sizes(write_relay=(10_000, 50_000), big_relay=(10_000, 100_000), small_relay=(100, 1_000),
             warmup=5, reps=30, read_reps=60, writers=16,
             writer_ops={"raw": 2000, "queue": 2000, "wait": 2000}, writer_budget=30.0,
             shared_threads=8, join_relay=(1_000, 10_000), join_timeout=240.0, peer=True,
             delivery_reps=20, host_writes=True)


QUICK = Sizes(write_relay=(100, 500), big_relay=(100, 1_000), small_relay=(10, 100),
              warmup=1, reps=5, read_reps=10, writers=4,
              writer_ops={"raw": 24, "queue": 24, "wait": 24}, writer_budget=6.0,
              shared_threads=2, join_relay=(100, 1_000), join_timeout=60.0, peer=False,
              delivery_reps=3, host_writes=False)


def p95(samples: list[float]) -> float:
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[94]


def p99(samples: list[float]) -> float:
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def summary(samples_s: list[float]) -> dict[str, float | int]:
    """Median, p95, p99 and mean in ms of samples in seconds."""
    ms = [s * 1000 for s in samples_s]
    return {"median": statistics.median(ms), "p95": p95(ms), "p99": p99(ms),
            "mean": statistics.fmean(ms), "samples": len(ms)}


@dataclass
class Figure:
    """One row of the table."""

    section: str
    name: str
    unit: str
    median: float | None
    p95: float | None = None
    goal: str = "report"
    limit: float | None = None       # the goal: median <= limit (or >= when ``at_least``)
    at_least: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> bool | None:
        if self.limit is None or self.median is None:
            return None
        return self.median >= self.limit if self.at_least else self.median <= self.limit

    def to_json(self) -> dict[str, Any]:
        return {"section": self.section, "figure": self.name, "unit": self.unit,
                "median": _round(self.median), "p95": _round(self.p95), "goal": self.goal,
                "met": self.met, "note": self.note, **self.extra}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def ms_figure(section: str, name: str, samples_s: list[float], *, limit: float | None = None,
              note: str = "") -> Figure:
    s = summary(samples_s)
    return Figure(section, name, "ms", s["median"], s["p95"],
                  goal=f"≤ {limit:g} ms" if limit is not None else "report", limit=limit,
                  note=note, extra={"samples": s["samples"], "mean": round(s["mean"], 3),
                                    "p99": round(s["p99"], 3)})


def ratio_figure(section: str, name: str, a_s: list[float], b_s: list[float], *,
                 limit: float | None, note: str = "") -> Figure:
    """median(a)/median(b), and p95(a)/p95(b) in the p95 column."""
    a, b = summary(a_s), summary(b_s)
    return Figure(section, name, "×", a["median"] / b["median"], a["p95"] / b["p95"],
                  goal=f"≤ {limit:g}×" if limit is not None else "report", limit=limit,
                  note=note, extra={"a_median_ms": round(a["median"], 3),
                                    "b_median_ms": round(b["median"], 3)})


def unavailable(section: str, name: str, why: str) -> Figure:
    return Figure(section, name, "", None, goal="report", note=f"unavailable: {why}")


def missed_goals(figures: list[dict[str, Any]]) -> list[str]:
    """One short line per figure of a run's JSON that missed its goal."""
    out = []
    for f in figures:
        if f.get("met") is False:
            unit = f" {f['unit']}" if f.get("unit") and f["unit"] != "×" else f.get("unit", "")
            out.append(f"{f['section']}: {f['figure']} ({f['median']:,.2f}{unit}; goal "
                       f"{f['goal']})")
    return out


def format_table(figures: list[Figure]) -> str:
    rows = [("figure", "median", "p95", "goal", "met")]
    for f in figures:
        unit = f" {f.unit}" if f.unit and f.unit != "×" else f.unit
        med = "–" if f.median is None else f"{f.median:,.2f}{unit}"
        p = "–" if f.p95 is None else f"{f.p95:,.2f}{unit}"
        met = {True: "yes", False: "NO", None: "–"}[f.met]
        rows.append((f"{f.section}: {f.name}", med, p, f.goal, met))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join([r[0].ljust(widths[0])] + [r[i].rjust(widths[i])
                                                            for i in range(1, 5)]))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [f"  - {f.section}: {f.name}: {f.note}" for f in figures if f.note]
    return "\n".join(lines + (["", "notes:", *notes] if notes else []))


def hermetic_environment(workdir: Path) -> None:
    """No user or system git config; a throw-away GITRELAY_HOME for anything unset."""
    os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ["GIT_TERMINAL_PROMPT"] = "0"
    os.environ["LC_ALL"] = "C"
    for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        os.environ.setdefault(name, "bench")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        os.environ.setdefault(name, "bench@acme.example")
    os.environ["GITRELAY_HOME"] = str(workdir / "default-home")


@contextlib.contextmanager
def gitrelay_home(home: Path) -> Iterator[None]:
    old = os.environ.get("GITRELAY_HOME")
    os.environ["GITRELAY_HOME"] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GITRELAY_HOME", None)
        else:
            os.environ["GITRELAY_HOME"] = old


def git(*args: str, git_dir: Path | None = None, check: bool = True,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    cmd = ["git", *(["--git-dir", str(git_dir)] if git_dir else []), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc


NOOP_HOOK = "#!{python} -IS\nimport sys\nsys.stdin.read()\n"


def install_noop_hook(relay: Path) -> None:
    """The floor: a pre-receive hook that starts Python and reads its input, nothing else."""
    hook = relay / "hooks" / "pre-receive"
    hook.write_text(NOOP_HOOK.format(python=PY))
    hook.chmod(0o755)


class Workspace:
    """Relays and homes of one run, under one directory."""

    def __init__(self, root: Path, log: Log) -> None:
        self.root = root
        self.log = log
        self._n = 0
        self.generated: dict[tuple[int, int], relaygen.Generated] = {}
        self.setup_seconds: dict[str, float] = {}

    def fresh(self, name: str) -> Path:
        self._n += 1
        path = self.root / f"{self._n:02d}-{name}"
        path.mkdir(parents=True)
        return path

    def cached(self, size: tuple[int, int], *, aged: bool = False
               ) -> tuple[Path, relaygen.Generated]:
        started = time.perf_counter()
        path, info, was_cached = relaygen.cached(*size, aged=aged)
        what = f"{size[0]} threads / {size[1]} messages" + (" (aged)" if aged else "")
        if not was_cached:
            took = time.perf_counter() - started
            self.setup_seconds[f"generate {what}"] = took
            self.log(f"generated a relay of {what} ({info.operations:,} commits) in "
                     f"{took:.1f} s")
        if not aged:
            self.generated[size] = info
        return path, info

    def relay(self, size: tuple[int, int], *, hook: str = "gate", aged: bool = False
              ) -> tuple[Path, relaygen.Generated]:
        """A private copy of the generated relay of ``size``, with the gate or a no-op hook."""
        source, info = self.cached(size, aged=aged)
        dest = self.fresh(f"relay-{size[0]}t-{size[1]}m" + ("-aged" if aged else "")) \
            / "relay.git"
        relaygen.clone_relay(source, dest)
        if hook == "noop":
            install_noop_hook(dest)
        return dest, info


def mirror_template(relay_size: tuple[int, int], ws: Workspace, *, aged: bool = False) -> Path:
    """A mirror of the cached relay with its inbox index built (cached next to the relay)."""
    from gitrelay.inbox.index import INDEX_FORMAT, index_for
    from gitrelay.store.mirror import FETCHED_MAIN, RELAY_MAIN, Mirror

    source, _ = ws.cached(relay_size, aged=aged)
    template = source.with_name(source.name[:-len(".git")] + ".mirror")
    done = template / "gitrelay-bench-ready"
    ready = f"index format {INDEX_FORMAT}\n"  # an index of another format is built again
    if done.exists() and done.read_text() == ready:
        return template
    if template.exists():
        shutil.rmtree(template)
    started = time.perf_counter()
    _link_packs(source, template)
    mirror = Mirror(template, "alice@acme")
    tip = git("rev-parse", "refs/heads/main", git_dir=source).stdout.strip()
    for ref in ("refs/heads/main", RELAY_MAIN, FETCHED_MAIN):
        mirror.store.set_ref(ref, tip, "bench: seeded")
    mirror.update_sync_state(last_fetch=time.time())
    idx_started = time.perf_counter()
    index_for(mirror).update()
    index_for(mirror).close()
    took = time.perf_counter() - started
    ws.setup_seconds[f"mirror template {relay_size[1]} messages (index build "
                     f"{time.perf_counter() - idx_started:.1f} s)"] = took
    done.write_text(ready)
    return template


def _link_packs(relay: Path, mirror: Path) -> None:
    from gitrelay.store.gitstore import Store

    Store(mirror, create=True)
    pack_dir = mirror / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    for f in (relay / "objects" / "pack").iterdir():
        if f.suffix in (".pack", ".idx"):
            target = pack_dir / f.name
            if not target.exists():
                try:
                    os.link(f, target)
                except OSError:
                    shutil.copy2(f, target)


def seed_user(relay: Path, relay_size: tuple[int, int], home: Path, handle: str,
              ws: Workspace, *, aged: bool = False) -> None:
    """Give ``handle`` a mirror of ``relay`` under ``home`` as if they had just fetched it."""
    from gitrelay.store.config import mirror_path
    from gitrelay.store.mirror import Mirror

    template = mirror_template(relay_size, ws, aged=aged)
    with gitrelay_home(home):
        path = mirror_path(str(relay))
    path.parent.mkdir(parents=True, exist_ok=True)
    relaygen.clone_relay(template, path)
    (path / "gitrelay-bench-ready").unlink()
    Mirror(path, handle).update_sync_state(last_fetch=time.time())


PAIR = ("alice@acme", "bob@acme")


def teammates(ws: Workspace, relay: Path, size: tuple[int, int], label: str
              ) -> tuple[dict[str, Path], dict[str, Path]]:
    """Alice's and bob's homes with a fresh mirror of ``relay`` each, and each one's trust
    file listing the other: ``(homes, trust)`` keyed by handle."""
    homes = {h: ws.fresh(f"home-{label}{h.split('@')[0]}") for h in PAIR}
    for h, home in homes.items():
        seed_user(relay, size, home, h, ws)
    trust = {h: trust_file(homes[h], [o for o in PAIR if o != h]) for h in PAIR}
    return homes, trust


def client_for(relay: Path, home: Path, handle: str, *, writes: str = "wait") -> Any:
    from gitrelay.relay.client import RelayClient

    with gitrelay_home(home):
        return RelayClient(str(relay), handle, writes=writes)


TRUST = """\
version: 1
teammates:
{listed}
unknown_teammates: {{policy: allow_with_default_trust}}
defaults:
  {{auto_read: true, auto_test: false, auto_write_paths: [], require_approval: [Edit, Write, Bash]}}
"""


def trust_file(home: Path, handles: list[str]) -> Path:
    path = home / "trust.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    listed = "\n".join(f"  {h}: {{auto_read: true}}" for h in handles)
    path.write_text(TRUST.format(listed=listed))
    return path


def mcp_server(client: Any, trust: Path, *, loop: bool) -> Any:
    """The real MCP server of :mod:`gitrelay.mcp.agentserver` over ``client``.

    ``server.bench_times[tool]`` collects the server-side time of each call
    (the tool, its argument and result models), without the client's part
    (the SDK client validates every result against the tool's output schema).
    """
    from gitrelay.mcp.agentserver import build_server
    from gitrelay.mcp.state import ServerState
    from gitrelay.sync.loop import FRESH_WHILE_RUNNING
    from gitrelay.trust.trust import TrustStore

    def opener() -> ServerState:
        sync = client.sync.start_loop() if loop else None
        if not loop:
            # Reads answer from the mirror within the bound a running loop gives them.
            client.sync.fresh_seconds = FRESH_WHILE_RUNNING
        return ServerState(client=client, trust=TrustStore(trust, watch=False), loop=sync,
                           session_id=f"bench-{uuid.uuid4()}")

    server = build_server(opener, structured=True)  # the harness reads the typed data
    inner = server.call_tool
    times: dict[str, list[float]] = {}

    def call_tool(name: Any, arguments: Any, state: Any, later: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(name, arguments, state, later)
        finally:
            times.setdefault(name, []).append(time.perf_counter() - start)

    server.call_tool = call_tool  # type: ignore[method-assign]
    server.bench_times = times  # type: ignore[attr-defined]
    return server


async def call(session: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    if result.is_error:
        text = result.content[0].text if result.content else "?"
        raise RuntimeError(f"{tool} failed: {text}")
    out: dict[str, Any] = result.structured_content or {}
    return out


async def timed(session: Any, tool: str, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    out = await call(session, tool, args)
    return time.perf_counter() - start, out


def run_async(fn: Callable[[], Awaitable[Any]]) -> Any:
    import anyio

    return anyio.run(fn)


def wait_until(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``done`` every 5 ms; RuntimeError saying ``what`` did not happen in time."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen in {timeout:.0f} s")
        time.sleep(0.005)


def wait_outbox_empty(client: Any, timeout: float = 30.0) -> None:
    wait_until(lambda: not client.mirror.outbox(), f"{client.handle}'s outbox draining",
               timeout)


async def settle(*clients: Any, timeout: float = 30.0) -> None:
    """Until every client's outbox is empty and its sync loop idle for 30 ms.

    It sleeps on the event loop, not blocking it: the servers hand a queued
    write to their sync loop on the event loop's next turn.

    The benchmark's servers share one process (and so one interpreter lock):
    a call timed while another server's loop still handles the previous
    operation (a fetch, verify-on-read, the index) would measure that work
    too, which an agent on its own machine, thinking between two writes,
    does not see. The writers section measures operations under load.
    """
    import anyio

    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 3:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sync loops did not settle in {timeout:.0f} s")
        busy = any(c.mirror.outbox() or (c.sync.loop is not None and not c.sync.loop.idle)
                   for c in clients)
        quiet = 0 if busy else quiet + 1
        await anyio.sleep(0.01)


class RawPusher:
    """The floor: one-file commits pushed with plain ``git push`` (no gitrelay code)."""

    def __init__(self, relay: Path, workdir: Path) -> None:
        from gitrelay.store.gitstore import Store

        self.relay = relay
        self.clone = workdir / "raw-clone.git"
        relaygen.clone_relay(relay, self.clone)
        shutil.rmtree(self.clone / "hooks")
        self.store = Store(self.clone)
        self.n = 0

    def prepare(self) -> str:
        """A new commit on the clone's main, adding one small file."""
        self.n += 1
        tip = self.store.ref("refs/heads/main")
        assert tip is not None
        tree = self.store.objects.commit(tip).tree
        data = json.dumps({"n": self.n, "at": time.time(), "pad": "x" * 400}).encode()
        new_tree = self.store.tree_with(tree, f"raw/{self.n:06d}.json", data)
        oid = self.store.commit(tree=new_tree, parents=[tip], message=f"raw {self.n}\n",
                                author="bench", email="bench@acme.example")
        self.store.set_ref("refs/heads/main", oid)
        return oid

    def push(self) -> float:
        self.prepare()
        start = time.perf_counter()
        proc = subprocess.run(["git", "--git-dir", str(self.clone), "push", "--quiet",
                               str(self.relay), "refs/heads/main:refs/heads/main"],
                              capture_output=True, check=False)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"raw push failed: {proc.stderr.decode().strip()}")
        return took


def settle_servers(relay: Path, clients: list[Any]) -> None:
    """Between two timed calls to `gitrelay mcp` processes: their loops deliver and fetch
    in their own processes, so wait until every client's outbox is empty and every mirror
    holds the relay's main (the recipient's loop has fetched what the call wrote), then
    give the loops a moment to go idle, as an agent thinking between two calls would."""
    for client in clients:
        wait_outbox_empty(client)
    tip = git("rev-parse", "refs/heads/main", git_dir=relay).stdout.strip()
    wait_until(lambda: all(c.mirror.relay_main() == tip for c in clients),
               "the servers' sync loops fetching the relay")
    time.sleep(0.1)


def mcp_command(relay: Path, handle: str, trust: Path, *, structured: bool = True) -> list[str]:
    """``gitrelay mcp`` for ``handle``; ``structured``: with the typed data the harness reads
    (the context section also measures the default, text alone, as coding hosts get it)."""
    return ["-m", "gitrelay", "mcp", "--relay", str(relay), "--as", handle,
            "--trust", str(trust), "--writes", "queue", *(["--structured"] if structured else [])]


async def sdk_session(stack: contextlib.AsyncExitStack, command: list[str], env: dict[str, str],
                       cwd: Path, errlog: Any) -> Any:
    """An initialized Python SDK client session on a server process."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=PY, args=command, env=env, cwd=str(cwd))
    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write, read_timeout_seconds=60))
    await session.initialize()
    await session.list_tools()
    return session


def tree_at(ref: str, into: Path) -> Path:
    """The gitrelay package of commit ``ref``, exported under ``into`` (a directory that a
    server started there imports gitrelay from)."""
    if not (into / "gitrelay").is_dir():
        into.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "gitrelay"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def timed_probe(client: Any, label: str, summary: str, trace: Path | None = None) -> float:
    """Queue one handoff to bob@acme and deliver it: the seconds of the push
    (``Syncer.deliver``). ``trace``: git's trace2 events of this push and the
    later ones go there."""
    client.handoff(to="bob@acme", intent="inform", summary=summary, mode="queue")
    if trace is not None:
        client.sync.syncer.env["GIT_TRACE2_EVENT"] = str(trace)
    start = time.perf_counter()
    report = client.deliver()
    took = time.perf_counter() - start
    if client.mirror.outbox() or report.refused:
        raise RuntimeError(f"the probe was not delivered to the {label} relay")
    return took


@contextlib.contextmanager
def experiment_workspace(workdir: Path | None, name: str) -> Iterator[Workspace]:
    """The workspace of a stand-alone experiment: in ``workdir`` (kept), or in a
    temporary directory removed at the end, whether the experiment finished or not."""
    import tempfile

    root = workdir or Path(tempfile.mkdtemp(prefix=f"gitrelay-{name}-"))
    try:
        yield Workspace(root, lambda text: print(text, file=sys.stderr))
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def experiment_main(argv: list[str] | None, *, prog: str, doc: str | None,
                    count: tuple[str, int, str],
                    run: Callable[[bool, int, Path | None], dict[str, Any]],
                    table: Callable[[dict[str, Any]], str]) -> int:
    """The command line of a stand-alone experiment (``python -m bench.<name>``):
    ``--quick``, one count flag (``count``: name, default, help), ``--keep DIR``;
    prints the experiment's table, then its result as one JSON line."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog,
                                     description=doc.split("\n\n")[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help="the small aged relay")
    flag, default, what = count
    parser.add_argument(f"--{flag}", type=int, default=default, help=f"{what} ({default})")
    parser.add_argument("--keep", metavar="DIR", type=Path,
                        help="work in DIR and keep it (relays, homes)")
    args = parser.parse_args(argv)
    result = run(args.quick, getattr(args, flag), args.keep)
    print(table(result))
    print(json.dumps(result))
    return 0


def trace_children(trace: Path) -> tuple[list[float], list[float]]:
    """Seconds of each pre-receive hook and each connectivity check in a trace2 event file."""
    starts: dict[tuple[str, int], str] = {}
    hooks: list[float] = []
    checks: list[float] = []
    try:
        lines = trace.read_text().splitlines()
    except FileNotFoundError:
        return hooks, checks
    for line in lines:
        event = json.loads(line)
        key = (str(event.get("sid")), int(event.get("child_id", -1)))
        if event.get("event") == "child_start":
            argv = " ".join(event.get("argv", []))
            kind = ("hook" if event.get("child_class") == "hook" else
                    "check" if "rev-list" in argv and "--not" in argv else "")
            starts[key] = kind
        elif event.get("event") == "child_exit":
            kind = starts.get(key, "")
            if kind == "hook":
                hooks.append(float(event["t_rel"]))
            elif kind == "check":
                checks.append(float(event["t_rel"]))
    return hooks, checks
