"""Benchmark of check_inbox and its local index on small and large relays.

What it measures, for a relay of 1,000 messages and one of 100,000 messages
(10,000 threads) — ``--quick``: 200 and 2,000 — on the same machine, in one
run:

- ``check_inbox`` warm (the index up to date, nothing new), median and p95,
  through the library and, when the MCP server can be built, through the
  in-process MCP client (``mcp.Client``) as an agent calls it;
- the time to bring the index up to date after 100 new commits;
- a full rebuild of the index from the history, in messages per second.

The history is written straight into a mirror with :class:`gitrelay.store.gitstore.Store`
(commit objects in memory, one file added per commit, the same documents and
trailers the client writes), not through the tools: the benchmark measures
reading, and building 110,000 operations through the gate would take hours.
Built mirrors are kept under ``--work`` and reused.

Run: ``python -m bench.inbox_bench [--quick] [--work DIR] [--json FILE]``.
From code: ``run(quick: bool) -> dict``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.ids import thread_id_for
from gitrelay.core.ops import Op
from gitrelay.inbox.inbox import check_inbox
from gitrelay.inbox.index import INDEX_FILE, index_for
from gitrelay.relay.client import RelayClient
from gitrelay.relay.joining import init_relay, profile_doc, relay_config
from gitrelay.store.config import mirror_path
from gitrelay.store.gitstore import Store
from gitrelay.store.mirror import RELAY_MAIN

BUILDER_VERSION = 2
READER = "alice@acme"
# The reader takes part in half the threads, so that her default page is full (50 items)
# on the small relay too: the two sizes are then compared page for page.
READER_SHARE = 0.5
TEAM = [("alice@acme", "Alice Martin", "backend"), ("bob@acme", "Bob Chen", "frontend"),
        ("carol@acme", "Carol Diaz", "platform"), ("dave@acme", "Dave Okafor", "data"),
        ("erin@acme", "Erin Walsh", "mobile"), ("frank@acme", "Frank Moreau", "infra"),
        ("grace@acme", "Grace Lee", "security"), ("heidi@acme", "Heidi Novak", "qa"),
        ("ivan@acme", "Ivan Petrov", "backend"), ("judy@acme", "Judy Park", "design")]
WORDS = (
    "migration", "fixture", "endpoint", "schema", "retry", "cache", "index", "flaky", "build",
    "deploy", "review", "token", "config", "handler", "payload", "timeout", "queue", "worker",
    "branch", "release", "docs", "coverage", "latency", "rollback", "header", "parser",
    "contract", "client", "server", "query", "batch", "stream", "lock", "shard",
)
START = 1_780_000_000  # seconds since the epoch: all times in the relay are after it


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + \
        f".{int(seconds * 1e6) % 1_000_000:06d}Z"


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


# --- building a relay's history in a mirror ------------------------------------------------


@dataclass
class Built:
    client: RelayClient
    threads: int
    messages: int
    operations: int
    seconds: float


class HistoryWriter:
    """Appends operations to a mirror's main, one commit each, in memory."""

    def __init__(self, store: Store, tip: str, tree: str, seq: int, rng: random.Random) -> None:
        self.store, self.tip, self.tree, self.seq, self.rng = store, tip, tree, seq, rng

    def add(self, op: Op, path: str, doc: dict[str, Any]) -> None:
        self.seq += 1
        self.tree = self.store.tree_with(self.tree, path, schema.dumps(doc))
        self.tip = self.store.commit(tree=self.tree, parents=[self.tip],
                                     message=op.message(doc, self.seq), author=op.actor,
                                     email=op.actor, when=START + self.seq)

    def now(self) -> str:
        return _iso(START + self.seq + 1)


