"""Search across threads: ``search_threads`` through the MCP client, its pages, the cost
of indexing the words as commits arrive, and the size of the search tables.

Four figures, against the issue's goals:

- ``search_threads`` warm through the SDK's in-process MCP client on the large relay
  (100,000 messages in the full run), as bob@acme's agent, over a mix of queries:
  single common words (each word of the generator's small vocabulary is in about a
  tenth of all texts, far more than in real prose), two words, a phrase, words with
  a status filter, filters only, a path glob. Goal: median ≤ 20 ms.
- pages: the same query's pages 1, 2, 3... through the client on the small relay
  (1,000 messages in the full run); the figure is the least-squares slope of the page
  medians, ms per page. Goal: ≤ 1 ms more per page.
- indexing: bringing the index up to date over the relay's last commits, with and
  without the search tables' part (``searchindex.fold``), against the sync time of
  a fetched commit (verify-on-read plus the rest of the index; the fetch itself is
  left out, which makes the share larger). Goal: ≤ 15 %.
- size: the search tables' pages (SQLite's ``dbstat``) over the JSON bytes of the
  relay's files. Goal: ≤ 50 %.

Run alone: ``python -m bench --only search`` (``--quick`` for the small sizes).
"""

from __future__ import annotations

import itertools
import re
import shutil
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from bench import relaygen
from bench.kit import (
    QUICK,
    Figure,
    Log,
    Sizes,
    Workspace,
    client_for,
    mcp_server,
    ms_figure,
    run_async,
    seed_user,
    trust_file,
)

READER = "bob@acme"
QUERIES = [
    "rollback",
    "cache timeout",
    '"circuit breaker"',
    "retry status:pending",
    "lint* from:alice@acme",
    "from:alice@acme status:accepted",
    "path:src/cache/*",
    "snapshot restore since:2026-02-01",
]
SEARCH_TABLES = ("search_text", "search_docs", "artifact_paths")


async def _search(session: Any, args: dict[str, Any]) -> tuple[float, str]:
    start = time.perf_counter()
    result = await session.call_tool("search_threads", args)
    took = time.perf_counter() - start
    text = result.content[0].text if result.content else ""
    if result.is_error:
        raise RuntimeError(f"search_threads {args} failed: {text}")
    return took, text


def _next_cursor(text: str) -> str | None:
    m = re.search(r"next_cursor=(\S+)", text.splitlines()[0])
    return None if m is None or m.group(1) == "null" else m.group(1)


def _server(ws: Workspace, size: tuple[int, int], label: str) -> Any:
    relay, _ = ws.relay(size)
    home = ws.fresh(f"home-search-{label}")
    seed_user(relay, size, home, READER, ws)
    return mcp_server(client_for(relay, home, READER), trust_file(home, ["alice@acme"]),
                      loop=False)


def measure_queries(ws: Workspace, sizes: Sizes
                    ) -> tuple[dict[str, list[float]], list[float], int]:
    """Seconds of each query through the client, warm, interleaved; the server's part
    of every call; and the relay's messages."""
    from mcp import Client

    from gitrelay.mcp.inprocess import in_process

    server = _server(ws, sizes.big_relay, "big")
    samples: dict[str, list[float]] = {q: [] for q in QUERIES}
    served: list[float] = []

    async def body() -> None:
        async with Client(in_process(server)) as session:
            for i in range(sizes.warmup + sizes.read_reps):
                for query in QUERIES:
                    took, _ = await _search(session, {"query": query})
                    if i >= sizes.warmup:
                        samples[query].append(took)
                        served.append(server.bench_times["search_threads"][-1])

    run_async(body)
    return samples, served, ws.generated[sizes.big_relay].messages


