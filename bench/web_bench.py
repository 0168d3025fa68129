"""The web view's server-side times (``python -m bench --only web``).

Each page is asked of the real application (:func:`gitrelay.web.app.build_app`:
the session check, the routing, the page's library calls and the template) through
its ASGI interface in this process, so the figure is the server's own time
without a browser or a socket. On the large relay (10,000 threads, 100,000
messages in the full run): the inbox's first page and a later one (the user's
inbox is thousands of items, 50 a page), a thread of 200 messages, and the
activity chart computed from the whole history (once, then from the cache).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench.kit import (
    QUICK,
    Figure,
    Log,
    Sizes,
    Workspace,
    client_for,
    ms_figure,
    seed_user,
    trust_file,
)

SEC = "web view (server side)"
READER = "bob@acme"
THREAD_MESSAGES = 200


def _get(app: Any, path: str, cookie: str, port: int) -> tuple[int, bytes]:
    """One GET through the ASGI interface: (status, body)."""
    raw_path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": raw_path, "raw_path": raw_path.encode(),
             "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", f"127.0.0.1:{port}".encode()), (b"cookie", cookie.encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", port)}
    status = 0
    body = bytearray()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return status, bytes(body)


def _timed(app: Any, path: str, cookie: str, port: int, reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        status, _ = _get(app, path, cookie, port)
        samples.append(time.perf_counter() - started)
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}")
    return samples


def _open_thread(client: Any, info: Any) -> str:
    """The longest open thread of the reader's sampled ones, else a new handoff of theirs."""
    best: tuple[int, str] | None = None
    for sample in info.samples.get(READER, []):
        tid = sample[0]
        view = client.thread(str(tid))
        if view.status in ("pending", "accepted"):
            best = max(best or (-1, ""), (len(view.messages), str(tid)))
    if best is not None:
        return best[1]
    sent = client.handoff(to="alice@acme", intent="inform", summary="A long thread for the "
                          "web view's figures", mode="queue")
    return str(sent.thread_id)


def _long_thread(client: Any, tid: str) -> int:
    """Bring thread ``tid`` to 200 messages with queued replies (never pushed)."""
    have = len(client.thread(tid).messages)
    for i in range(have, THREAD_MESSAGES):
        client.send_message(tid, f"Reply {i}: checked the cursor for page {i}; the diff "
                                 "is below.\n- old line\n+ new line\n", mode="queue")
    return len(client.thread(tid).messages)


def bench_web(ws: Workspace, sizes: Sizes, log: Log, shared: dict[str, Any]) -> list[Figure]:
    from gitrelay.cli.wording import next_step_text
    from gitrelay.web.activity import ActivityCache
    from gitrelay.web.app import Site, build_app

    size = sizes.big_relay
    relay, info = ws.relay(size)
    home = ws.fresh("home-web")
    seed_user(relay, size, home, READER, ws)
    client = client_for(relay, home, READER, writes="queue")
    client.sync.fresh_seconds = 1e12
    client.mirror.update_sync_state(last_fetch=time.time() + 1e9)
    tid = _open_thread(client, info)
    messages = _long_thread(client, tid)
    site = Site(client=client, trust_path=trust_file(home, ["alice@acme"]),
                word=next_step_text, port=8700)
    app = build_app(site)
    cookie = f"{site.cookie}={site.new_session()}"
    reps = sizes.read_reps
    label = f"{size[0]:,} threads, {size[1]:,} messages"
    figs: list[Figure] = []
    _get(app, "/inbox", cookie, site.port)        # the index brought up to date once
    first = _timed(app, "/inbox?status=all", cookie, site.port, reps)
    _, body = _get(app, "/inbox?status=all", cookie, site.port)
    rows = body.count(b'<a class="tid"')
    more = body.split(b'id="more" href="', 1)
    note = f"{rows} rows of {READER}'s inbox, every status"
    figs.append(ms_figure(SEC, f"inbox page, first ({label})", first, limit=100.0, note=note))
    if len(more) == 2:
        later = more[1].split(b'"', 1)[0].decode().replace("&amp;", "&")
        figs.append(ms_figure(SEC, f"inbox page, the next one ({label})",
                              _timed(app, later, cookie, site.port, reps), limit=100.0,
                              note="through the cursor of the first"))
    figs.append(ms_figure(SEC, f"thread of {messages} messages ({label})",
                          _timed(app, f"/threads/{tid}", cookie, site.port, reps),
                          limit=100.0, note="summary, artifacts, every message"))
    cold = []
    for _ in range(max(1, reps // 10)):
        site.activity = ActivityCache()
        cold += _timed(app, "/activity", cookie, site.port, 1)
    figs.append(ms_figure(SEC, f"activity chart, computed from the history ({label})", cold,
                          limit=500.0,
                          note=f"of {info.operations:,} operations, the handoffs, accepts, "
                               "completions and cancellations read from the index"))
    figs.append(ms_figure(SEC, f"activity chart, cached ({label})",
                          _timed(app, "/activity", cookie, site.port, reps), limit=100.0,
                          note="the same tip: the figures are kept"))
    log(f"web: {rows} inbox rows, thread {tid} with {messages} messages")
    shared["web"] = {"quick": sizes is QUICK, "thread_messages": messages}
    return figs


def main() -> None:  # pragma: no cover - a convenience for a quick look
    import tempfile

    from bench.kit import QUICK as quick

    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(Path(tmp), print)
        for f in bench_web(ws, quick, print, {}):
            print(f.name, f.median, f.p95)