def _thread_ops(w: HistoryWriter, sender: str, recipient: str, messages: int,
                ending: str) -> Iterator[None]:
    """The operations of one thread, yielded one at a time so threads interleave."""
    rng = w.rng
    key = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    tid = thread_id_for(sender, key)
    doc: dict[str, Any] = {
        "format_version": 1, "kind": "handoff", "thread_id": tid, "sender": sender,
        "recipient": recipient, "intent": "inform", "summary": _text(rng, 30), "artifacts": [],
        "metadata": {"client_idempotency_key": key}, "idempotency_key": key,
        "created_at": w.now()}
    w.add(Op("handoff", doc, tid), layout.handoff_path(tid), doc)
    yield
    if ending in ("accepted", "completed"):
        doc = {"format_version": 1, "kind": "accept", "thread_id": tid, "by": recipient,
               "accepted_by_session": "bench", "at": w.now()}
        w.add(Op("accept", doc, tid), layout.transition_path(tid, "accept"), doc)
        yield
    for n in range(1, messages + 1):
        author = recipient if n % 2 else sender
        doc = {"format_version": 1, "kind": "message", "thread_id": tid,
               "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "sequence_no": n,
               "from": author, "type": "message", "body": _text(rng, 12),
               "idempotency_key": f"k{rng.getrandbits(64):x}", "created_at": w.now()}
        w.add(Op("message", doc, tid), layout.message_path(tid, n), doc)
        yield
    if ending in ("completed", "cancelled"):
        kind = "complete" if ending == "completed" else "cancel"
        doc = {"format_version": 1, "kind": kind, "thread_id": tid,
               "by": recipient if kind == "complete" else sender, "at": w.now()}
        if kind == "complete":
            doc.update(result_summary="Done.", artifacts=[])
        w.add(Op(kind, doc, tid), layout.transition_path(tid, kind), doc)
        yield


def plan_threads(w: HistoryWriter, threads: int, messages: int) -> list[Iterator[None]]:
    rng = w.rng
    handles = [h for h, _, _ in TEAM]
    per = [messages // threads] * threads
    for n in range(messages - sum(per)):
        per[n % threads] += 1
    out = []
    for n in range(threads):
        if rng.random() < READER_SHARE:
            sender, recipient = rng.sample([READER, rng.choice(handles[1:])], 2)
        else:
            sender, recipient = rng.sample(handles[1:], 2)
        ending = rng.choices(["pending", "accepted", "completed", "cancelled"],
                             [2, 3, 4, 1])[0]
        out.append(_thread_ops(w, sender, recipient, per[n], ending))
    return out


def interleave(threads: list[Iterator[None]], rng: random.Random, open_threads: int = 200
               ) -> int:
    """Run the threads' operations interleaved, as a team's relay looks; returns how many."""
    pending = list(reversed(threads))
    active: list[Iterator[None]] = []
    done = 0
    while pending or active:
        while pending and len(active) < open_threads:
            active.append(pending.pop())
        i = rng.randrange(len(active))
        try:
            next(active[i])
            done += 1
        except StopIteration:
            active[i] = active[-1]
            active.pop()
    return done


def build(work: Path, threads: int, messages: int, *, seed: int = 1) -> Built:
    """A relay's history of this size in a fresh (or cached) mirror; returns READER's client."""
    name = f"inbox-v{BUILDER_VERSION}-t{threads}-m{messages}-s{seed}"
    relay = work / f"{name}.git"
    home = work / f"{name}.home"
    os.environ["GITRELAY_HOME"] = str(home)
    mirror_dir = mirror_path(str(relay))
    done = work / f"{name}.json"
    started = time.perf_counter()
    if not done.exists():
        for path in (relay, home):
            shutil.rmtree(path, ignore_errors=True)
        init_relay(relay, name="bench", hook=False)
        store = Store(mirror_dir, create=True)
        cfg = relay_config("bench")
        cfg["created_at"] = _iso(START)
        tree = store.single_file_tree(layout.CONFIG_PATH, schema.dumps(cfg))
        root = store.commit(tree=tree, parents=[], message=(
            f"init relay bench\n\n{layout.TRAILER_OP}: {layout.OP_INIT}\n"
            f"{layout.TRAILER_ACTOR}: gitrelay\n{layout.TRAILER_SEQ}: 0\n"),
            author="gitrelay", email="gitrelay", when=START)
        w = HistoryWriter(store, root, tree, 0, random.Random(seed))
        for handle, full, role in TEAM:
            doc = profile_doc(handle, full, role)
            doc["registered_at"] = w.now()
            w.add(Op("profile", doc, handle=handle), layout.profile_path(handle, sharded=True),
                  doc)
        operations = interleave(plan_threads(w, threads, messages), w.rng) + len(TEAM)
        for ref in (layout.MAIN_REF, RELAY_MAIN):
            store.set_ref(ref, w.tip)
        # One pack, as a relay that has been through `git gc` holds.
        subprocess.run(["git", "--git-dir", str(mirror_dir), "repack", "-adq"], check=True,
                       env=_git_env())
        subprocess.run(["git", "--git-dir", str(mirror_dir), "prune-packed"], check=True,
                       env=_git_env())
        done.write_text(json.dumps({"operations": operations,
                                    "seconds": time.perf_counter() - started}))
    facts = json.loads(done.read_text())
    client = RelayClient(str(relay), READER, writes="queue", fresh_seconds=1e12)
    client.mirror.update_sync_state(last_fetch=time.time() + 1e9)  # never fetch: no relay
    return Built(client, threads, messages, int(facts["operations"]), float(facts["seconds"]))


def add_commits(client: RelayClient, count: int, *, seed: int = 2) -> None:
    """``count`` new operations on main (new handoffs to and messages for READER)."""
    mirror = client.mirror
    tip = mirror.main()
    assert tip is not None
    commit = mirror.objects.commit(tip)
    w = HistoryWriter(mirror.store, tip, commit.tree,
                      int(commit.trailers[layout.TRAILER_SEQ]), random.Random(seed))
    threads = [_thread_ops(w, "bob@acme", READER, count, "accepted")]
    for _ in range(count):
        next(threads[0])
    mirror.store.set_ref(layout.MAIN_REF, w.tip)
    mirror.store.set_ref(RELAY_MAIN, w.tip)


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return env


# --- measuring -------------------------------------------------------------------------------


def timed(fn: Callable[[], object], reps: int) -> dict[str, float]:
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 3),
            "p95_ms": round(samples[max(0, int(len(samples) * 0.95) - 1)], 3),
            "reps": reps}