def measure_pages(ws: Workspace, sizes: Sizes, pages: int = 5) -> list[list[float]]:
    """Seconds of pages 1..``pages`` of one query (five threads a page), warm."""
    from mcp import Client

    from gitrelay.mcp.inprocess import in_process

    server = _server(ws, sizes.small_relay, "small")
    query = {"query": "the", "limit": 2 if sizes is QUICK else 5}
    samples: list[list[float]] = []

    async def body() -> None:
        async with Client(in_process(server)) as session:
            cursors: list[str | None] = [None]
            for _ in range(pages - 1):
                _, text = await _search(session, {**query, "cursor": cursors[-1]})
                if _next_cursor(text) is None:
                    break
                cursors.append(_next_cursor(text))
            samples.extend([] for _ in cursors)
            for i in range(sizes.warmup + sizes.read_reps):
                for n, cursor in enumerate(cursors):
                    took, _ = await _search(session, {**query, "cursor": cursor})
                    if i >= sizes.warmup:
                        samples[n].append(took)

    run_async(body)
    return samples


def slope(medians: list[float]) -> float:
    """Least-squares slope of ``medians`` over their positions 1, 2, ..."""
    if len(medians) < 2:
        return 0.0
    xs = list(range(1, len(medians) + 1))
    mx, my = statistics.fmean(xs), statistics.fmean(medians)
    return sum((x - mx) * (y - my) for x, y in zip(xs, medians, strict=True)) / \
        sum((x - mx) ** 2 for x in xs)


def measure_indexing(ws: Workspace, sizes: Sizes, commits: int, reps: int
                     ) -> dict[str, float]:
    """CPU seconds per commit (this process does all of the work: below BULK_COMMITS
    no git runs beside it), so that a busy machine moves the figure less: the index's
    catch-up over the relay's last ``commits`` with and without the search tables'
    part, and verify-on-read of the same commits."""
    from gitrelay.core.rules import check_commit
    from gitrelay.core.signing import verify_commit_signature
    from gitrelay.inbox import searchindex
    from gitrelay.inbox.index import Index

    relay, _ = ws.relay(sizes.big_relay)
    home = ws.fresh("home-search-indexing")
    seed_user(relay, sizes.big_relay, home, READER, ws)
    mirror = client_for(relay, home, READER).mirror
    objs = mirror.objects
    tip = mirror.main()
    chain = [objs.commit(tip)]
    while len(chain) <= commits and chain[-1].parents:
        chain.append(objs.commit(chain[-1].parents[0]))
    chain.reverse()
    base_oid = chain[0].oid
    work = ws.fresh("search-indexing")
    base = work / "base.sqlite3"
    shutil.copy(mirror.path / "gitrelay-index.sqlite3", base)
    mirror.store.set_ref("refs/heads/main", base_oid, "bench: back")
    back = Index(mirror, base)
    back.update()  # rolled back to the base commit (not timed)
    back.close()  # the last connection: its write-ahead log is folded into the file
    mirror.store.set_ref("refs/heads/main", tip, "bench: tip")
    fold = searchindex.fold
    times: dict[str, list[float]] = {"with": [], "without": []}
    for rep, mode in itertools.product(range(reps), ("with", "without")):
        path = work / f"{mode}-{rep}.sqlite3"
        shutil.copy(base, path)
        idx = Index(mirror, path)
        if mode == "without":
            searchindex.fold = lambda *a, **k: None  # type: ignore[assignment]
        try:
            start = time.process_time()
            report = idx.update()
            times[mode].append(time.process_time() - start)
        finally:
            searchindex.fold = fold  # type: ignore[assignment]
            idx.close()
        if report.rebuilt or report.applied != len(chain) - 1:
            raise RuntimeError(f"the catch-up applied {report.applied} commits "
                               f"(rebuilt: {report.rebuilt}), not {len(chain) - 1}")
        path.unlink()
    start = time.process_time()
    for parent, commit in itertools.pairwise(chain):
        check_commit(objs, commit, parent, verify_signature=verify_commit_signature)
    verify = (time.process_time() - start) / (len(chain) - 1)
    per = len(chain) - 1
    return {"with": statistics.median(times["with"]) / per,
            "without": statistics.median(times["without"]) / per, "verify": verify,
            "commits": per}