def mcp_timer(client: RelayClient, reps: int) -> dict[str, Any] | None:
    """check_inbox through the in-process MCP client, when the server can be built here."""
    try:
        import anyio
        from mcp import Client

        from gitrelay.mcp.agentserver import build_server
        from gitrelay.mcp.inprocess import in_process
        from gitrelay.mcp.state import ServerState
        from gitrelay.trust.trust import TrustStore
    except ImportError as exc:
        return {"skipped": f"the MCP server cannot be built here: {exc}"}
    trust = Path(tempfile.mkdtemp()) / "trust.yaml"

    def opener() -> ServerState:
        return ServerState(client=client, trust=TrustStore(trust, watch=False), loop=None,
                           session_id="bench")

    out: dict[str, Any] = {}

    async def body() -> None:
        async with Client(in_process(build_server(opener))) as mcp:
            for _ in range(5):
                await mcp.call_tool("check_inbox", {})
            samples = []
            for _ in range(reps):
                t = time.perf_counter()
                result = await mcp.call_tool("check_inbox", {})
                samples.append((time.perf_counter() - t) * 1000)
                assert not result.is_error
            samples.sort()
            out.update(median_ms=round(statistics.median(samples), 3),
                       p95_ms=round(samples[max(0, int(len(samples) * 0.95) - 1)], 3),
                       reps=reps)

    try:
        anyio.run(body)
    except Exception as exc:  # the benchmark reports, it does not fail on a peer module
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    return out


def measure(built: Built, reps: int, *, rebuild: bool = True) -> dict[str, Any]:
    """The figures on ``built``; ``rebuild=False`` keeps an index that is already up to
    date instead of timing a rebuild from scratch (a minute on 100,000 messages)."""
    client = built.client
    idx = index_for(client.mirror)
    rebuild_s: float | None = None
    if rebuild:
        (client.mirror.path / INDEX_FILE).unlink(missing_ok=True)
        idx.close()
        t = time.perf_counter()
        report = idx.rebuild()
        rebuild_s = time.perf_counter() - t
        assert report.rebuilt
    else:
        idx.update()
    first = check_inbox(client)
    result: dict[str, Any] = {
        "threads": built.threads, "messages": built.messages, "operations": built.operations,
        "build_seconds": round(built.seconds, 2),
        "reader_items": len(_all_items(client)),
        "first_page_items": len(first.items),
        "rebuild_seconds": round(rebuild_s, 3) if rebuild_s is not None else None,
        "rebuild_msgs_per_s": round(built.messages / rebuild_s) if rebuild_s else None,
        "rebuild_ops_per_s": round(built.operations / rebuild_s) if rebuild_s else None,
        "check_inbox_warm": timed(lambda: check_inbox(client), reps),
        "check_inbox_after_0_warm": timed(lambda: check_inbox(client, after=0), reps),
        "check_inbox_unread_warm": timed(lambda: check_inbox(client, unread_only=True,
                                                             status=["pending", "accepted",
                                                                     "completed",
                                                                     "cancelled"]), reps),
        "check_inbox_mcp_warm": mcp_timer(client, reps),
    }
    add_commits(client, 100)
    t = time.perf_counter()
    caught = idx.update()
    result["catch_up_100_ms"] = round((time.perf_counter() - t) * 1000, 2)
    assert caught.applied == 100 and not caught.rebuilt
    t = time.perf_counter()
    check_inbox(client)
    result["check_inbox_after_100_new_ms"] = round((time.perf_counter() - t) * 1000, 2)
    return result


def _all_items(client: RelayClient) -> list[Any]:
    out: list[Any] = []
    page = check_inbox(client, after=0, limit=200)
    while True:
        out += page.items
        if page.next_cursor is None:
            return out
        page = check_inbox(client, cursor=page.next_cursor, limit=200)


def run(quick: bool = False, *, work: Path | None = None, reps: int | None = None
        ) -> dict[str, Any]:
    """Build (or reuse) both relays and measure; returns the figures as a dict."""
    sizes = [(20, 200), (200, 2_000)] if quick else [(100, 1_000), (10_000, 100_000)]
    reps = reps or (50 if quick else 300)
    own = work is None
    base = Path(work) if work is not None else Path(tempfile.mkdtemp(prefix="gitrelay-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("GITRELAY_HOME")
    results = []
    try:
        for threads, messages in sizes:
            built = build(base, threads, messages)
            # A private copy: the 100 extra commits must not leak into the cached mirror.
            results.append(measure(_private(built, base), reps))
    finally:
        if saved is None:
            os.environ.pop("GITRELAY_HOME", None)
        else:
            os.environ["GITRELAY_HOME"] = saved
        if own:
            shutil.rmtree(base, ignore_errors=True)
    small, large = results
    ratio = (large["check_inbox_warm"]["median_ms"] / small["check_inbox_warm"]["median_ms"]
             if small["check_inbox_warm"]["median_ms"] else None)
    return {"benchmark": "inbox", "quick": quick, "python": sys.version.split()[0],
            "sizes": results, "warm_ratio_large_to_small": round(ratio, 3) if ratio else None}


def _private(built: Built, base: Path) -> Built:
    src = built.client.mirror.path
    dest_home = base / "run.home"
    shutil.rmtree(dest_home, ignore_errors=True)
    os.environ["GITRELAY_HOME"] = str(dest_home)
    relay = built.client.relay_url
    dest = mirror_path(relay)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, symlinks=True,
                    ignore=shutil.ignore_patterns(f"{INDEX_FILE}*", "*.lock"))
    client = RelayClient(relay, READER, writes="queue", fresh_seconds=1e12)
    client.mirror.update_sync_state(last_fetch=time.time() + 1e9)
    return Built(client, built.threads, built.messages, built.operations, built.seconds)


def table(result: dict[str, Any]) -> str:
    rows = [("messages", "threads", "warm median", "warm p95", "MCP median", "MCP p95",
             "catch-up 100", "rebuild msgs/s")]
    for r in result["sizes"]:
        mcp = r["check_inbox_mcp_warm"] or {}
        rows.append((f"{r['messages']:,}", f"{r['threads']:,}",
                     f"{r['check_inbox_warm']['median_ms']:.2f} ms",
                     f"{r['check_inbox_warm']['p95_ms']:.2f} ms",
                     f"{mcp['median_ms']:.2f} ms" if "median_ms" in mcp else "-",
                     f"{mcp['p95_ms']:.2f} ms" if "p95_ms" in mcp else "-",
                     f"{r['catch_up_100_ms']:.1f} ms",
                     "-" if r["rebuild_msgs_per_s"] is None else f"{r['rebuild_msgs_per_s']:,}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"warm median ratio, large/small: {result['warm_ratio_large_to_small']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.inbox_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small relays (200 and 2,000 "
                                                             "messages)")
    parser.add_argument("--work", type=Path, help="where to build (and keep) the relays")
    parser.add_argument("--reps", type=int, help="timed calls per figure")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = run(args.quick, work=args.work, reps=args.reps)
    print(table(result))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