def measure_size(ws: Workspace, sizes: Sizes) -> dict[str, float]:
    """Bytes of the search tables and of the whole index of the large relay's mirror."""
    from bench.kit import mirror_template

    template = mirror_template(sizes.big_relay, ws)
    copy = ws.fresh("search-size") / "index.sqlite3"
    shutil.copy(template / "gitrelay-index.sqlite3", copy)
    conn = sqlite3.connect(copy)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        tables = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
        search = sum(size for name, size in rows
                     if any(str(tables.get(name, name)).startswith(t) or name.startswith(t)
                            for t in SEARCH_TABLES))
        total = sum(size for _, size in rows)
    except sqlite3.OperationalError:  # no dbstat in this build: drop the tables and compare
        conn.execute("VACUUM")
        total = copy.stat().st_size
        for table in SEARCH_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("VACUUM")
        search = total - copy.stat().st_size
    finally:
        conn.close()
    return {"search": float(search), "total": float(total)}


def bench_search(ws: Workspace, sizes: Sizes, log: Log, shared: dict[str, Any]
                 ) -> list[Figure]:
    figs: list[Figure] = []
    samples, served, messages = measure_queries(ws, sizes)
    info: relaygen.Generated = ws.generated[sizes.big_relay]
    sec = f"search ({messages:,} messages)"
    every = [s for q in QUERIES for s in samples[q]]
    figs.append(ms_figure(sec, "search_threads warm, every query", every, limit=20.0,
                          note=f"{READER}'s agent, the SDK's in-process client; "
                               f"{len(QUERIES)} queries interleaved"))
    figs.append(ms_figure(sec, "search_threads warm, every query, server side only", served,
                          note="the same calls without the client's part"))
    for query in QUERIES:
        figs.append(ms_figure(sec, f"search_threads {query}", samples[query]))
    pages = measure_pages(ws, sizes)
    small = ws.generated[sizes.small_relay].messages
    medians = [statistics.median(p) * 1000 for p in pages]
    figs.append(Figure(f"search ({small:,} messages)", "search_threads: more per result page",
                       "ms", slope(medians), goal="≤ 1 ms", limit=1.0,
                       note="pages " + ", ".join(f"{m:.2f}" for m in medians) + " ms"))
    commits = 300 if sizes is QUICK else 400
    idx = measure_indexing(ws, sizes, commits, 3 if sizes is QUICK else 9)
    added = idx["with"] - idx["without"]
    sync = idx["verify"] + idx["without"]
    figs.append(Figure(sec, "indexing the words: added to the sync time per fetched commit",
                       "%", 100 * added / sync, goal="≤ 15 %", limit=15.0,
                       note=f"CPU time over the last {idx['commits']:.0f} commits: index "
                            f"{idx['without'] * 1e3:.3f} ms/commit without the search "
                            f"tables, {idx['with'] * 1e3:.3f} with; verify-on-read "
                            f"{idx['verify'] * 1e3:.3f} ms/commit (the fetch left out)"))
    size = measure_size(ws, sizes)
    figs.append(Figure(sec, "search tables / JSON bytes", "%",
                       100 * size["search"] / info.json_bytes, goal="≤ 50 %", limit=50.0,
                       note=f"{size['search'] / 1e6:.1f} MB of search tables, whole index "
                            f"{size['total'] / 1e6:.1f} MB, JSON files "
                            f"{info.json_bytes / 1e6:.1f} MB"))
    shared["search"] = {"queries": {q: statistics.median(samples[q]) * 1000 for q in QUERIES},
                        "page_ms": medians, "indexing": idx, "size": size}
    return figs


def main() -> int:
    import json
    import tempfile

    from bench.kit import FULL, hermetic_environment

    quick = "--quick" in __import__("sys").argv
    with tempfile.TemporaryDirectory(prefix="gitrelay-search-bench-") as tmp:
        root = Path(tmp)
        hermetic_environment(root)
        ws = Workspace(root, lambda line: print(line, flush=True))
        figs = bench_search(ws, QUICK if quick else FULL, ws.log, {})
    for f in figs:
        print(json.dumps(f.to_json()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
